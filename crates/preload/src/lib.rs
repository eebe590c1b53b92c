//! # libipcns.so: System V IPC for unmodified programs
//!
//! `LD_PRELOAD=libipcns.so PROGRAM` makes PROGRAM's semget, semop,
//! semtimedop, semctl, msgget, msgsnd, msgrcv, msgctl, shmget, shmat,
//! shmdt and shmctl (and `syscall(SYS_...)` with their numbers) work on an
//! ipcns namespace instead of the kernel, with the kernel's results and
//! errno. See the crate's README for what it guarantees and what it does
//! not reach.
//!
//! - `ffi`: the exported C functions (the IPC calls and `syscall`; the
//!   credential calls in `ffi/ids.rs`), the constructor and destructor;
//! - `next`: the raw system call and the next definition of each
//!   interposed symbol;
//! - `user`: the caller's memory, read and written without faulting (the
//!   threads' stacks in `user/stack.rs`, the program's image in
//!   `user/image.rs`);
//! - `state`: which namespace; `cred`: who is calling, cached;
//! - `sem`, `msg`, `shm`: each call, with the kernel's order of copies;
//! - `structs`: the `*ctl` structures as bytes;
//! - `procfs`: `/proc/sysvipc/*` and the ipc sysctls as the namespace's
//!   (the file calls in `ffi/open.rs`, the raw file work in `kfile`);
//! - `unshare`: a fresh private namespace (`unshare`, `clone` with
//!   CLONE_NEWIPC; the entries in `ffi/ns.rs`); `guardian`: the process
//!   that removes it once its last process is gone;
//! - `signals`: the program's signal handlers, wrapped so that a blocked
//!   IPC call learns that one ran (the entries in `ffi/signals.rs`);
//! - `once`: values published for good; `hot`: the words every call
//!   reads, in one cache line.
//!
//! `unsafe` lives in `ffi`, `next`, `user`, `once`, `kfile` and
//! `guardian/sys.rs` only, each file
//! opening with its `# Safety` section.

#![deny(unsafe_code)]

mod cred;
mod ffi;
mod guardian;
mod hot;
mod kfile;
mod msg;
mod next;
mod once;
mod procfs;
mod sem;
mod shm;
mod signals;
mod state;
mod unshare;
mod user;
