//! The participating processes: one record per process (pid and start
//! time, so a recycled pid is never taken for the old process), holding
//! its SEM_UNDO entries (`sem/undo.rs`).
//!
//! # Protocol
//! The table is an array of [`Proc`] in the heap, found through the
//! header's [`Procs`]; records are named by their index, which survives
//! the table's growth. Everything is protected by the procs lock, a leaf
//! after the object locks and before the heap's: `registry -> object ->
//! procs -> heap`. A process finds (or makes) its record once and caches
//! the index until it forks. Threads share their process's record; an
//! exec keeps it (same pid, same start time).
//!
//! A record whose process is gone (SIGKILL, `_exit`, a crash) is cleaned
//! up by whoever meets it: [`reap`] applies its undo entries, as the
//! kernel's exit path would have, and frees it. Sleepers run it now and
//! then, so a set held by a dead SEM_UNDO holder is released.
//!
//! # Layout
//! [`Proc`]: 64 bytes, `pid` @0, `state` @4, `start` @8, `undos` @16,
//! `attaches` @24, `image` @32.

use crate::session::Session;
use crate::arena::header::Procs;
use crate::errno::Errno;
use crate::heap;
use crate::lock::{self, Guard};
use core::sync::atomic::Ordering::Relaxed;
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
    let mut g = procs(a).lock.lock()?;
    if g.recovered() {
        g.repaired();
    }
    Ok(g)
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

/// Record `idx`, checked. Procs lock held.
pub fn record(a: &Session, idx: u32) -> Result<&Proc, Errno> {
    table(a)?.get(idx as usize).ok_or(Errno::EUCLEAN)
}

/// The calling process's record index, made on first use (and again in a
/// forked child: a new process).
pub fn me(a: &Session) -> Result<u32, Errno> {
    let generation = lock::fork_generation() + 1;
    let cached = a.own_proc.load(Relaxed);
    if cached >> 32 == generation & 0xffff_ffff && cached as u32 != 0 {
        return Ok(cached as u32 - 1);
    }
    let pid = crate::sys::process::getpid();
    let start = lock::own_start();
    let (idx, exec) = {
        let _g = lock(a)?;
        find_or_make(a, pid, start)?
    };
    if exec {
        // This image replaced the one that made the record (execve): its
        // attachments are gone with its address space; undo entries stay.
        adopt_image(a, idx, pid, start)?;
    }
    a.own_proc
        .store(((generation & 0xffff_ffff) << 32) | u64::from(idx + 1), Relaxed);
    // A newcomer cleans up after the processes that left without doing it
    // themselves (bounded by the table; once per process).
    let _ = reap(a);
    Ok(idx)
}

/// The calling process's record if it has one, without making one: what
/// an image finds of itself when it attaches, and at exit. A record made
/// by an earlier image of the process (before an execve) is taken over as
/// in [`me`]: its attachments dropped, its undo entries kept. Caches the
/// index.
pub fn adopt(a: &Session) -> Result<Option<u32>, Errno> {
    let generation = lock::fork_generation() + 1;
    let cached = a.own_proc.load(Relaxed);
    if cached >> 32 == generation & 0xffff_ffff && cached as u32 != 0 {
        return Ok(Some(cached as u32 - 1));
    }
    let pid = crate::sys::process::getpid();
    let start = lock::own_start();
    let found = {
        let _g = lock(a)?;
        table(a)?.iter().enumerate().find_map(|(i, r)| {
            (r.state.load(Relaxed) == LIVE
                && r.pid.load(Relaxed) == pid
                && r.start.load(Relaxed) == start)
                .then(|| (i as u32, r.image.load(Relaxed) != image()))
        })
    };
    let Some((idx, exec)) = found else {
        return Ok(None);
    };
    if exec {
        adopt_image(a, idx, pid, start)?;
    }
    a.own_proc
        .store(((generation & 0xffff_ffff) << 32) | u64::from(idx + 1), Relaxed);
    Ok(Some(idx))
}

/// Takes record `idx` over for this program image: the attachments of
/// the image an execve replaced dropped (under the finishing claim, so two
/// threads of the new image never drop one entry twice), then the record
/// marked as this image's.
fn adopt_image(a: &Session, idx: u32, pid: i32, start: u64) -> Result<(), Errno> {
    if !finish(a, idx, pid, Some(start), Finish::Exec)? {
        // Another thread of this image is at it: it marks the record.
        return Ok(());
    }
    let _g = lock(a)?;
    record(a, idx)?.image.store(image(), Relaxed);
    Ok(())
}

/// A number drawn once per program image (see [`Proc::image`]).
fn image() -> u64 {
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
fn find_or_make(a: &Session, pid: i32, start: u64) -> Result<(u32, bool), Errno> {
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

/// Frees record `r` and uncounts it. Procs lock held.
fn release(a: &Session, r: &Proc) {
    r.spare[0].store(0, Relaxed);
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
    let off = heap::alloc(a, u64::from(new_cap) * PROC_BYTES)?;
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
        let _ = heap::free(a, old_off, u64::from(old_cap) * PROC_BYTES);
    }
    Ok(old.len() as u32)
}

/// The live records: `(index, pid, start)`. Procs lock held. Bounded by
/// the table; the liveness checks (system calls) are made after the lock
/// is released, so nobody waits on the procs lock while /proc is read.
fn live_records(a: &Session) -> Result<Vec<(u32, i32, u64)>, Errno> {
    let t = table(a)?;
    let mut out = Vec::new();
    out.try_reserve(t.len()).map_err(|_| Errno::ENOMEM)?;
    out.extend(
        t.iter()
            .enumerate()
            .filter(|(_, r)| r.state.load(Relaxed) == LIVE)
            .map(|(i, r)| (i as u32, r.pid.load(Relaxed), r.start.load(Relaxed))),
    );
    Ok(out)
}

/// Unborn records to drop: `(index, nonce)` of those whose parent is gone
/// or that waited longer than `UNBORN_NS`, and of those being released.
/// Procs lock held. Bounded by the table.
fn stillborn(a: &Session) -> Result<Vec<(u32, u64)>, Errno> {
    let now = lock::monotonic_ns();
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
    let nonce = lock::random_u64().unwrap_or_else(|| lock::monotonic_ns() ^ 0x9e37_79b9) | 1;
    let t = table(a)?;
    let i = match t.iter().position(|r| r.state.load(Relaxed) == FREE) {
        Some(i) => i as u32,
        None => grow(a)?,
    };
    // The nonce and time before the state: a record is read as UNBORN
    // only under this lock, which orders them anyway.
    let r = record(a, i)?;
    r.spare[0].store(nonce, Relaxed);
    r.spare[1].store(lock::monotonic_ns(), Relaxed);
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
    let generation = lock::fork_generation() + 1;
    a.own_proc
        .store(((generation & 0xffff_ffff) << 32) | u64::from(idx + 1), Relaxed);
    Ok(true)
}

/// Drops unborn record `idx` made with `nonce` (the fork failed, or its
/// child never claimed it): its attachments uncounted, the record freed.
/// A dropper killed midway leaves it RELEASING for the next reaper; two
/// droppers never work on it at once ([`claim`]).
pub fn release_unborn(a: &Session, idx: u32, nonce: u64) -> Result<(), Errno> {
    let pid = {
        let _g = lock(a)?;
        let r = record(a, idx)?;
        let state = r.state.load(Relaxed);
        if r.spare[0].load(Relaxed) != nonce || !(state == UNBORN || state == RELEASING) {
            return Ok(());
        }
        r.state.store(RELEASING, Relaxed);
        r.pid.load(Relaxed)
    };
    let ok = move |r: &Proc| r.state.load(Relaxed) == RELEASING && r.spare[0].load(Relaxed) == nonce;
    if !claim(a, idx, &ok)? {
        return Ok(());
    }
    let done = drop_attachments(a, idx, pid, &ok);
    let _g = lock(a)?;
    if let Ok(r) = claimed(a, idx, &ok) {
        r.spare[2].store(0, Relaxed);
        if done.is_ok() && r.attaches.load(Relaxed) == 0 {
            release(a, r);
        }
    }
    done
}

/// Cleans up after every process that is gone: applies its undo entries
/// (as `exit_sem` would have) and frees its record. Returns how many.
/// Takes set locks and the procs lock in turn, never together.
pub fn reap(a: &Session) -> Result<u32, Errno> {
    let (live, unborn) = {
        let _g = lock(a)?;
        (live_records(a)?, stillborn(a)?)
    };
    let mut n = 0;
    for &(idx, pid, start) in &live {
        if !lock::process_alive(pid, start) && finish(a, idx, pid, Some(start), Finish::Gone)? {
            n += 1;
        }
    }
    for &(idx, nonce) in &unborn {
        release_unborn(a, idx, nonce)?;
    }
    Ok(n)
}

/// Cleans up after process `pid` if it has a record and is gone (a parent
/// that has just waited for it); whether it had one.
pub fn reap_pid(a: &Session, pid: i32) -> Result<bool, Errno> {
    let found = {
        let _g = lock(a)?;
        table(a)?.iter().enumerate().find_map(|(i, r)| {
            (r.state.load(Relaxed) == LIVE && r.pid.load(Relaxed) == pid)
                .then(|| (i as u32, r.start.load(Relaxed)))
        })
    };
    match found {
        Some((idx, start)) if !lock::process_alive(pid, start) => {
            finish(a, idx, pid, Some(start), Finish::Gone)
        }
        _ => Ok(false),
    }
}

/// What `exit` does for the calling process's semaphores: its undo
/// entries applied. Its shm attachments stay counted while they are mapped
/// (the process goes on): they are dropped with the record when the
/// process is found gone.
pub fn exit(a: &Session) -> Result<(), Errno> {
    exit_as(a, true)
}

/// What the kernel's exit path does for a process that is ending (the C
/// ABI's destructor): its undo entries applied and its attachments
/// dropped, as `exit_mm` and `exit_sem` would. Nothing is unmapped (code
/// that runs after may still touch an attachment; the mappings go with
/// the process).
pub fn exit_ending(a: &Session) -> Result<(), Errno> {
    exit_as(a, false)
}

fn exit_as(a: &Session, mapped: bool) -> Result<(), Errno> {
    // An image that has not used its record yet may still have one: made
    // before its execve, with undo entries that this exit must apply.
    let Some(idx) = adopt(a)? else {
        return Ok(());
    };
    a.own_proc.store(0, Relaxed);
    let what = if mapped { Finish::Undo } else { Finish::Exit };
    finish(a, idx, crate::sys::process::getpid(), None, what).map(|_| ())
}

/// What a new program image does when it attaches: if this process (pid
/// and start time) has a record made by the image that an exec replaced,
/// the attachments that went with the old address space are dropped now
/// (undo entries stay, as execve keeps them), as the kernel drops them at
/// the exec itself. Makes no record when there is none.
pub fn after_exec(a: &Session) -> Result<(), Errno> {
    let pid = crate::sys::process::getpid();
    let start = lock::own_start();
    let replaced = {
        let _g = lock(a)?;
        table(a)?.iter().any(|r| {
            r.state.load(Relaxed) == LIVE
                && r.pid.load(Relaxed) == pid
                && r.start.load(Relaxed) == start
                && r.image.load(Relaxed) != image()
        })
    };
    if replaced {
        // `me` finds the record, sees the exec and drops the attachments.
        me(a)?;
    }
    Ok(())
}

/// What [`finish`] does to a record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Finish {
    /// The process lives on (a `Namespace` dropped): undo entries applied,
    /// attachments kept while mapped; the record stays if it has any.
    Undo,
    /// A new program image of the process (execve): the attachments went
    /// with the old address space; undo entries and record stay.
    Exec,
    /// The process is ending (its last act in ipcns): undo entries
    /// applied, attachments dropped, the record freed.
    Exit,
    /// The process is gone: as `Exit`, by someone else.
    Gone,
}

/// Claims record `idx` for finishing when `ok` accepts it: no live thread
/// may be finishing it already (a finisher that died is replaced: each step
/// of a finish can be made again). The claim is the caller's identity in
/// `spare[2]`. Whether the caller has it. Procs lock taken and released.
fn claim(a: &Session, idx: u32, ok: &impl Fn(&Proc) -> bool) -> Result<bool, Errno> {
    let me = lock::my_identity();
    let _g = lock(a)?;
    let r = record(a, idx)?;
    if !ok(r) {
        return Ok(false);
    }
    let by = r.spare[2].load(Relaxed);
    if by != 0 && by != me && lock::identity_alive(by) {
        return Ok(false);
    }
    r.spare[2].store(me, Relaxed);
    Ok(true)
}

/// Record `idx` if the caller still has it claimed. Procs lock held.
fn claimed<'a>(a: &'a Session, idx: u32, ok: &impl Fn(&Proc) -> bool) -> Result<&'a Proc, Errno> {
    let r = record(a, idx)?;
    if ok(r) && r.spare[2].load(Relaxed) == lock::my_identity() {
        Ok(r)
    } else {
        // Taken over: the caller was thought dead.
        Err(Errno::EAGAIN)
    }
}

/// Finishes record `idx` of process `pid` (started at `start`, if given)
/// as `what` says: each undo entry applied (as `exit_sem`), then, unless
/// the process lives on with its mappings, each attachment dropped
/// (`exit_shm`); the record freed once nothing is left on it. Whether the
/// caller did it (false: the record is gone, another process's, or being
/// finished by another live thread).
///
/// One finisher at a time ([`claim`]). Entries are taken one at a time from
/// the head of their list under the procs lock, applied (idempotent: an
/// applied entry is marked so under its set's lock, through the set's
/// journal), then unlinked and freed, so no finisher ever follows an entry
/// freed meanwhile, and a finisher killed anywhere leaves a record the
/// next one finishes exactly (at worst an entry unlinked and not yet freed
/// leaks).
pub fn finish(a: &Session, idx: u32, pid: i32, start: Option<u64>, what: Finish) -> Result<bool, Errno> {
    let ok = move |r: &Proc| {
        r.state.load(Relaxed) == LIVE
            && r.pid.load(Relaxed) == pid
            && start.is_none_or(|s| r.start.load(Relaxed) == s)
    };
    if !claim(a, idx, &ok)? {
        return Ok(false);
    }
    crate::fault::step();
    let mut done = Ok(());
    if what != Finish::Exec {
        done = apply_undos(a, idx, pid, &ok);
    }
    if done.is_ok() && what != Finish::Undo {
        done = drop_attachments(a, idx, pid, &ok);
    }
    // However it ended, the claim goes (an error leaves the rest to the
    // next finisher).
    let _g = lock(a)?;
    let Ok(r) = claimed(a, idx, &ok) else {
        return done.map(|()| true);
    };
    crate::fault::step();
    r.spare[2].store(0, Relaxed);
    if done.is_ok()
        && what != Finish::Exec
        && r.undos.load(Relaxed) == 0
        && r.attaches.load(Relaxed) == 0
    {
        release(a, r);
    }
    done.map(|()| true)
}

/// Applies and frees each undo entry of claimed record `idx`.
fn apply_undos(a: &Session, idx: u32, pid: i32, ok: &impl Fn(&Proc) -> bool) -> Result<(), Errno> {
    use crate::sem::undo;
    {
        let _g = lock(a)?;
        undo::cut_proc_cycle(a, claimed(a, idx, ok)?);
    }
    for _ in 0..crate::chain::MAX_LINKS {
        let first = {
            let _g = lock(a)?;
            claimed(a, idx, ok)?.undos.load(Relaxed)
        };
        if first == 0 {
            break;
        }
        match undo::apply_at_exit(a, first, pid) {
            // An entry that is no entry cannot be applied: dropped.
            Ok(()) | Err(Errno::EUCLEAN) => {}
            Err(e) => return Err(e),
        }
        crate::fault::step();
        let _g = lock(a)?;
        let r = claimed(a, idx, ok)?;
        if undo::head(a, first).is_err() {
            // The rest of the list cannot be followed (leaked).
            if r.undos.load(Relaxed) == first {
                r.undos.store(0, Relaxed);
            }
        } else if undo::unlink_from_proc(a, r, first) {
            crate::fault::step();
            undo::free(a, first);
        }
    }
    Ok(())
}

/// Drops each attachment of claimed record `idx` (`exit_shm`: the
/// mappings go with the address space).
fn drop_attachments(a: &Session, idx: u32, pid: i32, ok: &impl Fn(&Proc) -> bool) -> Result<(), Errno> {
    {
        let _g = lock(a)?;
        crate::shm::attach::cut_cycle(a, claimed(a, idx, ok)?);
    }
    for _ in 0..crate::chain::MAX_LINKS {
        {
            let _g = lock(a)?;
            claimed(a, idx, ok)?;
        }
        if !crate::shm::attach::drop_first(a, idx, pid)? {
            break;
        }
    }
    Ok(())
}

/// A process killed at every step of the SEM_UNDO path in turn (take,
/// the undo entry made and changed, release, exit's application, the
/// record freed), and a reaper killed at every step of finishing a dead
/// process's record: each time, once whoever comes next has cleaned up,
/// the semaphore is exactly where the kernel would leave it, the
/// namespace checks clean, and at most one heap block (the one being
/// moved) is lost.
#[cfg(test)]
mod deaths {
    #![allow(unsafe_code)]

    use crate::abi::{IPC_CREAT, SEM_UNDO, SETVAL, GETVAL, sembuf};
    use crate::namespace::Namespace;
    use crate::sem::SemArg;
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

    fn op(v: i16) -> sembuf {
        sembuf {
            sem_num: 0,
            sem_op: v,
            sem_flg: SEM_UNDO,
        }
    }

    /// A word of memory shared with forked children.
    fn shared_word() -> &'static AtomicU64 {
        // SAFETY: a fresh anonymous shared mapping of one page, never
        // unmapped; an AtomicU64 at its start is aligned and valid.
        unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            &*(p as *const AtomicU64)
        }
    }

    /// Runs `f` in a forked child killed at its `die_at`-th step (0:
    /// never); the steps it made, whether it was killed.
    fn in_child(die_at: u64, f: impl FnOnce()) -> (u64, bool) {
        let steps = shared_word();
        steps.store(0, Relaxed);
        // SAFETY: the child runs `f` and `_exit`s; nothing of the parent's
        // other threads is used.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            crate::fault::die_at(die_at);
            f();
            steps.store(crate::fault::steps(), Relaxed);
            // SAFETY: ends the child without running the parent's exit
            // handlers.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our own child, a status word of ours.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        (steps.load(Relaxed), libc::WIFSIGNALED(status))
    }

    struct Scratch(std::path::PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = Namespace::remove_at(&self.0);
        }
    }

    fn fresh(tag: &str) -> (Scratch, Namespace, i32, u64) {
        let path = std::env::temp_dir().join(format!(
            "ipcns-deaths-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let ns = Namespace::create_at(&path, Default::default()).unwrap();
        let me = ns.cred().unwrap();
        let id = ns.semget(&me, 0, 1, IPC_CREAT | 0o600).unwrap();
        ns.semctl(&me, id, 0, SETVAL, SemArg::Val(1)).unwrap();
        // The process table exists (this process's record), as it does
        // once anyone used it: the baseline of the heap.
        super::me(ns.arena()).unwrap();
        let base = ns.heap_in_use();
        (Scratch(path), ns, id, base)
    }

    /// What is left after a death and the cleanup that follows it.
    fn verdict(ns: &Namespace, id: i32, base: u64, what: &str) {
        let me = ns.cred().unwrap();
        ns.reap_exited().unwrap();
        let val = ns.semctl(&me, id, 0, GETVAL, SemArg::None);
        assert_eq!(val, Ok(1), "{what}: the semaphore");
        let (_, problems) = ns.problems();
        assert!(problems.is_empty(), "{what}: {problems:?}");
        let leaked = ns.heap_in_use().saturating_sub(base);
        assert!(leaked <= 64, "{what}: {leaked} heap bytes left");
    }

    #[test]
    fn a_semundo_user_killed_at_every_step() {
        let user = |path: &std::path::Path, id: i32| {
            let ns = Namespace::open_at(path).unwrap();
            let me = ns.cred().unwrap();
            for v in [-1, 1, -1] {
                let _ = ns.semop(&me, id, &[op(v)]);
            }
            let _ = super::exit_ending(ns.arena());
        };
        let (s, ns, id, base) = fresh("user");
        let (n, killed) = in_child(0, || user(&s.0, id));
        assert!(!killed && n > 10, "{n} steps");
        verdict(&ns, id, base, "no death");
        drop(ns);
        for k in 1..=n {
            let (s, ns, id, base) = fresh("user");
            let (_, killed) = in_child(k, || user(&s.0, id));
            assert!(killed, "step {k} of {n} was reached");
            verdict(&ns, id, base, &format!("killed at step {k} of {n}"));
        }
        println!("a SEM_UNDO user killed at each of its {n} steps: exact every time");
    }

    #[test]
    fn a_reaper_killed_at_every_step() {
        let holder = |path: &std::path::Path, id: i32| {
            let ns = Namespace::open_at(path).unwrap();
            let me = ns.cred().unwrap();
            let _ = ns.semop(&me, id, &[op(-1)]);
            // Gone without exiting through ipcns.
            let _ = crate::sys::process::kill(crate::sys::process::getpid(), libc::SIGKILL);
        };
        let reaper = |path: &std::path::Path| {
            let ns = Namespace::open_at(path).unwrap();
            let _ = ns.reap_exited();
            core::mem::forget(ns);
        };
        let (s, ns, id, base) = fresh("reaper");
        in_child(0, || holder(&s.0, id));
        let (n, killed) = in_child(0, || reaper(&s.0));
        assert!(!killed && n > 5, "{n} steps");
        verdict(&ns, id, base, "no death");
        drop(ns);
        for k in 1..=n {
            let (s, ns, id, base) = fresh("reaper");
            in_child(0, || holder(&s.0, id));
            let (_, killed) = in_child(k, || reaper(&s.0));
            assert!(killed, "step {k} of {n} was reached");
            verdict(&ns, id, base, &format!("reaper killed at step {k} of {n}"));
        }
        println!("a reaper killed at each of its {n} steps: exact every time");
    }
}
