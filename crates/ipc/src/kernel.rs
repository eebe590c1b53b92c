//! The host kernel's System V IPC, through raw system calls, behind the
//! [`SysV`] interface: the oracle of the differential tests and the
//! baseline of the benchmarks.
//!
//! # Safety
//! Each system call gets either integers or a pointer to a live,
//! correctly sized and aligned buffer owned by the caller for the duration
//! of the call (`SemArg`, `MsgArg`, `ShmArg` borrow them), exactly the
//! structure the kernel reads or writes for that command on x86-64.
#![allow(unsafe_code)]

use crate::arena::layout::Mech;
use crate::errno::{Errno, SysResult};
use crate::msg::MsgArg;
use crate::sem::SemArg;
use crate::shm::ShmArg;
use crate::sysv::SysV;

/// The calling process's IPC namespace, as the kernel keeps it.
pub struct Host;

fn ret(r: libc::c_long) -> SysResult<i32> {
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r as i32)
    }
}

impl SysV for Host {
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> SysResult<i32> {
        // SAFETY: integers only.
        ret(unsafe { libc::syscall(libc::SYS_semget, key, nsems, flg) })
    }

    fn semctl(&self, id: i32, semnum: i32, cmd: i32, arg: SemArg<'_>) -> SysResult<i32> {
        if let SemArg::Array(vals) = arg {
            // The kernel copies nsems values: stage them in a buffer of
            // that size (temporary; see the oracle crate).
            let mut ds = crate::abi::semid64_ds::default();
            self.semctl(id, 0, crate::abi::IPC_STAT, SemArg::Ds(&mut ds))?;
            let mut buf = vec![0u16; ds.sem_nsems as usize];
            if cmd == crate::abi::SETALL {
                vals.copy_in(&mut buf)?;
            }
            // SAFETY: a buffer of nsems values, borrowed for the call.
            let r = ret(unsafe {
                libc::syscall(libc::SYS_semctl, id, semnum, cmd, buf.as_mut_ptr())
            })?;
            if cmd == crate::abi::GETALL {
                vals.copy_out(&buf)?;
            }
            return Ok(r);
        }
        let word: usize = match arg {
            SemArg::None => 0,
            SemArg::Val(v) => v as u32 as usize,
            SemArg::Ds(d) => d as *mut _ as usize,
            SemArg::Info(i) => i as *mut _ as usize,
            SemArg::Array(_) => 0,
        };
        // SAFETY: `word` is an integer or a pointer to a buffer borrowed
        // for this call (module doc).
        ret(unsafe { libc::syscall(libc::SYS_semctl, id, semnum, cmd, word) })
    }

    fn msgget(&self, key: i32, flg: i32) -> SysResult<i32> {
        // SAFETY: integers only.
        ret(unsafe { libc::syscall(libc::SYS_msgget, key, flg) })
    }

    fn msgctl(&self, id: i32, cmd: i32, arg: MsgArg<'_>) -> SysResult<i32> {
        let p: usize = match arg {
            MsgArg::None => 0,
            MsgArg::Ds(d) => d as *mut _ as usize,
            MsgArg::Info(i) => i as *mut _ as usize,
        };
        // SAFETY: as in semctl.
        ret(unsafe { libc::syscall(libc::SYS_msgctl, id, cmd, p) })
    }

    fn shmget(&self, key: i32, size: u64, flg: i32) -> SysResult<i32> {
        // SAFETY: integers only.
        ret(unsafe { libc::syscall(libc::SYS_shmget, key, size, flg) })
    }

    fn shmctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        let p: usize = match arg {
            ShmArg::None => 0,
            ShmArg::Ds(d) => d as *mut _ as usize,
            ShmArg::Info(i) => i as *mut _ as usize,
            ShmArg::ShmInfo(i) => i as *mut _ as usize,
        };
        // SAFETY: as in semctl.
        ret(unsafe { libc::syscall(libc::SYS_shmctl, id, cmd, p) })
    }

    fn proc_text(&self, m: Mech) -> SysResult<String> {
        std::fs::read_to_string(format!("/proc/sysvipc/{}", m.name())).map_err(io_errno)
    }

    fn sysctl_read(&self, name: &str) -> SysResult<String> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).map_err(io_errno)
    }

    fn sysctl_write(&self, name: &str, text: &str) -> SysResult<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/sys/kernel/{name}"))
            .map_err(io_errno)?;
        f.write(text.as_bytes()).map(|_| ()).map_err(io_errno)
    }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno(e.raw_os_error().unwrap_or(libc::EIO))
}

/// `unshare(CLONE_NEWIPC)`: gives the calling (single-threaded) process a
/// fresh IPC namespace.
pub fn unshare_ipc() -> SysResult<()> {
    // SAFETY: a flag-only system call.
    let r = unsafe { libc::unshare(libc::CLONE_NEWIPC) };
    if r == 0 { Ok(()) } else { Err(Errno::last()) }
}
