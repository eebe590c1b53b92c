//! The public face of the msg mechanism: [`Namespace`]'s methods over `crate::msg`.

use super::Namespace;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::msg::MsgArg;
use crate::msg::recv::RecvBuf;
use crate::wait;

impl Namespace {
    /// `msgget(key, msgflg)`.
    ///
    /// ipc/msg.c `ksys_msgget`, `newque`; ipc/util.c `ipcget_public`.
    #[inline]
    pub fn msgget(&self, cred: &Cred, key: i32, msgflg: i32) -> SysResult<i32> {
        crate::msg::msgget(&self.session, cred, key, msgflg)
    }

    /// `msgctl(msqid, cmd, buf)`.
    ///
    /// ipc/msg.c `ksys_msgctl`, `msgctl_info`, `msgctl_stat`, `msgctl_down`.
    #[inline]
    pub fn msgctl(&self, cred: &Cred, msqid: i32, cmd: i32, arg: MsgArg<'_>) -> SysResult<i32> {
        crate::msg::msgctl(&self.session, cred, msqid, cmd, arg)
    }
    /// `msgsnd(msqid, msgp, msgsz, msgflg)`, with `msgp->mtype` as `mtype`
    /// and `msgp->mtext[..msgsz]` as `text`. Returns 0.
    ///
    /// msgop(2); ipc/msg.c `do_msgsnd`.
    #[inline]
    pub fn msgsnd(
        &self,
        cred: &Cred,
        msqid: i32,
        mtype: i64,
        text: &[u8],
        msgflg: i32,
    ) -> SysResult<i32> {
        crate::msg::send::msgsnd(&self.session, cred, msqid, mtype, text, msgflg)
    }

    /// [`Namespace::msgsnd`] for a call that started at `mark` (see
    /// [`Namespace::semtimedop_since`]).
    #[doc(hidden)]
    #[inline]
    pub fn msgsnd_since(
        &self,
        mark: wait::Mark,
        cred: &Cred,
        msqid: i32,
        mtype: i64,
        text: &[u8],
        msgflg: i32,
    ) -> SysResult<i32> {
        crate::msg::send::msgsnd_since(&self.session, mark, cred, msqid, mtype, text, msgflg)
    }
    /// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)`, with `buf` as
    /// `msgp->mtext[..msgsz]`. Returns `msgp->mtype` and the bytes copied.
    ///
    /// msgop(2); ipc/msg.c `do_msgrcv`.
    #[inline]
    pub fn msgrcv(
        &self,
        cred: &Cred,
        msqid: i32,
        buf: &mut [u8],
        msgtyp: i64,
        msgflg: i32,
    ) -> SysResult<(i64, usize)> {
        crate::msg::recv::msgrcv(&self.session, cred, msqid, buf, msgtyp, msgflg)
    }

    /// [`Namespace::msgrcv`] into a [`RecvBuf`]: `buf.cap()` is `msgsz`.
    #[doc(hidden)]
    #[inline]
    pub fn msgrcv_into(
        &self,
        cred: &Cred,
        msqid: i32,
        buf: &mut dyn RecvBuf,
        msgtyp: i64,
        msgflg: i32,
    ) -> SysResult<(i64, usize)> {
        crate::msg::recv::msgrcv_into(&self.session, cred, msqid, buf, msgtyp, msgflg)
    }

    /// [`Namespace::msgrcv_into`] for a call that started at `mark` (see
    /// [`Namespace::semtimedop_since`]).
    #[doc(hidden)]
    #[inline]
    pub fn msgrcv_into_since(
        &self,
        mark: wait::Mark,
        cred: &Cred,
        msqid: i32,
        buf: &mut dyn RecvBuf,
        msgtyp: i64,
        msgflg: i32,
    ) -> SysResult<(i64, usize)> {
        crate::msg::recv::msgrcv_into_since(&self.session, mark, cred, msqid, buf, msgtyp, msgflg)
    }
}
