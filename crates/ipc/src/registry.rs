//! One mechanism's registry (`struct ipc_ids`): creating, finding and
//! removing objects, and repairing after a holder's death.
//!
//! # Protocol
//! Lock order: see `lock/mod.rs` (the registry lock comes first).
//! Creation and removal hold the registry lock (and, for removal, the
//! object lock) and write a journal entry first; lookups by id take no
//! registry lock: they check the index's used bit (so a slot page is read
//! only once it was reserved), read the slot's state and generation, lock
//! the object, and check again that it is the same live object, same
//! generation (`ipc_obtain_object_check` then `ipc_valid_object`, as Linux
//! does under RCU). Slots are type-stable, so the lock is always a lock;
//! the generation, unlike the sequence number, never repeats, so a slot
//! reused under the same id is never taken for the object looked up.
//!
//! After a holder's death the next locker repairs: it finishes a removal or
//! undoes a creation named by the journal, then rebuilds everything derived
//! (key table, counts, max index, summary bits, the mechanism's counters)
//! from the slots, so the registry is exactly consistent again. The lock
//! stays marked for repair until the repair has succeeded, so a repair that
//! fails (ENOMEM) or dies is retried by the next locker. The key table is
//! rebuilt in place when it is sound and large enough: no memory needed.

use crate::arena::header::Registry;
use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::errno::Errno;
use crate::errno::SysResult;
use crate::ids::{self, Bitmap};
use crate::keys;
use crate::lock::Guard;
use crate::object::{CREATING, DELETING, FREE, Head, LIVE, Slot};
use crate::perm;
use crate::session::Session;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::fence;

/// `IPC_PRIVATE`.
pub const IPC_PRIVATE: i32 = 0;

const JOURNAL_NONE: u32 = 0;
const JOURNAL_CREATE: u32 = 1;
const JOURNAL_REMOVE: u32 = 2;

/// What a mechanism tells the registry about its objects.
pub trait Kind {
    type Slot: Slot;
    const MECH: Mech;
    /// Whether waiters on an object's lock give the cpu away before they
    /// sleep (`lock::GIVE_WAY`).
    const GIVE_WAY: bool = false;
    /// The mechanism counters this live object accounts for (`used`, `used2`).
    fn usage(a: &Session, s: &Self::Slot) -> (u64, u64);
    /// Frees what the object owns outside its slot; idempotent (clears each
    /// reference before freeing it), since a repair may run it again.
    fn release(a: &Session, s: &Self::Slot);
    /// Finishes or undoes what a holder of the object lock was doing when
    /// it died (its roll-forward journal).
    fn repair_object(a: &Session, s: &Self::Slot) -> Result<(), Errno>;
    /// What the consistency check finds wrong inside one object (its
    /// queues and lists), object lock held.
    fn check_object(_a: &Session, _s: &Self::Slot) -> Vec<String> {
        Vec::new()
    }
}

/// Locks an object, repairing it first if the previous holder died.
/// Always inlined, as `Lock::lock_with`.
#[inline(always)]
pub fn lock_object<'a, K: Kind>(a: &Session, s: &'a K::Slot) -> Result<Guard<'a>, Errno> {
    let lock = &s.head().lock;
    let mut g = locked!(if K::GIVE_WAY {
        lock.lock_giving_way()
    } else {
        lock.lock()
    });
    if g.recovered() {
        K::repair_object(a, s)?;
        g.repaired();
    }
    Ok(g)
}

/// [`lock_object`] whatever the call's lock deadline: for the cleanup
/// after a wait (a sleeper taking its record off the queue), which must
/// not fail where the wait ended.
pub fn lock_object_unbounded<'a, K: Kind>(a: &Session, s: &'a K::Slot) -> Result<Guard<'a>, Errno> {
    let mut g = s.head().lock.lock_unbounded()?;
    if g.recovered() {
        K::repair_object(a, s)?;
        g.repaired();
    }
    Ok(g)
}

/// [`lock_object`] until `deadline` (CLOCK_MONOTONIC ns) whatever the
/// call's lock deadline: ETIMEDOUT after it.
pub fn lock_object_until<'a, K: Kind>(
    a: &Session,
    s: &'a K::Slot,
    deadline: u64,
) -> Result<Guard<'a>, Errno> {
    let mut g = s.head().lock.lock_until_only(deadline)?;
    if g.recovered() {
        K::repair_object(a, s)?;
        g.repaired();
    }
    Ok(g)
}

/// The slot of index `idx`. Only for an index whose used bit is (or was
/// just) set: other slots' pages may not be reserved.
pub fn slot<K: Kind>(a: &Session, idx: u32) -> Result<&K::Slot, Errno> {
    if idx >= a.layout().ipc_mni {
        return Err(Errno::EINVAL);
    }
    a.view(a.layout().slot_off(K::MECH, idx))
}

/// The slot of index `idx` if the index is in use (EINVAL otherwise),
/// without the registry lock.
pub fn used_slot<K: Kind>(a: &Session, idx: u32) -> Result<&K::Slot, Errno> {
    if !ids::is_used(a, K::MECH, idx) {
        return Err(Errno::EINVAL);
    }
    slot::<K>(a, idx)
}

/// An object found by id or index: where it is, and which generation of
/// the slot it was.
pub struct Found<'a, S> {
    pub idx: u32,
    pub slot: &'a S,
    pub generation: u64,
}

/// A held registry lock. `repr(C)`, word-sized fields first: returned by
/// value on every call, it must move as whole words (odd byte offsets made
/// the moves stall on store forwarding).
#[repr(C)]
pub struct Reg<'a> {
    pub a: &'a Session,
    pub r: &'a Registry,
    mech: Mech,
    /// `rebuild::<K>` for this registry's mechanism.
    rebuild: fn(&Reg<'_>) -> Result<(), Errno>,
    _g: Guard<'a>,
}

impl<'a> Reg<'a> {
    /// Locks the registry of `K`, repairing it first if the previous holder died.
    #[inline(always)]
    pub fn lock<K: Kind>(a: &'a Session) -> Result<Reg<'a>, Errno> {
        let r = &a.header().registries[K::MECH as usize];
        let g = r.lock.lock()?;
        let mut reg = Reg {
            a,
            r,
            mech: K::MECH,
            rebuild: rebuild_of::<K>,
            _g: g,
        };
        if reg._g.recovered() {
            reg.repair_now::<K>()?;
        }
        Ok(reg)
    }

    /// The mechanism's used-index bitmap.
    #[inline]
    pub fn bm(&self) -> Bitmap<'a> {
        Bitmap::of(self.a, self.mech)
    }

    #[cold]
    fn repair_now<K: Kind>(&mut self) -> Result<(), Errno> {
        self.repair::<K>()?;
        self._g.repaired();
        Ok(())
    }

    /// The next slot generation (registry lock held).
    fn next_generation(&self) -> u64 {
        let g = self.r.generation.load(Relaxed).wrapping_add(1);
        self.r.generation.store(g, Relaxed);
        g
    }

    /// The index of the live object with `key` (`ipc_findkey`). A key
    /// table found corrupt (or naming an object that is not there with
    /// that key) is rebuilt from the objects, then asked again.
    #[inline]
    pub fn find_key(&self, key: i32) -> Result<Option<u32>, Errno> {
        match self.find_key_checked(key) {
            Err(Errno::EUCLEAN) => self.find_key_again(key),
            r => r,
        }
    }

    #[cold]
    fn find_key_again(&self, key: i32) -> Result<Option<u32>, Errno> {
        (self.rebuild)(self)?;
        self.find_key_checked(key)
    }

    #[inline(always)]
    fn find_key_checked(&self, key: i32) -> Result<Option<u32>, Errno> {
        let Some(idx) = keys::get(self.a, self.r, key)? else {
            return Ok(None);
        };
        // The entry must name a live object with this key.
        if !ids::is_used(self.a, self.mech, idx) {
            return Err(Errno::EUCLEAN);
        }
        let h = self
            .a
            .view::<Head>(self.a.layout().slot_off(self.mech, idx))?;
        if h.state.load(Acquire) != LIVE || h.key.load(Relaxed) != key {
            return Err(Errno::EUCLEAN);
        }
        Ok(Some(idx))
    }

    /// `ipc_addid`: an index and sequence number for a new object, its slot
    /// filled by `init` (which must set the perm fields but `state`, `seq`
    /// and `key`), its key entered, and the object published. `limit` is the
    /// mechanism's object limit. Returns the id.
    pub fn create<K: Kind>(
        &self,
        limit: i32,
        key: i32,
        init: impl FnOnce(&K::Slot, i32) -> Result<(), Errno>,
    ) -> Result<i32, Errno> {
        let l = self.a.layout();
        // "if (ids->in_use >= limit) return -ENOSPC", limit = min(limit, ipc_mni).
        let limit = (limit.max(0) as u32).min(l.ipc_mni);
        if self.r.in_use.load(Relaxed) >= limit {
            return Err(Errno::ENOSPC);
        }
        let (idx, seq) = ids::alloc(self.r, &self.bm(), l)?;
        // The slot's page must exist before it is touched (a full tmpfs
        // gives ENOMEM here, never SIGBUS later), and before the index is
        // marked used: lookups by id read the slots of used indexes without
        // the registry lock. As ipc_addid does when a later step fails, the
        // index goes back but the sequence stays.
        self.bm().reserve_slot(self.a, K::MECH, idx)?;
        self.bm().set(idx);
        let s = slot::<K>(self.a, idx)?;
        let h = s.head();
        self.journal(JOURNAL_CREATE, idx, key);
        h.generation.store(self.next_generation(), Relaxed);
        h.state.store(CREATING, Relaxed);
        h.seq.store(seq, Relaxed);
        h.key.store(key, Relaxed);
        let filled = init(s, l.make_id(seq, idx)).and_then(|()| {
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
            self.bm().clear(idx);
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
        if key != IPC_PRIVATE {
            // The creator is likely to look its key up again (`recent.rs`).
            self.a
                .recent()
                .remember(K::MECH, key, idx, h.generation.load(Relaxed));
        }
        Ok(l.make_id(seq, idx))
    }

    /// `ipc_rmid` plus freeing: the object becomes invisible, its key free
    /// at once, its index free. Expects the object lock held too.
    pub fn remove<K: Kind>(&self, idx: u32) -> Result<(), Errno> {
        let s = slot::<K>(self.a, idx)?;
        let h = s.head();
        self.journal(JOURNAL_REMOVE, idx, h.key.load(Relaxed));
        h.generation.store(self.next_generation(), Relaxed);
        h.state.store(DELETING, Release);
        self.finish_remove::<K>(idx, s)?;
        self.journal(JOURNAL_NONE, 0, 0);
        Ok(())
    }

    fn finish_remove<K: Kind>(&self, idx: u32, s: &K::Slot) -> Result<(), Errno> {
        let h = s.head();
        let key = h.key.load(Relaxed);
        if self.bm().test(idx) {
            // The key first, while the index still reads as used. A corrupt
            // table is left as it is: the next lookup finds it stale and
            // rebuilds it from the objects.
            if key != IPC_PRIVATE && keys::get(self.a, self.r, key) == Ok(Some(idx)) {
                let _ = keys::remove(self.a, self.r, key);
            }
            self.bm().clear(idx);
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
                    self.bm().find_last_set(idx - 1)
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
        // An index that is not in use names no slot we may touch (its page
        // may not be reserved): the entry is junk, or nothing was done yet.
        let op = if self.bm().test(idx) {
            j.op.load(Acquire)
        } else {
            JOURNAL_NONE
        };
        match op {
            JOURNAL_CREATE => {
                let s = slot::<K>(self.a, idx)?;
                if s.head().state.load(Acquire) != LIVE {
                    // Never published: as if it had never been created.
                    K::release(self.a, s);
                    s.head().state.store(FREE, Relaxed);
                    self.bm().clear(idx);
                }
            }
            JOURNAL_REMOVE => {
                let s = slot::<K>(self.a, idx)?;
                // The object lock too (registry -> object), as `remove`
                // held it: `release` changes what the object's lock
                // protects (its sleepers free their records under it).
                let _g = lock_object::<K>(self.a, s)?;
                s.head().generation.store(self.next_generation(), Relaxed);
                s.head().state.store(DELETING, Relaxed);
                K::release(self.a, s);
                s.head().state.store(FREE, Relaxed);
                self.bm().clear(idx);
            }
            _ => {}
        }
        self.journal(JOURNAL_NONE, 0, 0);
        self.rebuild::<K>()
    }

    /// Recomputes every derived field from the bitmap and the slots.
    fn rebuild<K: Kind>(&self) -> Result<(), Errno> {
        self.bm().resummarise();
        if self.r.last_idx.load(Relaxed) >= self.a.layout().ipc_mni as i32 {
            self.r.last_idx.store(-1, Relaxed);
        }
        if self.r.cursor.load(Relaxed) > self.a.layout().ipc_mni {
            self.r.cursor.store(0, Relaxed);
        }
        let (mut n, mut max, mut u1, mut u2) = (0u32, -1i32, 0u64, 0u64);
        let mut entries = Vec::new();
        for idx in self.bm().iter() {
            let s = slot::<K>(self.a, idx)?;
            let h = s.head();
            if h.state.load(Relaxed) != LIVE {
                // A used bit without a live object: stale, drop it.
                h.state.store(FREE, Relaxed);
                self.bm().clear(idx);
                continue;
            }
            n += 1;
            max = idx as i32;
            let (a, b) = K::usage(self.a, s);
            u1 = u1.saturating_add(a);
            u2 = u2.saturating_add(b);
            let key = h.key.load(Relaxed);
            if key != IPC_PRIVATE {
                entries.push((key, idx));
            }
        }
        self.r.in_use.store(n, Relaxed);
        self.r.max_idx.store(max, Relaxed);
        self.r.used.store(u1, Relaxed);
        self.r.used2.store(u2, Relaxed);
        keys::rebuild(self.a, self.r, entries.into_iter())
    }
}

fn rebuild_of<K: Kind>(reg: &Reg<'_>) -> Result<(), Errno> {
    reg.rebuild::<K>()
}

/// `ipc_obtain_object_check`: the live object with `id`, without the
/// registry lock. EINVAL when the index is unused or holds another object
/// (its sequence number differs).
pub fn obtain<K: Kind>(a: &Session, id: i32) -> Result<Found<'_, K::Slot>, Errno> {
    let l = a.layout();
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    let idx = l.idx_of(id);
    let s = used_slot::<K>(a, idx)?;
    let h = s.head();
    // Acquire: pairs with the Release publishing LIVE in `create`; the
    // generation was written before it.
    if h.state.load(Acquire) != LIVE || h.seq.load(Relaxed) != l.seq_of(id) {
        return Err(Errno::EINVAL);
    }
    Ok(Found {
        idx,
        slot: s,
        generation: h.generation.load(Relaxed),
    })
}

/// `ipc_obtain_object_idr` for the `*_STAT` commands: the live object at
/// index `idx`, whatever its sequence number.
pub fn obtain_idx<K: Kind>(a: &Session, idx: u32) -> Result<Found<'_, K::Slot>, Errno> {
    let s = used_slot::<K>(a, idx)?;
    let h = s.head();
    // Acquire: as in `obtain`.
    if h.state.load(Acquire) != LIVE {
        return Err(Errno::EINVAL);
    }
    Ok(Found {
        idx,
        slot: s,
        generation: h.generation.load(Relaxed),
    })
}

/// `ipc_valid_object` after locking: the object is still the one found
/// (same generation of its slot); EIDRM when it was removed meanwhile,
/// even if another object now has its id.
pub fn still_valid<S: Slot>(f: &Found<'_, S>) -> Result<(), Errno> {
    let h = f.slot.head();
    if h.state.load(Acquire) != LIVE || h.generation.load(Relaxed) != f.generation {
        return Err(Errno::EIDRM);
    }
    Ok(())
}

/// What `ipcget_public` answers for an existing `key` this process found
/// before (`recent.rs`), without the registry lock (after EEXIST, which
/// the caller has ruled out): `more_checks`, then `ipcperms(flg)`, then the
/// id; `None` when it must be asked under the registry lock (module doc).
#[inline]
pub fn existing<K: Kind>(
    a: &Session,
    cred: &Cred,
    key: i32,
    flg: i32,
    more_checks: impl Fn(&K::Slot) -> SysResult<()>,
) -> Option<SysResult<i32>> {
    let (idx, generation) = a.recent().recall(K::MECH, key)?;
    if !ids::is_used(a, K::MECH, idx) {
        return None;
    }
    let s = slot::<K>(a, idx).ok()?;
    let h = s.head();
    // Acquire: pairs with the Release that publishes LIVE, and with
    // IPC_SET's even `perm_seq` (its fields written before it).
    let ps = h.perm_seq.load(Acquire);
    if ps & 1 != 0 || !same(h, generation, key) {
        return None;
    }
    let r = more_checks(s).and_then(|()| perm::ipcperms(cred, h, flg));
    let seq = h.seq.load(Relaxed);
    // Everything above is read before the second look.
    fence(Acquire);
    if h.perm_seq.load(Relaxed) != ps || !same(h, generation, key) {
        return None;
    }
    Some(r.map(|()| a.layout().make_id(seq, idx)))
}

/// The slot holds the live object of `generation` with `key`.
#[inline(always)]
fn same(h: &Head, generation: u64, key: i32) -> bool {
    h.state.load(Acquire) == LIVE
        && h.generation.load(Relaxed) == generation
        && h.key.load(Relaxed) == key
}
