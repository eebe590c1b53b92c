//! # ipcns: System V IPC namespaces in user space
//!
//! Linux's System V IPC (semaphore sets, message queues, shared memory
//! segments) rebuilt in user space, with the kernel's ids, keys, checks,
//! errnos and structures. A namespace is one file, an arena that
//! cooperating processes map; the objects live in it, so the common
//! operations never enter the kernel. Unmodified programs reach it through
//! `libipcns.so` (`ipcns run -- PROGRAM`, crates `ipcns-preload` and
//! `ipcns-cli`); Rust programs through this crate.
//!
//! ## Quick start
//!
//! ```
//! use ipcns::{CreateOptions, MsgFlags, MsgQueue, MsgType, Namespace, SemOp, SemSet};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // A private namespace: an arena file in a temporary directory.
//!     let path = std::env::temp_dir().join(format!("ipcns-quickstart-{}", std::process::id()));
//!     let ns = Namespace::create_at(&path, CreateOptions::default())?;
//!
//!     // A set of one semaphore: post, then wait.
//!     let sem = SemSet::private(&ns, 1, 0o600)?;
//!     sem.op(SemOp::post(0))?;
//!     sem.op(SemOp::wait(0))?;
//!     assert_eq!(sem.get(0)?, 0);
//!
//!     // A message queue: send a message of type 1, receive it.
//!     let queue = MsgQueue::private(&ns, 0o600)?;
//!     queue.send(1, b"hello", MsgFlags::NONE)?;
//!     let msg = queue.receive(MsgType::Any, MsgFlags::NONE)?;
//!     assert_eq!((msg.mtype, &msg.text[..]), (1, &b"hello"[..]));
//!
//!     // Leave the namespace, then delete its file.
//!     drop(ns);
//!     Namespace::remove_at(&path)?;
//!     Ok(())
//! }
//! ```
//!
//! Processes share a namespace by opening the same file:
//! [`Namespace::open_or_create`] by name (`/dev/shm/ipcns-UID/ipcns.NAME`),
//! [`Namespace::open_at`] by path, [`Namespace::open_fd`] from a descriptor
//! handed down; objects by key, as with `ftok` keys on Linux
//! ([`SemSet::open`], [`MsgQueue::open_or_create`], ...).
//!
//! ## Main types
//!
//! - [`Namespace`]: an attached namespace. Its C-shaped methods are the
//!   system calls one for one (`semget`, `semop`, `semtimedop`, `semctl`,
//!   `msgget`, `msgsnd`, `msgrcv`, `msgctl`, `shmget`, `shmat`, `shmdt`,
//!   `shmctl`), with the caller's [`Cred`] ([`Namespace::cred`]), the
//!   constants and structures of [`abi`], and [`Errno`] errors.
//! - [`SemSet`], [`MsgQueue`], [`ShmSegment`] (and its [`Attachment`]):
//!   typed handles over those calls ([`handles`]).
//! - [`Error`] and [`Result`]: one error type for everything above, with
//!   the kernel's number in [`Error::errno`].
//! - [`sysv::SysV`]: one interface over a namespace and, in tests, the
//!   host kernel.
//!
//! ## More
//!
//! `crates/ipc/README.md` says how it works (the arena, ids and keys,
//! locks that survive a SIGKILL, sleepers and wakers, crash safety,
//! hostile arenas, what is checked against the kernel), and the security
//! model: the arena file's permissions are the boundary. The uid/gid maps
//! and the restartable sequences are the crates [`ipcns_idmap`] and
//! [`ipcns_rseq`].

// Lock order: `lock/mod.rs` (registry -> objects by idx -> procs -> heap).
//
// Under `--cfg loom` only the lock, the wait handshake (`park`) and their
// model checks are built.

/// `lock_object(..)?` as a match: a guard moved through `?`
/// (`Try::branch`'s own layout) was stored in pieces and loaded whole, a
/// store-forwarding stall on every operation (a fifth of a no-op semop,
/// by perf annotate). Only in functions returning `Result<_, Errno>`.
macro_rules! locked {
    ($e:expr) => {
        match $e {
            Ok(g) => g,
            Err(e) => return Err(e),
        }
    };
}

mod errno;
mod lock;
mod park;
mod sync;

// The namespace proper is left out under `--cfg loom`: only the lock,
// the wait handshake and their models are built there.
#[cfg(not(loom))]
pub mod abi;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod acting;
#[cfg(not(loom))]
mod arena;
#[cfg(not(loom))]
mod chain;
#[cfg(not(loom))]
pub mod creds;
#[cfg(not(loom))]
mod ctl;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod fault;

#[cfg(not(loom))]
pub mod handles;
#[cfg(not(loom))]
mod hash;
#[cfg(not(loom))]
mod heap;
#[cfg(not(loom))]
mod ids;
// Signal handlers' news for blocked calls (`note_signal`, and the
// mark a call takes as it starts): for the C ABI.
#[doc(hidden)]
#[cfg(not(loom))]
pub mod intr;
#[cfg(not(loom))]
mod keys;
#[cfg(not(loom))]
pub mod limits;
/// A lock of the arena's kind for benchmarks (feature `testing`).
#[cfg(feature = "testing")]
#[cfg(not(loom))]
pub mod lockbench;
#[cfg(not(loom))]
pub mod msg;
#[cfg(not(loom))]
pub mod namespace;
#[cfg(not(loom))]
mod object;
#[cfg(not(loom))]
mod perm;
#[cfg(not(loom))]
mod proc;
#[cfg(not(loom))]
mod process;
#[cfg(not(loom))]
mod recent;
#[cfg(not(loom))]
mod registry;
#[cfg(not(loom))]
pub mod sem;
#[cfg(not(loom))]
mod session;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
pub mod shm;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod structs;
/// Raw system calls (for ipcns's own crates: the C ABI, benches): the
/// `ipcns-sys` crate, under the path the core has always used.
#[doc(hidden)]
#[cfg(not(loom))]
pub mod sys;
#[cfg(not(loom))]
pub mod sysv;
#[cfg(not(loom))]
mod time;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod usercopy;
#[cfg(not(loom))]
mod wait;

#[doc(hidden)]
#[cfg(not(loom))]
pub use arena::header::MAGIC as ARENA_MAGIC;
#[cfg(not(loom))]
pub use arena::layout::Mech;
#[cfg(not(loom))]
pub use arena::{Access, ArenaError, CreateOptions};
/// Where a namespace's segment files are (for the C ABI).
#[doc(hidden)]
#[cfg(not(loom))]
pub use arena::{is_segment_file, segment_dir_of};
#[cfg(not(loom))]
pub use creds::Cred;
#[cfg(not(loom))]
pub use errno::{Errno, SysResult};
#[cfg(not(loom))]
pub use error::{Error, Result};
#[cfg(not(loom))]
pub use handles::{
    Attachment, Message, MsgFlags, MsgQueue, MsgStat, MsgType, Perm, SemFlags, SemOp, SemSet,
    SemStat, ShmSegment, ShmStat,
};
#[cfg(not(loom))]
pub use heap::HeapStats;
/// For signal handlers: a blocked System V IPC call of this thread
/// fails with EINTR (`intr.rs`; libipcns.so's handler wrapper calls it).
#[doc(hidden)]
#[cfg(not(loom))]
pub use intr::note_signal;
#[cfg(not(loom))]
pub use lock::{Holder, Liveness};
#[cfg(not(loom))]
pub use namespace::Namespace;
/// `ipcns top`'s reading of a namespace's objects.
#[cfg(not(loom))]
pub use namespace::activity::ObjectActivity;
#[cfg(not(loom))]
pub use namespace::check::Census;
#[doc(hidden)]
#[cfg(not(loom))]
pub use namespace::life;
#[cfg(feature = "testing")]
#[cfg(not(loom))]
pub use namespace::regions;
#[cfg(not(loom))]
pub use namespace::sysctl::NAMES as SYSCTLS;

/// How many locks this process took over from holders that died holding
/// them (each followed by a repair).
#[cfg(not(loom))]
pub fn recoveries() -> u64 {
    lock::RECOVERIES.load(core::sync::atomic::Ordering::Relaxed)
}

/// The identity a lock word holds for live thread `tid` (tests write
/// one where a hostile participant would; feature `testing`).
#[cfg(feature = "testing")]
#[cfg(not(loom))]
pub fn thread_identity(tid: u32) -> Option<u64> {
    lock::identity_of(tid)
}

/// Runs `f` with every arena lock it waits for waited for at most
/// `limit` in all (a lock kept longer, by a stopped participant say,
/// fails the call that needs it with ETIMEDOUT, or the errno that call
/// gives for a timeout): for tools and cleanups that must end.
#[cfg(not(loom))]
pub fn with_lock_limit<R>(limit: core::time::Duration, f: impl FnOnce() -> R) -> R {
    lock::with_limit(limit, f)
}

/// Arena bytes of one object slot (every object has exactly one).
#[doc(hidden)]
#[cfg(not(loom))]
pub const SLOT_BYTES: u64 = arena::layout::SLOT_SIZE;
