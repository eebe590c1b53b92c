//! The host kernel's System V IPC, through raw system calls
//! (`ipcns_sys::sysv`), behind the [`SysV`] interface: the oracle of the
//! differential tests and the baseline of the benchmarks.
//!
//! The last argument of `semctl`, `msgctl` and `shmctl` is one word that
//! the kernel takes as a pointer or as an integer, depending on the
//! command. Here it is a pointer only when the typed argument is the very
//! structure that the command reads or writes; a command given an argument
//! of another kind fails with EFAULT before the kernel is asked, as ipcns
//! fails it. GETALL and SETALL copy `sem_nsems` values, a count the caller
//! cannot know race-free, so they go through a window of the scratch
//! mapping (`scratch`) instead of the caller's slice.
//!
//! # Safety
//! `semtimedop` views the caller's `sembuf` slice as libc's (the same
//! `repr(C)` layout, pinned below), which `ipcns_sys::sysv::semtimedop`
//! hands the kernel with its own length and a borrowed timeout (a
//! `__kernel_timespec`, which `libc::timespec` is on x86-64).
//!
//! `shmat` passes no address (the kernel picks a free range, so no memory
//! of the caller is replaced), and `shmdt` unmaps only a System V
//! attachment, which no Rust reference points into (its callers hold
//! attachments as numbers).
//!
//! The `*ctl` calls get one word (`Word`), which is one of:
//! - a caller's structure, borrowed for the call, of the type the kernel
//!   copies (in or out) for that command on x86-64; the sizes are pinned
//!   below and in `ipcns::abi`;
//! - a scratch window, held for the call: every byte the kernel can reach
//!   from it lies in the scratch mapping (`scratch`'s Safety);
//! - or an integer (0, or SETVAL's value) for a command that reads and
//!   writes no user memory.
#![allow(unsafe_code)]

use crate::scratch::{self, Window};
use crate::sysv::SysV;
use core::marker::PhantomData;
use ipcns::Mech;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Errno, SysResult};
use ipcns_sys::sysv::{self, MsgBuf};

#[cfg(test)]
mod tests;

#[cfg(not(target_arch = "x86_64"))]
compile_error!("kernel::Host hands the kernel x86-64's IPC structures");

// The bytes the x86-64 kernel copies for each structure command
// (`copy_semid_to_user`, `copy_msqid_from_user`, ... with IPC_64;
// `sizeof(struct seminfo)`, `sizeof(struct shm_info)`, ...): Word::buf's
// soundness rests on them.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<semid64_ds>() == 104);
    assert!(size_of::<seminfo>() == 40);
    assert!(size_of::<msqid64_ds>() == 120);
    assert!(size_of::<msginfo>() == 32);
    assert!(size_of::<shmid64_ds>() == 112);
    assert!(size_of::<shminfo64>() == 72);
    assert!(size_of::<shm_info>() == 48);
    // semtimedop's arguments: `struct sembuf` and `struct __kernel_timespec`.
    assert!(size_of::<sembuf>() == 6);
    assert!(size_of::<libc::timespec>() == 16);
    // ipcns's `sembuf` is libc's, field for field.
    assert!(size_of::<libc::sembuf>() == 6);
    assert!(align_of::<sembuf>() == align_of::<libc::sembuf>());
    assert!(core::mem::offset_of!(sembuf, sem_op) == core::mem::offset_of!(libc::sembuf, sem_op));
    assert!(core::mem::offset_of!(sembuf, sem_flg) == core::mem::offset_of!(libc::sembuf, sem_flg));
};

/// The calling process's IPC namespace, as the kernel keeps it.
pub struct Host;

/// The last argument of a `*ctl` system call. Made only by the
/// constructors below, each of which says which commands may receive it;
/// the borrow it carries lasts for the call.
struct Word<'a> {
    raw: usize,
    _borrow: PhantomData<&'a mut ()>,
}

impl<'a> Word<'a> {
    /// An integer: only for a command that reads and writes no user memory.
    fn int(v: usize) -> Word<'a> {
        Word {
            raw: v,
            _borrow: PhantomData,
        }
    }

    /// A caller's structure: only for a command that copies exactly a `T`.
    fn buf<T>(r: &'a mut T) -> Word<'a> {
        Word {
            raw: core::ptr::from_mut(r) as usize,
            _borrow: PhantomData,
        }
    }

    /// A scratch window: for GETALL and SETALL.
    fn window(w: &'a mut Window) -> Word<'a> {
        Word {
            raw: w.addr(),
            _borrow: PhantomData,
        }
    }
}

/// `semctl(semid, semnum, cmd, arg)`: semctl(2); ipc/sem.c `ksys_semctl`.
fn sys_semctl(id: i32, semnum: i32, cmd: i32, arg: Word<'_>) -> SysResult<i32> {
    // SAFETY: a word made for `cmd` (module doc, Word).
    unsafe { sysv::semctl(id, semnum, cmd, arg.raw) }
}

/// `msgctl(msqid, cmd, buf)`: msgctl(2); ipc/msg.c `ksys_msgctl`.
fn sys_msgctl(id: i32, cmd: i32, arg: Word<'_>) -> SysResult<i32> {
    // SAFETY: a word made for `cmd` (module doc, Word).
    unsafe { sysv::msgctl(id, cmd, arg.raw) }
}

/// `shmctl(shmid, cmd, buf)`: shmctl(2); ipc/shm.c `ksys_shmctl`.
fn sys_shmctl(id: i32, cmd: i32, arg: Word<'_>) -> SysResult<i32> {
    // SAFETY: a word made for `cmd` (module doc, Word).
    unsafe { sysv::shmctl(id, cmd, arg.raw) }
}

impl SysV for Host {
    /// `semget(key, nsems, semflg)`: semget(2); ipc/sem.c `ksys_semget`.
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> SysResult<i32> {
        sysv::semget(key, nsems, flg)
    }

    /// `semctl(semid, semnum, cmd, arg)`. The one function that looks
    /// inside [`SemArg`].
    ///
    /// GETALL and SETALL use a window as long as the caller's slice,
    /// filled from it: SETALL reads the set's values there; GETALL
    /// overwrites the first `sem_nsems` and the slice gets the window back,
    /// so values past the set come back unchanged, as from ipcns. A set
    /// longer than the slice runs into the guard: EFAULT (copy_from_user,
    /// copy_to_user in ipc/sem.c `semctl_main`), after the kernel's lookup
    /// and permission checks, and the slice is left as it was.
    fn semctl(&self, id: i32, semnum: i32, cmd: i32, arg: SemArg<'_>) -> SysResult<i32> {
        let word = match (cmd, arg) {
            (IPC_STAT | SEM_STAT | SEM_STAT_ANY | IPC_SET, SemArg::Ds(ds)) => Word::buf(ds),
            (IPC_INFO | SEM_INFO, SemArg::Info(info)) => Word::buf(info),
            (GETALL | SETALL, SemArg::Array(vals)) => {
                // Only memory of known extent can be staged.
                let len = vals.capacity().ok_or(Errno::EFAULT)?;
                let mut w = scratch::window(len)?;
                vals.copy_in(w.values())?;
                let r = sys_semctl(id, semnum, cmd, Word::window(&mut w))?;
                if cmd == GETALL {
                    vals.copy_out(w.values())?;
                }
                return Ok(r);
            }
            // ipcns::sem::SemArg: "A command given an argument of the wrong
            // kind fails with EFAULT, as a bad pointer would."
            (
                IPC_STAT | SEM_STAT | SEM_STAT_ANY | IPC_SET | IPC_INFO | SEM_INFO | GETALL
                | SETALL,
                _,
            ) => return Err(Errno::EFAULT),
            // SETVAL's value is the low 32 bits of the word; ipcns takes
            // None as 0 and fails a structure with EFAULT.
            (SETVAL, SemArg::Val(v)) => Word::int(v as u32 as usize),
            (SETVAL, SemArg::None) => Word::int(0),
            (SETVAL, _) => return Err(Errno::EFAULT),
            // GETVAL, GETPID, GETNCNT, GETZCNT, IPC_RMID and unknown
            // commands read no argument.
            _ => Word::int(0),
        };
        sys_semctl(id, semnum, cmd, word)
    }

    /// `semtimedop(semid, sops, nsops, timeout)`: semop(2); ipc/sem.c
    /// `ksys_semtimedop`, `do_semtimedop`. `nsops` is the slice's length,
    /// truncated as the kernel's `unsigned int` takes it (never more
    /// entries than the slice holds).
    fn semtimedop(
        &self,
        id: i32,
        sops: &[sembuf],
        timeout: Option<&libc::timespec>,
    ) -> SysResult<i32> {
        // SAFETY: ipcns's `sembuf` and libc's are the same `repr(C)`
        // struct of three 16-bit integers (pinned above): the same bytes,
        // borrowed for as long as `sops`.
        let sops = unsafe {
            core::slice::from_raw_parts(sops.as_ptr().cast::<libc::sembuf>(), sops.len())
        };
        sysv::semtimedop(id, sops, timeout)
    }

    /// `msgget(key, msgflg)`: msgget(2); ipc/msg.c `ksys_msgget`.
    fn msgget(&self, key: i32, flg: i32) -> SysResult<i32> {
        sysv::msgget(key, flg)
    }

    /// `msgctl(msqid, cmd, buf)`.
    fn msgctl(&self, id: i32, cmd: i32, arg: MsgArg<'_>) -> SysResult<i32> {
        let word = match (cmd, arg) {
            (IPC_STAT | MSG_STAT | MSG_STAT_ANY | IPC_SET, MsgArg::Ds(ds)) => Word::buf(ds),
            (IPC_INFO | MSG_INFO, MsgArg::Info(info)) => Word::buf(info),
            // ipcns::msg::MsgArg: "the wrong kind is EFAULT".
            (IPC_STAT | MSG_STAT | MSG_STAT_ANY | IPC_SET | IPC_INFO | MSG_INFO, _) => {
                return Err(Errno::EFAULT);
            }
            // IPC_RMID and unknown commands read no argument.
            _ => Word::int(0),
        };
        sys_msgctl(id, cmd, word)
    }

    /// `msgsnd(msqid, msgp, msgsz, msgflg)`: msgop(2); ipc/msg.c
    /// `ksys_msgsnd`. The kernel reads `mtype` and `msgsz` bytes after it.
    fn msgsnd(&self, id: i32, mtype: i64, text: &[u8], flg: i32) -> SysResult<i32> {
        let mut b = MsgBuf::new(text.len());
        b.set_mtype(mtype);
        b.text_mut()[..text.len()].copy_from_slice(text);
        sysv::msgsnd(id, &b, text.len(), flg).map(|()| 0)
    }

    /// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)`: msgop(2); ipc/msg.c
    /// `ksys_msgrcv`. The kernel writes `mtype` and at most `msgsz` bytes
    /// after it (and with MSG_COPY first reads as many).
    fn msgrcv(&self, id: i32, buf: &mut [u8], msgtyp: i64, flg: i32) -> SysResult<(i64, usize)> {
        let mut b = MsgBuf::new(buf.len());
        let r = sysv::msgrcv(id, &mut b, buf.len(), msgtyp, flg)?;
        let n = r.min(buf.len());
        buf[..n].copy_from_slice(&b.text()[..n]);
        Ok((b.mtype(), n))
    }

    /// `shmget(key, size, shmflg)`: shmget(2); ipc/shm.c `ksys_shmget`.
    fn shmget(&self, key: i32, size: u64, flg: i32) -> SysResult<i32> {
        // size_t: the whole u64 on x86-64 (compile_error above otherwise).
        sysv::shmget(key, size as usize, flg)
    }

    /// `shmctl(shmid, cmd, buf)`. IPC_INFO copies a `shminfo64` (with
    /// IPC_64, `copy_shminfo_to_user`), SHM_INFO a `shm_info`.
    fn shmctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        let word = match (cmd, arg) {
            (IPC_STAT | SHM_STAT | SHM_STAT_ANY | IPC_SET, ShmArg::Ds(ds)) => Word::buf(ds),
            (IPC_INFO, ShmArg::Info(info)) => Word::buf(info),
            (SHM_INFO, ShmArg::ShmInfo(info)) => Word::buf(info),
            // ipcns::shm::ShmArg: "the wrong kind is EFAULT".
            (IPC_STAT | SHM_STAT | SHM_STAT_ANY | IPC_SET | IPC_INFO | SHM_INFO, _) => {
                return Err(Errno::EFAULT);
            }
            // SHM_LOCK, SHM_UNLOCK, IPC_RMID and unknown commands read no
            // argument.
            _ => Word::int(0),
        };
        sys_shmctl(id, cmd, word)
    }

    /// `shmat(shmid, NULL, shmflg)`: shmop(2); ipc/shm.c `do_shmat`. With
    /// no address the kernel maps the segment where nothing is mapped
    /// (SHM_REMAP without an address is EINVAL there), so no memory of the
    /// caller changes.
    fn shmat(&self, id: i32, flg: i32) -> SysResult<usize> {
        // SAFETY: a NULL address (see above): no memory of ours changes.
        unsafe { sysv::shmat(id, 0, flg) }
    }

    /// `shmdt(shmaddr)`: shmop(2); ipc/shm.c `ksys_shmdt`. The kernel
    /// unmaps only a System V attachment that starts at `shmaddr`
    /// (EINVAL when there is none), memory that Rust code reaches only
    /// through addresses, as numbers, that the caller holds.
    fn shmdt(&self, addr: usize) -> SysResult<i32> {
        // SAFETY: only a shm attachment can go, which no reference points
        // into (see above).
        unsafe { sysv::shmdt(addr) }
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
    sysv::unshare_ipc()
}
