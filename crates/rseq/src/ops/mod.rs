//! Per-cpu operations: each runs as one restartable sequence on the slot of the
//! cpu (or concurrency id) the thread is on, and reports success, a compare
//! miss or an abort.
//!
//! # Protocol
//!
//! An operation reads the thread's `cpu_id` (or `mm_cid`) *inside* its
//! critical section, picks `slot = base + index * stride`, loads and compares,
//! and commits with one store. If the thread is preempted, migrated or
//! signalled before the commit, the kernel sends it to the abort handler and
//! nothing was committed: the operation returns [`Outcome::Abort`] and the
//! caller retries (possibly on another cpu). Two threads therefore never
//! interleave on one slot, even in memory shared between processes, as long as
//! the slots are indexed by cpu (two threads never run on one cpu at once).
//! `mm_cid` is unique only within a process: use it for per-process data.
//!
//! Threads without an rseq area (fallback mode) run the same operations with
//! `sched_getcpu` and atomics (see `fallback`); the forms in [`strict`]
//! refuse instead. Every process sharing a
//! structure must be in an rseq mode, or every one in the fallback
//! ([`Mode::uses_atomics`](crate::Mode::uses_atomics)).
//!
//! # Safety
//!
//! The functions here are `unsafe`: they dereference the slot descriptors
//! they are given. The descriptors ([`Slots`]) promise validity; the area
//! comes from `area::thread_area` (or, on the counter's fast path,
//! `area::cached_area`: the same cache without the first-use lookup).

#![allow(unsafe_code)]

mod fallback;
mod list;
mod stack;
pub mod strict;
#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
use x86_64 as arch;

pub use fallback::BUSY;
pub use list::{BadIndex, Blocks, list_pop, list_push};
pub use stack::{BadCount, stack_pop, stack_push};

use crate::abi;
use crate::area;
use crate::cpus::possible_cpus;
use crate::mode::mm_cid_available;

/// Which id selects the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `cpu_id`: machine-wide, so safe for memory shared between processes.
    Cpu,
    /// `mm_cid`: dense per process; only for per-process data. Falls back to
    /// `cpu_id` when the kernel or the registration does not provide it.
    MmCid,
}

/// The result of one operation.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<T = ()> {
    /// Committed on slot `slot`.
    Success {
        /// The index (cpu or concurrency id) whose slot was used.
        slot: u32,
        /// What the operation loaded, if it returns something.
        value: T,
    },
    /// A compare failed (or a list was empty) on slot `slot`; nothing stored.
    Miss {
        /// The index whose slot was compared.
        slot: u32,
    },
    /// Interrupted before the commit; nothing stored. Retry.
    Abort,
}

impl<T> Outcome<T> {
    /// True for [`Outcome::Success`].
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success { .. })
    }
}

/// `len` slots of `stride` bytes from `base`, one per possible cpu: the
/// memory an operation works on. Copyable; holds no lifetime, so the
/// operations that use it are `unsafe`.
#[derive(Debug, Clone, Copy)]
pub struct Slots {
    base: *mut u8,
    stride: usize,
    len: u32,
}

// SAFETY: a descriptor only; every use of the memory it names is an unsafe
// operation whose contract covers concurrent use from any thread.
unsafe impl Send for Slots {}
// SAFETY: as above.
unsafe impl Sync for Slots {}

impl Slots {
    /// Describes `len` slots of `stride` bytes starting at `base`.
    ///
    /// # Panics
    ///
    /// If `len` is below [`possible_cpus`] (a cpu without a slot could not be
    /// served without breaking exclusivity), above `u32::MAX`, or if `base` or
    /// `stride` is not a multiple of 8.
    ///
    /// # Safety
    ///
    /// For as long as operations use the result, `base .. base + len * stride`
    /// must stay mapped, readable and writable, and written only through
    /// these operations at the offsets they are given (or by a party that
    /// holds every slot exclusively, e.g. before any thread uses them).
    pub unsafe fn new(base: *mut u8, stride: usize, len: usize) -> Slots {
        assert!(
            len >= possible_cpus(),
            "{len} slots for {} possible cpus",
            possible_cpus()
        );
        assert!(
            (base as usize).is_multiple_of(8) && stride.is_multiple_of(8),
            "slots must be 8-aligned"
        );
        let len = u32::try_from(len).expect("too many slots");
        Slots { base, stride, len }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Always false (there is at least one possible cpu).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes between slots.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Address of slot `i` (not dereferenced).
    pub fn slot(&self, i: usize) -> *mut u8 {
        self.base.wrapping_add(i * self.stride)
    }

    fn fallback_slot(&self, off: usize) -> (u32, *mut u8) {
        let cpu = crate::mode::sched_getcpu() % self.len;
        (cpu, self.slot(cpu as usize).wrapping_add(off))
    }
}

/// The area and the address of the index field, if this thread has an area.
#[inline(always)]
fn index_ptr(index: Index) -> Option<(*mut abi::Rseq, *const u32)> {
    let area = area::thread_area()?;
    let off = match index {
        Index::MmCid if mm_cid_available() => abi::OFF_MM_CID,
        _ => abi::OFF_CPU_ID,
    };
    Some((area, area.cast::<u8>().wrapping_add(off).cast::<u32>()))
}

#[inline(always)]
fn outcome(st: u32, slot: u32) -> Outcome {
    if st == arch::SUCCESS {
        return Outcome::Success { slot, value: () };
    }
    slow_outcome(st, slot)
}

#[cold]
fn slow_outcome(st: u32, slot: u32) -> Outcome {
    if st == arch::MISS {
        Outcome::Miss { slot }
    } else {
        Outcome::Abort
    }
}

/// Per-cpu load-add-store: `slot[off] += v` (wrapping, 64-bit).
///
/// # Safety
///
/// `s` satisfies the contract of [`Slots::new`]; `off + 8 <= stride` and
/// `off` is a multiple of 8.
#[inline(always)]
pub unsafe fn add(s: &Slots, index: Index, off: usize, v: u64) -> Outcome {
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: area/idx belong to this thread; `s` and `off` per contract.
        let (st, slot) =
            unsafe { arch::add(area, idx, s.len, s.base.wrapping_add(off), s.stride, v) };
        if st == arch::SUCCESS {
            return Outcome::Success { slot, value: () };
        }
        if st != arch::NO_INDEX {
            return slow_outcome(st, slot);
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: `p` is a valid field per contract.
    outcome(unsafe { fallback::add(p, v) }, slot)
}

/// The fast path of [`add`] with [`Index::Cpu`] for slots of `1 << SHIFT`
/// bytes: `slot[off] += v` in one straight-line section when this thread's
/// area is already known. Returns `false` without touching memory when the
/// caller must use [`add`] instead: first use on this thread, fallback mode,
/// unregistered area, or an abort (nothing was committed).
///
/// # Safety
///
/// As [`add`]; `s.stride() == 1 << SHIFT`.
#[inline(always)]
pub(crate) unsafe fn try_add_pow2<const SHIFT: u32>(s: &Slots, off: usize, v: u64) -> bool {
    debug_assert_eq!(s.stride, 1usize << SHIFT);
    match area::cached_area() {
        // SAFETY: the area is this thread's registered one; `s`, `off` and
        // the stride per contract.
        Some(area) => unsafe {
            arch::add_pow2::<SHIFT>(area, s.len, s.base.wrapping_add(off), v) == arch::Exit::Done
        },
        None => false,
    }
}

/// Per-cpu load-compare-store: `if slot[off] == expect { slot[off] = new }`.
///
/// # Safety
///
/// As [`add`]. In fallback mode the word must never hold [`BUSY`] unless a
/// two-word operation is committing it.
#[inline(always)]
pub unsafe fn cmp_store(s: &Slots, index: Index, off: usize, expect: u64, new: u64) -> Outcome {
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: as in `add`.
        let (st, slot) = unsafe {
            arch::cmp_store(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                expect,
                new,
            )
        };
        if st != arch::NO_INDEX {
            return outcome(st, slot);
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: as in `add`.
    outcome(unsafe { fallback::cmp_store(p, expect, new) }, slot)
}

/// Per-cpu double compare then store:
/// `if slot[off] == expect && slot[off2] == expect2 { slot[off] = new }`.
///
/// # Safety
///
/// As [`cmp_store`], for both `off` and `off2`; `slot[off]` never holds
/// [`BUSY`].
#[inline(always)]
pub unsafe fn cmp_cmp_store(
    s: &Slots,
    index: Index,
    off: usize,
    expect: u64,
    off2: usize,
    expect2: u64,
    new: u64,
) -> Outcome {
    let d2 = off2 as isize - off as isize;
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: as in `add`.
        let (st, slot) = unsafe {
            arch::cmp_cmp_store(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                expect,
                d2,
                expect2,
                new,
            )
        };
        if st != arch::NO_INDEX {
            return outcome(st, slot);
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: as in `add`.
    outcome(
        unsafe { fallback::cmp_cmp_store(p, expect, p.wrapping_offset(d2), expect2, new) },
        slot,
    )
}

/// Per-cpu try-store then store:
/// `if slot[off] == expect { slot[spec_off] = spec; slot[off] = new }`.
/// The speculative store may run more than once (after aborts); only the
/// commit of `new` makes it count.
///
/// # Safety
///
/// As [`cmp_store`], for both `off` and `spec_off`; `slot[off]` never holds
/// [`BUSY`].
#[inline(always)]
pub unsafe fn cmp_trystore_store(
    s: &Slots,
    index: Index,
    off: usize,
    expect: u64,
    spec_off: usize,
    spec: u64,
    new: u64,
) -> Outcome {
    let ds = spec_off as isize - off as isize;
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: as in `add`.
        let (st, slot) = unsafe {
            arch::cmp_trystore_store(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                expect,
                ds,
                spec,
                new,
            )
        };
        if st != arch::NO_INDEX {
            return outcome(st, slot);
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: as in `add`.
    outcome(
        unsafe { fallback::cmp_trystore_store(p, expect, p.wrapping_offset(ds), spec, new) },
        slot,
    )
}

const _: () = {
    assert!(arch::SUCCESS == fallback::SUCCESS);
    assert!(arch::MISS == fallback::MISS);
    assert!(arch::ABORT == fallback::ABORT);
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::percpu::PerCpu;
    use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
    use std::sync::Arc;

    static PINGS: AtomicU64 = AtomicU64::new(0);

    extern "C" fn on_signal(_: i32) {
        PINGS.fetch_add(1, Ordering::Release);
    }

    /// Signals sent one at a time to a thread looping on the counter's fast
    /// path abort some of its sections (each reported as `false`, nothing
    /// stored), and the total is exactly the committed count.
    #[test]
    fn fast_add_aborts_and_stays_exact() {
        // SAFETY: installs a handler that only touches an atomic; the
        // sigaction struct is zeroed then filled in.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(i32) as usize;
            sa.sa_flags = libc::SA_RESTART;
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &sa, core::ptr::null_mut()),
                0
            );
        }
        let cells = Arc::new(PerCpu::new(|_| AtomicU64::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let refusals = Arc::new(AtomicU64::new(0));
        let worker = {
            let (cells, stop, tid) = (cells.clone(), stop.clone(), tid.clone());
            let refusals = refusals.clone();
            std::thread::spawn(move || {
                let s = cells.slots();
                let registered = area::thread_area().is_some();
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() }, Ordering::Release);
                let (mut done, mut refused) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: `s` describes `cells` (64-byte slots), alive
                    // for the thread.
                    if unsafe { try_add_pow2::<6>(&s, 0, 1) } {
                        done += 1;
                    } else {
                        refused += 1;
                        refusals.store(refused, Ordering::Relaxed);
                    }
                }
                (registered, done, refused)
            })
        };
        while tid.load(Ordering::Acquire) == 0 {
            std::hint::spin_loop();
        }
        let tid = tid.load(Ordering::Acquire);
        // At least 2000 signals, and more (up to 50000) until one has hit
        // a section: where a signal lands is chance, and a debug build on
        // a loaded machine spends little of its loop inside the section.
        let base = PINGS.load(Ordering::Acquire);
        let mut sent = 0u64;
        while sent < 2000 || (sent < 50_000 && refusals.load(Ordering::Relaxed) == 0) {
            // SAFETY: signals a live thread of this process (the worker
            // runs until `stop`).
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) };
            sent += 1;
            while PINGS.load(Ordering::Acquire) < base + sent {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let (registered, done, refused) = worker.join().unwrap();
        eprintln!("rseq aborts: {sent} signals, {done} sections done, {refused} aborted");
        let sum: u64 = cells.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, done);
        if registered {
            assert!(refused > 0, "{sent} signals never hit the fast section");
            assert!(refused <= sent, "{refused} refusals for {sent} signals");
        } else {
            assert_eq!(done, 0, "no area: the fast path must refuse");
        }
    }
}
