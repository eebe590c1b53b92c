//! One mechanism's registry (`struct ipc_ids`): creating, finding and
//! removing objects, and repairing after a holder's death.
//!
//! # Protocol
//! Lock order: registry -> object -> heap; several objects in ascending
//! idx. Creation and removal hold the registry lock (and, for removal, the
//! object lock) and write a journal entry first; lookups by id take no
//! registry lock: they read the slot's state, lock the object, and check
//! again that it is the same live object (`ipc_obtain_object_check` then
//! `ipc_valid_object`, as Linux does under RCU). Slots are type-stable, so
//! the lock is always a lock.
//!
//! After a holder's death the next locker repairs: it finishes a removal or
//! undoes a creation named by the journal, then rebuilds everything derived
//! (key table, counts, max index, summary bits, the mechanism's counters)
//! from the slots, so the registry is exactly consistent again.

use crate::arena::Arena;
use crate::arena::header::Registry;
use crate::arena::layout::Mech;
use crate::errno::Errno;
use crate::ids::{self, Bitmap};
use crate::keys;
use crate::lock::Guard;
use crate::object::{CREATING, DELETING, FREE, Head, LIVE, Slot};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// `IPC_PRIVATE`.
pub const IPC_PRIVATE: i32 = 0;

const JOURNAL_NONE: u32 = 0;
const JOURNAL_CREATE: u32 = 1;
const JOURNAL_REMOVE: u32 = 2;

/// What a mechanism tells the registry about its objects.
pub trait Kind {
    type Slot: Slot;
    const MECH: Mech;
    /// The mechanism counters this live object accounts for (`used`, `used2`).
    fn usage(a: &Arena, s: &Self::Slot) -> (u64, u64);
    /// Frees what the object owns outside its slot; idempotent (clears each
    /// reference before freeing it), since a repair may run it again.
    fn release(a: &Arena, s: &Self::Slot);
    /// Finishes or undoes what a holder of the object lock was doing when
    /// it died (its roll-forward journal).
    fn repair_object(a: &Arena, s: &Self::Slot) -> Result<(), Errno>;
}

/// Locks an object, repairing it first if the previous holder died.
pub fn lock_object<'a, K: Kind>(a: &Arena, s: &'a K::Slot) -> Result<Guard<'a>, Errno> {
    let g = s.head().lock.lock()?;
    if g.recovered() {
        K::repair_object(a, s)?;
    }
    Ok(g)
}

/// The slot of index `idx`.
pub fn slot<K: Kind>(a: &Arena, idx: u32) -> Result<&K::Slot, Errno> {
    a.view(a.layout().slot_off(K::MECH, idx))
}

/// A held registry lock.
pub struct Reg<'a> {
    pub a: &'a Arena,
    pub r: &'a Registry,
    pub bm: Bitmap<'a>,
    _g: Guard<'a>,
}

impl<'a> Reg<'a> {
    /// Locks the registry of `K`, repairing it first if the previous holder died.
    pub fn lock<K: Kind>(a: &'a Arena) -> Result<Reg<'a>, Errno> {
        let r = &a.header().registries[K::MECH as usize];
        let g = r.lock.lock()?;
        let reg = Reg {
            a,
            r,
            bm: Bitmap::of(a, K::MECH)?,
            _g: g,
        };
        if reg._g.recovered() {
            reg.repair::<K>()?;
        }
        Ok(reg)
    }

    /// The index of the live object with `key` (`ipc_findkey`).
    pub fn find_key(&self, key: i32) -> Result<Option<u32>, Errno> {
        keys::get(self.a, self.r, key)
    }

    /// `ipc_addid`: an index and sequence number for a new object, its slot
    /// filled by `init` (which must set the perm fields but `state`, `seq`
    /// and `key`), its key entered, and the object published. `limit` is the
    /// mechanism's object limit. Returns the id.
    pub fn create<K: Kind>(
        &self,
        limit: i32,
        key: i32,
        init: impl FnOnce(&K::Slot) -> Result<(), Errno>,
    ) -> Result<i32, Errno> {
        let l = self.a.layout();
        // "if (ids->in_use >= limit) return -ENOSPC", limit = min(limit, ipc_mni).
        let limit = (limit.max(0) as u32).min(l.ipc_mni);
        if self.r.in_use.load(Relaxed) >= limit {
            return Err(Errno::ENOSPC);
        }
        let (idx, seq) = ids::alloc(self.r, &self.bm, l)?;
        let s = slot::<K>(self.a, idx)?;
        let h = s.head();
        self.journal(JOURNAL_CREATE, idx, key);
        if !h.lock.is_initialized() {
            h.lock.init()?;
        }
        h.state.store(CREATING, Relaxed);
        h.seq.store(seq, Relaxed);
        h.key.store(key, Relaxed);
        let filled = init(s).and_then(|()| {
            if key != IPC_PRIVATE {
                keys::insert(self.a, self.r, key, idx)
            } else {
                Ok(())
            }
        });
        if let Err(e) = filled {
            // Undo, as ipc_addid does when the hash insert fails.
            K::release(self.a, s);
            h.state.store(FREE, Relaxed);
            self.bm.clear(idx);
            self.journal(JOURNAL_NONE, 0, 0);
            return Err(e);
        }
        self.r.in_use.fetch_add(1, Relaxed);
        if idx as i32 > self.r.max_idx.load(Relaxed) {
            self.r.max_idx.store(idx as i32, Relaxed);
        }
        let (u1, u2) = K::usage(self.a, s);
        self.r.used.fetch_add(u1, Relaxed);
        self.r.used2.fetch_add(u2, Relaxed);
        // Release: lockless lookups that see LIVE (Acquire) see the fields.
        h.state.store(LIVE, Release);
        self.journal(JOURNAL_NONE, 0, 0);
        Ok(l.make_id(seq, idx))
    }

    /// `ipc_rmid` plus freeing: the object becomes invisible, its key free
    /// at once, its index free. Expects the object lock held too.
    pub fn remove<K: Kind>(&self, idx: u32) -> Result<(), Errno> {
        let s = slot::<K>(self.a, idx)?;
        let h = s.head();
        self.journal(JOURNAL_REMOVE, idx, h.key.load(Relaxed));
        h.state.store(DELETING, Release);
        self.finish_remove::<K>(idx, s)?;
        self.journal(JOURNAL_NONE, 0, 0);
        Ok(())
    }

    fn finish_remove<K: Kind>(&self, idx: u32, s: &K::Slot) -> Result<(), Errno> {
        let h = s.head();
        let key = h.key.load(Relaxed);
        if self.bm.test(idx) {
            self.bm.clear(idx);
            if key != IPC_PRIVATE && self.find_key(key)? == Some(idx) {
                keys::remove(self.a, self.r, key)?;
            }
            let (u1, u2) = K::usage(self.a, s);
            self.r
                .used
                .fetch_sub(u1.min(self.r.used.load(Relaxed)), Relaxed);
            self.r
                .used2
                .fetch_sub(u2.min(self.r.used2.load(Relaxed)), Relaxed);
            self.r.in_use.fetch_sub(1, Relaxed);
            // "if (unlikely(idx == ids->max_idx))": search downwards.
            if idx as i32 == self.r.max_idx.load(Relaxed) {
                let m = if idx == 0 {
                    None
                } else {
                    self.bm.find_last_set(idx - 1)
                };
                self.r.max_idx.store(m.map_or(-1, |m| m as i32), Relaxed);
            }
        }
        K::release(self.a, s);
        h.state.store(FREE, Release);
        Ok(())
    }

    /// Takes a key out of the table without removing the object
    /// (`ipc_set_key_private`, for shm segments removed while attached).
    pub fn make_private(&self, idx: u32, h: &Head) -> Result<(), Errno> {
        let key = h.key.load(Relaxed);
        if key != IPC_PRIVATE && self.find_key(key)? == Some(idx) {
            keys::remove(self.a, self.r, key)?;
        }
        h.key.store(IPC_PRIVATE, Relaxed);
        Ok(())
    }

    fn journal(&self, op: u32, idx: u32, key: i32) {
        let j = &self.r.journal;
        if op == JOURNAL_NONE {
            j.op.store(JOURNAL_NONE, Release);
            return;
        }
        j.idx.store(idx, Relaxed);
        j.key.store(key, Relaxed);
        j.op.store(op, Release);
    }

    /// Brings the registry back to exact consistency after its holder died.
    fn repair<K: Kind>(&self) -> Result<(), Errno> {
        let j = &self.r.journal;
        let idx = j.idx.load(Relaxed);
        match j.op.load(Acquire) {
            JOURNAL_CREATE => {
                let s = slot::<K>(self.a, idx)?;
                if s.head().state.load(Acquire) != LIVE {
                    // Never published: as if it had never been created.
                    K::release(self.a, s);
                    s.head().state.store(FREE, Relaxed);
                    self.bm.clear(idx);
                }
            }
            JOURNAL_REMOVE => {
                let s = slot::<K>(self.a, idx)?;
                s.head().state.store(DELETING, Relaxed);
                K::release(self.a, s);
                s.head().state.store(FREE, Relaxed);
                self.bm.clear(idx);
            }
            _ => {}
        }
        self.journal(JOURNAL_NONE, 0, 0);
        self.rebuild::<K>()
    }

    /// Recomputes every derived field from the bitmap and the slots.
    fn rebuild<K: Kind>(&self) -> Result<(), Errno> {
        self.bm.resummarise();
        let (mut n, mut max, mut u1, mut u2) = (0u32, -1i32, 0u64, 0u64);
        let mut entries = Vec::new();
        for idx in self.bm.iter() {
            let s = slot::<K>(self.a, idx)?;
            let h = s.head();
            if h.state.load(Relaxed) != LIVE {
                // A used bit without a live object: stale, drop it.
                h.state.store(FREE, Relaxed);
                self.bm.clear(idx);
                continue;
            }
            n += 1;
            max = idx as i32;
            let (a, b) = K::usage(self.a, s);
            u1 += a;
            u2 += b;
            let key = h.key.load(Relaxed);
            if key != IPC_PRIVATE {
                entries.push((key, idx));
            }
        }
        self.r.in_use.store(n, Relaxed);
        self.r.max_idx.store(max, Relaxed);
        self.r.used.store(u1, Relaxed);
        self.r.used2.store(u2, Relaxed);
        // A new table; the old one may be torn, so it is not freed (leaked).
        self.r.keys_off.store(0, Relaxed);
        self.r.keys_cap.store(0, Relaxed);
        keys::rebuild(self.a, self.r, entries.into_iter())
    }
}

/// `ipc_obtain_object_check`: the live object with `id`, without the
/// registry lock. EINVAL when the index is unused or holds another object
/// (its sequence number differs).
pub fn obtain<K: Kind>(a: &Arena, id: i32) -> Result<(u32, &K::Slot), Errno> {
    let l = a.layout();
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    let idx = l.idx_of(id);
    let s = slot::<K>(a, idx)?;
    let h = s.head();
    // Acquire: pairs with the Release publishing LIVE in `create`.
    if h.state.load(Acquire) != LIVE || h.seq.load(Relaxed) != l.seq_of(id) {
        return Err(Errno::EINVAL);
    }
    Ok((idx, s))
}

/// `ipc_valid_object` after locking: the object is still the one with `id`;
/// EIDRM when it was removed meanwhile.
pub fn still_valid(a: &Arena, h: &Head, id: i32) -> Result<(), Errno> {
    if h.state.load(Acquire) != LIVE || h.seq.load(Relaxed) != a.layout().seq_of(id) {
        return Err(Errno::EIDRM);
    }
    Ok(())
}
