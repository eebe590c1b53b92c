//! Where each thread's stack is, for the direct path.
//!
//! Each thread's stack bounds are found once (`pthread_getattr_np`) and
//! kept in a table indexed by the thread pointer (the C library's thread
//! control block, which no two live threads share), so a check costs a
//! few loads and no thread-local look-up; a thread's entry is cleared when
//! it exits (a `pthread_key` destructor). The main thread's are kept apart,
//! in the hot cache line. A thread that shares its creator's thread
//! pointer (a raw `clone` without a new TLS) finds its creator's bounds,
//! which hold its stack pointer only if its stack lies in its creator's,
//! where the range is mapped all the same.
//!
//! # Safety
//! The stack pointer is read from its register (the thread pointer comes
//! from `ipcns_sys::process::thread_pointer`). `pthread_getattr_np` and
//! `pthread_attr_getstack` fill locals of ours. The pages from a thread's
//! stack pointer to the top of its stack are in use by its live frames,
//! so they are mapped read-write for as long as the call that checked
//! them runs. The `pthread_key` destructor only stores to atomics and
//! never dereferences its argument.
#![allow(unsafe_code)]

use super::bounds::{BLOCKED, Bounds, UNBLOCKED};
use super::sys;
use crate::hot::HOT;
use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, Ordering};

/// The stack pointer.
#[inline(always)]
pub(super) fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    sp
}

/// Other threads' bounds, one per cache line.
#[repr(C, align(64))]
struct Line(Bounds);

const NSTACKS: usize = 256;
static STACKS: [Line; NSTACKS] = [const { Line(Bounds::new()) }; NSTACKS];
/// The main thread's are apart, in the hot line (and finding them reads
/// /proc/self/maps, so no other thread may evict them).
static MAIN: &Bounds = &HOT.main;

#[inline(always)]
fn index(tp: usize) -> usize {
    (tp.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) % NSTACKS
}

/// The calling thread's stack `[lo, hi)`, if known (found once).
#[inline(always)]
pub(super) fn stack() -> Option<(usize, usize)> {
    let tp = ipcns_sys::process::thread_pointer();
    let b = match MAIN.read(tp) {
        Some(b) => b,
        None => match STACKS[index(tp)].0.read(tp) {
            Some(b) => b,
            None => find_stack(tp),
        },
    };
    (b.0 < b.1).then_some(b)
}

/// The mask bits of SIGSEGV and SIGBUS (signal n is bit n - 1): the
/// signals a copy that may fault (`fault.rs`) needs unblocked.
pub const FAULT_BITS: u64 = (1 << (libc::SIGSEGV - 1)) | (1 << (libc::SIGBUS - 1));

/// The entry that holds the calling thread's fault state: the main
/// thread's when it is ours, else the table's slot for `tp`.
#[inline(always)]
fn faults_slot(tp: usize) -> &'static Bounds {
    if MAIN.read(tp).is_some() {
        MAIN
    } else {
        &STACKS[index(tp)].0
    }
}

/// Whether SIGSEGV and SIGBUS are both unblocked on the calling thread
/// (`fault.rs`): the recorded answer, else the kernel's, recorded.
#[inline(always)]
pub(super) fn faults_unblocked() -> bool {
    let tp = ipcns_sys::process::thread_pointer();
    let slot = faults_slot(tp);
    match slot.faults(tp) {
        UNBLOCKED => true,
        BLOCKED => false,
        _ => ask_faults(slot, tp),
    }
}

#[cold]
#[inline(never)]
fn ask_faults(slot: &Bounds, tp: usize) -> bool {
    let mut old: u64 = 0;
    if ipcns_sys::signal::sigprocmask(libc::SIG_BLOCK, None, Some(&mut old)).is_err() {
        return false;
    }
    let unblocked = old & FAULT_BITS == 0;
    slot.set_faults(tp, if unblocked { UNBLOCKED } else { BLOCKED });
    unblocked
}

/// The calling thread's signal mask is now `mask` (signals 1 to 64), or
/// unknown (`None`).
pub fn mask_is(mask: Option<u64>) {
    let tp = ipcns_sys::process::thread_pointer();
    let state = match mask {
        Some(m) if m & FAULT_BITS == 0 => UNBLOCKED,
        Some(_) => BLOCKED,
        None => 0,
    };
    faults_slot(tp).set_faults(tp, state);
}

/// A wrapped handler starts on this thread: its mask is the handler's
/// until it returns. The state to give back to [`handler_left`].
pub fn handler_entered() -> usize {
    let tp = ipcns_sys::process::thread_pointer();
    let slot = faults_slot(tp);
    let was = slot.faults(tp);
    slot.set_faults(tp, 0);
    was
}

/// The wrapped handler returned: the mask is the interrupted code's again.
pub fn handler_left(was: usize) {
    let tp = ipcns_sys::process::thread_pointer();
    faults_slot(tp).set_faults(tp, was);
}

/// Finds and records the calling thread's stack bounds.
#[cold]
#[inline(never)]
fn find_stack(tp: usize) -> (usize, usize) {
    let main = sys(libc::SYS_gettid, [0; 6]).ok() == sys(libc::SYS_getpid, [0; 6]).ok();
    let slot = if main { MAIN } else { &STACKS[index(tp)].0 };
    // An empty range first: a call that re-enters while the bounds are
    // looked up (pthread_getattr_np reads /proc/self/maps for the main
    // thread) takes the probed path.
    slot.write(tp, 1, 1);
    let (lo, hi) = stack_bounds().unwrap_or((1, 1));
    slot.write(tp, lo, hi);
    if !main {
        forget_at_exit(tp);
    }
    (lo, hi)
}

/// The key whose destructor clears an exiting thread's entry; u32::MAX
/// none yet, u32::MAX - 1 being made.
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

extern "C" fn forget(tp: *mut c_void) {
    let tp = tp as usize;
    // Only if the entry is still this thread's (another may have taken
    // the slot since). Relaxed: a reader re-checks the key after reading.
    STACKS[index(tp)].0.forget(tp);
}

/// Arranges for `forget(tp)` when the calling thread exits.
fn forget_at_exit(tp: usize) {
    let mut key = EXIT_KEY.load(Ordering::Acquire);
    if key == u32::MAX
        && EXIT_KEY
            .compare_exchange(u32::MAX, u32::MAX - 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: creates a key with a destructor that only touches atomics.
        let r = unsafe { libc::pthread_key_create(&mut k, Some(forget)) };
        key = if r == 0 { k } else { u32::MAX - 1 };
        EXIT_KEY.store(key, Ordering::Release);
    }
    if key < u32::MAX - 1 {
        // SAFETY: a valid key; the value is a number, never dereferenced.
        unsafe { libc::pthread_setspecific(key, tp as *const c_void) };
    }
}

/// The calling thread's stack, `[lowest, top)`, from `pthread_getattr_np`.
pub(super) fn stack_bounds() -> Option<(usize, usize)> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: fills the local attribute object for the calling thread.
    let r = unsafe { libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) };
    if r != 0 {
        return None;
    }
    let mut addr: *mut c_void = core::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `attr` was initialised by pthread_getattr_np just above;
    // the out-pointers are locals.
    let r = unsafe { libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) };
    // SAFETY: initialised above, destroyed once.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    let lo = addr as usize;
    (r == 0 && size > 0).then(|| (lo, lo.saturating_add(size)))
}
