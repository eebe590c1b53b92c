//! Semaphore sets: `semget` and `semctl` (ipc/sem.c) here; `semop` and
//! `semtimedop` in op.rs, SEM_UNDO entries in undo.rs, `exit_sem` in exit.rs.
//!
//! # Protocol
//! semget: registry lock, key lookup, checks, create (`newary`). semctl:
//! IPC_RMID and IPC_SET take the registry lock then the object lock
//! (`semctl_down`); every other command looks the set up without the
//! registry lock, checks permission, locks the set and checks it is still
//! alive (EIDRM otherwise). SETALL writes its new values to a journal first
//! and applies them under the object lock, so that a holder killed midway
//! is rolled forward by the next locker.

use crate::abi::{self, semid64_ds, seminfo};
use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::ctl;
use crate::errno::{Errno, SysResult};
use crate::limits::{SEMAEM, SEMMNS, SEMOPM, SEMVMX};
use crate::object::{INLINE_SEMS, Sem, SemSlot};
use crate::perm::{self, S_IRUGO, S_IWUGO};
use crate::registry::{self, Found, IPC_PRIVATE, Kind, Reg, lock_object, obtain, still_valid};
use crate::session::Session;
use crate::time::now;
use crate::wait;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// SEMUSZ (sizeof(struct sem_undo)) as Linux reports it in IPC_INFO.
const SEMUSZ: i32 = 20;
const JOURNAL_SETALL: u32 = 1;
/// A semop: `[waiter, its ticket, undo entry, values × nsems, adjustments
/// × nsems]` (the sleeper it completes and the undo entry it changes, or
/// 0).
const JOURNAL_SEMOP: u32 = 2;
/// An undo entry applied at exit: `[entry, values × nsems]`.
const JOURNAL_UNDO: u32 = 3;
/// SETVAL: `[semnum, value | pid << 32]`.
const JOURNAL_SETVAL: u32 = 4;

pub(crate) mod exit;
pub(crate) mod op;
mod seen;
pub(crate) mod undo;

pub(crate) struct SemKind;

impl Kind for SemKind {
    type Slot = SemSlot;
    const MECH: Mech = Mech::Sem;

    fn usage(_a: &Session, s: &SemSlot) -> (u64, u64) {
        (u64::from(s.nsems.load(Relaxed)), 0)
    }

    fn release(a: &Session, s: &SemSlot) {
        // freeary: every sleeper fails with EIDRM.
        for w in wait::snapshot(a, &s.queue) {
            let _ = wait::complete(a, &s.queue, w, libc::EIDRM);
        }
        s.queue.store(0, Relaxed);
        undo::orphan_all(a, s);
        let base = s.base.swap(0, Relaxed);
        if base != 0 {
            let _ = a.free(base, sems_bytes(s.nsems.load(Relaxed)));
        }
        clear_journal(a, s);
    }

    fn check_object(a: &Session, s: &SemSlot) -> Vec<String> {
        let mut out = Vec::new();
        let n = s.nsems.load(Relaxed);
        let queue = wait::snapshot(a, &s.queue);
        let mut seen = std::collections::BTreeSet::new();
        for off in queue {
            if !seen.insert(off) {
                out.push(format!("sleeper queue loops at {off:#x}"));
                break;
            }
            match wait::at(a, off) {
                Err(_) => out.push(format!("sleeper queue links to {off:#x}, not a record")),
                Ok(w) => {
                    let st = w.state.load(Relaxed);
                    // (An abandoned record waits for the lock's next
                    // holder to drop it: `wait::abandon`.)
                    if st >= wait::DONE && st != wait::ABANDONED {
                        out.push(format!("sleeper {off:#x} in the queue in state {st}"));
                    }
                    let nops = w.sem().nops().load(Relaxed);
                    if nops == 0 || !a.in_heap(w.sem().ops().load(Relaxed), wait::ops_bytes(nops)) {
                        out.push(format!("sleeper {off:#x} has no readable operations"));
                    }
                }
            }
        }
        for off in undo::of_set(a, s) {
            match undo::head(a, off) {
                Ok(h) if h.nsems.load(Relaxed) != n => {
                    out.push(format!(
                        "undo entry {off:#x} is for {} semaphores, the set has {n}",
                        h.nsems.load(Relaxed)
                    ));
                }
                Ok(_) => {}
                Err(_) => out.push(format!("undo list links to {off:#x}, not an entry")),
            }
        }
        if s.journal_op.load(Relaxed) != 0 {
            out.push("journal left open".to_string());
        }
        out
    }

    fn repair_object(a: &Session, s: &SemSlot) -> Result<(), Errno> {
        let op = s.journal_op.load(Relaxed);
        if op != 0 {
            let n = s.journal_len.load(Relaxed) as usize;
            let off = s.journal_off.load(Relaxed);
            if n == 0 || !a.in_heap(off, n as u64 * 8) {
                // Not a journal this set could have written: drop it.
                s.journal_op.store(0, Relaxed);
                s.journal_off.store(0, Relaxed);
                return Err(Errno::EUCLEAN);
            }
            let words: &[AtomicU64] = a.view_slice(off, n)?;
            roll_forward(a, s, op, words)?;
        }
        clear_journal(a, s);
        Ok(())
    }
}

/// Finishes what a journal describes (idempotent: a repair may run it
/// again). Object lock held.
fn roll_forward(a: &Session, s: &SemSlot, op: u32, words: &[AtomicU64]) -> Result<(), Errno> {
    let sems = sems(a, s)?;
    let set = |sem: &Sem, w: &AtomicU64| {
        let v = w.load(Relaxed);
        sem.set(v as u32 as i32, (v >> 32) as i32);
    };
    match op {
        JOURNAL_SETALL => {
            for (sem, w) in sems.iter().zip(words) {
                set(sem, w);
            }
            // "un->semadj[i] = 0" for every process.
            undo::clear(a, s, None);
        }
        JOURNAL_SETVAL => {
            let (Some(n), Some(v)) = (words.first(), words.get(1)) else {
                return Err(Errno::EUCLEAN);
            };
            let n = n.load(Relaxed) as u16;
            let sem = sems.get(usize::from(n)).ok_or(Errno::EUCLEAN)?;
            set(sem, v);
            undo::clear(a, s, Some(n));
        }
        JOURNAL_SEMOP => {
            let nsems = sems.len();
            if words.len() != 3 + 2 * nsems {
                return Err(Errno::EUCLEAN);
            }
            let (waiter, ticket, entry) = (
                words[0].load(Relaxed),
                words[1].load(Relaxed) as u32,
                words[2].load(Relaxed),
            );
            for (sem, w) in sems.iter().zip(&words[3..3 + nsems]) {
                set(sem, w);
                crate::fault::step();
            }
            if entry != 0
                && let Ok(adj) = undo::adj(a, entry)
            {
                for (x, w) in adj.iter().zip(&words[3 + nsems..]) {
                    x.store(w.load(Relaxed) as u16, Relaxed);
                }
            }
            // The sleeper whose operation these values are, if it is still
            // that sleeper (same ticket: the record may have been freed and
            // reused by then) and still queued.
            if let Ok(w) = wait::at(a, waiter)
                && ticket != 0
                && w.sem().ticket().load(Relaxed) == ticket
                && w.state.load(Relaxed) != wait::DONE
            {
                wait::complete(a, &s.queue, waiter, 0)?;
            }
        }
        JOURNAL_UNDO => {
            let Some((entry, vals)) = words.split_first() else {
                return Err(Errno::EUCLEAN);
            };
            for (sem, w) in sems.iter().zip(vals) {
                set(sem, w);
            }
            undo::retire(a, s, entry.load(Relaxed));
        }
        _ => {}
    }
    Ok(())
}

pub(super) fn clear_journal(a: &Session, s: &SemSlot) {
    s.journal_op.store(0, Relaxed);
    let off = s.journal_off.swap(0, Relaxed);
    if off != 0 {
        // heap::free refuses (EUCLEAN) an offset that is no block: leaked.
        let _ = a.free(off, u64::from(s.journal_len.load(Relaxed)) * 8);
    }
}

fn sems_bytes(nsems: u32) -> u64 {
    u64::from(nsems) * core::mem::size_of::<Sem>() as u64
}

/// The key of arena `a` in the table of sizes shown: its file (device and
/// inode), never 0. (Not its address: a `Namespace` dropped and another
/// opened may get the same one.)
fn arena_key(a: &Session) -> usize {
    let id = a.id();
    let k = id.ino ^ (u64::from(id.dev.0) << 44) ^ (u64::from(id.dev.1) << 24);
    (k as usize).max(1)
}

/// The semaphores of a set as this process may copy them out or in: the
/// set's array, EUCLEAN if its size is not the one this process was shown
/// (`seen.rs`: a participant rewrote it).
fn sems_as_shown<'a>(a: &'a Session, f: &Found<'a, SemSlot>) -> Result<&'a [Sem], Errno> {
    let sems = sems(a, f.slot)?;
    match seen::size(arena_key(a), f.idx, f.generation) {
        Some(n) if n as usize != sems.len() => Err(Errno::EUCLEAN),
        _ => Ok(sems),
    }
}

/// The semaphores of a set: inline, or the heap array. EUCLEAN when the
/// slot's size or array offset cannot be (a corrupt arena).
pub(crate) fn sems<'a>(a: &'a Session, s: &'a SemSlot) -> Result<&'a [Sem], Errno> {
    let n = s.nsems.load(Relaxed) as usize;
    let base = s.base.load(Relaxed);
    if base == 0 {
        s.inline.get(..n).ok_or(Errno::EUCLEAN)
    } else if a.in_heap(base, sems_bytes(n as u32)) {
        a.view_slice(base, n)
    } else {
        Err(Errno::EUCLEAN)
    }
}

/// Where GETALL puts the values and SETALL takes them from: the caller's
/// memory. The set's size is known only under its lock, so the core asks
/// for exactly `nsems` values: a slice, or the C ABI's user pointer
/// (probed, EFAULT where the kernel's copy would fault).
pub trait SemValues {
    /// SETALL: fills `into` (the set's size); EFAULT if the caller's memory
    /// holds fewer values.
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno>;
    /// GETALL: takes the set's values; EFAULT if they do not fit.
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno>;
    /// How many values the caller's memory holds, when it is known (a
    /// slice); `None` for memory of unknown extent (a C pointer).
    fn capacity(&self) -> Option<usize> {
        None
    }
}

impl SemValues for [u16] {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        into.copy_from_slice(self.get(..into.len()).ok_or(Errno::EFAULT)?);
        Ok(())
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        self.get_mut(..vals.len())
            .ok_or(Errno::EFAULT)?
            .copy_from_slice(vals);
        Ok(())
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.len())
    }
}

impl<const N: usize> SemValues for [u16; N] {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        self[..].copy_in(into)
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        self[..].copy_out(vals)
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.len())
    }
}

/// A part of a buffer: `SemArg::Array(&mut &mut vals[..n])`.
impl SemValues for &mut [u16] {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        (**self).copy_in(into)
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        (**self).copy_out(vals)
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.len())
    }
}

impl SemValues for Vec<u16> {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        self[..].copy_in(into)
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        self[..].copy_out(vals)
    }
    fn capacity(&self) -> Option<usize> {
        Some(self.len())
    }
}

/// The last argument of `semctl`, typed. A command given an argument of
/// the wrong kind fails with EFAULT, as a bad pointer would.
pub enum SemArg<'a> {
    None,
    Val(i32),
    Ds(&'a mut semid64_ds),
    Info(&'a mut seminfo),
    Array(&'a mut dyn SemValues),
}

/// [`Namespace::semget`](crate::Namespace::semget)'s work.
pub(crate) fn semget(
    a: &Session,
    cred: &Cred,
    key: i32,
    nsems: i32,
    semflg: i32,
) -> SysResult<i32> {
    let lim = &a.header().limits;
    // ksys_semget: "if (nsems < 0 || nsems > ns->sc_semmsl) return -EINVAL".
    if nsems < 0 || nsems > lim.semmsl.load(Relaxed) {
        return Err(Errno::EINVAL);
    }
    // sem_more_checks: "if (sma->sem_nsems < params->u.nsems) return -EINVAL".
    let more = |s: &SemSlot| {
        if (s.nsems.load(Relaxed) as i32) < nsems {
            Err(Errno::EINVAL)
        } else {
            Ok(())
        }
    };
    let excl = semflg & abi::IPC_CREAT != 0 && semflg & abi::IPC_EXCL != 0;
    // A key found before, without the registry lock (`recent.rs`).
    if key != IPC_PRIVATE
        && !excl
        && let Some(r) = registry::existing::<SemKind>(a, cred, key, semflg, more)
    {
        return r;
    }
    let reg = Reg::lock::<SemKind>(a)?;
    if key != IPC_PRIVATE
        && let Some(idx) = reg.find_key(key)?
    {
        // ipcget_public, key present: EEXIST, then more_checks, then ipcperms.
        if excl {
            return Err(Errno::EEXIST);
        }
        return ctl::existing::<SemKind>(a, cred, key, idx, semflg, more);
    }
    // ipcget_public, key absent: "if (!(flg & IPC_CREAT)) err = -ENOENT".
    if key != IPC_PRIVATE && semflg & abi::IPC_CREAT == 0 {
        return Err(Errno::ENOENT);
    }
    // newary: "if (!nsems) return -EINVAL".
    if nsems == 0 {
        return Err(Errno::EINVAL);
    }
    // newary: "if (ns->used_sems + nsems > ns->sc_semmns) return -ENOSPC".
    if reg.r.used.load(Relaxed).saturating_add(nsems as u64)
        > lim.semmns.load(Relaxed).max(0) as u64
    {
        return Err(Errno::ENOSPC);
    }
    // The array, before an index is taken (sem_alloc precedes ipc_addid).
    let n = nsems as u32;
    let base = if n as usize > INLINE_SEMS {
        a.alloc(sems_bytes(n))?
    } else {
        0
    };
    let stored = core::cell::Cell::new(false);
    let created = reg.create::<SemKind>(lim.semmni.load(Relaxed), key, |s, _| {
        ctl::init_head(cred, &s.head, semflg, now());
        s.nsems.store(n, Relaxed);
        s.base.store(base, Relaxed);
        stored.set(true);
        s.otime.store(0, Relaxed);
        s.head.spare[0].store(0, Relaxed);
        s.head.spare[1].store(0, Relaxed);
        s.queue.store(0, Relaxed);
        s.journal_op.store(0, Relaxed);
        s.journal_off.store(0, Relaxed);
        for sem in &s.inline {
            sem.set(0, 0);
        }
        Ok(())
    });
    // A failure before the slot took the array leaves it to us.
    if created.is_err() && base != 0 && !stored.get() {
        let _ = a.free(base, sems_bytes(n));
    }
    if let Ok(id) = created {
        // The creator knows the size it asked for (GETALL's bound).
        let idx = a.layout().idx_of(id);
        if let Ok(s) = crate::registry::slot::<SemKind>(a, idx) {
            seen::shown(arena_key(a), idx, s.head.generation.load(Relaxed), n);
        }
    }
    created
}

/// [`Namespace::semctl`](crate::Namespace::semctl)'s work.
pub(crate) fn semctl(
    a: &Session,
    cred: &Cred,
    semid: i32,
    semnum: i32,
    cmd: i32,
    arg: SemArg<'_>,
) -> SysResult<i32> {
    // ksys_semctl: "if (semid < 0) return -EINVAL".
    if semid < 0 {
        return Err(Errno::EINVAL);
    }
    match cmd {
        abi::IPC_INFO | abi::SEM_INFO => {
            let SemArg::Info(out) = arg else {
                return Err(Errno::EFAULT);
            };
            sem_info(a, cmd, out)
        }
        abi::IPC_STAT | abi::SEM_STAT | abi::SEM_STAT_ANY => {
            let SemArg::Ds(out) = arg else {
                return Err(Errno::EFAULT);
            };
            sem_stat(a, cred, semid, cmd, out)
        }
        abi::GETALL | abi::GETVAL | abi::GETPID | abi::GETNCNT | abi::GETZCNT | abi::SETALL => {
            if cmd != abi::SETALL {
                reap_dead_holders(a, semid);
            }
            sem_main(a, cred, semid, semnum, cmd, arg)
        }
        abi::SETVAL => {
            // The value is the low 32 bits of the argument word.
            let val = match arg {
                SemArg::Val(v) => v,
                SemArg::None => 0,
                _ => return Err(Errno::EFAULT),
            };
            sem_setval(a, cred, semid, semnum, val)
        }
        abi::IPC_SET | abi::IPC_RMID => {
            let set = match (cmd, arg) {
                (abi::IPC_SET, SemArg::Ds(ds)) => Some(*ds),
                (abi::IPC_SET, _) => return Err(Errno::EFAULT),
                _ => None,
            };
            sem_down(a, cred, semid, set.as_ref())
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Before the set's values are read: the SEM_UNDO holders of set `semid`
/// whose processes died (their death words marked: `process/death.rs`)
/// are finished, their adjustments applied, as the kernel applied them in
/// `do_exit` before anyone could see those processes gone. Nothing when
/// the set has no entry (one load).
pub(crate) fn reap_dead_holders(a: &Session, semid: i32) {
    let Ok(f) = obtain::<SemKind>(a, semid) else {
        return;
    };
    if f.slot.undos.load(Relaxed) == 0 {
        return;
    }
    let marked = {
        let Ok(_g) = lock_object::<SemKind>(a, f.slot) else {
            return;
        };
        undo::marked_holders(a, f.slot)
    };
    if !marked.is_empty() {
        let _ = a.reap_marked(&marked, 0);
    }
}

/// semctl_info.
fn sem_info(a: &Session, cmd: i32, out: &mut seminfo) -> SysResult<i32> {
    let l = &a.header().limits;
    let r = &a.header().registries[Mech::Sem as usize];
    *out = seminfo {
        semmni: l.semmni.load(Relaxed),
        semmns: l.semmns.load(Relaxed),
        semmsl: l.semmsl.load(Relaxed),
        semopm: l.semopm.load(Relaxed),
        semvmx: SEMVMX,
        // SEMMNU, SEMMAP and SEMUME are the compile-time constants.
        semmnu: SEMMNS,
        semmap: SEMMNS,
        semume: SEMOPM,
        ..seminfo::default()
    };
    let reg = Reg::lock::<SemKind>(a)?;
    if cmd == abi::SEM_INFO {
        out.semusz = r.in_use.load(Relaxed) as i32;
        out.semaem = r.used.load(Relaxed) as i32;
    } else {
        out.semusz = SEMUSZ;
        out.semaem = SEMAEM;
    }
    Ok(ctl::info_maxidx(&reg))
}

/// semctl_stat.
fn sem_stat(
    a: &Session,
    cred: &Cred,
    semid: i32,
    cmd: i32,
    out: &mut semid64_ds,
) -> SysResult<i32> {
    *out = semid64_ds::default();
    let (id, s, _g) = ctl::stat_lookup::<SemKind>(
        a,
        cred,
        semid,
        cmd != abi::IPC_STAT,
        cmd == abi::SEM_STAT_ANY,
    )?;
    out.sem_perm = ctl::perm_out(cred, &s.head);
    out.sem_otime = s.otime.load(Relaxed);
    out.sem_ctime = s.head.ctime.load(Relaxed);
    out.sem_nsems = u64::from(s.nsems.load(Relaxed));
    // The size this process is shown (the object lock is held: the slot's
    // generation is the set's).
    seen::shown(
        arena_key(a),
        a.layout().idx_of(id),
        s.head.generation.load(Relaxed),
        s.nsems.load(Relaxed),
    );
    // IPC_STAT returns 0 ("as defined in SUS"); SEM_STAT(_ANY) the full id.
    Ok(if cmd == abi::IPC_STAT { 0 } else { id })
}

/// semctl_main.
fn sem_main(
    a: &Session,
    cred: &Cred,
    semid: i32,
    semnum: i32,
    cmd: i32,
    arg: SemArg<'_>,
) -> SysResult<i32> {
    let f = obtain::<SemKind>(a, semid)?;
    let s = f.slot;
    // The size as found (checked against the heap, and against the size
    // this process was shown: it sizes a copy to or from the caller), for
    // the order of Linux's checks; everything is read again under the
    // lock, where the generation guarantees the set.
    let nsems = sems_as_shown(a, &f)?.len() as i32;
    perm::ipcperms(
        cred,
        &s.head,
        if cmd == abi::SETALL { S_IWUGO } else { S_IRUGO },
    )?;
    match cmd {
        abi::GETALL => {
            let SemArg::Array(out) = arg else {
                return Err(Errno::EFAULT);
            };
            let vals: Vec<u16> = {
                let _g = locked!(lock_object::<SemKind>(a, s));
                still_valid(&f)?;
                let sems = sems_as_shown(a, &f)?;
                let mut v = Vec::new();
                // Sized by the arena: an allocation that fails is ENOMEM,
                // never an abort.
                v.try_reserve_exact(sems.len()).map_err(|_| Errno::ENOMEM)?;
                v.extend(sems.iter().map(|x| x.val() as u16));
                v
            };
            // copy_to_user of nsems values, after unlocking.
            out.copy_out(&vals)?;
            return Ok(0);
        }
        abi::SETALL => {
            let SemArg::Array(input) = arg else {
                return Err(Errno::EFAULT);
            };
            // copy_from_user of nsems values, before locking.
            let mut vals = Vec::new();
            vals.try_reserve_exact(nsems.max(0) as usize)
                .map_err(|_| Errno::ENOMEM)?;
            vals.resize(nsems.max(0) as usize, 0u16);
            input.copy_in(&mut vals)?;
            // "if (sem_io[i] > SEMVMX) err = -ERANGE", before locking.
            if vals.iter().any(|&v| i32::from(v) > SEMVMX) {
                return Err(Errno::ERANGE);
            }
            return sem_setall(a, cred, &f, &vals);
        }
        _ => {}
    }
    // GETVAL, GETPID, GETNCNT, GETZCNT.
    if semnum < 0 || semnum >= nsems {
        return Err(Errno::EINVAL);
    }
    let _g = locked!(lock_object::<SemKind>(a, s));
    still_valid(&f)?;
    let sem = sems(a, s)?.get(semnum as usize).ok_or(Errno::EUCLEAN)?;
    Ok(match cmd {
        abi::GETVAL => sem.val(),
        abi::GETPID => sem.pid(),
        // count_semcnt: the sleepers whose blocking operation is on this
        // semaphore, decrementing (GETNCNT) or waiting for zero (GETZCNT).
        abi::GETZCNT => op::count_waiting(a, s, semnum as u16, true),
        _ => op::count_waiting(a, s, semnum as u16, false),
    })
}

/// SETALL under the object lock, through the roll-forward journal.
fn sem_setall(a: &Session, cred: &Cred, f: &Found<'_, SemSlot>, vals: &[u16]) -> SysResult<i32> {
    let s = f.slot;
    let _g = locked!(lock_object::<SemKind>(a, s));
    still_valid(f)?;
    let n = vals.len();
    if sems(a, s)?.len() != n {
        return Err(Errno::EUCLEAN);
    }
    // The lock order (`lock/mod.rs`: object -> heap) allows allocating
    // the journal here.
    let journal = a.alloc(n as u64 * 8)?;
    let words: &[AtomicU64] = a.view_slice(journal, n)?;
    for (w, &v) in words.iter().zip(vals) {
        w.store(u64::from(v) | (u64::from(cred.pid as u32) << 32), Relaxed);
    }
    s.journal_len.store(n as u32, Relaxed);
    s.journal_off.store(journal, Relaxed);
    s.journal_op.store(JOURNAL_SETALL, Relaxed);
    SemKind::repair_object(a, s)?;
    s.head.ctime.store(now(), Relaxed);
    // do_smart_update: sleepers may proceed now.
    op::update_queue(a, s, None)?;
    Ok(0)
}

/// semctl_setval.
fn sem_setval(a: &Session, cred: &Cred, semid: i32, semnum: i32, val: i32) -> SysResult<i32> {
    // "if (val > SEMVMX || val < 0) return -ERANGE", before the lookup.
    if !(0..=SEMVMX).contains(&val) {
        return Err(Errno::ERANGE);
    }
    let f = obtain::<SemKind>(a, semid)?;
    let s = f.slot;
    if semnum < 0 || semnum >= s.nsems.load(Relaxed) as i32 {
        return Err(Errno::EINVAL);
    }
    perm::ipcperms(cred, &s.head, S_IWUGO)?;
    let _g = locked!(lock_object::<SemKind>(a, s));
    still_valid(&f)?;
    let sem = sems(a, s)?.get(semnum as usize).ok_or(Errno::EUCLEAN)?;
    if s.undos.load(Relaxed) == 0 {
        sem.set(val, cred.pid);
    } else {
        // The value and every process's adjustment together ("un->semadj
        // [semnum] = 0"), through the journal.
        let journal = a.alloc(16)?;
        let words: &[AtomicU64] = a.view_slice(journal, 2)?;
        words[0].store(semnum as u64, Relaxed);
        words[1].store(
            u64::from(val as u32) | (u64::from(cred.pid as u32) << 32),
            Relaxed,
        );
        s.journal_len.store(2, Relaxed);
        s.journal_off.store(journal, Relaxed);
        s.journal_op.store(JOURNAL_SETVAL, Relaxed);
        SemKind::repair_object(a, s)?;
    }
    s.head.ctime.store(now(), Relaxed);
    // do_smart_update: sleepers may proceed now.
    op::update_queue(a, s, None)?;
    Ok(0)
}

/// semctl_down: IPC_RMID and IPC_SET.
fn sem_down(a: &Session, cred: &Cred, semid: i32, set: Option<&semid64_ds>) -> SysResult<i32> {
    ctl::down::<SemKind, _>(a, cred, semid, |reg, idx, s| {
        match set {
            None => reg.remove::<SemKind>(idx)?,
            Some(ds) => {
                ctl::update_perm(cred, &s.head, &ds.sem_perm)?;
                s.head.ctime.store(now(), Relaxed);
            }
        }
        Ok(0)
    })
}
