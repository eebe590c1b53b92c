//! Clocks: ipcns's two ([`monotonic_ns`] for deadlines and sleepers'
//! heartbeats, [`real_seconds`] for the stamps of IPC objects), and a
//! sleep.
//!
//! `clock_gettime` (and, on x86_64, `time`) are the libc functions the core
//! keeps: glibc answers them from the vDSO (a few loads, no system call), and every semop,
//! msgsnd and msgrcv stamps a time, so it is on the hot path; the raw
//! system call costs a kernel entry each time (`cargo run --release -p
//! ipcns-sys --example syscall_cost` prints both). No preload intercepts it
//! in practice (fakeroot does not), and it touches no file or credential.
//! [`clock_ns_raw`] is the system call, for that comparison.
//!
//! # Safety
//! `clock_gettime` writes one timespec into a local; `time` is given no
//! pointer; `nanosleep` reads one of ours.
#![allow(unsafe_code)]

use super::raw::syscall2;

/// Nanoseconds of `clock` from a timespec (0 for a negative time).
fn ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec.max(0) as u64)
}

/// `clock_gettime(clock)` in nanoseconds through libc (the vDSO); 0 if
/// the clock is unreadable.
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a local.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ns(&ts)
}

/// `ktime_get_real_seconds()`: the coarse wall clock, in seconds (what
/// Linux stamps IPC objects with: the timekeeper's last tick, no read of
/// the hardware clock). On x86_64 glibc's `time` is the vDSO's, which reads
/// just that second (`CLOCK_REALTIME_COARSE`'s `tv_sec`) and nothing else:
/// 2.8 ns here against 5.1 for `clock_gettime`, before the conversion to
/// and from nanoseconds (every semop stamps a time: a clock read was an
/// eighth of a no-op semop). musl's `time` reads `CLOCK_REALTIME`, the
/// hardware clock (a semop of a musl program spent a third of its time
/// there): `CLOCK_REALTIME_COARSE` then, as elsewhere.
#[inline]
// (`time_t` is 64 bits on the targets built today: the conversion is for
// others.)
#[allow(clippy::useless_conversion)]
pub fn real_seconds() -> i64 {
    #[cfg(all(target_arch = "x86_64", not(target_env = "musl")))]
    {
        // SAFETY: time(NULL) writes nothing.
        unsafe { libc::time(core::ptr::null_mut()) }
    }
    #[cfg(not(all(target_arch = "x86_64", not(target_env = "musl"))))]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes one timespec into a local.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
            return 0;
        }
        i64::from(ts.tv_sec)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the same in every process (deadlines,
/// sleepers' heartbeats).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `nanosleep` for `ns` nanoseconds (an interrupted sleep ends early).
pub fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: reads one timespec of ours; no remainder asked for.
    let _ = unsafe {
        syscall2(
            libc::SYS_nanosleep,
            &ts as *const libc::timespec as usize,
            0,
        )
    };
}

/// [`clock_ns`] through the system call itself.
pub fn clock_ns_raw(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a local.
    match unsafe {
        syscall2(
            libc::SYS_clock_gettime,
            clock as usize,
            &mut ts as *mut libc::timespec as usize,
        )
    } {
        Ok(_) => ns(&ts),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_clocks_agree() {
        for c in [libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME_COARSE] {
            let a = clock_ns(c);
            let b = clock_ns_raw(c);
            let a2 = clock_ns(c);
            // The coarse clock ticks every few ms: allow a tick.
            assert!(a <= b + 20_000_000 && b <= a2 + 20_000_000, "{a} {b} {a2}");
            assert!(a > 0);
        }
    }

    #[test]
    fn the_two_clocks() {
        let (a, b) = (monotonic_ns(), monotonic_ns());
        assert!(0 < a && a <= b);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        // The coarse clock lags by at most a tick.
        assert!((now - real_seconds()).abs() <= 1, "{now}");
    }
}
