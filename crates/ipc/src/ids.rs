//! Index allocation exactly as Linux's `ipc_idr_alloc` (ipc/util.c, seed
//! 000): a cyclic search over `max(in_use * 3/2, ipc_min_cycle)` indices
//! from the idr cursor, the sequence number bumped when the index does not
//! move forward, and `*_next_id` taking over when set. The idr itself is a
//! bitmap of used indices with a summary of full words, so finding a free
//! index costs a few word scans and a lookup by id is one slot address
//! computation whatever the index.
//!
//! Lock state: every function here expects the mechanism's registry lock
//! held, and leaves it held.

use crate::arena::Arena;
use crate::arena::header::Registry;
use crate::arena::layout::{Layout, Mech, SLOT_SIZE, Table, slot_pages};
use crate::errno::Errno;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

const PAGE: u64 = 4096;

/// The used-index bitmap of one mechanism, with its summary and the bits
/// saying which pages of slots are reserved in the file. Every index is
/// bounds-checked: an index out of range reads as unused and is never set.
pub struct Bitmap<'a> {
    words: &'a [AtomicU64],
    summary: &'a [AtomicU64],
    reserved: &'a [AtomicU64],
    n: u32,
}

impl<'a> Bitmap<'a> {
    /// The bitmap of mechanism `m`. The layout was checked against the
    /// file at attach, so the views always exist; were one missing, the
    /// bitmap would read as all free and take no index.
    #[inline]
    pub fn of(a: &'a Arena, m: Mech) -> Bitmap<'a> {
        let l: &Layout = a.layout();
        let t: &Table = l.table(m);
        let nw = (l.ipc_mni / 64) as usize;
        let pages = slot_pages(u64::from(l.ipc_mni));
        Bitmap {
            words: a.view_slice(t.bitmap, nw).unwrap_or(&[]),
            summary: a.view_slice(t.summary, nw.div_ceil(64)).unwrap_or(&[]),
            reserved: a
                .view_slice(t.reserved, pages.div_ceil(64) as usize)
                .unwrap_or(&[]),
            n: l.ipc_mni,
        }
    }

    /// Capacity in indices (`ipc_mni`).
    pub fn capacity(&self) -> u32 {
        self.n
    }

    pub fn test(&self, idx: u32) -> bool {
        self.words
            .get((idx / 64) as usize)
            .is_some_and(|w| w.load(Relaxed) & (1 << (idx % 64)) != 0)
    }

    pub fn set(&self, idx: u32) {
        let w = (idx / 64) as usize;
        let (Some(word), Some(s)) = (self.words.get(w), self.summary.get(w / 64)) else {
            return;
        };
        let v = word.load(Relaxed) | 1 << (idx % 64);
        word.store(v, Relaxed);
        if v == u64::MAX {
            s.store(s.load(Relaxed) | 1 << (w % 64), Relaxed);
        }
    }

    pub fn clear(&self, idx: u32) {
        let w = (idx / 64) as usize;
        let (Some(word), Some(s)) = (self.words.get(w), self.summary.get(w / 64)) else {
            return;
        };
        word.store(word.load(Relaxed) & !(1 << (idx % 64)), Relaxed);
        s.store(s.load(Relaxed) & !(1 << (w % 64)), Relaxed);
    }

    /// The lowest clear index in `[start, end)`.
    pub fn find_free(&self, start: u32, end: u32) -> Option<u32> {
        let end = end.min(self.n);
        if start >= end {
            return None;
        }
        let mut w = (start / 64) as usize;
        // The first, partial word.
        let free = !self.words.get(w)?.load(Relaxed) & (u64::MAX << (start % 64));
        let mut found = (free != 0).then(|| w as u32 * 64 + free.trailing_zeros());
        w += 1;
        // Then whole words, skipping full ones with the summary.
        let last_w = ((end - 1) / 64) as usize;
        while found.is_none() && w <= last_w {
            let sw = w / 64;
            let not_full = !self.summary.get(sw)?.load(Relaxed) & (u64::MAX << (w % 64));
            if not_full == 0 {
                w = (sw + 1) * 64;
                continue;
            }
            w = sw * 64 + not_full.trailing_zeros() as usize;
            if w > last_w {
                break;
            }
            let free = !self.words.get(w)?.load(Relaxed);
            if free != 0 {
                found = Some(w as u32 * 64 + free.trailing_zeros());
            }
            w += 1;
        }
        found.filter(|&i| i < end)
    }

    /// The highest set index `<= upto`, if any (`ipc_search_maxidx`).
    pub fn find_last_set(&self, upto: u32) -> Option<u32> {
        let upto = upto.min(self.n - 1);
        let mut w = (upto / 64) as i64;
        let mut mask = u64::MAX >> (63 - upto % 64);
        while w >= 0 {
            let v = self.words.get(w as usize)?.load(Relaxed) & mask;
            if v != 0 {
                return Some(w as u32 * 64 + 63 - v.leading_zeros());
            }
            w -= 1;
            mask = u64::MAX;
        }
        None
    }

    /// Set indices in ascending order (at most `ipc_mni` of them).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, word)| {
            let mut v = word.load(Relaxed);
            core::iter::from_fn(move || {
                if v == 0 {
                    return None;
                }
                let b = v.trailing_zeros();
                v &= v - 1;
                Some(w as u32 * 64 + b)
            })
        })
    }

    /// Recomputes the summary from the words (repair).
    pub fn resummarise(&self) {
        for (sw, s) in self.summary.iter().enumerate() {
            let mut bits = 0u64;
            for b in 0..64 {
                let w = sw * 64 + b;
                if self
                    .words
                    .get(w)
                    .is_some_and(|x| x.load(Relaxed) == u64::MAX)
                {
                    bits |= 1 << b;
                }
            }
            s.store(bits, Relaxed);
        }
    }

    /// Reserves the file pages holding slot `idx` of mechanism `m` before
    /// it is first written (ENOMEM on a full file system).
    pub fn reserve_slot(&self, a: &Arena, m: Mech, idx: u32) -> Result<(), Errno> {
        let t = a.layout().table(m);
        let rel = u64::from(idx) * SLOT_SIZE;
        for page in rel / PAGE..=(rel + SLOT_SIZE - 1) / PAGE {
            let Some(word) = self.reserved.get((page / 64) as usize) else {
                return Err(Errno::EUCLEAN);
            };
            let bit = 1u64 << (page % 64);
            if word.load(Relaxed) & bit == 0 {
                a.reserve(t.slots + page * PAGE, PAGE)?;
                word.fetch_or(bit, Relaxed);
            }
        }
        Ok(())
    }
}

/// Whether index `idx` of mechanism `m` is in use: one word of the bitmap,
/// for the lookup paths (building a whole [`Bitmap`] costs more).
#[inline]
pub fn is_used(a: &Arena, m: Mech, idx: u32) -> bool {
    let l = a.layout();
    idx < l.ipc_mni
        && a.view::<AtomicU64>(l.table(m).bitmap + u64::from(idx / 64) * 8)
            .is_ok_and(|w| w.load(Relaxed) & (1 << (idx % 64)) != 0)
}

/// `ipc_idr_alloc`: picks a free index and its sequence number. The caller
/// has checked the in-use limit (`ipc_addid`), and marks the index used
/// once its slot's page is reserved (a lookup by id reads a slot whose bit
/// it sees set). Returns `(idx, seq)`; ENOSPC when no index is free.
pub fn alloc(reg: &Registry, bm: &Bitmap<'_>, l: &Layout) -> Result<(u32, u32), Errno> {
    let next_id = reg.next_id.load(Relaxed);
    let (idx, seq) = if next_id < 0 {
        // max_idx = min(max(in_use * 3 / 2, ipc_min_cycle), ipc_mni)
        let in_use = reg.in_use.load(Relaxed);
        let max_idx = (in_use.saturating_mul(3) / 2)
            .max(l.min_cycle())
            .min(l.ipc_mni);
        // idr_alloc_cyclic(idr, NULL, 0, max_idx): from the cursor, then
        // once more from 0 if the cursor was past the start.
        let cursor = reg.cursor.load(Relaxed);
        let idx = bm
            .find_free(cursor, max_idx)
            .or_else(|| {
                if cursor > 0 {
                    bm.find_free(0, max_idx)
                } else {
                    None
                }
            })
            .ok_or(Errno::ENOSPC)?;
        reg.cursor.store(idx + 1, Relaxed);
        // "if (idx <= ids->last_idx) { ids->seq++; if (ids->seq >= ipcid_seq_max()) ids->seq = 0; }"
        if idx as i32 <= reg.last_idx.load(Relaxed) {
            let mut s = reg.seq.load(Relaxed).wrapping_add(1);
            if s >= l.seq_max() {
                s = 0;
            }
            reg.seq.store(s, Relaxed);
        }
        reg.last_idx.store(idx as i32, Relaxed);
        (idx, reg.seq.load(Relaxed))
    } else {
        // The requested id: its sequence number, and the lowest free index
        // at or above its index (idr_alloc(.., ipcid_to_idx(next_id), 0)).
        reg.next_id.store(-1, Relaxed);
        let idx = bm
            .find_free(l.idx_of(next_id), l.ipc_mni)
            .ok_or(Errno::ENOSPC)?;
        (idx, l.seq_of(next_id))
    };
    Ok((idx, seq))
}
