//! The same operations with `sched_getcpu` and atomic instructions, for
//! threads without an rseq area.
//!
//! The slot is chosen by `sched_getcpu()`, which may be stale by the time the
//! atomic instruction runs; the atomics make that harmless. Operations that an
//! rseq section makes exclusive to one cpu but that no single atomic
//! instruction can express (compare two words, try-store then store) briefly
//! mark the committed word [`BUSY`]: the marker is set by a compare-exchange
//! and cleared by the final store, and every other fallback operation that
//! meets it reports an abort, so its caller retries.
//!
//! # Safety
//!
//! Callers pass a slot address valid for the accessed fields and aligned to
//! 8 (4 for links); atomics on shared memory are how processes in fallback
//! mode agree.

#![allow(unsafe_code)]

use super::Blocks;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Transient marker on a word being committed by a two-word fallback
/// operation; such words must never hold this value otherwise.
pub const BUSY: u64 = u64::MAX;

pub(super) const SUCCESS: u32 = 0;
pub(super) const MISS: u32 = 1;
pub(super) const ABORT: u32 = 2;

/// # Safety
/// `p` is valid, 8-aligned, and only accessed atomically by other threads.
unsafe fn word<'a>(p: *mut u8) -> &'a AtomicU64 {
    // SAFETY: per the function contract.
    unsafe { AtomicU64::from_ptr(p.cast()) }
}

/// # Safety
/// As [`add`](super::add): `p` is the selected slot's field.
pub(super) unsafe fn add(p: *mut u8, v: u64) -> u32 {
    // SAFETY: caller contract. Relaxed: a counter orders nothing.
    unsafe { word(p) }.fetch_add(v, Ordering::Relaxed);
    SUCCESS
}

/// # Safety
/// As [`cmp_store`](super::cmp_store).
pub(super) unsafe fn cmp_store(p: *mut u8, expect: u64, new: u64) -> u32 {
    // SAFETY: caller contract. AcqRel on success: publishes what the caller
    // wrote before (release) and sees what the previous writer published
    // (acquire), as a lock would.
    match unsafe { word(p) }.compare_exchange(expect, new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => SUCCESS,
        Err(BUSY) => ABORT,
        Err(_) => MISS,
    }
}

/// Marks `p` busy if it holds `expect`; returns the status to report if not.
unsafe fn lock(p: *mut u8, expect: u64) -> Result<(), u32> {
    // SAFETY: caller contract. Acquire pairs with the Release store that
    // cleared the previous marker, so its speculative store is visible.
    match unsafe { word(p) }.compare_exchange(expect, BUSY, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => Ok(()),
        Err(BUSY) => Err(ABORT),
        Err(_) => Err(MISS),
    }
}

/// # Safety
/// As [`cmp_cmp_store`](super::cmp_cmp_store).
pub(super) unsafe fn cmp_cmp_store(
    p: *mut u8,
    expect: u64,
    p2: *mut u8,
    expect2: u64,
    new: u64,
) -> u32 {
    // SAFETY: caller contract (for this and the accesses below).
    if let Err(st) = unsafe { lock(p, expect) } {
        return st;
    }
    // SAFETY: as above.
    let second = unsafe { word(p2) }.load(Ordering::Acquire);
    let (value, st) = if second == expect2 {
        (new, SUCCESS)
    } else {
        (expect, MISS)
    };
    // SAFETY: as above. Release pairs with the Acquire in `lock`.
    unsafe { word(p) }.store(value, Ordering::Release);
    st
}

/// # Safety
/// As [`cmp_trystore_store`](super::cmp_trystore_store).
pub(super) unsafe fn cmp_trystore_store(
    p: *mut u8,
    expect: u64,
    ps: *mut u8,
    spec: u64,
    new: u64,
) -> u32 {
    // SAFETY: caller contract (for this and the accesses below).
    if let Err(st) = unsafe { lock(p, expect) } {
        return st;
    }
    // SAFETY: as above. Relaxed: published by the Release store below.
    unsafe { word(ps) }.store(spec, Ordering::Relaxed);
    // SAFETY: as above. Release pairs with the Acquire in `lock` and with
    // readers that load the committed word with acquire.
    unsafe { word(p) }.store(new, Ordering::Release);
    SUCCESS
}

/// # Safety
/// As [`list_push`](super::list_push); `link` is the block's link word
/// (from the checked index `enc - 1`).
pub(super) unsafe fn list_push(head: *mut u8, link: *mut u8, enc: u32) -> u32 {
    // SAFETY: caller contract (for this and the accesses below).
    let h = unsafe { word(head) };
    let old = h.load(Ordering::Relaxed);
    // SAFETY: the block belongs to the caller until the push succeeds.
    unsafe { AtomicU32::from_ptr(link.cast()) }.store(old as u32, Ordering::Relaxed);
    let new = (old & !0xffff_ffff) | u64::from(enc);
    // Release: a popper that acquires the head sees the link written above.
    match h.compare_exchange(old, new, Ordering::Release, Ordering::Relaxed) {
        Ok(_) => SUCCESS,
        Err(_) => ABORT,
    }
}

/// # Safety
/// As [`list_pop`](super::list_pop). Returns `(status, enc)`, as the rseq
/// section does: on a miss `enc` is 0 for an empty list, or the head's
/// out-of-range value, which was not dereferenced.
pub(super) unsafe fn list_pop(head: *mut u8, blocks: &Blocks) -> (u32, u32) {
    // SAFETY: caller contract (for this and the accesses below).
    let h = unsafe { word(head) };
    // Acquire pairs with the Release of the push that published the element.
    let old = h.load(Ordering::Acquire);
    let enc = old as u32;
    if enc == 0 {
        return (MISS, 0);
    }
    // Check the index before reading through it: the head is shared memory.
    let Ok(link) = blocks.block(enc - 1) else {
        return (MISS, enc);
    };
    // The element may be popped and reused concurrently; then the link read
    // here is stale (any bytes its new owner wrote), but the pop count in the
    // high half makes the compare-exchange below fail (no ABA), and the
    // value is checked by the next pop anyway.
    // SAFETY: `link` is the first word of a block inside the region
    // (index checked just above).
    let next = unsafe { AtomicU32::from_ptr(link.cast()) }.load(Ordering::Relaxed);
    let new = (((old >> 32) + 1) << 32) | u64::from(next);
    match h.compare_exchange(old, new, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => (SUCCESS, enc),
        Err(_) => (ABORT, 0),
    }
}

/// # Safety
/// As [`stack_push`](super::stack_push): `p` is the selected slot's count
/// word, followed by `cap` value words. Returns `(status, word)` as the
/// rseq section does (the new count, or the count found on a miss).
pub(super) unsafe fn stack_push(p: *mut u8, cap: u64, v: u64) -> (u32, u64) {
    // SAFETY: caller contract (for this and the accesses below). Relaxed:
    // only a hint; the compare-exchange in `lock` decides.
    let c = unsafe { word(p) }.load(Ordering::Relaxed);
    if c == BUSY {
        return (ABORT, 0);
    }
    if c >= cap {
        return (MISS, c);
    }
    // SAFETY: as above. A count that changed since the load: retry.
    if unsafe { lock(p, c) }.is_err() {
        return (ABORT, 0);
    }
    // SAFETY: `c < cap`: the value word is inside the stack. Relaxed:
    // published by the Release store below.
    unsafe { word(p.wrapping_add(8 + c as usize * 8)) }.store(v, Ordering::Relaxed);
    // SAFETY: as above. Release pairs with the Acquire in `lock`.
    unsafe { word(p) }.store(c + 1, Ordering::Release);
    (SUCCESS, c + 1)
}

/// # Safety
/// As [`stack_push`]. Returns `(status, word)` as the rseq section does
/// (the value popped, or the count found on a miss).
pub(super) unsafe fn stack_pop(p: *mut u8, cap: u64) -> (u32, u64) {
    // SAFETY: caller contract (for this and the accesses below).
    let c = unsafe { word(p) }.load(Ordering::Relaxed);
    if c == BUSY {
        return (ABORT, 0);
    }
    if c == 0 || c > cap {
        return (MISS, c);
    }
    // SAFETY: as above. A count that changed since the load: retry.
    if unsafe { lock(p, c) }.is_err() {
        return (ABORT, 0);
    }
    // SAFETY: `1 <= c <= cap`: word `c - 1` is inside the stack. Relaxed:
    // `lock`'s Acquire made the pusher's store visible.
    let v = unsafe { word(p.wrapping_add(c as usize * 8)) }.load(Ordering::Relaxed);
    // SAFETY: as above. Release pairs with the Acquire in `lock`.
    unsafe { word(p) }.store(c - 1, Ordering::Release);
    (SUCCESS, v)
}
