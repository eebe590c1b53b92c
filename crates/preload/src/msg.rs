//! msgget, msgsnd, msgrcv and msgctl as the system calls take them, with
//! the caller's `struct msgbuf` (`long mtype; char mtext[]`) read and
//! written where, and in the order, ipc/msg.c does.

use crate::cred::with_caller;
use crate::state::namespace;
use crate::user;
use ipcns_core::abi;
use ipcns_core::intr::Mark;
use ipcns_core::usercopy;
use ipcns_core::{Errno, Namespace, SysResult};

/// Bytes of `mtype` before `mtext`.
const MTYPE: usize = 8;

/// `msgget(key, msgflg)`. ipc/msg.c `ksys_msgget`.
pub fn msgget(key: i32, msgflg: i32) -> SysResult<i64> {
    let ns = namespace()?;
    with_caller(ns, |c| ns.msgget(c, key, msgflg)).map(i64::from)
}

/// `msgsnd(msqid, msgp, msgsz, msgflg)`.
///
/// ipc/msg.c `ksys_msgsnd`: "if (get_user(mtype, &msgp->mtype)) return
/// -EFAULT;"; `do_msgsnd`: "if (msgsz > ns->msg_ctlmax || (long) msgsz < 0
/// || msqid < 0) return -EINVAL; if (mtype < 1) return -EINVAL;", then
/// `load_msg(mtext, msgsz)` (EFAULT), then the queue, whose checks the
/// core makes in that order. When the whole `msgbuf` can be read in place
/// (on the stack or in the program's image), or a short one (up to 64
/// bytes of text) was copied whole by the copy that may fault (the heap,
/// a library's data), no copy can fail, so the core's checks alone give
/// the kernel's answer.
#[inline(always)]
pub fn msgsnd(msqid: i32, msgp: usize, msgsz: usize, msgflg: i32) -> SysResult<i64> {
    // The program's call starts here (see `sem::semtimedop`).
    let mark = Mark::now();
    let ns = namespace()?;
    if let Some(len) = msgsz.checked_add(MTYPE)
        && let Some(r) = user::with_short(msgp, len, |b| {
            let (m, text) = b.split_at(MTYPE.min(b.len()));
            let mtype = i64::from_ne_bytes(m.try_into().map_err(|_| Errno::EFAULT)?);
            with_caller(ns, |c| ns.msgsnd_since(mark, c, msqid, mtype, text, msgflg))
        })
    {
        return r.map(i64::from);
    }
    msgsnd_copied(mark, ns, msqid, msgp, msgsz, msgflg)
}

/// [`msgsnd`] with the caller's `msgbuf` copied in, in the kernel's order.
#[inline(never)]
fn msgsnd_copied(
    mark: Mark,
    ns: &Namespace,
    msqid: i32,
    msgp: usize,
    msgsz: usize,
    msgflg: i32,
) -> SysResult<i64> {
    let mut m = [0u8; MTYPE];
    user::read(msgp, &mut m)?;
    let mtype = i64::from_ne_bytes(m);
    if msgsz > ns.msgmax().max(0) as usize || (msgsz as isize) < 0 || msqid < 0 {
        return Err(Errno::EINVAL);
    }
    if mtype < 1 {
        return Err(Errno::EINVAL);
    }
    let text = msgp.checked_add(MTYPE).ok_or(Errno::EFAULT)?;
    user::with_bytes(text, msgsz, |text| {
        with_caller(ns, |c| ns.msgsnd_since(mark, c, msqid, mtype, text, msgflg))
    })?
    .map(i64::from)
}

/// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)`: the bytes received.
///
/// ipc/msg.c `do_msgrcv`: "if (msqid < 0 || (long) bufsz < 0) return
/// -EINVAL;"; MSG_COPY's flags checked, then `prepare_copy(buf,
/// min(bufsz, msg_ctlmax))` reads that much of the caller's buffer
/// (EFAULT); the message found, `do_msg_fill` writes `mtype` (EFAULT) then
/// the text (EFAULT). As in the kernel, a message taken off the queue is
/// lost if it cannot be written out.
#[inline(always)]
pub fn msgrcv(msqid: i32, msgp: usize, msgsz: usize, msgtyp: i64, msgflg: i32) -> SysResult<i64> {
    // The program's call starts here (see `sem::semtimedop`).
    let mark = Mark::now();
    let ns = namespace()?;
    if msqid < 0 || (msgsz as isize) < 0 {
        return Err(Errno::EINVAL);
    }
    if msgflg & abi::MSG_COPY != 0 {
        // "if ((msgflg & MSG_EXCEPT) || !(msgflg & IPC_NOWAIT)) return -EINVAL;"
        if msgflg & abi::MSG_EXCEPT != 0 || msgflg & abi::IPC_NOWAIT == 0 {
            return Err(Errno::EINVAL);
        }
        user::check_readable(msgp, msgsz.min(ns.msgmax().max(0) as usize))?;
    }
    let mut recv = user::Recv::new(msgp, msgsz);
    let (mtype, n) = with_caller(ns, |c| {
        ns.msgrcv_into_since(mark, c, msqid, &mut recv, msgtyp, msgflg)
    })?;
    recv.finish(mtype, n)?;
    Ok(n as i64)
}

/// `msgctl(msqid, cmd, buf)`.
///
/// ipc/msg.c `ksys_msgctl`: "if (msqid < 0 || cmd < 0) return -EINVAL;";
/// IPC_SET copies the structure in first (EFAULT); IPC_INFO, MSG_INFO and
/// the STAT commands copy theirs out after success (EFAULT instead of the
/// result). Commands go to the core as they came (see `sem::semctl` on
/// IPC_64).
pub fn msgctl(msqid: i32, cmd: i32, buf: usize) -> SysResult<i64> {
    let ns = namespace()?;
    usercopy::msgctl(&user::Own, msqid, cmd, buf as u64, |a| {
        with_caller(ns, |c| ns.msgctl(c, msqid, cmd, a))
    })
}
