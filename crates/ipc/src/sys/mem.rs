//! `mmap` and `munmap` of files.
//!
//! # Safety
//! Mapping at a kernel-chosen address affects no existing memory; at a
//! fixed address, and unmapping, it may: those are the caller's to vouch
//! for, hence `unsafe fn`.

use super::fd::Fd;
use crate::errno::Errno;

/// `mmap(addr, len, prot, flags, fd, 0)`: the address mapped.
///
/// # Safety
/// With `MAP_FIXED`, whatever was mapped at `[addr, addr + len)` is
/// replaced: the caller must own that range and hold no reference into it.
pub unsafe fn mmap(addr: usize, len: usize, prot: i32, flags: i32, fd: &Fd) -> Result<usize, Errno> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // SAFETY: the caller vouches for a fixed address (see above); the
        // descriptor is open (borrowed) and the offset 0 page-aligned.
        unsafe {
            super::raw::syscall6(
                libc::SYS_mmap,
                addr,
                len,
                prot as usize,
                flags as usize,
                fd.raw() as usize,
                0,
            )
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Elsewhere the system call differs (mmap2, or arguments in memory
        // on s390x): libc's mmap knows which.
        // SAFETY: as above.
        let p = unsafe { libc::mmap(addr as *mut libc::c_void, len, prot, flags, fd.raw(), 0) };
        if p == libc::MAP_FAILED {
            Err(Errno::last())
        } else {
            Ok(p as usize)
        }
    }
}

/// `munmap(addr, len)`.
///
/// # Safety
/// The caller owns `[addr, addr + len)` and no reference into it outlives
/// the call.
pub unsafe fn munmap(addr: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: as the caller vouches.
    unsafe { super::raw::syscall2(libc::SYS_munmap, addr, len) }.map(drop)
}
