//! What the benchmarks need below safe Rust: `fstat(2)`, as seed 003's
//! kernel measurement did (std's `File::metadata` uses `statx`), and loop
//! alignment.
//!
//! # Safety
//! `fstat` writes one `struct stat` through a pointer to a local of that
//! type, on a descriptor borrowed for the duration of the call. The
//! alignment is padding in the instruction stream only.
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

/// Pads the code up to the next 64-byte boundary, so that the loop that
/// follows starts on one. On the Zen 4 these benchmarks were tuned on, a
/// small loop inside one 64-byte block ran at one iteration per cycle and at
/// one per two cycles across two, so without this a ratio between two rows
/// depended on where the linker happened to put each loop. Every row of a
/// table gets the same treatment.
#[inline(always)]
pub fn align_next_loop() {
    // SAFETY: emits only padding (multi-byte nops) in the instruction stream;
    // reads and writes no memory, no register, no flag.
    unsafe { core::arch::asm!(".p2align 6", options(nomem, nostack, preserves_flags)) };
}
