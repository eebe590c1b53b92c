//! The participating processes: one record per process (pid and start
//! time, so a recycled pid is never taken for the old process), holding
//! its SEM_UNDO entries (`sem/undo.rs`).
//!
//! # Protocol
//! The table is an array of [`Proc`] in the heap, found through the
//! header's [`Procs`]; records are named by their index, which survives
//! the table's growth. Everything is protected by the procs lock (its
//! place in the lock order: `lock/mod.rs`). A process finds (or makes) its record once and caches
//! the index until it forks. Threads share their process's record; an
//! exec keeps it (same pid, same start time).
//!
//! A record whose process is gone (SIGKILL, `_exit`, a crash) is cleaned
//! up by whoever meets it: `process::reap` (the layer above the
//! mechanisms, which finishes records) applies its undo entries, as the
//! kernel's exit path would have, and frees it. This file is the table
//! alone: the mechanisms below that layer reach it through the session
//! ([`Session::me`], [`Session::reap`]).
//!
//! # Layout
//! [`Proc`]: 64 bytes, `pid` @0, `state` @4, `start` @8, `undos` @16,
//! `attaches` @24, `image` @32.

use crate::arena::header::Procs;
use crate::errno::Errno;
use crate::lock::{self, Guard};
use crate::session::Session;
use core::sync::atomic::Ordering::{Acquire, Relaxed};
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

/// `state`: unused.
pub const FREE: u32 = 0;
/// `state`: a process's record.
pub const LIVE: u32 = 1;
/// `state`: the record of a child being forked, made by its parent before
/// `fork` with the parent's attachments already counted (Linux counts them
/// inside `fork`, in `dup_mmap`). `pid` and `start` are the parent's until
/// the child claims it; `spare[0]` is the claim's nonce, `spare[1]` the
/// creation time (CLOCK_MONOTONIC ns).
pub const UNBORN: u32 = 2;
/// `state`: an unborn record being dropped (the fork failed, or no child
/// claimed it in time); whoever meets it finishes the drop.
pub const RELEASING: u32 = 3;

/// An unborn record not claimed within this time is dropped (its child,
/// if there is one, then counts its attachments itself when it runs).
const UNBORN_NS: u64 = 1_000_000_000;

/// One process.
#[repr(C, align(64))]
pub struct Proc {
    pub pid: AtomicI32,
    pub state: AtomicU32,
    /// Start time (ticks after boot) of the process.
    pub start: AtomicU64,
    /// Its first undo entry (heap offset), linked through `next_proc`.
    pub undos: AtomicU64,
    /// Its first shm attachment (heap offset), linked through `next`.
    pub attaches: AtomicU64,
    /// A number drawn by the program image that made the record: another
    /// number with the same pid and start time means an exec happened
    /// (attachments gone, undo entries kept).
    pub image: AtomicU64,
    /// `[nonce, created]` of an UNBORN record; unused otherwise. Then the
    /// identity (as lock words name threads) of the thread finishing the
    /// record (`finish`), 0 when none.
    pub spare: [AtomicU64; 3],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Proc>() == 64);
    assert!(offset_of!(Proc, start) == 8);
    assert!(offset_of!(Proc, undos) == 16);
    assert!(offset_of!(Proc, attaches) == 24);
    assert!(offset_of!(Proc, image) == 32);
};

// repr(C), atomics only, no Drop.
crate::arena::map::shared_types!(Proc);

const PROC_BYTES: u64 = 64;
/// The table never grows past this many records.
const MAX_PROCS: u32 = 1 << 20;

fn procs(a: &Session) -> &Procs {
    &a.header().procs
}

/// Locks the table (its state is repaired by construction: every change
/// is one store, or a new table published by one store).
pub fn lock(a: &Session) -> Result<Guard<'_>, Errno> {
    procs(a).lock.lock().map(repaired)
}

/// A procs lock just taken, its state repaired (every change is one
/// store: nothing to do but say so).
fn repaired(mut g: Guard<'_>) -> Guard<'_> {
    if g.recovered() {
        g.repaired();
    }
    g
}

/// Locks the table, giving up after `ns` whatever the call's bound: for a
/// look taken inside an object's lock (the death words of a set's SEM_UNDO
/// holders), which a participant keeping the table locked must not hold
/// up, nor the object with it.
pub fn lock_briefly(a: &Session, ns: u64) -> Result<Guard<'_>, Errno> {
    let deadline = crate::sys::time::monotonic_ns().saturating_add(ns);
    procs(a).lock.lock_until_only(deadline).map(repaired)
}

/// The table, checked against the heap. Procs lock held.
pub fn table(a: &Session) -> Result<&[Proc], Errno> {
    let p = procs(a);
    let (off, cap) = (p.table.load(Relaxed), p.cap.load(Relaxed));
    if off == 0 || cap == 0 {
        return Ok(&[]);
    }
    if cap > MAX_PROCS || !a.in_heap(off, u64::from(cap) * PROC_BYTES) {
        return Err(Errno::EUCLEAN);
    }
    a.view_slice(off, cap as usize)
}

/// Where the table is (its offset and capacity), for a look without the
/// procs lock that must know the table did not move under it.
pub fn table_place(a: &Session) -> (u64, u32) {
    let p = procs(a);
    (p.table.load(Acquire), p.cap.load(Acquire))
}

/// Record `idx`, checked. Procs lock held.
pub fn record(a: &Session, idx: u32) -> Result<&Proc, Errno> {
    table(a)?.get(idx as usize).ok_or(Errno::EUCLEAN)
}

/// The calling process's record index as cached in its session, if it is
/// this process's (a fork child has its parent's until it finds its own).
pub fn cached(a: &Session) -> Option<u32> {
    let generation = lock::fork_generation() + 1;
    let cached = a.own_proc.load(Relaxed);
    (cached >> 32 == generation & 0xffff_ffff && cached as u32 != 0).then(|| cached as u32 - 1)
}

/// Caches `idx` as the calling process's record index in its session.
pub fn cache(a: &Session, idx: u32) {
    let generation = lock::fork_generation() + 1;
    a.own_proc.store(
        ((generation & 0xffff_ffff) << 32) | u64::from(idx + 1),
        Relaxed,
    );
}

/// Forgets the cached index (the process is finishing its record).
pub fn uncache(a: &Session) {
    a.own_proc.store(0, Relaxed);
}

/// The live record of (`pid`, `start`), if any, and whether another
/// program image of the process made it (an exec).
pub fn find(a: &Session, pid: i32, start: u64) -> Result<Option<(u32, bool)>, Errno> {
    let _g = lock(a)?;
    Ok(table(a)?.iter().enumerate().find_map(|(i, r)| {
        (r.state.load(Relaxed) == LIVE
            && r.pid.load(Relaxed) == pid
            && r.start.load(Relaxed) == start)
            .then(|| (i as u32, r.image.load(Relaxed) != image()))
    }))
}

/// Marks record `idx` as this program image's.
pub fn mark_image(a: &Session, idx: u32) -> Result<(), Errno> {
    let _g = lock(a)?;
    record(a, idx)?.image.store(image(), Relaxed);
    Ok(())
}

/// A number drawn once per program image (see [`Proc::image`]); for a
/// thread acting for another process, the number of that process's image
/// (`acting.rs`).
pub fn image() -> u64 {
    if let Some(p) = crate::acting::current() {
        return p.image;
    }
    static IMAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IMAGE.get_or_init(|| {
        lock::random_u64().unwrap_or_else(|| {
            // No entropy: the time and our address differ per image.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64);
            (t ^ (&IMAGE as *const _ as usize as u64)) | 1
        })
    })
}

/// The record of (`pid`, `start`), made if missing; and whether it was
/// made by another program image of the same process (an exec).
pub(crate) fn find_or_make(a: &Session, pid: i32, start: u64) -> Result<(u32, bool), Errno> {
    let t = table(a)?;
    let mut free = None;
    for (i, r) in t.iter().enumerate() {
        match r.state.load(Relaxed) {
            // A record with our pid but another start time is an earlier
            // process's, gone: left for `reap`, which applies its undos.
            LIVE if r.pid.load(Relaxed) == pid && r.start.load(Relaxed) == start => {
                return Ok((i as u32, r.image.load(Relaxed) != image()));
            }
            FREE if free.is_none() => free = Some(i),
            _ => {}
        }
    }
    let i = match free {
        Some(i) => i as u32,
        None => grow(a)?,
    };
    // No death page yet (a freed record's word may still be there), and
    // no supervisor's call.
    record(a, i)?.spare[1].store(0, Relaxed);
    record(a, i)?.spare[0].store(0, Relaxed);
    take(a, i, pid, start, LIVE)?;
    Ok((i, false))
}

/// Makes free record `i` (pid, start time, this image, no entries) in
/// `state`, written last, and counts it. Procs lock held.
fn take(a: &Session, i: u32, pid: i32, start: u64, state: u32) -> Result<&Proc, Errno> {
    let r = record(a, i)?;
    r.pid.store(pid, Relaxed);
    r.start.store(start, Relaxed);
    r.undos.store(0, Relaxed);
    r.attaches.store(0, Relaxed);
    r.image.store(image(), Relaxed);
    r.spare[2].store(0, Relaxed);
    r.state.store(state, Relaxed);
    let p = procs(a);
    p.len.store(p.len.load(Relaxed).saturating_add(1), Relaxed);
    Ok(r)
}

/// `spare[1]` of a LIVE record holding its death page (`process/death.rs`):
/// the page's offset with this tag in its top bits, which no time an
/// UNBORN record keeps there (CLOCK_MONOTONIC ns, below 2^63) has.
const DEATH_TAG: u64 = 0xdea7 << 48;

/// Record `r`'s death page, if `spare[1]` names one (page aligned).
pub(crate) fn death_page(r: &Proc) -> Option<u64> {
    let w = r.spare[1].load(Relaxed);
    let page = w & !(0xffff << 48);
    (w & (0xffff << 48) == DEATH_TAG && page != 0 && page.is_multiple_of(4096)).then_some(page)
}

/// Names `page` as record `r`'s death page. Procs lock held.
pub(crate) fn set_death_page(r: &Proc, page: u64) {
    r.spare[1].store(DEATH_TAG | page, Relaxed);
}

/// The death word's offset in its page (`process/death.rs`): its last 8
/// bytes.
pub(crate) const DEATH_WORD_AT: u64 = 4088;

/// Record `r`'s death word, if it has a death page (checked). Procs lock
/// held.
pub(crate) fn death_word<'a>(
    a: &'a Session,
    r: &Proc,
) -> Option<&'a core::sync::atomic::AtomicU32> {
    let page = death_page(r)?;
    if !a.in_heap(page, 4096) {
        return None;
    }
    a.view(page + DEATH_WORD_AT).ok()
}

/// Whether record `r`'s death word is marked: the thread that armed it
/// has ended (the kernel's robust list walk), so its process may have
/// died. A record served by a supervisor (`acting.rs`), which has no
/// death word, always reads as marked: an observer looks in /proc for its
/// process (a few µs), as it would for a marked word. Procs lock held.
pub(crate) fn death_marked(a: &Session, r: &Proc) -> bool {
    r.spare[1].load(Relaxed) == SERVED
        || death_word(a, r).is_some_and(|w| w.load(Relaxed) & crate::sys::robust::OWNER_DIED != 0)
}

/// `spare[0]` of a LIVE record (unused by LIVE records otherwise) while a
/// supervisor's threads make calls for its process (`acting.rs`):
/// [`BUSY_TAG`], how many calls (bits 32-47), the supervisor's pid (bits
/// 0-31). A finisher leaves such a record alone (`process::exit::claim`)
/// while the supervisor lives: a call made for a process that died
/// meanwhile must not link its undo entry or attachment onto a record
/// being finished, or freed and taken by another process.
const BUSY_TAG: u64 = 0xb5b5 << 48;

/// The supervisor and the number of its calls if record `r` is busy.
/// Procs lock held.
pub(crate) fn busy(r: &Proc) -> Option<(i32, u64)> {
    let w = r.spare[0].load(Relaxed);
    (w & (0xffff << 48) == BUSY_TAG && (w >> 32) & 0xffff != 0)
        .then_some((w as u32 as i32, (w >> 32) & 0xffff))
}

/// One more call of this process (a supervisor) for record `r`. Procs
/// lock held.
pub(crate) fn busy_add(r: &Proc) {
    let n = busy(r).map_or(0, |(_, n)| n);
    let me = crate::sys::process::getpid() as u32 as u64;
    r.spare[0].store(BUSY_TAG | ((n + 1).min(0xffff)) << 32 | me, Relaxed);
}

/// One call fewer for record `r`. Procs lock held.
pub(crate) fn busy_sub(r: &Proc) {
    match busy(r) {
        Some((holder, n)) if n > 1 => {
            r.spare[0].store(BUSY_TAG | (n - 1) << 32 | holder as u32 as u64, Relaxed)
        }
        _ => r.spare[0].store(0, Relaxed),
    }
}

/// `spare[1]` of a LIVE record whose process a supervisor serves: no
/// death page (its process maps nothing of ours); its tag is no
/// [`DEATH_TAG`] and no time an UNBORN record keeps there.
const SERVED: u64 = 0x5e7d << 48;

/// Marks LIVE record `r`, which has no death page, as served by a
/// supervisor (see [`death_marked`]). Procs lock held.
pub(crate) fn mark_served(r: &Proc) {
    if r.spare[1].load(Relaxed) == 0 {
        r.spare[1].store(SERVED, Relaxed);
    }
}

/// Record `r` has no death page any more. Procs lock held.
pub(crate) fn clear_death_page(r: &Proc) {
    r.spare[1].store(0, Relaxed);
}

/// Frees record `r` and uncounts it. Procs lock held.
pub(crate) fn release(a: &Session, r: &Proc) {
    r.spare[0].store(0, Relaxed);
    r.spare[1].store(0, Relaxed);
    r.spare[2].store(0, Relaxed);
    r.state.store(FREE, Relaxed);
    let p = procs(a);
    p.len.store(p.len.load(Relaxed).saturating_sub(1), Relaxed);
}

/// Doubles the table (copying the records; indices stay); the first new
/// index. Procs lock held.
fn grow(a: &Session) -> Result<u32, Errno> {
    let p = procs(a);
    let old = table(a)?;
    let cap = (old.len() as u32).max(32);
    let new_cap = if old.is_empty() { cap } else { cap * 2 };
    if new_cap > MAX_PROCS {
        return Err(Errno::ENOSPC);
    }
    let off = a.alloc(u64::from(new_cap) * PROC_BYTES)?;
    let new: &[Proc] = a.view_slice(off, new_cap as usize)?;
    for (n, o) in new.iter().zip(old) {
        n.pid.store(o.pid.load(Relaxed), Relaxed);
        n.start.store(o.start.load(Relaxed), Relaxed);
        n.undos.store(o.undos.load(Relaxed), Relaxed);
        n.attaches.store(o.attaches.load(Relaxed), Relaxed);
        n.image.store(o.image.load(Relaxed), Relaxed);
        for (ns, os) in n.spare.iter().zip(&o.spare) {
            ns.store(os.load(Relaxed), Relaxed);
        }
        n.state.store(o.state.load(Relaxed), Relaxed);
    }
    let (old_off, old_cap) = (p.table.load(Relaxed), p.cap.load(Relaxed));
    // Publish: the capacity only grows, and the old records are copies.
    p.table.store(off, Relaxed);
    p.cap.store(new_cap, Relaxed);
    if old_off != 0 {
        let _ = a.free(old_off, u64::from(old_cap) * PROC_BYTES);
    }
    Ok(old.len() as u32)
}

/// The live records: `(index, pid, start, death word marked)`. Procs lock
/// held. Bounded by the table; the liveness checks (system calls) are
/// made after the lock is released, so nobody waits on the procs lock
/// while /proc is read.
pub fn live_records(a: &Session) -> Result<Vec<(u32, i32, u64, bool)>, Errno> {
    let t = table(a)?;
    let mut out = Vec::new();
    out.try_reserve(t.len()).map_err(|_| Errno::ENOMEM)?;
    out.extend(
        t.iter()
            .enumerate()
            .filter(|(_, r)| r.state.load(Relaxed) == LIVE)
            .map(|(i, r)| {
                (
                    i as u32,
                    r.pid.load(Relaxed),
                    r.start.load(Relaxed),
                    death_marked(a, r),
                )
            }),
    );
    Ok(out)
}

/// Unborn records to drop: `(index, nonce)` of those whose parent is gone
/// or that waited longer than `UNBORN_NS`, and of those being released.
/// Procs lock held. Bounded by the table.
pub fn stillborn(a: &Session) -> Result<Vec<(u32, u64)>, Errno> {
    let now = crate::sys::time::monotonic_ns();
    Ok(table(a)?
        .iter()
        .enumerate()
        .filter(|(_, r)| match r.state.load(Relaxed) {
            UNBORN => {
                now.saturating_sub(r.spare[1].load(Relaxed)) > UNBORN_NS
                    || !lock::process_alive(r.pid.load(Relaxed), r.start.load(Relaxed))
            }
            RELEASING => true,
            _ => false,
        })
        .map(|(i, r)| (i as u32, r.spare[0].load(Relaxed)))
        .collect())
}

/// Makes an unborn record for a child that the process of record `parent`
/// is about to fork: returns its index and the nonce the child claims it
/// with. Procs lock taken and released.
pub fn make_unborn(a: &Session, parent: u32) -> Result<(u32, u64), Errno> {
    let _g = lock(a)?;
    let (pid, start) = {
        let r = record(a, parent)?;
        (r.pid.load(Relaxed), r.start.load(Relaxed))
    };
    let nonce =
        lock::random_u64().unwrap_or_else(|| crate::sys::time::monotonic_ns() ^ 0x9e37_79b9) | 1;
    let t = table(a)?;
    let i = match t.iter().position(|r| r.state.load(Relaxed) == FREE) {
        Some(i) => i as u32,
        None => grow(a)?,
    };
    // The nonce and time before the state: a record is read as UNBORN
    // only under this lock, which orders them anyway.
    let r = record(a, i)?;
    r.spare[0].store(nonce, Relaxed);
    r.spare[1].store(crate::sys::time::monotonic_ns(), Relaxed);
    take(a, i, pid, start, UNBORN)?;
    Ok((i, nonce))
}

/// In the parent after a fork: names unborn record `idx` (made with
/// `nonce`) after its child `pid`, so it is the child's record from now
/// on, reaped as soon as the child is gone. Procs lock taken and released.
pub fn name_unborn(a: &Session, idx: u32, nonce: u64, pid: i32) -> Result<(), Errno> {
    let start = lock::process_start(pid);
    let _g = lock(a)?;
    let r = record(a, idx)?;
    if r.state.load(Relaxed) != UNBORN || r.spare[0].load(Relaxed) != nonce {
        return Ok(());
    }
    r.pid.store(pid, Relaxed);
    // A child already gone has no start time: 0 names no live process, so
    // the next reaper drops the record.
    r.start.store(start.unwrap_or(0), Relaxed);
    r.state.store(LIVE, Relaxed);
    Ok(())
}

/// In the forked child: takes unborn record `idx` as its own if it is
/// still the one made for it (`nonce`), whether or not the parent named it
/// already; false if it was dropped meanwhile (the child then counts its
/// attachments itself).
pub fn claim_unborn(a: &Session, idx: u32, nonce: u64) -> Result<bool, Errno> {
    let _g = lock(a)?;
    let r = record(a, idx)?;
    let mine = match r.state.load(Relaxed) {
        UNBORN => true,
        LIVE => r.pid.load(Relaxed) == crate::sys::process::getpid(),
        _ => false,
    };
    if !mine || r.spare[0].load(Relaxed) != nonce {
        return Ok(false);
    }
    r.pid.store(crate::sys::process::getpid(), Relaxed);
    r.start.store(lock::own_start(), Relaxed);
    r.image.store(image(), Relaxed);
    r.spare[0].store(0, Relaxed);
    r.spare[1].store(0, Relaxed);
    r.state.store(LIVE, Relaxed);
    // Cached as `me` caches it (the fork generation has moved on: the
    // lock's child handler, registered before ours, ran first).
    cache(a, idx);
    Ok(true)
}
