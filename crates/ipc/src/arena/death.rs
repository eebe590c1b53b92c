//! This process's second mapping of its record's death page, per session
//! (`process/death.rs` says what it is for): where it is, which page it
//! maps, the fork generation that made it, the thread that linked the
//! entry and the entry. Kept with the session, and given back when the
//! session ends.
//!
//! # Safety
//! As `process/death.rs`: the two pages are never unmapped while the entry
//! may be linked; only the thread that linked it unlinks it.
#![allow(unsafe_code)]

use crate::lock;
use crate::sys::robust;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

const PAGE: usize = 4096;

/// This process's mapping of its death page (per session): where it is,
/// which page it maps, the fork generation that made it, and the thread
/// that linked the entry.
#[derive(Default)]
pub(crate) struct Armed {
    pub(crate) map: AtomicUsize,
    pub(crate) page: AtomicU64,
    pub(crate) generation: AtomicU64,
    pub(crate) tid: AtomicU32,
    pub(crate) entry: AtomicUsize,
}

impl Drop for Armed {
    /// The session ends (its namespace dropped, the arena perhaps unmapped
    /// and removed): its two pages go, but the private one only if no list
    /// can hold the entry any more. An entry linked on another thread stays
    /// (its page too); the second mapping of the arena page under it is
    /// replaced by a page of zeros, so that it keeps no arena file alive and
    /// the kernel marks nothing of the arena's when that thread ends.
    fn drop(&mut self) {
        let map = *self.map.get_mut();
        if map == 0 {
            return;
        }
        let entry = *self.entry.get_mut();
        let ours = *self.generation.get_mut() == lock::fork_generation();
        let here = *self.tid.get_mut() == crate::sys::process::gettid() as u32;
        if ours && entry != 0 && here {
            // SAFETY: linked by `arm` on this very thread of this process.
            unsafe { robust::unlink(entry) };
        } else if ours && entry != 0 {
            // SAFETY: `[map, map + 4096)` is this session's second mapping
            // of an arena page; a private page of zeros replaces it (the
            // entry's page after it stays).
            let _ = unsafe {
                crate::sys::mem::mmap_at(
                    map,
                    PAGE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            return;
        }
        // SAFETY: this session's two pages, which no list holds an entry
        // in any more (unlinked above, never linked, or a parent's that a
        // fork copied).
        let _ = unsafe { crate::sys::mem::munmap(map, 2 * PAGE) };
    }
}
