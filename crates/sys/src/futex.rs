//! Shared futexes (`FUTEX_WAIT`, `FUTEX_WAKE` without
//! `FUTEX_PRIVATE_FLAG`: the words live in a `MAP_SHARED` file that other
//! processes map).
//!
//! # Safety
//! Each call passes the address of 4 aligned bytes of an atomic the caller
//! borrows for the duration of the call, and a timespec we own.
#![allow(unsafe_code)]

use super::raw::{syscall3, syscall4};
use crate::errno::Errno;
use core::sync::atomic::{AtomicU32, AtomicU64};

/// An atomic a futex can sleep on: its address for the kernel.
pub trait Word {
    /// The address of the 32 bits the kernel compares.
    fn futex_addr(&self) -> usize;
}

impl Word for AtomicU32 {
    fn futex_addr(&self) -> usize {
        self.as_ptr() as usize
    }
}

/// The low 32 bits of a 64-bit word (the lock's tid field).
impl Word for AtomicU64 {
    fn futex_addr(&self) -> usize {
        let at = self.as_ptr() as usize;
        if cfg!(target_endian = "little") {
            at
        } else {
            at + 4
        }
    }
}

/// `futex(word, FUTEX_WAIT, expected, &timeout)`: sleeps while `word`
/// holds `expected`, at most `timeout_ns`. `Ok` on a wake-up; EAGAIN when
/// the word held another value, ETIMEDOUT, EINTR.
pub fn wait(word: &impl Word, expected: u32, timeout_ns: u64) -> Result<(), Errno> {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000).min(i32::MAX as u64) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a live atomic we borrow, and a relative timespec of ours.
    unsafe {
        syscall4(
            libc::SYS_futex,
            word.futex_addr(),
            libc::FUTEX_WAIT as usize,
            expected as usize,
            &ts as *const libc::timespec as usize,
        )
    }
    .map(drop)
}

/// `futex_waitv(2)`'s `struct futex_waitv`.
#[repr(C)]
struct WaitV {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// FUTEX2_SIZE_U32 (shared: no FUTEX2_PRIVATE).
const FUTEX2_SIZE_U32: u32 = 0x02;
/// The words `futex_waitv` takes at most (FUTEX_WAITV_MAX).
pub const WAITV_MAX: usize = 128;

/// `futex_waitv(words, n, 0, &deadline, CLOCK_MONOTONIC)`: sleeps while
/// each shared word holds its expected value, until one is woken or
/// `timeout_ns` passes: the index of the word woken. EAGAIN when a word
/// held another value, ETIMEDOUT, EINTR, ENOSYS before Linux 5.16, EINVAL
/// for more than [`WAITV_MAX`] words.
pub fn wait_any(words: &[(&AtomicU32, u32)], timeout_ns: u64) -> Result<usize, Errno> {
    if words.is_empty() || words.len() > WAITV_MAX {
        return Err(Errno(libc::EINVAL));
    }
    let mut v = [const {
        WaitV {
            val: 0,
            uaddr: 0,
            flags: 0,
            reserved: 0,
        }
    }; WAITV_MAX];
    for (slot, (w, expected)) in v.iter_mut().zip(words) {
        *slot = WaitV {
            val: u64::from(*expected),
            uaddr: w.futex_addr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        };
    }
    let end = crate::time::monotonic_ns().saturating_add(timeout_ns);
    let ts = libc::timespec {
        tv_sec: (end / 1_000_000_000).min(i64::MAX as u64) as _,
        tv_nsec: (end % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: live atomics we borrow (their addresses in `v`), an array
    // and an absolute timespec of ours.
    unsafe {
        super::raw::syscall5(
            libc::SYS_futex_waitv,
            v.as_ptr() as usize,
            words.len(),
            0,
            &ts as *const libc::timespec as usize,
            libc::CLOCK_MONOTONIC as usize,
        )
    }
}

/// `futex(word, FUTEX_WAKE, n)`: the sleepers woken.
pub fn wake(word: &impl Word, n: i32) -> usize {
    // SAFETY: a live atomic we borrow; no other pointer.
    unsafe {
        syscall3(
            libc::SYS_futex,
            word.futex_addr(),
            libc::FUTEX_WAKE as usize,
            n as usize,
        )
    }
    .unwrap_or(0)
}

/// `futex(word, FUTEX_WAIT_PRIVATE, expected, &timeout)`: as [`wait`],
/// for a word in this process's own memory.
pub fn wait_private(word: &AtomicU32, expected: u32, timeout_ns: u64) -> Result<(), Errno> {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000).min(i32::MAX as u64) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a live atomic we borrow, and a relative timespec of ours.
    unsafe {
        syscall4(
            libc::SYS_futex,
            word.futex_addr(),
            (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as usize,
            expected as usize,
            &ts as *const libc::timespec as usize,
        )
    }
    .map(drop)
}

/// `futex(word, FUTEX_WAKE_PRIVATE, n)`.
pub fn wake_private(word: &AtomicU32, n: i32) -> usize {
    // SAFETY: a live atomic we borrow; no other pointer.
    unsafe {
        syscall3(
            libc::SYS_futex,
            word.futex_addr(),
            (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as usize,
            n as usize,
        )
    }
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_and_wake() {
        let w = AtomicU32::new(1);
        assert_eq!(wait(&w, 2, 1_000_000), Err(Errno::EAGAIN));
        assert_eq!(wait(&w, 1, 1_000_000), Err(Errno(libc::ETIMEDOUT)));
        assert_eq!(wake(&w, 1), 0);
        std::thread::scope(|s| {
            let h = s.spawn(|| wait(&w, 1, 10_000_000_000));
            while !h.is_finished() {
                wake(&w, i32::MAX);
                std::thread::yield_now();
            }
            assert_eq!(h.join().unwrap(), Ok(()));
        });
    }
}
