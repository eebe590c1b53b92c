//! The lookups ipcns is measured against, over the same extents: a linear
//! scan of every extent, and Linux's own binary search (`bsearch` from
//! lib/bsearch.c with `cmp_map_id` as the out-of-line comparison callback,
//! over arrays sorted by `first` and by `lower_first`). Used by
//! `ipcns bench idmap` and by the tests as second opinions.

use crate::extent::{Extent, Side};
use crate::map::IdMap;

/// Every extent in written order, scanned from the first: the design seed
/// 003 rejected for large maps.
pub struct LinearMap {
    extents: Vec<Extent>,
}

impl LinearMap {
    pub fn new(map: &IdMap) -> LinearMap {
        LinearMap {
            extents: map.extents_written().to_vec(),
        }
    }

    /// `map_id_down` by linear scan.
    #[inline(never)]
    pub fn map_down(&self, id: u32) -> Option<u32> {
        self.extents
            .iter()
            .find(|e| e.contains(Side::Upper, id))
            .map(|e| e.lower_first + (id - e.first))
    }

    /// `map_id_up` by linear scan.
    #[inline(never)]
    pub fn map_up(&self, id: u32) -> Option<u32> {
        self.extents
            .iter()
            .find(|e| e.contains(Side::Lower, id))
            .map(|e| e.first + (id - e.lower_first))
    }
}

/// Linux's sorted-array form: `forward` and `reverse` copies searched by
/// `bsearch` with a comparison callback, whatever the number of extents.
pub struct KernelSortedMap {
    forward: Vec<Extent>,
    reverse: Vec<Extent>,
}

/// `struct idmap_key`.
struct Key {
    map_up: bool,
    id: u32,
    count: u32,
}

/// `cmp_map_id` (kernel/user_namespace.c): 0 when `[id, id + count)` lies
/// in the extent, -1 when it starts below it, 1 above.
#[inline(never)]
fn cmp_map_id(key: &Key, e: &Extent) -> i32 {
    let id2 = key.id.wrapping_add(key.count).wrapping_sub(1);
    let first = if key.map_up { e.lower_first } else { e.first };
    let last = first.wrapping_add(e.count).wrapping_sub(1);
    if key.id >= first && key.id <= last && id2 >= first && id2 <= last {
        return 0;
    }
    if key.id < first || id2 < first {
        return -1;
    }
    1
}

/// lib/bsearch.c: halve `num` each step; on a key above the pivot move the
/// base past it.
#[inline(never)]
fn bsearch<'a>(key: &Key, base: &'a [Extent], cmp: fn(&Key, &Extent) -> i32) -> Option<&'a Extent> {
    let mut lo = 0usize;
    let mut num = base.len();
    while num > 0 {
        let pivot = lo + (num >> 1);
        let r = cmp(key, &base[pivot]);
        if r == 0 {
            return Some(&base[pivot]);
        }
        if r > 0 {
            lo = pivot + 1;
            num -= 1;
        }
        num >>= 1;
    }
    None
}

impl KernelSortedMap {
    pub fn new(map: &IdMap) -> KernelSortedMap {
        let mut forward = map.extents_written().to_vec();
        forward.sort_by_key(|e| e.first);
        let mut reverse = forward.clone();
        reverse.sort_by_key(|e| e.lower_first);
        KernelSortedMap { forward, reverse }
    }

    /// `map_id_range_down_max` with count 1.
    #[inline(never)]
    pub fn map_down(&self, id: u32) -> Option<u32> {
        let key = Key {
            map_up: false,
            id,
            count: 1,
        };
        bsearch(&key, &self.forward, cmp_map_id).map(|e| e.lower_first + (id - e.first))
    }

    /// `map_id_up_max`.
    #[inline(never)]
    pub fn map_up(&self, id: u32) -> Option<u32> {
        let key = Key {
            map_up: true,
            id,
            count: 1,
        };
        bsearch(&key, &self.reverse, cmp_map_id).map(|e| e.first + (id - e.lower_first))
    }
}
