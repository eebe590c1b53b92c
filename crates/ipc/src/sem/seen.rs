//! The sizes of the sets this process has been shown (created, or read
//! with IPC_STAT / SEM_STAT / SEM_STAT_ANY): what bounds GETALL's and
//! SETALL's copies.
//!
//! A set's size never changes in the kernel, so a program sizes its GETALL
//! array by what semget or IPC_STAT told it. In the arena any participant
//! can rewrite `nsems` (or the array's base); a copy sized by the arena
//! would then write past the caller's array (a stack smash in a root
//! process driven by another user in a shared namespace). So the size a
//! process was shown is remembered here, per arena, index and slot
//! generation, and a GETALL or SETALL of a set whose arena size differs
//! from it fails with EUCLEAN (the arena is corrupt) instead of copying.
//! A set the process never saw the size of (its id came from elsewhere)
//! is copied at its arena size: nothing better is known.
//!
//! # Protocol
//! A direct-mapped table of [`SLOTS`] entries in this process's memory,
//! each a small seqlock: `arena` cleared, then `generation` and `size`
//! written, then `arena` set (Release); a reader checks `arena` before
//! (Acquire) and after the two loads. A later set at the same position
//! replaces an earlier one (whose size is then unknown again).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU64, AtomicUsize, fence};

const SLOTS: usize = 4096;

struct Entry {
    arena: AtomicUsize,
    generation: AtomicU64,
    /// The index (high half) and the size (low half).
    size: AtomicU64,
}

static SEEN: [Entry; SLOTS] = [const {
    Entry {
        arena: AtomicUsize::new(0),
        generation: AtomicU64::new(0),
        size: AtomicU64::new(0),
    }
}; SLOTS];

fn entry(idx: u32) -> &'static Entry {
    &SEEN[idx as usize % SLOTS]
}

/// Remembers that set `idx` of generation `generation` in the arena at
/// `arena` (its key) was shown with `nsems`.
pub fn shown(arena: usize, idx: u32, generation: u64, nsems: u32) {
    let e = entry(idx);
    e.arena.store(0, Relaxed);
    fence(Release);
    e.generation.store(generation, Relaxed);
    e.size
        .store((u64::from(idx) << 32) | u64::from(nsems), Relaxed);
    e.arena.store(arena, Release);
}

/// The size set `idx` of generation `generation` was shown with, if known.
pub fn size(arena: usize, idx: u32, generation: u64) -> Option<u32> {
    let e = entry(idx);
    if e.arena.load(Acquire) != arena {
        return None;
    }
    let (g, w) = (e.generation.load(Relaxed), e.size.load(Relaxed));
    fence(Acquire);
    (e.arena.load(Relaxed) == arena && g == generation && (w >> 32) as u32 == idx)
        .then_some(w as u32)
}
