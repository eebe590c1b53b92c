//! Asking the kernel whether memory can be read or written, for a system
//! call's price and no more: `rt_sigprocmask` copies 8 bytes in from its
//! `set` argument before it checks `how` (kernel/signal.c: "if
//! (copy_from_user(&new_set, nset, sizeof(sigset_t))) return -EFAULT;"
//! then `sigprocmask` answers EINVAL for an unknown `how`, changing
//! nothing), and copies the mask out to its `oset` argument. Reading 8
//! bytes in each page a buffer touches, or writing them, is what the
//! kernel's own copy of the buffer would have found: EFAULT exactly there.
//!
//! This costs about a tenth of `process_vm_readv` on our own pid (which
//! pins the pages), so buffers on the heap or in a shared library's data
//! are checked here and then copied directly. What it does not cover: a
//! buffer that another thread unmaps, or makes inaccessible, between the
//! check and the copy, while this call is using it (a program that frees
//! memory it is passing to a system call on another thread), or whose page
//! goes in that interval without any thread of ours (a shared file mapping
//! whose file another process truncates, or whose page cannot be read
//! back: an I/O error); the copy then faults as the program's own access
//! to it would. The stack and
//! image paths (`stack.rs`, `image.rs`) need no check; a buffer the probe
//! cannot vouch for goes through the kernel's copy (`process_vm_*`), as
//! before.
//!
//! A write check stores the signal mask into the 8-byte windows it checks,
//! so it is made only for windows inside the buffer (8 bytes or more),
//! right before the buffer is written whole; if a window faults, the
//! kernel's copy writes what it can (the bytes before the fault), so no
//! window's mask is left in them.

use crate::next;
use core::ffi::c_long;

/// The page granularity checked (x86-64 and most aarch64 kernels; a
/// larger page is only checked more often).
const PAGE: usize = 4096;

/// Buffers of more pages than this go through one `process_vm_*` call.
const MAX_PAGES: usize = 16;

/// `how` that no kernel knows: the copy-in happens, nothing changes.
const NO_HOW: c_long = -1;

/// The 8-byte windows that cover every page of `[addr, addr + len)`,
/// `len >= 8`: each inside the buffer.
fn windows(addr: usize, len: usize) -> impl Iterator<Item = usize> {
    let end = addr + len;
    let first_boundary = (addr / PAGE + 1) * PAGE;
    core::iter::once(addr).chain(
        (first_boundary..end)
            .step_by(PAGE)
            .map(move |b| b.min(end - 8)),
    )
}

/// Whether `[addr, addr + len)` lies in few enough pages and does not
/// wrap, and no window can start at 0 (which `rt_sigprocmask` takes for
/// "no set": nothing copied, success).
fn checkable(addr: usize, len: usize) -> bool {
    // A page of room past the end: `windows` computes the next page
    // boundary (no user buffer is in the address space's last page).
    addr != 0
        && len > 0
        && addr
            .checked_add(len)
            .and_then(|e| e.checked_add(PAGE))
            .is_some()
        && len <= MAX_PAGES * PAGE
}

/// `rt_sigprocmask(how, set, oset, 8)`.
fn sigprocmask(how: c_long, set: usize, oset: usize) -> Result<c_long, i32> {
    // SAFETY: the kernel reads 8 bytes at `set` and writes 8 at `oset`
    // (either may be 0: not used), checking both ranges itself; an
    // unknown `how` changes nothing.
    next::result(unsafe {
        next::raw(
            libc::SYS_rt_sigprocmask,
            [how, set as c_long, oset as c_long, 8, 0, 0],
        )
    })
}

/// Whether the kernel could read all of `[addr, addr + len)` (false also
/// when it was not asked: too many pages, or the call is refused).
pub(super) fn readable(addr: usize, len: usize) -> bool {
    if !checkable(addr, len) {
        return false;
    }
    let ok = |w: usize| sigprocmask(NO_HOW, w, 0) == Err(libc::EINVAL);
    if len >= 8 {
        return windows(addr, len).all(ok);
    }
    // Fewer than 8 bytes: a window over the pages the buffer touches
    // (reading past the buffer inside those pages changes nothing).
    let w = if addr % PAGE + 8 <= PAGE {
        addr
    } else {
        addr + len - 8
    };
    ok(w)
}

/// Whether the kernel could write all of `[addr, addr + len)`, storing the
/// signal mask into windows of it (module doc); false when it was not
/// asked (fewer than 8 bytes, too many pages, the call refused) or a
/// window faulted.
pub(super) fn writable(addr: usize, len: usize) -> bool {
    if len < 8 || !checkable(addr, len) {
        return false;
    }
    windows(addr, len).all(|w| sigprocmask(0, 0, w) == Ok(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages, the second without access.
    fn edge() -> usize {
        // SAFETY: a fresh private mapping of ours (leaked: another test
        // thread could map something where it was).
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the second page of the mapping just made.
        let r = unsafe { libc::mprotect(p.cast::<u8>().add(PAGE).cast(), PAGE, libc::PROT_NONE) };
        assert_eq!(r, 0);
        p as usize
    }

    #[test]
    fn windows_cover_every_page_from_inside() {
        for (addr, len) in [
            (100, 8),
            (4090, 8),
            (4090, 10),
            (0, 3 * PAGE),
            (4095, PAGE + 2),
        ] {
            let ws: Vec<usize> = windows(addr, len).collect();
            for w in &ws {
                assert!(*w >= addr && w + 8 <= addr + len, "{addr} {len}: {w}");
            }
            for page in addr / PAGE..=(addr + len - 1) / PAGE {
                assert!(
                    ws.iter()
                        .any(|w| w / PAGE == page || (w + 7) / PAGE == page),
                    "{addr} {len}: page {page} unchecked"
                );
            }
        }
    }

    #[test]
    fn the_kernel_finds_exactly_the_faulting_page() {
        let p = edge();
        let hole = p + PAGE;
        assert!(readable(p, PAGE));
        assert!(writable(p, PAGE));
        assert!(readable(hole - 8, 8));
        assert!(readable(hole - 3, 3));
        assert!(readable(hole - 5, 2));
        assert!(!readable(hole - 8, 9));
        assert!(!readable(hole - 2, 3));
        assert!(!readable(hole, 1));
        assert!(!writable(hole - 8, 9));
        assert!(!writable(hole, 8));
        // Too short to write-check from inside: left to the kernel's copy.
        assert!(!writable(p, 7));
        // Read-only memory: readable, not writable.
        static RO: [u8; 64] = [1; 64];
        assert!(readable(RO.as_ptr() as usize, 64));
        assert!(!writable(RO.as_ptr() as usize, 64));
        assert!(!readable(usize::MAX - 3, 8));
        // The last page of the address space (a kernel address): left to
        // the kernel's copy, no overflow.
        assert!(!readable(usize::MAX - 4095, 8));
        assert!(!writable(usize::MAX - 4095, 8));
        // NULL is no set to rt_sigprocmask: never taken for memory.
        assert!(!readable(0, 8));
        assert!(!writable(0, 8));
        assert!(!readable(0, 3));
    }
}
