//! `unshare(CLONE_NEWIPC)` and fork-like `clone`/`clone3` with
//! CLONE_NEWIPC, without privileges: the process (or the child) gets a
//! fresh private namespace, as the kernel's `create_ipc_ns` gives one.
//! Like Linux, `unshare` moves the calling thread only: in a process with
//! other threads the caller gets a namespace of its own (`state.rs`),
//! which the threads it creates inherit, and the environment is left
//! alone.
//!
//! The new arena is created beside the current one (or in `$IPCNS_DIR`,
//! default `/dev/shm/ipcns-UID`) as `ipcns.unshare-PID-RANDOM`, mode 0600,
//! and published as the process's namespace (`state::switch`; the old one
//! stays mapped, so a call in flight on another thread ends there). The
//! environment is updated (`IPCNS_DIR`, `IPCNS`; `IPCNS_FD` and `IPCNS_POOL_FD` removed) so
//! that exec'd programs stay in it; forked children inherit it with the
//! memory. `setenv` is not thread safe: a thread reading the environment
//! meanwhile may see it torn, as with any `setenv` (glibc's rule).
//!
//! The kernel applies the caller's SEM_UNDO adjustments of the old
//! namespace at unshare (ipc/namespace.c, kernel/fork.c ksys_unshare:
//! `exit_sem(current)`); so does this (`exit_process`). Its shm
//! attachments stay mapped and counted in the old namespace.
//!
//! # Lifetime
//! The namespace goes away with its last process, as the kernel frees an
//! IPC namespace when its last task is gone (exited, killed, or moved on
//! by another unshare), asynchronously: a guardian process
//! (`guardian/`) removes the arena and its segment files then. A
//! process is in it from the unshare on, through fork and exec, whether
//! or not it made an IPC call yet, by a descriptor: the write end of the
//! guardian's pipe, open in the process (not close-on-exec, at 100 or
//! above, named in `IPCNS_MEMBER_FD=N:INODE`). Once the last descriptor
//! is closed, the guardian keeps the namespace while any process maps
//! the arena, has an environment naming it, or may be a member it cannot
//! inspect (`guardian/scan.rs`). A process that unshares again, whole,
//! closes its old descriptor (it left that namespace). The namespace and
//! guardian are made ([`prepare`]) before `unshare` passes its other
//! flags to the kernel, so that with CLONE_NEWPID the guardian stays in
//! the caller's pid namespace; none is made where it would be a new pid
//! namespace's init (`guardian::possible`): that namespace stays until
//! `ipcns ns prune`. A name `unshare-...` is never made again by a
//! process that finds it gone (`Namespace::open_or_create`): its calls
//! fail with ENOSYS, and it says so.

use crate::{guardian, state};
use ipcns_core::{CreateOptions, Namespace, namespace};
use std::path::PathBuf;

/// Whether the process has threads besides the caller (`/proc/self/task`;
/// without /proc, none are assumed: the whole process is switched).
fn other_threads() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.take(2).count() > 1)
}

/// A namespace made for an unshare or a clone child, not yet the
/// caller's ([`prepare`], then [`commit`] or [`abandon`]).
pub struct Fresh {
    ns: Namespace,
    path: PathBuf,
    dir: PathBuf,
    name: String,
    /// The membership descriptor; none when no guardian could be made
    /// where it would outlive the namespace's processes
    /// (`guardian::possible`).
    member: Option<ipcns_sys::Fd>,
}

/// Makes a new private namespace and its guardian, before anything of
/// the caller changes: an `unshare` makes it before it passes its other
/// flags to the kernel (with CLONE_NEWPID the guardian must stay in the
/// caller's pid namespace), and gives it up ([`abandon`]) if the kernel
/// refuses them.
pub fn prepare() -> Result<Fresh, i32> {
    let old = state::opened();
    let dir: PathBuf = match old.and_then(|ns| ns.path().parent().map(|p| p.to_path_buf())) {
        Some(d) => d,
        None => namespace::dir().map_err(|_| libc::ENOMEM)?,
    };
    // Absolute: the environment names it to programs that may run from
    // elsewhere, and the guardian compares it with theirs.
    let dir = std::path::absolute(&dir).map_err(|_| libc::ENOMEM)?;
    let pid = ipcns_sys::process::getpid();
    let mut r = [0u8; 4];
    let _ = ipcns_sys::process::getrandom(&mut r, 0);
    let name = format!("unshare-{pid}-{:08x}", u32::from_ne_bytes(r));
    let path = dir.join(format!("ipcns.{name}"));
    // ipc/namespace.c create_ipc_ns: ENOMEM when it cannot be made.
    let ns = Namespace::create_at(
        &path,
        CreateOptions {
            mode: 0o600,
            ..CreateOptions::default()
        },
    )
    .map_err(|_| libc::ENOMEM)?;
    let member = if guardian::possible() {
        match guardian::start(&path, &name) {
            Ok(m) => Some(m),
            Err(_) => {
                drop(ns);
                let _ = Namespace::remove_at(&path);
                return Err(libc::ENOMEM);
            }
        }
    } else {
        None
    };
    Ok(Fresh {
        ns,
        path,
        dir,
        name,
        member,
    })
}

/// Gives up a namespace [`prepare`] made: its membership closed (its
/// guardian finds it gone and exits), its files removed.
pub fn abandon(f: Fresh) {
    drop(f.member);
    drop(f.ns);
    let _ = Namespace::remove_at(&f.path);
}

/// Switches the calling thread to the namespace [`prepare`] made: the
/// whole process when it is the process's only thread (or in a clone
/// child), else the thread alone (`state::give_own`). `in_child`: called
/// in a clone child, whose undo entries are the parent's (not applied).
pub fn commit(f: Fresh, in_child: bool) -> Result<(), i32> {
    let Fresh {
        ns,
        path,
        dir,
        name,
        member,
    } = f;
    if !in_child && other_threads() {
        // Linux gives the calling task alone the new namespace; the undo
        // list it shares with the other threads stays theirs (exit_sem
        // drops only its reference). No environment change: the
        // process's other threads exec into the process's namespace.
        if let Err(e) = state::give_own(ns) {
            drop(member);
            let _ = Namespace::remove_at(&path);
            return Err(e);
        }
        // The whole process holds the descriptor: the namespace lasts as
        // long as any of its threads or children (not named in the
        // environment, left alone here).
        if let Some(m) = member {
            let _ = m.into_raw();
        }
        return Ok(());
    }
    if let (Some(old), false) = (state::opened(), in_child) {
        let _ = old.exit_process();
    }
    state::drop_own();
    state::switch(ns);
    crate::next::set_env("IPCNS_DIR", dir.as_os_str().as_encoded_bytes());
    crate::next::set_env("IPCNS", name.as_bytes());
    crate::next::unset_env("IPCNS_FD");
    crate::next::unset_env("IPCNS_POOL_FD");
    guardian::leave();
    if let Some(m) = member {
        guardian::join(m);
    }
    Ok(())
}

/// Switches the calling thread to a new private namespace ([`prepare`],
/// then [`commit`]).
pub fn new_namespace(in_child: bool) -> Result<(), i32> {
    commit(prepare()?, in_child)
}
