//! A process's session with an arena: the mapping ([`Arena`], shared by
//! every participant) and what this process keeps beside it, for itself
//! only: its record's index in the process table (`proc.rs`), its handle
//! on the heap's per-cpu caches (`heap/cache.rs`), and the keys it found
//! (`recent.rs`).
//!
//! The layers above the heap (the heap's own entry points, keys, the
//! registry, the wait queues, the process table, the mechanisms) take a
//! `&Session`; the ones below it (the mapping, ids, the lock) a `&Arena`,
//! which a session derefs to.

use crate::arena::Arena;
use crate::heap::cache::Caches;
use crate::recent::Recent;
use core::sync::atomic::AtomicU64;

/// An attached arena and this process's state beside it.
pub struct Session {
    arena: Arena,
    /// This process's record in the arena's process table: the fork
    /// generation (high half) and index + 1 (low half), 0 if none yet.
    pub(crate) own_proc: AtomicU64,
    /// The heap's per-cpu caches, if this process may use them.
    caches: Option<Caches>,
    /// Keys this process found (`recent.rs`).
    recent: Recent,
}

impl Session {
    /// A new session with `arena`: no record yet, no key remembered.
    pub fn new(arena: Arena) -> Session {
        Session {
            caches: Caches::new(arena.mapping(), arena.layout()),
            own_proc: AtomicU64::new(0),
            recent: Recent::new(),
            arena,
        }
    }

    /// The mapping.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The keys this process found (`recent.rs`).
    pub fn recent(&self) -> &Recent {
        &self.recent
    }

    /// The heap's per-cpu caches, if this process uses them.
    pub fn caches(&self) -> Option<&Caches> {
        self.caches.as_ref()
    }
}

impl core::ops::Deref for Session {
    type Target = Arena;

    fn deref(&self) -> &Arena {
        &self.arena
    }
}
