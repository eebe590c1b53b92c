//! `PerCpuCounter`: a statistics counter whose increments touch only the
//! current cpu's cache line, with no atomic instruction in rseq modes.
//!
//! # Protocol
//!
//! `add` is one per-cpu load-add-store, retried on abort: a straight-line
//! section (`ops::try_add_pow2`) once the thread's area is known, else (first
//! use, fallback, after an abort) the general [`ops::add`]. `sum` adds the
//! slots with relaxed loads (exact once adders are quiescent). `reset` needs
//! exclusive access: a zeroing store from another cpu could be overwritten by
//! an in-flight rseq commit.
//!
//! # Safety
//!
//! The only `unsafe` is the calls of `ops::try_add_pow2` and [`ops::add`] on
//! the counter's own cells, which live as long as the counter.

#![allow(unsafe_code)]

use crate::ops::{self, Index, Outcome, Slots};
use crate::percpu::{PerCpu, Slot};
use core::sync::atomic::{AtomicU64, Ordering};

/// A per-cpu 64-bit counter (two's complement: `add(-1)` subtracts).
///
/// ```
/// let c = ipcns_rseq::PerCpuCounter::new();
/// c.add(5);
/// c.add(-2);
/// assert_eq!(c.sum(), 3);
/// ```
pub struct PerCpuCounter {
    cells: PerCpu<AtomicU64>,
    slots: Slots,
}

impl Default for PerCpuCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl PerCpuCounter {
    /// A zero counter on the heap.
    pub fn new() -> PerCpuCounter {
        Self::from_cells(PerCpu::new(|_| AtomicU64::new(0)))
    }

    /// A counter over `cells`, e.g. `PerCpu::from_raw` on a `MAP_SHARED`
    /// mapping of [`PerCpuCounter::bytes`] zeroed bytes.
    pub fn from_cells(cells: PerCpu<AtomicU64>) -> PerCpuCounter {
        let slots = cells.slots();
        PerCpuCounter { cells, slots }
    }

    /// Bytes needed in shared memory for a counter (one cache line per
    /// possible cpu).
    pub fn bytes() -> usize {
        PerCpu::<AtomicU64>::bytes(crate::possible_cpus())
    }

    /// The slot descriptor, for raw operations.
    pub fn slots(&self) -> Slots {
        self.slots
    }

    /// Adds `v` to the current cpu's slot.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        // SAFETY: `slots` describes `cells` (alive with self): 64-byte slots
        // (`Slot<AtomicU64>`, asserted below) whose offset 0 is the 8-aligned
        // AtomicU64.
        if unsafe { ops::try_add_pow2::<6>(&self.slots, 0, v as u64) } {
            return;
        }
        self.add_slow(v);
    }

    /// First use on this thread, fallback mode, or an abort: the general
    /// operation, retried until it commits.
    #[cold]
    #[inline(never)]
    fn add_slow(&self, v: i64) {
        loop {
            // SAFETY: as in `add`.
            let done = unsafe { ops::add(&self.slots, Index::Cpu, 0, v as u64) };
            if !matches!(done, Outcome::Abort) {
                return;
            }
        }
    }

    /// Adds one.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1);
    }

    /// The total over all cpus (exact when no `add` runs concurrently).
    pub fn sum(&self) -> i64 {
        self.cells
            .iter()
            .fold(0u64, |a, c| a.wrapping_add(c.load(Ordering::Relaxed))) as i64
    }

    /// Each cpu's slot.
    pub fn per_cpu(&self) -> Vec<i64> {
        self.cells
            .iter()
            .map(|c| c.load(Ordering::Relaxed) as i64)
            .collect()
    }

    /// Sets every slot to zero and returns the previous total. Needs `&mut`:
    /// no `add` may run concurrently (for a counter in shared memory, in any
    /// process either).
    pub fn reset(&mut self) -> i64 {
        let s = self.sum();
        for c in self.cells.iter() {
            c.store(0, Ordering::Relaxed);
        }
        s
    }
}

const _: () = assert!(core::mem::size_of::<Slot<AtomicU64>>() == 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_sum_reset() {
        let mut c = PerCpuCounter::new();
        for _ in 0..1000 {
            c.inc();
        }
        c.add(-10);
        assert_eq!(c.sum(), 990);
        assert_eq!(c.per_cpu().iter().sum::<i64>(), 990);
        assert_eq!(c.reset(), 990);
        assert_eq!(c.sum(), 0);
    }

    #[test]
    fn threads_sum_exactly() {
        let c = std::sync::Arc::new(PerCpuCounter::new());
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..50_000).for_each(|_| c.inc()))
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(c.sum(), 200_000);
    }
}
