//! The one system call the benchmarks make directly: `fstat(2)`, as seed
//! 003's kernel measurement did (std's `File::metadata` uses `statx`).
//!
//! # Safety
//! `fstat` writes one `struct stat` through a pointer to a local of that
//! type, on a descriptor borrowed for the duration of the call.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// `fstat(fd)`; returns `st_uid` (so the call cannot be optimised away).
#[inline(never)]
pub fn fstat_uid(fd: BorrowedFd<'_>) -> std::io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid, writable `struct stat`; `fd` is open.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat returned 0, so it filled `st`.
    Ok(unsafe { st.assume_init() }.st_uid)
}
