//! What fork does to the namespaces of the forking process: the child's
//! copy of every shm attachment counts (`shm_nattch` rises, as Linux
//! counts them inside fork, in `dup_mmap`). `pthread_atfork` handlers,
//! registered at the first `shmat`, do it for the arenas with attachments:
//!
//! - prepare (parent, before the fork): the child's record is made
//!   UNBORN with the parent's attachments copied and counted
//!   (`shm::attach::prefork`), so the counts are right when fork returns;
//! - child: the child claims that record by its nonce
//!   (`proc::claim_unborn`); if it was dropped meanwhile, the child counts
//!   its inherited attachments itself (`shm::attach::inherit`);
//! - parent (after the fork): the new child is the one pid in the
//!   thread's `/proc/self/task/TID/children` that was not there before the
//!   fork; the unborn records are named after it (`proc::name_unborn`), so
//!   they are reaped as soon as that child is gone, whether or not it ran
//!   its handler. No new child: the fork failed, and the records are
//!   dropped (`proc::release_unborn`). Without that file, errno tells
//!   (glibc's fork sets it only on failure; the prepare handler clears
//!   it): a success taken for a failure (another handler set errno) is
//!   harmless, the child then finds its record dropped and counts for
//!   itself; a child killed before it claimed its record leaves it to the
//!   reapers (`proc::reap`), which drop an unborn record after a second or
//!   when its parent is gone.
//!
//! Lock: the list's mutex is held across every fork (taken by the prepare
//! handler, released by the parent and child handlers), so a fork never
//! copies it locked by another thread: such a child would wait forever
//! at its next `shmat` or namespace drop.
//!
//! # Safety
//! The registry holds addresses of `Arena`s boxed inside live
//! `Namespace`s: an arena is registered by `shmat` and unregistered by the
//! namespace's drop, before its box is freed. The handlers run while
//! those namespaces are alive (in the child, copies of the parent's), and
//! only read through `&Session`. errno is this thread's, read and written
//! through `__errno_location`.
#![allow(unsafe_code)]

use crate::errno::SysResult;
use crate::session::Session;
use crate::shm::attach;
use core::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

static ARENAS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

/// The forks in progress: `(arena, unborn record, nonce)`, the forking
/// thread's children before the fork, and the errno the prepare handler
/// found (restored by the parent handler).
struct Pending {
    records: Vec<(usize, u32, u64)>,
    children: Option<Vec<i32>>,
    errno: i32,
    /// The list, locked by this thread for the fork it is making.
    held: Option<MutexGuard<'static, Vec<usize>>>,
}

thread_local! {
    /// Per thread: two threads may fork at once; the child is a copy of
    /// the forking thread, with its copy of this.
    static PENDING: core::cell::RefCell<Pending> = const {
        core::cell::RefCell::new(Pending {
            records: Vec::new(),
            children: None,
            errno: 0,
            held: None,
        })
    };
}

/// The registered arena at `p`.
fn arena<'a>(p: usize) -> &'a Session {
    // SAFETY: see the module doc: a live, registered arena.
    unsafe { &*(p as *const Session) }
}

/// This thread's errno.
fn errno() -> &'static mut i32 {
    // SAFETY: __errno_location returns this thread's errno, valid for the
    // thread's life; it is only used on this thread.
    unsafe { &mut *libc::__errno_location() }
}

/// The record index cached by `proc::me` for `a`, if any: in a fork
/// child, the parent's.
fn own_record(a: &Session) -> Option<u32> {
    let cached = a.own_proc.load(Relaxed) as u32;
    (cached != 0).then(|| cached - 1)
}

extern "C" fn prepare() {
    let _ = PENDING.try_with(|p| p.try_borrow_mut().map(|mut p| prepare_with(&mut p)));
}

fn prepare_with(pending: &mut Pending) {
    pending.records.clear();
    let list = ARENAS.lock().unwrap_or_else(PoisonError::into_inner);
    for &p in list.iter() {
        let a = arena(p);
        // This process's own record (a cached index may be a parent's).
        if let Ok(Some(parent)) = crate::process::adopt(a)
            && let Ok(Some((child, nonce))) = prefork(a, parent)
        {
            pending.records.push((p, child, nonce));
        }
    }
    pending.held = Some(list);
    pending.children = if pending.records.is_empty() {
        None
    } else {
        crate::lock::thread_children()
    };
    pending.errno = *errno();
    *errno() = 0;
}

/// The child this fork made, told by the thread's children before and
/// after it: `Some(Some(pid))`, `Some(None)` when there is none (the fork
/// failed), `None` when the lists cannot tell.
fn new_child(before: Option<Vec<i32>>) -> Option<Option<i32>> {
    let (before, after) = (before?, crate::lock::thread_children()?);
    let mut new = after.into_iter().filter(|p| !before.contains(p));
    match (new.next(), new.next()) {
        (None, _) => Some(None),
        (Some(pid), None) => Some(Some(pid)),
        _ => None,
    }
}

extern "C" fn in_parent() {
    let _ = PENDING.try_with(|p| p.try_borrow_mut().map(|mut p| parent_with(&mut p)));
}

fn parent_with(pending: &mut Pending) {
    let saved = *errno();
    if !pending.records.is_empty() {
        let before = pending.children.take();
        // Without the lists, errno tells: glibc's fork sets it only when
        // it fails (a stray errno from another handler only makes the
        // child count for itself).
        let outcome = new_child(before).or(if saved != 0 { Some(None) } else { None });
        for (p, child, nonce) in pending.records.drain(..) {
            let _ = match outcome {
                Some(Some(pid)) => crate::proc::name_unborn(arena(p), child, nonce, pid),
                Some(None) => crate::process::release_unborn(arena(p), child, nonce),
                None => Ok(()),
            };
        }
    }
    drop(pending.held.take());
    *errno() = if saved != 0 { saved } else { pending.errno };
}

extern "C" fn in_child() {
    // A lock held across fork by another parent thread would never be
    // released here: skip rather than wait (the counts are then low by
    // what that thread was registering).
    // The forking thread held the list across the fork: it is whole here,
    // and released once walked.
    let (claimed, held) = PENDING
        .try_with(|p| {
            p.try_borrow_mut().map_or((Vec::new(), None), |mut p| {
                *errno() = p.errno;
                (p.records.drain(..).collect::<Vec<_>>(), p.held.take())
            })
        })
        .unwrap_or_default();
    let Some(list) = held else { return };
    for &p in list.iter() {
        let a = arena(p);
        let mine = claimed.iter().find(|(q, _, _)| *q == p);
        if let Some(&(_, child, nonce)) = mine
            && crate::proc::claim_unborn(a, child, nonce) == Ok(true)
        {
            // Its attachments must be dropped the instant it dies.
            let _ = super::death::arm(a, child);
            continue;
        }
        if let Some(parent) = own_record(a) {
            let _ = crate::shm::attach::inherit(a, parent);
        }
    }
}

/// Registers `a` (it has attachments) for the fork handlers.
pub fn register(a: &Session) {
    HANDLER.call_once(|| {
        // SAFETY: registers the handlers of the module doc.
        unsafe { libc::pthread_atfork(Some(prepare), Some(in_parent), Some(in_child)) };
    });
    if let Ok(mut list) = ARENAS.lock() {
        let p = a as *const Session as usize;
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

/// Unregisters `a` (its namespace is being dropped).
pub fn unregister(a: &Session) {
    if let Ok(mut list) = ARENAS.lock() {
        let p = a as *const Session as usize;
        list.retain(|&x| x != p);
    }
}

/// In a process about to fork: makes the child's record now, with every
/// attachment of record `parent` copied and counted, so that `shm_nattch`
/// includes the child's attachments as soon as `fork` returns, as Linux
/// counts them inside fork (`dup_mmap` -> `shm_open`). Returns the unborn
/// record and the nonce the child claims it with
/// (`proc::claim_unborn`), or None when there is nothing to inherit.
fn prefork(a: &Session, parent: u32) -> SysResult<Option<(u32, u64)>> {
    let pid = crate::sys::process::getpid();
    let entries = attach::counted(a, parent, pid)?;
    if entries.is_empty() {
        return Ok(None);
    }
    let (child, nonce) = crate::proc::make_unborn(a, parent)?;
    if let Err(e) = attach::count_copies(a, entries, child, pid) {
        let _ = super::release_unborn(a, child, nonce);
        return Err(e);
    }
    Ok(Some((child, nonce)))
}
