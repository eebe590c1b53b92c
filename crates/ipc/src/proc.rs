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

use crate::arena::Arena;
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

fn procs(a: &Arena) -> &Procs {
    &a.header().procs
}

/// Locks the table (its state is repaired by construction: every change
/// is one store, or a new table published by one store).
pub fn lock(a: &Arena) -> Result<Guard<'_>, Errno> {
    let mut g = procs(a).lock.lock()?;
    if g.recovered() {
        g.repaired();
    }
    Ok(g)
}

/// The table, checked against the heap. Procs lock held.
pub fn table(a: &Arena) -> Result<&[Proc], Errno> {
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
pub fn record(a: &Arena, idx: u32) -> Result<&Proc, Errno> {
    table(a)?.get(idx as usize).ok_or(Errno::EUCLEAN)
}

/// The calling process's record index, made on first use (and again in a
/// forked child: a new process).
pub fn me(a: &Arena) -> Result<u32, Errno> {
    let generation = lock::fork_generation() + 1;
    let cached = a.own_proc.load(Relaxed);
    if cached >> 32 == generation & 0xffff_ffff && cached as u32 != 0 {
        return Ok(cached as u32 - 1);
    }
    let pid = std::process::id() as i32;
    let start = lock::own_start();
    let (idx, exec) = {
        let _g = lock(a)?;
        find_or_make(a, pid, start)?
    };
    if exec {
        // This image replaced the one that made the record (execve): its
        // attachments are gone with its address space; undo entries stay.
        crate::shm::attach::drop_all(a, idx, pid)?;
        let _g = lock(a)?;
        record(a, idx)?.image.store(image(), Relaxed);
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
pub fn adopt(a: &Arena) -> Result<Option<u32>, Errno> {
    let generation = lock::fork_generation() + 1;
    let cached = a.own_proc.load(Relaxed);
    if cached >> 32 == generation & 0xffff_ffff && cached as u32 != 0 {
        return Ok(Some(cached as u32 - 1));
    }
    let pid = std::process::id() as i32;
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
        crate::shm::attach::drop_all(a, idx, pid)?;
        let _g = lock(a)?;
        record(a, idx)?.image.store(image(), Relaxed);
    }
    a.own_proc
        .store(((generation & 0xffff_ffff) << 32) | u64::from(idx + 1), Relaxed);
    Ok(Some(idx))
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
fn find_or_make(a: &Arena, pid: i32, start: u64) -> Result<(u32, bool), Errno> {
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
    let r = record(a, i)?;
    r.pid.store(pid, Relaxed);
    r.start.store(start, Relaxed);
    r.undos.store(0, Relaxed);
    r.attaches.store(0, Relaxed);
    r.image.store(image(), Relaxed);
    r.state.store(LIVE, Relaxed);
    let p = procs(a);
    p.len.store(p.len.load(Relaxed).saturating_add(1), Relaxed);
    Ok((i, false))
}

/// Doubles the table (copying the records; indices stay); the first new
/// index. Procs lock held.
fn grow(a: &Arena) -> Result<u32, Errno> {
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

/// The records of processes that are gone: `(index, pid)`. Procs lock
/// held. Bounded by the table.
fn dead(a: &Arena) -> Result<Vec<(u32, i32)>, Errno> {
    Ok(table(a)?
        .iter()
        .enumerate()
        .filter(|(_, r)| r.state.load(Relaxed) == LIVE)
        .filter(|(_, r)| !lock::process_alive(r.pid.load(Relaxed), r.start.load(Relaxed)))
        .map(|(i, r)| (i as u32, r.pid.load(Relaxed)))
        .collect())
}

/// Cleans up after every process that is gone: applies its undo entries
/// (as `exit_sem` would have) and frees its record. Returns how many.
/// Takes set locks and the procs lock in turn, never together.
pub fn reap(a: &Arena) -> Result<u32, Errno> {
    let gone = {
        let _g = lock(a)?;
        dead(a)?
    };
    for &(idx, pid) in &gone {
        finish(a, idx, pid, false)?;
    }
    Ok(gone.len() as u32)
}

/// What `exit` does for the calling process's semaphores: its undo
/// entries applied. Its shm attachments stay counted while they are mapped
/// (the process goes on): they are dropped with the record when the
/// process is found gone.
pub fn exit(a: &Arena) -> Result<(), Errno> {
    // An image that has not used its record yet may still have one: made
    // before its execve, with undo entries that this exit must apply.
    let Some(idx) = adopt(a)? else {
        return Ok(());
    };
    a.own_proc.store(0, Relaxed);
    finish(a, idx, std::process::id() as i32, true)
}

/// Applies record `idx`'s undo entries for `pid` and frees them; then,
/// unless `mapped` (the process lives on with its mappings), drops its
/// attachments; frees the record once nothing is left on it. A finisher
/// killed midway leaves entries marked as applied, so the next one skips
/// them.
fn finish(a: &Arena, idx: u32, pid: i32, mapped: bool) -> Result<(), Errno> {
    let entries = {
        let _g = lock(a)?;
        let r = record(a, idx)?;
        if r.state.load(Relaxed) != LIVE || r.pid.load(Relaxed) != pid {
            return Ok(());
        }
        crate::sem::undo::list_of(a, r)
    };
    for e in &entries {
        crate::sem::undo::apply_at_exit(a, *e, pid)?;
    }
    // exit_shm: every attachment dropped (the mappings go with the
    // address space).
    if !mapped {
        crate::shm::attach::drop_all(a, idx, pid)?;
    }
    let _g = lock(a)?;
    let r = record(a, idx)?;
    if r.state.load(Relaxed) != LIVE || r.pid.load(Relaxed) != pid {
        return Ok(());
    }
    // Each entry is out of its set's list now: free them, then the record.
    let mut cur = r.undos.swap(0, Relaxed);
    for _ in 0..entries.len() {
        if cur == 0 {
            break;
        }
        let next = crate::sem::undo::next_proc(a, cur);
        crate::sem::undo::free(a, cur);
        cur = next;
    }
    if r.attaches.load(Relaxed) != 0 {
        // Still mapped: the record stays for its attachments.
        return Ok(());
    }
    r.state.store(FREE, Relaxed);
    let p = procs(a);
    p.len.store(p.len.load(Relaxed).saturating_sub(1), Relaxed);
    Ok(())
}
