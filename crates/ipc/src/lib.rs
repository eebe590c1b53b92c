//! # ipcns: System V IPC namespaces in user space
//!
//! A namespace is an arena file mapped by every participant; semaphore
//! sets, message queues and shared memory segments live in it with Linux's
//! exact ids (seed 000's cyclic allocation), hashed keys (seeds 001, 002),
//! checks, errnos and structures.
//!
//! Lock order: registry -> object -> heap; several objects in ascending idx.

pub mod abi;
pub mod arena;
mod check;
pub mod creds;
mod ctl;
pub use check::Census;
mod errno;
mod heap;
mod ids;
pub mod kernel;
mod keys;
pub mod limits;
mod lock;
pub mod msg;
pub mod namespace;
mod object;
mod perm;
mod procfs;
mod regions;
mod registry;
pub mod sem;
pub mod shm;
mod sysctl;
pub mod sysv;
pub use sysctl::NAMES as SYSCTLS;
mod time;

pub use arena::{ArenaError, CreateOptions};
pub use creds::Cred;
pub use errno::{Errno, SysResult};

/// How many locks this process took over from holders that died holding
/// them (each followed by a repair).
pub fn recoveries() -> u64 {
    lock::RECOVERIES.load(core::sync::atomic::Ordering::Relaxed)
}
pub use namespace::Namespace;

/// Arena bytes of one object slot (every object has exactly one).
pub const SLOT_BYTES: u64 = arena::layout::SLOT_SIZE;
