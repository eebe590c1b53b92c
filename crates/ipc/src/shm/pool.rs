//! The segment pool: one sparse file, `<arena>.d/shm.pool`, from which
//! every normal segment of up to [`MAX_POOLED`] bytes is carved, so that
//! shmget makes no file, shmat opens none, and IPC_RMID unlinks none.
//!
//! # Where a segment lives
//! Segment `id` owns the range that starts at [`range_of`]`(id)` =
//! `TABLE + id << 32`, fixed by its id: ids are unique among live
//! segments, so ranges never overlap, and an id comes back only after its
//! index has gone through every sequence number, as the kernel's ids do
//! (a mapping some process kept past the segment's end, which ipcns did
//! not count, sees a later segment only then). The file is
//! `2^63 - 4096` bytes long and sparse: a range costs nothing until its
//! pages are allocated. The first shmat allocates the segment's pages
//! (`fallocate`) unless SHM_NORESERVE, before anything maps them, so no
//! touch can meet a full file system (shmget checks that there is room,
//! as shmem's accounting does: [`carve`], [`reserve`]); the segment's
//! destruction punches them out of the
//! file (`FALLOC_FL_PUNCH_HOLE`), which gives them back and zeroes them
//! for the next owner of the range. A huge page segment, a larger one, or
//! any segment where no pool can be had (a file system that cannot hold
//! the file, a caller that may not make it) has a file of its own as
//! before (`file.rs`).
//!
//! # The size table
//! The first [`TABLE`] bytes hold one 32-byte entry per index: a tag, the
//! id, the size and whether the pages are still to be allocated, written
//! through the descriptor and never mapped. shmat maps, and IPC_STAT shows, the size found there, whatever
//! the record says: a stray write into the arena (a faulty participant)
//! can change a record's size but not what a caller maps, so no caller is
//! led past its mapping, nor into pages shmget did not allocate, as the
//! length of a segment's own file guaranteed before. The tag is
//! `MAGIC ^ the pool's inode`: an entry read through a descriptor that is
//! no longer the pool's is no entry.
//!
//! # The record
//! A segment in the pool has no file of its own, so the head's two spare
//! words, which name a segment's file (`file.rs`), name its range instead:
//! the range, then [`POOLED`] where a file's inode would be. shmat accepts
//! only the range its id owns (EIDRM otherwise); the destroyer punches the
//! range the record names, if it is one of the pool's. A record of an
//! earlier build never has [`POOLED`] there (its words are a file's, or
//! zero).
//!
//! # The descriptor
//! Each process keeps the pool open once (close-on-exec, `arena/pool.rs`)
//! and checks it before use: a program may close descriptors it did not open, or put
//! its own file under the number. Writes (shmget's allocation and entry,
//! the destroyer's punch) first `fstat` it; shmat reads the entry, whose
//! tag checks it. A number found to be no longer the pool's is left to
//! the program and the pool opened again.
//!
//! Lock state: shmget and the destroyer hold the segment's registry and
//! object locks; shmat and IPC_STAT hold none (the entry is written
//! before the segment is live, and a pread sees it whole or not at all
//! for 32 aligned bytes of a tmpfs page).

use crate::arena::POOL_SIZE;
use crate::arena::pool::{Handle, forget};
use crate::errno::Errno;
use crate::object::ShmSlot;
use crate::session::Session;
use crate::sys::Fd;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

/// Bytes of the size table at the start of the file: 32 per index, for
/// the largest table (`ipcmni_extend`, 2^24 indexes).
const TABLE: u64 = 1 << 29;
/// The range of each id.
const SPAN_SHIFT: u32 = 32;
/// The largest segment the pool holds: the last id's range ends at
/// [`POOL_SIZE`].
pub(crate) const MAX_POOLED: u64 = (1 << SPAN_SHIFT) - TABLE - 4096;
const ENTRY: u64 = 32;
/// The record's second word for a segment in the pool ("pool" and a 1;
/// an inode number no file system hands out).
const POOLED: u64 = 0x6c6f_6f70_0000_0001;

/// Where segment `id` lives in the pool.
pub(crate) fn range_of(id: i32) -> Option<u64> {
    let id = u64::try_from(id).ok()?;
    let off = TABLE + (id << SPAN_SHIFT);
    (off + MAX_POOLED <= POOL_SIZE).then_some(off)
}

/// Whether `off` is the start of some id's range.
fn is_range(off: u64) -> bool {
    off >= TABLE
        && (off - TABLE).trailing_zeros() >= SPAN_SHIFT
        && off
            .checked_add(MAX_POOLED)
            .is_some_and(|end| end <= POOL_SIZE)
}

/// The range the record `s` names, if it is a segment of the pool:
/// `Ok(None)` for one with a file of its own, EIDRM for a word no shmget
/// wrote.
pub(crate) fn recorded(s: &ShmSlot) -> Result<Option<u64>, Errno> {
    if s.head.spare[1].load(Relaxed) != POOLED {
        return Ok(None);
    }
    match s.head.spare[0].load(Relaxed) {
        r if is_range(r) => Ok(Some(r)),
        _ => Err(Errno::EIDRM),
    }
}

/// Records `range` (None: not in the pool, and no file recorded) in `s`.
/// Object lock held.
pub(crate) fn store(range: Option<u64>, s: &ShmSlot) {
    let w = range.map_or([0, 0], |r| [r, POOLED]);
    s.head.spare[0].store(w[0], Relaxed);
    s.head.spare[1].store(w[1], Relaxed);
}

/// The pool's descriptor, open for writing if `write`, checked with an
/// `fstat` if `check` (before a write). Opened (made, by its owner) when
/// this process has none yet, or no longer.
fn handle(a: &Session, write: bool, check: bool) -> Result<Handle, Errno> {
    let cache = a.shm_pool();
    let seen = cache.word.load(Acquire);
    if let Some(h) = Handle::decode(seen)
        && (h.writable || !write)
        && (!check || h.holds_pool())
    {
        return Ok(h);
    }
    if write && cache.unusable.load(Relaxed) {
        return Err(Errno::ENOENT);
    }
    let open = |w: bool| crate::arena::open_pool(a.path(), a.id(), w);
    let opened = match open(write) {
        // A participant that may only read.
        Err(Errno::EACCES) if write => open(false).map(|o| (o, false)),
        r => r.map(|o| (o, write)),
    };
    let ((f, m), writable) = match opened {
        Ok(o) => o,
        Err(e) => {
            if write && matches!(e, Errno::EFBIG | Errno::EINVAL | Errno(libc::EOPNOTSUPP)) {
                cache.unusable.store(true, Relaxed);
            }
            return Err(e);
        }
    };
    let raw = f.into_raw();
    let w = Handle::encode(raw, m.ino, writable);
    let h = match cache.word.compare_exchange(seen, w, AcqRel, Acquire) {
        // The number it replaces, if any, is left alone: the program's
        // now, or a read-only one kept open (once).
        Ok(_) => Handle::decode(w).ok_or(Errno(libc::EBADF))?,
        Err(now) => {
            #[allow(unsafe_code)]
            // SAFETY: `raw` was opened just above and given to nobody.
            drop(unsafe { Fd::from_raw(raw) });
            // Another thread opened it first: theirs.
            Handle::decode(now).ok_or(Errno::EAGAIN)?
        }
    };
    if write && !h.writable {
        return Err(Errno::EACCES);
    }
    Ok(h)
}

/// Makes `f` (a descriptor on the pool with inode `ino`, checked by the
/// caller) the session's, if it has none yet. Whether it was taken (else
/// it is closed).
pub(crate) fn adopt(a: &Session, f: Fd, ino: u64, writable: bool) -> bool {
    let raw = f.into_raw();
    let w = Handle::encode(raw, ino, writable);
    if a.shm_pool()
        .word
        .compare_exchange(0, w, AcqRel, Acquire)
        .is_ok()
    {
        return true;
    }
    #[allow(unsafe_code)]
    // SAFETY: `raw` came from `f`, ours alone, and was given to nobody.
    drop(unsafe { Fd::from_raw(raw) });
    false
}

/// The pool's descriptor, checked and open for writing, if shmget may put
/// a segment of `size` bytes in it (for [`carve`]).
pub(crate) fn available(a: &Session, size: u64) -> Option<Handle> {
    size.checked_next_multiple_of(4096)
        .is_some_and(|s| s <= MAX_POOLED)
        .then(|| handle(a, true, true).ok())
        .flatten()
}

/// The size table entry's offset for segment `id` (its index's entry).
fn entry_of(a: &Session, id: i32) -> Option<u64> {
    u64::from(a.layout().idx_of(id))
        .checked_mul(ENTRY)
        .filter(|&o| o + ENTRY <= TABLE)
}

/// Gives segment `id` (`size` bytes) its range in the pool open on `h`
/// ([`available`]): the record first (so that a creator dying here leaves a record whose
/// release punches the range), then its size table entry, which says
/// whether its pages are still to be allocated ([`reserve`], at the first
/// shmat) unless `!reserve`. ENOMEM when the file system has no room for
/// them now (`statfs`), as shmem's accounting refuses a segment. Registry
/// lock held, before the segment is live.
pub(crate) fn carve(
    a: &Session,
    h: Handle,
    s: &ShmSlot,
    id: i32,
    (size, reserve): (u64, bool),
) -> Result<(), Errno> {
    let range = range_of(id).ok_or(Errno::ENOMEM)?;
    let at = entry_of(a, id).ok_or(Errno::ENOMEM)?;
    let len = size.checked_next_multiple_of(4096).ok_or(Errno::ENOMEM)?;
    if len > MAX_POOLED {
        return Err(Errno::ENOMEM);
    }
    store(Some(range), s);
    Fd::with_raw(h.fd, |f| {
        if reserve && f.free_bytes().is_ok_and(|free| free < len) {
            return Err(Errno::ENOMEM);
        }
        let mut e = [0u8; ENTRY as usize];
        e[0..8].copy_from_slice(&h.tag.to_ne_bytes());
        e[8..12].copy_from_slice(&id.to_ne_bytes());
        e[16..24].copy_from_slice(&size.to_ne_bytes());
        e[24..32].copy_from_slice(&u64::from(reserve).to_ne_bytes());
        f.pwrite_full(&e, at).map_err(|_| Errno::ENOMEM)
    })
}

/// Allocates the pages of segment `id`'s range (`len` bytes at `range`)
/// that its entry says are still to be (see [`carve`]), and says they no
/// longer are: a segment's pages are all there before anybody maps them,
/// so no touch can fault on a full file system; ENOMEM (shmat's "could
/// not allocate memory") when it has no room. The kernel allocates a
/// segment's pages as they are first touched; ipcns at the first shmat,
/// not at shmget, so that shmget costs what the kernel's does. A caller
/// that may not write the pool (a participant that may only read) maps
/// without. Object lock held (the entry is this segment's until its
/// destruction, which takes the lock).
pub(crate) fn reserve(a: &Session, id: i32, range: u64, len: u64) -> Result<(), Errno> {
    let (Ok(h), Some(at)) = (handle(a, true, true), entry_of(a, id)) else {
        return Ok(());
    };
    Fd::with_raw(h.fd, |f| {
        match f.fallocate(0, range, len) {
            Ok(()) | Err(Errno(libc::EOPNOTSUPP)) => {}
            Err(_) => return Err(Errno::ENOMEM),
        }
        // Done: the entry's last word back to 0.
        let _ = f.pwrite_full(&0u64.to_ne_bytes(), at + 24);
        Ok(())
    })
}

/// The size of segment `id` as its table entry says, and
/// whether its pages are still to be allocated ([`reserve`]); EIDRM when
/// the entry is not this segment's (or the pool cannot be read: a caller
/// that may not read it gets EACCES).
pub(crate) fn size_of(a: &Session, id: i32) -> Result<(u64, bool), Errno> {
    let off = entry_of(a, id).ok_or(Errno::EIDRM)?;
    let read = |h: Handle| -> Result<Option<(u64, bool)>, Errno> {
        let mut e = [0u8; ENTRY as usize];
        let n = Fd::with_raw(h.fd, |f| f.pread_full(&mut e, off));
        let word = |at: usize| u64::from_ne_bytes(e[at..at + 8].try_into().unwrap_or([0; 8]));
        Ok(match n {
            Ok(n) if n == e.len() && word(0) == h.tag => {
                let size = word(16);
                (i32::from_ne_bytes([e[8], e[9], e[10], e[11]]) == id
                    && size > 0
                    && size <= MAX_POOLED)
                    .then_some((size, word(24) != 0))
            }
            // Not the pool any more: opened again below.
            _ => return Err(Errno(libc::EBADF)),
        })
    };
    let h = handle(a, false, false).map_err(map_open)?;
    match read(h) {
        Ok(Some(entry)) => Ok(entry),
        Ok(None) => Err(Errno::EIDRM),
        Err(_) => {
            // The number was not the pool's: forget it, open it again.
            forget(a.shm_pool(), h);
            let h = handle(a, false, false).map_err(map_open)?;
            read(h)?.ok_or(Errno::EIDRM)
        }
    }
}

/// shmat's errors for a pool that cannot be opened, as for a segment's
/// own file (`map_segment`).
fn map_open(e: Errno) -> Errno {
    match e {
        Errno::EACCES | Errno::EPERM => Errno::EACCES,
        Errno(libc::EMFILE | libc::ENFILE) => Errno::ENOMEM,
        _ => Errno::EIDRM,
    }
}

/// Maps `len` bytes of the range at `range` for shmat (as
/// `arena::map::map_segment`).
pub(crate) fn map(
    a: &Session,
    range: u64,
    len: usize,
    addr: usize,
    prot: i32,
    replace: bool,
) -> Result<(usize, u64), Errno> {
    let write = prot & libc::PROT_WRITE != 0;
    let h = handle(a, write, false).map_err(map_open)?;
    if !write
        && h.writable
        && let Some(ro) = read_only(&h)
    {
        return crate::arena::map::map_segment_at(&ro, range, len, addr, prot, replace)
            .map(|p| (p, h.ino31()));
    }
    Fd::with_raw(h.fd, |f| {
        crate::arena::map::map_segment_at(f, range, len, addr, prot, replace)
    })
    .map(|p| (p, h.ino31()))
}

/// A descriptor on the pool open for reading only, for a read-only
/// attachment (SHM_RDONLY): a shared mapping of a descriptor open for
/// writing may be made writable later (`mprotect` with PROT_WRITE), where
/// the kernel's read-only attachment, of a shm file opened read-only,
/// answers EACCES. Opened afresh through `/proc/self/fd` (shmat then pays
/// an open and a close) and checked to be the pool; None where that
/// cannot be had (no /proc, a pool this caller may not open by itself:
/// a descendant that changed uid, holding `IPCNS_POOL_FD`), and the
/// attachment is then mapped through the shared descriptor.
fn read_only(h: &Handle) -> Option<Fd> {
    let path = format!("/proc/self/fd/{}", h.fd);
    let f = crate::sys::fs::open(
        std::path::Path::new(&path),
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )
    .ok()?;
    let ro = Handle { fd: f.raw(), ..*h };
    ro.holds_pool().then_some(f)
}

/// Gives back the pages of the range the destroyed record `s` names, if
/// any: a punched hole (see the module doc). A pool that cannot be had
/// keeps them until `ipcns ns remove`.
pub(crate) fn release(a: &Session, s: &ShmSlot) {
    let Ok(Some(range)) = recorded(s) else {
        return;
    };
    if let Ok(h) = handle(a, true, true) {
        let _ = Fd::with_raw(h.fd, |f| {
            f.fallocate(
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                range,
                MAX_POOLED,
            )
        });
    }
    store(None, s);
}

/// Resident bytes of the segment at `range` of `size` bytes: its pages
/// touched, as `file::resident_bytes` counts a file's.
pub(crate) fn resident_bytes(a: &Session, range: u64, size: u64) -> u64 {
    let Ok(h) = handle(a, false, false) else {
        return 0;
    };
    let end = range + size.min(MAX_POOLED).next_multiple_of(4096);
    Fd::with_raw(h.fd, |f| super::file::data_bytes(f, range, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_fit_and_never_overlap() {
        assert_eq!(range_of(0), Some(TABLE));
        assert_eq!(range_of(1), Some(TABLE + (1 << 32)));
        let last = range_of(i32::MAX).expect("the last id has a range");
        assert_eq!(last + MAX_POOLED, POOL_SIZE);
        assert!(range_of(-1).is_none());
        // 2^24 indexes of 32 bytes fill the table exactly.
        assert_eq!((1u64 << 24) * ENTRY, TABLE);
        assert!(is_range(TABLE) && is_range(last));
        assert!(!is_range(TABLE + 4096) && !is_range(0) && !is_range(last + (1 << 32)));
        assert!(!is_range(u64::MAX - (1 << 32) + 1 + TABLE) && !is_range(u64::MAX));
    }
}
