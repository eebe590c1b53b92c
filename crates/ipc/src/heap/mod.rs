//! The arena's heap: small blocks by power-of-two class (32 B to 64 KiB),
//! larger ones as runs of pages, all by offset.
//!
//! # Protocol
//! Two levels. Per cpu and per class up to 16 KiB, a bounded stack of free
//! blocks (cache.rs), pushed and popped in restartable sequences with no
//! lock. Behind them, the global lists and the top (global.rs), under the
//! heap lock, a leaf: taken last, after any registry or object lock, and
//! never held while taking another.
//!
//! - alloc: a block from this cpu's stack of its class; if the stack is
//!   empty (refill), under the lock one block from the class's list (or
//!   new memory) for the caller and up to half the stack's limit more from
//!   the list onto the stack, one at a time.
//! - free: the block onto this cpu's stack; if the stack is full (drain),
//!   under the lock half its limit from the stack onto the list, one at a
//!   time, then the block.
//! - Larger classes, page runs, and threads that cannot run an rseq
//!   section (cache.rs) use the lists under the lock only.
//!
//! A block moved between a stack and a list is held by the mover between
//! the pop and the push: a mover killed there leaks that one block. Every
//! other step is one store (cache.rs, global.rs), so a death anywhere
//! leaks at most one block, never gives one block to two owners.
//!
//! Accounting: the heap state's `in_use` counts the bytes the global level
//! handed out (to a caller, or onto a stack) and not taken back, under the
//! lock; the bytes in use are that less the bytes on the stacks (their
//! counts times their classes, read when asked). So a pop or a push on a
//! stack is the whole of an alloc or a free: one section, no count. Blocks
//! leave the global level counted after they are taken off a list, and
//! come back uncounted before they are put on one: a death in between
//! leaves a leaked block counted or not, but never a free block counted,
//! so the bytes in use plus the bytes free never exceed the bytes handed
//! out from the top (the audit checks it).
//!
//! Every offset read from a list or a stack is checked against the heap
//! and its class's alignment before it is followed or handed out.

mod audit;
pub(crate) mod cache;
mod global;

pub use audit::HeapStats;
pub(crate) use audit::audit;
pub(crate) use cache::{CACHE_CAP, Caches, cache_cpus};
#[cfg(feature = "testing")]
pub(crate) use cache::{CacheStack, CpuCache};

use crate::arena::Arena;
use crate::arena::header::HEAP_CLASSES;
use crate::errno::Errno;
use cache::Pop;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

const MIN_SHIFT: u32 = 5;
const PAGE: u64 = 4096;
/// The largest small block.
pub const MAX_SMALL: u64 = 1 << (MIN_SHIFT as usize + HEAP_CLASSES - 1);

/// The class of a small block of `size` bytes and its rounded size.
fn class(size: u64) -> (usize, u64) {
    let s = size.max(1 << MIN_SHIFT).next_power_of_two();
    ((s.trailing_zeros() - MIN_SHIFT) as usize, s)
}

/// The size of class `c`'s blocks.
fn class_size(c: usize) -> u64 {
    1 << (MIN_SHIFT as usize + c)
}

/// The bytes an allocation of `size` really takes.
pub fn footprint(size: u64) -> u64 {
    if size <= MAX_SMALL {
        class(size).1
    } else {
        size.div_ceil(PAGE).saturating_mul(PAGE)
    }
}

/// Whether `off` can be a block of `len` bytes aligned to `align`.
fn plausible(a: &Arena, off: u64, len: u64, align: u64) -> bool {
    off.is_multiple_of(align) && a.in_heap(off, len)
}

/// Allocates `size` bytes (zeroed), aligned to 32 bytes (small) or a page.
/// ENOMEM when the heap or the file system is full.
///
/// Lock state: takes the heap lock only to refill a cache, or for a size
/// without one (or a thread without rseq); leaves it free.
pub fn alloc(a: &Arena, k: Option<&Caches>, size: u64) -> Result<u64, Errno> {
    let off = alloc_uninit(a, k, size)?;
    zero(a, off, footprint(size))?;
    Ok(off)
}

/// As [`alloc`], but the bytes are whatever the block last held: for a
/// caller that writes every byte it will read (a message block).
pub fn alloc_uninit(a: &Arena, k: Option<&Caches>, size: u64) -> Result<u64, Errno> {
    if size <= MAX_SMALL {
        let (c, s) = class(size);
        return small(a, k, c, s);
    }
    if size > a.layout().size {
        return Err(Errno::ENOMEM);
    }
    let pages = size.div_ceil(PAGE).max(1);
    let g = global::lock(a)?;
    let off = match global::take_run(a, pages)? {
        Some(off) => off,
        None => global::bump(a, pages * PAGE, PAGE)?,
    };
    count(a, pages * PAGE);
    drop(g);
    Ok(off)
}

/// A block of class `c` (`s` bytes): from this cpu's cache, else from the
/// lists under the lock.
fn small(a: &Arena, k: Option<&Caches>, c: usize, s: u64) -> Result<u64, Errno> {
    let align = s.min(PAGE);
    if let Some(k) = k.filter(|k| k.limit(c) > 0) {
        // Bounded: each turn but the last drops an offset that is no
        // block of this class (leaked).
        for _ in 0..=CACHE_CAP {
            match k.pop(c) {
                Some(Pop::Block(off)) if plausible(a, off, s, align) => return Ok(off),
                Some(Pop::Block(_)) => {}
                Some(Pop::BadCount(n)) => {
                    k.reset(c, n);
                    return refill(a, k, c, s);
                }
                Some(Pop::Empty) => return refill(a, k, c, s),
                None => break,
            }
        }
    }
    let _g = global::lock(a)?;
    let off = match global::pop_free(a, c, s, align)? {
        Some(off) => off,
        None => global::bump(a, s, align)?,
    };
    count(a, s);
    Ok(off)
}

/// Half a stack's limit (at least one): what a refill or a drain moves.
fn batch(limit: u32) -> u32 {
    (limit / 2).max(1)
}

/// This cpu's stack of class `c` is empty: a block for the caller from the
/// list (or new memory), and a batch more from the list onto the stack.
fn refill(a: &Arena, k: &Caches, c: usize, s: u64) -> Result<u64, Errno> {
    let align = s.min(PAGE);
    let _g = global::lock(a)?;
    let off = match global::pop_free(a, c, s, align)? {
        Some(off) => off,
        None => global::bump(a, s, align)?,
    };
    count(a, s);
    for _ in 0..batch(k.limit(c)) {
        let Ok(Some(b)) = global::pop_free(a, c, s, align) else {
            break;
        };
        count(a, s);
        if k.push(c, b) != Some(true) {
            // Full meanwhile (another thread on this cpu), or moved to a
            // cpu whose stack is: back to the list.
            count(a, s.wrapping_neg());
            let _ = global::push_free(a, c, b);
            break;
        }
    }
    Ok(off)
}

/// Frees a block from [`alloc`] of the same `size`. EUCLEAN (and nothing
/// freed) for an offset that cannot be such a block.
///
/// Lock state: takes the heap lock only to drain a cache, or for a size
/// without one; leaves it free. When the heap lock is kept from a call
/// past its bound (`Lock::lock_leaf`), the block is leaked, not an error:
/// a free comes after the change it ends, which must not fail.
pub fn free(a: &Arena, k: Option<&Caches>, off: u64, size: u64) -> Result<(), Errno> {
    match free_locked(a, k, off, size) {
        Err(e) if e.0 == libc::ETIMEDOUT => Ok(()),
        r => r,
    }
}

fn free_locked(a: &Arena, k: Option<&Caches>, off: u64, size: u64) -> Result<(), Errno> {
    if size > MAX_SMALL {
        if size > a.layout().size {
            return Err(Errno::EUCLEAN);
        }
        let pages = size.div_ceil(PAGE);
        if !plausible(a, off, pages * PAGE, PAGE) {
            return Err(Errno::EUCLEAN);
        }
        let _g = global::lock(a)?;
        count(a, (pages * PAGE).wrapping_neg());
        return global::free_run(a, off, pages);
    }
    let (c, s) = class(size);
    if !plausible(a, off, s, s.min(PAGE)) {
        return Err(Errno::EUCLEAN);
    }
    if let Some(k) = k.filter(|k| k.limit(c) > 0) {
        match k.push(c, off) {
            Some(true) => return Ok(()),
            Some(false) => return drain(a, k, c, s, off),
            None => {}
        }
    }
    let _g = global::lock(a)?;
    count(a, s.wrapping_neg());
    global::push_free(a, c, off)
}

/// This cpu's stack of class `c` is full: a batch from it onto the list,
/// then `off` onto the stack (or the list).
fn drain(a: &Arena, k: &Caches, c: usize, s: u64, off: u64) -> Result<(), Errno> {
    let _g = global::lock(a)?;
    for _ in 0..batch(k.limit(c)) {
        match k.pop(c) {
            Some(Pop::Block(b)) if plausible(a, b, s, s.min(PAGE)) => {
                count(a, s.wrapping_neg());
                global::push_free(a, c, b)?;
            }
            Some(Pop::Block(_)) => {}
            Some(Pop::BadCount(n)) => {
                k.reset(c, n);
                break;
            }
            Some(Pop::Empty) | None => break,
        }
    }
    match k.push(c, off) {
        Some(true) => Ok(()),
        _ => {
            count(a, s.wrapping_neg());
            global::push_free(a, c, off)
        }
    }
}

/// Adds `delta` (two's complement) to the bytes the global level handed
/// out. Heap lock held.
fn count(a: &Arena, delta: u64) {
    let w = &a.header().heap.in_use;
    // Relaxed: written under the heap lock only (its release orders it);
    // readers without the lock take it as a statistic.
    w.store(w.load(Relaxed).wrapping_add(delta), Relaxed);
}

fn zero(a: &Arena, off: u64, len: u64) -> Result<(), Errno> {
    crate::arena::bytes::zero(a.view_slice::<AtomicU64>(off, (len / 8) as usize)?);
    Ok(())
}

/// Bytes currently allocated: what the global level handed out, less
/// what sits on the per-cpu stacks (0 if that is negative, as in a
/// corrupt arena).
pub fn in_use(a: &Arena) -> u64 {
    let n = a
        .header()
        .heap
        .in_use
        .load(Relaxed)
        .wrapping_sub(cache::cached_bytes(a));
    if (n as i64) < 0 { 0 } else { n }
}
