//! Process and thread ids, signals for liveness, randomness, yielding.
//!
//! # Safety
//! These calls take numbers only, except `getrandom`, which is given a
//! buffer we own with its true length.
#![allow(unsafe_code)]

use super::raw::{syscall0, syscall2, syscall3};
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

/// `tgkill(tgid, tid, sig)`.
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> Result<(), Errno> {
    // SAFETY: numbers only.
    unsafe { syscall3(libc::SYS_tgkill, tgid as usize, tid as usize, sig as usize) }.map(drop)
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
    }
}
