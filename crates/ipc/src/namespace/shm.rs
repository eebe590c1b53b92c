//! The public face of the shm mechanism: [`Namespace`]'s methods over `crate::shm`.

use super::Namespace;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::shm::ShmArg;

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
    /// process starts there.
    #[inline]
    pub fn shmdt(&self, cred: &Cred, shmaddr: usize) -> SysResult<i32> {
        crate::shm::attach::shmdt(&self.session, cred, shmaddr)
    }
}
