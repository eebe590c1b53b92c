//! The arena's heap: small blocks by power-of-two class (32 B to 64 KiB)
//! on free lists, larger ones as runs of pages, all by offset.
//!
//! # Protocol
//! Everything is protected by the heap lock, a leaf: taken last, after any
//! registry or object lock, and never held while taking another. Each
//! change is a sequence of single-word stores ordered so that a holder
//! killed between any two leaves the lists well formed: at worst a block is
//! neither on a list nor owned (leaked), never on a list and owned.
//!
//! Every page below `top` is reserved in the file (`fallocate` before `top`
//! moves), so touching heap memory never faults on a full file system. A
//! free run gives its pages back except the first, which holds the run's
//! link; taking a run reserves them again first. Every offset read from a
//! list is checked against the heap before it is followed, every walk is
//! bounded: a corrupt list is cut (its blocks leaked), never trusted.

use crate::arena::Arena;
use crate::arena::header::HEAP_CLASSES;
use crate::errno::Errno;
use crate::lock::Guard;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

const MIN_SHIFT: u32 = 5;
const PAGE: u64 = 4096;
/// The largest small block.
pub const MAX_SMALL: u64 = 1 << (MIN_SHIFT as usize + HEAP_CLASSES - 1);

/// A page run on the free list: `[next, pages]` in its first 16 bytes.
fn run_next(a: &Arena, off: u64) -> Result<&AtomicU64, Errno> {
    a.view::<AtomicU64>(off)
}

fn run_pages(a: &Arena, off: u64) -> Result<&AtomicU64, Errno> {
    a.view::<AtomicU64>(off + 8)
}

/// The class of a small block of `size` bytes and its rounded size.
fn class(size: u64) -> (usize, u64) {
    let s = size.max(1 << MIN_SHIFT).next_power_of_two();
    ((s.trailing_zeros() - MIN_SHIFT) as usize, s)
}

/// The bytes an allocation of `size` really takes.
pub fn footprint(size: u64) -> u64 {
    if size <= MAX_SMALL {
        class(size).1
    } else {
        size.div_ceil(PAGE) * PAGE
    }
}

/// Whether `off` can be a block of `len` bytes aligned to `align`.
fn plausible(a: &Arena, off: u64, len: u64, align: u64) -> bool {
    off.is_multiple_of(align) && a.in_heap(off, len)
}

fn lock(a: &Arena) -> Result<Guard<'_>, Errno> {
    let mut g = a.header().heap.lock.lock()?;
    if g.recovered() {
        // The lists are well formed after any single store; what a dead
        // holder leaves is at worst a leaked block. Nothing to redo.
        g.repaired();
    }
    Ok(g)
}

/// Allocates `size` bytes (zeroed), aligned to 32 bytes (small) or a page.
/// ENOMEM when the heap or the file system is full.
pub fn alloc(a: &Arena, size: u64) -> Result<u64, Errno> {
    let h = &a.header().heap;
    let _g = lock(a)?;
    let off = if size <= MAX_SMALL {
        let (c, s) = class(size);
        let align = s.min(PAGE);
        let head = h.free[c].load(Relaxed);
        if head != 0 && plausible(a, head, s, align) {
            let next = a.view::<AtomicU64>(head)?.load(Relaxed);
            h.free[c].store(next, Relaxed);
            zero(a, head, s)?;
            head
        } else {
            if head != 0 {
                // A corrupt list: drop it (its blocks leak).
                h.free[c].store(0, Relaxed);
            }
            bump(a, s, align)?
        }
    } else {
        let pages = size.div_ceil(PAGE).max(1);
        match take_run(a, pages)? {
            Some(off) => {
                zero(a, off, pages * PAGE)?;
                off
            }
            None => bump(a, pages * PAGE, PAGE)?,
        }
    };
    h.in_use.fetch_add(footprint(size), Relaxed);
    Ok(off)
}

/// Frees a block from [`alloc`] of the same `size`. EUCLEAN (and nothing
/// freed) for an offset that cannot be such a block.
pub fn free(a: &Arena, off: u64, size: u64) -> Result<(), Errno> {
    let h = &a.header().heap;
    let _g = lock(a)?;
    if size <= MAX_SMALL {
        let (c, s) = class(size);
        if !plausible(a, off, s, s.min(PAGE)) {
            return Err(Errno::EUCLEAN);
        }
        a.view::<AtomicU64>(off)?
            .store(h.free[c].load(Relaxed), Relaxed);
        h.free[c].store(off, Relaxed);
    } else {
        let pages = size.div_ceil(PAGE);
        if !plausible(a, off, pages * PAGE, PAGE) {
            return Err(Errno::EUCLEAN);
        }
        // Give the memory back to the file system but for the first page,
        // which keeps the run's link (writing it must not fault).
        a.punch(off + PAGE, (pages - 1) * PAGE);
        run_pages(a, off)?.store(pages, Relaxed);
        run_next(a, off)?.store(h.runs.load(Relaxed), Relaxed);
        h.runs.store(off, Relaxed);
    }
    h.in_use
        .fetch_sub(footprint(size).min(h.in_use.load(Relaxed)), Relaxed);
    Ok(())
}

fn zero(a: &Arena, off: u64, len: u64) -> Result<(), Errno> {
    crate::arena::bytes::zero(a.view_slice::<AtomicU64>(off, (len / 8) as usize)?);
    Ok(())
}

/// New memory from the top, reserved in the file first.
fn bump(a: &Arena, size: u64, align: u64) -> Result<u64, Errno> {
    let h = &a.header().heap;
    let l = a.layout();
    let top = h
        .top
        .load(Relaxed)
        .max(l.heap_off)
        .div_ceil(align)
        .checked_mul(align)
        .ok_or(Errno::ENOMEM)?;
    let new_top = top.checked_add(size).ok_or(Errno::ENOMEM)?;
    if new_top > h.end.load(Relaxed).min(l.size) {
        return Err(Errno::ENOMEM);
    }
    a.reserve(top, size)?;
    h.top.store(new_top, Relaxed);
    Ok(top)
}

/// First fit on the run list; splits a larger run, keeping its tail listed.
/// The pages handed out (and the tail's first page) are reserved before
/// the list changes; a full file system gives ENOMEM with nothing changed.
fn take_run(a: &Arena, pages: u64) -> Result<Option<u64>, Errno> {
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

/// Bytes currently allocated.
pub fn in_use(a: &Arena) -> u64 {
    a.header().heap.in_use.load(Relaxed)
}
