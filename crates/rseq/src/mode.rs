//! Which of the three modes the process runs in, and reads of the fields the
//! kernel keeps up to date in the area (cpu_id, cpu_id_start, node_id,
//! mm_cid).
//!
//! # Safety
//!
//! Reads go through the pointer returned by `area::thread_area`, which is
//! either glibc's or this crate's registered area of the *calling* thread; it
//! stays valid as long as the thread runs (glibc's lives in the thread's
//! descriptor, ours in its TLS block, both freed only after every
//! thread-local destructor, so ours stays readable once unregistered). A
//! [`ThreadArea`] holds that pointer and is neither `Send` nor `Sync`, so
//! only its thread reads through it. The kernel writes these fields only on
//! the thread's own return to user space, so a volatile 32-bit load sees a
//! whole value.

#![allow(unsafe_code)]

use crate::abi::{self, Rseq};
use crate::area::{self, process};
use crate::kinds::{Errno, Mode};

/// The process's mode, decided on first use of the crate.
pub fn mode() -> Mode {
    process().mode
}

/// What the process found when it chose its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// The mode in use.
    pub mode: Mode,
    /// Length registered with the kernel (glibc's `__rseq_size` or ours).
    pub registered_size: u32,
    /// `AT_RSEQ_FEATURE_SIZE` (20 if the kernel does not publish it).
    pub feature_size: u32,
    /// `AT_RSEQ_ALIGN` (32 if the kernel does not publish it).
    pub align: u32,
    /// Why rseq is not used, in [`Mode::Fallback`].
    pub fallback_reason: Option<Errno>,
}

/// Details of the mode in use.
pub fn info() -> Info {
    let p = process();
    Info {
        mode: p.mode,
        registered_size: p.registered_size,
        feature_size: p.feature_size,
        align: p.align,
        fallback_reason: p.fallback_reason,
    }
}

/// True when the calling thread has a registered area (false in fallback
/// mode, and for a thread whose own registration failed).
pub fn thread_registered() -> bool {
    area::thread_area().is_some()
}

#[inline(always)]
fn read_field(area: *mut Rseq, offset: usize) -> u32 {
    // SAFETY: `area` is the calling thread's area, mapped for as long as the
    // thread runs (module doc); `offset` is a field offset from `abi`,
    // inside the 32-byte struct.
    unsafe { area.cast::<u8>().add(offset).cast::<u32>().read_volatile() }
}

#[inline(always)]
fn covered(offset: usize) -> bool {
    process().usable_size() >= abi::field_end(offset)
}

/// The cpu the thread runs on, from the area's `cpu_id`: a thread-local
/// load (the area's address) and the field's load. `None` without a
/// registered area. In a loop, [`ThreadArea::cpu_id`] saves the first load.
#[inline(always)]
pub fn cpu_id() -> Option<u32> {
    ThreadArea::current()?.cpu_id()
}

/// The calling thread's registered rseq area, looked up once: its reads are
/// one volatile load of the field each, from an address the compiler can
/// keep in a register across a loop. The kernel rewrites `cpu_id` on every
/// return to user space, so every call sees the cpu of that instant; nothing
/// but the area's address is cached.
///
/// Not `Send`: the area belongs to the thread that looked it up.
///
/// ```
/// if let Some(area) = ipcns_rseq::ThreadArea::current() {
///     let cpu = area.cpu_id().expect("registered");
///     assert!((cpu as usize) < ipcns_rseq::possible_cpus());
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ThreadArea {
    /// The registered area (a raw pointer: not `Send`, not `Sync`).
    area: *mut Rseq,
}

impl ThreadArea {
    /// The calling thread's area (registering it on first use in
    /// [`Mode::Own`]); `None` without one (fallback).
    #[inline(always)]
    pub fn current() -> Option<ThreadArea> {
        Some(ThreadArea {
            area: area::thread_area()?,
        })
    }

    /// The area's `cpu_id`: the cpu the thread runs on. `None` only once the
    /// area is no longer registered (an own area, from a thread-local
    /// destructor that runs after this crate's: the kernel resets the field
    /// to `RSEQ_CPU_ID_UNINITIALIZED` when it unregisters).
    #[inline(always)]
    pub fn cpu_id(self) -> Option<u32> {
        let cpu = read_field(self.area, abi::OFF_CPU_ID);
        (cpu < abi::CPU_ID_REGISTRATION_FAILED).then_some(cpu)
    }

    /// The area's `cpu_id_start` (a valid cpu number while registered).
    #[inline(always)]
    pub fn cpu_id_start(self) -> u32 {
        read_field(self.area, abi::OFF_CPU_ID_START)
    }

    /// The area's address (glibc's or this crate's registration).
    pub fn as_ptr(self) -> *mut Rseq {
        self.area
    }
}

/// The area's `cpu_id_start` (always a valid cpu while registered). `None`
/// without a registered area.
#[inline(always)]
pub fn cpu_id_start() -> Option<u32> {
    Some(ThreadArea::current()?.cpu_id_start())
}

/// The area's `node_id`, if the registered size and the kernel's feature size
/// both cover it (Linux 6.3+ with a large enough registration).
#[inline]
pub fn node_id() -> Option<u32> {
    let area = area::thread_area()?;
    covered(abi::OFF_NODE_ID).then(|| read_field(area, abi::OFF_NODE_ID))
}

/// The area's `mm_cid` (concurrency id, dense per process), if covered as for
/// [`node_id`]. It indexes per-process data only.
#[inline]
pub fn mm_cid() -> Option<u32> {
    let area = area::thread_area()?;
    covered(abi::OFF_MM_CID).then(|| read_field(area, abi::OFF_MM_CID))
}

/// True when `mm_cid` is available to this process.
pub fn mm_cid_available() -> bool {
    process().mode != Mode::Fallback && covered(abi::OFF_MM_CID)
}

/// The current cpu: [`cpu_id`] when registered, else `sched_getcpu()` (0 if
/// that fails too).
#[inline(always)]
pub fn current_cpu() -> u32 {
    match cpu_id() {
        Some(c) => c,
        None => sched_getcpu(),
    }
}

/// `sched_getcpu()` (glibc, through the vDSO), 0 on failure.
#[inline]
pub fn sched_getcpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).unwrap_or(0)
}
