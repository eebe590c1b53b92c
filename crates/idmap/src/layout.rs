//! "Everything except" layouts: map a whole range of container ids onto a
//! host range, but pass a few ids through unchanged (seed 003's motivating
//! example, what LXC and Incus users ask for and `unshare` does for a single
//! id).

use crate::error::{MapError, Problem};
use crate::extent::{Extent, Side};
use crate::map::IdMap;

/// Container ids `[first, first + count)` mapped onto host ids from
/// `host_base` on, except the ids in `keep`, which map to themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptLayout {
    /// First container id of the range (usually 0).
    pub first: u32,
    /// Number of container ids in the range.
    pub count: u32,
    /// Host id that container id `first` maps to.
    pub host_base: u32,
    /// Ids mapped to themselves, inside or outside the range.
    pub keep: Vec<u32>,
}

impl ExceptLayout {
    /// The map: first the kept ids (ascending, consecutive ones merged into
    /// one extent), then the rest of the range in ascending order, each
    /// piece at its offset from `host_base`. Fails with the kernel's EINVAL
    /// and the reason when the result is not a valid map (a kept id inside
    /// the host range, a range past 4294967294, more than 340 extents).
    pub fn build(&self) -> Result<IdMap, MapError> {
        let end = u64::from(self.first) + u64::from(self.count);
        if self.count == 0 {
            return Err(MapError::einval(None, Problem::ZeroCount));
        }
        if end > u64::from(u32::MAX) {
            return Err(MapError::einval(None, Problem::Wraps { side: Side::Upper }));
        }
        let mut keep = self.keep.clone();
        keep.sort_unstable();
        keep.dedup();
        // Runs of consecutive kept ids: (start, len).
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for id in keep {
            match runs.last_mut() {
                Some((s, n)) if u64::from(*s) + u64::from(*n) == u64::from(id) => *n += 1,
                _ => runs.push((id, 1)),
            }
        }
        let mut extents: Vec<Extent> = runs.iter().map(|&(s, n)| Extent::new(s, s, n)).collect();
        let mut cur = u64::from(self.first);
        for &(s, n) in &runs {
            let (s, e) = (u64::from(s), u64::from(s) + u64::from(n));
            if e <= cur || s >= end {
                continue;
            }
            if s > cur {
                extents.push(self.piece(cur, s));
            }
            cur = e;
        }
        if cur < end {
            extents.push(self.piece(cur, end));
        }
        IdMap::new(&extents)
    }

    /// Container ids `[from, to)` at their offset from `host_base`.
    fn piece(&self, from: u64, to: u64) -> Extent {
        let host = u64::from(self.host_base) + (from - u64::from(self.first));
        // Host ids past u32 are cut to u32 here and refused by IdMap::new
        // as a wrap or a start of 4294967295; keep the truncation explicit.
        Extent::new(from as u32, host as u32, (to - from) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_seed_003_example() {
        let map = ExceptLayout {
            first: 0,
            count: 1_000_000_000,
            host_base: 1_000_000,
            keep: vec![1001, 999],
        }
        .build()
        .unwrap();
        assert_eq!(
            map.extents(),
            &[
                Extent::new(999, 999, 1),
                Extent::new(1001, 1001, 1),
                Extent::new(0, 1_000_000, 999),
                Extent::new(1000, 1_001_000, 1),
                Extent::new(1002, 1_001_002, 999_998_998),
            ]
        );
    }

    #[test]
    fn merges_adjacent_kept_ids_and_skips_outside_ones() {
        let map = ExceptLayout {
            first: 0,
            count: 65536,
            host_base: 100_000,
            keep: vec![1000, 1001, 70_000],
        }
        .build()
        .unwrap();
        assert_eq!(
            map.extents(),
            &[
                Extent::new(1000, 1000, 2),
                Extent::new(70_000, 70_000, 1),
                Extent::new(0, 100_000, 1000),
                Extent::new(1002, 101_002, 64534),
            ]
        );
    }

    #[test]
    fn kept_id_inside_host_range_is_an_overlap() {
        let err = ExceptLayout {
            first: 0,
            count: 65536,
            host_base: 100_000,
            keep: vec![100_005],
        }
        .build()
        .unwrap_err();
        assert_eq!(err.errno, crate::Errno::EINVAL);
        assert!(matches!(
            err.problem,
            Problem::Overlap {
                side: Side::Lower,
                ..
            }
        ));
    }
}
