//! The heap's global state, under the heap lock: the free lists of small
//! blocks by class, the list of free page runs, and new memory from the
//! top (reserved in the file a chunk ahead).
//!
//! # Protocol
//! Every function here expects the heap lock held ([`lock`]), and leaves
//! it held. Each change is a sequence of single-word stores ordered so
//! that a holder killed between any two leaves the lists well formed: at
//! worst a block is neither on a list nor owned (leaked), never on a list
//! and owned. Every offset read from a list is checked against the heap
//! before it is followed, every walk is bounded: a corrupt list is cut
//! (its blocks leaked), never trusted.
//!
//! Every page below `top` is reserved in the file (`fallocate` before
//! `top` moves; `reserved` marks how far ahead of `top` it already is), so
//! touching heap memory never faults on a full file system. A free run
//! gives its pages back except the first, which holds the run's link;
//! taking a run reserves them again first.

use super::{PAGE, plausible};
use crate::arena::Arena;
use crate::errno::Errno;
use crate::lock::Guard;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// The file is reserved this far ahead of `top` at a time.
const RESERVE_CHUNK: u64 = 64 << 10;

/// Takes the heap lock, a leaf (taken last, never held while taking
/// another): within the call's bound, if it has one (`Lock::lock_leaf`),
/// else ETIMEDOUT.
pub(super) fn lock(a: &Arena) -> Result<Guard<'_>, Errno> {
    let mut g = a.header().heap.lock.lock_leaf()?;
    if g.recovered() {
        // The lists are well formed after any single store; what a dead
        // holder leaves is at worst a leaked block. Nothing to redo.
        g.repaired();
    }
    Ok(g)
}

/// Takes the first block of class `c` (`s` bytes, aligned to `align`) off
/// its free list; `None` when the list is empty or corrupt (then dropped:
/// its blocks leak).
pub(super) fn pop_free(a: &Arena, c: usize, s: u64, align: u64) -> Result<Option<u64>, Errno> {
    let h = &a.header().heap;
    let head = h.free[c].load(Relaxed);
    if head == 0 {
        return Ok(None);
    }
    if !plausible(a, head, s, align) {
        h.free[c].store(0, Relaxed);
        return Ok(None);
    }
    let next = a.view::<AtomicU64>(head)?.load(Relaxed);
    h.free[c].store(next, Relaxed);
    Ok(Some(head))
}

/// Puts the free block `off` (checked by the caller) on class `c`'s list:
/// its link first, then the head.
pub(super) fn push_free(a: &Arena, c: usize, off: u64) -> Result<(), Errno> {
    let h = &a.header().heap;
    a.view::<AtomicU64>(off)?
        .store(h.free[c].load(Relaxed), Relaxed);
    h.free[c].store(off, Relaxed);
    Ok(())
}

/// New memory from the top, reserved in the file first (a chunk ahead,
/// or exactly what is needed if the chunk does not fit).
pub(super) fn bump(a: &Arena, size: u64, align: u64) -> Result<u64, Errno> {
    let h = &a.header().heap;
    let l = a.layout();
    let limit = h.end.load(Relaxed).min(l.size);
    let top = h
        .top
        .load(Relaxed)
        .max(l.heap_off)
        .div_ceil(align)
        .checked_mul(align)
        .ok_or(Errno::ENOMEM)?;
    let new_top = top.checked_add(size).ok_or(Errno::ENOMEM)?;
    if new_top > limit {
        return Err(Errno::ENOMEM);
    }
    let reserved = h.reserved.load(Relaxed).clamp(top, limit);
    if new_top > reserved {
        let ahead = (new_top.div_ceil(RESERVE_CHUNK) * RESERVE_CHUNK).min(limit);
        let upto = match a.reserve(reserved, ahead - reserved) {
            Ok(()) => ahead,
            Err(_) => {
                a.reserve(reserved, new_top - reserved)?;
                new_top
            }
        };
        h.reserved.store(upto, Relaxed);
    }
    h.top.store(new_top, Relaxed);
    Ok(top)
}

/// A page run on the free list: `[next, pages]` in its first 16 bytes.
fn run_next(a: &Arena, off: u64) -> Result<&AtomicU64, Errno> {
    a.view::<AtomicU64>(off)
}

fn run_pages(a: &Arena, off: u64) -> Result<&AtomicU64, Errno> {
    a.view::<AtomicU64>(off.checked_add(8).ok_or(Errno::EFAULT)?)
}

/// Puts the run of `pages` pages at `off` (checked by the caller) on the
/// run list, giving its pages back to the file system but the first,
/// which keeps the run's link (writing it must not fault).
pub(super) fn free_run(a: &Arena, off: u64, pages: u64) -> Result<(), Errno> {
    let h = &a.header().heap;
    a.punch(off + PAGE, (pages - 1) * PAGE);
    run_pages(a, off)?.store(pages, Relaxed);
    run_next(a, off)?.store(h.runs.load(Relaxed), Relaxed);
    h.runs.store(off, Relaxed);
    Ok(())
}

/// First fit on the run list; splits a larger run, keeping its tail listed.
/// The pages handed out (and the tail's first page) are reserved before
/// the list changes; a full file system gives ENOMEM with nothing changed.
pub(super) fn take_run(a: &Arena, pages: u64) -> Result<Option<u64>, Errno> {
    let h = &a.header().heap;
    let l = a.layout();
    let limit = (l.size - l.heap_off) / PAGE;
    let mut prev: Option<u64> = None;
    let mut cur = h.runs.load(Relaxed);
    let mut walked = 0;
    while cur != 0 {
        let n = if plausible(a, cur, PAGE, PAGE) {
            run_pages(a, cur)?.load(Relaxed)
        } else {
            0
        };
        walked += 1;
        if n == 0 || !a.in_heap(cur, n.saturating_mul(PAGE)) || walked > limit {
            // A corrupt run or a cycle: cut the list here (the rest leaks).
            match prev {
                None => h.runs.store(0, Relaxed),
                Some(p) => run_next(a, p)?.store(0, Relaxed),
            }
            return Ok(None);
        }
        let next = run_next(a, cur)?.load(Relaxed);
        if n >= pages {
            a.reserve(cur + PAGE, (pages - 1) * PAGE)?;
            let replacement = if n > pages {
                // The tail stays free: reserve its first page and describe
                // it fully before linking it.
                let tail = cur + pages * PAGE;
                a.reserve(tail, PAGE)?;
                run_pages(a, tail)?.store(n - pages, Relaxed);
                run_next(a, tail)?.store(next, Relaxed);
                tail
            } else {
                next
            };
            match prev {
                None => h.runs.store(replacement, Relaxed),
                Some(p) => run_next(a, p)?.store(replacement, Relaxed),
            }
            return Ok(Some(cur));
        }
        prev = Some(cur);
        cur = next;
    }
    Ok(None)
}

/// The runs on the list (offset, pages), for the audit; at most `max`,
/// cut at the first that is no run. Heap lock held.
pub(super) fn runs(a: &Arena, max: usize) -> (Vec<(u64, u64)>, Option<String>) {
    let h = &a.header().heap;
    let mut out = Vec::new();
    let mut cur = h.runs.load(Relaxed);
    while cur != 0 {
        if out.len() >= max {
            return (out, Some(format!("run list longer than {max}: a loop?")));
        }
        let n = match run_pages(a, cur) {
            Ok(p) if plausible(a, cur, PAGE, PAGE) => p.load(Relaxed),
            _ => return (out, Some(format!("run list links to {cur:#x}, no run"))),
        };
        // (run_pages checks its own offset: `cur` is not trusted yet.)
        if n == 0 || !a.in_heap(cur, n.saturating_mul(PAGE)) {
            return (out, Some(format!("run at {cur:#x} of {n} pages")));
        }
        out.push((cur, n));
        cur = run_next(a, cur).map_or(0, |w| w.load(Relaxed));
    }
    (out, None)
}
