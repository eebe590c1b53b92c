//! One thread's stack bounds (`stack.rs` keeps a table of them; the main
//! thread's sit in the hot cache line, `hot.rs`), and beside them whether
//! its SIGSEGV and SIGBUS are unblocked (`fault.rs`).

use core::sync::atomic::{AtomicUsize, Ordering, fence};

/// One thread's stack bounds, keyed by its thread pointer: a small
/// seqlock (`key` 0 while being written).
#[repr(C, align(8))]
pub struct Bounds {
    key: AtomicUsize,
    lo: AtomicUsize,
    hi: AtomicUsize,
    /// A thread pointer with [`UNBLOCKED`] or [`BLOCKED`] in its low bits:
    /// that thread's fault signals (written only by that thread, read
    /// only by it: a word with another thread's tag, or 0, is unknown).
    faults: AtomicUsize,
}

/// [`Bounds::faults`]: SIGSEGV and SIGBUS are both unblocked.
pub const UNBLOCKED: usize = 1;
/// [`Bounds::faults`]: one of them is blocked.
pub const BLOCKED: usize = 2;
const STATE: usize = 3;

impl Bounds {
    pub const fn new() -> Bounds {
        Bounds {
            key: AtomicUsize::new(0),
            lo: AtomicUsize::new(0),
            hi: AtomicUsize::new(0),
            faults: AtomicUsize::new(0),
        }
    }

    /// `tp`'s fault state ([`UNBLOCKED`], [`BLOCKED`]), 0 if unknown.
    #[inline(always)]
    pub(super) fn faults(&self, tp: usize) -> usize {
        let w = self.faults.load(Ordering::Relaxed);
        if w & !STATE == tp { w & STATE } else { 0 }
    }

    /// Records `tp`'s fault state (0: unknown). Relaxed: only the thread
    /// itself reads its tag back (a signal handler on it included, which
    /// sees its own thread's stores in program order).
    #[inline(always)]
    pub(super) fn set_faults(&self, tp: usize, state: usize) {
        if tp & STATE == 0 {
            self.faults.store(tp | (state & STATE), Ordering::Relaxed);
        }
    }

    /// `(lo, hi)` if the entry is `tp`'s.
    #[inline(always)]
    pub(super) fn read(&self, tp: usize) -> Option<(usize, usize)> {
        // Acquire, then the fence before the second look: pairs with the
        // writer's fence and Release (a torn read shows as a changed key).
        if self.key.load(Ordering::Acquire) != tp {
            return None;
        }
        let (lo, hi) = (
            self.lo.load(Ordering::Relaxed),
            self.hi.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (self.key.load(Ordering::Relaxed) == tp).then_some((lo, hi))
    }

    pub(super) fn write(&self, tp: usize, lo: usize, hi: usize) {
        self.key.store(0, Ordering::Relaxed);
        // Release fence: the cleared key is seen before the new bounds.
        fence(Ordering::Release);
        self.lo.store(lo, Ordering::Relaxed);
        self.hi.store(hi, Ordering::Relaxed);
        self.key.store(tp, Ordering::Release);
    }

    /// Clears the entry if it is still `tp`'s (another thread may have
    /// taken the slot since). Relaxed: a reader re-checks the key after
    /// reading.
    pub(super) fn forget(&self, tp: usize) {
        let _ = self
            .key
            .compare_exchange(tp, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}
