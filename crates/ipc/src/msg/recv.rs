//! `msgrcv` (ipc/msg.c `do_msgrcv`, `convert_mode`, `testmsg`,
//! `find_msg`, `do_msg_fill`; MSG_COPY's `prepare_copy`, `copy_msg`).
//!
//! # Protocol
//! Checks that need no lock (msqid, MSG_COPY's flags), the lookup without
//! the registry lock, then in a loop: `ipcperms(S_IRUGO)`, lock the queue,
//! check it is the queue looked up (EIDRM), search. Found: E2BIG if too
//! long without MSG_NOERROR; MSG_COPY copies it and leaves it; otherwise
//! it is copied out and taken off the queue (journaled), and blocked
//! senders that now fit are woken. Not found: ENOMSG with IPC_NOWAIT, else
//! a receiver record (type, mode, largest size) is queued and the caller
//! sleeps with no lock held until a sender hands it a message (the
//! record carries the block; the receiver copies it out and recycles it),
//! wakes it with E2BIG, IPC_SET makes it try again, the queue is removed
//! (EIDRM) or a signal handler runs (EINTR).
//!
//! The message reaches the caller's memory in one place, [`deliver`].
//!
//! Lock state: takes and releases the queue's lock (and the heap lock
//! inside it); nothing held on entry or exit.

use super::MsgKind;
use super::queue::{self, Block, KIND_RECV, Wants, Woke};
use crate::abi;
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::object::{Counted, MsgSlot, bump};
use crate::perm::{self, S_IRUGO};
use crate::registry::{lock_object, obtain, still_valid};
use crate::session::Session;
use crate::time::now;
use crate::wait;
use core::sync::atomic::Ordering::{Relaxed, Release};

/// Search modes (`SEARCH_*` of ipc/msg.c).
const SEARCH_ANY: u32 = 1;
const SEARCH_EQUAL: u32 = 2;
const SEARCH_NOTEQUAL: u32 = 3;
const SEARCH_LESSEQUAL: u32 = 4;
const SEARCH_NUMBER: u32 = 5;

/// `convert_mode`: the search mode, and `msgtyp` as the search uses it.
fn convert_mode(msgtyp: i64, msgflg: i32) -> (u32, i64) {
    if msgflg & abi::MSG_COPY != 0 {
        return (SEARCH_NUMBER, msgtyp);
    }
    if msgtyp == 0 {
        return (SEARCH_ANY, msgtyp);
    }
    if msgtyp < 0 {
        // "if (*msgtyp == LONG_MIN) /* -LONG_MIN is undefined */ *msgtyp = LONG_MAX;"
        return (SEARCH_LESSEQUAL, msgtyp.checked_neg().unwrap_or(i64::MAX));
    }
    if msgflg & abi::MSG_EXCEPT != 0 {
        return (SEARCH_NOTEQUAL, msgtyp);
    }
    (SEARCH_EQUAL, msgtyp)
}

/// `testmsg`: whether a message of type `mtype` suits a search.
pub(super) fn testmsg(mtype: i64, msgtyp: i64, mode: u32) -> bool {
    match mode {
        SEARCH_ANY | SEARCH_NUMBER => true,
        SEARCH_LESSEQUAL => mtype <= msgtyp,
        SEARCH_EQUAL => mtype == msgtyp,
        SEARCH_NOTEQUAL => mtype != msgtyp,
        _ => false,
    }
}

/// `find_msg`: the message a search takes, with its predecessor (0 when
/// it is first). SEARCH_LESSEQUAL takes the first of the lowest type;
/// SEARCH_NUMBER the one at position `msgtyp`. Queue lock held.
fn find_msg<'a>(
    a: &'a Session,
    s: &MsgSlot,
    msgtyp: i64,
    mode: u32,
) -> SysResult<Option<(u64, Block<'a>)>> {
    let mut msgtyp = msgtyp;
    let mut found = None;
    let mut count = 0i64;
    let (mut prev, mut cur) = (0u64, s.first.load(Relaxed));
    // Bounded (no more messages than the heap holds blocks) and
    // cycle-proof: a list that loops back is corrupt, found in time
    // proportional to its tail and loop by Brent's mark (as `chain.rs`
    // finds it, without reading a block twice), not after the arena's
    // size in steps (2^27 for a 4 GiB heap), all under the queue's lock.
    let (mut mark, mut power, mut lam) = (0u64, 1u64, 0u64);
    for _ in 0..a.layout().size / 32 {
        if cur == 0 {
            return Ok(found);
        }
        if cur == mark {
            return Err(Errno::EUCLEAN);
        }
        let b = queue::block(a, cur)?;
        if testmsg(b.mtype(), msgtyp, mode) {
            if mode == SEARCH_LESSEQUAL && b.mtype() != 1 {
                // Saturating: msgsnd stores types from 1 up, but a
                // participant may have written i64::MIN.
                msgtyp = b.mtype().saturating_sub(1);
                found = Some((prev, b));
            } else if mode == SEARCH_NUMBER {
                if msgtyp == count {
                    return Ok(Some((prev, b)));
                }
            } else {
                return Ok(Some((prev, b)));
            }
            count += 1;
        }
        lam += 1;
        if lam == power {
            mark = cur;
            power = power.saturating_mul(2);
            lam = 0;
        }
        prev = cur;
        cur = b.next();
    }
    Err(Errno::EUCLEAN)
}

/// Where `msgrcv` puts a message's text: `msgsz` bytes of room, handed
/// out when the size of the message is known. A slice is its own room;
/// the C ABI lends a buffer of exactly the message's size and copies it to
/// the caller's memory after the call, as the kernel's `store_msg` does.
pub trait RecvBuf {
    /// `msgsz`: the most text bytes the caller takes.
    fn cap(&self) -> usize;
    /// `n` bytes (at most [`RecvBuf::cap`]) for the text of the message
    /// being delivered; asked once per delivery, under the queue's lock.
    fn room(&mut self, n: usize) -> SysResult<&mut [u8]>;
}

impl RecvBuf for &mut [u8] {
    fn cap(&self) -> usize {
        self.len()
    }
    fn room(&mut self, n: usize) -> SysResult<&mut [u8]> {
        self.get_mut(..n).ok_or(Errno::EFAULT)
    }
}

/// `do_msg_fill`: the one copy of a message out of the arena into the
/// caller's memory: `min(buf.cap(), size)` bytes. Returns the type and the
/// bytes copied.
fn deliver(a: &Session, b: &Block<'_>, buf: &mut dyn RecvBuf) -> SysResult<(i64, usize)> {
    let n = (buf.cap() as u64).min(b.size()) as usize;
    let n = b.read_text(a, buf.room(n)?)?;
    Ok((b.mtype(), n))
}

/// [`Namespace::msgrcv`](crate::Namespace::msgrcv)'s work.
pub(crate) fn msgrcv(
    a: &Session,
    cred: &Cred,
    msqid: i32,
    buf: &mut [u8],
    msgtyp: i64,
    msgflg: i32,
) -> SysResult<(i64, usize)> {
    msgrcv_into(a, cred, msqid, &mut { buf }, msgtyp, msgflg)
}

/// [`Namespace::msgrcv_into`](crate::Namespace::msgrcv_into)'s work.
pub(crate) fn msgrcv_into(
    a: &Session,
    cred: &Cred,
    msqid: i32,
    buf: &mut dyn RecvBuf,
    msgtyp: i64,
    msgflg: i32,
) -> SysResult<(i64, usize)> {
    // The call starts: a signal handler noted from now on makes a
    // sleep of this call fail with EINTR.
    msgrcv_into_since(a, wait::Mark::now(), cred, msqid, buf, msgtyp, msgflg)
}

/// [`Namespace::msgrcv_into_since`](crate::Namespace::msgrcv_into_since)'s work.
pub(crate) fn msgrcv_into_since(
    a: &Session,
    mark: wait::Mark,
    cred: &Cred,
    msqid: i32,
    buf: &mut dyn RecvBuf,
    msgtyp: i64,
    msgflg: i32,
) -> SysResult<(i64, usize)> {
    // With IPC_NOWAIT, a lock is waited for NOWAIT_LOCK_NS at most
    // (its holder stopped, or a hostile word): ENOMSG, as an empty
    // queue.
    let _bound = crate::lock::bound_for(None, msgflg & abi::IPC_NOWAIT != 0);
    msgrcv_bounded(a, mark, cred, msqid, buf, msgtyp, msgflg).map_err(|e| {
        if e.0 == libc::ETIMEDOUT {
            Errno::ENOMSG
        } else {
            e
        }
    })
}

fn msgrcv_bounded(
    a: &Session,
    mark: wait::Mark,
    cred: &Cred,
    msqid: i32,
    buf: &mut dyn RecvBuf,
    msgtyp: i64,
    msgflg: i32,
) -> SysResult<(i64, usize)> {
    let bufsz = buf.cap() as u64;
    // "if (msqid < 0 || (long) bufsz < 0) return -EINVAL;"
    if msqid < 0 {
        return Err(Errno::EINVAL);
    }
    let copy = msgflg & abi::MSG_COPY != 0;
    // "if ((msgflg & MSG_EXCEPT) || !(msgflg & IPC_NOWAIT)) return -EINVAL;"
    if copy && (msgflg & abi::MSG_EXCEPT != 0 || msgflg & abi::IPC_NOWAIT == 0) {
        return Err(Errno::EINVAL);
    }
    let noerror = msgflg & abi::MSG_NOERROR != 0;
    let (mode, msgtyp) = convert_mode(msgtyp, msgflg);
    let f = obtain::<MsgKind>(a, msqid)?;
    let s = f.slot;
    loop {
        // "if (ipcperms(ns, &msq->q_perm, S_IRUGO)) goto out_unlock1;" (-EACCES)
        perm::ipcperms(cred, &s.head, S_IRUGO)?;
        let g = locked!(lock_object::<MsgKind>(a, s));
        // "if (!ipc_valid_object(&msq->q_perm)) { msg = ERR_PTR(-EIDRM); ...}"
        still_valid(&f)?;
        let found = match find_msg(a, s, msgtyp, mode) {
            Ok(x) => x,
            Err(e) => {
                queue::recount(a, s);
                return Err(e);
            }
        };
        if let Some((prev, b)) = found {
            // "if ((bufsz < msg->m_ts) && !(msgflg & MSG_NOERROR))" (-E2BIG)
            if bufsz < b.size() && !noerror {
                return Err(Errno::E2BIG);
            }
            if copy {
                // prepare_copy(buf, min(bufsz, msg_ctlmax)), then copy_msg:
                // "if (src->m_ts > dst->m_ts) return ERR_PTR(-EINVAL);"
                let msgmax = a.header().limits.msgmax.load(Relaxed).max(0) as u64;
                if b.size() > bufsz.min(msgmax) {
                    return Err(Errno::EINVAL);
                }
                return deliver(a, &b, buf);
            }
            let got = deliver(a, &b, buf)?;
            let r = take(a, s, prev, &b, cred.pid);
            if r.is_err() && s.journal.load(Relaxed) != 0 {
                queue::repair(a, s);
            }
            r?;
            // "ss_wakeup(msq, &wake_q, false);"
            if s.waiters.load(Relaxed) != 0 {
                queue::wake_senders(a, s)?;
            }
            drop(g);
            return Ok(got);
        }
        // "if (msgflg & IPC_NOWAIT) { msg = ERR_PTR(-ENOMSG); ...}"
        if msgflg & abi::IPC_NOWAIT != 0 {
            return Err(Errno::ENOMSG);
        }
        // "if (msgflg & MSG_NOERROR) msr_d.r_maxsize = INT_MAX; else
        // msr_d.r_maxsize = bufsz;"
        let maxsize = if noerror {
            i32::MAX as u32
        } else {
            bufsz.min(u64::from(u32::MAX)) as u32
        };
        let rec = queue::enqueue(
            a,
            s,
            Wants {
                kind: KIND_RECV,
                size: maxsize,
                mode,
                msgtyp,
            },
        )?;
        // Read under the lock: whether ours is among the records served
        // next (`wait::sleep`).
        let first = wait::among_first(a, &s.waiters, rec, wait::SPINNERS);
        drop(g);
        let woke = queue::sleep(&f, wait::at(a, rec)?, mark, first);
        // The record must be collected whatever the call's deadline.
        let g = crate::registry::lock_object_unbounded::<MsgKind>(a, s)?;
        let (done, status, handed) = queue::collect(a, s, rec)?;
        if done {
            match status {
                0 => {
                    // Handed over by pipelined_send: ours to copy out
                    // and recycle.
                    let got = queue::block(a, handed).and_then(|b| deliver(a, &b, buf));
                    let ours = still_valid(&f).is_ok();
                    queue::discard(a, ours.then_some(s), handed);
                    drop(g);
                    return got;
                }
                // expunge_all(msq, -EAGAIN): try again, unless "if
                // (signal_pending(current)) { msg =
                // ERR_PTR(-ERESTARTNOHAND); ...}" (a handler ran).
                libc::EAGAIN if !mark.interrupted() => {
                    drop(g);
                    continue;
                }
                libc::EAGAIN => return Err(Errno::EINTR),
                e => return Err(Errno(e)),
            }
        }
        if matches!(woke, Woke::Cancelled) {
            drop(g);
            continue;
        }
        return Err(match woke {
            // Removed by a remover that died before waking us.
            Woke::Removed => Errno::EIDRM,
            // "if (signal_pending(current)) { msg = ERR_PTR(-ERESTARTNOHAND); ...}"
            _ => Errno::EINTR,
        });
    }
}

/// Takes message `b` (predecessor `prev`) off the queue, journaled:
/// "list_del(&msg->m_list); msq->q_qnum--; msq->q_rtime = ...;
/// ipc_update_pid(&msq->q_lrpid, ...); msq->q_cbytes -= msg->m_ts;", then
/// its block goes back to the cache or the heap. Queue lock held.
fn take(a: &Session, s: &MsgSlot, prev: u64, b: &Block<'_>, pid: i32) -> SysResult<()> {
    let (cb, qn) = (s.cbytes.load(Relaxed), s.qnum.load(Relaxed));
    // The receiver, for a repair's lrpid (the sender's pid is no longer
    // needed).
    b.set_size_pid(b.size(), pid);
    s.journal.store(b.off | queue::OP_RECV, Release);
    queue::unlink_at(a, s, prev, b)?;
    s.cbytes.store(cb.saturating_sub(b.size()), Relaxed);
    s.qnum.store(qn.saturating_sub(1), Relaxed);
    s.lrpid.store(pid, Relaxed);
    s.rtime.store(now(), Relaxed);
    if let Some(c) = s.second_count() {
        bump(c);
    }
    queue::recycle(a, s, b.off);
    Ok(())
}
