//! The `*get` of a key this process has looked up before, without the
//! registry lock (seeds 001, 002: a lookup should cost a hash, and here
//! not even a lock).
//!
//! Each process remembers, per namespace, the index and slot generation
//! of the keys it found ([`Recent`], process-local memory). A later
//! `semget`/`msgget`/`shmget` of such a key reads that slot without the
//! registry lock, as lookups by id already do: the index's used bit first
//! (so the slot's page is one that was reserved), then the slot's state,
//! generation and key, the mechanism's `more_checks` and `ipcperms`, and
//! then the state, generation and key again. The generation never repeats
//! in a slot, so a slot that still has it after the checks held the very
//! object the key names throughout: the answer is the one a locked lookup
//! would have given at that moment. The permission fields are read under
//! the object's `perm_seq` (IPC_SET makes it odd while it writes them), so
//! an owner and a mode from two different IPC_SETs are never combined.
//!
//! Anything else (a key not remembered, an entry torn by two threads, an
//! object removed, recreated or changing) falls back to the locked path,
//! which remembers what it finds. The key table itself is never read
//! without the lock: a table that grows is freed, and its pages may be
//! returned to the system.
//!
//! Each mechanism has [`N`] entries (as many as the default `ipc_mni`
//! allows objects), indexed as the key table indexes keys (`hash::home`:
//! consecutive keys, the `k++` and ftok patterns, never collide), so the
//! cost of a lookup does not grow with the number of keys in use. The
//! entries are allocated zeroed (`calloc`: untouched pages cost nothing),
//! so a process pays 16 bytes of memory per key it has looked up.
//!
//! # Safety
//! [`Recent::new`] allocates the entries with `alloc_zeroed` and takes
//! ownership of them as a boxed slice of `AtomicU64`: all-zero bits are a
//! valid `AtomicU64`, the layout is the slice's own, and a null result is
//! handled (no cache: every lookup takes the lock).
#![allow(unsafe_code)]

use crate::arena::layout::Mech;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// Keys remembered per mechanism (a power of two).
const N: usize = 32768;

/// Words per entry: `key << 32 | (idx + 1)` (0: empty) and the slot's
/// generation. The two words may be read torn: whatever pair is read is
/// checked against the slot itself.
const WORDS: usize = 2;

/// The keys this process found in one namespace (process-local).
pub struct Recent {
    /// `3 * N` entries of [`WORDS`] words, mechanism by mechanism; empty
    /// if they could not be allocated.
    w: Box<[AtomicU64]>,
}

impl Recent {
    pub fn new() -> Recent {
        let len = 3 * N * WORDS;
        let Ok(layout) = std::alloc::Layout::array::<AtomicU64>(len) else {
            return Recent { w: Box::new([]) };
        };
        // SAFETY: a non-zero layout; see the module's `# Safety`.
        let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
        if p.is_null() {
            return Recent { w: Box::new([]) };
        }
        // SAFETY: `p` is a fresh allocation of `len` zeroed `AtomicU64`s
        // with the global allocator and this very layout, owned by the box
        // from here on.
        let w = unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, len)) };
        Recent { w }
    }

    /// The two words of `key`'s entry (none without a cache).
    #[inline(always)]
    fn entry(&self, mech: Mech, key: i32) -> Option<(&AtomicU64, &AtomicU64)> {
        let i = (mech as usize * N + crate::hash::home(key, N as u32) as usize) * WORDS;
        Some((self.w.get(i)?, self.w.get(i + 1)?))
    }

    /// Remembers that `key` is the object of generation `generation` at
    /// `idx`.
    pub fn remember(&self, mech: Mech, key: i32, idx: u32, generation: u64) {
        let Some((kv, g)) = self.entry(mech, key) else {
            return;
        };
        kv.store(0, Relaxed);
        g.store(generation, Relaxed);
        kv.store(u64::from(key as u32) << 32 | (u64::from(idx) + 1), Relaxed);
    }

    #[inline(always)]
    pub(crate) fn recall(&self, mech: Mech, key: i32) -> Option<(u32, u64)> {
        let (kv, g) = self.entry(mech, key)?;
        let kv = kv.load(Relaxed);
        if (kv >> 32) as u32 != key as u32 {
            return None;
        }
        let idx = (kv as u32).checked_sub(1)?;
        Some((idx, g.load(Relaxed)))
    }
}
