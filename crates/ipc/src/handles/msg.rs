//! [`MsgQueue`]: a message queue by handle (msgget(2), msgop(2),
//! msgctl(2)).

use super::{Get, PRIVATE, Perm, cred};
use crate::abi::{IPC_NOWAIT, IPC_RMID, IPC_STAT, MSG_EXCEPT, MSG_NOERROR, msqid64_ds};
use crate::errno::{Errno, SysResult};
use crate::error::Result;
use crate::msg::{MsgArg, RecvBuf};
use crate::namespace::Namespace;
use core::ops::BitOr;

/// The flags of a send or a receive (`msgflg`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MsgFlags(i32);

impl MsgFlags {
    /// No flag: a send waits for room, a receive for a message.
    pub const NONE: MsgFlags = MsgFlags(0);
    /// IPC_NOWAIT: a send to a full queue fails with EAGAIN, a receive
    /// that finds no message with ENOMSG, instead of waiting.
    pub const NOWAIT: MsgFlags = MsgFlags(IPC_NOWAIT);
    /// MSG_NOERROR: a receive into a buffer too small for the message
    /// takes the message cut to the buffer (the rest is lost) instead of
    /// failing with E2BIG.
    pub const NOERROR: MsgFlags = MsgFlags(MSG_NOERROR);

    /// The `msgflg` bits.
    pub const fn bits(self) -> i32 {
        self.0
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: MsgFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for MsgFlags {
    type Output = MsgFlags;
    fn bitor(self, rhs: MsgFlags) -> MsgFlags {
        MsgFlags(self.0 | rhs.0)
    }
}

/// Which message a receive takes (`msgtyp`, and MSG_EXCEPT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// The first message (`msgtyp` 0).
    Any,
    /// The first message of this type (`msgtyp` > 0).
    Exactly(i64),
    /// The first message of any other type (`msgtyp` > 0 with
    /// MSG_EXCEPT).
    Except(i64),
    /// The first message of the lowest type at most this (`msgtyp` < 0).
    AtMost(i64),
}

impl MsgType {
    /// `(msgtyp, msgflg bits)`. No message has a type below 1 (msgop(2):
    /// msgsnd fails with EINVAL when "mtype had a nonpositive value"), so
    /// `Exactly` or `AtMost` such a type selects nothing: EINVAL here
    /// (passed on, a nonpositive `msgtyp` would select in another of the
    /// kernel's modes); `Except` such a type selects every message.
    fn msgtyp(self) -> SysResult<(i64, i32)> {
        match self {
            MsgType::Any => Ok((0, 0)),
            MsgType::Exactly(t) if t > 0 => Ok((t, 0)),
            MsgType::Except(t) if t > 0 => Ok((t, MSG_EXCEPT)),
            MsgType::Except(_) => Ok((0, 0)),
            MsgType::AtMost(t) if t > 0 => Ok((-t, 0)),
            MsgType::Exactly(_) | MsgType::AtMost(_) => Err(Errno::EINVAL),
        }
    }
}

/// A message received: its type and text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Message {
    /// `mtype`, at least 1.
    pub mtype: i64,
    pub text: Vec<u8>,
}

/// What IPC_STAT tells of a queue (`struct msqid64_ds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgStat {
    pub perm: Perm,
    /// The last send, receive and change, in seconds since the epoch (0:
    /// never).
    pub stime: i64,
    pub rtime: i64,
    pub ctime: i64,
    /// Text bytes queued.
    pub cbytes: u64,
    /// Messages queued.
    pub qnum: u64,
    /// The most text bytes the queue holds (MSGMNB when made).
    pub qbytes: u64,
    /// The processes of the last send and the last receive.
    pub lspid: i32,
    pub lrpid: i32,
}

/// A receive buffer that grows to the message it is handed (`RecvBuf`):
/// any size the kernel's `msgsz` allows.
struct Grow(Vec<u8>);

impl RecvBuf for Grow {
    fn cap(&self) -> usize {
        // do_msgrcv: "(long) bufsz < 0" is EINVAL; anything else is room.
        isize::MAX.unsigned_abs()
    }

    fn room(&mut self, n: usize) -> SysResult<&mut [u8]> {
        self.0.clear();
        self.0.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        self.0.resize(n, 0);
        Ok(&mut self.0)
    }
}

/// A message queue of a namespace.
///
/// ```
/// # fn main() -> ipcns::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("ipcns-doc-msg-{}", std::process::id()));
/// # let ns = ipcns::Namespace::create_at(&dir, ipcns::CreateOptions::default())?;
/// use ipcns::{MsgFlags, MsgQueue, MsgType};
///
/// let q = MsgQueue::private(&ns, 0o600)?;
/// q.send(2, b"second type", MsgFlags::NONE)?;
/// q.send(1, b"first type", MsgFlags::NONE)?;
/// let m = q.receive(MsgType::AtMost(5), MsgFlags::NOWAIT)?;
/// assert_eq!((m.mtype, &m.text[..]), (1, &b"first type"[..]));
/// # q.remove()?;
/// # drop(ns);
/// # ipcns::Namespace::remove_at(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct MsgQueue<'ns> {
    ns: &'ns Namespace,
    id: i32,
}

impl core::fmt::Debug for MsgQueue<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MsgQueue")
            .field("ns", &self.ns.name())
            .field("id", &self.id)
            .finish()
    }
}

impl<'ns> MsgQueue<'ns> {
    fn obtain(ns: &'ns Namespace, key: i32, how: Get, mode: u32) -> Result<MsgQueue<'ns>> {
        let id = ns.msgget(&*cred(ns)?, key, how.flags(mode))?;
        Ok(MsgQueue { ns, id })
    }

    /// A new empty queue under `key`, with permission bits `mode`
    /// (`0o600`): `msgget(key, IPC_CREAT | IPC_EXCL | mode)`. EEXIST if
    /// the key has a queue.
    pub fn create(ns: &'ns Namespace, key: i32, mode: u32) -> Result<MsgQueue<'ns>> {
        MsgQueue::obtain(ns, key, Get::Create, mode)
    }

    /// The queue under `key`: `msgget(key, 0)`. ENOENT if none.
    pub fn open(ns: &'ns Namespace, key: i32) -> Result<MsgQueue<'ns>> {
        MsgQueue::obtain(ns, key, Get::Open, 0)
    }

    /// The queue under `key`, made if there is none: `msgget(key,
    /// IPC_CREAT | mode)`.
    pub fn open_or_create(ns: &'ns Namespace, key: i32, mode: u32) -> Result<MsgQueue<'ns>> {
        MsgQueue::obtain(ns, key, Get::OpenOrCreate, mode)
    }

    /// A new queue no key finds: `msgget(IPC_PRIVATE, mode)`.
    pub fn private(ns: &'ns Namespace, mode: u32) -> Result<MsgQueue<'ns>> {
        MsgQueue::obtain(ns, PRIVATE, Get::Create, mode)
    }

    /// The queue with id `id`, unchecked: a wrong id fails the first call
    /// (EINVAL).
    pub fn from_id(ns: &'ns Namespace, id: i32) -> MsgQueue<'ns> {
        MsgQueue { ns, id }
    }

    /// The queue's id (`msqid`).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The namespace it is in.
    pub fn namespace(&self) -> &'ns Namespace {
        self.ns
    }

    /// Queues `text` as a message of type `mtype`, waiting while the queue
    /// is full (unless [`MsgFlags::NOWAIT`]: EAGAIN): `msgsnd(id, {mtype,
    /// text}, text.len(), flags)`. EINVAL for an `mtype` below 1 or a text
    /// longer than MSGMAX (8192 by default), EIDRM if the queue is removed
    /// while the caller waits.
    pub fn send(&self, mtype: i64, text: &[u8], flags: MsgFlags) -> Result<()> {
        let me = cred(self.ns)?;
        self.ns.msgsnd(&me, self.id, mtype, text, flags.0)?;
        Ok(())
    }

    /// Takes the first message `which` selects, waiting for one (unless
    /// [`MsgFlags::NOWAIT`]: ENOMSG): `msgrcv` with room for any message.
    pub fn receive(&self, which: MsgType, flags: MsgFlags) -> Result<Message> {
        let (msgtyp, mode) = which.msgtyp()?;
        let me = cred(self.ns)?;
        let mut buf = Grow(Vec::new());
        let (mtype, n) = self
            .ns
            .msgrcv_into(&me, self.id, &mut buf, msgtyp, flags.0 | mode)?;
        let mut text = buf.0;
        text.truncate(n);
        Ok(Message { mtype, text })
    }

    /// [`MsgQueue::receive`] into `buf`: `msgrcv(id, buf, buf.len(),
    /// which, flags)`. Returns the message's type and the bytes written.
    /// E2BIG, the message left queued, when it is longer than `buf`
    /// (unless [`MsgFlags::NOERROR`]).
    pub fn receive_into(
        &self,
        which: MsgType,
        buf: &mut [u8],
        flags: MsgFlags,
    ) -> Result<(i64, usize)> {
        let (msgtyp, mode) = which.msgtyp()?;
        let me = cred(self.ns)?;
        Ok(self.ns.msgrcv(&me, self.id, buf, msgtyp, flags.0 | mode)?)
    }

    /// The queue's owner, permissions, counts and times: `msgctl(id,
    /// IPC_STAT)`. EACCES without read permission.
    pub fn stat(&self) -> Result<MsgStat> {
        let me = cred(self.ns)?;
        let mut ds = msqid64_ds::default();
        self.ns
            .msgctl(&me, self.id, IPC_STAT, MsgArg::Ds(&mut ds))?;
        Ok(MsgStat {
            perm: Perm::from(&ds.msg_perm),
            stime: ds.msg_stime,
            rtime: ds.msg_rtime,
            ctime: ds.msg_ctime,
            cbytes: ds.msg_cbytes,
            qnum: ds.msg_qnum,
            qbytes: ds.msg_qbytes,
            lspid: ds.msg_lspid,
            lrpid: ds.msg_lrpid,
        })
    }

    /// Removes the queue and its messages (`msgctl(id, IPC_RMID)`): its
    /// waiting senders and receivers fail with EIDRM. EPERM unless the
    /// caller owns or created it (or has CAP_SYS_ADMIN).
    pub fn remove(self) -> Result<()> {
        let me = cred(self.ns)?;
        self.ns.msgctl(&me, self.id, IPC_RMID, MsgArg::None)?;
        Ok(())
    }
}
