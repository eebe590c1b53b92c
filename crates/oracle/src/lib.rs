//! # ipcns-oracle: the host kernel beside ipcns
//!
//! [`SysV`] is one interface over two System V IPC implementations: the
//! host kernel through raw system calls ([`Host`]) and an ipcns namespace
//! seen by one caller ([`NsCaller`]). The differential tests use the kernel
//! as the oracle, the benchmarks as the baseline, and the ipcs family runs
//! on either.
//!
//! It lives outside the core (`ipcns`) so that the core, which the
//! `LD_PRELOAD` library links, carries no path into the host kernel's IPC.
//!
//! Empty under `--cfg loom` (the core is then only its lock model).
//!
//! `unsafe` is confined to [`kernel`] (the system calls) and `scratch`
//! (the buffer GETALL and SETALL go through); each opens with its
//! `# Safety` section.

#![cfg(not(loom))]

pub mod kernel;
mod scratch;
/// The interface both implementations answer (in the core: the ipc tools
/// use it too).
pub use ipcns::sysv;

pub use kernel::{Host, unshare_ipc};
pub use sysv::{NsCaller, SysV};
