//! [`SemSet`]: a semaphore set by handle (semget(2), semop(2), semctl(2)).

use super::{Get, PRIVATE, Perm, cred};
use crate::abi::{
    GETALL, GETNCNT, GETPID, GETVAL, GETZCNT, IPC_NOWAIT, IPC_RMID, IPC_STAT, SEM_UNDO, SETALL,
    SETVAL, sembuf, semid64_ds,
};
use crate::errno::Errno;
use crate::error::Result;
use crate::namespace::Namespace;
use crate::sem::SemArg;
use core::ops::BitOr;
use core::time::Duration;

/// Operations a set takes at once without a heap allocation; longer lists
/// are copied to a vector.
const INLINE_OPS: usize = 8;

/// The flags of one semaphore operation (`sem_flg`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SemFlags(i16);

impl SemFlags {
    /// No flag: the operation waits until it can proceed.
    pub const NONE: SemFlags = SemFlags(0);
    /// SEM_UNDO: the operation is undone when the process exits.
    pub const UNDO: SemFlags = SemFlags(SEM_UNDO);
    /// IPC_NOWAIT: fail with EAGAIN instead of waiting.
    // IPC_NOWAIT (0o4000) fits in sem_flg's i16.
    pub const NOWAIT: SemFlags = SemFlags(IPC_NOWAIT as i16);

    /// The `sem_flg` bits.
    pub const fn bits(self) -> i16 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: SemFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for SemFlags {
    type Output = SemFlags;
    fn bitor(self, rhs: SemFlags) -> SemFlags {
        SemFlags(self.0 | rhs.0)
    }
}

/// One semaphore operation (`struct sembuf`): add `delta` to semaphore
/// `num` (waiting while that would make it negative), or, with a delta of
/// 0, wait until it is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SemOp {
    /// The semaphore's index in the set (`sem_num`).
    pub num: u16,
    /// What to add to it (`sem_op`); 0 waits for zero.
    pub delta: i16,
    pub flags: SemFlags,
}

impl SemOp {
    /// Adds `delta` to semaphore `num`, no flag.
    pub const fn new(num: u16, delta: i16) -> SemOp {
        SemOp {
            num,
            delta,
            flags: SemFlags::NONE,
        }
    }

    /// V, post, signal: adds 1 to semaphore `num`.
    pub const fn post(num: u16) -> SemOp {
        SemOp::new(num, 1)
    }

    /// P, wait: takes 1 from semaphore `num`, waiting while it is 0.
    pub const fn wait(num: u16) -> SemOp {
        SemOp::new(num, -1)
    }

    /// Waits until semaphore `num` is 0.
    pub const fn zero(num: u16) -> SemOp {
        SemOp::new(num, 0)
    }

    /// The same operation with SEM_UNDO.
    pub const fn undo(self) -> SemOp {
        self.with(SemFlags::UNDO)
    }

    /// The same operation with IPC_NOWAIT.
    pub const fn nowait(self) -> SemOp {
        self.with(SemFlags::NOWAIT)
    }

    /// The same operation with `flags` added.
    pub const fn with(self, flags: SemFlags) -> SemOp {
        SemOp {
            flags: SemFlags(self.flags.0 | flags.0),
            ..self
        }
    }

    fn sembuf(self) -> sembuf {
        sembuf {
            sem_num: self.num,
            sem_op: self.delta,
            sem_flg: self.flags.0,
        }
    }
}

/// What IPC_STAT tells of a set (`struct semid64_ds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemStat {
    pub perm: Perm,
    /// How many semaphores it has.
    pub nsems: u64,
    /// The last semop, in seconds since the epoch (0: never).
    pub otime: i64,
    /// The last change (creation, IPC_SET, SETVAL, SETALL).
    pub ctime: i64,
}

/// A semaphore set of a namespace.
///
/// ```
/// # fn main() -> ipcns::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("ipcns-doc-sem-{}", std::process::id()));
/// # let ns = ipcns::Namespace::create_at(&dir, ipcns::CreateOptions::default())?;
/// use ipcns::{Errno, SemOp, SemSet};
///
/// let set = SemSet::private(&ns, 1, 0o600)?;
/// set.op(SemOp::post(0))?;
/// set.op(SemOp::wait(0))?;
/// // Empty again: a wait that may not sleep fails.
/// let e = set.op(SemOp::wait(0).nowait()).unwrap_err();
/// assert_eq!(e.errno(), Some(Errno::EAGAIN));
/// # set.remove()?;
/// # drop(ns);
/// # ipcns::Namespace::remove_at(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct SemSet<'ns> {
    ns: &'ns Namespace,
    id: i32,
}

impl core::fmt::Debug for SemSet<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SemSet")
            .field("ns", &self.ns.name())
            .field("id", &self.id)
            .finish()
    }
}

impl<'ns> SemSet<'ns> {
    fn obtain(
        ns: &'ns Namespace,
        key: i32,
        nsems: u16,
        how: Get,
        mode: u32,
    ) -> Result<SemSet<'ns>> {
        let id = ns.semget(&*cred(ns)?, key, i32::from(nsems), how.flags(mode))?;
        Ok(SemSet { ns, id })
    }

    /// A new set of `nsems` semaphores (all 0) under `key`, with
    /// permission bits `mode` (`0o600`): `semget(key, nsems, IPC_CREAT |
    /// IPC_EXCL | mode)`. EEXIST if the key has a set.
    pub fn create(ns: &'ns Namespace, key: i32, nsems: u16, mode: u32) -> Result<SemSet<'ns>> {
        SemSet::obtain(ns, key, nsems, Get::Create, mode)
    }

    /// The set under `key`: `semget(key, 0, 0)`. ENOENT if none, EACCES
    /// if the caller may not read or alter it.
    pub fn open(ns: &'ns Namespace, key: i32) -> Result<SemSet<'ns>> {
        SemSet::obtain(ns, key, 0, Get::Open, 0)
    }

    /// The set under `key`, made as [`SemSet::create`] makes it if there
    /// is none: `semget(key, nsems, IPC_CREAT | mode)`. EINVAL if the set
    /// found has fewer than `nsems` semaphores.
    pub fn open_or_create(
        ns: &'ns Namespace,
        key: i32,
        nsems: u16,
        mode: u32,
    ) -> Result<SemSet<'ns>> {
        SemSet::obtain(ns, key, nsems, Get::OpenOrCreate, mode)
    }

    /// A new set no key finds: `semget(IPC_PRIVATE, nsems, mode)`.
    pub fn private(ns: &'ns Namespace, nsems: u16, mode: u32) -> Result<SemSet<'ns>> {
        SemSet::obtain(ns, PRIVATE, nsems, Get::Create, mode)
    }

    /// The set with id `id` (as another process's `semget` returned it),
    /// unchecked: a wrong id fails the first call (EINVAL).
    pub fn from_id(ns: &'ns Namespace, id: i32) -> SemSet<'ns> {
        SemSet { ns, id }
    }

    /// The set's id (`semid`).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The namespace it is in.
    pub fn namespace(&self) -> &'ns Namespace {
        self.ns
    }

    fn ctl(&self, num: u16, cmd: i32, arg: SemArg<'_>) -> Result<i32> {
        let me = cred(self.ns)?;
        Ok(self.ns.semctl(&me, self.id, i32::from(num), cmd, arg)?)
    }

    /// A count or a value `semctl` returned, which the kernel's types keep
    /// in range: out of it only in a corrupt arena.
    fn count<T: TryFrom<i32>>(v: i32) -> Result<T> {
        T::try_from(v).map_err(|_| Errno::EUCLEAN.into())
    }

    /// Semaphore `num`'s value: `semctl(id, num, GETVAL)`. EINVAL if
    /// `num` is not in the set.
    pub fn get(&self, num: u16) -> Result<u16> {
        SemSet::count(self.ctl(num, GETVAL, SemArg::None)?)
    }

    /// Sets semaphore `num` to `value`, waking the callers that can now
    /// proceed and clearing every process's SEM_UNDO adjustment of it:
    /// `semctl(id, num, SETVAL, value)`. ERANGE above SEMVMX (32767).
    pub fn set(&self, num: u16, value: u16) -> Result<()> {
        self.ctl(num, SETVAL, SemArg::Val(i32::from(value)))?;
        Ok(())
    }

    /// Every semaphore's value: `semctl(id, 0, GETALL, values)`.
    pub fn values(&self) -> Result<Vec<u16>> {
        let n = usize::try_from(self.stat()?.nsems).map_err(|_| Errno::EUCLEAN)?;
        let mut vals = vec![0u16; n];
        self.ctl(0, GETALL, SemArg::Array(&mut vals))?;
        Ok(vals)
    }

    /// Sets every semaphore, as [`SemSet::set`] sets one: `semctl(id, 0,
    /// SETALL, values)`. Values beyond the set's size are not read; fewer
    /// than its size is EFAULT (the kernel's copy from the caller's array
    /// running past its end).
    pub fn set_values(&self, values: &[u16]) -> Result<()> {
        let mut vals = values.to_vec();
        self.ctl(0, SETALL, SemArg::Array(&mut vals))?;
        Ok(())
    }

    /// The process that last operated on semaphore `num` (`sempid`):
    /// `semctl(id, num, GETPID)`.
    pub fn last_pid(&self, num: u16) -> Result<i32> {
        self.ctl(num, GETPID, SemArg::None)
    }

    /// How many callers wait for an increase of semaphore `num` (to take
    /// more than it holds): `semctl(id, num, GETNCNT)`.
    pub fn waiting_for_increase(&self, num: u16) -> Result<u32> {
        SemSet::count(self.ctl(num, GETNCNT, SemArg::None)?)
    }

    /// How many callers wait for semaphore `num` to be zero: `semctl(id,
    /// num, GETZCNT)`.
    pub fn waiting_for_zero(&self, num: u16) -> Result<u32> {
        SemSet::count(self.ctl(num, GETZCNT, SemArg::None)?)
    }

    /// One operation, as [`SemSet::ops`].
    pub fn op(&self, op: SemOp) -> Result<()> {
        self.ops(&[op])
    }

    /// Performs `ops` all at once or not at all, waiting without limit
    /// until all can proceed (unless one has [`SemFlags::NOWAIT`]: EAGAIN):
    /// `semop(id, ops, ops.len())`. EIDRM if the set is removed while the
    /// caller waits, EINTR if a signal handler that says so runs
    /// (`ipcns::note_signal`, which libipcns.so's handler wrappers call),
    /// EFBIG for a `num` outside the set, E2BIG for more than SEMOPM (500)
    /// operations.
    pub fn ops(&self, ops: &[SemOp]) -> Result<()> {
        self.timed(ops, None)
    }

    /// [`SemSet::ops`], waiting at most `timeout`: EAGAIN when it expires
    /// (`semtimedop(id, ops, ops.len(), timeout)`).
    pub fn ops_timeout(&self, ops: &[SemOp], timeout: Duration) -> Result<()> {
        // A timeout past what a timespec holds waits as long as one can.
        let ts = libc::timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        self.timed(ops, Some(&ts))
    }

    fn timed(&self, ops: &[SemOp], ts: Option<&libc::timespec>) -> Result<()> {
        let me = cred(self.ns)?;
        let mut inline = [sembuf::default(); INLINE_OPS];
        let heap: Vec<sembuf>;
        let sops: &[sembuf] = match inline.get_mut(..ops.len()) {
            Some(s) => {
                for (b, o) in s.iter_mut().zip(ops) {
                    *b = o.sembuf();
                }
                s
            }
            None => {
                heap = ops.iter().map(|o| o.sembuf()).collect();
                &heap
            }
        };
        self.ns.semtimedop(&me, self.id, sops, ts)?;
        Ok(())
    }

    /// The set's owner, permissions, size and times: `semctl(id, 0,
    /// IPC_STAT)`. EACCES without read permission.
    pub fn stat(&self) -> Result<SemStat> {
        let mut ds = semid64_ds::default();
        self.ctl(0, IPC_STAT, SemArg::Ds(&mut ds))?;
        Ok(SemStat {
            perm: Perm::from(&ds.sem_perm),
            nsems: ds.sem_nsems,
            otime: ds.sem_otime,
            ctime: ds.sem_ctime,
        })
    }

    /// Removes the set (`semctl(id, 0, IPC_RMID)`): its waiters fail with
    /// EIDRM, its key is free at once. EPERM unless the caller owns or
    /// created it (or has CAP_SYS_ADMIN).
    pub fn remove(self) -> Result<()> {
        self.ctl(0, IPC_RMID, SemArg::None)?;
        Ok(())
    }
}
