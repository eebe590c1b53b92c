//! `FreeList`: per-cpu stacks of 32-bit block indexes into a region of
//! equal blocks, for allocator caches; the region and the heads may be shared
//! between processes that map them at different addresses.
//!
//! # Protocol
//!
//! One head per possible cpu (see [`ops::list_push`] for the encoding; zeroed
//! memory is a set of empty lists). Element `i` is the block at `region + i *
//! block_size`, so 32-bit indexes cover regions of 4 GiB and more (64 GiB of
//! 32-byte blocks is 2^31 indexes). `push` puts an element on the current
//! cpu's list, `pop` takes one from it; both are single critical sections,
//! retried on abort. A free block's first 4 bytes belong to the list (the
//! link); the rest of it is untouched. `take_all` walks every list and needs
//! exclusive access.
//!
//! Heads and links are shared memory that a faulty process may corrupt:
//! every index read from them is checked against the number of blocks before
//! it is dereferenced, and reported as [`BadIndex`] if out of range, never a
//! fault or a panic.

#![allow(unsafe_code)]

use crate::ops::{self, BadIndex, Blocks, Index, Outcome, Slots};
use crate::percpu::PerCpu;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Per-cpu free lists of block indexes into one region.
pub struct FreeList {
    heads: PerCpu<AtomicU64>,
    slots: Slots,
    blocks: Blocks,
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

    /// Lists with heads `heads` over `blocks` blocks of `block_size` bytes at
    /// `region` (`blocks * block_size` bytes in all; element `i` is the
    /// block at `region + i * block_size`). `block_size` is any non-zero
    /// multiple of 4; a free block's first 4 bytes hold the link.
    ///
    /// # Panics
    ///
    /// If `block_size` is 0 or not a multiple of 4, `region` is not
    /// 4-aligned, or `blocks * block_size` exceeds `isize::MAX`.
    ///
    /// # Safety
    ///
    /// `region .. region + blocks * block_size` stays mapped and writable
    /// while the list lives; every process using the heads describes a
    /// region holding the same data with the same `block_size` and `blocks`;
    /// nobody writes the first 4 bytes of a block while it is on a list; and
    /// every process using the heads runs in an rseq mode, or every one in
    /// the fallback.
    pub unsafe fn new(
        heads: PerCpu<AtomicU64>,
        region: *mut u8,
        block_size: usize,
        blocks: u32,
    ) -> FreeList {
        // SAFETY: the region's validity is the caller's promise above.
        let blocks = unsafe { Blocks::new(region, block_size, blocks) };
        let slots = heads.slots();
        FreeList {
            heads,
            slots,
            blocks,
        }
    }

    /// Number of blocks: valid indexes are `0 .. blocks()`.
    pub fn blocks(&self) -> u32 {
        self.blocks.len()
    }

    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.blocks.size()
    }

    /// Pushes block `index` on the current cpu's list; returns that cpu.
    ///
    /// # Errors
    ///
    /// [`BadIndex`] if `index` is not below [`blocks`](Self::blocks).
    #[inline]
    pub fn push(&self, index: u32) -> Result<u32, BadIndex> {
        loop {
            // SAFETY: heads and region per `new`; the operation checks
            // `index`; the caller gives the block up.
            match unsafe { ops::list_push(&self.slots, Index::Cpu, 0, &self.blocks, index) }? {
                Outcome::Success { slot, .. } => return Ok(slot),
                Outcome::Miss { slot } => return Ok(slot), // push never misses
                Outcome::Abort => continue,
            }
        }
    }

    /// Pops a block index from the current cpu's list (`None` if that list
    /// is empty; other cpus' lists are not searched).
    ///
    /// # Errors
    ///
    /// [`BadIndex`] if the list's first element is out of range (a corrupted
    /// head or link); nothing was read through it and the list is left as
    /// it is, so later pops on this cpu report the same until
    /// [`take_all`](Self::take_all) empties the lists.
    #[inline]
    pub fn pop(&self) -> Result<Option<u32>, BadIndex> {
        loop {
            // SAFETY: heads and region per `new`; the operation checks every
            // index it reads before reading through it.
            match unsafe { ops::list_pop(&self.slots, Index::Cpu, 0, &self.blocks) }? {
                Outcome::Success { value, .. } => return Ok(Some(value)),
                Outcome::Miss { .. } => return Ok(None),
                Outcome::Abort => continue,
            }
        }
    }

    /// Number of lists (possible cpus).
    pub fn cpus(&self) -> usize {
        self.heads.len()
    }

    /// Empties every list and returns their elements in ascending order.
    /// Needs exclusive access (no concurrent push or pop, in any process).
    ///
    /// The lists are emptied even when they are corrupt. The walk is
    /// bounded: each list is followed with Brent's cycle detection, and all
    /// lists together may hold at most [`blocks`](Self::blocks) elements, so
    /// a cyclic list (or memory changing under the walk) stops it.
    ///
    /// # Errors
    ///
    /// [`BadIndex`] if an index is out of range or met twice (a cycle, or a
    /// block on two lists, as a double push makes): the free set is then
    /// unknown, and no element is returned.
    pub fn take_all(&mut self) -> Result<Vec<u32>, BadIndex> {
        let mut out = Vec::new();
        let mut bad = None;
        for head in self.heads.iter() {
            if bad.is_none() {
                bad = self
                    .walk(head.load(Ordering::Acquire) as u32, &mut out)
                    .err();
            }
            head.store(
                head.load(Ordering::Relaxed) & !0xffff_ffff,
                Ordering::Release,
            );
        }
        if let Some(b) = bad {
            return Err(b);
        }
        out.sort_unstable();
        if let Some(w) = out.windows(2).find(|w| w[0] == w[1]) {
            return Err(BadIndex(w[0]));
        }
        Ok(out)
    }

    /// Appends the elements of the list starting at `enc` (index + 1) to
    /// `out`, checking each index, stopping at a cycle (Brent: `seen` is
    /// saved at each power of two of steps, and met again once the walk
    /// loops) and when `out` would exceed the number of blocks.
    fn walk(&self, mut enc: u32, out: &mut Vec<u32>) -> Result<(), BadIndex> {
        let (mut seen, mut power, mut steps) = (0u32, 1usize, 0usize);
        while enc != 0 {
            let index = enc - 1;
            let link = self.blocks.block(index)?;
            if enc == seen || out.len() >= self.blocks.len() as usize {
                return Err(BadIndex(index));
            }
            out.push(index);
            steps += 1;
            if steps == power {
                (seen, power, steps) = (enc, power * 2, 0);
            }
            // SAFETY: `link` is the first word of a block inside the region
            // (index checked above). Relaxed: access is exclusive, so
            // whatever made it so (a join, a wait) ordered the pushes that
            // wrote the links before this walk.
            enc = unsafe { AtomicU32::from_ptr(link.cast()) }.load(Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: u32 = 32;
    const SIZE: usize = 8;

    #[test]
    fn push_pop_take() {
        let mut region = vec![0u64; BLOCKS as usize * SIZE / 8];
        // SAFETY: the region outlives the list (dropped first) and is not
        // otherwise written.
        let mut l = unsafe {
            FreeList::new(
                FreeList::new_heads(),
                region.as_mut_ptr().cast(),
                SIZE,
                BLOCKS,
            )
        };
        assert_eq!(l.push(BLOCKS), Err(BadIndex(BLOCKS)));
        assert_eq!(l.push(u32::MAX), Err(BadIndex(u32::MAX)));
        for i in 0..BLOCKS {
            l.push(i).unwrap();
        }
        let a = l.pop().unwrap().unwrap();
        let b = l.pop().unwrap().unwrap();
        assert_ne!(a, b);
        l.push(a).unwrap();
        l.push(b).unwrap();
        assert_eq!(l.take_all(), Ok((0..BLOCKS).collect::<Vec<u32>>()));
        assert_eq!(l.take_all(), Ok(Vec::new()));
        assert_eq!(l.pop(), Ok(None));
        drop(l);
    }

    /// Corrupt heads and links are reported, not followed; `take_all` stops
    /// on cycles and duplicates and empties the lists anyway.
    #[test]
    fn corruption_is_reported() {
        let mut region = vec![0u64; BLOCKS as usize * SIZE / 8];
        let base: *mut u8 = region.as_mut_ptr().cast();
        let heads = FreeList::new_heads();
        let head_words: Vec<*const AtomicU64> = heads.iter().map(|h| h as *const _).collect();
        let set_heads = |enc: u32| {
            for &h in &head_words {
                // SAFETY: the heads live in the list, alive while this runs.
                unsafe { &*h }.store(u64::from(enc), Ordering::Relaxed);
            }
        };
        // SAFETY: as in `push_pop_take`.
        let mut l = unsafe { FreeList::new(heads, base, SIZE, BLOCKS) };

        // A head past the last block: pop and take_all report it.
        set_heads(BLOCKS + 1);
        assert_eq!(l.pop(), Err(BadIndex(BLOCKS)));
        set_heads(u32::MAX);
        assert_eq!(l.pop(), Err(BadIndex(u32::MAX - 1)));
        assert_eq!(l.take_all(), Err(BadIndex(u32::MAX - 1)));
        assert_eq!(l.pop(), Ok(None), "take_all emptied the lists");

        // A link past the last block: the element is popped, its link is
        // then the head, and the next pop on that cpu reports it (each cpu
        // pops 3 once, whichever cpu the thread moves to).
        set_heads(3 + 1);
        // SAFETY: block 3's link word, inside the region.
        unsafe { base.add(3 * SIZE).cast::<u32>().write(BLOCKS + 7) };
        assert_eq!(l.take_all(), Err(BadIndex(BLOCKS + 6)));
        set_heads(3 + 1);
        let mut pops = 0;
        let err = loop {
            match l.pop() {
                Ok(got) => assert_eq!(got, Some(3)),
                Err(e) => break e,
            }
            pops += 1;
            assert!(pops <= l.cpus(), "{pops} pops of a corrupt list");
        };
        assert_eq!(err, BadIndex(BLOCKS + 6));

        // A cycle through valid blocks: 5 -> 9 -> 5.
        set_heads(5 + 1);
        // SAFETY: blocks 5 and 9's link words, inside the region.
        unsafe {
            base.add(5 * SIZE).cast::<u32>().write(9 + 1);
            base.add(9 * SIZE).cast::<u32>().write(5 + 1);
        }
        assert_eq!(l.take_all(), Err(BadIndex(5)));
        assert_eq!(l.take_all(), Ok(Vec::new()));

        // A double push makes a self-cycle (or a block on two lists).
        l.push(7).unwrap();
        l.push(7).unwrap();
        assert_eq!(l.take_all(), Err(BadIndex(7)));
        assert_eq!(l.take_all(), Ok(Vec::new()));
        drop(l);
    }
}
