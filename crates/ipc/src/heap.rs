//! The arena's heap: small blocks by power-of-two class (32 B to 64 KiB)
//! on free lists, larger ones as runs of pages, all by offset.
//!
//! # Protocol
//! Everything is protected by the heap lock, a leaf: taken last, after any
//! registry or object lock, and never held while taking another. Each
//! change is a sequence of single-word stores ordered so that a holder
//! killed between any two leaves the lists well formed: at worst a block is
//! neither on a list nor owned (leaked), never on a list and owned.

use crate::arena::Arena;
use crate::arena::header::HEAP_CLASSES;
use crate::errno::Errno;
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

/// Allocates `size` bytes (zeroed), aligned to 32 bytes (small) or a page.
/// ENOMEM when the heap is full.
pub fn alloc(a: &Arena, size: u64) -> Result<u64, Errno> {
    let h = &a.header().heap;
    let _g = h.lock.lock()?;
    let off = if size <= MAX_SMALL {
        let (c, s) = class(size);
        let head = h.free[c].load(Relaxed);
        if head != 0 {
            let next = a.view::<AtomicU64>(head)?.load(Relaxed);
            h.free[c].store(next, Relaxed);
            zero(a, head, s)?;
            head
        } else {
            bump(a, s, if s >= PAGE { PAGE } else { s })?
        }
    } else {
        let pages = size.div_ceil(PAGE);
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

/// Frees a block from [`alloc`] of the same `size`.
pub fn free(a: &Arena, off: u64, size: u64) -> Result<(), Errno> {
    let h = &a.header().heap;
    let _g = h.lock.lock()?;
    if size <= MAX_SMALL {
        let (c, _) = class(size);
        a.view::<AtomicU64>(off)?
            .store(h.free[c].load(Relaxed), Relaxed);
        h.free[c].store(off, Relaxed);
    } else {
        let pages = size.div_ceil(PAGE);
        // Give the memory back to the file system, then list the run.
        a.punch(off, pages * PAGE);
        run_pages(a, off)?.store(pages, Relaxed);
        run_next(a, off)?.store(h.runs.load(Relaxed), Relaxed);
        h.runs.store(off, Relaxed);
    }
    h.in_use.fetch_sub(footprint(size), Relaxed);
    Ok(())
}

fn zero(a: &Arena, off: u64, len: u64) -> Result<(), Errno> {
    for w in a.view_slice::<AtomicU64>(off, (len / 8) as usize)? {
        w.store(0, Relaxed);
    }
    Ok(())
}

fn bump(a: &Arena, size: u64, align: u64) -> Result<u64, Errno> {
    let h = &a.header().heap;
    let top = h.top.load(Relaxed).div_ceil(align) * align;
    let new_top = top.checked_add(size).ok_or(Errno::ENOMEM)?;
    if new_top > h.end.load(Relaxed) {
        return Err(Errno::ENOMEM);
    }
    h.top.store(new_top, Relaxed);
    Ok(top)
}

/// First fit on the run list; splits a larger run, keeping its tail listed.
fn take_run(a: &Arena, pages: u64) -> Result<Option<u64>, Errno> {
    let h = &a.header().heap;
    let mut prev: Option<u64> = None;
    let mut cur = h.runs.load(Relaxed);
    while cur != 0 {
        let n = run_pages(a, cur)?.load(Relaxed);
        let next = run_next(a, cur)?.load(Relaxed);
        if n >= pages {
            let replacement = if n > pages {
                // The tail stays free: describe it fully before linking it.
                let tail = cur + pages * PAGE;
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
