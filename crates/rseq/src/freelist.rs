//! `FreeList`: per-cpu stacks of 32-bit offsets into a region, for allocator
//! caches; the region and the heads may be shared between processes that map
//! them at different addresses.
//!
//! # Protocol
//!
//! One head per possible cpu (see [`ops::list_push`] for the encoding; zeroed
//! memory is a set of empty lists). `push` puts an element on the current
//! cpu's list, `pop` takes one from it; both are single critical sections,
//! retried on abort. A free element's first 4 bytes belong to the list (the
//! link); the rest of it is untouched. `take_all` walks every list and needs
//! exclusive access.

#![allow(unsafe_code)]

use crate::ops::{self, Index, Outcome, Slots};
use crate::percpu::PerCpu;
use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An offset that cannot be an element: not a multiple of 4, or the element's
/// link word would end past the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadOffset(pub u32);

impl fmt::Display for BadOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offset {} is not a 4-aligned element inside the region",
            self.0
        )
    }
}

impl std::error::Error for BadOffset {}

/// Per-cpu free lists of offsets into one region.
pub struct FreeList {
    heads: PerCpu<AtomicU64>,
    slots: Slots,
    region: *mut u8,
    region_len: usize,
}

// SAFETY: the region is only accessed through the per-cpu operations, which
// are safe to run from any thread (rseq sections or atomics).
unsafe impl Send for FreeList {}
// SAFETY: as above.
unsafe impl Sync for FreeList {}

impl FreeList {
    /// Empty heads on the heap (for a process-private list).
    pub fn new_heads() -> PerCpu<AtomicU64> {
        PerCpu::new(|_| AtomicU64::new(0))
    }

    /// Bytes needed for the heads in shared memory (zeroed = all empty).
    pub fn heads_bytes() -> usize {
        PerCpu::<AtomicU64>::bytes(crate::possible_cpus())
    }

    /// Lists with heads `heads` over the `region_len` bytes at `region`.
    ///
    /// # Panics
    ///
    /// If `region_len` does not fit in `u32` (offsets are 32-bit) or `region`
    /// is not 4-aligned.
    ///
    /// # Safety
    ///
    /// `region .. region + region_len` stays mapped and writable while the
    /// list lives; every element pushed on these heads (by any process) is an
    /// offset into a region holding the same data; nobody writes the first 4
    /// bytes of an element while it is on a list; and every process using the
    /// heads runs in an rseq mode, or every one in the fallback.
    pub unsafe fn new(heads: PerCpu<AtomicU64>, region: *mut u8, region_len: usize) -> FreeList {
        assert!(
            u32::try_from(region_len).is_ok_and(|l| l < u32::MAX),
            "region too large"
        );
        assert!(
            (region as usize).is_multiple_of(4),
            "region must be 4-aligned"
        );
        let slots = heads.slots();
        FreeList {
            heads,
            slots,
            region,
            region_len,
        }
    }

    fn check(&self, off: u32) -> Result<(), BadOffset> {
        if off.is_multiple_of(4) && off as usize + 4 <= self.region_len {
            Ok(())
        } else {
            Err(BadOffset(off))
        }
    }

    /// Pushes element `off` on the current cpu's list; returns that cpu.
    ///
    /// # Errors
    ///
    /// [`BadOffset`] if `off` cannot be an element of the region.
    #[inline]
    pub fn push(&self, off: u32) -> Result<u32, BadOffset> {
        self.check(off)?;
        loop {
            // SAFETY: heads per `new`; `off` checked to be a 4-aligned link
            // inside the region; the caller gives the element up.
            match unsafe { ops::list_push(&self.slots, Index::Cpu, 0, self.region, off) } {
                Outcome::Success { slot, .. } => return Ok(slot),
                Outcome::Miss { slot } => return Ok(slot), // push never misses
                Outcome::Abort => continue,
            }
        }
    }

    /// Pops an element from the current cpu's list (`None` if that list is
    /// empty; other cpus' lists are not searched).
    #[inline]
    pub fn pop(&self) -> Option<u32> {
        loop {
            // SAFETY: heads per `new`; every element on them was checked at
            // push.
            match unsafe { ops::list_pop(&self.slots, Index::Cpu, 0, self.region) } {
                Outcome::Success { value, .. } => return Some(value),
                Outcome::Miss { .. } => return None,
                Outcome::Abort => continue,
            }
        }
    }

    /// Number of lists (possible cpus).
    pub fn cpus(&self) -> usize {
        self.heads.len()
    }

    /// Empties every list and returns their elements, cpu by cpu. Needs
    /// exclusive access (no concurrent push or pop, in any process). Stops a
    /// list after `region_len / 4` elements, so a corrupted (cyclic) list
    /// cannot loop forever.
    pub fn take_all(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        let limit = self.region_len / 4;
        for head in self.heads.iter() {
            let mut enc = head.load(Ordering::Acquire) as u32;
            let mut n = 0;
            while enc != 0 && n <= limit {
                let off = enc - 1;
                out.push(off);
                if self.check(off).is_err() {
                    break;
                }
                // SAFETY: `off` is a checked element inside the region.
                enc = unsafe { AtomicU32::from_ptr(self.region.add(off as usize).cast()) }
                    .load(Ordering::Relaxed);
                n += 1;
            }
            head.store(
                head.load(Ordering::Relaxed) & !0xffff_ffff,
                Ordering::Release,
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_take() {
        let mut region = vec![0u32; 64];
        // SAFETY: the region outlives the list (dropped first) and is not
        // otherwise written.
        let mut l =
            unsafe { FreeList::new(FreeList::new_heads(), region.as_mut_ptr().cast(), 256) };
        assert_eq!(l.push(2), Err(BadOffset(2)));
        assert_eq!(l.push(256), Err(BadOffset(256)));
        for off in (0..256).step_by(4) {
            l.push(off).unwrap();
        }
        let a = l.pop().unwrap();
        let b = l.pop().unwrap();
        assert_ne!(a, b);
        l.push(a).unwrap();
        l.push(b).unwrap();
        let mut all = l.take_all();
        all.sort_unstable();
        assert_eq!(all, (0..256).step_by(4).collect::<Vec<u32>>());
        assert_eq!(l.take_all(), Vec::<u32>::new());
        drop(l);
    }
}
