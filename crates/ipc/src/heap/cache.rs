//! The heap's per-cpu caches of free small blocks (design.md: "per-cpu
//! caches built on rseq"): per cpu and per class up to 16 KiB, a bounded
//! stack of free block offsets, pushed and popped in restartable sequences
//! (`ipcns_rseq::ops::strict`) without the heap lock.
//!
//! # Protocol
//! A cpu's cache is written only by rseq sections running on that cpu: by
//! one thread at a time, whatever its process, since a cpu runs one thread
//! at a time and the kernel aborts a section (nothing committed) when its
//! thread is preempted, migrated or signalled. Nobody writes another cpu's
//! cache; audits only read them. A block popped is the popper's, a block
//! on a stack is free. A thread that cannot run a section (no rseq area)
//! leaves the caches alone and takes the heap lock and the global lists
//! (`strict` answers `None`, never an atomic commit beside a plain one).
//! Processes in the atomic per-cpu mode never meet caches: an arena made by
//! one has none (`cache_cpus` 0), and one of the other mode is refused at
//! attach. A process that would see a cpu without a cache (more possible
//! cpus than the arena's `cache_cpus`) does not use them either.
//!
//! Each push and each pop is one commit (the count): a process killed at
//! any instruction leaves the stack as before or as after, so a block is
//! at worst leaked (popped by a process that died holding it, or pushed by
//! one that died before the commit), never on a stack and owned.
//!
//! Hostile content: the count is compared with the capacity inside the
//! section (a count out of range is reset to 0 by the cpu's next user, the
//! offsets it covered leaked); every offset popped is checked by the heap
//! (in the heap, aligned for its class) before it is used, and dropped
//! otherwise.
//!
//! # Safety
//! [`Caches`] holds the address of the arena mapping's cache region: inside
//! the mapping (`Mapping::ptr_at`), 64-aligned (a page-aligned offset of a
//! page-aligned mapping), `cache_cpus >= possible_cpus` slots of
//! `CPU_CACHE_SIZE` bytes (checked before `Slots::new`, which would
//! panic). The `Caches` lives in the `Arena` beside the `Mapping` and is
//! only reached through `&Arena`, so the mapping outlives every use. Every
//! write to the region is one of the `strict` operations on these slots
//! (the contract of `Slots::new` and of the operations); the region's
//! fields are atomics, read elsewhere only through the arena's views.
#![allow(unsafe_code)]

use crate::arena::Arena;
use crate::arena::layout::{CPU_CACHE_SIZE, Layout, MAX_CACHE_CPUS};
use crate::arena::map::Mapping;
use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;
use ipcns_rseq::ops::strict;
use ipcns_rseq::{BadCount, Index, Outcome, Slots};

/// Classes with a cache: 32 B to 16 KiB.
pub const CACHED_CLASSES: usize = 10;
/// Offsets one stack holds at most.
pub const CACHE_CAP: usize = 15;
/// Bytes one cpu may keep cached per class, at most (and less in a small
/// heap: see [`Caches::limit`]).
const CLASS_BUDGET: u64 = 64 << 10;

/// One class's stack: the count, then up to [`CACHE_CAP`] offsets of free
/// blocks, bottom first (the `ipcns_rseq` stack encoding).
///
/// # Layout
/// 128 bytes: `count` @0, `items` @8.
#[repr(C, align(64))]
pub struct CacheStack {
    pub count: AtomicU64,
    pub items: [AtomicU64; CACHE_CAP],
}

/// One cpu's cache. Written only by rseq sections on its cpu (module doc).
///
/// # Layout
/// 1280 bytes (`CPU_CACHE_SIZE`): `stacks` @0, 128 bytes per class.
#[repr(C, align(64))]
pub struct CpuCache {
    pub stacks: [CacheStack; CACHED_CLASSES],
}

const _: () = {
    assert!(size_of::<CacheStack>() == 128);
    assert!(offset_of!(CacheStack, items) == 8);
    assert!(size_of::<CpuCache>() as u64 == CPU_CACHE_SIZE);
    assert!(offset_of!(CpuCache, stacks) == 0);
};

// repr(C), atomics only; no Drop.
crate::arena::map::shared_types!(CpuCache);

/// `cache_cpus` for a new arena: this process's possible cpus in an rseq
/// mode, none in the atomic fallback (the stacks need rseq).
pub fn cache_cpus() -> u32 {
    let n = possible_cpus();
    if ipcns_rseq::mode().uses_atomics() || n > MAX_CACHE_CPUS as usize {
        0
    } else {
        n as u32
    }
}

/// The possible cpus (ipcns-rseq's count), read here through raw system
/// calls the first time, so that ipcns-rseq never reads the file through
/// libc (which another preloaded library may intercept).
fn possible_cpus() -> usize {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut buf = [0u8; 256];
        if let Ok(n) = crate::sys::fs::read_into(c"/sys/devices/system/cpu/possible", &mut buf)
            && let Ok(text) = core::str::from_utf8(&buf[..n])
        {
            ipcns_rseq::possible_cpus_from(text);
        }
    });
    ipcns_rseq::possible_cpus()
}

/// What a pop found.
pub(super) enum Pop {
    /// An offset, not yet checked.
    Block(u64),
    Empty,
    /// The count was out of range (nothing read): reset it.
    BadCount(u64),
}

/// This process's handle on the arena's caches.
pub struct Caches {
    slots: Slots,
    /// Per class, the most offsets a stack is filled to (0: not cached).
    limits: [u32; CACHED_CLASSES],
}

impl Caches {
    /// The caches of the arena mapped at `map` with layout `l`, if this
    /// process may use them (module doc).
    pub(crate) fn new(map: &Mapping, l: &Layout) -> Option<Caches> {
        let cpus = l.cache_cpus as usize;
        if cpus == 0 || cpus < possible_cpus() || ipcns_rseq::mode().uses_atomics() {
            return None;
        }
        let base = map.ptr_at(l.caches, l.cache_cpus as u64 * CPU_CACHE_SIZE)?;
        if !(base as usize).is_multiple_of(64) {
            return None;
        }
        // SAFETY: module doc: `cpus` slots of CPU_CACHE_SIZE bytes at
        // `base`, inside the mapping that outlives `self`, 64-aligned,
        // `cpus >= possible_cpus`; written only through `strict`.
        let slots = unsafe { Slots::new(base, CPU_CACHE_SIZE as usize, cpus) };
        Some(Caches {
            slots,
            limits: limits(l),
        })
    }

    /// How many offsets class `c`'s stacks are filled to (0: the class is
    /// not cached in this arena).
    pub fn limit(&self, c: usize) -> u32 {
        self.limits.get(c).copied().unwrap_or(0)
    }

    /// Pops an offset from class `c`'s stack on this cpu; `None` when this
    /// thread cannot run the section.
    pub(super) fn pop(&self, c: usize) -> Option<Pop> {
        let off = stack_off(c)?;
        loop {
            // SAFETY: module doc; the stack at `off` has CACHE_CAP words
            // after its count, inside every slot.
            match unsafe { strict::stack_pop(&self.slots, Index::Cpu, off, CACHE_CAP as u32) }? {
                Ok(Outcome::Success { value, .. }) => return Some(Pop::Block(value)),
                Ok(Outcome::Miss { .. }) => return Some(Pop::Empty),
                Ok(Outcome::Abort) => {}
                Err(BadCount(n)) => return Some(Pop::BadCount(n)),
            }
        }
    }

    /// Pushes `block` on class `c`'s stack on this cpu: `Some(true)` if it
    /// went, `Some(false)` if the stack holds its limit already, `None`
    /// when this thread cannot run the section.
    pub(super) fn push(&self, c: usize, block: u64) -> Option<bool> {
        let off = stack_off(c)?;
        let limit = self.limit(c);
        loop {
            // SAFETY: as in `pop`; `limit <= CACHE_CAP`.
            match unsafe { strict::stack_push(&self.slots, Index::Cpu, off, limit, block) }? {
                Outcome::Success { .. } => return Some(true),
                Outcome::Miss { .. } => return Some(false),
                Outcome::Abort => {}
            }
        }
    }

    /// Empties class `c`'s stack on this cpu if its count is still `bad`
    /// (out of range: its offsets are leaked).
    pub(super) fn reset(&self, c: usize, bad: u64) {
        let Some(off) = stack_off(c) else {
            return;
        };
        // Only aborts repeat (a preemption or a signal in the section).
        loop {
            // SAFETY: as in `pop`; the count word of the stack.
            let o = unsafe { strict::cmp_store(&self.slots, Index::Cpu, off, bad, 0) };
            if o != Some(Outcome::Abort) {
                return;
            }
        }
    }
}

/// Offset of class `c`'s stack in a slot, if `c` is cached.
fn stack_off(c: usize) -> Option<usize> {
    (c < CACHED_CLASSES).then(|| offset_of!(CpuCache, stacks) + c * size_of::<CacheStack>())
}

/// Per class, how many offsets a stack is filled to: [`CACHE_CAP`], or
/// fewer so that a cpu keeps at most [`CLASS_BUDGET`] bytes of a class,
/// and less in a small heap: all caches together hold at most a
/// hundredth of it (a 1 MiB heap caches only blocks up to 512 bytes).
fn limits(l: &Layout) -> [u32; CACHED_CLASSES] {
    let heap = l.size.saturating_sub(l.heap_off);
    let cpus = u64::from(l.cache_cpus.max(1));
    let budget = CLASS_BUDGET.min(heap / cpus / 1024);
    core::array::from_fn(|c| {
        let size = 32u64 << c;
        (budget / size).min(CACHE_CAP as u64) as u32
    })
}

/// The view of cpu `cpu`'s cache (any process may read every cache).
pub(super) fn view(a: &Arena, cpu: u32) -> Option<&CpuCache> {
    let l = a.layout();
    (cpu < l.cache_cpus)
        .then(|| {
            a.view::<CpuCache>(l.caches + u64::from(cpu) * CPU_CACHE_SIZE)
                .ok()
        })
        .flatten()
}

/// The bytes on every stack (their counts times their classes; a count
/// out of range counts nothing), read without a lock.
pub(super) fn cached_bytes(a: &Arena) -> u64 {
    (0..a.layout().cache_cpus)
        .filter_map(|cpu| view(a, cpu))
        .flat_map(|k| k.stacks.iter().enumerate())
        .map(|(c, st)| match st.count.load(Relaxed) {
            n if n <= CACHE_CAP as u64 => n * (32 << c),
            _ => 0,
        })
        .sum()
}

/// What the caches hold, read without a lock: per cpu and class, the count
/// and the offsets below it (at most [`CACHE_CAP`]; a count out of range
/// gives none).
pub(super) fn snapshot(a: &Arena) -> Vec<(u32, usize, u64, Vec<u64>)> {
    let mut out = Vec::new();
    for cpu in 0..a.layout().cache_cpus {
        let Some(k) = view(a, cpu) else {
            continue;
        };
        for (c, st) in k.stacks.iter().enumerate() {
            let n = st.count.load(Relaxed);
            let items = st
                .items
                .iter()
                .take(if n <= CACHE_CAP as u64 { n as usize } else { 0 })
                .map(|w| w.load(Relaxed))
                .collect();
            out.push((cpu, c, n, items));
        }
    }
    out
}
