//! The arena's interesting byte ranges, named, for the corruption fuzzer
//! (tests/it/fuzz.rs): the header's identity words, the limits, each
//! registry and its key table, the slots in use and their locks, the
//! bitmaps, the heap's state, its used range and its per-cpu caches.
//!
//! Offsets come from `offset_of!` and `size_of_val` on the real types, so
//! the list follows layout changes. Everything is read through the checked
//! views and clamped to the arena: a corrupt arena yields fewer or odder
//! regions, never a panic.
//!
//! Lock state: takes no lock (a snapshot; the fuzzer lists regions of an
//! arena nobody else is using).

use crate::arena::header::{Header, HeapState, Limits, Registry};
use crate::arena::layout::Mech;
use crate::heap::{CacheStack, CpuCache};
use crate::namespace::Namespace;
use crate::object::{Head, MsgSlot, Sem, SemSlot, ShmSlot};
use crate::session::Session;
use core::mem::{offset_of, size_of, size_of_val};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// A named byte range `[off, off + len)` of the arena.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub name: String,
    pub off: u64,
    pub len: u64,
}

/// In-use slots listed per mechanism, at most.
const MAX_SLOTS: usize = 64;

/// `(offset, length)` of the fields `$f...` of `$v: $T`, from the lowest
/// field's start to the highest field's end.
macro_rules! span {
    ($v:expr, $T:ty, $($f:ident),+ $(,)?) => {{
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        $(
            let o = offset_of!($T, $f) as u64;
            lo = lo.min(o);
            hi = hi.max(o + size_of_val(&$v.$f) as u64);
        )+
        (lo, hi - lo)
    }};
}

struct Out {
    size: u64,
    v: Vec<Region>,
}

impl Out {
    /// Adds `[base + rel.0, + rel.1)`, clamped to the arena; empty or
    /// outside ranges are dropped.
    fn push(&mut self, name: String, base: u64, rel: (u64, u64)) {
        let Some(off) = base.checked_add(rel.0) else {
            return;
        };
        if off >= self.size || rel.1 == 0 {
            return;
        }
        let len = rel.1.min(self.size - off);
        self.v.push(Region { name, off, len });
    }
}

impl Namespace {
    /// The arena offset of the slot of index `idx` of mechanism `m` (for
    /// tests that rewrite one field as a hostile participant would;
    /// unstable).
    #[doc(hidden)]
    pub fn slot_offset(&self, m: Mech, idx: u32) -> u64 {
        self.arena().layout().slot_off(m, idx)
    }

    /// The arena's interesting byte ranges (for fuzzers; unstable).
    #[doc(hidden)]
    pub fn regions(&self) -> Vec<Region> {
        let a = self.arena();
        let mut out = Out {
            size: a.layout().size,
            v: Vec::new(),
        };
        let h = a.header();
        out.push(
            "header.identity".into(),
            0,
            span!(
                h,
                Header,
                magic,
                version,
                flags,
                size,
                heap_off,
                slot_size,
                header_size,
                userns
            ),
        );
        out.push(
            "limits".into(),
            offset_of!(Header, limits) as u64,
            (0, size_of::<Limits>() as u64),
        );
        for m in Mech::ALL {
            registry(a, m, &mut out);
            slots(a, m, &mut out);
        }
        heap(a, &mut out);
        out.v
    }
}

/// A registry's fields and its key table.
fn registry(a: &Session, m: Mech, out: &mut Out) {
    let r = &a.header().registries[m as usize];
    let base = offset_of!(Header, registries) as u64 + m as u64 * size_of::<Registry>() as u64;
    let n = m.name();
    out.push(format!("{n}.registry.lock"), base, span!(r, Registry, lock));
    out.push(
        format!("{n}.registry.counters"),
        base,
        span!(
            r, Registry, in_use, seq, last_idx, cursor, next_id, max_idx, used, used2
        ),
    );
    out.push(
        format!("{n}.registry.journal"),
        base,
        span!(r, Registry, journal),
    );
    out.push(
        format!("{n}.registry.keys"),
        base,
        span!(r, Registry, keys_off, keys_cap, keys_len),
    );
    out.push(
        format!("{n}.registry.serial"),
        base,
        span!(r, Registry, serial),
    );
    let (off, cap) = (r.keys_off.load(Relaxed), r.keys_cap.load(Relaxed));
    if off % 8 == 0 && off >= a.layout().heap_off {
        out.push(format!("{n}.keys"), off, (0, u64::from(cap) * 8));
    }
}

/// The slots of the indexes in use (from the bitmap), the lowest free
/// slot, the bitmap and summary words in use.
fn slots(a: &Session, m: Mech, out: &mut Out) {
    let l = a.layout();
    let t = l.table(m);
    let n = m.name();
    let Ok(words) = a.view_slice::<AtomicU64>(t.bitmap, (l.ipc_mni / 64) as usize) else {
        return;
    };
    let (mut listed, mut last_word, mut free) = (0usize, 0usize, None);
    for (w, word) in words.iter().enumerate() {
        let mut v = word.load(Relaxed);
        if free.is_none() && v != u64::MAX {
            free = Some(w as u32 * 64 + (!v).trailing_zeros());
        }
        if v != 0 {
            last_word = w;
        }
        while v != 0 && listed < MAX_SLOTS {
            let idx = w as u32 * 64 + v.trailing_zeros();
            v &= v - 1;
            listed += 1;
            slot(a, m, idx, &format!("{n}.slot[{idx}]"), out);
        }
    }
    if let Some(idx) = free {
        slot(a, m, idx, &format!("{n}.slot.free[{idx}]"), out);
    }
    let used = (last_word as u64 + 1) * 8;
    out.push(format!("{n}.bitmap"), t.bitmap, (0, used));
    out.push(
        format!("{n}.summary"),
        t.summary,
        (0, (last_word as u64 / 64 + 1) * 8),
    );
}

/// Bytes of one slot of `m`.
fn slot_size(m: Mech) -> u64 {
    (match m {
        Mech::Sem => size_of::<SemSlot>(),
        Mech::Msg => size_of::<MsgSlot>(),
        Mech::Shm => size_of::<ShmSlot>(),
    }) as u64
}

/// One slot: whole, its lock, its perm fields, its own fields, and a
/// set's semaphore array in the heap.
fn slot(a: &Session, m: Mech, idx: u32, name: &str, out: &mut Out) {
    let (off, size) = (a.layout().slot_off(m, idx), slot_size(m));
    out.push(name.to_string(), off, (0, size));
    // Every slot type starts with its Head (object.rs `Slot`).
    let Ok(h) = a.view::<Head>(off) else {
        return;
    };
    out.push(format!("{name}.lock"), off, span!(h, Head, lock));
    out.push(
        format!("{name}.perm"),
        off,
        span!(h, Head, state, seq, key, uid, gid, cuid, cgid, mode, ctime),
    );
    let head = size_of::<Head>() as u64;
    out.push(
        format!("{name}.body"),
        off,
        (head, size.saturating_sub(head)),
    );
    if m == Mech::Sem
        && let Ok(s) = a.view::<SemSlot>(off)
    {
        let base = s.base.load(Relaxed);
        let n = u64::from(s.nsems.load(Relaxed));
        if base != 0 {
            let len = n.saturating_mul(size_of::<Sem>() as u64);
            out.push(format!("{name}.array"), base, (0, len));
        }
    }
    if m == Mech::Shm {
        // Where a huge page segment's file is (shm/huge.rs `Huge::pack`).
        out.push(
            format!("{name}.huge"),
            off,
            (offset_of!(ShmSlot, spare) as u64, 16),
        );
        // Which file a normal segment's is (shm/file.rs `FileId`).
        out.push(
            format!("{name}.file"),
            off,
            (offset_of!(Head, spare) as u64, 16),
        );
    }
}

/// The heap's state, the heads of its free lists, its used range.
fn heap(a: &Session, out: &mut Out) {
    let hs = &a.header().heap;
    let base = offset_of!(Header, heap) as u64;
    out.push("heap.lock".into(), base, span!(hs, HeapState, lock));
    out.push(
        "heap.top".into(),
        base,
        span!(hs, HeapState, top, end, reserved),
    );
    out.push("heap.free".into(), base, span!(hs, HeapState, free));
    out.push("heap.runs".into(), base, span!(hs, HeapState, runs));
    out.push("heap.in_use".into(), base, span!(hs, HeapState, in_use));
    for (c, head) in hs.free.iter().enumerate() {
        let off = head.load(Relaxed);
        if off != 0 {
            out.push(format!("heap.free[{c}].block"), off, (0, 8));
        }
    }
    let run = hs.runs.load(Relaxed);
    if run != 0 {
        out.push("heap.runs.block".into(), run, (0, 16));
    }
    let (from, top) = (a.layout().heap_off, hs.top.load(Relaxed));
    if top > from {
        out.push("heap.used".into(), from, (0, top - from));
    }
    caches(a, out);
}

/// Cpus whose caches are listed, at most.
const MAX_CACHE_CPUS: u32 = 4;

/// The per-cpu caches of the first cpus: the stack of each class that
/// holds blocks (its count and its offsets), and the smallest class's.
fn caches(a: &Session, out: &mut Out) {
    let l = a.layout();
    for cpu in 0..l.cache_cpus.min(MAX_CACHE_CPUS) {
        let base = l.caches + u64::from(cpu) * size_of::<CpuCache>() as u64;
        let Ok(k) = a.view::<CpuCache>(base) else {
            return;
        };
        for (c, st) in k.stacks.iter().enumerate() {
            // The smallest class always (message headers, wait records),
            // the others when they hold blocks.
            if c > 0 && st.count.load(Relaxed) == 0 {
                continue;
            }
            let at =
                base + offset_of!(CpuCache, stacks) as u64 + (c * size_of::<CacheStack>()) as u64;
            out.push(
                format!("heap.cache[{cpu}].class[{c}]"),
                at,
                (0, size_of::<CacheStack>() as u64),
            );
            out.push(
                format!("heap.cache[{cpu}].class[{c}].count"),
                at,
                span!(st, CacheStack, count),
            );
        }
    }
}

/// Where things are, for a fuzzer writing extreme offsets.
#[doc(hidden)]
pub struct Facts {
    pub size: u64,
    pub heap_off: u64,
    pub registries: u64,
    pub heap_state: u64,
    /// The per-cpu caches: offset, cpus, bytes per cpu, offset of the
    /// first class's stack in a cpu's cache, bytes per stack.
    pub caches: u64,
    pub cache_cpus: u32,
    pub cpu_cache: u64,
    pub stacks: u64,
    pub stack: u64,
}

impl Namespace {
    #[doc(hidden)]
    pub fn facts(&self) -> Facts {
        use crate::arena::header::Header;
        let l = self.arena().layout();
        Facts {
            size: l.size,
            heap_off: l.heap_off,
            registries: core::mem::offset_of!(Header, registries) as u64,
            heap_state: core::mem::offset_of!(Header, heap) as u64,
            caches: l.caches,
            cache_cpus: l.cache_cpus,
            cpu_cache: size_of::<CpuCache>() as u64,
            stacks: offset_of!(CpuCache, stacks) as u64,
            stack: size_of::<CacheStack>() as u64,
        }
    }
}
