//! Which namespace the process uses: chosen once, at the process's first
//! IPC call (lazily: a program that never calls one never touches an
//! arena). An inherited descriptor `IPCNS_FD=N` (set by `ipcns run`) wins
//! if it is open on a valid arena; else the namespace `$IPCNS` (default
//! `default`) in `$IPCNS_DIR` (default `/dev/shm/ipcns-UID`), created if
//! missing, as the `ipcns` commands find it, but for a name an unshare
//! gave (`unshare-...`): that one is gone with its last process and never
//! made again (a process that lost its membership finds it gone). If it
//! cannot be opened, one line says why on stderr and every IPC call fails
//! with ENOSYS (what a kernel without System V IPC answers).
//!
//! The choice is published once for good (`once.rs`): after it, the hot
//! path is one acquire load. The first caller makes it while the others
//! wait (a spin flag, reset in a fork child, so a fork during the choice
//! cannot leave the child waiting for a thread it does not have). A call
//! that arrives on the thread that is making the choice (another preloaded
//! library intercepting something the choice does, and calling us back)
//! fails at once with ENOSYS instead of waiting for itself.
//!
//! A thread that unshares CLONE_NEWIPC while the process has other threads
//! gets a namespace of its own, as Linux gives the calling task alone a
//! new IPC namespace (`give_own`): the threads it creates inherit it
//! (`ffi/thread.rs`), a fork from it gives the child its namespace (the
//! thread-local is copied with the memory), the others keep theirs.
//!
//! # Safety
//! The thread namespaces are boxed and leaked for the life of the
//! process, registered in [`THREAD_NS`] before any thread can name them;
//! a pointer read from there or from a thread's [`OWN`] is null or one of
//! them.
#![allow(unsafe_code)]

use crate::hot::HOT;
use crate::once::Published;
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use ipcns_core::{ArenaError, Errno, Namespace, SysResult, namespace};

/// The namespace, once chosen and opened.
static NS: &Published<Namespace> = &HOT.ns;
/// Why there is none, once chosen and failed (an errno; 0 not yet).
static FAILED: AtomicI32 = AtomicI32::new(0);
/// 1 while a thread is choosing it.
static BUSY: AtomicU32 = AtomicU32::new(0);
thread_local! {
    /// This thread is choosing the namespace.
    static CHOOSING: Cell<bool> = const { Cell::new(false) };
    /// The namespace of this thread alone, if it has one (it, or the
    /// thread that created it, unshared CLONE_NEWIPC while the process
    /// had other threads): null for the process's. No destructor.
    static OWN: Cell<*const Namespace> = const { Cell::new(core::ptr::null()) };
}

/// Some thread has a namespace of its own ([`OWN`]): the hot path looks
/// at the thread-local only then (in a shared object each access is a
/// `__tls_get_addr` call).
static PER_THREAD: AtomicBool = AtomicBool::new(false);

/// Every namespace a thread of this process was given alone (for the
/// exit and the wait, which finish the process's records in each). Set
/// once each, never freed (a thread may use its namespace until the
/// process ends); up to [`THREAD_NS_MAX`], then no more are given (the
/// unshare fails with ENOMEM).
const THREAD_NS_MAX: usize = 16;
static THREAD_NS: [AtomicPtr<Namespace>; THREAD_NS_MAX] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; THREAD_NS_MAX];

/// The calling thread's namespace (the process's, chosen at the first
/// call, unless the thread has one of its own).
#[inline(always)]
pub fn namespace() -> SysResult<&'static Namespace> {
    if PER_THREAD.load(Ordering::Relaxed)
        && let Some(ns) = own()
    {
        return Ok(ns);
    }
    match NS.get() {
        Some(ns) => Ok(ns),
        None => choose(),
    }
}

/// The calling thread's own namespace, if it has one.
pub fn own() -> Option<&'static Namespace> {
    if !PER_THREAD.load(Ordering::Relaxed) {
        return None;
    }
    let p = OWN.try_with(Cell::get).unwrap_or(core::ptr::null());
    // SAFETY: null, or a namespace given by `give_own`, leaked for the
    // life of the process.
    unsafe { p.as_ref() }
}

/// Makes `ns` the calling thread's own namespace (`unshare` in a process
/// with other threads): from now on its calls, and those of the threads
/// it creates (`ffi/thread.rs`), use it; the process's other threads keep
/// theirs. ENOMEM when [`THREAD_NS_MAX`] were given already.
pub fn give_own(ns: Namespace) -> Result<&'static Namespace, i32> {
    let p = Box::into_raw(Box::new(ns));
    let Some(slot) = THREAD_NS.iter().find(|s| {
        s.compare_exchange(
            core::ptr::null_mut(),
            p,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_ok()
    }) else {
        // SAFETY: made just above and given to nobody.
        drop(unsafe { Box::from_raw(p) });
        return Err(libc::ENOMEM);
    };
    let _ = slot;
    // SAFETY: leaked for good (registered above).
    let ns: &'static Namespace = unsafe { &*p };
    inherit(ns);
    Ok(ns)
}

/// Gives the calling thread `ns` (one [`give_own`] made) as its own: a
/// thread created by one that had it.
pub fn inherit(ns: &'static Namespace) {
    PER_THREAD.store(true, Ordering::Relaxed);
    let _ = OWN.try_with(|c| c.set(ns));
}

/// The calling thread goes back to the process's namespace (it unshared
/// again, alone in its process: the new one became the process's).
pub fn drop_own() {
    if PER_THREAD.load(Ordering::Relaxed) {
        let _ = OWN.try_with(|c| c.set(core::ptr::null()));
    }
}

/// The namespaces threads of this process were given alone.
pub fn thread_namespaces() -> impl Iterator<Item = &'static Namespace> {
    THREAD_NS.iter().filter_map(|s| {
        // SAFETY: null, or leaked for good by `give_own`.
        unsafe { s.load(Ordering::Acquire).as_ref() }
    })
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

/// The calling thread's namespace if it has been opened (nothing is
/// chosen here).
pub fn opened() -> Option<&'static Namespace> {
    own().or_else(|| NS.get())
}

/// Every namespace this process has opened and uses: the process's and
/// those of threads that unshared alone (the exit and the wait finish the
/// process's records in each).
pub fn all_opened() -> impl Iterator<Item = &'static Namespace> {
    NS.get().into_iter().chain(thread_namespaces())
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
            // An unshared namespace is gone with its last process and
            // never made again by name (`unshare.rs`).
            let why = if namespace::is_unshared(&name) && matches!(e, ArenaError::NotFound { .. }) {
                " (an unshared namespace is removed with its last process, never made again)"
            } else {
                ""
            };
            crate::next::say(&format!(
                "ipcns: cannot open namespace {name}: {e}{why}; System V IPC calls fail with ENOSYS\n"
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
