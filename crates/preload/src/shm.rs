//! shmget, shmat, shmdt and shmctl as the system calls take them.

use crate::cred::with_caller;
use crate::state::namespace;
use crate::user;
use ipcns_core::SysResult;
use ipcns_core::usercopy;

/// `shmget(key, size, shmflg)`. ipc/shm.c `ksys_shmget`.
pub fn shmget(key: i32, size: usize, shmflg: i32) -> SysResult<i64> {
    let ns = namespace()?;
    with_caller(ns, |c| ns.shmget(c, key, size as u64, shmflg)).map(i64::from)
}

/// `shmat(shmid, shmaddr, shmflg)`: the address of the attachment (the
/// system call's return value; glibc's `shmat` returns it as a pointer).
/// ipc/shm.c `do_shmat`.
pub fn shmat(shmid: i32, shmaddr: usize, shmflg: i32) -> SysResult<i64> {
    let ns = namespace()?;
    with_caller(ns, |c| ns.shmat(c, shmid, shmaddr, shmflg)).map(|a| a as i64)
}

/// `shmdt(shmaddr)`. ipc/shm.c `ksys_shmdt`.
pub fn shmdt(shmaddr: usize) -> SysResult<i64> {
    let ns = namespace()?;
    with_caller(ns, |c| ns.shmdt(c, shmaddr)).map(i64::from)
}

/// `remap_file_pages(start, size, prot, pgoff, flags)` on an attachment
/// of this image (what Linux does with a SysV mapping, `Namespace::
/// remap_file_pages`); `None` for any other address or before the
/// namespace is open (the process then has no attachment): the kernel's
/// call answers.
pub fn remap_file_pages(
    start: usize,
    size: usize,
    prot: i32,
    pgoff: usize,
) -> Option<SysResult<i64>> {
    let ns = crate::state::opened()?;
    match with_caller(ns, |c| ns.remap_file_pages(c, start, size, prot, pgoff)) {
        Ok(Some(r)) => Some(Ok(i64::from(r))),
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

/// `shmctl(shmid, cmd, buf)`.
///
/// ipc/shm.c `ksys_shmctl`: "if (cmd < 0 || shmid < 0) return -EINVAL;";
/// IPC_SET copies the structure in first (EFAULT); IPC_INFO, SHM_INFO and
/// the STAT commands copy theirs out after success (EFAULT instead of the
/// result). Commands go to the core as they came (see `sem::semctl` on
/// IPC_64).
pub fn shmctl(shmid: i32, cmd: i32, buf: usize) -> SysResult<i64> {
    let ns = namespace()?;
    usercopy::shmctl(&user::Own, shmid, cmd, buf as u64, |a| {
        with_caller(ns, |c| ns.shmctl(c, shmid, cmd, a))
    })
}
