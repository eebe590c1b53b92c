//! The search index of a map of 6 to 340 extents: a two-level static B-tree
//! over the sorted starts, branch-free and laid out for the cache.
//!
//! Linux binary-searches a sorted array (`map_id_range_down_max`: `bsearch`
//! with a comparison callback), about nine dependent, unpredictable steps
//! for 340 extents. Here the sorted starts are cut into blocks of 16 (one
//! cache line each) and a root of up to 32 separators (two cache lines)
//! holds the first start of every block but the first. A lookup counts the
//! separators `<= id` (which block) and then the starts `<= id` in that
//! block: two fixed-size, branch-free counts that the compiler turns into
//! SIMD compares, and exactly two dependent cache-line loads. The count is
//! the number of extents starting at or before `id`, so the candidate is
//! the extent just before it in sorted order.

use crate::MAX_EXTENTS;

/// Starts per block: one 64-byte cache line of u32.
const BLOCK: usize = 16;
/// Root separators: enough for `ceil(340 / 16) - 1 = 21` blocks after the first.
const ROOT: usize = 32;
const _: () = assert!(MAX_EXTENTS.div_ceil(BLOCK) - 1 <= ROOT);

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Block([u32; BLOCK]);

const _: () = assert!(core::mem::size_of::<Block>() == 64);

#[repr(C, align(64))]
#[derive(Clone)]
pub(crate) struct Index {
    /// `root[b]` = first start of block `b + 1`; unused slots hold u32::MAX.
    root: [u32; ROOT],
    /// The sorted starts in blocks of 16; the tail of the last block holds u32::MAX.
    blocks: Box<[Block]>,
}

impl Index {
    /// Builds the index over `starts`, which must be sorted ascending, hold
    /// no u32::MAX and number at most 340.
    pub(crate) fn new(starts: impl ExactSizeIterator<Item = u32>) -> Index {
        let n = starts.len();
        debug_assert!(n <= MAX_EXTENTS);
        let nblocks = n.div_ceil(BLOCK).max(1);
        let mut blocks = vec![Block([u32::MAX; BLOCK]); nblocks].into_boxed_slice();
        for (i, s) in starts.enumerate() {
            debug_assert!(s != u32::MAX);
            blocks[i / BLOCK].0[i % BLOCK] = s;
        }
        let mut root = [u32::MAX; ROOT];
        for b in 1..nblocks {
            root[b - 1] = blocks[b].0[0];
        }
        Index { root, blocks }
    }

    /// The number of starts `<= id`. `id` must not be u32::MAX (never mapped).
    #[inline]
    pub(crate) fn rank(&self, id: u32) -> usize {
        // Counting with a fold over fixed-size arrays keeps this branch-free;
        // the padding (u32::MAX) never counts because id < u32::MAX.
        let b = count_le(&self.root, id);
        // `b <= nblocks - 1` since the root holds nblocks - 1 real separators.
        let block = &self.blocks[b].0;
        b * BLOCK + count_le(block, id)
    }
}

#[inline(always)]
fn count_le<const N: usize>(keys: &[u32; N], id: u32) -> usize {
    let mut c = 0u32;
    for &k in keys {
        c += u32::from(k <= id);
    }
    c as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_counts_starts_at_or_below() {
        for n in [1usize, 5, 15, 16, 17, 31, 32, 33, 200, 340] {
            let starts: Vec<u32> = (0..n as u32).map(|i| i * 10 + 5).collect();
            let ix = Index::new(starts.iter().copied());
            for id in [
                0u32,
                4,
                5,
                6,
                14,
                15,
                16,
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
    }
}
