//! [`ShmSegment`]: a shared memory segment by handle (shmget(2),
//! shmop(2), shmctl(2)), and [`Attachment`], a mapping of it that
//! `shmdt`s itself when dropped.
//!
//! # Safety
//! [`Attachment::bytes`] and the copies turn the address `shmat` returned
//! into a slice of `AtomicU8` of the segment's size. That relies on:
//! - the mapping: `shmat` mapped the segment there, `MAP_SHARED`, readable
//!   and (without SHM_RDONLY) writable, at least `shm_segsz` bytes (the
//!   size rounded up to the page; `shmat` refuses a segment whose file is
//!   shorter, `shm/attach.rs`), and IPC_STAT read after the attach names
//!   the segment attached (an attached segment is never destroyed, and its
//!   size never changes). The mapping lasts until the guard's drop
//!   detaches it: the guard borrows the namespace, its address is held
//!   ([`held`](crate::namespace::shm::held): [`Namespace::shmdt`] refuses
//!   it with EINVAL while the guard lives, so safe code cannot pull the
//!   mapping from under a slice), and only the guard's own detach or the
//!   program's own `munmap` (unsafe code, whose promise it is not to)
//!   removes it.
//! - the access: other processes (and `as_mut_ptr`'s users here) may write
//!   the bytes at any time, so they are only ever reached as atomics,
//!   whose every bit pattern is valid and whose racing accesses are no
//!   data race. A read-only mapping is only loaded from (relaxed loads of
//!   single bytes are allowed on read-only memory: the `std::sync::atomic`
//!   docs' "atomic accesses to read-only memory"); `bytes` gives no slice
//!   of it, so no store can reach it.
#![allow(unsafe_code)]

use super::{Get, PRIVATE, Perm, cred};
use crate::abi::{IPC_RMID, IPC_STAT, shmid64_ds};
use crate::errno::Errno;
use crate::error::Result;
use crate::namespace::Namespace;
use crate::namespace::shm::{hold, release};
use crate::shm::ShmArg;
use crate::shm::attach::SHM_RDONLY;
use core::sync::atomic::AtomicU8;
use core::sync::atomic::Ordering::Relaxed;

/// What IPC_STAT tells of a segment (`struct shmid64_ds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShmStat {
    /// Its mode has SHM_DEST (`0o1000`) once removed while attached.
    pub perm: Perm,
    /// Size in bytes.
    pub size: u64,
    /// The last attach, detach and change, in seconds since the epoch (0:
    /// never).
    pub atime: i64,
    pub dtime: i64,
    pub ctime: i64,
    /// The creator, and the process of the last attach or detach.
    pub cpid: i32,
    pub lpid: i32,
    /// How many attachments it has, in all processes.
    pub nattch: u64,
}

/// A shared memory segment of a namespace.
///
/// ```
/// # fn main() -> ipcns::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("ipcns-doc-shm-{}", std::process::id()));
/// # let ns = ipcns::Namespace::create_at(&dir, ipcns::CreateOptions::default())?;
/// use ipcns::ShmSegment;
///
/// let seg = ShmSegment::private(&ns, 4096, 0o600)?;
/// let a = seg.attach()?;
/// let b = seg.attach_read_only()?;
/// a.write(100, b"shared")?;
/// let mut seen = [0u8; 6];
/// b.read(100, &mut seen)?;
/// assert_eq!(&seen, b"shared");
/// assert_eq!(seg.stat()?.nattch, 2);
/// # drop((a, b));
/// # seg.remove()?;
/// # drop(ns);
/// # ipcns::Namespace::remove_at(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct ShmSegment<'ns> {
    ns: &'ns Namespace,
    id: i32,
}

impl core::fmt::Debug for ShmSegment<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShmSegment")
            .field("ns", &self.ns.name())
            .field("id", &self.id)
            .finish()
    }
}

impl<'ns> ShmSegment<'ns> {
    fn obtain(
        ns: &'ns Namespace,
        key: i32,
        size: usize,
        how: Get,
        mode: u32,
    ) -> Result<ShmSegment<'ns>> {
        // A usize fits in a u64 on every target ipcns builds for; the
        // kernel's size_t is the same width.
        let size = u64::try_from(size).map_err(|_| Errno::EINVAL)?;
        let id = ns.shmget(&*cred(ns)?, key, size, how.flags(mode))?;
        Ok(ShmSegment { ns, id })
    }

    /// A new segment of `size` bytes (zeros) under `key`, with permission
    /// bits `mode` (`0o600`): `shmget(key, size, IPC_CREAT | IPC_EXCL |
    /// mode)`. EEXIST if the key has a segment, EINVAL for a size of 0 or
    /// above SHMMAX, ENOSPC or ENOMEM past the namespace's limits or its
    /// file system's room.
    pub fn create(ns: &'ns Namespace, key: i32, size: usize, mode: u32) -> Result<ShmSegment<'ns>> {
        ShmSegment::obtain(ns, key, size, Get::Create, mode)
    }

    /// The segment under `key`: `shmget(key, 0, 0)`. ENOENT if none.
    pub fn open(ns: &'ns Namespace, key: i32) -> Result<ShmSegment<'ns>> {
        ShmSegment::obtain(ns, key, 0, Get::Open, 0)
    }

    /// The segment under `key`, made if there is none: `shmget(key, size,
    /// IPC_CREAT | mode)`. EINVAL if the segment found is smaller than
    /// `size`.
    pub fn open_or_create(
        ns: &'ns Namespace,
        key: i32,
        size: usize,
        mode: u32,
    ) -> Result<ShmSegment<'ns>> {
        ShmSegment::obtain(ns, key, size, Get::OpenOrCreate, mode)
    }

    /// A new segment no key finds: `shmget(IPC_PRIVATE, size, mode)`.
    pub fn private(ns: &'ns Namespace, size: usize, mode: u32) -> Result<ShmSegment<'ns>> {
        ShmSegment::obtain(ns, PRIVATE, size, Get::Create, mode)
    }

    /// The segment with id `id`, unchecked: a wrong id fails the first
    /// call (EINVAL).
    pub fn from_id(ns: &'ns Namespace, id: i32) -> ShmSegment<'ns> {
        ShmSegment { ns, id }
    }

    /// The segment's id (`shmid`).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The namespace it is in.
    pub fn namespace(&self) -> &'ns Namespace {
        self.ns
    }

    /// Maps the segment for reading and writing where the system chooses:
    /// `shmat(id, NULL, 0)`. EACCES without read and write permission.
    pub fn attach(&self) -> Result<Attachment<'ns>> {
        self.attach_with(0)
    }

    /// Maps the segment read-only: `shmat(id, NULL, SHM_RDONLY)`. EACCES
    /// without read permission.
    pub fn attach_read_only(&self) -> Result<Attachment<'ns>> {
        self.attach_with(SHM_RDONLY)
    }

    fn attach_with(&self, shmflg: i32) -> Result<Attachment<'ns>> {
        let me = cred(self.ns)?;
        let addr = self.ns.shmat(&me, self.id, 0, shmflg)?;
        let mut at = Attachment {
            ns: self.ns,
            addr,
            len: 0,
            writable: shmflg & SHM_RDONLY == 0,
        };
        hold(addr);
        // The size of the segment now attached (see the Safety section):
        // on an error the guard detaches it again.
        let size = self.stat()?.size;
        at.len = usize::try_from(size).map_err(|_| Errno::EUCLEAN)?;
        Ok(at)
    }

    /// The segment's owner, permissions, size, attachments and times:
    /// `shmctl(id, IPC_STAT)`. EACCES without read permission.
    pub fn stat(&self) -> Result<ShmStat> {
        let me = cred(self.ns)?;
        let mut ds = shmid64_ds::default();
        self.ns
            .shmctl(&me, self.id, IPC_STAT, ShmArg::Ds(&mut ds))?;
        Ok(ShmStat {
            perm: Perm::from(&ds.shm_perm),
            size: ds.shm_segsz,
            atime: ds.shm_atime,
            dtime: ds.shm_dtime,
            ctime: ds.shm_ctime,
            cpid: ds.shm_cpid,
            lpid: ds.shm_lpid,
            nattch: ds.shm_nattch,
        })
    }

    /// Removes the segment (`shmctl(id, IPC_RMID)`): its key is free at
    /// once, its memory goes with its last attachment (attachments live on
    /// until then, and the id stays valid for them). EPERM unless the
    /// caller owns or created it (or has CAP_SYS_ADMIN).
    pub fn remove(self) -> Result<()> {
        let me = cred(self.ns)?;
        self.ns.shmctl(&me, self.id, IPC_RMID, ShmArg::None)?;
        Ok(())
    }
}

/// A segment mapped into this process (`shmat`), detached when dropped
/// (`shmdt`). Its bytes are shared with every other attachment of the
/// segment, in this process and others, which may change them at any
/// time: they are reached as atomics ([`Attachment::bytes`]) or copied
/// ([`Attachment::read`], [`Attachment::write`]), never as a `&[u8]`.
/// A child made by `fork` has its own copy of the attachment (counted in
/// `nattch`), which its copy of the guard detaches.
pub struct Attachment<'ns> {
    ns: &'ns Namespace,
    /// The address `shmat` returned; 0 once detached.
    addr: usize,
    /// The segment's size (0 until known).
    len: usize,
    writable: bool,
}

impl core::fmt::Debug for Attachment<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Attachment")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("writable", &self.writable)
            .finish()
    }
}

impl Attachment<'_> {
    /// The segment's size in bytes (the mapping is that rounded up to the
    /// page).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no byte (never: a segment has at least SHMMIN, 1).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it was attached for writing (not SHM_RDONLY).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The address of the first byte, as `shmat` returned it. Reading or
    /// writing through it is the caller's affair, as in C: others may
    /// write the bytes at any time, and a write to a read-only attachment
    /// faults (SIGSEGV).
    pub fn as_ptr(&self) -> *const u8 {
        self.addr as *const u8
    }

    /// [`Attachment::as_ptr`], for writing.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.addr as *mut u8
    }

    /// The bytes, for loads and stores of single bytes (`Relaxed` unless
    /// the program pairs its own orderings); `None` for a read-only
    /// attachment, whose bytes [`Attachment::read`] copies.
    pub fn bytes(&self) -> Option<&[AtomicU8]> {
        self.writable.then(|| self.atomic())
    }

    fn atomic(&self) -> &[AtomicU8] {
        if self.addr == 0 {
            return &[];
        }
        // SAFETY: `addr` is the start of a live mapping of at least `len`
        // bytes that lasts while `self` does (the module's Safety
        // section, first point); AtomicU8 has u8's size and alignment and
        // every bit pattern is valid, and its accesses may race with the
        // other processes' (second point). Stores through it are only
        // offered for a writable mapping (`bytes`, `write`).
        unsafe { core::slice::from_raw_parts(self.addr as *const AtomicU8, self.len) }
    }

    /// `[offset, offset + n)` of the attachment; EFAULT outside it (the
    /// kernel's answer to an address outside the caller's memory).
    fn range(&self, offset: usize, n: usize) -> Result<&[AtomicU8]> {
        let end = offset.checked_add(n).ok_or(Errno::EFAULT)?;
        Ok(self.atomic().get(offset..end).ok_or(Errno::EFAULT)?)
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`. EFAULT if they
    /// run past the segment's end.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let src = self.range(offset, buf.len())?;
        for (d, s) in buf.iter_mut().zip(src) {
            *d = s.load(Relaxed);
        }
        Ok(())
    }

    /// Copies `data` to the bytes from `offset`. EFAULT if they run past
    /// the segment's end; EACCES for a read-only attachment (where a C
    /// program's store would fault).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        if !self.writable {
            return Err(Errno::EACCES.into());
        }
        let dst = self.range(offset, data.len())?;
        for (d, s) in dst.iter().zip(data) {
            d.store(*s, Relaxed);
        }
        Ok(())
    }

    /// Detaches now (`shmdt(addr)`), with its error; the segment is
    /// destroyed if it was removed and this was its last attachment.
    pub fn detach(mut self) -> Result<()> {
        self.detach_now()
    }

    fn detach_now(&mut self) -> Result<()> {
        let addr = core::mem::take(&mut self.addr);
        if addr == 0 {
            return Ok(());
        }
        self.len = 0;
        release(addr);
        let me = cred(self.ns)?;
        self.ns.shmdt(&me, addr)?;
        Ok(())
    }
}

impl Drop for Attachment<'_> {
    fn drop(&mut self) {
        // An error cannot be reported from a drop: the mapping then stays
        // (counted in nattch) until the process exits or execs, as a C
        // program's that never calls shmdt.
        let _ = self.detach_now();
    }
}
