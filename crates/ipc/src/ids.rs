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
use crate::arena::layout::{Layout, Mech, Table};
use crate::errno::Errno;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// The used-index bitmap of one mechanism.
pub struct Bitmap<'a> {
    words: &'a [AtomicU64],
    summary: &'a [AtomicU64],
    n: u32,
}

impl<'a> Bitmap<'a> {
    pub fn of(a: &'a Arena, m: Mech) -> Result<Bitmap<'a>, Errno> {
        let l: &Layout = a.layout();
        let t: &Table = l.table(m);
        let nw = (l.ipc_mni / 64) as usize;
        Ok(Bitmap {
            words: a.view_slice(t.bitmap, nw)?,
            summary: a.view_slice(t.summary, nw.div_ceil(64))?,
            n: l.ipc_mni,
        })
    }

    pub fn test(&self, idx: u32) -> bool {
        self.words[(idx / 64) as usize].load(Relaxed) & (1 << (idx % 64)) != 0
    }

    pub fn set(&self, idx: u32) {
        let w = (idx / 64) as usize;
        let v = self.words[w].load(Relaxed) | 1 << (idx % 64);
        self.words[w].store(v, Relaxed);
        if v == u64::MAX {
            let s = &self.summary[w / 64];
            s.store(s.load(Relaxed) | 1 << (w % 64), Relaxed);
        }
    }

    pub fn clear(&self, idx: u32) {
        let w = (idx / 64) as usize;
        let v = self.words[w].load(Relaxed) & !(1 << (idx % 64));
        self.words[w].store(v, Relaxed);
        let s = &self.summary[w / 64];
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
        let free = !self.words[w].load(Relaxed) & (u64::MAX << (start % 64));
        let mut found = (free != 0).then(|| w as u32 * 64 + free.trailing_zeros());
        w += 1;
        // Then whole words, skipping full ones with the summary.
        let last_w = ((end - 1) / 64) as usize;
        while found.is_none() && w <= last_w {
            let sw = w / 64;
            let not_full = !self.summary[sw].load(Relaxed) & (u64::MAX << (w % 64));
            if not_full == 0 {
                w = (sw + 1) * 64;
                continue;
            }
            w = sw * 64 + not_full.trailing_zeros() as usize;
            if w > last_w {
                break;
            }
            let free = !self.words[w].load(Relaxed);
            if free != 0 {
                found = Some(w as u32 * 64 + free.trailing_zeros());
            }
            w += 1;
        }
        found.filter(|&i| i < end)
    }

    /// The highest set index `<= upto`, if any (`ipc_search_maxidx`).
    pub fn find_last_set(&self, upto: u32) -> Option<u32> {
        let mut w = (upto.min(self.n - 1) / 64) as i64;
        let mut mask = if upto >= self.n - 1 {
            u64::MAX
        } else {
            u64::MAX >> (63 - upto % 64)
        };
        while w >= 0 {
            let v = self.words[w as usize].load(Relaxed) & mask;
            if v != 0 {
                return Some(w as u32 * 64 + 63 - v.leading_zeros());
            }
            w -= 1;
            mask = u64::MAX;
        }
        None
    }

    /// Set indices in ascending order.
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
                if w < self.words.len() && self.words[w].load(Relaxed) == u64::MAX {
                    bits |= 1 << b;
                }
            }
            s.store(bits, Relaxed);
        }
    }
}

/// `ipc_idr_alloc`: picks an index and its sequence number and marks the
/// index used. The caller has checked the in-use limit (`ipc_addid`).
/// Returns `(idx, seq)`; ENOSPC when no index is free.
pub fn alloc(reg: &Registry, bm: &Bitmap<'_>, l: &Layout) -> Result<(u32, u32), Errno> {
    let next_id = reg.next_id.load(Relaxed);
    let (idx, seq) = if next_id < 0 {
        // max_idx = min(max(in_use * 3 / 2, ipc_min_cycle), ipc_mni)
        let in_use = reg.in_use.load(Relaxed);
        let max_idx = (in_use * 3 / 2).max(l.min_cycle()).min(l.ipc_mni);
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
            let mut s = reg.seq.load(Relaxed) + 1;
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
    bm.set(idx);
    Ok((idx, seq))
}
