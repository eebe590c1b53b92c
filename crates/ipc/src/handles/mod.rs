//! Typed handles over a [`Namespace`]: [`SemSet`], [`MsgQueue`] and
//! [`ShmSegment`], for Rust programs. Each handle is a namespace borrowed
//! and an id; every call is one of the C-shaped calls of [`Namespace`]
//! (`semget`, `semtimedop`, `msgsnd`, `shmat`, ...), with the caller's
//! credentials read from the process and typed arguments in place of
//! flag words, and fails with [`Error`](crate::Error), whose
//! [`errno`](crate::Error::errno) is the kernel's.
//!
//! The credentials are asked of the namespace at every call
//! ([`Namespace::cred`], cached, no system call on the cached path), so a
//! handle used after a `fork` is checked as the child, and one used after
//! a `setuid` (followed by [`creds::refresh`](crate::creds::refresh),
//! which the C ABI's wrappers of the set*id calls make and a Rust program
//! makes itself) as the new user, as the kernel checks the caller of each
//! system call.
//!
//! A handle is a name for the object, as the id is: it does not keep the
//! object alive. After [`SemSet::remove`] (or anyone's IPC_RMID) other
//! handles to it fail with EINVAL (the id is gone) and their callers asleep
//! in it wake with EIDRM, as on Linux.
//!
//! ```
//! # fn main() -> ipcns::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("ipcns-doc-handles-{}", std::process::id()));
//! # let ns = ipcns::Namespace::create_at(&dir, ipcns::CreateOptions::default())?;
//! use ipcns::{SemOp, SemSet};
//!
//! let set = SemSet::private(&ns, 2, 0o600)?;
//! set.ops(&[SemOp::new(0, 3), SemOp::new(1, 1).undo()])?;
//! assert_eq!(set.values()?, [3, 1]);
//! # set.remove()?;
//! # drop(ns);
//! # ipcns::Namespace::remove_at(&dir)?;
//! # Ok(())
//! # }
//! ```

mod msg;
mod sem;
mod shm;

pub use msg::{Message, MsgFlags, MsgQueue, MsgStat, MsgType};
pub use sem::{SemFlags, SemOp, SemSet, SemStat};
pub use shm::{Attachment, ShmSegment, ShmStat};

use crate::abi::{IPC_CREAT, IPC_EXCL, ipc64_perm};
use crate::creds::Cred;
use crate::error::Result;
use crate::namespace::Namespace;
use crate::registry::IPC_PRIVATE;
use std::sync::Arc;

/// The ownership and permissions of an object (`struct ipc64_perm`), ids
/// as the caller sees them (65534 for an id its user namespace does not
/// map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perm {
    /// The key the object was made with (0 for IPC_PRIVATE).
    pub key: i32,
    /// Owner.
    pub uid: u32,
    pub gid: u32,
    /// Creator.
    pub cuid: u32,
    pub cgid: u32,
    /// Permission bits (`0o600`), with a segment's SHM_DEST and
    /// SHM_LOCKED above them.
    pub mode: u32,
    /// The slot's sequence number (the id's upper part).
    pub seq: u16,
}

impl From<&ipc64_perm> for Perm {
    fn from(p: &ipc64_perm) -> Perm {
        Perm {
            key: p.key,
            uid: p.uid,
            gid: p.gid,
            cuid: p.cuid,
            cgid: p.cgid,
            mode: p.mode,
            seq: p.seq,
        }
    }
}

/// How a constructor finds or makes its object: the `*get` flags.
#[derive(Clone, Copy)]
enum Get {
    /// IPC_CREAT | IPC_EXCL: a new object; EEXIST if the key has one.
    Create,
    /// 0: the key's object; ENOENT if none.
    Open,
    /// IPC_CREAT: the key's object, made if none.
    OpenOrCreate,
}

impl Get {
    /// The flag word: these flags and the permission bits of `mode`
    /// (the kernel keeps only those: `shmflg & S_IRWXUGO` in `newseg`,
    /// as in `newary` and `newque`).
    fn flags(self, mode: u32) -> i32 {
        let how = match self {
            Get::Create => IPC_CREAT | IPC_EXCL,
            Get::Open => 0,
            Get::OpenOrCreate => IPC_CREAT,
        };
        // 0o777 fits in an i32.
        how | (mode & 0o777) as i32
    }
}

/// The key of a private object.
const PRIVATE: i32 = IPC_PRIVATE;

/// The calling process's credentials for the namespace, as of now.
fn cred(ns: &Namespace) -> Result<Arc<Cred>> {
    Ok(ns.cred()?)
}
