//! `IdMap`: up to 5 extents inline in one cache line, 6 to 340 in sorted
//! forward and reverse arrays with a search index each, as in Linux
//! (`struct uid_gid_map`), with lookups both ways.

use crate::error::{MapError, Problem};
use crate::extent::{Extent, Side};
use crate::index::Index;
use crate::{MAX_EXTENTS, MAX_INLINE_EXTENTS, OVERFLOW_ID};

/// A user-namespace id map (`struct uid_gid_map`).
///
/// Holds between 0 and 340 extents whose upper ranges are pairwise disjoint
/// and whose lower ranges are pairwise disjoint, none wrapping, no start at
/// 4294967295: exactly the maps `map_write` accepts (plus the empty map of a
/// namespace whose map is not written yet).
///
/// # Layout
/// 64 bytes, aligned to 64: one cache line. Up to 5 extents are stored in
/// it and scanned linearly, as Linux does; from the 6th on the extents live
/// behind one pointer, in two sorted arrays with a branch-free index each.
#[repr(C, align(64))]
#[derive(Clone)]
pub struct IdMap {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Inline {
        len: InlineLen,
        extents: [Extent; MAX_INLINE_EXTENTS],
    },
    Large(Box<Large>),
}

/// The number of inline extents. An enum so that its unused values give
/// `Repr` its discriminant for free and the whole map fits in 64 bytes.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum InlineLen {
    L0,
    L1,
    L2,
    L3,
    L4,
    L5,
}

impl InlineLen {
    const ALL: [InlineLen; MAX_INLINE_EXTENTS + 1] = [
        InlineLen::L0,
        InlineLen::L1,
        InlineLen::L2,
        InlineLen::L3,
        InlineLen::L4,
        InlineLen::L5,
    ];
}

#[derive(Clone)]
struct Large {
    /// As written: the order `map_write` checks and translates them in.
    written: Box<[Extent]>,
    /// Sorted by `first`: the kernel's `forward` array.
    forward: Box<[Extent]>,
    /// Sorted by `lower_first`: the kernel's `reverse` array.
    reverse: Box<[Extent]>,
    down: Index,
    up: Index,
}

const _: () = {
    assert!(core::mem::size_of::<IdMap>() == 64);
    assert!(core::mem::align_of::<IdMap>() == 64);
};

impl Default for IdMap {
    fn default() -> Self {
        IdMap::empty()
    }
}

impl IdMap {
    /// The map of a namespace whose map has not been written: maps nothing.
    pub const fn empty() -> IdMap {
        IdMap {
            repr: Repr::Inline {
                len: InlineLen::L0,
                extents: [Extent::new(0, 0, 0); MAX_INLINE_EXTENTS],
            },
        }
    }

    /// The initial user namespace's map, `0 0 4294967295`.
    pub const fn identity() -> IdMap {
        let mut extents = [Extent::new(0, 0, 0); MAX_INLINE_EXTENTS];
        extents[0] = Extent::new(0, 0, u32::MAX);
        IdMap {
            repr: Repr::Inline {
                len: InlineLen::L1,
                extents,
            },
        }
    }

    /// Builds a map from extents in written order, applying `map_write`'s
    /// per-extent checks (step 6 of reference/idmap.md): starts below
    /// 4294967295, count at least 1, no wrap, no overlap on either side, at
    /// most 340. Errors name the 1-based extent as the line. An empty slice
    /// gives the empty map (only *writing* an empty map is refused; see
    /// [`IdMap::parse`]).
    pub fn new(extents: &[Extent]) -> Result<IdMap, MapError> {
        let mut b = Builder::default();
        for (i, e) in extents.iter().enumerate() {
            b.push(i + 1, *e, i + 1 < extents.len())?;
        }
        Ok(b.finish())
    }

    /// Number of extents.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Inline { len, .. } => *len as usize,
            Repr::Large(l) => l.forward.len(),
        }
    }

    /// Whether the map has no extent (the namespace maps nothing).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether Linux looks this map up by binary search over sorted arrays
    /// (6 or more extents) rather than a linear scan of the inline extents.
    pub fn is_sorted_form(&self) -> bool {
        matches!(self.repr, Repr::Large(_))
    }

    /// The extents in the order the kernel prints them back: written order
    /// for up to 5, sorted by `first` from 6 on.
    pub fn extents(&self) -> &[Extent] {
        match &self.repr {
            Repr::Inline { len, extents } => &extents[..*len as usize],
            Repr::Large(l) => &l.forward,
        }
    }

    /// The extents in the order they were written (and are checked and
    /// translated by `map_write`).
    pub fn extents_written(&self) -> &[Extent] {
        match &self.repr {
            Repr::Inline { len, extents } => &extents[..*len as usize],
            Repr::Large(l) => &l.written,
        }
    }

    /// The extents sorted by `lower_first` (the kernel's `reverse` array for
    /// large maps; sorted on demand for inline ones).
    pub fn extents_by_lower(&self) -> Vec<Extent> {
        match &self.repr {
            Repr::Inline { .. } => {
                let mut v = self.extents().to_vec();
                v.sort_by_key(|e| e.lower_first);
                v
            }
            Repr::Large(l) => l.reverse.to_vec(),
        }
    }

    /// The extent holding `id` on `side` (`Upper`: the id inside the
    /// namespace; `Lower`: the id outside).
    #[inline]
    pub fn find(&self, side: Side, id: u32) -> Option<&Extent> {
        match &self.repr {
            Repr::Inline { len, extents } => extents[..*len as usize]
                .iter()
                .find(|e| e.contains(side, id)),
            Repr::Large(l) => {
                let (index, sorted) = match side {
                    Side::Upper => (&l.down, &l.forward),
                    Side::Lower => (&l.up, &l.reverse),
                };
                // The last extent starting at or before `id` is the only
                // candidate (4294967295 ranks past every start and is in no
                // extent, so it needs no special case).
                let e = sorted.get(index.rank(id).wrapping_sub(1))?;
                e.contains(side, id).then_some(e)
            }
        }
    }

    /// `map_id_down`: the id outside for `id` inside the namespace, or
    /// `None` when unmapped (the kernel's `(u32)-1`).
    #[inline]
    pub fn map_down(&self, id: u32) -> Option<u32> {
        self.find(Side::Upper, id)
            .map(|e| e.lower_first + (id - e.first))
    }

    /// `map_id_up`: the id inside the namespace for `id` outside, or `None`.
    #[inline]
    pub fn map_up(&self, id: u32) -> Option<u32> {
        self.find(Side::Lower, id)
            .map(|e| e.first + (id - e.lower_first))
    }

    /// `map_id_range_down`: the outside start of `[id, id + count)`, which
    /// must lie inside one extent. `count` 0, or a range past 4294967295,
    /// maps nothing.
    pub fn map_range_down(&self, id: u32, count: u32) -> Option<u32> {
        self.map_range(Side::Upper, id, count)
    }

    /// The inside start of the outside range `[id, id + count)`; see
    /// [`IdMap::map_range_down`].
    pub fn map_range_up(&self, id: u32, count: u32) -> Option<u32> {
        self.map_range(Side::Lower, id, count)
    }

    fn map_range(&self, side: Side, id: u32, count: u32) -> Option<u32> {
        let last = id.checked_add(count.checked_sub(1)?)?;
        let e = self.find(side, id)?;
        if !e.contains(side, last) {
            return None;
        }
        Some(match side {
            Side::Upper => e.lower_first + (id - e.first),
            Side::Lower => e.first + (id - e.lower_first),
        })
    }

    /// `from_kuid_munged`: `map_up`, with unmapped ids shown as the
    /// overflow id 65534.
    pub fn map_up_or_overflow(&self, id: u32) -> u32 {
        self.map_up(id).unwrap_or(OVERFLOW_ID)
    }

    /// `map_down`, with unmapped ids given as the overflow id 65534.
    pub fn map_down_or_overflow(&self, id: u32) -> u32 {
        self.map_down(id).unwrap_or(OVERFLOW_ID)
    }

    /// The map seen from the other side: every extent's upper and lower
    /// ranges swapped.
    pub fn inverted(&self) -> IdMap {
        let inv: Vec<Extent> = self
            .extents_written()
            .iter()
            .map(Extent::inverted)
            .collect();
        // Swapping sides keeps every per-extent and pairwise rule.
        IdMap::new(&inv).expect("the inverse of a valid map is valid")
    }
}

impl PartialEq for IdMap {
    /// Two maps are equal when they hold the same extents in the same
    /// (read-back) order.
    fn eq(&self, other: &IdMap) -> bool {
        self.extents() == other.extents()
    }
}

impl Eq for IdMap {}

impl core::fmt::Debug for IdMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.extents()).finish()
    }
}

/// Accumulates extents one by one with `map_write`'s checks, in its order.
#[derive(Default)]
pub(crate) struct Builder {
    extents: Vec<Extent>,
}

impl Builder {
    /// Adds extent `e`, read from `line`; `more` says whether another line
    /// follows (the kernel refuses the 340th extent when more text follows).
    pub(crate) fn push(&mut self, line: usize, e: Extent, more: bool) -> Result<(), MapError> {
        let err = |p| Err(MapError::einval(Some(line), p));
        // map_write: "Verify we have been given valid starting values".
        if e.first == u32::MAX {
            return err(Problem::StartIsMax { side: Side::Upper });
        }
        if e.lower_first == u32::MAX {
            return err(Problem::StartIsMax { side: Side::Lower });
        }
        // map_write: "Verify count is not zero and does not cause the extent to wrap".
        if e.count == 0 {
            return err(Problem::ZeroCount);
        }
        for side in [Side::Upper, Side::Lower] {
            if e.start(side).wrapping_add(e.count) <= e.start(side) {
                return err(Problem::Wraps { side });
            }
        }
        // mappings_overlap: the upper range is checked before the lower one,
        // against each earlier extent in turn.
        for (i, prev) in self.extents.iter().enumerate() {
            for side in [Side::Upper, Side::Lower] {
                if e.overlaps(prev, side) {
                    return err(Problem::Overlap { side, other: i + 1 });
                }
            }
        }
        // map_write: "(new_map.nr_extents + 1) == UID_GID_MAP_MAX_EXTENTS &&
        // (next_line != NULL)" -> EINVAL.
        if self.extents.len() + 1 == MAX_EXTENTS && more {
            return Err(MapError::einval(Some(line + 1), Problem::TooMany));
        }
        self.extents.push(e);
        Ok(())
    }

    /// The map, in the kernel's arrangement: inline up to 5 in written
    /// order, else sorted forward and reverse copies (`sort_idmaps`).
    pub(crate) fn finish(self) -> IdMap {
        let n = self.extents.len();
        if n <= MAX_INLINE_EXTENTS {
            let mut extents = [Extent::new(0, 0, 0); MAX_INLINE_EXTENTS];
            extents[..n].copy_from_slice(&self.extents);
            return IdMap {
                repr: Repr::Inline {
                    len: InlineLen::ALL[n],
                    extents,
                },
            };
        }
        let written = self.extents.clone().into_boxed_slice();
        let mut forward = self.extents;
        forward.sort_unstable_by_key(|e| e.first);
        let mut reverse = forward.clone();
        reverse.sort_unstable_by_key(|e| e.lower_first);
        let end = |side: Side| {
            forward
                .iter()
                .map(|e| u64::from(e.start(side)) + u64::from(e.count))
                .max()
                .unwrap_or(0)
        };
        let down = Index::new(forward.iter().map(|e| e.first), end(Side::Upper));
        let up = Index::new(reverse.iter().map(|e| e.lower_first), end(Side::Lower));
        IdMap {
            repr: Repr::Large(Box::new(Large {
                written,
                forward: forward.into_boxed_slice(),
                reverse: reverse.into_boxed_slice(),
                down,
                up,
            })),
        }
    }
}
