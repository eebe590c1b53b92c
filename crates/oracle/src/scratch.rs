//! The buffer GETALL and SETALL values pass through on their way to and
//! from the kernel.
//!
//! The kernel copies `sem_nsems` values, a number the caller cannot learn
//! without a race (the set may be removed and its id reused between a look
//! and the call). So the values do not go in the caller's slice but in a
//! window of one process-wide scratch mapping, placed to end exactly where
//! a guard region begins: a set no larger than the window is copied inside
//! it; a larger one runs into the guard, and the kernel fails the copy with
//! EFAULT after its own lookup and permission checks, in its own order.
//!
//! Lock: one mutex serialises the windows; a [`Window`] holds it from
//! [`window`] until it is dropped. (A child forked while another thread
//! holds it must not use the scratch: the lock is never released there.)
//!
//! # Safety
//! The mapping is made once, never unmapped, and owned by this module:
//! [`VALUES`] `u16`s (2^32 bytes) readable and writable, then a guard of
//! the same size with no access at all (`PROT_NONE`). The kernel copies at
//! most `i32::MAX` values (`sem_nsems` is a non-negative int) from the
//! start of a window, which lies inside the readable part; so every byte
//! it can touch is in the mapping: in the window, which the caller holds
//! exclusively under the mutex, or in the guard, where the copy faults and
//! nothing is read or written. Untouched anonymous pages read as zeros,
//! valid `u16`s.
#![allow(unsafe_code)]

use ipcns::{Errno, SysResult};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// Values in the readable part: more than any set can hold.
const VALUES: usize = i32::MAX as usize + 1;
/// Bytes of the readable part, and of the guard after it.
const HALF: usize = VALUES * 2;

/// The readable part once mapped (or why it could not be); made on first
/// use, then immutable.
static SCRATCH: OnceLock<Result<Mutex<&'static mut [u16]>, Errno>> = OnceLock::new();

/// `mmap` of the readable part and the guard: address space only
/// (`MAP_NORESERVE`); pages are backed as windows touch them.
fn map() -> Result<Mutex<&'static mut [u16]>, Errno> {
    // SAFETY: asks for a fresh anonymous mapping; no existing memory changes.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            2 * HALF,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    // SAFETY: changes the first half of the mapping just made, which
    // nothing else refers to.
    if unsafe { libc::mprotect(p, HALF, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
        let e = Errno::last();
        // SAFETY: removes the mapping just made; nothing refers to it.
        unsafe { libc::munmap(p, 2 * HALF) };
        return Err(e);
    }
    // SAFETY: `p` begins HALF readable and writable bytes, page-aligned (so
    // aligned for u16), zero-filled and never unmapped; nothing else refers
    // to them, so this reference is their only owner from here on.
    let values = unsafe { core::slice::from_raw_parts_mut(p.cast::<u16>(), VALUES) };
    Ok(Mutex::new(values))
}

/// A window of the scratch: its last `len` values, which end where the
/// guard begins. Holds the scratch lock until dropped.
pub(crate) struct Window {
    scratch: MutexGuard<'static, &'static mut [u16]>,
    len: usize,
}

impl Window {
    /// The window's values.
    pub(crate) fn values(&mut self) -> &mut [u16] {
        let start = VALUES - self.len;
        &mut self.scratch[start..]
    }

    /// Where the window starts, for the kernel: a copy of `n` values from
    /// here stays in the window if `n <= len`, else faults in the guard.
    pub(crate) fn addr(&mut self) -> usize {
        self.values().as_mut_ptr() as usize
    }
}

/// A window of `len` values (at most [`VALUES`]: no set holds more),
/// locked for the caller. The scratch's mapping error (ENOMEM) if it could
/// not be made.
///
/// Lock: takes the scratch lock; the window keeps it.
pub(crate) fn window(len: usize) -> SysResult<Window> {
    let m = SCRATCH.get_or_init(map).as_ref().map_err(|&e| e)?;
    // Its contents carry no invariant that a panicking holder could break.
    let scratch = m.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(Window {
        scratch,
        len: len.min(VALUES),
    })
}
