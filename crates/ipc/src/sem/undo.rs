//! SEM_UNDO: per process and set, the adjustment that undoes what the
//! process's SEM_UNDO operations did, applied when the process exits
//! (ipc/sem.c `struct sem_undo`, `find_alloc_undo`, `exit_sem`).
//!
//! # Protocol
//! An entry lives in the heap and is on two lists: its set's (`undos` in
//! the slot, through `next_set`, protected by the set lock) and its
//! process's (`undos` in the process record, through `next_proc`,
//! protected by the procs lock). It is made under the set lock (then the
//! procs lock, to link it to the process) the first time a process does a
//! SEM_UNDO operation on a set. Adjustments change with the values, in
//! the same journaled commit (`op.rs`). SETVAL and SETALL zero them.
//!
//! At exit, or when a dead process is reaped, each entry is applied under
//! its set's lock through the set's journal: the new values (clamped to
//! 0..=SEMVMX, as `exit_sem` clamps) and the entry to retire are written
//! first; the repair writes the values, takes the entry out of the set's
//! list and marks it applied, so a finisher killed midway never applies an
//! entry twice. An entry whose set was removed (or replaced at the same
//! id: the generation differs) is skipped. The procs lock then frees the
//! entries with the record.
//!
//! # Layout
//! 40-byte head ([`UndoHead`]: `next_proc` @0, `next_set` @8, `proc` @16,
//! `semid` @20, `generation` @24, `nsems` @32, `applied` @36), then
//! `nsems` 16-bit adjustments.

use super::sems;
use crate::chain::Chain;
use crate::errno::Errno;
use crate::object::SemSlot;
use crate::proc::{self, Proc};
use crate::session::Session;
use crate::sys::robust;
use crate::wait;
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicI32, AtomicU16, AtomicU32, AtomicU64};

/// The head of an entry.
#[repr(C, align(8))]
pub struct UndoHead {
    pub next_proc: AtomicU64,
    pub next_set: AtomicU64,
    /// The process record's index.
    pub proc: AtomicU32,
    pub semid: AtomicI32,
    /// The set's slot generation when the entry was made.
    pub generation: AtomicU64,
    pub nsems: AtomicU32,
    /// 1 once applied (or orphaned by the set's removal).
    pub applied: AtomicU32,
}

const HEAD: u64 = 40;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<UndoHead>() == HEAD as usize);
    assert!(offset_of!(UndoHead, generation) == 24);
    assert!(offset_of!(UndoHead, applied) == 36);
};

// repr(C), atomics only, no Drop.
crate::arena::map::shared_types!(UndoHead);

/// Heap bytes of an entry for `nsems` semaphores.
pub fn bytes(nsems: u32) -> u64 {
    (HEAD + 2 * u64::from(nsems)).next_multiple_of(8)
}

/// The entry at `off`, checked.
pub fn head(a: &Session, off: u64) -> Result<&UndoHead, Errno> {
    if off == 0 || !off.is_multiple_of(8) || !a.in_heap(off, HEAD) {
        return Err(Errno::EUCLEAN);
    }
    let h: &UndoHead = a.view(off)?;
    if !a.in_heap(off, bytes(h.nsems.load(Relaxed))) {
        return Err(Errno::EUCLEAN);
    }
    Ok(h)
}

/// The adjustments of the entry at `off` (16-bit, signed).
pub fn adj(a: &Session, off: u64) -> Result<&[AtomicU16], Errno> {
    let h = head(a, off)?;
    a.view_slice(off + HEAD, h.nsems.load(Relaxed) as usize)
}

/// The entries of a list from `first`, linked through `next_set` (`set`)
/// or `next_proc`: bounded and cycle-proof (`chain.rs`), no allocation.
fn chain(a: &Session, first: u64, set: bool) -> Chain<impl FnMut(u64) -> Option<u64> + '_> {
    Chain::new(first, move |off| {
        let h = head(a, off).ok()?;
        Some(if set {
            h.next_set.load(Relaxed)
        } else {
            h.next_proc.load(Relaxed)
        })
    })
}

/// The entries on the set's list (set lock held); a bad link ends it.
pub fn of_set<'a>(a: &'a Session, s: &'a SemSlot) -> impl Iterator<Item = u64> + 'a {
    chain(a, s.undos.load(Relaxed), true)
}

/// The set's SEM_UNDO holders (distinct records with an entry not yet
/// applied) for which `pick` gives something, with their record indices,
/// at most `max`. Set lock held; takes the procs lock if the set has
/// entries, waiting no longer than [`HOLDERS_LOOK_NS`]: a participant that
/// keeps the table locked does not hold up the set (a look that finds
/// nothing only leaves the dead to the reapers).
fn holders<'a, T>(
    a: &'a Session,
    s: &SemSlot,
    max: usize,
    mut pick: impl FnMut(&'a Proc) -> Option<T>,
) -> Vec<(u32, T)> {
    let mut out = Vec::new();
    if s.undos.load(Relaxed) == 0 {
        return out;
    }
    let Ok(_g) = proc::lock_briefly(a, HOLDERS_LOOK_NS) else {
        return out;
    };
    for off in of_set(a, s) {
        let Ok(h) = head(a, off) else { break };
        let idx = h.proc.load(Relaxed);
        if h.applied.load(Relaxed) != 0 || out.iter().any(|&(i, _)| i == idx) {
            continue;
        }
        if let Some(t) = proc::record(a, idx).ok().and_then(&mut pick) {
            out.push((idx, t));
            if out.len() == max {
                break;
            }
        }
    }
    out
}

/// The records of the set's SEM_UNDO holders whose death words are
/// marked (their processes may have died: `process/death.rs`), at most
/// [`MARKED_MAX`]. Set lock held.
pub fn marked_holders(a: &Session, s: &SemSlot) -> Vec<u32> {
    holders(a, s, MARKED_MAX, |r| proc::death_marked(a, r).then_some(()))
        .into_iter()
        .map(|(idx, ())| idx)
        .collect()
}

/// The death words of the set's SEM_UNDO holders (`process/death.rs`),
/// with their records, at most [`WATCHED_MAX`]: what a sleeper on the set
/// watches, since a holder's death may complete it. Set lock held.
pub fn holder_deaths<'a>(a: &'a Session, s: &SemSlot) -> Vec<(u32, &'a AtomicU32)> {
    holders(a, s, WATCHED_MAX, |r| {
        let w = proc::death_word(a, r)?;
        // FUTEX_WAITERS in an armed word: the kernel wakes a waiter when
        // it marks it (`wait.rs`). The owner ignores the bit.
        let v = w.load(Relaxed);
        if v & robust::TID_MASK != 0 && v & (robust::OWNER_DIED | robust::WAITERS) == 0 {
            let _ = w.compare_exchange(v, v | robust::WAITERS, Relaxed, Relaxed);
        }
        Some(w)
    })
}

/// Holders [`holder_deaths`] returns at most.
pub const WATCHED_MAX: usize = 64;

/// Holders [`marked_holders`] returns at most.
pub const MARKED_MAX: usize = 32;

/// How long [`holders`] waits for the procs lock.
const HOLDERS_LOOK_NS: u64 = 2_000_000;

/// The entries on a process's list (procs lock held); a bad link ends it.
pub fn of_proc<'a>(a: &'a Session, r: &'a Proc) -> impl Iterator<Item = u64> + 'a {
    chain(a, r.undos.load(Relaxed), false)
}

/// The next entry on a process's list (0 at the end or on a bad link).
pub fn next_proc(a: &Session, off: u64) -> u64 {
    head(a, off).map_or(0, |h| h.next_proc.load(Relaxed))
}

/// Cuts record `r`'s list where it loops back, if it does (what the list
/// was as far as it was sound): the lists are taken apart from the head,
/// each entry freed as it goes, so a loop would hand the takers entries
/// freed already, again and again. Procs lock held.
pub fn cut_proc_cycle(a: &Session, r: &Proc) {
    let next = |off: u64| head(a, off).ok().map(|h| h.next_proc.load(Relaxed));
    if let Some(closing) = crate::chain::cut_point(r.undos.load(Relaxed), next)
        && let Ok(h) = head(a, closing)
    {
        h.next_proc.store(0, Relaxed);
    }
}

/// Takes entry `off` off record `r`'s list; whether it was on it (only
/// then may the caller free it). Procs lock held.
pub fn unlink_from_proc(a: &Session, r: &Proc, off: u64) -> bool {
    // An entry linked to itself is the end of its list.
    let next = match next_proc(a, off) {
        n if n == off => 0,
        n => n,
    };
    if r.undos.load(Relaxed) == off {
        r.undos.store(next, Relaxed);
        return true;
    }
    for p in of_proc(a, r) {
        if let Ok(h) = head(a, p)
            && h.next_proc.load(Relaxed) == off
        {
            h.next_proc.store(next, Relaxed);
            return true;
        }
    }
    false
}

/// Frees the entries of record `r` that are applied (their set was
/// removed): nothing will read them again, since removal ended every wait
/// on the set and an exit's application cancels the waits that named the
/// entry. Run by the record's own process, the only one that frees its
/// entries while it lives, when it makes a new entry: a process that
/// creates, uses with SEM_UNDO and removes sets in a loop holds one entry,
/// not one per set. Procs lock held.
fn prune_applied(a: &Session, r: &Proc) {
    cut_proc_cycle(a, r);
    // One pass, from the head each time an entry goes (bounded by the
    // list's walk).
    for _ in 0..crate::chain::MAX_LINKS {
        let Some(off) =
            of_proc(a, r).find(|&off| head(a, off).is_ok_and(|h| h.applied.load(Relaxed) != 0))
        else {
            return;
        };
        if !unlink_from_proc(a, r, off) {
            return;
        }
        free(a, off);
    }
}

/// Frees an entry (off every list).
pub fn free(a: &Session, off: u64) {
    if let Ok(h) = head(a, off) {
        let _ = a.free(off, bytes(h.nsems.load(Relaxed)));
    }
}

/// `find_alloc_undo`: the calling process's entry for the set (set lock
/// held, the set checked valid), made if missing.
pub fn find_or_make(a: &Session, s: &SemSlot, semid: i32, generation: u64) -> Result<u64, Errno> {
    let me = a.me()?;
    for off in of_set(a, s) {
        let h = head(a, off)?;
        if h.proc.load(Relaxed) == me
            && h.generation.load(Relaxed) == generation
            && h.applied.load(Relaxed) == 0
        {
            return Ok(off);
        }
    }
    let n = sems(a, s)?.len() as u32;
    let off = a.alloc(bytes(n))?;
    crate::fault::step();
    let h: &UndoHead = a.view(off)?;
    h.proc.store(me, Relaxed);
    h.semid.store(semid, Relaxed);
    h.generation.store(generation, Relaxed);
    h.nsems.store(n, Relaxed);
    h.applied.store(0, Relaxed);
    // Onto the process's list first: an entry only its process knows is
    // freed at its exit; one only the set knows would leak.
    {
        let _g = proc::lock(a)?;
        let r = proc::record(a, me)?;
        prune_applied(a, r);
        h.next_proc.store(r.undos.load(Relaxed), Relaxed);
        r.undos.store(off, Relaxed);
    }
    crate::fault::step();
    h.next_set.store(s.undos.load(Relaxed), Relaxed);
    s.undos.store(off, Relaxed);
    Ok(off)
}

/// Zeroes the adjustments of every process for semaphore `semnum`, or all
/// of them (`None`): what SETVAL and SETALL do. Set lock held.
pub fn clear(a: &Session, s: &SemSlot, semnum: Option<u16>) {
    for off in of_set(a, s) {
        if let Ok(adj) = adj(a, off) {
            match semnum {
                Some(n) => {
                    if let Some(x) = adj.get(usize::from(n)) {
                        x.store(0, Relaxed);
                    }
                }
                None => adj.iter().for_each(|x| x.store(0, Relaxed)),
            }
        }
    }
}

/// Takes an entry out of its set's list. Set lock held.
pub fn unlink_from_set(a: &Session, s: &SemSlot, off: u64) {
    let next = head(a, off).map_or(0, |h| h.next_set.load(Relaxed));
    if s.undos.load(Relaxed) == off {
        s.undos.store(next, Relaxed);
        return;
    }
    for p in of_set(a, s) {
        if let Ok(h) = head(a, p)
            && h.next_set.load(Relaxed) == off
        {
            h.next_set.store(next, Relaxed);
            return;
        }
    }
}

/// The set is being removed: its entries stay with their processes,
/// marked applied (nothing to undo any more). Set lock held.
pub fn orphan_all(a: &Session, s: &SemSlot) {
    for off in of_set(a, s) {
        if let Ok(h) = head(a, off) {
            h.applied.store(1, Relaxed);
        }
    }
    s.undos.store(0, Relaxed);
}

/// Ends the wait of every sleeper on the set whose operation names undo
/// entry `off`: a live one's (a process that is ending) with EINTR, a dead
/// one's record dropped. Set lock held.
pub fn cancel_sleepers(a: &Session, s: &SemSlot, off: u64) {
    for w_off in wait::snapshot(a, &s.queue) {
        let Ok(w) = wait::at(a, w_off) else {
            continue;
        };
        if w.sem().undo_entry().load(Relaxed) != off || w.state.load(Relaxed) == wait::DONE {
            continue;
        }
        if wait::sleeper_alive(w) {
            let _ = wait::complete(a, &s.queue, w_off, libc::EINTR);
        } else {
            let _ = wait::drop_dead(a, &s.queue, w_off);
        }
    }
}

/// The repair's half of [`apply_at_exit`]: the entry out of the set's list
/// and marked applied. Set lock held.
pub fn retire(a: &Session, s: &SemSlot, off: u64) {
    unlink_from_set(a, s, off);
    crate::fault::step();
    if let Ok(h) = head(a, off) {
        h.applied.store(1, Relaxed);
    }
}
