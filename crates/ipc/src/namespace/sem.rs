//! The public face of the sem mechanism: [`Namespace`]'s methods over `crate::sem`.

use super::Namespace;
use crate::abi::sembuf;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::sem::SemArg;
use crate::wait;

impl Namespace {
    /// `semget(key, nsems, semflg)`.
    ///
    /// ipc/sem.c `ksys_semget`, `newary`, `sem_more_checks`; ipc/util.c
    /// `ipcget_public`.
    #[inline]
    pub fn semget(&self, cred: &Cred, key: i32, nsems: i32, semflg: i32) -> SysResult<i32> {
        crate::sem::semget(&self.session, cred, key, nsems, semflg)
    }

    /// `semctl(semid, semnum, cmd, arg)`.
    ///
    /// ipc/sem.c `ksys_semctl`, `semctl_info`, `semctl_stat`, `semctl_main`,
    /// `semctl_setval`, `semctl_down`.
    #[inline]
    pub fn semctl(
        &self,
        cred: &Cred,
        semid: i32,
        semnum: i32,
        cmd: i32,
        arg: SemArg<'_>,
    ) -> SysResult<i32> {
        crate::sem::semctl(&self.session, cred, semid, semnum, cmd, arg)
    }
    /// `semop(semid, sops, nsops)`: `semtimedop` without a timeout.
    #[inline]
    pub fn semop(&self, cred: &Cred, semid: i32, sops: &[sembuf]) -> SysResult<i32> {
        crate::sem::op::semop(&self.session, cred, semid, sops)
    }

    /// `semtimedop(semid, sops, nsops, timeout)`.
    ///
    /// semop(2); ipc/sem.c `do_semtimedop`. SEM_UNDO operations record
    /// their inverse in the caller's undo entry for the set (`undo.rs`),
    /// applied when the process exits.
    #[inline]
    pub fn semtimedop(
        &self,
        cred: &Cred,
        semid: i32,
        sops: &[sembuf],
        timeout: Option<&libc::timespec>,
    ) -> SysResult<i32> {
        crate::sem::op::semtimedop(&self.session, cred, semid, sops, timeout)
    }

    /// [`Namespace::semtimedop`] for a call that started at `mark` (the
    /// C ABI takes it as the program's call enters, before its own work):
    /// a signal handler noted since then makes its sleep fail with EINTR.
    #[doc(hidden)]
    #[inline]
    pub fn semtimedop_since(
        &self,
        mark: wait::Mark,
        cred: &Cred,
        semid: i32,
        sops: &[sembuf],
        timeout: Option<&libc::timespec>,
    ) -> SysResult<i32> {
        crate::sem::op::semtimedop_since(&self.session, mark, cred, semid, sops, timeout)
    }
}
