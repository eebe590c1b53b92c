//! The calling thread's signal mask, and waiting for a blocked signal, in
//! the kernel's own signal sets: 64 bits, signal N as bit N - 1 (the
//! `sigsetsize` of 8 the kernel checks), not libc's 1024-bit `sigset_t`.
//!
//! # Safety
//! Each call passes sets of ours (8 bytes, borrowed for the call; the old
//! mask written into one we borrow mutably), and a `siginfo_t` of ours
//! that the kernel fills.
#![allow(unsafe_code)]

use super::raw::syscall4;
use crate::errno::Errno;

/// The bit of signal `sig` (1 to 64) in a kernel signal set; 0 for a
/// number outside.
pub const fn bit(sig: i32) -> u64 {
    if sig >= 1 && sig <= 64 {
        1 << (sig - 1)
    } else {
        0
    }
}

/// `rt_sigprocmask(how, set, oldset, 8)`: rt_sigprocmask(2);
/// kernel/signal.c `sigprocmask`. Changes the calling thread's mask by
/// `set` (`how`: SIG_BLOCK, SIG_UNBLOCK, SIG_SETMASK; `None` changes
/// nothing) and writes the mask it had into `old`, if given. SIGKILL and
/// SIGSTOP are never blocked (the kernel drops them).
pub fn sigprocmask(how: i32, set: Option<&u64>, old: Option<&mut u64>) -> Result<(), Errno> {
    let set = set.map_or(0, |s| core::ptr::from_ref(s) as usize);
    let old = old.map_or(0, |o| core::ptr::from_mut(o) as usize);
    // SAFETY: NULL or 8 bytes of ours the kernel reads, NULL or 8 bytes of
    // ours it writes.
    unsafe { syscall4(libc::SYS_rt_sigprocmask, how as usize, set, old, 8) }.map(drop)
}

/// `rt_sigtimedwait(set, info, timeout, 8)`: sigtimedwait(2);
/// kernel/signal.c `do_sigtimedwait`. Takes the next pending signal of
/// `set` (which the caller blocks), waiting for one at most `timeout`
/// (`None`: without a limit): its number, and its `siginfo_t` in `info`.
/// EINTR when a handler ran (or, on Linux, after a stop and continue),
/// EAGAIN when the timeout passed. The kernel's `si_code`, unfolded (C
/// libraries turn SI_TKILL into SI_USER).
pub fn sigtimedwait(
    set: &u64,
    info: &mut libc::siginfo_t,
    timeout: Option<&libc::timespec>,
) -> Result<i32, Errno> {
    let ts = timeout.map_or(0, |t| core::ptr::from_ref(t) as usize);
    // SAFETY: 8 bytes of ours the kernel reads, a siginfo_t of ours it
    // writes, NULL or a timespec of ours it reads.
    unsafe {
        syscall4(
            libc::SYS_rt_sigtimedwait,
            core::ptr::from_ref(set) as usize,
            core::ptr::from_mut(info) as usize,
            ts,
            8,
        )
    }
    .map(|s| s as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_waits() {
        std::thread::spawn(|| {
            let usr1 = bit(libc::SIGUSR1);
            assert_eq!((bit(0), bit(65), bit(1), bit(64)), (0, 0, 1, 1 << 63));
            let mut old = u64::MAX;
            sigprocmask(libc::SIG_BLOCK, Some(&usr1), Some(&mut old)).expect("block");
            assert_eq!(old & usr1, 0);
            let mut now = 0;
            sigprocmask(libc::SIG_BLOCK, None, Some(&mut now)).expect("read");
            assert_eq!(now & usr1, usr1);
            // The signal stays pending for this thread until taken.
            let tid = crate::process::gettid();
            crate::process::tgkill(crate::process::getpid(), tid, libc::SIGUSR1).unwrap();
            // SAFETY: siginfo_t is plain data: all zeroes is a valid value.
            let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
            assert_eq!(sigtimedwait(&usr1, &mut info, None), Ok(libc::SIGUSR1));
            assert_eq!(
                (info.si_signo, info.si_code),
                (libc::SIGUSR1, libc::SI_TKILL)
            );
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            assert_eq!(
                sigtimedwait(&usr1, &mut info, Some(&zero)),
                Err(Errno::EAGAIN)
            );
            sigprocmask(libc::SIG_SETMASK, Some(&old), None).expect("restore");
            assert_eq!(sigprocmask(12345, Some(&usr1), None), Err(Errno::EINVAL));
        })
        .join()
        .unwrap();
    }
}
