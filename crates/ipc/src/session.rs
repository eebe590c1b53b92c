//! A process's session with an arena: the mapping ([`Arena`], shared by
//! every participant) and what this process keeps beside it, for itself
//! only: its record's index in the process table (`proc.rs`), its handle
//! on the heap's per-cpu caches (`heap/cache.rs`), the keys it found
//! (`recent.rs`) and its descriptor on the segment pool (`arena/pool.rs`).
//!
//! The layers above the heap (the heap's own entry points, keys, the
//! registry, the wait queues, the process table, the mechanisms) take a
//! `&Session`; the ones below it (the mapping, ids, the lock) a `&Arena`,
//! which a session derefs to.
//!
//! Three things the mechanisms need are done by the exit path above them
//! (`process/`): the caller's record (a newcomer reaps the dead, an image
//! that replaced another drops the old one's attachments), a reap, and
//! the fork handler's registration. They reach it through the session's
//! [`Upcalls`], which the namespace installs: no file below imports it.

use crate::arena::Arena;
use crate::errno::Errno;
use crate::heap::cache::Caches;
use crate::recent::Recent;
use core::sync::atomic::AtomicU64;

/// What the layers below the exit path call it for (`process::UPCALLS`).
pub struct Upcalls {
    /// The calling process's record index, made on first use
    /// (`process::me`).
    pub me: fn(&Session) -> Result<u32, Errno>,
    /// Cleans up after every process that is gone (`process::reap`).
    pub reap: fn(&Session) -> Result<u32, Errno>,
    /// Registers the session for the fork handler, which counts a child's
    /// attachments (`process::fork::register`).
    pub forks: fn(&Session),
    /// Finishes the records among these whose death words say their
    /// processes died, if they are gone, waiting for that up to the
    /// patience given, ns (`process::reap_marked`).
    pub reap_marked: fn(&Session, &[u32], u64) -> Result<u32, Errno>,
}

/// An attached arena and this process's state beside it.
pub struct Session {
    arena: Arena,
    up: &'static Upcalls,
    /// This process's record in the arena's process table: the fork
    /// generation (high half) and index + 1 (low half), 0 if none yet.
    pub(crate) own_proc: AtomicU64,
    /// The heap's per-cpu caches, if this process may use them.
    caches: Option<Caches>,
    /// Keys this process found (`recent.rs`).
    recent: Recent,
    /// Its descriptor on the segment pool (`arena/pool.rs`).
    shm_pool: crate::arena::pool::Cache,
    /// Its mapping of its record's death page (`process/death.rs`).
    pub(crate) death: crate::arena::death::Armed,
}

impl Session {
    /// A new session with `arena`, calling up through `up`: no record yet,
    /// no key remembered.
    pub fn new(arena: Arena, up: &'static Upcalls) -> Session {
        Session {
            up,
            caches: Caches::new(arena.mapping(), arena.layout()),
            own_proc: AtomicU64::new(0),
            recent: Recent::new(),
            shm_pool: crate::arena::pool::Cache::new(),
            death: Default::default(),
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

    /// Its descriptor on the segment pool (`arena/pool.rs`).
    pub(crate) fn shm_pool(&self) -> &crate::arena::pool::Cache {
        &self.shm_pool
    }

    /// The heap's per-cpu caches, if this process uses them.
    pub fn caches(&self) -> Option<&Caches> {
        self.caches.as_ref()
    }

    /// Allocates `size` bytes (zeroed) in the heap (`heap::alloc`).
    #[inline]
    pub fn alloc(&self, size: u64) -> Result<u64, Errno> {
        crate::heap::alloc(&self.arena, self.caches(), size)
    }

    /// As [`Session::alloc`], the bytes left as they were
    /// (`heap::alloc_uninit`).
    #[inline]
    pub fn alloc_uninit(&self, size: u64) -> Result<u64, Errno> {
        crate::heap::alloc_uninit(&self.arena, self.caches(), size)
    }

    /// Frees a block of `size` bytes from [`Session::alloc`]
    /// (`heap::free`).
    #[inline]
    pub fn free(&self, off: u64, size: u64) -> Result<(), Errno> {
        crate::heap::free(&self.arena, self.caches(), off, size)
    }

    /// The calling process's record index, made on first use.
    pub fn me(&self) -> Result<u32, Errno> {
        (self.up.me)(self)
    }

    /// Cleans up after every process that is gone; how many.
    pub fn reap(&self) -> Result<u32, Errno> {
        (self.up.reap)(self)
    }

    /// Finishes the records among `idxs` whose processes died (their
    /// death words marked, and gone or on their way out); how many. A
    /// marked record whose process is not yet seen on its way out is
    /// looked at again for up to `patience_ns` (a sleeper the kernel woke
    /// as it marked the word runs while the process is still dying).
    pub fn reap_marked(&self, idxs: &[u32], patience_ns: u64) -> Result<u32, Errno> {
        (self.up.reap_marked)(self, idxs, patience_ns)
    }

    /// Registers this session for the fork handler (idempotent).
    pub fn register_for_fork(&self) {
        (self.up.forks)(self)
    }
}

impl core::ops::Deref for Session {
    type Target = Arena;

    fn deref(&self) -> &Arena {
        &self.arena
    }
}
