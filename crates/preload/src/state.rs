//! Which namespace the process uses: chosen once, at the process's first
//! IPC call (lazily: a program that never calls one never touches an
//! arena). An inherited descriptor `IPCNS_FD=N` (set by `ipcns run`) wins
//! if it is open on a valid arena; else the namespace `$IPCNS` (default
//! `default`) in `$IPCNS_DIR` (default `/dev/shm/ipcns-UID`), created if
//! missing, as the `ipcns` commands find it. If it cannot be opened, one
//! line says why on stderr and every IPC call fails with ENOSYS (what a
//! kernel without System V IPC answers).
//!
//! The choice is published once for good (`once.rs`): after it, the hot
//! path is one acquire load. The first caller makes it while the others
//! wait (a spin flag, reset in a fork child, so a fork during the choice
//! cannot leave the child waiting for a thread it does not have). A call
//! that arrives on the thread that is making the choice (another preloaded
//! library intercepting something the choice does, and calling us back)
//! fails at once with ENOSYS instead of waiting for itself.

use crate::hot::HOT;
use crate::once::Published;
use core::cell::Cell;
use core::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use ipcns_core::{Errno, Namespace, SysResult, namespace};

/// The namespace, once chosen and opened.
static NS: &Published<Namespace> = &HOT.ns;
/// Why there is none, once chosen and failed (an errno; 0 not yet).
static FAILED: AtomicI32 = AtomicI32::new(0);
/// 1 while a thread is choosing it.
static BUSY: AtomicU32 = AtomicU32::new(0);
thread_local! {
    /// This thread is choosing the namespace.
    static CHOOSING: Cell<bool> = const { Cell::new(false) };
}

/// The process's namespace (chosen at the first call).
#[inline(always)]
pub fn namespace() -> SysResult<&'static Namespace> {
    match NS.get() {
        Some(ns) => Ok(ns),
        None => choose(),
    }
}

/// The namespace or the reason, if the choice was made.
fn chosen() -> Option<SysResult<&'static Namespace>> {
    if let Some(ns) = NS.get() {
        return Some(Ok(ns));
    }
    // Acquire: pairs with the Release that records a failure.
    match FAILED.load(Ordering::Acquire) {
        0 => None,
        e => Some(Err(Errno(e))),
    }
}

/// The namespace if it has been opened (nothing is chosen here).
pub fn opened() -> Option<&'static Namespace> {
    NS.get()
}

#[cold]
fn choose() -> SysResult<&'static Namespace> {
    if CHOOSING.try_with(Cell::get).unwrap_or(false) {
        // Re-entered while choosing it, on this very thread.
        return Err(Errno::ENOSYS);
    }
    loop {
        if let Some(r) = chosen() {
            return r;
        }
        // Acquire: pairs with the Release that ends a choice, so its
        // published value is visible (its publication orders it too).
        if BUSY
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    /// Ends the choice however it ends (a panic included).
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            let _ = CHOOSING.try_with(|c| c.set(false));
            BUSY.store(0, Ordering::Release);
        }
    }
    let _done = Done;
    if let Some(r) = chosen() {
        return r;
    }
    let _ = CHOOSING.try_with(|c| c.set(true));
    match open() {
        Ok(ns) => Ok(NS.publish(ns)),
        Err(e) => {
            FAILED.store(e.raw(), Ordering::Release);
            Err(e)
        }
    }
}

/// Opens the namespace (see the module doc).
fn open() -> SysResult<Namespace> {
    let name = namespace::default_name();
    let ns = match from_fd() {
        Some(ns) => Ok(ns),
        None => Namespace::open_or_create(&name),
    };
    match ns {
        Ok(ns) => {
            // An exec replaced the image that attached before: its
            // attachments went with the old address space.
            let _ = ns.after_exec();
            Ok(ns)
        }
        Err(e) => {
            crate::next::say(&format!(
                "ipcns: cannot open namespace {name}: {e}; System V IPC calls fail with ENOSYS\n"
            ));
            Err(Errno::ENOSYS)
        }
    }
}

/// The namespace of the descriptor `IPCNS_FD` names, if it is open on a
/// valid arena. It is mapped through a duplicate (close-on-exec, closed
/// once mapped); `N` itself stays open for the programs this one starts.
/// A process at its RLIMIT_NOFILE, which cannot make the duplicate, maps
/// it through `N` itself, which it leaves open: the descriptor is the
/// program's.
fn from_fd() -> Option<Namespace> {
    let fd: i32 = std::env::var("IPCNS_FD").ok()?.trim().parse().ok()?;
    // The segment directory sits beside the arena's path: the one the
    // environment names if it is the same file (only when IPCNS_DIR is
    // set: the default directory would be made just to compare).
    let hint = std::env::var_os("IPCNS_DIR")
        .filter(|d| !d.is_empty())
        .and_then(|_| namespace::path_of(&namespace::default_name()).ok());
    let ns = match crate::next::dup_cloexec(fd) {
        Some(owned) => Namespace::open_fd(owned, hint.as_deref()).ok(),
        // Not open (EBADF at the first call on it), or no room for a
        // duplicate: in place.
        None => Namespace::open_fd_in_place(fd, hint.as_deref()).ok(),
    }?;
    // The segment pool `ipcns run` handed down with the arena: reachable
    // through it even by a process that may not open it by its path (one
    // that changed uid, in a namespace not created shared). Duplicated
    // (close-on-exec); the number stays the program's, for the programs it
    // starts.
    if let Some(pool) = std::env::var("IPCNS_POOL_FD")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .and_then(crate::next::dup_cloexec)
    {
        ns.adopt_pool(pool);
    }
    Some(ns)
}

/// Arranges that in a fork child a choice another parent thread was
/// making is not going on (the core's fork handler clears [`BUSY`]).
/// Called once, at load.
pub fn forked() {
    ipcns_core::creds::clear_in_fork_child(&BUSY);
}

/// Makes `ns` the process's namespace from now on (`unshare`). The one it
/// replaces stays mapped for good: a call running on another thread keeps
/// a valid reference and finishes there.
pub fn switch(ns: Namespace) -> &'static Namespace {
    NS.replace(ns)
}
