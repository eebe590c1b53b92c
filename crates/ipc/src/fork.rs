//! What a fork child must do for the namespaces of its parent: its copy of
//! every shm attachment counts (`shm_nattch` rises, as Linux counts them in
//! `dup_mmap`). A `pthread_atfork` child handler, registered at the first
//! `shmat`, walks the arenas that have attachments.
//!
//! Lock: the list's mutex is held across every fork (taken by the prepare
//! handler, released by the parent and child handlers), so a fork never
//! copies it locked by another thread: such a child would wait forever
//! at its next `shmat` or namespace drop.
//!
//! # Safety
//! The registry holds addresses of `Arena`s boxed inside live
//! `Namespace`s: an arena is registered by `shmat` and unregistered by the
//! namespace's drop, before its box is freed. The child handler runs in
//! the single thread of the new child, where those namespaces (copies of
//! the parent's) are still alive, and only reads through `&Arena`.
#![allow(unsafe_code)]

use crate::arena::Arena;
use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

static ARENAS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

thread_local! {
    /// The list, locked by this thread for the fork it is making.
    static HELD: RefCell<Option<MutexGuard<'static, Vec<usize>>>> = const { RefCell::new(None) };
}

extern "C" fn before_fork() {
    let list = ARENAS.lock().unwrap_or_else(PoisonError::into_inner);
    HELD.with(|h| *h.borrow_mut() = Some(list));
}

extern "C" fn in_parent() {
    HELD.with(|h| drop(h.borrow_mut().take()));
}

extern "C" fn in_child() {
    // The forking thread held the list across the fork: it is whole here,
    // and released once walked.
    let Some(list) = HELD.with(|h| h.borrow_mut().take()) else {
        return;
    };
    for &p in list.iter() {
        // SAFETY: see the module doc: a live, registered arena.
        let a = unsafe { &*(p as *const Arena) };
        let parent = a.own_proc.load(core::sync::atomic::Ordering::Relaxed) as u32;
        if parent != 0 {
            let _ = crate::shm::attach::inherit(a, parent - 1);
        }
    }
}

/// Registers `a` (it has attachments) for the fork handler.
pub fn register(a: &Arena) {
    HANDLER.call_once(|| {
        // SAFETY: registers the handlers above (see the module doc).
        unsafe { libc::pthread_atfork(Some(before_fork), Some(in_parent), Some(in_child)) };
    });
    if let Ok(mut list) = ARENAS.lock() {
        let p = a as *const Arena as usize;
        if !list.contains(&p) {
            list.push(p);
        }
    }
}

/// Unregisters `a` (its namespace is being dropped).
pub fn unregister(a: &Arena) {
    if let Ok(mut list) = ARENAS.lock() {
        let p = a as *const Arena as usize;
        list.retain(|&x| x != p);
    }
}
