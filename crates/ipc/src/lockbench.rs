//! A lock of the arena's kind in a page of its own, for `ipcns bench lock`
//! (which sets it beside glibc's robust process-shared mutex).
//!
//! # Safety
//! The page is a fresh anonymous `MAP_SHARED` mapping of 4096 zeroed bytes
//! (a free lock, as in an arena), mapped for the life of the `BenchLock`
//! and unmapped by its drop; the lock is only used through `&Lock`.
#![allow(unsafe_code)]

use crate::lock::Lock;

/// An ipcns lock in shared memory.
#[doc(hidden)]
pub struct BenchLock {
    page: *mut u8,
}

// SAFETY: the page is shared memory used only through the lock's atomics.
unsafe impl Send for BenchLock {}
// SAFETY: as above.
unsafe impl Sync for BenchLock {}

impl BenchLock {
    pub fn new() -> std::io::Result<BenchLock> {
        // SAFETY: a fresh mapping chosen by the kernel.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(BenchLock { page: p.cast() })
    }

    fn lock(&self) -> &Lock {
        // SAFETY: page-aligned, zeroed (a free lock), mapped while `self`
        // lives; `Lock` is atomics only.
        unsafe { &*self.page.cast::<Lock>() }
    }

    /// Takes the lock, runs `f`, releases it.
    #[inline]
    pub fn section<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.lock().lock() {
            Ok(_g) => f(),
            // Only a recursive call fails; a benchmark makes none.
            Err(_) => f(),
        }
    }
}

impl Drop for BenchLock {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`; nothing borrows it now.
        unsafe { libc::munmap(self.page.cast(), 4096) };
    }
}
