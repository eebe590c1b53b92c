//! One served call: the twelve System V IPC system calls as x86-64's
//! kernel takes them (their registers, their structures in the caller's
//! memory), made on the namespace for the caller. The caller's memory is
//! copied in and out where, and in the order, ipc/*.c copies it (as
//! `libipcns.so`'s `sem.rs`, `msg.rs` and `shm.rs` do in the program's
//! own memory), so that EFAULT comes where the kernel gives it.

use super::notify::Memory;
use ipcns::abi::shminfo64;
use ipcns::abi::{self, msginfo, msqid64_ds, sembuf, semid64_ds, seminfo, shm_info, shmid64_ds};
use ipcns::intr::Mark;
use ipcns::msg::{MsgArg, RecvBuf};
use ipcns::sem::{SemArg, SemValues};
use ipcns::shm::ShmArg;
use ipcns::structs;
use ipcns::{Cred, Errno, Namespace, SysResult};

/// x86-64's numbers (asm/unistd_64.h).
pub const SHMGET: i32 = 29;
pub const SHMAT: i32 = 30;
pub const SHMCTL: i32 = 31;
pub const SEMGET: i32 = 64;
pub const SEMOP: i32 = 65;
pub const SEMCTL: i32 = 66;
pub const SHMDT: i32 = 67;
pub const MSGGET: i32 = 68;
pub const MSGSND: i32 = 69;
pub const MSGRCV: i32 = 70;
pub const MSGCTL: i32 = 71;
pub const SEMTIMEDOP: i32 = 220;

/// Whether call `nr` with `args` may sleep: a semop, msgsnd or msgrcv
/// without IPC_NOWAIT (for semop, on any of its operations: they are read
/// later; assumed to).
pub fn may_block(nr: i32, args: &[u64; 6]) -> bool {
    match nr {
        SEMOP | SEMTIMEDOP => true,
        MSGSND => args[3] as i32 & abi::IPC_NOWAIT == 0,
        MSGRCV => args[4] as i32 & abi::IPC_NOWAIT == 0,
        _ => false,
    }
}

/// Call `nr` with `args` made so that it cannot sleep (IPC_NOWAIT on
/// each semaphore operation, or on the message call), and the error it
/// then gives where it would have slept; None for a call that never
/// sleeps. What fails so has done nothing: the call is then made as it
/// came, and may sleep.
pub fn without_sleep(nr: i32, args: &[u64; 6]) -> Option<([u64; 6], Errno)> {
    let mut a = *args;
    let nowait = abi::IPC_NOWAIT as u64;
    match nr {
        SEMOP | SEMTIMEDOP => Some((a, Errno::EAGAIN)),
        MSGSND => {
            a[3] |= nowait;
            Some((a, Errno::EAGAIN))
        }
        // MSG_COPY without IPC_NOWAIT is EINVAL: made as it came.
        MSGRCV if args[4] as i32 & abi::MSG_COPY != 0 => None,
        MSGRCV => {
            a[4] |= nowait;
            Some((a, Errno::ENOMSG))
        }
        _ => None,
    }
}

/// Makes call `nr` with `args` for the caller whose memory is `mem`.
pub fn call(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    mark: Mark,
    nr: i32,
    args: &[u64; 6],
) -> SysResult<i64> {
    call_as(ns, cred, mem, mark, nr, args, false)
}

/// [`call`] with IPC_NOWAIT added to a semop's operations if `nowait`.
pub fn call_as(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    mark: Mark,
    nr: i32,
    args: &[u64; 6],
    nowait: bool,
) -> SysResult<i64> {
    // The kernel's argument types: int, size_t, long, unsigned int.
    let int = |i: usize| args[i] as i32;
    match nr {
        SEMGET => ns.semget(cred, int(0), int(1), int(2)).map(i64::from),
        SEMOP => semtimedop(
            ns,
            cred,
            mem,
            mark,
            (int(0), args[1], args[2] as u32, 0),
            nowait,
        ),
        SEMTIMEDOP => semtimedop(
            ns,
            cred,
            mem,
            mark,
            (int(0), args[1], args[2] as u32, args[3]),
            nowait,
        ),
        SEMCTL => semctl(ns, cred, mem, int(0), int(1), int(2), args[3]),
        MSGGET => ns.msgget(cred, int(0), int(1)).map(i64::from),
        MSGSND => msgsnd(
            ns,
            cred,
            mem,
            mark,
            int(0),
            args[1],
            args[2] as usize,
            int(3),
        ),
        MSGRCV => msgrcv(
            ns,
            cred,
            mem,
            mark,
            int(0),
            args[1],
            args[2] as usize,
            args[3] as i64,
            int(4),
        ),
        MSGCTL => msgctl(ns, cred, mem, int(0), int(1), args[2]),
        SHMGET => ns.shmget(cred, int(0), args[1], int(2)).map(i64::from),
        SHMAT => ns
            .shmat(cred, int(0), args[1] as usize, int(2))
            .map(|a| a as i64),
        SHMDT => ns.shmdt(cred, args[0] as usize).map(i64::from),
        SHMCTL => shmctl(ns, cred, mem, int(0), int(1), args[2]),
        _ => Err(Errno::ENOSYS),
    }
}

/// ipc/sem.c `ksys_semtimedop`: the timeout copied in first (EFAULT);
/// `do_semtimedop`: E2BIG past semopm, EINVAL below 1, the operations
/// copied in (EFAULT), then the core.
fn semtimedop(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    mark: Mark,
    (semid, sops, nsops, timeout): (i32, u64, u32, u64),
    nowait: bool,
) -> SysResult<i64> {
    let ts = if timeout == 0 {
        None
    } else {
        let mut b = [0u8; 16];
        mem.read(timeout, &mut b)?;
        let (s, n) = b.split_at(8);
        Some(libc::timespec {
            tv_sec: i64::from_ne_bytes(s.try_into().map_err(|_| Errno::EFAULT)?),
            tv_nsec: i64::from_ne_bytes(n.try_into().map_err(|_| Errno::EFAULT)?),
        })
    };
    // An unsigned compare: a negative semopm sets no limit.
    if u64::from(nsops) > u64::from(ns.semopm() as u32) {
        return Err(Errno::E2BIG);
    }
    if nsops < 1 {
        return Err(Errno::EINVAL);
    }
    let raw = mem.read_vec(sops, nsops as usize * 6)?;
    let ops: Vec<sembuf> = raw
        .chunks_exact(6)
        .map(|b| sembuf {
            sem_num: u16::from_ne_bytes([b[0], b[1]]),
            sem_op: i16::from_ne_bytes([b[2], b[3]]),
            sem_flg: i16::from_ne_bytes([b[4], b[5]])
                | if nowait { abi::IPC_NOWAIT as i16 } else { 0 },
        })
        .collect();
    ns.semtimedop_since(mark, cred, semid, &ops, ts.as_ref())
        .map(i64::from)
}

/// GETALL's and SETALL's `arg.array` in the caller's memory.
struct Array<'m>(&'m Memory, u64);

impl SemValues for Array<'_> {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        let raw = self.0.read_vec(self.1, into.len() * 2)?;
        for (v, b) in into.iter_mut().zip(raw.chunks_exact(2)) {
            *v = u16::from_ne_bytes([b[0], b[1]]);
        }
        Ok(())
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        let raw: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
        self.0.write(self.1, &raw)
    }
}

/// ipc/sem.c `ksys_semctl` (see libipcns.so's `sem::semctl`).
fn semctl(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    semid: i32,
    semnum: i32,
    cmd: i32,
    arg: u64,
) -> SysResult<i64> {
    if semid < 0 {
        return Err(Errno::EINVAL);
    }
    let ctl = |a: SemArg<'_>| ns.semctl(cred, semid, semnum, cmd, a);
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
        abi::GETALL | abi::SETALL => ctl(SemArg::Array(&mut Array(mem, arg)))?,
        abi::SETVAL => ctl(SemArg::Val(arg as u32 as i32))?,
        _ => ctl(SemArg::None)?,
    };
    Ok(i64::from(r))
}

/// Bytes of `mtype` before `mtext`.
const MTYPE: u64 = 8;

/// ipc/msg.c `ksys_msgsnd`/`do_msgsnd`: mtype read first (EFAULT); EINVAL
/// for a size past msgmax, a negative one, a negative id, an mtype below
/// 1; the text read (EFAULT); then the queue.
#[allow(clippy::too_many_arguments)]
fn msgsnd(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    mark: Mark,
    msqid: i32,
    msgp: u64,
    msgsz: usize,
    msgflg: i32,
) -> SysResult<i64> {
    let mut m = [0u8; MTYPE as usize];
    mem.read(msgp, &mut m)?;
    let mtype = i64::from_ne_bytes(m);
    if msgsz > ns.msgmax().max(0) as usize || (msgsz as isize) < 0 || msqid < 0 {
        return Err(Errno::EINVAL);
    }
    if mtype < 1 {
        return Err(Errno::EINVAL);
    }
    let text = mem.read_vec(msgp.checked_add(MTYPE).ok_or(Errno::EFAULT)?, msgsz)?;
    ns.msgsnd_since(mark, cred, msqid, mtype, &text, msgflg)
        .map(i64::from)
}

/// The text of a message received, here until it is written out.
struct Received {
    cap: usize,
    text: Vec<u8>,
}

impl RecvBuf for Received {
    fn cap(&self) -> usize {
        self.cap
    }
    fn room(&mut self, n: usize) -> SysResult<&mut [u8]> {
        self.text.clear();
        self.text.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        self.text.resize(n, 0);
        Ok(&mut self.text)
    }
}

/// ipc/msg.c `do_msgrcv`: EINVAL for a negative id or size; MSG_COPY's
/// flags checked and its buffer read (`prepare_copy`, EFAULT); the
/// message found, `do_msg_fill` writes `mtype` then the text (EFAULT): as
/// in the kernel, a message taken off the queue is lost if it cannot be
/// written out.
#[allow(clippy::too_many_arguments)]
fn msgrcv(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    mark: Mark,
    msqid: i32,
    msgp: u64,
    msgsz: usize,
    msgtyp: i64,
    msgflg: i32,
) -> SysResult<i64> {
    if msqid < 0 || (msgsz as isize) < 0 {
        return Err(Errno::EINVAL);
    }
    let cap = msgsz.min(ns.msgmax().max(0) as usize);
    if msgflg & abi::MSG_COPY != 0 {
        if msgflg & abi::MSG_EXCEPT != 0 || msgflg & abi::IPC_NOWAIT == 0 {
            return Err(Errno::EINVAL);
        }
        mem.read_vec(msgp, cap)?;
    }
    let mut buf = Received {
        cap: msgsz,
        text: Vec::new(),
    };
    let (mtype, n) = ns.msgrcv_into_since(mark, cred, msqid, &mut buf, msgtyp, msgflg)?;
    let text = &buf.text[..n.min(buf.text.len())];
    let written = mem
        .write(msgp, &mtype.to_ne_bytes())
        .and_then(|()| mem.write(msgp.wrapping_add(MTYPE), text));
    if written == Err(Errno::ESRCH) && msgflg & abi::MSG_COPY == 0 {
        // The caller is gone (killed while it slept): the message it was
        // handed goes back on the queue, never lost with it. (A caller
        // killed in the kernel's msgrcv leaves before it is handed one.)
        let _ = ns.msgsnd(cred, msqid, mtype, text, abi::IPC_NOWAIT);
    }
    written?;
    Ok(n as i64)
}

/// ipc/msg.c `ksys_msgctl` (see libipcns.so's `msg::msgctl`).
fn msgctl(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    msqid: i32,
    cmd: i32,
    buf: u64,
) -> SysResult<i64> {
    if msqid < 0 || cmd < 0 {
        return Err(Errno::EINVAL);
    }
    let ctl = |a: MsgArg<'_>| ns.msgctl(cred, msqid, cmd, a);
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

/// ipc/shm.c `ksys_shmctl` (see libipcns.so's `shm::shmctl`).
fn shmctl(
    ns: &Namespace,
    cred: &Cred,
    mem: &Memory,
    shmid: i32,
    cmd: i32,
    buf: u64,
) -> SysResult<i64> {
    if cmd < 0 || shmid < 0 {
        return Err(Errno::EINVAL);
    }
    let ctl = |a: ShmArg<'_>| ns.shmctl(cred, shmid, cmd, a);
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
