//! What every object of a namespace is doing, for `ipcns top`: the
//! activity counters the operations keep in the objects' slots
//! (`object::Counted`: the kernel keeps none), the sleepers queued on each,
//! a queue's bytes and messages, a segment's attachments, the last pid.
//!
//! Read by the walk of /proc/sysvipc (`procfs.rs`, `each_live`): in
//! ascending index order under the mechanism's registry lock, each object
//! under its own lock, so a row is one moment of its object. The counters
//! only grow (wrapping at 2^64); a reader makes rates from two readings
//! of the same object (same id and `generation`), and a stray write into
//! the arena makes a wrong count, never a fault: nothing here is used as
//! an offset or an index but through the checked walks the operations
//! use.

use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::msg::MsgKind;
use crate::namespace::Namespace;
use crate::object::{Counted, Slot};
use crate::registry::Kind;
use crate::sem::SemKind;
use crate::shm::ShmKind;
use crate::wait;
use core::sync::atomic::Ordering::Relaxed;

/// One object's activity, as [`Namespace::activity`] read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectActivity {
    pub mech: Mech,
    pub id: i32,
    pub key: i32,
    /// Changes whenever the index gets another object: two readings of one
    /// object have the same `id` and `generation`.
    pub generation: u64,
    /// The owner, as the reader sees it (65534 when unmapped).
    pub uid: u32,
    /// Permission bits.
    pub mode: u32,
    /// Sets: semop calls completed. Queues: messages sent. Segments: shmat
    /// and shmdt calls.
    pub ops: u64,
    /// Sets: semop calls that slept. Queues: messages received.
    /// Segments: 0.
    pub ops2: u64,
    /// Calls blocked on it now: a set's sleepers, a queue's blocked senders
    /// and receivers.
    pub waiting: u64,
    /// Sets: semaphores. Queues: messages queued. Segments: 0.
    pub count: u64,
    /// Queues: bytes queued. Segments: size. Sets: 0.
    pub bytes: u64,
    /// Segments: attachments (`shm_nattch`). Others: 0.
    pub nattch: u64,
    /// The last process that operated on it (a set: on its semaphore 0;
    /// a queue: the later of its last sender and receiver; a segment:
    /// `shm_lpid`). 0: none yet.
    pub last_pid: i32,
}

impl Namespace {
    /// Every live object of mechanism `m`, in ascending index order.
    pub fn activity(&self, cred: &Cred, m: Mech) -> SysResult<Vec<ObjectActivity>> {
        let a = self.arena();
        match m {
            Mech::Sem => self.each::<SemKind>(cred, m, |s, row| {
                row.ops2 = s.second_count().map_or(0, |c| c.load(Relaxed));
                row.waiting = wait::snapshot(a, &s.queue).len() as u64;
                row.count = u64::from(s.nsems.load(Relaxed));
                row.last_pid = crate::sem::sems(a, s)
                    .ok()
                    .and_then(|v| v.first().map(|x| x.pid()))
                    .unwrap_or(0);
            }),
            Mech::Msg => self.each::<MsgKind>(cred, m, |s, row| {
                row.ops2 = s.second_count().map_or(0, |c| c.load(Relaxed));
                row.waiting = wait::snapshot(a, &s.waiters).len() as u64;
                row.count = s.qnum.load(Relaxed);
                row.bytes = s.cbytes.load(Relaxed);
                row.last_pid = if s.rtime.load(Relaxed) > s.stime.load(Relaxed) {
                    s.lrpid.load(Relaxed)
                } else {
                    s.lspid.load(Relaxed)
                };
            }),
            Mech::Shm => self.each::<ShmKind>(cred, m, |s, row| {
                row.bytes = s.size.load(Relaxed);
                row.nattch = s.nattch.load(Relaxed);
                row.last_pid = s.lpid.load(Relaxed);
            }),
        }
    }

    fn each<K: Kind>(
        &self,
        cred: &Cred,
        m: Mech,
        fill: impl Fn(&K::Slot, &mut ObjectActivity),
    ) -> SysResult<Vec<ObjectActivity>>
    where
        K::Slot: Counted,
    {
        let mut out = Vec::new();
        self.each_live::<K>(|id, s| {
            let h = s.head();
            let mut row = ObjectActivity {
                mech: m,
                id,
                key: h.key.load(Relaxed),
                generation: h.generation.load(Relaxed),
                uid: cred.show_uid(h.uid.load(Relaxed)),
                mode: h.mode.load(Relaxed) & 0o777,
                ops: s.first_count().load(Relaxed),
                ops2: 0,
                waiting: 0,
                count: 0,
                bytes: 0,
                nattch: 0,
                last_pid: 0,
            };
            fill(s, &mut row);
            out.push(row);
        })?;
        Ok(out)
    }
}
