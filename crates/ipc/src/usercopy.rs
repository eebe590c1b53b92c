//! The `*ctl` calls as the system calls take them, for any caller's
//! memory: `libipcns.so` reads and writes the program's own (with fault
//! handling), `ipcns run`'s supervisor another process's. The structure
//! or value array behind the argument is copied in and out where, and in
//! the order, ipc/*.c copies it, so that EFAULT comes where the kernel
//! gives it; the command itself is the caller's `ctl`, which attaches the
//! credentials and the namespace.
//!
//! ipc/sem.c `ksys_semctl`: "if (semid < 0) return -EINVAL;"; IPC_SET
//! copies the structure in first (`copy_semid_from_user`, EFAULT); the
//! INFO and STAT commands copy theirs out after the command succeeded
//! (EFAULT instead of its result); GETALL and SETALL copy the values at
//! the point `semctl_main` does. ipc/msg.c `ksys_msgctl` and ipc/shm.c
//! `ksys_shmctl` alike ("if (msqid < 0 || cmd < 0) return -EINVAL;").
//! Commands go to the core as they came: on x86-64 and aarch64 the kernel
//! has no `ipc_parse_version`, so a command with IPC_64 (0x100) or-ed in
//! is unknown to it (EINVAL), and glibc passes the caller's command
//! unchanged.

use crate::abi::{self, msginfo, msqid64_ds, semid64_ds, seminfo, shm_info, shmid64_ds, shminfo64};
use crate::errno::{Errno, SysResult};
use crate::msg::MsgArg;
use crate::sem::{SemArg, SemValues};
use crate::shm::ShmArg;
use crate::structs;

/// A caller's memory.
pub trait UserMem {
    /// Fills `buf` from `addr`: EFAULT if any byte cannot be read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> SysResult<()>;
    /// Writes `bytes` at `addr`: EFAULT if any byte cannot be written.
    fn write(&self, addr: u64, bytes: &[u8]) -> SysResult<()>;
}

/// GETALL's and SETALL's `arg.array`: unsigned shorts in the caller's
/// memory, copied when the core knows how many.
struct Values<'m>(&'m dyn UserMem, u64);

impl SemValues for Values<'_> {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        let mut raw = Vec::new();
        raw.try_reserve_exact(into.len() * 2)
            .map_err(|_| Errno::ENOMEM)?;
        raw.resize(into.len() * 2, 0);
        self.0.read(self.1, &mut raw)?;
        for (v, b) in into.iter_mut().zip(raw.chunks_exact(2)) {
            *v = u16::from_ne_bytes([b[0], b[1]]);
        }
        Ok(())
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        let mut raw = Vec::new();
        raw.try_reserve_exact(vals.len() * 2)
            .map_err(|_| Errno::ENOMEM)?;
        for v in vals {
            raw.extend_from_slice(&v.to_ne_bytes());
        }
        self.0.write(self.1, &raw)
    }
}

/// `semctl(semid, semnum, cmd, arg)`, `arg` the `union semun` as the
/// machine word it is passed in (its `val` the low 32 bits, as
/// `ksys_semctl` takes it on a little-endian 64-bit machine); `ctl` makes
/// the command with the argument decoded.
pub fn semctl(
    mem: &dyn UserMem,
    semid: i32,
    cmd: i32,
    arg: u64,
    ctl: impl FnOnce(SemArg<'_>) -> SysResult<i32>,
) -> SysResult<i64> {
    if semid < 0 {
        return Err(Errno::EINVAL);
    }
    let r = match cmd {
        abi::IPC_INFO | abi::SEM_INFO => {
            let mut info = seminfo::default();
            let r = ctl(SemArg::Info(&mut info))?;
            mem.write(arg, &structs::seminfo_out(&info))?;
            r
        }
        abi::IPC_STAT | abi::SEM_STAT | abi::SEM_STAT_ANY => {
            let mut ds = semid64_ds::default();
            let r = ctl(SemArg::Ds(&mut ds))?;
            mem.write(arg, &structs::semid_out(&ds))?;
            r
        }
        abi::IPC_SET => {
            let mut b = [0u8; structs::SEMID_DS];
            mem.read(arg, &mut b)?;
            ctl(SemArg::Ds(&mut structs::semid_in(&b)))?
        }
        abi::GETALL | abi::SETALL => ctl(SemArg::Array(&mut Values(mem, arg)))?,
        abi::SETVAL => ctl(SemArg::Val(arg as u32 as i32))?,
        _ => ctl(SemArg::None)?,
    };
    Ok(i64::from(r))
}

/// `msgctl(msqid, cmd, buf)`; `ctl` makes the command.
pub fn msgctl(
    mem: &dyn UserMem,
    msqid: i32,
    cmd: i32,
    buf: u64,
    ctl: impl FnOnce(MsgArg<'_>) -> SysResult<i32>,
) -> SysResult<i64> {
    if msqid < 0 || cmd < 0 {
        return Err(Errno::EINVAL);
    }
    let r = match cmd {
        abi::IPC_INFO | abi::MSG_INFO => {
            let mut info = msginfo::default();
            let r = ctl(MsgArg::Info(&mut info))?;
            mem.write(buf, &structs::msginfo_out(&info))?;
            r
        }
        abi::IPC_STAT | abi::MSG_STAT | abi::MSG_STAT_ANY => {
            let mut ds = msqid64_ds::default();
            let r = ctl(MsgArg::Ds(&mut ds))?;
            mem.write(buf, &structs::msqid_out(&ds))?;
            r
        }
        abi::IPC_SET => {
            let mut b = [0u8; structs::MSQID_DS];
            mem.read(buf, &mut b)?;
            ctl(MsgArg::Ds(&mut structs::msqid_in(&b)))?
        }
        _ => ctl(MsgArg::None)?,
    };
    Ok(i64::from(r))
}

/// `shmctl(shmid, cmd, buf)`; `ctl` makes the command.
pub fn shmctl(
    mem: &dyn UserMem,
    shmid: i32,
    cmd: i32,
    buf: u64,
    ctl: impl FnOnce(ShmArg<'_>) -> SysResult<i32>,
) -> SysResult<i64> {
    if cmd < 0 || shmid < 0 {
        return Err(Errno::EINVAL);
    }
    let r = match cmd {
        abi::IPC_INFO => {
            let mut info = shminfo64::default();
            let r = ctl(ShmArg::Info(&mut info))?;
            mem.write(buf, &structs::shminfo_out(&info))?;
            r
        }
        abi::SHM_INFO => {
            let mut info = shm_info::default();
            let r = ctl(ShmArg::ShmInfo(&mut info))?;
            mem.write(buf, &structs::shm_info_out(&info))?;
            r
        }
        abi::IPC_STAT | abi::SHM_STAT | abi::SHM_STAT_ANY => {
            let mut ds = shmid64_ds::default();
            let r = ctl(ShmArg::Ds(&mut ds))?;
            mem.write(buf, &structs::shmid_out(&ds))?;
            r
        }
        abi::IPC_SET => {
            let mut b = [0u8; structs::SHMID_DS];
            mem.read(buf, &mut b)?;
            ctl(ShmArg::Ds(&mut structs::shmid_in(&b)))?
        }
        _ => ctl(ShmArg::None)?,
    };
    Ok(i64::from(r))
}
