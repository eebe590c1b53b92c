//! Finding the calling thread's rseq area: glibc's, else one registered here,
//! else none.
//!
//! # Protocol
//!
//! The process decides its [`Mode`] once, on first use, in [`process`]:
//!
//! 1. glibc 2.35+ exports `__rseq_size` and `__rseq_offset`. They are looked
//!    up with `dlsym(RTLD_DEFAULT)`, so this crate links and runs with an older
//!    glibc too. A non-zero `__rseq_size` means glibc registered every thread:
//!    the area is at `thread pointer + __rseq_offset` and this crate never
//!    registers a second one (the kernel would refuse it with `EBUSY`/`EINVAL`).
//! 2. Otherwise (`GLIBC_TUNABLES=glibc.pthread.rseq=0`, an older glibc, another
//!    libc) the first thread tries its own registration with the size and
//!    alignment the kernel asks for (`AT_RSEQ_FEATURE_SIZE`, `AT_RSEQ_ALIGN`)
//!    and [`SIGNATURE`]. Success selects [`Mode::Own`]: every thread registers
//!    an area in its own thread-local storage on first use and unregisters it
//!    from a thread-local destructor at thread exit.
//! 3. If that fails (`ENOSYS` on an old kernel or under a seccomp filter,
//!    `EPERM`, `EBUSY` when someone else registered the thread), the mode is
//!    [`Mode::Fallback`]: operations use `sched_getcpu` plus atomics.
//!
//! Each thread then caches its area's address in the thread-local `AREA`
//! (0 = not looked at yet, [`NO_AREA`] = none for this thread, [`EXITED`] =
//! unregistered at thread exit, else the address). That cache is the only
//! thing the fast path reads.
//!
//! # Safety
//!
//! This module relies on: glibc's `__rseq_offset` being the offset of the
//! current thread's area from the x86-64 thread pointer (`%fs:0` holds the
//! thread pointer itself, as the x86-64 TLS ABI requires); thread-local
//! storage outliving every use by the kernel (we unregister before the thread's
//! static TLS block is released at exit); and the `rseq(2)` system call
//! contract (`kernel/rseq.c: sys_rseq`).

#![allow(unsafe_code)]

use crate::abi::{self, Rseq};
use crate::kinds::{Errno, Mode};
use core::cell::{Cell, UnsafeCell};
use core::ffi::c_void;
use core::sync::atomic::{AtomicIsize, Ordering};
use std::sync::OnceLock;

/// `AREA` value: this thread has no usable area (fallback operations).
pub(crate) const NO_AREA: usize = 1;
/// `AREA` value: this thread's own area was unregistered by its exit
/// destructor; later operations (from other destructors) use the fallback.
pub(crate) const EXITED: usize = 2;
const LAST_SENTINEL: usize = EXITED;

/// Bytes reserved for an own registration (a multiple of any `AT_RSEQ_ALIGN`
/// up to [`OWN_ALIGN`]).
const OWN_BYTES: usize = 256;
/// Alignment of the own area; kernels asking for more get the fallback.
const OWN_ALIGN: usize = 64;

/// Storage for an own registration.
///
/// # Layout
///
/// 256 bytes aligned to 64; the kernel's `struct rseq` at offset 0.
#[repr(C, align(64))]
struct OwnArea {
    rseq: Rseq,
    _room: [u8; OWN_BYTES - 32],
}

const _: () = {
    assert!(core::mem::size_of::<OwnArea>() == OWN_BYTES);
    assert!(core::mem::align_of::<OwnArea>() == OWN_ALIGN);
};

thread_local! {
    /// This thread's area, or a sentinel. Written only by this thread.
    static AREA: Cell<usize> = const { Cell::new(0) };
    /// The area registered in [`Mode::Own`]. Written by the kernel on return
    /// to user space; read by this thread only.
    static OWN: UnsafeCell<OwnArea> = const {
        UnsafeCell::new(OwnArea {
            rseq: Rseq {
                cpu_id_start: 0,
                cpu_id: abi::CPU_ID_UNINITIALIZED,
                rseq_cs: 0,
                flags: 0,
                node_id: 0,
                mm_cid: 0,
                slice_ctrl: 0,
            },
            _room: [0; OWN_BYTES - 32],
        })
    };
    /// Dropped at thread exit: unregisters [`OWN`].
    static EXIT: Unregister = const { Unregister };
}

/// What the process found, decided once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Process {
    pub mode: Mode,
    /// `__rseq_offset` in [`Mode::Glibc`].
    pub glibc_offset: isize,
    /// Length passed to `rseq(2)` (glibc's `__rseq_size`, or ours); 0 in
    /// fallback.
    pub registered_size: u32,
    /// `AT_RSEQ_FEATURE_SIZE`, or 20 when the kernel does not publish it.
    pub feature_size: u32,
    /// `AT_RSEQ_ALIGN`, or 32.
    pub align: u32,
    /// Why the fallback was chosen.
    pub fallback_reason: Option<Errno>,
}

impl Process {
    /// Bytes of the area the kernel both knows and was given.
    pub fn usable_size(&self) -> u32 {
        self.registered_size.min(self.feature_size)
    }
}

/// The process-wide decision (made by the first caller).
pub(crate) fn process() -> &'static Process {
    static P: OnceLock<Process> = OnceLock::new();
    P.get_or_init(detect)
}

/// `__rseq_offset` once the process is known to use glibc's areas
/// ([`Mode::Glibc`]); [`NOT_GLIBC`] before that or in another mode. With
/// it, a thread's area is found from the thread pointer alone: in a shared
/// object a thread-local costs a `__tls_get_addr` call on every operation.
static GLIBC_OFFSET: AtomicIsize = AtomicIsize::new(NOT_GLIBC);
const NOT_GLIBC: isize = isize::MIN;

/// The calling thread's area in [`Mode::Glibc`] (`Some(None)`: glibc did
/// not register one for this thread, or has unregistered it); `None` when
/// the process is not known to be in that mode.
#[inline(always)]
fn glibc_area() -> Option<Option<*mut Rseq>> {
    match GLIBC_OFFSET.load(Ordering::Relaxed) {
        NOT_GLIBC => None,
        off => Some(glibc_thread_area(off)),
    }
}

/// The calling thread's registered area, or `None` for the fallback.
#[inline(always)]
pub(crate) fn thread_area() -> Option<*mut Rseq> {
    if let Some(a) = glibc_area() {
        return a;
    }
    let a = AREA.with(Cell::get);
    if a > LAST_SENTINEL {
        Some(a as *mut Rseq)
    } else if a == 0 {
        init_thread()
    } else {
        None
    }
}

/// The calling thread's area if it has already been looked up and is
/// registered; `None` otherwise (not looked at yet, fallback, exited). One
/// thread-local load and one compare: the per-cpu fast paths use this and
/// leave everything else to [`thread_area`] on their slow path.
#[inline(always)]
pub(crate) fn cached_area() -> Option<*mut Rseq> {
    if let Some(a) = glibc_area() {
        return a;
    }
    let a = AREA.with(Cell::get);
    (a > LAST_SENTINEL).then_some(a as *mut Rseq)
}

#[cold]
#[inline(never)]
fn init_thread() -> Option<*mut Rseq> {
    let p = process();
    // `detect` may already have registered this thread.
    let a = AREA.with(Cell::get);
    if a != 0 {
        return (a > LAST_SENTINEL).then_some(a as *mut Rseq);
    }
    let found = match p.mode {
        Mode::Glibc => glibc_thread_area(p.glibc_offset),
        Mode::Own => register_own(p).ok(),
        Mode::Fallback => None,
    };
    AREA.with(|c| c.set(found.map_or(NO_AREA, |r| r as usize)));
    found
}

fn getauxval(key: u64) -> u64 {
    // SAFETY: getauxval has no preconditions; unknown keys return 0.
    unsafe { libc::getauxval(key as libc::c_ulong) as u64 }
}

fn detect() -> Process {
    let feature = match getauxval(abi::AT_RSEQ_FEATURE_SIZE) {
        0 => abi::ORIG_FEATURE_SIZE,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    };
    let align = match getauxval(abi::AT_RSEQ_ALIGN) {
        0 => abi::ORIG_SIZE,
        n => u32::try_from(n).unwrap_or(u32::MAX),
    };
    let mut p = Process {
        mode: Mode::Fallback,
        glibc_offset: 0,
        registered_size: 0,
        feature_size: feature,
        align,
        fallback_reason: None,
    };
    if let Some((offset, size)) = glibc_symbols()
        && size != 0
    {
        p.mode = Mode::Glibc;
        p.glibc_offset = offset;
        p.registered_size = size;
        if offset != NOT_GLIBC {
            GLIBC_OFFSET.store(offset, Ordering::Relaxed);
        }
        return p;
    }
    match register_own(&p) {
        Ok(area) => {
            AREA.with(|c| c.set(area as usize));
            p.mode = Mode::Own;
            p.registered_size = own_len(feature, align).unwrap_or(0);
        }
        Err(e) => {
            AREA.with(|c| c.set(NO_AREA));
            p.fallback_reason = Some(e);
        }
    }
    p
}

/// `(__rseq_offset, __rseq_size)` if this glibc exports them.
fn glibc_symbols() -> Option<(isize, u32)> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no other
    // precondition; it returns null when the symbol is absent.
    let size = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) };
    // SAFETY: as above.
    let offset = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) };
    if size.is_null() || offset.is_null() {
        return None;
    }
    // SAFETY: glibc declares `const unsigned int __rseq_size` and
    // `const ptrdiff_t __rseq_offset`; both are initialised before any user
    // code runs and never change afterwards.
    unsafe { Some(((offset as *const isize).read(), (size as *const u32).read())) }
}

/// The thread pointer (`%fs:0` holds its own address on x86-64).
#[inline]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the TCB self-pointer at %fs:0, present for every thread
    // created by glibc (x86-64 TLS ABI, variant II).
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:0", out(reg) tp,
            options(nostack, preserves_flags, readonly, pure));
    }
    tp
}

#[inline(always)]
fn glibc_thread_area(offset: isize) -> Option<*mut Rseq> {
    let area = thread_pointer().wrapping_add_signed(offset) as *mut Rseq;
    // SAFETY: glibc registered this area for the current thread at
    // thread_pointer + __rseq_offset; it lives as long as the thread.
    let cpu = unsafe { core::ptr::addr_of!((*area).cpu_id).read_volatile() };
    // glibc leaves RSEQ_CPU_ID_REGISTRATION_FAILED when the registration of
    // this thread failed (sysdeps/unix/sysv/linux/rseq-internal.h).
    (cpu < abi::CPU_ID_REGISTRATION_FAILED).then_some(area)
}

/// Registration length: the original 32 bytes while the kernel's features fit
/// in them (keeping the historical behaviour), else the feature size rounded
/// to the alignment. `None` if it does not fit [`OwnArea`].
fn own_len(feature: u32, align: u32) -> Option<u32> {
    let align = align.max(abi::ORIG_SIZE);
    if align as usize > OWN_ALIGN || !align.is_power_of_two() {
        return None;
    }
    let len = if feature <= abi::ORIG_SIZE {
        abi::ORIG_SIZE
    } else {
        feature.next_multiple_of(align)
    };
    (len as usize <= OWN_BYTES).then_some(len)
}

/// `rseq(area, len, flags, sig)` (`kernel/rseq.c: sys_rseq`).
fn sys_rseq(area: *mut Rseq, len: u32, flags: i32) -> Result<(), Errno> {
    // SAFETY: the kernel validates every argument; `area` is either this
    // thread's OwnArea (alive until the thread exits) or is being
    // unregistered.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rseq,
            area as *mut c_void,
            len,
            flags,
            abi::SIGNATURE,
        )
    };
    if r == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Registers [`OWN`] for the calling thread.
fn register_own(p: &Process) -> Result<*mut Rseq, Errno> {
    // The kernel checks `rseq_len` and alignment: EINVAL for anything it
    // cannot accept (kernel/rseq.c: sys_rseq); refuse the same up front.
    let len = own_len(p.feature_size, p.align).ok_or(Errno(libc::EINVAL))?;
    // Make sure the exit destructor can be installed before registering: a
    // thread already tearing down its TLS gets the fallback.
    EXIT.try_with(|_| ()).map_err(|_| Errno(libc::ESRCH))?;
    let area = OWN.with(|c| c.get()).cast::<Rseq>();
    sys_rseq(area, len, 0)?;
    Ok(area)
}

/// Unregisters [`OWN`] when the thread's TLS is torn down.
struct Unregister;

impl Drop for Unregister {
    fn drop(&mut self) {
        let a = AREA.with(Cell::get);
        let own = OWN.with(|c| c.get()) as usize;
        if a == own {
            let len = own_len(process().feature_size, process().align).unwrap_or(abi::ORIG_SIZE);
            // RSEQ_FLAG_UNREGISTER with the same area, length and signature.
            let r = sys_rseq(a as *mut Rseq, len, abi::FLAG_UNREGISTER);
            debug_assert!(r.is_ok(), "rseq unregister: {r:?}");
            AREA.with(|c| c.set(EXITED));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_len_follows_the_kernel() {
        assert_eq!(own_len(20, 32), Some(32));
        assert_eq!(own_len(28, 32), Some(32));
        assert_eq!(own_len(32, 32), Some(32));
        assert_eq!(own_len(33, 32), Some(64));
        assert_eq!(own_len(40, 64), Some(64));
        assert_eq!(own_len(28, 128), None);
        assert_eq!(own_len(300, 32), None);
    }
}
