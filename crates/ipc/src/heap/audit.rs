//! What `Namespace::check` verifies of the heap, and its figures for
//! `ipcns ns info`.
//!
//! Every free block is listed once: on its class's list, on a cpu's
//! stack of its class, or as a page run; each is a plausible block of its
//! class (in the heap, aligned), no two overlap (a block free twice would
//! be handed out twice), every stack's count is in range, and the bytes in
//! use plus the bytes free fit in what was handed out from the top. A
//! block that is neither free nor in use (leaked by a death) breaks none
//! of this: leaks are allowed, double ownership is not.
//!
//! Lock state: takes and releases the heap lock for the lists. The stacks
//! are read without one, before and after; if they changed meanwhile (the
//! heap is in use; three tries) they are left out of the checks and of the
//! figures (`cached` is then 0): a busy heap is not a wrong one. The
//! verdict is exact for a heap nobody is using.

use super::{CACHE_CAP, PAGE, cache, class_size, global, plausible};
use crate::arena::Arena;
use crate::arena::header::HEAP_CLASSES;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// Free blocks listed at most: a longer list is reported, not walked.
const MAX_FREE: usize = 1 << 20;
/// Problems listed at most.
const MAX_PROBLEMS: usize = 20;

/// The heap's figures, as the audit found them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in use (`heap_in_use`).
    pub in_use: u64,
    /// Bytes handed out from the top so far (used, free or leaked).
    pub used: u64,
    /// Free bytes on the global lists and runs.
    pub listed: u64,
    /// Free bytes on the per-cpu stacks (0 if they changed during the
    /// audit).
    pub cached: u64,
    /// Cpus with a cache in this arena.
    pub cache_cpus: u32,
}

/// Where a free block was found.
#[derive(Clone, Copy)]
enum Where {
    List(u64),
    Run,
    Cache(u32),
}

impl core::fmt::Display for Where {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Where::List(s) => write!(f, "the free list of class {s}"),
            Where::Run => write!(f, "a free run"),
            Where::Cache(cpu) => write!(f, "the cache of cpu {cpu}"),
        }
    }
}

/// A free block: offset, bytes, where it was found.
type Free = (u64, u64, Where);

/// The heap's figures and everything wrong with it (module doc).
pub(crate) fn audit(a: &Arena) -> (HeapStats, Vec<String>) {
    let mut problems = Vec::new();
    let mut stats = HeapStats {
        cache_cpus: a.layout().cache_cpus,
        ..HeapStats::default()
    };
    let mut free: Vec<Free> = Vec::new();
    // The stacks as they were before and after the lists were read; up to
    // three tries for the two to agree.
    let mut stacks = None;
    for _ in 0..3 {
        free.clear();
        problems.clear();
        let before = cache::snapshot(a);
        match global::lock(a) {
            Ok(_g) => {
                lists(a, &mut free, &mut problems);
                let (runs, bad) = global::runs(a, MAX_FREE);
                problems.extend(bad);
                free.extend(runs.into_iter().map(|(off, n)| (off, n * PAGE, Where::Run)));
                let h = &a.header().heap;
                stats.used = h.top.load(Relaxed).saturating_sub(a.layout().heap_off);
                stats.in_use = super::in_use(a);
            }
            Err(e) => problems.push(format!("heap lock: {e}")),
        }
        if cache::snapshot(a) == before {
            stacks = Some(before);
            break;
        }
    }
    stats.listed = free.iter().map(|f| f.1).sum();
    for (cpu, c, n, items) in stacks.iter().flatten() {
        let s = class_size(*c);
        if *n > CACHE_CAP as u64 {
            problems.push(format!("cache of cpu {cpu}, class {s}: count {n}"));
        }
        for &off in items {
            if !plausible(a, off, s, s.min(PAGE)) {
                problems.push(format!(
                    "cache of cpu {cpu}, class {s}: {off:#x} is no block of its class"
                ));
                continue;
            }
            stats.cached += s;
            free.push((off, s, Where::Cache(*cpu)));
        }
    }
    overlaps(&mut free, &mut problems);
    let free_bytes = stats.listed + stats.cached;
    // Only with the stacks read whole: the figures of a busy heap need
    // not add up.
    if stacks.is_some() && stats.in_use.saturating_add(free_bytes) > stats.used {
        problems.push(format!(
            "{} bytes in use and {free_bytes} free, of {} handed out",
            stats.in_use, stats.used
        ));
    }
    problems.truncate(MAX_PROBLEMS);
    (stats, problems)
}

/// The global free lists, each block checked; a list is followed until its
/// end, a link that is no block of its class, a loop (found in constant
/// memory, `chain.rs`), more blocks than the heap holds or [`MAX_FREE`]
/// blocks in all. Heap lock held.
fn lists(a: &Arena, free: &mut Vec<Free>, problems: &mut Vec<String>) {
    let h = &a.header().heap;
    let used = h.top.load(Relaxed).saturating_sub(a.layout().heap_off);
    for c in 0..HEAP_CLASSES {
        let s = class_size(c);
        let mut walk = crate::chain::Chain::new(h.free[c].load(Relaxed), |cur| {
            plausible(a, cur, s, s.min(PAGE))
                .then(|| a.view::<AtomicU64>(cur).map_or(0, |w| w.load(Relaxed)))
        });
        let mut n = 0u64;
        for cur in walk.by_ref() {
            n += 1;
            if free.len() >= MAX_FREE || n > used / s {
                problems.push(format!("free list of class {s}: too long"));
                break;
            }
            free.push((cur, s, Where::List(s)));
        }
        if walk.broken() && free.len() < MAX_FREE && n <= used / s {
            problems.push(format!(
                "free list of class {s}: a loop or a link to no block of its class"
            ));
        }
    }
}

/// Reports free blocks that overlap (one block free twice, or listed as
/// two), after sorting them.
fn overlaps(free: &mut [Free], problems: &mut Vec<String>) {
    free.sort_unstable_by_key(|f| f.0);
    for w in free.windows(2) {
        let ((a, alen, awhere), (b, _, bwhere)) = (&w[0], &w[1]);
        if a + alen > *b {
            problems.push(format!(
                "free block {b:#x} ({bwhere}) overlaps free block {a:#x} ({awhere})"
            ));
            if problems.len() >= MAX_PROBLEMS {
                return;
            }
        }
    }
}
