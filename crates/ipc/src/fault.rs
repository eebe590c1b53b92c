//! Deaths at chosen steps, for the unit tests that kill a process at every
//! step of a protocol in turn (`proc.rs`'s `deaths`): `step()` marks a
//! point between two changes of shared state. In test builds a process can
//! ask to be killed (SIGKILL, as the kernel would, nothing run after) at
//! its n-th step; in every other build `step()` is nothing.

/// A step (nothing outside the unit tests).
#[cfg(not(test))]
#[inline(always)]
pub fn step() {}

#[cfg(test)]
pub use armed::{die_at, step, steps};

#[cfg(test)]
mod armed {
    use core::sync::atomic::AtomicU64;
    use core::sync::atomic::Ordering::Relaxed;

    static STEPS: AtomicU64 = AtomicU64::new(0);
    static DIE_AT: AtomicU64 = AtomicU64::new(0);

    /// A step: counted, and the process killed if it is the chosen one.
    pub fn step() {
        let n = STEPS.fetch_add(1, Relaxed) + 1;
        if DIE_AT.load(Relaxed) == n {
            let _ = crate::sys::process::kill(crate::sys::process::getpid(), libc::SIGKILL);
        }
    }

    /// Counts steps from 0 again, the process to be killed at step `n`
    /// (0: never).
    pub fn die_at(n: u64) {
        STEPS.store(0, Relaxed);
        DIE_AT.store(n, Relaxed);
    }

    /// Steps counted since [`die_at`].
    pub fn steps() -> u64 {
        STEPS.load(Relaxed)
    }
}
