//! `ktime_get_real_seconds()`.

/// Seconds since the epoch, as Linux stamps IPC objects: the coarse clock
/// (the timekeeper's last tick), as the kernel reads it.
pub fn now() -> i64 {
    crate::sys::time::real_seconds()
}
