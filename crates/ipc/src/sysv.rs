//! One interface over System V IPC implementations: an ipcns namespace
//! with a caller's credentials ([`NsCaller`]) and, in the test oracle, the
//! host kernel (`ipcns_oracle::Host`, system calls). The ipcs family, the
//! differential tests and the benchmarks drive both through it.

use crate::Mech;
use crate::abi::{
    msginfo, msqid64_ds, sembuf, semid64_ds, seminfo, shm_info, shmid64_ds, shminfo64,
};
use crate::msg::MsgArg;
use crate::sem::SemArg;
use crate::shm::ShmArg;
use crate::{Cred, Namespace, SysResult};

/// The operations, as `semget(2)` and friends.
pub trait SysV {
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> SysResult<i32>;
    fn semctl(&self, id: i32, semnum: i32, cmd: i32, arg: SemArg<'_>) -> SysResult<i32>;
    /// `semtimedop(semid, sops, nsops, timeout)`: `nsops` is the slice's
    /// length; no timeout (None) waits without limit.
    fn semtimedop(
        &self,
        id: i32,
        sops: &[sembuf],
        timeout: Option<&libc::timespec>,
    ) -> SysResult<i32>;
    /// `semop(semid, sops, nsops)`: `semtimedop` without a timeout (glibc's
    /// `semop()` reaches the kernel that way too).
    fn semop(&self, id: i32, sops: &[sembuf]) -> SysResult<i32> {
        self.semtimedop(id, sops, None)
    }
    fn msgget(&self, key: i32, flg: i32) -> SysResult<i32>;
    fn msgctl(&self, id: i32, cmd: i32, arg: MsgArg<'_>) -> SysResult<i32>;
    /// `msgsnd(msqid, msgp, msgsz, msgflg)` with `msgp` = `{ mtype, text }`.
    fn msgsnd(&self, id: i32, mtype: i64, text: &[u8], flg: i32) -> SysResult<i32>;
    /// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)` with `msgsz` =
    /// `buf.len()`: the type received and the bytes copied into `buf`.
    fn msgrcv(&self, id: i32, buf: &mut [u8], msgtyp: i64, flg: i32) -> SysResult<(i64, usize)>;
    fn shmget(&self, key: i32, size: u64, flg: i32) -> SysResult<i32>;
    fn shmctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32>;
    /// `shmat(shmid, NULL, shmflg)`: the segment attached where the system
    /// chooses (so no mapping is ever replaced); its address.
    fn shmat(&self, id: i32, flg: i32) -> SysResult<usize>;
    /// `shmdt(shmaddr)`: detaches the attachment that starts at `shmaddr`.
    /// Nothing may still point into it (the memory goes away).
    fn shmdt(&self, addr: usize) -> SysResult<i32>;
    /// The text of /proc/sysvipc/{sem,msg,shm}.
    fn proc_text(&self, m: Mech) -> SysResult<String>;
    /// /proc/sys/kernel/NAME.
    fn sysctl_read(&self, name: &str) -> SysResult<String>;
    fn sysctl_write(&self, name: &str, text: &str) -> SysResult<()>;
}

/// A namespace seen by one caller.
pub struct NsCaller<'a> {
    pub ns: &'a Namespace,
    pub cred: Cred,
}

impl SysV for NsCaller<'_> {
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> SysResult<i32> {
        self.ns.semget(&self.cred, key, nsems, flg)
    }
    fn semctl(&self, id: i32, semnum: i32, cmd: i32, arg: SemArg<'_>) -> SysResult<i32> {
        self.ns.semctl(&self.cred, id, semnum, cmd, arg)
    }
    fn semtimedop(
        &self,
        id: i32,
        sops: &[sembuf],
        timeout: Option<&libc::timespec>,
    ) -> SysResult<i32> {
        self.ns.semtimedop(&self.cred, id, sops, timeout)
    }
    fn msgget(&self, key: i32, flg: i32) -> SysResult<i32> {
        self.ns.msgget(&self.cred, key, flg)
    }
    fn msgctl(&self, id: i32, cmd: i32, arg: MsgArg<'_>) -> SysResult<i32> {
        self.ns.msgctl(&self.cred, id, cmd, arg)
    }
    fn msgsnd(&self, id: i32, mtype: i64, text: &[u8], flg: i32) -> SysResult<i32> {
        self.ns.msgsnd(&self.cred, id, mtype, text, flg)
    }
    fn msgrcv(&self, id: i32, buf: &mut [u8], msgtyp: i64, flg: i32) -> SysResult<(i64, usize)> {
        self.ns.msgrcv(&self.cred, id, buf, msgtyp, flg)
    }
    fn shmget(&self, key: i32, size: u64, flg: i32) -> SysResult<i32> {
        self.ns.shmget(&self.cred, key, size, flg)
    }
    fn shmctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        self.ns.shmctl(&self.cred, id, cmd, arg)
    }
    fn shmat(&self, id: i32, flg: i32) -> SysResult<usize> {
        self.ns.shmat(&self.cred, id, 0, flg)
    }
    fn shmdt(&self, addr: usize) -> SysResult<i32> {
        self.ns.shmdt(&self.cred, addr)
    }
    fn proc_text(&self, m: Mech) -> SysResult<String> {
        self.ns.proc_text(&self.cred, m)
    }
    fn sysctl_read(&self, name: &str) -> SysResult<String> {
        self.ns.sysctl_read(name)
    }
    fn sysctl_write(&self, name: &str, text: &str) -> SysResult<()> {
        self.ns.sysctl_write(&self.cred, name, text)
    }
}

/// Helpers for callers that want one structure back.
pub fn sem_stat(s: &dyn SysV, id: i32, cmd: i32) -> SysResult<(i32, semid64_ds)> {
    let mut ds = semid64_ds::default();
    let r = s.semctl(id, 0, cmd, SemArg::Ds(&mut ds))?;
    Ok((r, ds))
}

pub fn sem_info(s: &dyn SysV, cmd: i32) -> SysResult<(i32, seminfo)> {
    let mut i = seminfo::default();
    let r = s.semctl(0, 0, cmd, SemArg::Info(&mut i))?;
    Ok((r, i))
}

pub fn msg_stat(s: &dyn SysV, id: i32, cmd: i32) -> SysResult<(i32, msqid64_ds)> {
    let mut ds = msqid64_ds::default();
    let r = s.msgctl(id, cmd, MsgArg::Ds(&mut ds))?;
    Ok((r, ds))
}

pub fn msg_info(s: &dyn SysV, cmd: i32) -> SysResult<(i32, msginfo)> {
    let mut i = msginfo::default();
    let r = s.msgctl(0, cmd, MsgArg::Info(&mut i))?;
    Ok((r, i))
}

pub fn shm_stat(s: &dyn SysV, id: i32, cmd: i32) -> SysResult<(i32, shmid64_ds)> {
    let mut ds = shmid64_ds::default();
    let r = s.shmctl(id, cmd, ShmArg::Ds(&mut ds))?;
    Ok((r, ds))
}

pub fn shm_ipc_info(s: &dyn SysV) -> SysResult<(i32, shminfo64)> {
    let mut i = shminfo64::default();
    let r = s.shmctl(0, crate::abi::IPC_INFO, ShmArg::Info(&mut i))?;
    Ok((r, i))
}

pub fn shm_shm_info(s: &dyn SysV) -> SysResult<(i32, shm_info)> {
    let mut i = shm_info::default();
    let r = s.shmctl(0, crate::abi::SHM_INFO, ShmArg::ShmInfo(&mut i))?;
    Ok((r, i))
}
