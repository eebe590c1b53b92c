//! `msgsnd` (ipc/msg.c `do_msgsnd`, `pipelined_send`, `ss_add`).
//!
//! # Protocol
//! Checks that need no lock (msqid, size, mtype), the lookup without the
//! registry lock, then in a loop: lock the queue, `ipcperms(S_IWUGO)`,
//! check it is the queue looked up (EIDRM). If the message fits, it goes
//! first to the oldest waiting receiver that wants it (a receiver whose
//! buffer is too small is woken with E2BIG on the way) or, if none, to the
//! tail of the queue. If it does not fit: EAGAIN with IPC_NOWAIT, else a
//! sender record is queued and the caller sleeps with no lock held until a
//! receiver makes room (it then tries again, and may sleep again), the
//! queue is removed (EIDRM) or a signal handler runs (EINTR).
//!
//! Lock state: takes and releases the queue's lock (and the heap lock
//! inside it); nothing held on entry or exit.

use super::MsgKind;
use super::queue::{self, Block, KIND_RECV, KIND_SEND, Step, Wants, Woke};
use crate::abi;
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::object::{Counted, MsgSlot, bump};
use crate::perm::{self, S_IWUGO};
use crate::registry::{lock_object, obtain, still_valid};
use crate::session::Session;
use crate::time::now;
use crate::wait;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// [`Namespace::msgsnd`](crate::Namespace::msgsnd)'s work.
pub(crate) fn msgsnd(
    a: &Session,
    cred: &Cred,
    msqid: i32,
    mtype: i64,
    text: &[u8],
    msgflg: i32,
) -> SysResult<i32> {
    // The call starts: a signal handler noted from now on makes a
    // sleep of this call fail with EINTR.
    msgsnd_since(a, wait::Mark::now(), cred, msqid, mtype, text, msgflg)
}

/// [`Namespace::msgsnd_since`](crate::Namespace::msgsnd_since)'s work.
pub(crate) fn msgsnd_since(
    a: &Session,
    mark: wait::Mark,
    cred: &Cred,
    msqid: i32,
    mtype: i64,
    text: &[u8],
    msgflg: i32,
) -> SysResult<i32> {
    // With IPC_NOWAIT, a lock is waited for NOWAIT_LOCK_NS at most
    // (its holder stopped, or a hostile word): EAGAIN, as a full queue.
    let _bound = crate::lock::bound_for(None, msgflg & abi::IPC_NOWAIT != 0);
    msgsnd_bounded(a, mark, cred, msqid, mtype, text, msgflg).map_err(|e| {
        if e.0 == libc::ETIMEDOUT {
            Errno::EAGAIN
        } else {
            e
        }
    })
}

fn msgsnd_bounded(
    a: &Session,
    mark: wait::Mark,
    cred: &Cred,
    msqid: i32,
    mtype: i64,
    text: &[u8],
    msgflg: i32,
) -> SysResult<i32> {
    let msgmax = a.header().limits.msgmax.load(Relaxed);
    // "if (msgsz > ns->msg_ctlmax || (long) msgsz < 0 || msqid < 0)
    // return -EINVAL;"
    if text.len() > msgmax.max(0) as usize || msqid < 0 {
        return Err(Errno::EINVAL);
    }
    // "if (mtype < 1) return -EINVAL;"
    if mtype < 1 {
        return Err(Errno::EINVAL);
    }
    let size = text.len() as u64;
    let f = obtain::<MsgKind>(a, msqid)?;
    let s = f.slot;
    let mut g = locked!(lock_object::<MsgKind>(a, s));
    loop {
        // "if (ipcperms(ns, &msq->q_perm, S_IWUGO)) goto out_unlock0;" (-EACCES)
        perm::ipcperms(cred, &s.head, S_IWUGO)?;
        // "if (!ipc_valid_object(&msq->q_perm)) { err = -EIDRM; ...}"
        still_valid(&f)?;
        if queue::fits(s, size) {
            break;
        }
        // "if (msgflg & IPC_NOWAIT) { err = -EAGAIN; ...}"
        if msgflg & abi::IPC_NOWAIT != 0 {
            return Err(Errno::EAGAIN);
        }
        // ss_add: queue ourselves and sleep.
        let rec = queue::enqueue(
            a,
            s,
            Wants {
                kind: KIND_SEND,
                size: size as u32,
                mode: 0,
                msgtyp: 0,
            },
        )?;
        // Read under the lock: whether ours is among the records served
        // next (`wait::sleep`).
        let first = wait::among_first(a, &s.waiters, rec, wait::SPINNERS);
        drop(g);
        let woke = queue::sleep(&f, wait::at(a, rec)?, mark, first);
        // The record must be collected whatever the call's deadline.
        g = crate::registry::lock_object_unbounded::<MsgKind>(a, s)?;
        // ss_del, then "if (!ipc_valid_object(&msq->q_perm)) { err =
        // -EIDRM; ...}" and "if (signal_pending(current)) { err =
        // -ERESTARTNOHAND; ...}" (EINTR: a handler ran during the
        // call, even if a receiver made room meanwhile).
        let (done, _, _) = queue::collect(a, s, rec)?;
        still_valid(&f)?;
        if matches!(woke, Woke::Cancelled) {
            continue;
        }
        if !done || matches!(woke, Woke::Interrupted) || mark.interrupted() {
            return Err(Errno::EINTR);
        }
    }
    let r = put(a, s, cred.pid, mtype, text);
    if r.is_err() && s.journal.load(Relaxed) != 0 {
        // Leave nothing half done behind.
        queue::repair(a, s);
    }
    drop(g);
    r.map(|()| 0)
}

/// The message into the queue (it fits): handed to a waiting receiver, or
/// linked at the tail. Queue lock held.
fn put(a: &Session, s: &MsgSlot, pid: i32, mtype: i64, text: &[u8]) -> SysResult<()> {
    let size = text.len() as u64;
    let b = queue::take_block(a, s, size, pid)?;
    b.set_next(0);
    b.write_text(a, text)?;
    b.set_mtype(mtype);
    if s.waiters.load(Relaxed) != 0 && pipelined_send(a, s, &b)? {
        return Ok(());
    }
    // "list_add_tail(&msg->m_list, &msq->q_messages); msq->q_cbytes +=
    // msgsz; msq->q_qnum++;", with "ipc_update_pid(&msq->q_lspid, ...);
    // msq->q_stime = ktime_get_real_seconds();".
    let (cb, qn) = (s.cbytes.load(Relaxed), s.qnum.load(Relaxed));
    s.journal.store(b.off | queue::OP_SEND, Release);
    queue::link_tail(a, s, b.off)?;
    // Saturating: both counts come from the arena, and `fits` lets any
    // count through when a participant made `qbytes` u64::MAX.
    s.cbytes.store(cb.saturating_add(size), Relaxed);
    s.qnum.store(qn.saturating_add(1), Relaxed);
    s.lspid.store(pid, Relaxed);
    s.stime.store(now(), Relaxed);
    bump(s.first_count());
    s.journal.store(0, Release);
    Ok(())
}

/// `pipelined_send`: the oldest waiting receiver whose type and mode
/// match gets the message, unless its buffer is too small: then it is
/// woken with E2BIG and the search goes on. Receivers found dead are
/// dropped. True when a receiver took it.
fn pipelined_send(a: &Session, s: &MsgSlot, b: &Block<'_>) -> SysResult<bool> {
    let (mtype, size) = (b.mtype(), b.size());
    let mut taken = false;
    queue::walk(a, s, |prev, cur, w| {
        if w.msg().kind().load(Relaxed) & 0xff != KIND_RECV {
            return Ok(Step::Next);
        }
        if w.state.load(Acquire) == wait::DONE {
            if queue::uncollected_and_dead(w) {
                queue::drop_record(a, s, prev, cur)?;
                return Ok(Step::Gone);
            }
            return Ok(Step::Next);
        }
        let (mode, msgtyp) = queue::wanted(w);
        if !super::recv::testmsg(mtype, msgtyp, mode) {
            return Ok(Step::Next);
        }
        if !queue::receiver_alive(w) {
            queue::drop_record(a, s, prev, cur)?;
            return Ok(Step::Gone);
        }
        // "if (msr->r_maxsize < msg->m_ts) { ... ERR_PTR(-E2BIG) }"
        if u64::from(w.msg().size().load(Relaxed)) < size {
            queue::finish(w, libc::E2BIG);
            return Ok(Step::Next);
        }
        s.journal_aux.store(cur, Relaxed);
        s.journal.store(b.off | queue::OP_HANDOVER, Release);
        queue::hand_over(s, b, cur, w);
        s.journal.store(0, Release);
        s.journal_aux.store(0, Relaxed);
        taken = true;
        Ok(Step::Stop)
    })?;
    Ok(taken)
}
