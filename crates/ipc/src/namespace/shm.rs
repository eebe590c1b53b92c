//! The public face of the shm mechanism: [`Namespace`]'s methods over `crate::shm`.
//! Also the addresses that live [`Attachment`](crate::Attachment) guards
//! hold, which [`Namespace::shmdt`] refuses: kept here, beside the check,
//! so that the namespace does not reach up into the typed handles; the
//! guards (`handles/shm.rs`) hold and release their addresses here.

use super::Namespace;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::shm::ShmArg;
use core::sync::atomic::Ordering::Relaxed;

impl Namespace {
    /// `shmget(key, size, shmflg)`.
    ///
    /// ipc/shm.c `ksys_shmget`, `newseg`, `shm_more_checks`; ipc/util.c
    /// `ipcget_public`.
    #[inline]
    pub fn shmget(&self, cred: &Cred, key: i32, size: u64, shmflg: i32) -> SysResult<i32> {
        crate::shm::shmget(&self.session, cred, key, size, shmflg)
    }

    /// `shmctl(shmid, cmd, buf)`.
    ///
    /// ipc/shm.c `ksys_shmctl`, `shmctl_ipc_info`, `shmctl_shm_info`,
    /// `shmctl_stat`, `shmctl_down`, `shmctl_do_lock`.
    #[inline]
    pub fn shmctl(&self, cred: &Cred, shmid: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        crate::shm::shmctl(&self.session, cred, shmid, cmd, arg)
    }
    /// `shmat(shmid, shmaddr, shmflg)`: maps the segment (MAP_SHARED, at
    /// `shmaddr` or where the system chooses when it is 0) and returns the
    /// address.
    ///
    /// shmop(2); ipc/shm.c `do_shmat`.
    #[inline]
    pub fn shmat(&self, cred: &Cred, shmid: i32, shmaddr: usize, shmflg: i32) -> SysResult<usize> {
        crate::shm::attach::shmat(&self.session, cred, shmid, shmaddr, shmflg)
    }

    /// `shmdt(shmaddr)`: unmaps the attachment that starts at `shmaddr`.
    ///
    /// shmop(2); ipc/shm.c `ksys_shmdt`: EINVAL when no attachment of this
    /// process starts there. Also EINVAL at the address of a live
    /// [`Attachment`](crate::Attachment) guard of this process: only the
    /// guard detaches it, so no slice it lent is left dangling.
    #[inline]
    pub fn shmdt(&self, cred: &Cred, shmaddr: usize) -> SysResult<i32> {
        if held(shmaddr) {
            return Err(crate::errno::Errno::EINVAL);
        }
        crate::shm::attach::shmdt(&self.session, cred, shmaddr)
    }

    /// Whether this process image has attachments (a quick look, for the
    /// wrappers of the memory calls).
    #[doc(hidden)]
    pub fn has_attachments(&self) -> bool {
        crate::shm::attach::has_attachments()
    }

    /// After the program's own `munmap` of `[start, end)` or `mmap` with
    /// MAP_FIXED over it succeeded: attachments it took whole are
    /// detached (Linux's `shm_close`), those it took in part marked so
    /// that shmdt unmaps only their other pieces.
    #[doc(hidden)]
    pub fn unmapped(&self, cred: &Cred, start: usize, end: usize) -> SysResult<()> {
        crate::shm::attach::unmapped(&self.session, cred, start, end)
    }

    /// Before the program's own `mremap(old, old_len, ...)`: the
    /// attachment it moves whole, for [`Namespace::mremapped`].
    #[doc(hidden)]
    pub fn to_mremap(&self, old: usize, old_len: usize) -> Option<usize> {
        crate::shm::attach::to_mremap(old, old_len)
    }

    /// After that `mremap` succeeded, with the new address and length:
    /// shmdt finds a whole attachment at its new address, counted as
    /// before, as on Linux.
    #[doc(hidden)]
    pub fn mremapped(
        &self,
        cred: &Cred,
        whole: Option<usize>,
        old: (usize, usize),
        new: (usize, usize),
    ) -> SysResult<()> {
        crate::shm::attach::mremapped(&self.session, cred, whole, old, new)
    }

    /// `remap_file_pages(start, size, prot, pgoff, flags)` when `start`
    /// is in an attachment this process image mapped: what Linux does with
    /// a SysV mapping (the attachment closed and opened again: EINVAL, the
    /// range unmapped, when the segment is gone or was removed and this
    /// was its last attachment; else the segment's pages from `pgoff`
    /// mapped over the range). `None` for any other address, and for the
    /// arguments the kernel refuses before it looks at the address (`prot`
    /// not 0, a range or `pgoff` that wraps): the kernel's own call
    /// answers those.
    ///
    /// remap_file_pages(2); mm/mmap.c `remap_file_pages`, ipc/shm.c
    /// `shm_close`, `__shm_open`.
    #[doc(hidden)]
    pub fn remap_file_pages(
        &self,
        cred: &Cred,
        start: usize,
        size: usize,
        prot: i32,
        pgoff: usize,
    ) -> SysResult<Option<i32>> {
        let (start, size) = (start & !4095, size & !4095);
        if prot != 0
            || start.checked_add(size).is_none_or(|end| end <= start)
            || pgoff.checked_add(size >> 12).is_none()
        {
            return Ok(None);
        }
        crate::shm::attach::remap(&self.session, cred, start, size, pgoff)
    }
}

/// The addresses of live [`Attachment`](crate::Attachment)s of this
/// process, which [`Namespace::shmdt`] refuses (EINVAL, as for an address
/// where no attachment starts: to the caller none it may detach does).
/// Counted, so that a process with none pays one load per `shmdt`.
static HELD: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
static HELD_COUNT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Holds `addr` for a new guard.
pub(crate) fn hold(addr: usize) {
    let mut v = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    v.push(addr);
    HELD_COUNT.store(v.len(), Relaxed);
}

/// Releases `addr` before its guard detaches it.
pub(crate) fn release(addr: usize) {
    let mut v = HELD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = v.iter().position(|&a| a == addr) {
        v.swap_remove(i);
    }
    HELD_COUNT.store(v.len(), Relaxed);
}

/// Whether a live [`Attachment`](crate::Attachment) holds `addr`.
pub(crate) fn held(addr: usize) -> bool {
    HELD_COUNT.load(Relaxed) != 0
        && HELD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&addr)
}
