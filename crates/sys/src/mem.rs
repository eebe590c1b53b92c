//! `mmap` and `munmap` of files.
//!
//! # Safety
//! Mapping at a kernel-chosen address affects no existing memory; at a
//! fixed address, and unmapping, it may: those are the caller's to vouch
//! for, hence `unsafe fn`.
#![allow(unsafe_code)]

use super::fd::Fd;
use crate::errno::Errno;

/// `mmap(addr, len, prot, flags, fd, 0)`: the address mapped.
///
/// # Safety
/// With `MAP_FIXED`, whatever was mapped at `[addr, addr + len)` is
/// replaced: the caller must own that range and hold no reference into it.
pub unsafe fn mmap(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: &Fd,
) -> Result<usize, Errno> {
    // SAFETY: as the caller vouches.
    unsafe { mmap_at(addr, len, prot, flags, fd.raw(), 0) }
}

/// `mmap(addr, len, prot, flags, fd, off)` on descriptor number `fd`
/// (which the caller keeps open for the call; -1 with MAP_ANONYMOUS): the
/// address mapped. `off` must be page aligned.
///
/// # Safety
/// As [`mmap`].
pub unsafe fn mmap_at(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: u64,
) -> Result<usize, Errno> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // SAFETY: the caller vouches for a fixed address (see above); the
        // descriptor is open for the call and the offset page-aligned.
        unsafe {
            super::raw::syscall6(
                libc::SYS_mmap,
                addr,
                len,
                prot as usize,
                flags as usize,
                fd as usize,
                off as usize,
            )
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Elsewhere the system call differs (mmap2, or arguments in memory
        // on s390x): libc's mmap knows which.
        let off = libc::off_t::try_from(off).map_err(|_| Errno::EINVAL)?;
        // SAFETY: as above.
        let p = unsafe { libc::mmap(addr as *mut libc::c_void, len, prot, flags, fd, off) };
        if p == libc::MAP_FAILED {
            Err(Errno::last())
        } else {
            Ok(p as usize)
        }
    }
}

/// `mremap(addr, old, new, 0)` with `new > old`: grows the mapping at
/// `[addr, addr + old)` in place (no MREMAP_MAYMOVE: it never moves, so
/// every reference into it stays valid), if the `new - old` bytes after it
/// are free address space and the limits (RLIMIT_AS) allow; ENOMEM
/// otherwise, and also when the mapping does not end at `addr + old`.
///
/// # Safety
/// `[addr, addr + old)` is a mapping the caller owns, which may grow.
pub unsafe fn mremap_grow(addr: usize, old: usize, new: usize) -> Result<(), Errno> {
    if new <= old {
        // A smaller length would unmap the tail: never asked for here.
        return Err(Errno::EINVAL);
    }
    // SAFETY: as the caller vouches; without MREMAP_MAYMOVE nothing moves
    // and nothing of anyone else's is replaced (the kernel checks that
    // the range grown into is free).
    unsafe { super::raw::syscall4(libc::SYS_mremap, addr, old, new, 0) }.map(drop)
}

/// `mremap(old, 0, len, MREMAP_MAYMOVE | MREMAP_FIXED, at)`: a second
/// mapping of the same pages as the shared mapping at `old` (a length of
/// 0 duplicates instead of moving), exactly at `at`.
///
/// # Safety
/// `[at, at + len)` is the caller's to replace (as [`mmap`] with
/// `MAP_FIXED`); `[old, old + len)` is a shared mapping.
pub unsafe fn mremap_duplicate(old: usize, len: usize, at: usize) -> Result<usize, Errno> {
    // SAFETY: as the caller vouches.
    unsafe {
        super::raw::syscall5(
            libc::SYS_mremap,
            old,
            0,
            len,
            (libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED) as usize,
            at,
        )
    }
}

/// Where the kernel would put a mapping of `len` bytes now (a private
/// `PROT_NONE` anonymous mapping, made and unmapped at once; nothing is
/// reserved): ENOMEM when it has no room, or the limits (RLIMIT_AS) do not
/// allow that much.
pub fn probe_free(len: usize) -> Result<usize, Errno> {
    // SAFETY: a new mapping where the kernel chooses (no MAP_FIXED: nothing
    // of ours is replaced), never touched.
    let p = unsafe {
        mmap_at(
            0,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    }?;
    // SAFETY: unmaps exactly the mapping just made.
    let _ = unsafe { munmap(p, len) };
    Ok(p)
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

/// `madvise(addr, len, advice)` for the advice that change no mapping:
/// MADV_POPULATE_WRITE (fault the pages in for writing, EFAULT where a
/// write would raise SIGBUS) and MADV_REMOVE (free the pages and their
/// backing store: a hole punched through the mapping).
///
/// # Safety
/// `[addr, addr + len)` is a shared mapping the caller owns; with
/// MADV_REMOVE its contents read as zeros afterwards, which the caller
/// must be entitled to.
pub unsafe fn madvise(addr: usize, len: usize, advice: i32) -> Result<(), Errno> {
    debug_assert!(advice == libc::MADV_POPULATE_WRITE || advice == libc::MADV_REMOVE);
    // SAFETY: as the caller vouches.
    unsafe { super::raw::syscall3(libc::SYS_madvise, addr, len, advice as usize) }.map(drop)
}
