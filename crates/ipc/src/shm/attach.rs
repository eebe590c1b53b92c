//! `shmat` and `shmdt` (ipc/shm.c `do_shmat`, `ksys_shmdt`), and the
//! attachments every process record keeps: `shm_nattch` counts them,
//! including those a child inherits across fork; exec and exit drop them.
//!
//! # Protocol
//! An attachment is an entry in the heap on its process record's list
//! (procs lock), in one of three states: PENDING (made, not yet counted),
//! COUNTED (in the segment's `shm_nattch`), DETACHED. Counting and
//! uncounting happen under the segment lock through the slot's journal
//! (`journal_attach`, `journal_op`): the entry is named first, then
//! `nattch` and the state change, so a process killed in between is
//! finished by the next locker and `nattch` is never off by one. A process
//! gone without detaching (SIGKILL) has its COUNTED entries uncounted by
//! whoever reaps it (`proc.rs`). The last detach of a segment marked
//! SHM_DEST destroys it (registry lock, then the segment's).
//!
//! Lock order: `lock/mod.rs` (the segment's lock is an object lock).
//!
//! # Layout
//! An entry: 48 bytes, `next` @0, `addr` @8, `size` @16, `idx` @24,
//! `state` @28, `generation` @32, `len` @40.

use super::ShmKind;
use crate::abi;
use crate::chain::Chain;
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::object::{ShmSlot, bump};
use crate::perm;
use crate::proc;
use crate::registry::{self, Reg, lock_object, obtain, still_valid};
use crate::session::Session;
use crate::time::now;
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicU32, AtomicU64};

/// `state` of an entry.
const PENDING: u32 = 0;
const COUNTED: u32 = 1;
const DETACHED: u32 = 2;

/// `journal_op`: count or uncount `journal_attach`.
const JOURNAL_COUNT: u64 = 1;
const JOURNAL_UNCOUNT: u64 = 2;

/// shmat flags.
pub const SHM_RDONLY: i32 = 0o10000;
pub const SHM_RND: i32 = 0o20000;
pub const SHM_REMAP: i32 = 0o40000;
pub const SHM_EXEC: i32 = 0o100000;
/// SHMLBA on x86-64 and aarch64 Linux: the page size.
pub const SHMLBA: usize = 4096;

/// An attachment.
#[doc(hidden)]
#[repr(C, align(8))]
pub struct Attach {
    pub next: AtomicU64,
    pub addr: AtomicU64,
    pub size: AtomicU64,
    pub idx: AtomicU32,
    pub state: AtomicU32,
    pub generation: AtomicU64,
    /// The length mapped (the size rounded to the huge page size for a
    /// huge page segment); 0 in entries of older builds: the size rounded
    /// to 4 KiB.
    pub len: AtomicU64,
}

const ATTACH_BYTES: u64 = 48;

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Attach>() == ATTACH_BYTES as usize);
    assert!(offset_of!(Attach, state) == 28);
    assert!(offset_of!(Attach, generation) == 32);
    assert!(offset_of!(Attach, len) == 40);
};

/// The length entry `e` says is mapped, checked as anything read from the
/// arena: 4 KiB aligned, at least the size, at most a huge page (16 GiB,
/// the largest a record may name) more; else the size rounded to 4 KiB.
fn mapped_len(e: &Attach) -> usize {
    let size = e.size.load(Relaxed);
    let small = size.div_ceil(4096).saturating_mul(4096);
    let len = e.len.load(Relaxed);
    let len = if len != 0 && len.is_multiple_of(4096) && len >= size && len - size < 1 << 34 {
        len
    } else {
        small
    };
    usize::try_from(len).unwrap_or(0)
}

// repr(C), atomics only, no Drop.
crate::arena::map::shared_types!(Attach);

fn entry(a: &Session, off: u64) -> Result<&Attach, Errno> {
    if off == 0 || !off.is_multiple_of(8) || !a.in_heap(off, ATTACH_BYTES) {
        return Err(Errno::EUCLEAN);
    }
    a.view(off)
}

/// The entries of record `r` (procs lock held): bounded and cycle-proof
/// (`chain.rs`), no allocation.
fn list<'a>(a: &'a Session, r: &proc::Proc) -> impl Iterator<Item = u64> + 'a {
    Chain::new(r.attaches.load(Relaxed), move |off| {
        entry(a, off).ok().map(|e| e.next.load(Relaxed))
    })
}

/// Finishes a counting or uncounting the segment's last locker started.
/// Segment lock held.
pub(super) fn repair(a: &Session, s: &ShmSlot) {
    let op = s.journal_op.load(Relaxed);
    if let Ok(e) = entry(a, s.journal_attach.load(Relaxed)) {
        match (op, e.state.load(Relaxed)) {
            (JOURNAL_COUNT, PENDING) => {
                s.nattch
                    .store(s.nattch.load(Relaxed).saturating_add(1), Relaxed);
                e.state.store(COUNTED, Relaxed);
            }
            (JOURNAL_UNCOUNT, COUNTED) => {
                s.nattch
                    .store(s.nattch.load(Relaxed).saturating_sub(1), Relaxed);
                e.state.store(DETACHED, Relaxed);
            }
            _ => {}
        }
    }
    s.journal_op.store(0, Relaxed);
    s.journal_attach.store(0, Relaxed);
}

/// Counts (`JOURNAL_COUNT`) or uncounts an entry. Segment lock held.
fn journaled(a: &Session, s: &ShmSlot, off: u64, op: u64) {
    s.journal_attach.store(off, Relaxed);
    s.journal_op.store(op, Relaxed);
    repair(a, s);
}

/// Adds an entry for segment `idx` (generation `generation`) mapped at
/// `addr` to record `me`. Returns its offset.
fn record_entry(
    a: &Session,
    me: u32,
    addr: u64,
    (size, len): (u64, u64),
    idx: u32,
    generation: u64,
    state: u32,
) -> SysResult<u64> {
    let off = a.alloc(ATTACH_BYTES)?;
    let e = entry(a, off)?;
    e.addr.store(addr, Relaxed);
    e.size.store(size, Relaxed);
    e.len.store(len, Relaxed);
    e.idx.store(idx, Relaxed);
    e.generation.store(generation, Relaxed);
    e.state.store(state, Relaxed);
    let _g = proc::lock(a)?;
    let r = proc::record(a, me)?;
    e.next.store(r.attaches.load(Relaxed), Relaxed);
    r.attaches.store(off, Relaxed);
    Ok(off)
}

/// Takes entry `off` off record `me`'s list and frees it, if it is on
/// the list (an entry another thread of the process forgot meanwhile is
/// not freed twice).
fn forget(a: &Session, me: u32, off: u64) -> SysResult<()> {
    let _g = proc::lock(a)?;
    if unlink(a, proc::record(a, me)?, off) {
        a.free(off, ATTACH_BYTES)?;
    }
    Ok(())
}

/// Cuts record `r`'s list where it loops back, if it does (what the list
/// was as far as it was sound): it is taken apart from the head, each
/// entry freed as it goes, so a loop would hand the takers entries freed
/// already, again and again. Procs lock held.
#[doc(hidden)]
pub fn cut_cycle(a: &Session, r: &proc::Proc) {
    let next = |off: u64| entry(a, off).ok().map(|e| e.next.load(Relaxed));
    if let Some(closing) = crate::chain::cut_point(r.attaches.load(Relaxed), next)
        && let Ok(e) = entry(a, closing)
    {
        e.next.store(0, Relaxed);
    }
}

/// Takes entry `off` off record `r`'s list; whether it was on it. Procs
/// lock held.
fn unlink(a: &Session, r: &proc::Proc, off: u64) -> bool {
    // An entry linked to itself is the end of its list.
    let next = match entry(a, off).map_or(0, |e| e.next.load(Relaxed)) {
        n if n == off => 0,
        n => n,
    };
    if r.attaches.load(Relaxed) == off {
        r.attaches.store(next, Relaxed);
        return true;
    }
    for p in list(a, r) {
        if let Ok(pe) = entry(a, p)
            && pe.next.load(Relaxed) == off
        {
            pe.next.store(next, Relaxed);
            return true;
        }
    }
    false
}

/// Uncounts entry `off` (if counted) on its segment, `pid` recorded as
/// the last operator; destroys the segment when it was the last attachment
/// of one marked SHM_DEST.
fn uncount(a: &Session, off: u64, pid: i32) -> SysResult<()> {
    let e = entry(a, off)?;
    let (idx, generation) = (e.idx.load(Relaxed), e.generation.load(Relaxed));
    let Ok(f) = registry::obtain_idx::<ShmKind>(a, idx) else {
        e.state.store(DETACHED, Relaxed);
        return Ok(());
    };
    if f.generation != generation {
        e.state.store(DETACHED, Relaxed);
        return Ok(());
    }
    let s = f.slot;
    let destroy = {
        let _g = locked!(lock_object::<ShmKind>(a, s));
        if still_valid(&f).is_err() {
            e.state.store(DETACHED, Relaxed);
            return Ok(());
        }
        if e.state.load(Relaxed) == COUNTED {
            journaled(a, s, off, JOURNAL_UNCOUNT);
            // shm_close: "shp->shm_dtim = ktime_get_real_seconds();
            // ipc_update_pid(&shp->shm_lprid, task_tgid(current));"
            s.dtime.store(now(), Relaxed);
            s.lpid.store(pid, Relaxed);
            bump(&s.calls);
        } else {
            e.state.store(DETACHED, Relaxed);
        }
        s.nattch.load(Relaxed) == 0 && s.head.mode.load(Relaxed) & abi::SHM_DEST != 0
    };
    if destroy {
        // shm_may_destroy: under the registry lock, then the segment's.
        let reg = Reg::lock::<ShmKind>(a)?;
        let _g = locked!(lock_object::<ShmKind>(a, s));
        if still_valid(&f).is_ok()
            && s.nattch.load(Relaxed) == 0
            && s.head.mode.load(Relaxed) & abi::SHM_DEST != 0
        {
            reg.remove::<ShmKind>(f.idx)?;
        }
    }
    Ok(())
}

/// Drops the first attachment of record `idx` (exit, exec, a reaped
/// process): uncounted, then taken off the list and freed. Whether there
/// was one. The caller has the record to itself (`proc::finish`'s claim,
/// or the record's own process): each entry is read from the head of the
/// list under the procs lock, so no entry freed by someone else is ever
/// followed. The mappings themselves went with the address space.
#[doc(hidden)]
pub fn drop_first(a: &Session, idx: u32, pid: i32) -> SysResult<bool> {
    let first = {
        let _g = proc::lock(a)?;
        proc::record(a, idx)?.attaches.load(Relaxed)
    };
    if first == 0 {
        return Ok(false);
    }
    if entry(a, first).is_err() {
        // No entry: the rest of the list cannot be followed (leaked).
        let _g = proc::lock(a)?;
        let r = proc::record(a, idx)?;
        if r.attaches.load(Relaxed) == first {
            r.attaches.store(0, Relaxed);
        }
        return Ok(true);
    }
    match uncount(a, first, pid) {
        // An entry naming a corrupt segment is dropped all the same.
        Ok(()) | Err(Errno::EUCLEAN) => {}
        Err(e) => return Err(e),
    }
    forget(a, idx, first)?;
    Ok(true)
}

/// Drops every attachment of record `idx` ([`drop_first`] until none is
/// left, bounded).
#[doc(hidden)]
pub fn drop_all(a: &Session, idx: u32, pid: i32) -> SysResult<()> {
    for _ in 0..crate::chain::MAX_LINKS {
        if !drop_first(a, idx, pid)? {
            break;
        }
    }
    Ok(())
}

/// In a forked child: the parent's attachments are the child's too (its
/// address space is a copy), so each is counted once more, with the parent
/// as the last operator (Linux counts them in `dup_mmap`, in the parent).
/// The fallback of a child whose unborn record (see `process::fork::prefork`) was
/// dropped before it could claim it.
#[doc(hidden)]
pub fn inherit(a: &Session, parent: u32) -> SysResult<()> {
    let ppid = crate::lock::parent_pid();
    let entries = counted(a, parent, ppid)?;
    if entries.is_empty() {
        return Ok(());
    }
    let me = a.me()?;
    count_copies(a, entries, me, ppid)
}

/// The counted attachments of record `idx`, if it is process `pid`'s:
/// `(addr, (size, len), idx, generation)`. (An index cached by a process may be
/// its own parent's, inherited through a fork when it had no record of its
/// own: then nothing of it is ours.)
pub(crate) fn counted(a: &Session, idx: u32, pid: i32) -> SysResult<Vec<Copied>> {
    let _g = proc::lock(a)?;
    let r = proc::record(a, idx)?;
    if r.pid.load(Relaxed) != pid || r.state.load(Relaxed) != proc::LIVE {
        return Ok(Vec::new());
    }
    Ok(list(a, r)
        .filter_map(|off| entry(a, off).ok())
        .filter(|e| e.state.load(Relaxed) == COUNTED)
        .map(|e| {
            (
                e.addr.load(Relaxed),
                (e.size.load(Relaxed), mapped_len(e) as u64),
                e.idx.load(Relaxed),
                e.generation.load(Relaxed),
            )
        })
        .collect())
}

/// An attachment to copy: `(addr, (size, len), idx, generation)`.
type Copied = (u64, (u64, u64), u32, u64);

/// Adds `entries` (from [`counted`]) to record `to`, each counted, with
/// `lpid` as the last operator.
pub(crate) fn count_copies(a: &Session, entries: Vec<Copied>, to: u32, lpid: i32) -> SysResult<()> {
    for (addr, lens, idx, generation) in entries {
        let Ok(f) = registry::obtain_idx::<ShmKind>(a, idx) else {
            continue;
        };
        if f.generation != generation {
            continue;
        }
        let off = record_entry(a, to, addr, lens, idx, generation, PENDING)?;
        let s = f.slot;
        let _g = locked!(lock_object::<ShmKind>(a, s));
        if still_valid(&f).is_err() {
            continue;
        }
        journaled(a, s, off, JOURNAL_COUNT);
        // shm_open: "shp->shm_atim = ...; ipc_update_pid(&shp->shm_lprid,
        // task_tgid(current));" with current the parent.
        s.atime.store(now(), Relaxed);
        s.lpid.store(lpid, Relaxed);
    }
    Ok(())
}

/// [`Namespace::shmat`](crate::Namespace::shmat)'s work.
pub(crate) fn shmat(
    a: &Session,
    cred: &Cred,
    shmid: i32,
    shmaddr: usize,
    shmflg: i32,
) -> SysResult<usize> {
    // "if (shmid < 0) goto out;" (-EINVAL)
    if shmid < 0 {
        return Err(Errno::EINVAL);
    }
    let mut addr = shmaddr;
    if addr != 0 {
        if addr & (SHMLBA - 1) != 0 {
            // "if (shmflg & SHM_RND) addr &= ~(shmlba - 1); else goto out;"
            if shmflg & SHM_RND != 0 {
                addr &= !(SHMLBA - 1);
                // "if (addr == 0 && (shmflg & SHM_REMAP)) goto out;"
                if addr == 0 && shmflg & SHM_REMAP != 0 {
                    return Err(Errno::EINVAL);
                }
            } else {
                return Err(Errno::EINVAL);
            }
        }
    } else if shmflg & SHM_REMAP != 0 {
        // "else if ((shmflg & SHM_REMAP)) goto out;"
        return Err(Errno::EINVAL);
    }
    let rdonly = shmflg & SHM_RDONLY != 0;
    let exec = shmflg & SHM_EXEC != 0;
    // acc_mode: S_IRUGO, plus S_IWUGO unless read-only, plus S_IXUGO.
    let acc = 0o444 | if rdonly { 0 } else { 0o222 } | if exec { 0o111 } else { 0 };
    let f = obtain::<ShmKind>(a, shmid)?;
    let s = f.slot;
    perm::ipcperms(cred, &s.head, acc)?;
    let mut b = super::Backing::of(s)?;
    b.settle(a, shmid)?;
    let size = b.size;
    if let (Some(range), true) = (b.pool, b.unreserved) {
        // The first attach allocates the segment's pages (`pool.rs`).
        let _g = locked!(lock_object::<ShmKind>(a, s));
        still_valid(&f)?;
        let len = b.map_len().ok_or(Errno::EIDRM)?;
        super::pool::reserve(a, shmid, range, len)?;
    }
    // The mapping first (shm_file's mmap), then the count.
    let prot = super::prot_of(rdonly, exec);
    let (mapped, len, source) =
        super::map_segment(a, &b, addr, prot, shmflg & SHM_REMAP != 0, None)?;
    let me = match a.me() {
        Ok(me) => me,
        Err(e) => {
            super::unmap(mapped, len);
            return Err(e);
        }
    };
    let lens = (size, len as u64);
    let off = match record_entry(a, me, mapped as u64, lens, f.idx, f.generation, PENDING) {
        Ok(off) => off,
        Err(e) => {
            super::unmap(mapped, len);
            return Err(e);
        }
    };
    let counted = (|| {
        let _g = locked!(lock_object::<ShmKind>(a, s));
        // "if (!ipc_valid_object(&shp->shm_perm)) { err = -EIDRM; ...}"
        still_valid(&f)?;
        journaled(a, s, off, JOURNAL_COUNT);
        s.atime.store(now(), Relaxed);
        s.lpid.store(cred.pid, Relaxed);
        bump(&s.calls);
        Ok(())
    })();
    if let Err(e) = counted {
        super::unmap(mapped, len);
        let _ = forget(a, me, off);
        return Err(e);
    }
    if shmflg & SHM_REMAP != 0 {
        // The mapping replaced whatever was there: attachments it
        // covered are gone (their munmap would have uncounted them).
        let end = mapped as u64 + len as u64;
        let covered: Vec<u64> = {
            let _g = proc::lock(a)?;
            list(a, proc::record(a, me)?)
                .filter(|&o| o != off)
                .filter(|&o| {
                    entry(a, o).is_ok_and(|e| {
                        let s0 = e.addr.load(Relaxed);
                        s0 >= mapped as u64 && s0.saturating_add(mapped_len(e) as u64) <= end
                    })
                })
                .collect()
        };
        for o in covered {
            uncount(a, o, cred.pid)?;
            forget(a, me, o)?;
        }
    }
    // What this image mapped, for shmdt (`mapped.rs`); attachments the
    // mapping replaced in part keep their other pieces.
    // (Not when acting for another process: the table is this image's.)
    if crate::acting::current().is_none() {
        let _ = super::mapped::overlapped(mapped, mapped.saturating_add(len));
        super::mapped::forget_inside(mapped, mapped.saturating_add(len));
        super::mapped::record(mapped, len, source);
    }
    a.register_for_fork();
    Ok(mapped)
}

/// Record `me`'s attachment at `addr` (not detached), if any. Takes the
/// procs lock.
fn attached_at(a: &Session, me: u32, addr: usize) -> SysResult<Option<u64>> {
    let _g = proc::lock(a)?;
    Ok(list(a, proc::record(a, me)?).find(|&off| {
        entry(a, off)
            .is_ok_and(|e| e.addr.load(Relaxed) == addr as u64 && e.state.load(Relaxed) != DETACHED)
    }))
}

/// [`Namespace::shmdt`](crate::Namespace::shmdt)'s work.
pub(crate) fn shmdt(a: &Session, cred: &Cred, shmaddr: usize) -> SysResult<i32> {
    // "if (addr & ~PAGE_MASK) return retval;" (-EINVAL)
    if shmaddr & (SHMLBA - 1) != 0 {
        return Err(Errno::EINVAL);
    }
    let me = a.me()?;
    let Some(off) = attached_at(a, me, shmaddr)? else {
        return Err(Errno::EINVAL);
    };
    // The length this image mapped there; the arena's (bounded) only if
    // the table had no room. An attachment the table does not know was
    // not mapped by this image: counted off, nothing unmapped. For another
    // process (`acting.rs`), whose table is not here: the pieces of the
    // arena's length that its maps show still mapping the segment's file
    // found at the address.
    let remote_maps = crate::acting::with_mapper(|m| m.map(|m| m.and_then(|m| m.maps())));
    match remote_maps {
        Some(Some(maps)) => {
            if let Some(source) = source_at(&maps, shmaddr) {
                unmap_pieces_in(&maps, shmaddr, mapped_len(entry(a, off)?), source);
            }
        }
        // Acting for a process whose maps cannot be read: nothing unmapped.
        Some(None) => {}
        None => unmap_local(a, off, shmaddr)?,
    }
    uncount(a, off, cred.pid)?;
    forget(a, me, off)?;
    Ok(0)
}

/// The segment mapped at `at` as `maps` (a `/proc/PID/maps` text) shows
/// it: the inode of the file, and the offset in it of `at` (a pooled
/// segment's range; 0 for a file of its own).
fn source_at(maps: &str, at: usize) -> Option<super::mapped::Source> {
    maps.lines().find_map(|l| {
        let (lo, hi, offset, ino) = maps_line(l)?;
        ((lo..hi).contains(&at)).then(|| super::mapped::Source {
            ino31: ino & 0x7fff_ffff,
            base: offset.wrapping_add((at - lo) as u64),
        })
    })
}

/// A `/proc/PID/maps` line's range, offset and inode.
fn maps_line(l: &str) -> Option<(usize, usize, u64, u64)> {
    // lo-hi perms offset dev inode [path]
    let mut f = l.split_ascii_whitespace();
    let (lo, hi) = f.next()?.split_once('-')?;
    let lo = usize::from_str_radix(lo, 16).ok()?;
    let hi = usize::from_str_radix(hi, 16).ok()?;
    let offset = u64::from_str_radix(f.nth(1)?, 16).ok()?;
    let ino: u64 = f.nth(1)?.parse().ok()?;
    Some((lo, hi, offset, ino))
}

/// [`shmdt`]'s unmapping in this process.
fn unmap_local(a: &Session, off: u64, shmaddr: usize) -> SysResult<()> {
    match super::mapped::take(shmaddr) {
        Some(t) if t.disturbed => unmap_pieces(shmaddr, t.len, t.source),
        Some(t) => super::unmap(shmaddr, t.len),
        None if super::mapped::full() => super::unmap(shmaddr, mapped_len(entry(a, off)?)),
        None => {}
    }
    Ok(())
}

/// Unmaps the pieces of the attachment `[at, at + len)` that still map
/// its segment (`source`), as `/proc/self/maps` shows them: the program
/// unmapped, replaced or moved parts of it with calls of its own, and
/// what it put in their place is not ours to unmap (Linux's shmdt unmaps
/// only the range's mappings of the segment's file). Where the maps
/// cannot be read nothing is unmapped: a mapping left behind is better
/// than the program's memory taken from it.
fn unmap_pieces(at: usize, len: usize, source: super::mapped::Source) {
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        unmap_pieces_in(&maps, at, len, source);
    }
}

/// [`unmap_pieces`] by the maps text given.
fn unmap_pieces_in(maps: &str, at: usize, len: usize, source: super::mapped::Source) {
    let end = at.saturating_add(len);
    let pieces: Vec<(usize, usize)> = maps
        .lines()
        .filter_map(|l| {
            let (lo, hi, offset, ino) = maps_line(l)?;
            // A pooled segment's pieces lie in its range of the pool
            // (remap_file_pages may have put any of its pages anywhere).
            let ours = hi > at
                && lo < end
                && ino & 0x7fff_ffff == source.ino31
                && (source.base == 0 || offset.wrapping_sub(source.base) < 1 << 32);
            ours.then_some((lo.max(at), hi.min(end)))
        })
        .collect();
    for (lo, hi) in pieces {
        super::unmap(lo, hi - lo);
    }
}

/// The calls of the program's own that unmapped or replaced
/// `[start, end)` (`munmap`, `mmap` with MAP_FIXED, the destination of
/// `mremap`), after they succeeded: an attachment of this image they took
/// whole is detached, as Linux's `shm_close` detaches a mapping that goes
/// (shm_nattch, dtime and lpid; the segment destroyed if it was removed
/// and this was its last attachment); one they took in part is marked,
/// so that shmdt unmaps only its other pieces (Linux counts the pieces a
/// mapping is split into in shm_nattch; ipcns counts attachments).
pub(crate) fn unmapped(a: &Session, cred: &Cred, start: usize, end: usize) -> SysResult<()> {
    let whole = super::mapped::overlapped(start, end);
    if whole.is_empty() {
        return Ok(());
    }
    let me = a.me()?;
    for (at, _) in whole {
        let _ = super::mapped::take(at);
        if let Some(off) = attached_at(a, me, at)? {
            uncount(a, off, cred.pid)?;
            forget(a, me, off)?;
        }
    }
    Ok(())
}

/// Whether this process image has attachments in its table.
pub(crate) fn has_attachments() -> bool {
    super::mapped::any()
}

/// What an `mremap` of `[old, old + old_len)` is about to move: the
/// attachment of this image it names whole (its address), if any. Called
/// before the kernel's call, which [`mremapped`] follows.
pub(crate) fn to_mremap(old: usize, old_len: usize) -> Option<usize> {
    super::mapped::containing(old).and_then(|(at, len)| (at == old && len == old_len).then_some(at))
}

/// After a successful `mremap` of `[old, old + old_len)` to
/// `[new, new + new_len)`: an attachment moved or resized whole (`whole`,
/// from [`to_mremap`]) is found at its new address by shmdt and counted
/// as before (Linux moves the vma: shm_nattch unchanged); a pooled
/// segment's attachment grown past its pages gets an inaccessible
/// mapping there (Linux's faults with SIGBUS past the segment's file;
/// here a touch is SIGSEGV, never the pool's next pages); what the
/// destination replaced is as [`unmapped`] says; a part of an attachment
/// moved leaves it marked (shmdt unmaps its other pieces only).
pub(crate) fn mremapped(
    a: &Session,
    cred: &Cred,
    whole: Option<usize>,
    (old, old_len): (usize, usize),
    (new, new_len): (usize, usize),
) -> SysResult<()> {
    let taken = whole.and_then(super::mapped::take);
    unmapped(a, cred, new, new.saturating_add(new_len))?;
    let (Some(at), Some(t)) = (whole, taken) else {
        let _ = super::mapped::overlapped(old, old.saturating_add(old_len));
        return Ok(());
    };
    if new_len > t.len && t.source.base != 0 {
        let tail = new + t.len;
        // SAFETY: the pages past the segment's within the program's own
        // mapping just grown, which would otherwise show the pool's next
        // pages: made inaccessible, as the program's touch of them is an
        // error (SIGBUS on Linux).
        #[allow(unsafe_code)]
        let _ = unsafe {
            crate::sys::mem::mmap_at(
                tail,
                new_len - t.len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
    }
    super::mapped::record(new, new_len, t.source);
    if t.disturbed {
        // Still in pieces: marked again (a range of one byte holds no
        // attachment whole).
        let _ = super::mapped::overlapped(new, new + 1);
    }
    if new != at {
        let me = a.me()?;
        if let Some(off) = attached_at(a, me, at)? {
            let _g = proc::lock(a)?;
            entry(a, off)?.addr.store(new as u64, Relaxed);
        }
    }
    Ok(())
}

/// `remap_file_pages(2)` on an attachment this image mapped: `start` and
/// `size` page aligned, checked as the kernel checks them first (`prot`
/// 0, no wrap of the range or of `pgoff`). `None` when `start` is in no
/// attachment of this image: the kernel's answer stands.
///
/// Linux maps the attachment's file again over the range (`do_mmap` with
/// MAP_FIXED, the range's protection, the segment's pages from `pgoff`):
/// the old mapping's close (`shm_close`: dtime and lpid, and the
/// segment's destruction if it was the last attachment of a removed one),
/// then the new mapping's open (`__shm_open`: EINVAL if the segment is
/// gone, the range left unmapped; else atime and lpid). The same here,
/// with `pgoff` counted from the segment's first page, never from the
/// start of the file that holds it (the pool's size table, another
/// segment's range). Differences: a range past the segment's pages is
/// EINVAL (Linux maps it, and a touch there is SIGBUS); a part of an
/// attachment remapped leaves `shm_nattch` as it is (Linux counts the
/// pieces its vma is split into).
pub(crate) fn remap(
    a: &Session,
    cred: &Cred,
    start: usize,
    size: usize,
    pgoff: usize,
) -> SysResult<Option<i32>> {
    let Some((at, len)) = super::mapped::containing(start) else {
        return Ok(None);
    };
    let me = a.me()?;
    let Some(off) = attached_at(a, me, at)? else {
        return Ok(None);
    };
    // "if (start + size > vma->vm_end)": the next mapping is another
    // file's (each shmat's own), so EINVAL.
    if start.checked_add(size).is_none_or(|end| end > at + len) {
        return Err(Errno::EINVAL);
    }
    let whole = start == at && size == len;
    let e = entry(a, off)?;
    let (idx, generation) = (e.idx.load(Relaxed), e.generation.load(Relaxed));
    let f = registry::obtain_idx::<ShmKind>(a, idx)
        .ok()
        .filter(|f| f.generation == generation);
    let gone = |a: &Session| -> SysResult<Option<i32>> {
        // The old mapping closed (the segment's destruction if it was the
        // last attachment of a removed one), the new one refused: the
        // range is left unmapped.
        if whole {
            let _ = super::mapped::take(at);
            super::unmap(at, len);
            uncount(a, off, cred.pid)?;
            forget(a, me, off)?;
        } else {
            super::unmap(start, size);
        }
        Err(Errno::EINVAL)
    };
    let Some(f) = f else {
        return gone(a);
    };
    let s = f.slot;
    {
        let _g = locked!(lock_object::<ShmKind>(a, s));
        if still_valid(&f).is_err() {
            drop(_g);
            return gone(a);
        }
        let last = s.nattch.load(Relaxed) <= 1 && e.state.load(Relaxed) == COUNTED;
        if whole && last && s.head.mode.load(Relaxed) & abi::SHM_DEST != 0 {
            drop(_g);
            return gone(a);
        }
        // shm_close, then __shm_open: both name this process.
        let t = now();
        s.dtime.store(t, Relaxed);
        s.atime.store(t, Relaxed);
        s.lpid.store(cred.pid, Relaxed);
    }
    // Mapped again even where the pages would be the segment's own: an
    // earlier remap may have put others there.
    let from = (pgoff as u64).checked_mul(4096).ok_or(Errno::EINVAL)?;
    let id = a.layout().make_id(s.head.seq.load(Relaxed), idx);
    let mut b = super::Backing::of(s)?;
    b.settle(a, id).map_err(|_| Errno::EINVAL)?;
    let prot = super::prot_at(start).unwrap_or(libc::PROT_READ);
    super::map_segment(a, &b, start, prot, true, Some((from, size)))?;
    Ok(Some(0))
}

/// Repairs the segment's attachment journal as its lock's repair.
pub(super) fn repair_slot(a: &Session, s: &ShmSlot) -> Result<(), Errno> {
    repair(a, s);
    Ok(())
}
