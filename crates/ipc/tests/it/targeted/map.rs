//! The hostile participant's view of an arena: the file mapped
//! `MAP_SHARED` by the test process itself, read and written a word at a
//! time, without the library (which must never run on an arena this
//! process corrupted: a bug it meets would crash the harness instead of a
//! victim).
//!
//! # Safety
//! `ArenaMap::open` maps the whole file (its size when opened) and keeps
//! the mapping until drop; every word handed out is 8-aligned and inside
//! it. Nobody truncates the arena files of these tests. The words are
//! atomics: any bits are valid and other processes write them too.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

pub struct ArenaMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is shared memory reached only through atomics (the
// words `word` lends), from any thread.
unsafe impl Send for ArenaMap {}
// SAFETY: as above.
unsafe impl Sync for ArenaMap {}

impl ArenaMap {
    pub fn open(path: &Path) -> std::io::Result<ArenaMap> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        let len = f.metadata()?.len() as usize;
        // SAFETY: a new shared mapping of the file at an address the
        // kernel picks; the descriptor may be closed afterwards.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ArenaMap { ptr: p.cast(), len })
    }

    /// The word at `off` (8-aligned, inside the file), if any.
    pub fn word(&self, off: u64) -> Option<&AtomicU64> {
        let off = usize::try_from(off).ok()?;
        if !off.is_multiple_of(8) || off.checked_add(8)? > self.len {
            return None;
        }
        // SAFETY: 8-aligned (the mapping is page-aligned), inside the
        // mapping, which lives as long as `self`; an atomic accepts any bits.
        Some(unsafe { &*self.ptr.add(off).cast::<AtomicU64>() })
    }

    /// The `width`-byte (4 or 8) field at `off`, 0 if outside.
    pub fn get(&self, off: u64, width: u32) -> u64 {
        let Some(w) = self.word(off & !7) else {
            return 0;
        };
        let v = w.load(Relaxed);
        if width == 8 {
            v
        } else {
            (v >> ((off & 4) * 8)) & 0xffff_ffff
        }
    }

    /// Writes the `width`-byte field at `off` (a 4-byte field leaves the
    /// other half of its word as it is, atomically). Whether it was inside.
    pub fn set(&self, off: u64, width: u32, v: u64) -> bool {
        let Some(w) = self.word(off & !7) else {
            return false;
        };
        if width == 8 {
            w.store(v, Relaxed);
        } else {
            let shift = (off & 4) * 8;
            let mask = 0xffff_ffffu64 << shift;
            let _ = w.fetch_update(Relaxed, Relaxed, |old| {
                Some((old & !mask) | ((v & 0xffff_ffff) << shift))
            });
        }
        true
    }
}

impl Drop for ArenaMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `open` mapped; no word outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
