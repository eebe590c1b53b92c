//! One thread's stack bounds (`stack.rs` keeps a table of them; the main
//! thread's sit in the hot cache line, `hot.rs`).

use core::sync::atomic::{AtomicUsize, Ordering, fence};

/// One thread's stack bounds, keyed by its thread pointer: a small
/// seqlock (`key` 0 while being written).
#[repr(C, align(8))]
pub struct Bounds {
    key: AtomicUsize,
    lo: AtomicUsize,
    hi: AtomicUsize,
}

impl Bounds {
    pub const fn new() -> Bounds {
        Bounds {
            key: AtomicUsize::new(0),
            lo: AtomicUsize::new(0),
            hi: AtomicUsize::new(0),
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
