//! Message queues (ipc/msg.c): `msgget` and `msgctl` here, `msgsnd` in
//! send.rs, `msgrcv` in recv.rs, the queue's insides (message blocks,
//! lists, wait records, the journal) in queue.rs.
//!
//! # Protocol
//! As sem: msgget under the registry lock; IPC_SET and IPC_RMID take the
//! registry lock then the queue lock; STAT, msgsnd and msgrcv look the
//! queue up without the registry lock, check permission, lock the queue
//! and check it is still the queue looked up (EIDRM otherwise). Blocked
//! callers queue a wait record and sleep with no lock held; queue.rs says
//! who may touch a record when.
//!
//! Lock order: `lock/mod.rs` (the queue's lock is an object lock).
//!
//! The namespace's totals (MSG_INFO's `msgtql` and `msgmap`) are the sums
//! of the queues' own counts, added up when asked, as Linux sums its
//! per-cpu counters: a total kept in one shared word would be written by
//! every msgsnd and msgrcv of every queue (one cache line for all
//! processes), and could not be kept exact across a death between the
//! queue's update and the total's. So the registry's `used` and `used2`
//! stay 0 for msg (`MsgKind::usage`), and `Namespace::check` audits each
//! queue's counts against its list instead.

mod queue;
pub(crate) mod recv;
#[doc(hidden)]
pub use recv::RecvBuf;
pub(crate) mod send;

use crate::abi::{self, msginfo, msqid64_ds};
use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::ctl;
use crate::errno::{Errno, SysResult};
use crate::object::MsgSlot;
use crate::registry::{self, IPC_PRIVATE, Kind, Reg, lock_object};
use crate::session::Session;
use crate::time::now;
use core::sync::atomic::Ordering::Relaxed;

/// MSGPOOL, MSGMAP, MSGTQL, MSGSSZ, MSGSEG as IPC_INFO reports them.
const MSGPOOL: i32 = 512_000;
const MSGMAP: i32 = 16384;
const MSGTQL: i32 = 16384;
const MSGSSZ: i32 = 16;
const MSGSEG: u16 = 0xffff;

/// Bytes of a queued message's header in the arena's heap: `[next, mtype,
/// size | pid << 32]`, then the text (queue.rs).
#[doc(hidden)]
pub const MESSAGE_HEADER: u64 = 24;
pub(crate) const MSG_HEADER: u64 = MESSAGE_HEADER;

pub(crate) struct MsgKind;

impl Kind for MsgKind {
    type Slot = MsgSlot;
    const MECH: Mech = Mech::Msg;
    const GIVE_WAY: bool = true;

    fn usage(_a: &Session, _s: &MsgSlot) -> (u64, u64) {
        // The totals are summed when asked (module doc).
        (0, 0)
    }

    fn release(a: &Session, s: &MsgSlot) {
        // freeque: "expunge_all(msq, -EIDRM, &wake_q); ss_wakeup(msq,
        // &wake_q, true);". Each record stays its sleeper's to free.
        queue::wake_all(a, s, 0, libc::EIDRM);
        s.waiters.store(0, Relaxed);
        s.journal.store(0, Relaxed);
        s.journal_aux.store(0, Relaxed);
        // Free the messages one by one, unlinking each first. A list that
        // loops is cut where the loop closes first (each free then visits
        // a block once: a loop freed a block again and again, up to the
        // bound below, for 40 s). Bounded: a list cannot hold more
        // messages than the heap has headers, nor (msgsnd: "1 + qnum <=
        // qbytes") more than the queue's qbytes; a link that is no block
        // ends the walk (the rest is leaked).
        queue::cut_loop(a, s);
        let limit = (a.layout().size / MSG_HEADER)
            .min(s.qbytes.load(Relaxed).saturating_add(1))
            .min(crate::chain::MAX_LINKS);
        for _ in 0..limit {
            let m = s.first.load(Relaxed);
            let Ok(b) = queue::block(a, m) else {
                break;
            };
            s.first.store(b.next(), Relaxed);
            let _ = a.free(m, MSG_HEADER + b.size());
        }
        let c = s.cache.swap(0, Relaxed);
        queue::discard(a, None, c);
        s.first.store(0, Relaxed);
        s.last.store(0, Relaxed);
        s.cbytes.store(0, Relaxed);
        s.qnum.store(0, Relaxed);
    }

    fn repair_object(a: &Session, s: &MsgSlot) -> Result<(), Errno> {
        queue::repair(a, s);
        Ok(())
    }

    fn check_object(a: &Session, s: &MsgSlot) -> Vec<String> {
        queue::audit(a, s)
    }
}

/// [`Namespace::msgget`](crate::Namespace::msgget)'s work.
pub(crate) fn msgget(a: &Session, cred: &Cred, key: i32, msgflg: i32) -> SysResult<i32> {
    let lim = &a.header().limits;
    let excl = msgflg & abi::IPC_CREAT != 0 && msgflg & abi::IPC_EXCL != 0;
    // msg has no more_checks. A key found before, without the
    // registry lock (`recent.rs`).
    if key != IPC_PRIVATE
        && !excl
        && let Some(r) = registry::existing::<MsgKind>(a, cred, key, msgflg, |_| Ok(()))
    {
        return r;
    }
    let reg = Reg::lock::<MsgKind>(a)?;
    if key != IPC_PRIVATE
        && let Some(idx) = reg.find_key(key)?
    {
        if excl {
            return Err(Errno::EEXIST);
        }
        return ctl::existing::<MsgKind>(a, cred, key, idx, msgflg, |_| Ok(()));
    }
    if key != IPC_PRIVATE && msgflg & abi::IPC_CREAT == 0 {
        return Err(Errno::ENOENT);
    }
    reg.create::<MsgKind>(lim.msgmni.load(Relaxed), key, |s, _| {
        ctl::init_head(cred, &s.head, msgflg, now());
        // newque: "msq->q_qbytes = ns->msg_ctlmnb".
        s.qbytes
            .store(lim.msgmnb.load(Relaxed) as u32 as u64, Relaxed);
        s.cbytes.store(0, Relaxed);
        s.qnum.store(0, Relaxed);
        s.lspid.store(0, Relaxed);
        s.lrpid.store(0, Relaxed);
        s.stime.store(0, Relaxed);
        s.rtime.store(0, Relaxed);
        s.first.store(0, Relaxed);
        s.last.store(0, Relaxed);
        s.waiters.store(0, Relaxed);
        s.cache.store(0, Relaxed);
        s.journal.store(0, Relaxed);
        s.journal_aux.store(0, Relaxed);
        s.head.spare[0].store(0, Relaxed);
        s.head.spare[1].store(0, Relaxed);
        Ok(())
    })
}

/// [`Namespace::msgctl`](crate::Namespace::msgctl)'s work.
pub(crate) fn msgctl(
    a: &Session,
    cred: &Cred,
    msqid: i32,
    cmd: i32,
    arg: MsgArg<'_>,
) -> SysResult<i32> {
    // "if (msqid < 0 || cmd < 0) return -EINVAL".
    if msqid < 0 || cmd < 0 {
        return Err(Errno::EINVAL);
    }
    match cmd {
        abi::IPC_INFO | abi::MSG_INFO => {
            let MsgArg::Info(out) = arg else {
                return Err(Errno::EFAULT);
            };
            let l = &a.header().limits;
            *out = msginfo {
                msgmni: l.msgmni.load(Relaxed),
                msgmax: l.msgmax.load(Relaxed),
                msgmnb: l.msgmnb.load(Relaxed),
                msgssz: MSGSSZ,
                msgseg: MSGSEG,
                ..msginfo::default()
            };
            let reg = Reg::lock::<MsgKind>(a)?;
            if cmd == abi::MSG_INFO {
                // "percpu_counter_sum(&ns->percpu_msg_hdrs)", bytes
                // likewise: here the sums of the queues' counts.
                let (bytes, msgs) = totals(a, &reg)?;
                out.msgpool = reg.r.in_use.load(Relaxed) as i32;
                out.msgmap = msgs.min(i32::MAX as u64) as i32;
                out.msgtql = bytes.min(i32::MAX as u64) as i32;
            } else {
                out.msgpool = MSGPOOL;
                out.msgmap = MSGMAP;
                out.msgtql = MSGTQL;
            }
            Ok(ctl::info_maxidx(&reg))
        }
        abi::IPC_STAT | abi::MSG_STAT | abi::MSG_STAT_ANY => {
            let MsgArg::Ds(out) = arg else {
                return Err(Errno::EFAULT);
            };
            *out = msqid64_ds::default();
            let (id, s, _g) = ctl::stat_lookup::<MsgKind>(
                a,
                cred,
                msqid,
                cmd != abi::IPC_STAT,
                cmd == abi::MSG_STAT_ANY,
            )?;
            out.msg_perm = ctl::perm_out(cred, &s.head);
            out.msg_stime = s.stime.load(Relaxed);
            out.msg_rtime = s.rtime.load(Relaxed);
            out.msg_ctime = s.head.ctime.load(Relaxed);
            out.msg_cbytes = s.cbytes.load(Relaxed);
            out.msg_qnum = s.qnum.load(Relaxed);
            out.msg_qbytes = s.qbytes.load(Relaxed);
            out.msg_lspid = s.lspid.load(Relaxed);
            out.msg_lrpid = s.lrpid.load(Relaxed);
            Ok(if cmd == abi::IPC_STAT { 0 } else { id })
        }
        abi::IPC_SET => {
            let MsgArg::Ds(ds) = arg else {
                return Err(Errno::EFAULT);
            };
            let ds = *ds;
            ctl::down::<MsgKind, _>(a, cred, msqid, |_, _, s| {
                // msgctl_down: the new size passes through 32 bits and
                // is compared unsigned with msgmnb; raising it above
                // needs CAP_SYS_RESOURCE.
                let qb = ds.msg_qbytes as u32;
                let mnb = a.header().limits.msgmnb.load(Relaxed) as u32;
                if qb > mnb && !cred.cap_sys_resource {
                    return Err(Errno::EPERM);
                }
                ctl::update_perm(cred, &s.head, &ds.msg_perm)?;
                s.qbytes.store(u64::from(qb), Relaxed);
                s.head.ctime.store(now(), Relaxed);
                // "sleeping receivers might be excluded by stricter
                // permissions": they retry. "sleeping senders might be
                // able to send due to a larger queue size".
                queue::wake_all(a, s, queue::KIND_RECV, libc::EAGAIN);
                queue::wake_senders(a, s)?;
                Ok(0)
            })
        }
        abi::IPC_RMID => ctl::down::<MsgKind, _>(a, cred, msqid, |reg, idx, _| {
            reg.remove::<MsgKind>(idx)?;
            Ok(0)
        }),
        _ => Err(Errno::EINVAL),
    }
}

/// The last argument of `msgctl`, typed; the wrong kind is EFAULT.
pub enum MsgArg<'a> {
    None,
    Ds(&'a mut msqid64_ds),
    Info(&'a mut msginfo),
}

/// The bytes and messages queued in the whole namespace: each queue's
/// counts, read under its lock (so a queue whose last holder died is
/// repaired first). Registry lock held.
fn totals(a: &Session, reg: &Reg<'_>) -> SysResult<(u64, u64)> {
    let (mut bytes, mut msgs) = (0u64, 0u64);
    for idx in reg.bm().iter() {
        let s = registry::slot::<MsgKind>(a, idx)?;
        let _g = locked!(lock_object::<MsgKind>(a, s));
        bytes = bytes.saturating_add(s.cbytes.load(Relaxed));
        msgs = msgs.saturating_add(s.qnum.load(Relaxed));
    }
    Ok((bytes, msgs))
}
