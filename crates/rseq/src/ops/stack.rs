//! Per-cpu bounded stacks of 64-bit values: for caches of things named by
//! a number (offsets of free blocks in a shared region, say), in memory
//! that several processes may share.
//!
//! # Encoding
//!
//! A stack is `1 + cap` words of a slot, from a field offset: the count
//! (values held; zeroed memory is an empty stack), then the values, bottom
//! first. A push stores its value above the top, then commits the count +
//! 1; a pop loads the top value and commits the count - 1. Words above the
//! count are stale and never read.
//!
//! # Checks
//!
//! The count is memory another process may have scribbled on: a push
//! stores only at a count below `cap`, a pop reads only at a count in
//! `1..=cap`, both compared inside the section. A pop that finds a count
//! above `cap` reports it ([`BadCount`]) and stores nothing; what to do
//! (e.g. [`cmp_store`](super::cmp_store) it to 0, leaking the values) is
//! the caller's choice. The values themselves are the caller's to check.
//!
//! # Safety
//!
//! As the other operations (see the parent module): the slot descriptor
//! promises the slots, and each slot holds `off + 8 + cap * 8` bytes.

#![allow(unsafe_code)]

use super::{Index, Outcome, Slots, arch, fallback, index_ptr};
use core::fmt;

/// A stack's count above its capacity (a corrupted count), found by a pop
/// that then read and stored nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadCount(pub u64);

impl fmt::Display for BadCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stack count {} is above its capacity", self.0)
    }
}

impl std::error::Error for BadCount {}

/// The status of an rseq section or its fallback as an [`Outcome`]
/// carrying `word` on success.
#[inline(always)]
pub(super) fn word_outcome(st: u32, slot: u32, word: u64) -> Outcome<u64> {
    match st {
        arch::SUCCESS => Outcome::Success { slot, value: word },
        arch::MISS => Outcome::Miss { slot },
        _ => Outcome::Abort,
    }
}

/// Per-cpu bounded stack push: `v` onto the stack at `slot[off]`, which
/// holds at most `cap` values (encoding in the module doc). `Success`
/// carries the new count; `Miss` means the stack holds `cap` values or
/// more (full, or a count out of range).
///
/// # Safety
///
/// As [`add`](super::add) for the count word; `off + 8 + cap * 8` bytes
/// of every slot are valid and written only by these operations (or by a
/// party that holds every slot exclusively). In fallback mode the count
/// never holds [`BUSY`](super::BUSY) unless an operation is committing it.
#[inline(always)]
pub unsafe fn stack_push(s: &Slots, index: Index, off: usize, cap: u32, v: u64) -> Outcome<u64> {
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: as in `add`; the section writes value words below `cap`.
        let (st, slot, w) = unsafe {
            arch::stack_push(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                u64::from(cap),
                v,
            )
        };
        if st != arch::NO_INDEX {
            return word_outcome(st, slot, w);
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: as in `add`; value words below `cap` only.
    let (st, w) = unsafe { fallback::stack_push(p, u64::from(cap), v) };
    word_outcome(st, slot, w)
}

/// Per-cpu bounded stack pop from the stack at `slot[off]` (see
/// [`stack_push`]): `Success` carries the value; `Miss` means the stack
/// was empty.
///
/// # Errors
///
/// [`BadCount`] if the count is above `cap`: nothing was read through it
/// and nothing was stored.
///
/// # Safety
///
/// As [`stack_push`].
#[inline(always)]
pub unsafe fn stack_pop(
    s: &Slots,
    index: Index,
    off: usize,
    cap: u32,
) -> Result<Outcome<u64>, BadCount> {
    let done = match index_ptr(index) {
        // SAFETY: as in `add`; the section reads value words at counts
        // in 1..=cap only.
        Some((area, idx)) => unsafe {
            arch::stack_pop(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                u64::from(cap),
            )
        },
        None => (arch::NO_INDEX, 0, 0),
    };
    let (st, slot, w) = if done.0 == arch::NO_INDEX {
        let (slot, p) = s.fallback_slot(off);
        // SAFETY: as in `add`; counts in 1..=cap only.
        let (st, w) = unsafe { fallback::stack_pop(p, u64::from(cap)) };
        (st, slot, w)
    } else {
        done
    };
    pop_result(st, slot, w)
}

/// A pop's status and word as its result: a miss with a non-zero count
/// found a count above the capacity.
#[inline(always)]
pub(super) fn pop_result(st: u32, slot: u32, w: u64) -> Result<Outcome<u64>, BadCount> {
    match st {
        arch::MISS if w != 0 => Err(BadCount(w)),
        _ => Ok(word_outcome(st, slot, w)),
    }
}
