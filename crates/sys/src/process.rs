//! Process and thread ids, signals for liveness, randomness, yielding;
//! children (reaping, the subreaper role, pidfds) and process groups.
//!
//! # Safety
//! These calls take numbers only, except `getrandom`, which is given a
//! buffer we own with its true length, `wait4`, a status word of ours,
//! `tid_address`, a word of ours, and `voluntary_switches`, a `rusage`
//! of ours.
#![allow(unsafe_code)]

use super::fd::Fd;
use super::raw::{syscall0, syscall1, syscall2, syscall3, syscall4, syscall5};
use crate::errno::Errno;

/// `getpid()`: the thread group id.
pub fn getpid() -> i32 {
    // SAFETY: no argument; cannot fail.
    unsafe { syscall0(libc::SYS_getpid) }.map_or(0, |p| p as i32)
}

/// `gettid()`: the calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: no argument; cannot fail.
    unsafe { syscall0(libc::SYS_gettid) }.map_or(0, |p| p as i32)
}

/// `getppid()`.
pub fn getppid() -> i32 {
    // SAFETY: no argument; cannot fail.
    unsafe { syscall0(libc::SYS_getppid) }.map_or(0, |p| p as i32)
}

/// `kill(pid, sig)`.
pub fn kill(pid: i32, sig: i32) -> Result<(), Errno> {
    // SAFETY: numbers only.
    unsafe { syscall2(libc::SYS_kill, pid as usize, sig as usize) }.map(drop)
}

/// Whether thread `tid` of the calling process exists (`tgkill` with
/// signal 0 answers other than ESRCH; a thread that has ended but not yet
/// been released may still answer).
pub fn thread_alive(tid: i32) -> bool {
    tid > 0 && tgkill(getpid(), tid, 0) != Err(Errno(libc::ESRCH))
}

/// `tgkill(tgid, tid, sig)`.
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> Result<(), Errno> {
    // SAFETY: numbers only.
    unsafe { syscall3(libc::SYS_tgkill, tgid as usize, tid as usize, sig as usize) }.map(drop)
}

/// `getpgid(pid)`: the process group of process `pid` (0: the caller's,
/// which is `getpgrp()`).
pub fn getpgid(pid: i32) -> Result<i32, Errno> {
    // SAFETY: a number only.
    unsafe { syscall1(libc::SYS_getpgid, pid as usize) }.map(|g| g as i32)
}

/// `wait4(pid, &status, options, NULL)` (`waitpid`): wait(2). The child
/// that changed state and its wait status; `(0, 0)` with WNOHANG when
/// children remain and none has.
pub fn wait4(pid: i32, options: i32) -> Result<(i32, i32), Errno> {
    let mut status: i32 = 0;
    // SAFETY: the kernel writes one int into `status`; no rusage.
    let r = unsafe {
        syscall4(
            libc::SYS_wait4,
            pid as usize,
            core::ptr::from_mut(&mut status) as usize,
            options as usize,
            0,
        )
    }?;
    Ok((r as i32, status))
}

/// `prctl(PR_SET_CHILD_SUBREAPER, on)`: prctl(2). Orphaned descendants
/// are reparented to this process instead of init while `on`.
pub fn set_child_subreaper(on: bool) -> Result<(), Errno> {
    // SAFETY: numbers only.
    unsafe {
        syscall5(
            libc::SYS_prctl,
            libc::PR_SET_CHILD_SUBREAPER as usize,
            usize::from(on),
            0,
            0,
            0,
        )
    }
    .map(drop)
}

/// `pidfd_open(pid, flags)`: pidfd_open(2) (Linux 5.3). A descriptor
/// (close-on-exec) that names process `pid` and becomes readable when it
/// ends.
pub fn pidfd_open(pid: i32, flags: u32) -> Result<Fd, Errno> {
    // SAFETY: numbers only.
    unsafe { syscall2(libc::SYS_pidfd_open, pid as usize, flags as usize) }.map(Fd::own)
}

/// `getrandom(buf, len, flags)`: the bytes written.
pub fn getrandom(buf: &mut [u8], flags: u32) -> Result<usize, Errno> {
    // SAFETY: the kernel writes at most buf.len() bytes into our buffer.
    unsafe {
        syscall3(
            libc::SYS_getrandom,
            buf.as_mut_ptr() as usize,
            buf.len(),
            flags as usize,
        )
    }
}

/// `membarrier(2)` commands.
pub const MEMBARRIER_CMD_PRIVATE_EXPEDITED: i32 = 1 << 3;
pub const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: i32 = 1 << 4;

/// `membarrier(cmd, 0, 0)`.
pub fn membarrier(cmd: i32) -> Result<(), Errno> {
    // SAFETY: numbers only.
    unsafe { syscall3(libc::SYS_membarrier, cmd as usize, 0, 0) }.map(drop)
}

/// `sched_yield()`.
pub fn sched_yield() {
    // SAFETY: no argument; cannot fail.
    let _ = unsafe { syscall0(libc::SYS_sched_yield) };
}

/// How many times the calling thread gave up its cpu because it blocked
/// (`getrusage(RUSAGE_THREAD)`'s `ru_nvcsw`): each sleep in a system call
/// that switched to another task, and each stop of the process (a stop
/// is a sleep of its own). None if the kernel refuses.
pub fn voluntary_switches() -> Option<i64> {
    let mut r = core::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: the kernel writes one `rusage` at the address, which is
    // ours and that large.
    let rc = unsafe {
        syscall2(
            libc::SYS_getrusage,
            libc::RUSAGE_THREAD as usize,
            r.as_mut_ptr() as usize,
        )
    };
    // SAFETY: zeroed, then written by the kernel on success: every field
    // is an integer.
    rc.ok().map(|_| unsafe { r.assume_init() }.ru_nvcsw)
}

/// `prctl(PR_GET_TID_ADDRESS)`: the address the kernel clears at this
/// thread's exit (`clear_child_tid`; glibc points it at the thread's own
/// `tid` word). ENOSYS/EINVAL on kernels without it.
pub fn tid_address() -> Result<usize, Errno> {
    let mut addr: usize = 0;
    // SAFETY: the kernel writes one pointer-sized word into `addr`.
    unsafe {
        syscall2(
            libc::SYS_prctl,
            40, // PR_GET_TID_ADDRESS
            &mut addr as *mut usize as usize,
        )
    }?;
    Ok(addr)
}

/// The calling thread's thread pointer: the address of its control block,
/// which no two live threads share (x86-64: the self pointer glibc keeps
/// at `%fs:0`; aarch64: `tpidr_el0`).
#[inline(always)]
pub fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads the TCB's self pointer at offset 0 of the thread's TLS
    // block, which every thread running C library code has (x86-64 TLS
    // ABI, variant II).
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
            options(nostack, readonly, preserves_flags, pure));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp,
            options(nomem, nostack, preserves_flags, pure));
    }
    tp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_signals() {
        // SAFETY: these take nothing and cannot fail.
        let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
        assert_eq!((getpid(), getppid()), (pid, ppid));
        let tid = gettid();
        assert!(tid > 0);
        assert_eq!(tgkill(pid, tid, 0), Ok(()));
        assert_eq!(kill(pid, 0), Ok(()));
        // A thread id that is not one of ours.
        let other = std::thread::spawn(gettid).join().unwrap();
        assert_ne!(other, tid);
        assert_eq!(tgkill(pid, -1, 0), Err(Errno::EINVAL));
        let mut b = [0u8; 16];
        assert_eq!(getrandom(&mut b, libc::GRND_NONBLOCK), Ok(16));
        sched_yield();
        // SAFETY: takes nothing and cannot fail.
        assert_eq!(getpgid(0), Ok(unsafe { libc::getpgrp() }));
        assert_eq!(getpgid(-1), Err(Errno::ESRCH));
    }

    #[test]
    fn children() {
        assert_eq!(set_child_subreaper(false), Ok(()));
        // Reaped below by wait4, not by std.
        #[allow(clippy::zombie_processes)]
        let pid = std::process::Command::new("true")
            .spawn()
            .expect("true")
            .id() as i32;
        let fd = pidfd_open(pid, 0).expect("pidfd_open");
        // SAFETY: F_GETFD on our own descriptor reads its flags.
        let fl = unsafe { libc::fcntl(fd.raw(), libc::F_GETFD) };
        assert_eq!(fl & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        assert_eq!(wait4(pid, 0), Ok((pid, 0)));
        assert_eq!(wait4(pid, libc::WNOHANG), Err(Errno(libc::ECHILD)));
    }
}
