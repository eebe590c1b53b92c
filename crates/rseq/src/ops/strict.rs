//! The operations in restartable sequences only: for memory whose every
//! user must update it in rseq sections, never with the atomic fallback.
//!
//! The ordinary operations fall back to `sched_getcpu` plus atomics on a
//! thread without an rseq area. That is right when every user of the
//! memory does the same, but an rseq commit is a plain store: on a slot
//! that one thread updates in an rseq section and another (without an
//! area, running on another cpu, with a stale cpu number) with atomics,
//! updates are lost or, for a stack, one value is popped twice. The
//! functions here instead return `None`, touching nothing, when the calling
//! thread cannot run the section: no area ([`Mode::Fallback`], an own
//! registration that failed or was already undone at thread exit), or a
//! cpu number without a slot. The caller then takes another way, e.g. a
//! lock over data of its own that no section touches.
//!
//! A thread with an area keeps it for its whole life (glibc's; or its own
//! until its thread-local destructors run), so a `Some` answer from one of
//! these is an rseq section's, always.
//!
//! [`Mode::Fallback`]: crate::Mode::Fallback
//!
//! # Safety
//!
//! As the parent module's; every user of the slots goes through this
//! module (or holds every slot exclusively).

#![allow(unsafe_code)]

use super::stack::{BadCount, pop_result, word_outcome};
use super::{Index, Outcome, Slots, arch, index_ptr, slow_outcome};

/// [`add`](super::add) in an rseq section, or `None` (nothing touched).
///
/// # Safety
///
/// As [`add`](super::add); the word is only ever updated through this
/// module.
#[inline(always)]
pub unsafe fn add(s: &Slots, index: Index, off: usize, v: u64) -> Option<Outcome> {
    let (area, idx) = index_ptr(index)?;
    // SAFETY: area/idx belong to this thread; `s` and `off` per contract.
    let (st, slot) = unsafe { arch::add(area, idx, s.len, s.base.wrapping_add(off), s.stride, v) };
    match st {
        arch::NO_INDEX => None,
        arch::SUCCESS => Some(Outcome::Success { slot, value: () }),
        _ => Some(slow_outcome(st, slot)),
    }
}

/// [`cmp_store`](super::cmp_store) in an rseq section, or `None` (nothing
/// touched).
///
/// # Safety
///
/// As [`add`].
#[inline(always)]
pub unsafe fn cmp_store(
    s: &Slots,
    index: Index,
    off: usize,
    expect: u64,
    new: u64,
) -> Option<Outcome> {
    let (area, idx) = index_ptr(index)?;
    // SAFETY: as in `add`.
    let (st, slot) = unsafe {
        arch::cmp_store(
            area,
            idx,
            s.len,
            s.base.wrapping_add(off),
            s.stride,
            expect,
            new,
        )
    };
    match st {
        arch::NO_INDEX => None,
        arch::SUCCESS => Some(Outcome::Success { slot, value: () }),
        _ => Some(slow_outcome(st, slot)),
    }
}

/// [`stack_push`](super::stack_push) in an rseq section, or `None`
/// (nothing touched).
///
/// # Safety
///
/// As [`stack_push`](super::stack_push); the stack is only ever updated
/// through this module.
#[inline(always)]
pub unsafe fn stack_push(
    s: &Slots,
    index: Index,
    off: usize,
    cap: u32,
    v: u64,
) -> Option<Outcome<u64>> {
    let (area, idx) = index_ptr(index)?;
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
    (st != arch::NO_INDEX).then(|| word_outcome(st, slot, w))
}

/// [`stack_pop`](super::stack_pop) in an rseq section, or `None` (nothing
/// touched).
///
/// # Errors
///
/// As [`stack_pop`](super::stack_pop): [`BadCount`] for a count above
/// `cap`.
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
) -> Option<Result<Outcome<u64>, BadCount>> {
    let (area, idx) = index_ptr(index)?;
    // SAFETY: as in `add`; values read at counts in 1..=cap only.
    let (st, slot, w) = unsafe {
        arch::stack_pop(
            area,
            idx,
            s.len,
            s.base.wrapping_add(off),
            s.stride,
            u64::from(cap),
        )
    };
    (st != arch::NO_INDEX).then(|| pop_result(st, slot, w))
}
