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
        tv_sec: (timeout_ns / 1_000_000_000).min(i32::MAX as u64) as libc::time_t,
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
        tv_sec: (timeout_ns / 1_000_000_000).min(i32::MAX as u64) as libc::time_t,
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
