//! The search index of a map of 6 to 340 extents: a two-level static B-tree
//! over the sorted starts, branch-free and laid out for the cache.
//!
//! Linux binary-searches a sorted array (`map_id_range_down_max`: `bsearch`
//! with a comparison callback), about nine dependent, unpredictable steps
//! for 340 extents. Here the sorted starts are cut into blocks of 16 (one
//! cache line each) and a root of up to 32 separators (two cache lines)
//! holds the first start of every block but the first. A lookup finds how
//! many separators are `<= id` (which block) and then how many starts of
//! that block are: two fixed-size, branch-free SIMD comparisons and exactly
//! two dependent loads. The result is the number of extents starting at or
//! before `id`, so the candidate is the extent just before it in sorted order.
//!
//! In front of the tree sits a directory: the span from the first start to
//! the last end cut into at most 1024 equal buckets, each holding the rank
//! at its first id. Where extents are spread out (most real maps: a few
//! large ranges, or many evenly laid ones) a lookup is one directory load
//! and a compare or two against the sorted starts; buckets holding more than
//! a few starts are marked dense and send the lookup to the tree, so no
//! layout costs more than the tree plus one load.

use crate::MAX_EXTENTS;
use lanes::Keys16;

/// Starts per block: one 64-byte cache line of u32.
const BLOCK: usize = 16;
const _: () = assert!(MAX_EXTENTS.div_ceil(BLOCK) - 1 <= 2 * BLOCK);

/// Directory buckets at most; a bucket with more starts than `SPARSE` is dense.
const BUCKETS: u64 = 1024;
const SPARSE: u16 = 4;
const DENSE: u16 = 1 << 15;

#[derive(Clone)]
pub(crate) struct Index {
    /// First start; ids below it rank 0.
    lo: u32,
    /// log2 of the bucket width.
    shift: u32,
    /// Per bucket: the rank at its first id, or DENSE.
    dir: Box<[u16]>,
    /// The sorted starts.
    starts: Box<[u32]>,
    /// Separators: `root[b]` = first start of block `b + 1`; unused slots
    /// hold u32::MAX. 32 slots: enough for `ceil(340 / 16) = 22` blocks.
    root: [Keys16; 2],
    /// The sorted starts in blocks of 16; the tail of the last block holds u32::MAX.
    blocks: Box<[Keys16]>,
}

impl Index {
    /// Builds the index over `starts`, which must be sorted ascending, hold
    /// no u32::MAX and number at most 340.
    /// `end` is one past the last id of the last-ending extent.
    pub(crate) fn new(starts: impl ExactSizeIterator<Item = u32>, end: u64) -> Index {
        let n = starts.len();
        debug_assert!(n <= MAX_EXTENTS);
        let sorted: Vec<u32> = starts.collect();
        let nblocks = n.div_ceil(BLOCK).max(1);
        let mut plain = vec![[u32::MAX; BLOCK]; nblocks];
        for (i, &s) in sorted.iter().enumerate() {
            debug_assert!(s != u32::MAX);
            plain[i / BLOCK][i % BLOCK] = s;
        }
        // The directory over [lo, end).
        let lo = sorted.first().copied().unwrap_or(0);
        let span = end.saturating_sub(u64::from(lo)).max(1);
        let mut shift = 0;
        while (span - 1) >> shift >= BUCKETS {
            shift += 1;
        }
        let nb = ((span - 1) >> shift) + 1;
        let mut dir = Vec::with_capacity(nb as usize);
        let mut r = 0usize;
        for b in 0..nb {
            let first = u64::from(lo) + (b << shift);
            let next = first + (1 << shift);
            while r < n && u64::from(sorted[r]) <= first {
                r += 1;
            }
            let inside = sorted[r..]
                .iter()
                .take_while(|&&s| u64::from(s) < next)
                .count();
            dir.push(if inside > SPARSE as usize {
                DENSE
            } else {
                r as u16
            });
        }
        let mut root = [[u32::MAX; BLOCK]; 2];
        for b in 1..nblocks {
            root[(b - 1) / BLOCK][(b - 1) % BLOCK] = plain[b][0];
        }
        Index {
            lo,
            shift,
            dir: dir.into_boxed_slice(),
            starts: sorted.into_boxed_slice(),
            root: root.map(|k| Keys16::new(&k)),
            blocks: plain.iter().map(Keys16::new).collect(),
        }
    }

    /// The number of starts `<= id`.
    #[inline]
    pub(crate) fn rank(&self, id: u32) -> usize {
        let Some(off) = id.checked_sub(self.lo) else {
            return 0;
        };
        match self.dir.get((off >> self.shift) as usize) {
            // Past the last end: every start is below.
            None => self.starts.len(),
            Some(&d) if d & DENSE == 0 => {
                // At most SPARSE starts lie in the bucket beyond its rank.
                let mut r = d as usize;
                while self.starts.get(r).is_some_and(|&s| s <= id) {
                    r += 1;
                }
                r
            }
            Some(_) => self.tree_rank(id),
        }
    }

    /// The rank from the two-level tree. `id` lies inside the directory's
    /// span, so below u32::MAX, which the tree's padding requires.
    #[inline]
    fn tree_rank(&self, id: u32) -> usize {
        // Both levels are sorted with u32::MAX padding (never <= id since
        // id < u32::MAX), so the keys `<= id` form a prefix of each.
        let b = if self.blocks.len() == 1 {
            0
        } else {
            let lo = self.root[0].prefix_le(id);
            if lo < BLOCK {
                lo
            } else {
                BLOCK + self.root[1].prefix_le(id)
            }
        };
        // `b <= nblocks - 1` since the root holds nblocks - 1 real separators.
        b * BLOCK + self.blocks[b].prefix_le(id)
    }
}

#[cfg(target_arch = "x86_64")]
mod lanes {
    //! 16 sorted keys and "how many are `<= id`", with SSE2 on x86-64.
    //!
    //! # Safety
    //! SSE2 is part of the x86-64 baseline, so the `#[target_feature]`
    //! function below may be called from any x86-64 code; the assertion on
    //! `target_feature = "sse2"` makes a build without it fail instead.
    #![allow(unsafe_code)]
    use core::arch::x86_64::{
        __m128i, _mm_cmpgt_epi32, _mm_movemask_epi8, _mm_packs_epi16, _mm_packs_epi32,
        _mm_set_epi32, _mm_set1_epi32,
    };

    #[cfg(not(target_feature = "sse2"))]
    compile_error!("ipcns-idmap needs SSE2 on x86-64 (part of the baseline)");

    /// Keys with the sign bit flipped, so that signed compares order them
    /// as unsigned. One cache line.
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    pub(super) struct Keys16([__m128i; 4]);

    const _: () = assert!(core::mem::size_of::<Keys16>() == 64);

    const BIAS: u32 = 0x8000_0000;

    impl Keys16 {
        pub(super) fn new(k: &[u32; 16]) -> Keys16 {
            let b = |i: usize| (k[i] ^ BIAS) as i32;
            // SAFETY: SSE2 is enabled for every x86-64 target (module doc).
            let q = |i: usize| unsafe { _mm_set_epi32(b(i + 3), b(i + 2), b(i + 1), b(i)) };
            Keys16([q(0), q(4), q(8), q(12)])
        }

        /// How many keys are `<= id`, the keys being sorted ascending.
        #[inline]
        pub(super) fn prefix_le(&self, id: u32) -> usize {
            // SAFETY: SSE2 is enabled for every x86-64 target (module doc).
            unsafe { prefix_le_sse2(self, id) }
        }
    }

    #[target_feature(enable = "sse2")]
    #[inline]
    fn prefix_le_sse2(k: &Keys16, id: u32) -> usize {
        let v = _mm_set1_epi32((id ^ BIAS) as i32);
        // One byte per key, 0xff where key > id: a suffix of the sorted keys.
        let gt = _mm_packs_epi16(
            _mm_packs_epi32(_mm_cmpgt_epi32(k.0[0], v), _mm_cmpgt_epi32(k.0[1], v)),
            _mm_packs_epi32(_mm_cmpgt_epi32(k.0[2], v), _mm_cmpgt_epi32(k.0[3], v)),
        );
        let mask = _mm_movemask_epi8(gt) as u32 | 1 << 16;
        mask.trailing_zeros() as usize
    }
}

/// The portable form: the same prefix count with plain compares.
#[cfg(not(target_arch = "x86_64"))]
mod lanes {
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    pub(super) struct Keys16([u32; 16]);

    impl Keys16 {
        pub(super) fn new(k: &[u32; 16]) -> Keys16 {
            Keys16(*k)
        }

        #[inline]
        pub(super) fn prefix_le(&self, id: u32) -> usize {
            let mut mask = 0u32;
            for (i, &k) in self.0.iter().enumerate() {
                mask |= u32::from(k <= id) << i;
            }
            mask.trailing_ones() as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_counts_starts_at_or_below() {
        for n in [1usize, 5, 15, 16, 17, 31, 32, 33, 200, 256, 257, 340] {
            let starts: Vec<u32> = (0..n as u32).map(|i| i * 10 + 5).collect();
            let ix = Index::new(starts.iter().copied(), u64::from(starts[n - 1]) + 3);
            for id in [
                0u32,
                4,
                5,
                6,
                14,
                15,
                16,
                2565,
                2566,
                3399,
                3400,
                3405,
                100_000,
                u32::MAX - 1,
            ] {
                let want = starts.iter().filter(|&&s| s <= id).count();
                assert_eq!(ix.rank(id), want, "n={n} id={id}");
            }
        }
        // Keys on both sides of the sign bit.
        let starts: Vec<u32> = (0..40u32).map(|i| i * 100_000_000).collect();
        let ix = Index::new(starts.iter().copied(), 3_900_000_001);
        for id in [
            0,
            1,
            2_147_483_647,
            2_147_483_648,
            3_999_999_999,
            4_000_000_000,
            u32::MAX - 1,
        ] {
            let want = starts.iter().filter(|&&s| s <= id).count();
            assert_eq!(ix.rank(id), want, "id={id}");
        }
        // Dense buckets: 300 starts crowded near 0, one far away.
        let mut starts: Vec<u32> = (0..300u32).map(|i| i * 3).collect();
        starts.push(4_000_000_000);
        let ix = Index::new(starts.iter().copied(), 4_000_000_010);
        for id in [
            0u32,
            1,
            3,
            500,
            897,
            898,
            899,
            900,
            1_000_000,
            3_999_999_999,
            4_000_000_000,
            4_000_000_005,
        ] {
            let want = starts.iter().filter(|&&s| s <= id).count();
            assert_eq!(ix.rank(id), want, "dense id={id}");
        }
    }
}
