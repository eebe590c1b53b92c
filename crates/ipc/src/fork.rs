//! What a fork child must do for the namespaces of its parent: its copy of
//! every shm attachment counts (`shm_nattch` rises, as Linux counts them in
//! `dup_mmap`). A `pthread_atfork` child handler, registered at the first
//! `shmat`, walks the arenas that have attachments.
//!
//! # Safety
//! The registry holds addresses of `Arena`s boxed inside live
//! `Namespace`s: an arena is registered by `shmat` and unregistered by the
//! namespace's drop, before its box is freed. The child handler runs in
//! the single thread of the new child, where those namespaces (copies of
//! the parent's) are still alive, and only reads through `&Arena`.
#![allow(unsafe_code)]

use crate::arena::Arena;
use std::sync::{Mutex, Once};

static ARENAS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

extern "C" fn in_child() {
    // A lock held across fork by another parent thread would never be
    // released here: skip rather than wait (the counts are then low by
    // what that thread was registering).
    let Ok(list) = ARENAS.try_lock() else { return };
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
        // SAFETY: registers a child handler (see the module doc).
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
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
