//! A process's descriptor on its namespace's segment pool (the file is
//! made and opened by `file.rs`, used by `shm/pool.rs`): kept open once
//! per session, in one word, so that threads and a fork child share it
//! without a lock, and checked before use, because a program may close
//! descriptors it did not open, or put its own file under the number.

use super::POOL_SIZE;
use crate::sys::Fd;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use core::sync::atomic::{AtomicBool, AtomicU64};

/// What the pool's size table entries begin with, beside the pool's inode
/// (`shm/pool.rs`).
const MAGIC: u64 = 0x6c70_2e73_6e63_7069; // "ipcns.pl"

/// This process's descriptor on its namespace's pool (one per session).
pub(crate) struct Cache {
    /// 0: none; else the number + 1 (low half), the inode's low 31 bits
    /// (bits 32-62), and whether it is open for writing (bit 63).
    pub(crate) word: AtomicU64,
    /// The pool cannot be had here for writing (the file system cannot
    /// hold it): shmget gives segments files of their own without trying.
    pub(crate) unusable: AtomicBool,
}

/// A decoded [`Cache`] word.
#[derive(Clone, Copy)]
pub(crate) struct Handle {
    pub(crate) fd: i32,
    /// What the pool's size table entries begin with (`shm/pool.rs`).
    pub(crate) tag: u64,
    pub(crate) writable: bool,
}

impl Handle {
    pub(crate) fn decode(w: u64) -> Option<Handle> {
        let fd = (w & 0xffff_ffff) as i64 - 1;
        (fd >= 0).then_some(Handle {
            fd: fd as i32,
            tag: MAGIC ^ ((w >> 32) & 0x7fff_ffff),
            writable: w >> 63 == 1,
        })
    }

    pub(crate) fn encode(fd: i32, ino: u64, writable: bool) -> u64 {
        (fd as u64 + 1) | (ino & 0x7fff_ffff) << 32 | u64::from(writable) << 63
    }

    /// The pool's inode, low 31 bits (what the tag was made of).
    pub(crate) fn ino31(&self) -> u64 {
        (self.tag ^ MAGIC) & 0x7fff_ffff
    }

    /// Whether the number is still the pool (an `fstat`).
    pub(crate) fn holds_pool(&self) -> bool {
        Fd::with_raw(self.fd, |f| f.stat()).is_ok_and(|m| {
            m.is_file() && MAGIC ^ (m.ino & 0x7fff_ffff) == self.tag && m.size == POOL_SIZE
        })
    }
}

impl Cache {
    pub(crate) const fn new() -> Cache {
        Cache {
            word: AtomicU64::new(0),
            unusable: AtomicBool::new(false),
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // The session ends (a namespace dropped): its descriptor goes,
        // if the number is still the pool's.
        if let Some(h) = Handle::decode(*self.word.get_mut())
            && h.holds_pool()
        {
            #[allow(unsafe_code)]
            // SAFETY: this cache opened the number and gave it to nobody;
            // it was just seen to be the pool still (not a number the
            // program reused), and the cache is going: nothing uses it
            // after this.
            drop(unsafe { Fd::from_raw(h.fd) });
        }
    }
}

/// Forgets `h` if it is still the cached descriptor (its number is no
/// longer the pool's; left to the program).
pub(crate) fn forget(cache: &Cache, h: Handle) {
    let w = cache.word.load(Acquire);
    if Handle::decode(w).is_some_and(|now| now.fd == h.fd && now.tag == h.tag) {
        let _ = cache.word.compare_exchange(w, 0, AcqRel, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip() {
        let w = Handle::encode(7, 0x1234_f678_9abc, true);
        let h = Handle::decode(w).expect("a handle");
        assert_eq!((h.fd, h.tag, h.writable), (7, MAGIC ^ 0x7678_9abc, true));
        let h = Handle::decode(Handle::encode(0, 5, false)).expect("descriptor 0");
        assert_eq!((h.fd, h.tag, h.writable), (0, MAGIC ^ 5, false));
        assert!(Handle::decode(0).is_none());
    }
}
