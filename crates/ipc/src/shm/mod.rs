//! Shared memory segments: `shmget` and `shmctl` (ipc/shm.c) here; `shmat`
//! and `shmdt` in attach.rs.
//!
//! Each segment's pages live in a file of its own in the namespace's
//! segment directory, `<arena>.d/shm.<serial>`, created at `shmget`
//! (exactly `size` bytes, its pages allocated unless SHM_NORESERVE, the
//! arena's mode without `x`) and unlinked when the segment is destroyed, by
//! whichever participant destroys it; `shmat` maps it, if it is a regular
//! file long enough for the mapping. The directory's rules are in arena/file.rs. A SHM_HUGETLB
//! segment's file is on a hugetlbfs mount instead (`huge.rs`).
//!
//! # Protocol
//! As sem.rs. Registry counter `used` = `shm_tot`, the pages of all
//! segments (`ceil(size / 4096)` each).

use crate::abi::{self, shm_info, shmid64_ds, shminfo64};
use crate::arena;
use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::ctl;
use crate::errno::{Errno, SysResult};
use crate::ids::Bitmap;
use crate::limits::SHMMIN;
use crate::object::ShmSlot;
use crate::registry::{self, IPC_PRIVATE, Kind, Reg, lock_object, obtain, still_valid};
use crate::session::Session;
use crate::sys::fs;
use crate::time::now;
use core::sync::atomic::Ordering::Relaxed;
use std::path::{Path, PathBuf};

const PAGE_SHIFT: u32 = 12;

pub(crate) struct ShmKind;

pub mod attach;
mod file;
mod huge;
mod mapped;
pub(crate) mod pool;

use file::FileId;
use huge::Huge;

/// What backs a segment: its file's serial, its size, where its file is
/// when it is a huge page segment, which file it is when shmget recorded
/// that (`file.rs`), and its range when it lives in the pool (`pool.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backing {
    pub serial: u64,
    pub size: u64,
    pub huge: Option<Huge>,
    pub file: Option<FileId>,
    pub pool: Option<u64>,
    /// A segment in the pool whose pages are still to be allocated
    /// (`pool::reserve`), as [`Backing::settle`] found.
    pub unreserved: bool,
}

impl Backing {
    /// What the record `s` says (checked: EIDRM for a huge page record no
    /// shmget wrote).
    pub(crate) fn of(s: &ShmSlot) -> Result<Backing, Errno> {
        let serial = s.serial.load(Relaxed);
        Ok(Backing {
            serial,
            size: s.size.load(Relaxed),
            huge: Huge::of(s)?,
            file: FileId::recorded(s, serial),
            pool: pool::recorded(s)?,
            unreserved: false,
        })
    }

    /// For a segment in the pool, checked against its id `id`: the range must be the id's own, and the size is the pool's
    /// table's (`pool.rs`), which the mapping then has, with whether its
    /// pages are still to be allocated. EIDRM otherwise.
    pub(crate) fn settle(&mut self, a: &Session, id: i32) -> Result<(), Errno> {
        if let Some(range) = self.pool {
            if pool::range_of(id) != Some(range) {
                return Err(Errno::EIDRM);
            }
            (self.size, self.unreserved) = pool::size_of(a, id)?;
        }
        Ok(())
    }

    /// The length of an attachment: the size rounded up to the page size
    /// (the huge page size for a huge page segment, whose file has that
    /// size: newseg's `hugesize`).
    pub(crate) fn map_len(&self) -> Option<u64> {
        match &self.huge {
            Some(h) => h.round(self.size),
            None => self.size.checked_next_multiple_of(4096),
        }
    }
}

/// The protection of an attachment: read, and write unless read-only,
/// and execute with SHM_EXEC.
pub(crate) fn prot_of(rdonly: bool, exec: bool) -> i32 {
    libc::PROT_READ
        | if rdonly { 0 } else { libc::PROT_WRITE }
        | if exec { libc::PROT_EXEC } else { 0 }
}

/// Maps segment `b` for shmat with protection `prot` ([`prot_of`]), at
/// `addr` (0: anywhere), replacing what is there only with SHM_REMAP.
/// Errors as do_shmat's mmap gives them: EINVAL for a taken address
/// without SHM_REMAP, ENOMEM otherwise. Returns the address, the length
/// mapped, and the file it maps with the offset of the segment's first
/// page in it.
///
/// `part`: `Some((off, len))` maps only the `len` bytes from `off` of the
/// segment (page aligned, inside its mapped length: EINVAL otherwise) at
/// `addr`, over what is there (`remap_file_pages`).
pub(crate) fn map_segment(
    a: &Session,
    b: &Backing,
    addr: usize,
    prot: i32,
    remap: bool,
    part: Option<(u64, usize)>,
) -> Result<(usize, usize, mapped::Source), Errno> {
    let map_error = |e| match e {
        Errno::EEXIST => Errno::EINVAL,
        Errno::EACCES | Errno::EPERM => Errno::EACCES,
        _ => Errno::ENOMEM,
    };
    // The window of the segment mapped: all of it, or the part asked for
    // if the segment holds it.
    let window = |whole: usize| -> Result<(u64, usize), Errno> {
        match part {
            None => Ok((0, whole)),
            Some((off, len))
                if off
                    .checked_add(len as u64)
                    .is_some_and(|e| e <= whole as u64) =>
            {
                Ok((off, len))
            }
            Some(_) => Err(Errno::EINVAL),
        }
    };
    if let Some(range) = b.pool {
        // The size settled from the pool's table (`Backing::settle`): the
        // range holds it, whatever the record says.
        let whole = b
            .map_len()
            .filter(|&l| l <= pool::MAX_POOLED)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or(Errno::EIDRM)?;
        let (off, len) = window(whole)?;
        let (mapped, ino31) =
            pool::map(a, range + off, len, addr, prot, remap).map_err(|e| match e {
                Errno::EIDRM | Errno::ENOMEM => e,
                e => map_error(e),
            })?;
        return Ok((mapped, len, mapped::Source { ino31, base: range }));
    }
    let access = if prot & libc::PROT_WRITE == 0 {
        libc::O_RDONLY
    } else {
        libc::O_RDWR
    };
    let file = match &b.huge {
        Some(h) => {
            // hugetlb_get_unmapped_area -> prepare_hugepage_range: "if (addr
            // & ~huge_page_mask(h)) return -EINVAL" (SHM_RND rounded to
            // SHMLBA only).
            if !(addr as u64).is_multiple_of(h.page()) {
                return Err(Errno::EINVAL);
            }
            huge::open(a, b.serial, h, access)?.0
        }
        None => fs::open(&segment_path(a, b.serial), access | libc::O_NOFOLLOW, 0).map_err(
            |e| match e {
                // The segment's file refuses this caller (a process that
                // changed uid in a namespace not created shared): the
                // file's permissions are the namespace's boundary.
                Errno::EACCES | Errno::EPERM => Errno::EACCES,
                // No descriptor to map it with (RLIMIT_NOFILE reached, or
                // the system's table full): shmop(2) "ENOMEM Could not
                // allocate memory for the descriptor or for the page
                // tables", the nearest of shmat's errors.
                Errno(libc::EMFILE | libc::ENFILE) => Errno::ENOMEM,
                // Gone: removed meanwhile.
                _ => Errno::EIDRM,
            },
        )?,
    };
    // Pages past the file's end would fault with SIGBUS when the caller
    // touches them: a size its file does not have (a record no shmget
    // wrote: its size, or a serial naming a smaller segment's file) names
    // no segment ipcns can map; nor does anything but a regular file, nor
    // a file other than the one shmget made and recorded (another
    // participant's, put under its name: `file.rs`). A huge page
    // segment's file holds whole huge pages; another's holds the size (its
    // last page may end past the file's end: a page the file reaches is
    // read and written whole), and all of it is mapped: the size a caller
    // read before (IPC_STAT shows no more than the file holds) is never
    // more than the mapping, even if a participant shrank the record since.
    let m = file.stat().map_err(|_| Errno::EIDRM)?;
    if !m.is_file() || !(b.huge.is_some() || b.file.is_none_or(|id| id.is(&m))) {
        return Err(Errno::EIDRM);
    }
    let on_file = m.size;
    let whole = match &b.huge {
        Some(_) => b.map_len(),
        None => on_file.checked_next_multiple_of(4096),
    }
    .and_then(|l| usize::try_from(l).ok())
    .ok_or(Errno::ENOMEM)?;
    let need = if b.huge.is_some() {
        whole as u64
    } else {
        b.size
    };
    if on_file < need {
        return Err(Errno::EIDRM);
    }
    let (off, len) = window(whole)?;
    if let (Some(h), Some(_)) = (&b.huge, part)
        && !(off.is_multiple_of(h.page()) && (len as u64).is_multiple_of(h.page()))
    {
        return Err(Errno::EINVAL);
    }
    let mapped =
        crate::arena::map::map_segment_at(&file, off, len, addr, prot, remap).map_err(map_error)?;
    let source = mapped::Source {
        ino31: m.ino & 0x7fff_ffff,
        base: 0,
    };
    Ok((mapped, len, source))
}

/// The protection of the mapping at `addr`, as `/proc/self/maps` shows it
/// (what `remap_file_pages` maps again with).
pub(crate) fn prot_at(addr: usize) -> Option<i32> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let (range, rest) = l.split_once(' ')?;
        let (lo, hi) = range.split_once('-')?;
        let (lo, hi) = (
            usize::from_str_radix(lo, 16).ok()?,
            usize::from_str_radix(hi, 16).ok()?,
        );
        if !(lo..hi).contains(&addr) {
            return None;
        }
        let p = rest.as_bytes();
        Some(
            if p.first() == Some(&b'r') {
                libc::PROT_READ
            } else {
                0
            } | if p.get(1) == Some(&b'w') {
                libc::PROT_WRITE
            } else {
                0
            } | if p.get(2) == Some(&b'x') {
                libc::PROT_EXEC
            } else {
                0
            },
        )
    })
}

/// Unmaps an attachment of `len` bytes (as [`map_segment`] mapped) at
/// `addr`.
pub(crate) fn unmap(addr: usize, len: usize) {
    crate::arena::map::unmap_segment(addr, len);
}

/// Resident bytes of segment `s` as the kernel counts them
/// (shm_add_rss_swap): its file's pages touched (`file.rs`); for a huge
/// page segment,
/// `pages_per_huge_page(h) * mapping->nrpages` pages, nrpages counting
/// 4 KiB pages, so the bytes resident times the huge page's 4 KiB pages.
pub(crate) fn rss_bytes(a: &Session, s: &ShmSlot) -> u64 {
    let serial = s.serial.load(Relaxed);
    match pool::recorded(s) {
        Ok(Some(range)) => return pool::resident_bytes(a, range, s.size.load(Relaxed)),
        Ok(None) => {}
        Err(_) => return 0,
    }
    match Huge::of(s) {
        Ok(Some(h)) => huge::resident_bytes(a, serial, &h).saturating_mul(h.page() >> PAGE_SHIFT),
        Ok(None) => file::resident_bytes(&segment_path(a, serial)),
        Err(_) => 0,
    }
}

/// The size IPC_STAT shows for segment `id`: the record's, but for a
/// segment whose pages are a file of its own, never more than the file
/// holds, and for one in the pool, never more than the pool's table says
/// (`pool.rs`). A caller sizes its use of an attachment by it; shmat maps
/// the whole file, or the table's size, so the size shown before or after
/// an attach never takes the caller past its mapping, whatever a
/// participant writes in the record (the kernel's `shm_segsz` never
/// changes). Object lock held.
fn shown_size(a: &Session, s: &ShmSlot, id: i32) -> u64 {
    let size = s.size.load(Relaxed);
    match pool::recorded(s) {
        Ok(Some(_)) => return pool::size_of(a, id).map_or(size, |(t, _)| size.min(t)),
        Ok(None) => {}
        Err(_) => return size,
    }
    match Huge::of(s) {
        Ok(None) => {
            fs::lstat(&segment_path(a, s.serial.load(Relaxed))).map_or(size, |m| size.min(m.size))
        }
        _ => size,
    }
}

/// Removes the huge page segment files of the arena `id` owned by `owner`
/// (the namespace is being removed).
pub(crate) fn remove_huge_dirs(id: &crate::sys::Stat, owner: u32) {
    huge::remove_dirs(id, owner);
}

/// The huge page segment directories of the arena `id`, one per
/// hugetlbfs mount found now.
pub(crate) fn huge_dirs(id: &crate::sys::Stat) -> Vec<PathBuf> {
    huge::dirs(id)
}

/// The backing file of the segment with serial `serial`,
/// `<arena>.d/shm.<serial>`.
pub(crate) fn segment_path(a: &Session, serial: u64) -> PathBuf {
    arena::segment_dir_of(a.path()).join(format!("shm.{serial}"))
}

/// `(size + PAGE_SIZE - 1) >> PAGE_SHIFT`, wrapping as size_t does.
fn numpages(size: u64) -> u64 {
    size.wrapping_add((1 << PAGE_SHIFT) - 1) >> PAGE_SHIFT
}

impl Kind for ShmKind {
    type Slot = ShmSlot;
    const MECH: Mech = Mech::Shm;

    fn usage(_a: &Session, s: &ShmSlot) -> (u64, u64) {
        (numpages(s.size.load(Relaxed)), 0)
    }

    fn release(a: &Session, s: &ShmSlot) {
        if let Ok(Some(_)) = pool::recorded(s) {
            pool::release(a, s);
            s.serial.store(0, Relaxed);
            Huge::store(None, s);
            return;
        }
        let huge = Huge::of(s);
        let serial = s.serial.swap(0, Relaxed);
        let recorded = FileId::recorded(s, serial);
        Huge::store(None, s);
        FileId::store(None, serial, s);
        if serial != 0 {
            match huge {
                Ok(Some(h)) => huge::unlink(a, serial, &h),
                Ok(None) => file::remove(&segment_path(a, serial), recorded),
                // A record no shmget wrote names no file to remove.
                Err(_) => {}
            }
        }
    }

    fn repair_object(a: &Session, s: &ShmSlot) -> Result<(), Errno> {
        // An attachment being counted or uncounted.
        attach::repair_slot(a, s)
    }
}

/// [`Namespace::shmget`](crate::Namespace::shmget)'s work.
pub(crate) fn shmget(a: &Session, cred: &Cred, key: i32, size: u64, shmflg: i32) -> SysResult<i32> {
    let lim = &a.header().limits;
    // shm_more_checks: "if (shp->shm_segsz < params->u.size) return -EINVAL".
    let more = |s: &ShmSlot| {
        if s.size.load(Relaxed) < size {
            Err(Errno::EINVAL)
        } else {
            Ok(())
        }
    };
    let excl = shmflg & abi::IPC_CREAT != 0 && shmflg & abi::IPC_EXCL != 0;
    let forced = lim.shm_rmid_forced.load(Relaxed) != 0;
    // A key found before, without the registry lock (`recent.rs`);
    // not under shm_rmid_forced, whose orphans are reaped under it.
    if key != IPC_PRIVATE
        && !excl
        && !forced
        && let Some(r) = registry::existing::<ShmKind>(a, cred, key, shmflg, more)
    {
        return r;
    }
    let reg = Reg::lock::<ShmKind>(a)?;
    if forced {
        reap_orphans(a, &reg)?;
    }
    if key != IPC_PRIVATE
        && let Some(idx) = reg.find_key(key)?
    {
        if excl {
            return Err(Errno::EEXIST);
        }
        return ctl::existing::<ShmKind>(a, cred, key, idx, shmflg, more);
    }
    if key != IPC_PRIVATE && shmflg & abi::IPC_CREAT == 0 {
        return Err(Errno::ENOENT);
    }
    // newseg: "if (size < SHMMIN || size > ns->shm_ctlmax) return -EINVAL".
    if size < SHMMIN || size > lim.shmmax.load(Relaxed) {
        return Err(Errno::EINVAL);
    }
    // "if (numpages << PAGE_SHIFT < size) return -ENOSPC".
    let pages = numpages(size);
    if pages << PAGE_SHIFT < size {
        return Err(Errno::ENOSPC);
    }
    // "if (ns->shm_tot + numpages < ns->shm_tot || ns->shm_tot + numpages > ns->shm_ctlall)".
    let tot = reg.r.used.load(Relaxed);
    match tot.checked_add(pages) {
        Some(t) if t <= lim.shmall.load(Relaxed) => {}
        _ => return Err(Errno::ENOSPC),
    }
    // The backing file, before an index is taken (hugetlb_file_setup
    // and shmem_kernel_file_setup precede ipc_addid).
    let serial = reg.r.serial.fetch_add(1, Relaxed).wrapping_add(1);
    let reserve = shmflg & abi::SHM_NORESERVE == 0;
    // shmem_kernel_file_setup accounts the memory unless SHM_NORESERVE
    // (security_vm_enough_memory): refuse what Linux would refuse here.
    if shmflg & abi::SHM_HUGETLB == 0 && reserve && !enough_memory(pages) {
        return Err(Errno::ENOMEM);
    }
    // A normal segment lives in the pool when it fits and the pool can be
    // had (`pool.rs`): its range is given once its id is known.
    let pooled = if shmflg & abi::SHM_HUGETLB == 0 {
        pool::available(a, size)
    } else {
        None
    };
    let (huge, (path, file)) = if pooled.is_some() {
        (None, (None, None))
    } else if shmflg & abi::SHM_HUGETLB != 0 {
        // SHM_HUGETLB: the kernel's checks (size encoding EINVAL,
        // permission EPERM), then a file on a hugetlbfs mount with its
        // pages reserved, or ENOMEM as when the pool cannot reserve
        // them (`huge.rs`).
        let (h, path) = huge::create(a, cred, shmflg, size, serial)?;
        (Some(h), (Some(path), None))
    } else {
        // A file that cannot be made (a full tmpfs, a segment
        // directory that is not the namespace's, no descriptor to make
        // and reserve it with) is shmem_kernel_file_setup failing:
        // ENOMEM, as shmem_get_inode's failure gives.
        //
        // Its pages are allocated now unless SHM_NORESERVE, so that no
        // touch of an attachment can fault on a full file system (see
        // `arena::create_segment`); a file system without room for
        // them is shmem's setup failing too: ENOMEM. With
        // SHM_NORESERVE the file is sparse and a touch of a page the
        // file system cannot supply is SIGBUS, as a touch of a
        // MAP_NORESERVE mapping the kernel cannot back; made by path
        // when the process has no descriptor to spare (`arena/file.rs`).
        let Ok((path, m)) = arena::create_segment(a.path(), a.id(), serial, size, reserve) else {
            return Err(Errno::ENOMEM);
        };
        (None, (Some(path), FileId::of_stat(&m)))
    };
    let stored = core::cell::Cell::new(false);
    let created = reg.create::<ShmKind>(lim.shmmni.load(Relaxed), key, |s, id| {
        ctl::init_head(cred, &s.head, shmflg, now());
        s.size.store(size, Relaxed);
        s.atime.store(0, Relaxed);
        s.dtime.store(0, Relaxed);
        s.cpid.store(cred.pid, Relaxed);
        s.lpid.store(0, Relaxed);
        s.nattch.store(0, Relaxed);
        s.calls.store(0, Relaxed);
        s.serial.store(serial, Relaxed);
        Huge::store(huge.as_ref(), s);
        FileId::store(file, serial, s);
        s.creator_start.store(cred.start_time, Relaxed);
        stored.set(true);
        if let Some(h) = pooled {
            pool::carve(a, h, s, id, (size, reserve))?;
        }
        Ok(())
    });
    if created.is_err()
        && !stored.get()
        && let Some(path) = path
    {
        let _ = fs::unlink(&path);
    }
    created
}

/// [`Namespace::shmctl`](crate::Namespace::shmctl)'s work.
pub(crate) fn shmctl(
    a: &Session,
    cred: &Cred,
    shmid: i32,
    cmd: i32,
    arg: ShmArg<'_>,
) -> SysResult<i32> {
    let lim = &a.header().limits;
    // "if (cmd < 0 || shmid < 0) return -EINVAL".
    if cmd < 0 || shmid < 0 {
        return Err(Errno::EINVAL);
    }
    // Processes gone without detaching (SIGKILL) drop their
    // attachments now: nattch is as the kernel would show it.
    a.reap()?;
    reap_if_forced(a)?;
    match cmd {
        abi::IPC_INFO => {
            let ShmArg::Info(out) = arg else {
                return Err(Errno::EFAULT);
            };
            let mni = lim.shmmni.load(Relaxed) as u64;
            *out = shminfo64 {
                shmmax: lim.shmmax.load(Relaxed),
                shmmin: SHMMIN,
                shmmni: mni,
                shmseg: mni,
                shmall: lim.shmall.load(Relaxed),
                ..shminfo64::default()
            };
            let reg = Reg::lock::<ShmKind>(a)?;
            Ok(ctl::info_maxidx(&reg))
        }
        abi::SHM_INFO => {
            let ShmArg::ShmInfo(out) = arg else {
                return Err(Errno::EFAULT);
            };
            let reg = Reg::lock::<ShmKind>(a)?;
            *out = shm_info {
                used_ids: reg.r.in_use.load(Relaxed) as i32,
                shm_tot: reg.r.used.load(Relaxed),
                shm_rss: resident_pages(a, &reg)?,
                ..shm_info::default()
            };
            Ok(ctl::info_maxidx(&reg))
        }
        abi::IPC_STAT | abi::SHM_STAT | abi::SHM_STAT_ANY => {
            let ShmArg::Ds(out) = arg else {
                return Err(Errno::EFAULT);
            };
            *out = shmid64_ds::default();
            let (id, s, _g) = ctl::stat_lookup::<ShmKind>(
                a,
                cred,
                shmid,
                cmd != abi::IPC_STAT,
                cmd == abi::SHM_STAT_ANY,
            )?;
            out.shm_perm = ctl::perm_out(cred, &s.head);
            out.shm_segsz = shown_size(a, s, id);
            out.shm_atime = s.atime.load(Relaxed);
            out.shm_dtime = s.dtime.load(Relaxed);
            out.shm_ctime = s.head.ctime.load(Relaxed);
            out.shm_cpid = s.cpid.load(Relaxed);
            out.shm_lpid = s.lpid.load(Relaxed);
            out.shm_nattch = s.nattch.load(Relaxed);
            Ok(if cmd == abi::IPC_STAT { 0 } else { id })
        }
        abi::IPC_SET => {
            let ShmArg::Ds(ds) = arg else {
                return Err(Errno::EFAULT);
            };
            let ds = *ds;
            ctl::down::<ShmKind, _>(a, cred, shmid, |_, _, s| {
                ctl::update_perm(cred, &s.head, &ds.shm_perm)?;
                s.head.ctime.store(now(), Relaxed);
                Ok(0)
            })
        }
        abi::IPC_RMID => ctl::down::<ShmKind, _>(a, cred, shmid, |reg, idx, s| {
            // do_shm_rmid: attached segments are marked and their key
            // freed; the last detach destroys them.
            if s.nattch.load(Relaxed) > 0 {
                let h = &s.head;
                h.mode.store(h.mode.load(Relaxed) | abi::SHM_DEST, Relaxed);
                reg.make_private(idx, h)?;
            } else {
                reg.remove::<ShmKind>(idx)?;
            }
            Ok(0)
        }),
        abi::SHM_LOCK | abi::SHM_UNLOCK => {
            let f = obtain::<ShmKind>(a, shmid)?;
            let s = f.slot;
            let h = &s.head;
            // shmctl_do_lock: no ipcperms; owner or CAP_IPC_LOCK, and a
            // zero RLIMIT_MEMLOCK forbids locking.
            if !cred.cap_ipc_lock {
                if cred.euid != h.uid.load(Relaxed) && cred.euid != h.cuid.load(Relaxed) {
                    return Err(Errno::EPERM);
                }
                if cmd == abi::SHM_LOCK && cred.memlock_limit == 0 {
                    return Err(Errno::EPERM);
                }
            }
            let _g = locked!(lock_object::<ShmKind>(a, s));
            still_valid(&f)?;
            // shmctl_do_lock: "if (is_file_hugepages(shm_file)) goto
            // out_unlock0;" with err 0: a huge page segment is neither
            // locked nor unlocked, and SHM_LOCKED is not set.
            if !matches!(Huge::of(s), Ok(None)) {
                return Ok(0);
            }
            let mode = h.mode.load(Relaxed);
            if cmd == abi::SHM_LOCK {
                // user_shm_lock: the segment must fit the caller's limit.
                if mode & abi::SHM_LOCKED == 0
                    && !cred.cap_ipc_lock
                    && numpages(s.size.load(Relaxed)) << PAGE_SHIFT > cred.memlock_limit
                {
                    return Err(Errno::ENOMEM);
                }
                h.mode.store(mode | abi::SHM_LOCKED, Relaxed);
            } else {
                h.mode.store(mode & !abi::SHM_LOCKED, Relaxed);
            }
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `shm_destroy_orphaned`, and `exit_shm` observed late: with
/// shm_rmid_forced set, segments nobody has attached whose creator has
/// exited are destroyed. ipcns cannot see a process exit as it happens, so
/// every shm call checks first, which no caller can tell apart from
/// destruction at the exit itself.
pub(crate) fn reap_orphans(a: &Session, reg: &Reg<'_>) -> SysResult<()> {
    let live: Vec<u32> = reg.bm().iter().collect();
    for idx in live {
        let s = registry::slot::<ShmKind>(a, idx)?;
        let _g = locked!(lock_object::<ShmKind>(a, s));
        if s.head.state.load(core::sync::atomic::Ordering::Acquire) == crate::object::LIVE
            && s.nattch.load(Relaxed) == 0
            && !crate::creds::alive(s.cpid.load(Relaxed), s.creator_start.load(Relaxed))
        {
            reg.remove::<ShmKind>(idx)?;
        }
    }
    Ok(())
}

/// [`reap_orphans`] when shm_rmid_forced is set.
pub(crate) fn reap_if_forced(a: &Session) -> SysResult<()> {
    if a.header().limits.shm_rmid_forced.load(Relaxed) != 0 {
        let reg = Reg::lock::<ShmKind>(a)?;
        reap_orphans(a, &reg)?;
    }
    Ok(())
}

/// `__vm_enough_memory` for `pages` 4 KiB pages, by the host's
/// vm.overcommit_memory: 1 always; 0 (heuristic) unless more than RAM plus
/// swap; 2 (strict) within CommitLimit - Committed_AS.
fn enough_memory(pages: u64) -> bool {
    // The heuristic's bound (RAM plus swap) as read in the last second:
    // /proc/sys/vm/overcommit_memory and /proc/meminfo read at every
    // shmget were a third of its cost. The strict mode reads on.
    use core::sync::atomic::AtomicU64;
    static LIMIT: AtomicU64 = AtomicU64::new(0);
    static READ_AT: AtomicU64 = AtomicU64::new(0);
    let now = crate::sys::time::monotonic_ns();
    // Acquire: pairs with the Release below (LIMIT is written first).
    let at = READ_AT.load(core::sync::atomic::Ordering::Acquire);
    if at != 0 && now.saturating_sub(at) < 1_000_000_000 {
        return pages <= LIMIT.load(Relaxed);
    }
    let mode = fs::read_to_string(Path::new("/proc/sys/vm/overcommit_memory"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let meminfo = fs::read_to_string(Path::new("/proc/meminfo")).unwrap_or_default();
    let kb = |name: &str| -> u64 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(u64::MAX / 8192)
    };
    let limit = match mode {
        1 => u64::MAX,
        2 => return pages <= (kb("CommitLimit:").saturating_sub(kb("Committed_AS:"))) / 4,
        _ => (kb("MemTotal:") + kb("SwapTotal:")) / 4,
    };
    LIMIT.store(limit, Relaxed);
    READ_AT.store(now.max(1), core::sync::atomic::Ordering::Release);
    pages <= limit
}

/// `shm_rss`: resident pages over all segments ([`rss_bytes`]).
fn resident_pages(a: &Session, reg: &Reg<'_>) -> SysResult<u64> {
    let bm: &Bitmap<'_> = &reg.bm();
    let mut pages: u64 = 0;
    for idx in bm.iter() {
        let s = registry::slot::<ShmKind>(a, idx)?;
        pages = pages.saturating_add(rss_bytes(a, s) >> PAGE_SHIFT);
    }
    Ok(pages)
}

/// The last argument of `shmctl`, typed; the wrong kind is EFAULT.
pub enum ShmArg<'a> {
    None,
    Ds(&'a mut shmid64_ds),
    Info(&'a mut shminfo64),
    ShmInfo(&'a mut shm_info),
}
