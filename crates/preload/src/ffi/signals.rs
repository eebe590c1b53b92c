//! The signal calls, interposed so that every handler the program installs
//! is wrapped (`signals.rs` has the protocol): `sigaction`, `__sigaction`,
//! `signal`, `bsd_signal`, `ssignal`, `sysv_signal`, `__sysv_signal`,
//! `sigset`, and `syscall(SYS_rt_sigaction, ...)` (from `mod.rs`). glibc's
//! `signal()` and its kin call its internal `__sigaction`, not ours: they
//! are interposed themselves, and install the plain wrapper through the next
//! definition (so the flags and mask stay the C library's choice,
//! `siginterrupt` included). `sigset` also changes the signal mask, which
//! the lock blocks: it is glibc's algorithm over our `sigaction`.
//!
//! # Safety
//! `sigaction` dereferences the program's `act` and `oact` directly, as
//! glibc's own `sigaction` does (a bad pointer faults there as here);
//! `oact` only after the next definition wrote it. The raw system call's
//! structures are copied in and out by the kernel (`user::read_raw`,
//! `user::write_raw`: EFAULT, never a fault). Each wrapper transmutes the
//! word it reads to the prototype the program installed it with: the
//! SA_SIGINFO wrapper, which the kernel always runs with SA_SIGINFO,
//! calls a handler that asked for it with the kernel's three arguments
//! and any other with one; the plain wrapper's word only ever holds
//! handlers of one argument (`signals.rs`).
#![allow(unsafe_code)]

use crate::next::{self, Next};
use crate::signals;
use crate::user;
use core::ffi::{c_int, c_long, c_void};

/// The handler the kernel runs (with SA_SIGINFO) for every signal whose
/// handler came through `sigaction`: tells the core, then runs the
/// program's handler. Async-signal-safe: atomics (and one `gettid` when
/// this thread is about to sleep in an IPC call). Unwinding and longjmp
/// pass through (it holds nothing).
extern "C-unwind" fn wrapper(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    ipcns_core::note_signal();
    match signals::main_handler(sig) {
        Some((h, true)) => {
            type F = unsafe extern "C-unwind" fn(c_int, *mut libc::siginfo_t, *mut c_void);
            // SAFETY: the program installed `h` as an SA_SIGINFO handler.
            let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
            // SAFETY: the kernel's own arguments (it runs this wrapper
            // with SA_SIGINFO only).
            unsafe { f(sig, info, uc) }
        }
        Some((h, false)) => {
            type F = unsafe extern "C-unwind" fn(c_int);
            // SAFETY: the program installed `h` as a one-argument handler.
            let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
            // SAFETY: the signal number, as the kernel would pass it.
            unsafe { f(sig) }
        }
        None => {}
    }
}

/// The handler the kernel runs for every signal whose handler came
/// through `signal()` or its kin (with their flags: no SA_SIGINFO): the
/// same, for a one-argument handler.
extern "C-unwind" fn plain_wrapper(sig: c_int) {
    ipcns_core::note_signal();
    if let Some(h) = signals::plain_handler(sig) {
        type F = unsafe extern "C-unwind" fn(c_int);
        // SAFETY: the plain word holds only one-argument handlers.
        let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
        // SAFETY: the signal number, as the kernel would pass it.
        unsafe { f(sig) }
    }
}

/// `<signal.h>`: "#define SIG_HOLD ((__sighandler_t) 2)" (not in the
/// libc crate).
const SIG_HOLD: usize = 2;

/// Our wrappers' addresses.
fn wrappers() -> signals::Wrappers {
    signals::Wrappers {
        info: wrapper as *const () as usize,
        plain: plain_wrapper as *const () as usize,
    }
}

/// `sigaction` and `__sigaction` through `next`.
///
/// # Safety
/// As the C library's `sigaction`: `act` and `oact` are null or point to
/// a `struct sigaction`.
unsafe fn sigaction_via(
    next: &Next,
    sig: c_int,
    act: *const libc::sigaction,
    oact: *mut libc::sigaction,
) -> c_int {
    let held = signals::lock();
    let prev = held.current(sig);
    let r = if act.is_null() {
        // SAFETY: the program's pointers, as it passed them.
        unsafe { next::call_sigaction(next, sig, act, oact) }
    } else {
        // SAFETY: `act` points to a `struct sigaction` (glibc reads it
        // directly as well).
        let mut ours: libc::sigaction = unsafe { core::ptr::read(act) };
        let info = ours.sa_flags & libc::SA_SIGINFO != 0;
        if held.install_info(sig, ours.sa_sigaction, info) {
            ours.sa_sigaction = wrappers().info;
            ours.sa_flags |= libc::SA_SIGINFO;
        }
        // SAFETY: our copy, and the program's `oact`.
        let r = unsafe { next::call_sigaction(next, sig, &ours, oact) };
        if r != 0 {
            held.undo(sig, prev);
        }
        r
    };
    if r == 0 && !oact.is_null() {
        // SAFETY: the next definition has just written `*oact`.
        let o = unsafe { &mut *oact };
        let (h, f) = signals::translate(prev, o.sa_sigaction, o.sa_flags as u32 as u64, wrappers());
        o.sa_sigaction = h;
        o.sa_flags = f as u32 as c_int;
    }
    drop(held);
    r
}

/// `int sigaction(int sig, const struct sigaction *act, struct sigaction
/// *oact)`: a handler is installed wrapped; `oact` reads as the program
/// set it (module doc).
///
/// # Safety
/// As the C library's: `act` and `oact` are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    oact: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the program's contract, passed on.
    unsafe { sigaction_via(&next::SIGACTION, sig, act, oact) }
}

/// `__sigaction`: glibc's exported alias of `sigaction`.
///
/// # Safety
/// As [`sigaction`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    oact: *mut libc::sigaction,
) -> c_int {
    // SAFETY: the program's contract, passed on.
    unsafe { sigaction_via(&next::SIGACTION_2, sig, act, oact) }
}

/// `signal()` and its kin through `next`: a handler (not SIG_DFL,
/// SIG_IGN, SIG_HOLD or SIG_ERR) goes in as the plain wrapper, with the
/// flags the next definition chooses; the old handler comes back
/// translated.
fn signal_via(next: &Next, sig: c_int, handler: usize) -> usize {
    let held = signals::lock();
    let prev = held.current(sig);
    // SIG_HOLD and SIG_ERR are the next definition's business; SIG_DFL
    // and SIG_IGN go in as they are (`install_plain` says so).
    let wrap = handler != SIG_HOLD && handler != libc::SIG_ERR && held.install_plain(sig, handler);
    let old = next::call_signal(next, sig, if wrap { wrappers().plain } else { handler });
    if old == libc::SIG_ERR {
        held.undo(sig, prev);
        return old;
    }
    signals::translate(prev, old, 0, wrappers()).0
}

/// `sighandler_t signal(int sig, sighandler_t handler)`.
#[unsafe(no_mangle)]
pub extern "C" fn signal(sig: c_int, handler: usize) -> usize {
    signal_via(&next::SIGNAL, sig, handler)
}

/// `bsd_signal`: glibc's `signal`.
#[unsafe(no_mangle)]
pub extern "C" fn bsd_signal(sig: c_int, handler: usize) -> usize {
    signal_via(&next::BSD_SIGNAL, sig, handler)
}

/// `ssignal`: glibc's `signal`.
#[unsafe(no_mangle)]
pub extern "C" fn ssignal(sig: c_int, handler: usize) -> usize {
    signal_via(&next::SSIGNAL, sig, handler)
}

/// `sysv_signal`: a one-shot handler (SA_RESETHAND | SA_NODEFER).
#[unsafe(no_mangle)]
pub extern "C" fn sysv_signal(sig: c_int, handler: usize) -> usize {
    signal_via(&next::SYSV_SIGNAL, sig, handler)
}

/// `__sysv_signal`: the same.
#[unsafe(no_mangle)]
pub extern "C" fn __sysv_signal(sig: c_int, handler: usize) -> usize {
    signal_via(&next::SYSV_SIGNAL_2, sig, handler)
}

/// `sighandler_t sigset(int sig, sighandler_t disp)`: glibc's own steps
/// (signal/sigset.c) over our `sigaction`, since they change the calling
/// thread's signal mask, which the lock keeps blocked while it is held:
/// SIG_HOLD blocks `sig` and returns SIG_HOLD if it was blocked already,
/// else the handler in force; anything else installs `disp` (empty mask,
/// no flags), unblocks `sig`, and returns SIG_HOLD if it was blocked,
/// else the old handler.
#[unsafe(no_mangle)]
pub extern "C" fn sigset(sig: c_int, disp: usize) -> usize {
    // "if (disp == SIG_ERR || sig < 1 || __is_internal_signal (sig) || sig
    // >= NSIG) { __set_errno (EINVAL); return SIG_ERR; }"
    if disp == libc::SIG_ERR || !(1..=64).contains(&sig) || sig == 32 || sig == 33 {
        next::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    let set: u64 = 1 << (sig - 1);
    // SAFETY: a zeroed `struct sigaction` is a valid one (SIG_DFL, no
    // flags, an empty mask).
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if disp == SIG_HOLD {
        let Some(was) = next::change_signal_mask(libc::SIG_BLOCK, set) else {
            return libc::SIG_ERR;
        };
        if was & set != 0 {
            return SIG_HOLD;
        }
        // SAFETY: a null `act` and our own `oact`.
        if unsafe { sigaction_via(&next::SIGACTION, sig, core::ptr::null(), &mut old) } < 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
    // SAFETY: as above.
    let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
    act.sa_sigaction = disp;
    // SAFETY: our own `act` and `oact`.
    if unsafe { sigaction_via(&next::SIGACTION, sig, &act, &mut old) } < 0 {
        return libc::SIG_ERR;
    }
    let Some(was) = next::change_signal_mask(libc::SIG_UNBLOCK, set) else {
        return libc::SIG_ERR;
    };
    if was & set != 0 {
        SIG_HOLD
    } else {
        old.sa_sigaction
    }
}

/// `syscall(SYS_rt_sigaction, sig, act, oact, sigsetsize)`: the kernel's
/// `struct sigaction` (handler, flags, restorer, an 8-byte mask), wrapped
/// as `sigaction` wraps; the C convention (-1 and errno). In the kernel's
/// order (kernel/signal.c, `rt_sigaction`): "if (sigsetsize !=
/// sizeof(sigset_t)) return -EINVAL;", then act is copied in (EFAULT),
/// `do_sigaction` (EINVAL), then oact is copied out (EFAULT, the action
/// changed all the same): the first two are left to the kernel with the
/// program's own arguments.
pub fn rt_sigaction(sig: c_long, act: usize, oact: usize, size: c_long) -> c_long {
    let mut k = [0u64; 4];
    if size != 8 || (act != 0 && user::read_raw(act, bytes_mut(&mut k)).is_err()) {
        // SAFETY: the program's own system call, forwarded unchanged.
        return unsafe {
            next::call_syscall(
                libc::SYS_rt_sigaction,
                [sig, act as c_long, oact as c_long, size, 0, 0],
            )
        };
    }
    let sig32 = sig as c_int;
    let held = signals::lock();
    let prev = held.current(sig32);
    if act != 0 && held.install_info(sig32, k[0] as usize, k[1] & siginfo() != 0) {
        k[0] = wrappers().info as u64;
        k[1] |= siginfo();
    }
    let mut old = [0u64; 4];
    let args = [
        sig,
        if act != 0 { k.as_ptr() as c_long } else { 0 },
        if oact != 0 {
            old.as_mut_ptr() as c_long
        } else {
            0
        },
        size,
        0,
        0,
    ];
    // SAFETY: our copy of the program's action and a buffer of ours, each
    // of the kernel's 32 bytes.
    let r = unsafe { next::call_syscall(libc::SYS_rt_sigaction, args) };
    if r != 0 {
        held.undo(sig32, prev);
        return r;
    }
    if oact != 0 {
        let (h, f) = signals::translate(prev, old[0] as usize, old[1], wrappers());
        old[0] = h as u64;
        old[1] = f;
        // "if (oact && copy_to_user(oact, &old_sa.sa, sizeof(old_sa.sa)))
        // return -EFAULT;"
        if user::write_raw(oact, bytes(&old)).is_err() {
            next::set_errno(libc::EFAULT);
            return -1;
        }
    }
    r
}

fn siginfo() -> u64 {
    libc::SA_SIGINFO as u32 as u64
}

fn bytes(w: &[u64; 4]) -> &[u8] {
    // SAFETY: 32 initialized bytes of ours, u8 has no alignment.
    unsafe { core::slice::from_raw_parts(w.as_ptr().cast::<u8>(), 32) }
}

fn bytes_mut(w: &mut [u64; 4]) -> &mut [u8] {
    // SAFETY: 32 bytes of ours; any bytes are a valid u64.
    unsafe { core::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u8>(), 32) }
}
