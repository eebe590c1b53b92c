//! One served call: the twelve System V IPC system calls as x86-64's
//! kernel takes them (their registers, their structures in the caller's
//! memory), made on the namespace for the caller. The caller's memory is
//! copied in and out where, and in the order, ipc/*.c copies it (as
//! `libipcns.so`'s `sem.rs`, `msg.rs` and `shm.rs` do in the program's
//! own memory), so that EFAULT comes where the kernel gives it; the
//! `*ctl` calls' copies are the library's own (`ipcns::usercopy`).

use super::notify::Memory;
use ipcns::abi::{self, sembuf};
use ipcns::intr::Mark;
use ipcns::msg::RecvBuf;
use ipcns::usercopy;
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
        SEMCTL => usercopy::semctl(mem, int(0), int(2), args[3], |a| {
            ns.semctl(cred, int(0), int(1), int(2), a)
        }),
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
        MSGCTL => usercopy::msgctl(mem, int(0), int(1), args[2], |a| {
            ns.msgctl(cred, int(0), int(1), a)
        }),
        SHMGET => ns.shmget(cred, int(0), args[1], int(2)).map(i64::from),
        SHMAT => ns
            .shmat(cred, int(0), args[1] as usize, int(2))
            .map(|a| a as i64),
        SHMDT => ns.shmdt(cred, args[0] as usize).map(i64::from),
        SHMCTL => usercopy::shmctl(mem, int(0), int(1), args[2], |a| {
            ns.shmctl(cred, int(0), int(1), a)
        }),
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
