//! # ipcns: System V IPC namespaces in user space
//!
//! A namespace is an arena file mapped by every participant; semaphore
//! sets, message queues and shared memory segments live in it with Linux's
//! exact ids (seed 000's cyclic allocation), hashed keys (seeds 001, 002),
//! checks, errnos and structures.
//!
//! Lock order: `lock/mod.rs` (registry -> objects by idx -> procs -> heap).
//!
//! Under `--cfg loom` only the lock, the wait handshake (`park`) and their
//! model checks are built.

/// The kernel's error numbers, as the core returns them: the system-call
/// layer's type (crate `ipcns-sys`, `errno.rs`), so that `crate::errno`
/// and `ipcns::Errno` name that one type.
mod errno {
    pub use ipcns_sys::Errno;
    /// Used by the namespace proper only (not built under loom).
    #[cfg(not(loom))]
    pub use ipcns_sys::SysResult;
}
mod lock;
mod park;
mod sync;

/// Items of the namespace proper, left out under `--cfg loom`.
macro_rules! not_loom {
    ($($i:item)*) => { $( #[cfg(not(loom))] $i )* };
}

not_loom! {
    pub mod abi;
    mod arena;
    mod chain;
    pub mod creds;
    mod ctl;
    mod fault;

    mod hash;
    mod heap;
    mod ids;
    /// Signal handlers' news for blocked calls (`note_signal`, and the
    /// mark a call takes as it starts).
    #[doc(hidden)]
    pub mod intr;
    mod keys;
    /// A lock of the arena's kind for benchmarks (feature `testing`).
    #[cfg(feature = "testing")]
    pub mod lockbench;
    pub mod limits;
    pub mod msg;
    pub mod namespace;
    mod object;
    mod perm;
    mod recent;
    mod session;
    mod shared;
    mod proc;
    mod process;
    mod registry;
    pub mod sem;
    pub mod shm;
    /// Raw system calls (for ipcns's own crates: the C ABI, benches): the
    /// `ipcns-sys` crate, under the path the core has always used.
    #[doc(hidden)]
    pub use ipcns_sys as sys;
    pub mod sysv;
    mod time;
    mod wait;

    pub use arena::header::MAGIC as ARENA_MAGIC;
    pub use arena::layout::Mech;
    pub use arena::{Access, ArenaError, CreateOptions, segment_dir_of};
    pub use namespace::check::Census;
    pub use creds::Cred;
    pub use errno::{Errno, SysResult};
    pub use heap::HeapStats;
    /// For signal handlers: a blocked System V IPC call of this thread
    /// fails with EINTR (`intr.rs`; libipcns.so's handler wrapper calls it).
    #[doc(hidden)]
    pub use intr::note_signal;
    pub use lock::{Holder, Liveness};
    pub use namespace::Namespace;
    #[doc(hidden)]
    pub use namespace::life;
    #[cfg(feature = "testing")]
    pub use namespace::regions;
    pub use namespace::sysctl::NAMES as SYSCTLS;

    /// How many locks this process took over from holders that died holding
    /// them (each followed by a repair).
    pub fn recoveries() -> u64 {
        lock::RECOVERIES.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// The identity a lock word holds for live thread `tid` (tests write
    /// one where a hostile participant would; feature `testing`).
    #[cfg(feature = "testing")]
    pub fn thread_identity(tid: u32) -> Option<u64> {
        lock::identity_of(tid)
    }

    /// Runs `f` with every arena lock it waits for waited for at most
    /// `limit` in all (a lock kept longer, by a stopped participant say,
    /// fails the call that needs it with ETIMEDOUT, or the errno that call
    /// gives for a timeout): for tools and cleanups that must end.
    pub fn with_lock_limit<R>(limit: core::time::Duration, f: impl FnOnce() -> R) -> R {
        lock::with_limit(limit, f)
    }

    /// Arena bytes of one object slot (every object has exactly one).
    pub const SLOT_BYTES: u64 = arena::layout::SLOT_SIZE;
}
