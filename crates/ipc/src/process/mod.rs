//! The exit path (above the mechanisms): what happens to a process's
//! records when it exits, execs, forks or is found gone. The kernel does
//! this in `exit_sem`, `exit_shm`, `exec_mmap` and `dup_mmap`; here
//! whoever meets the process does it, finishing its record in the table
//! (`proc.rs`) one entry at a time (`exit.rs`), and a fork counts the
//! child's attachments (`fork.rs`).
//!
//! The layers below reach [`me`] and [`reap`] through the session's
//! upcalls ([`UPCALLS`], installed by the namespace).

pub(crate) mod death;
mod exit;
pub mod fork;

pub use exit::{Finish, finish, release_unborn};

use crate::errno::Errno;
use crate::lock;
use crate::proc::{self, LIVE};
use crate::session::{Session, Upcalls};
use core::sync::atomic::Ordering::Relaxed;

/// What the session's users below this layer call up for.
pub static UPCALLS: Upcalls = Upcalls {
    me,
    reap,
    forks: fork::register,
    reap_marked,
};

/// Finishes each record of `idxs` whose death word is marked (the thread
/// that armed it ended) and whose process is gone or on its way out (its
/// memory let go: `lock::process_ending`), as the kernel's `do_exit` would
/// have before anyone could see the process gone. How many.
///
/// The kernel marks the word in the middle of the death (`exit_mm`): one
/// who runs because of the mark (a sleeper the kernel woke) may look before
/// the process is seen on its way out, and looks again, up to
/// `patience_ns`. One who runs because it saw the process gone (EOF on
/// its pipe) finds it so at once; a word marked by the end of a thread
/// other than the process's last is looked at no longer than that.
pub fn reap_marked(a: &Session, idxs: &[u32], patience_ns: u64) -> Result<u32, Errno> {
    let mut n = 0;
    for &idx in idxs {
        let (pid, start) = {
            let _g = proc::lock(a)?;
            let r = proc::record(a, idx)?;
            if r.state.load(Relaxed) != LIVE || !proc::death_marked(a, r) {
                continue;
            }
            (r.pid.load(Relaxed), r.start.load(Relaxed))
        };
        let until = crate::sys::time::monotonic_ns().saturating_add(patience_ns);
        let ending = loop {
            if lock::process_ending(pid, start) {
                break true;
            }
            if crate::sys::time::monotonic_ns() >= until {
                break false;
            }
            std::thread::sleep(core::time::Duration::from_micros(50));
        };
        if ending && finish(a, idx, pid, Some(start), Finish::Gone)? {
            n += 1;
        }
    }
    Ok(n)
}

/// The calling process's record index, made on first use (and again in a
/// forked child: a new process).
pub fn me(a: &Session) -> Result<u32, Errno> {
    if let Some(p) = crate::acting::current() {
        return me_for(a, p);
    }
    if let Some(idx) = proc::cached(a) {
        return Ok(idx);
    }
    let pid = crate::sys::process::getpid();
    let start = lock::own_start();
    let (idx, exec) = {
        let _g = proc::lock(a)?;
        proc::find_or_make(a, pid, start)?
    };
    if exec {
        // This image replaced the one that made the record (execve): its
        // attachments are gone with its address space; undo entries stay.
        adopt_image(a, idx, pid, start)?;
    }
    // Its death seen the instant it dies (`death.rs`); best effort.
    let _ = death::arm(a, idx);
    proc::cache(a, idx);
    // A newcomer cleans up after the processes that left without doing it
    // themselves (bounded by the table; once per process).
    let _ = reap(a);
    Ok(idx)
}

/// The record of the process this thread acts for (`acting.rs`), made on
/// first use; an exec it made since its last call (another image number)
/// drops the old image's attachments. Nothing cached, no death page armed
/// (the supervisor reaps the process when its pidfd says it ended) and no
/// reap (the supervisor's own calls do that).
fn me_for(a: &Session, p: crate::acting::Process) -> Result<u32, Errno> {
    let marked = crate::acting::marked();
    let (idx, exec) = {
        let _g = proc::lock(a)?;
        let found = proc::find_or_make(a, p.pid, p.start)?;
        let r = proc::record(a, found.0)?;
        if marked != Some(found.0) {
            // Being finished by another (its process found dead): no.
            let by = r.spare[2].load(Relaxed);
            if by != 0 && by != lock::my_identity() && lock::identity_alive(by) {
                return Err(Errno::ESRCH);
            }
            // This call's until it ends (`Namespace::act`): no finisher
            // takes the record from under it.
            proc::busy_add(r);
            crate::acting::set_marked(found.0);
        }
        // Its death is looked for in /proc by observers (no death word).
        proc::mark_served(r);
        found
    };
    // Dead already (killed while its call waited): nothing is done for it,
    // as nothing more is done by a process the kernel ended. Looked at once
    // the record is marked busy, so a finisher that found it dead either
    // finished before (and this finds it dead too) or waits for this call.
    if marked.is_none() && lock::process_ending(p.pid, p.start) {
        return Err(Errno::ESRCH);
    }
    if exec {
        adopt_image(a, idx, p.pid, p.start)?;
    }
    Ok(idx)
}

/// The end of a call made for another process (`Namespace::act`): record
/// `idx`, marked busy by the call, is one call less busy.
pub fn unbusy(a: &Session, idx: u32, p: crate::acting::Process) -> Result<(), Errno> {
    let _g = proc::lock(a)?;
    let r = proc::record(a, idx)?;
    if r.state.load(Relaxed) == LIVE
        && r.pid.load(Relaxed) == p.pid
        && r.start.load(Relaxed) == p.start
    {
        proc::busy_sub(r);
    }
    Ok(())
}

/// For the process this thread acts for (`acting.rs`), at its
/// `exit_group`: what the kernel's exit does (`exit_sem`, `exit_shm`), its
/// undo entries applied and its attachments dropped, before it is gone
/// (its parent's wait then finds it done). Nothing if it has no record.
pub fn exit_acting(a: &Session) -> Result<(), Errno> {
    let Some(p) = crate::acting::current() else {
        return Ok(());
    };
    if let Some((idx, _)) = proc::find(a, p.pid, p.start)? {
        finish(a, idx, p.pid, Some(p.start), Finish::Exit)?;
    }
    Ok(())
}

/// For the process this thread acts for, if it has no record yet: the
/// counted attachments of its parent's record (`parent`: pid and start
/// time) that it maps too (`mapped`, asked of each address) are its own
/// too, counted once more, as the kernel counts them at the fork
/// (`dup_mmap`), which the supervisor did not see. Whether any was.
pub fn inherit_acting(
    a: &Session,
    parent: (i32, u64),
    mapped: &dyn Fn(u64) -> bool,
) -> Result<bool, Errno> {
    let Some(p) = crate::acting::current() else {
        return Ok(false);
    };
    if proc::find(a, p.pid, p.start)?.is_some() {
        return Ok(false);
    }
    let Some((pidx, _)) = proc::find(a, parent.0, parent.1)? else {
        return Ok(false);
    };
    let entries: Vec<_> = crate::shm::attach::counted(a, pidx, parent.0)?
        .into_iter()
        .filter(|e| mapped(e.0))
        .collect();
    if entries.is_empty() {
        return Ok(false);
    }
    let me = me_for(a, p)?;
    crate::shm::attach::count_copies(a, entries, me, parent.0)?;
    Ok(true)
}

/// For the process this thread acts for: if its record was made by an
/// earlier image (it exec'd since), the attachments that went with the
/// old address space are dropped, as the kernel drops them at the exec.
/// Whether the record (if any) still has attachments.
pub fn observe_acting(a: &Session) -> Result<bool, Errno> {
    let Some(p) = crate::acting::current() else {
        return Ok(false);
    };
    let Some((idx, exec)) = proc::find(a, p.pid, p.start)? else {
        return Ok(false);
    };
    if exec {
        adopt_image(a, idx, p.pid, p.start)?;
    }
    let _g = proc::lock(a)?;
    Ok(proc::record(a, idx)?.attaches.load(Relaxed) != 0)
}

/// The calling process's record if it has one, without making one: what
/// an image finds of itself when it attaches, and at exit. A record made
/// by an earlier image of the process (before an execve) is taken over as
/// in [`me`]: its attachments dropped, its undo entries kept. Caches the
/// index.
pub fn adopt(a: &Session) -> Result<Option<u32>, Errno> {
    if let Some(idx) = proc::cached(a) {
        return Ok(Some(idx));
    }
    let pid = crate::sys::process::getpid();
    let start = lock::own_start();
    let Some((idx, exec)) = proc::find(a, pid, start)? else {
        return Ok(None);
    };
    if exec {
        adopt_image(a, idx, pid, start)?;
    }
    proc::cache(a, idx);
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
    proc::mark_image(a, idx)
}

/// Cleans up after every process that is gone: applies its undo entries
/// (as `exit_sem` would have) and frees its record. Returns how many.
/// Takes set locks and the procs lock in turn, never together.
pub fn reap(a: &Session) -> Result<u32, Errno> {
    let (live, unborn) = {
        let _g = proc::lock(a)?;
        (proc::live_records(a)?, proc::stillborn(a)?)
    };
    let mut n = 0;
    for &(idx, pid, start, marked) in &live {
        // A marked death word: on its way out counts as gone (its memory
        // let go, as the kernel's exit_sem and exit_shm then run).
        let gone = if marked {
            lock::process_ending(pid, start)
        } else {
            !lock::process_alive(pid, start)
        };
        if gone && finish(a, idx, pid, Some(start), Finish::Gone)? {
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
    // A look without the lock first: a child that never called System V
    // IPC has no record, and its parent's wait then costs no lock (nor a
    // store to a page the fork left shared, which copies it). A record for
    // a reaped child is complete by now: the child made it (or claimed the
    // one its parent made before the fork) before it ended, and the wait
    // orders what it wrote before what we read. Only a table that stayed
    // where it was through the look is believed (another process growing
    // it moves it): otherwise the look under the lock decides.
    let its = |r: &proc::Proc| r.state.load(Relaxed) == LIVE && r.pid.load(Relaxed) == pid;
    let place = proc::table_place(a);
    if !proc::table(a)?.iter().any(its) && proc::table_place(a) == place {
        return Ok(false);
    }
    let found = {
        let _g = proc::lock(a)?;
        proc::table(a)?
            .iter()
            .enumerate()
            .find_map(|(i, r)| its(r).then(|| (i as u32, r.start.load(Relaxed))))
    };
    match found {
        Some((idx, start)) if !lock::process_alive(pid, start) => {
            finish(a, idx, pid, Some(start), Finish::Gone)
        }
        _ => Ok(false),
    }
}

/// Whether the calling process has a record it knows of: its cached
/// index (every way a process comes by its record caches it: making it,
/// claiming the one its parent made before a fork, taking over an earlier
/// image's at load or at its first call). Reads no arena page: in a fork
/// child each first touch of a page of the arena's mapping is a fault
/// (fork copies no page table entries of a shared file mapping), some µs
/// here. A record of an earlier image not taken over yet (an exec whose
/// environment could not be marked) is left to the reapers.
pub fn may_have_record(a: &Session) -> bool {
    proc::cached(a).is_some()
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
    proc::uncache(a);
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
        let _g = proc::lock(a)?;
        proc::table(a)?.iter().any(|r| {
            r.state.load(Relaxed) == LIVE
                && r.pid.load(Relaxed) == pid
                && r.start.load(Relaxed) == start
                && r.image.load(Relaxed) != proc::image()
        })
    };
    if replaced {
        // `me` finds the record, sees the exec and drops the attachments.
        me(a)?;
    }
    Ok(())
}
