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
    let _mask = HandlerMask::enter();
    if let Some((h, three)) = signals::main_handler(sig) {
        // SAFETY: the program installed `h` with that prototype; the
        // kernel's own arguments (it runs this wrapper with SA_SIGINFO
        // only).
        unsafe { call_handler(h, three, sig, info, uc) }
    }
}

/// Calls the program's handler `h` with the kernel's three arguments
/// (`three`: it was installed with SA_SIGINFO) or with the signal alone.
///
/// # Safety
/// `h` is a handler the program installed with that prototype; `info`
/// and `uc` are the kernel's arguments of this delivery.
unsafe fn call_handler(
    h: usize,
    three: bool,
    sig: c_int,
    info: *mut libc::siginfo_t,
    uc: *mut c_void,
) {
    if three {
        type F = unsafe extern "C-unwind" fn(c_int, *mut libc::siginfo_t, *mut c_void);
        // SAFETY: the caller's contract: an SA_SIGINFO handler.
        let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
        // SAFETY: the kernel's own arguments.
        unsafe { f(sig, info, uc) }
    } else {
        type F = unsafe extern "C-unwind" fn(c_int);
        // SAFETY: the caller's contract: a one-argument handler.
        let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
        // SAFETY: the signal number, as the kernel would pass it.
        unsafe { f(sig) }
    }
}

/// The handler the kernel runs for every signal whose handler came
/// through `signal()` or its kin (with their flags: no SA_SIGINFO): the
/// same, for a one-argument handler.
extern "C-unwind" fn plain_wrapper(sig: c_int) {
    ipcns_core::note_signal();
    let _mask = HandlerMask::enter();
    if let Some(h) = signals::plain_handler(sig) {
        type F = unsafe extern "C-unwind" fn(c_int);
        // SAFETY: the plain word holds only one-argument handlers.
        let f: F = unsafe { core::mem::transmute::<usize, F>(h) };
        // SAFETY: the signal number, as the kernel would pass it.
        unsafe { f(sig) }
    }
}

/// While a program's handler runs, its thread's mask is the handler's:
/// the fault state is unknown until it returns (`user/fault.rs`); a
/// handler left by longjmp leaves it unknown.
struct HandlerMask(usize);

impl HandlerMask {
    fn enter() -> HandlerMask {
        HandlerMask(user::handler_entered())
    }
}

impl Drop for HandlerMask {
    fn drop(&mut self) {
        user::handler_left(self.0);
    }
}

/// The handler the kernel runs for SIGSEGV and SIGBUS once the library
/// holds them (`hold_faults`): a fault raised by the library's own copy
/// ends that copy (`user::fault::recover`); anything else gets the
/// program's action as the kernel would apply it: its handler, with its
/// mask and flags (SA_SIGINFO, SA_NODEFER, SA_RESETHAND); SIG_IGN for a
/// sent signal; otherwise (SIG_DFL, or SIG_IGN for a fault, which the
/// kernel turns into SIG_DFL) the default action, by putting SIG_DFL back
/// in the kernel and letting the fault happen again, or sending the
/// signal again. Async-signal-safe: atomics and raw system calls.
extern "C-unwind" fn fault_wrapper(sig: c_int, info: *mut libc::siginfo_t, uc: *mut c_void) {
    // SAFETY: the kernel's arguments to an SA_SIGINFO handler.
    if unsafe { user::fault::recover(info, uc) } {
        return;
    }
    let a = signals::fault_action(sig);
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel's siginfo.
        unsafe { (*info).si_code }
    };
    let sent = code <= 0;
    if a.handler == libc::SIG_IGN && sent {
        return;
    }
    if a.handler <= 1 {
        user::fault::set_ready(false);
        let dfl = [0u64; 4];
        // SAFETY: a kernel `struct sigaction` of ours (SIG_DFL).
        let _ = unsafe {
            next::raw(
                libc::SYS_rt_sigaction,
                [sig as c_long, dfl.as_ptr() as c_long, 0, 8, 0, 0],
            )
        };
        if sent || code == libc::SI_KERNEL {
            let _ = ipcns_sys::process::tgkill(
                ipcns_sys::process::getpid(),
                ipcns_sys::process::gettid(),
                sig,
            );
        }
        return;
    }
    if a.flags & SA_RESETHAND != 0 {
        signals::fault_reset(sig, a.handler);
    }
    // "sigorsets(&blocked, &current->blocked, &ksig->ka.sa.sa_mask); if
    // (!(ksig->ka.sa.sa_flags & SA_NODEFER)) sigaddset(&blocked, sig);"
    let was = if uc.is_null() {
        0
    } else {
        // SAFETY: the kernel's ucontext: its mask is the interrupted code's.
        unsafe { first_word(&(*uc.cast::<libc::ucontext_t>()).uc_sigmask) }
    };
    let mut mask = was | a.mask;
    if a.flags & SA_NODEFER == 0 {
        mask |= 1 << (sig - 1);
    }
    let _ = ipcns_sys::signal::sigprocmask(libc::SIG_SETMASK, Some(&mask), None);
    ipcns_core::note_signal();
    let _mask = HandlerMask::enter();
    let three = a.flags & (libc::SA_SIGINFO as u32 as u64) != 0;
    // SAFETY: the program installed it with SA_SIGINFO or not, as its
    // flags say; the kernel's own arguments.
    unsafe { call_handler(a.handler, three, sig, info, uc) }
}

const SA_RESETHAND: u64 = libc::SA_RESETHAND as u32 as u64;
const SA_NODEFER: u64 = libc::SA_NODEFER as u32 as u64;
const SA_ONSTACK: u64 = libc::SA_ONSTACK as u32 as u64;
const SA_RESTART: u64 = libc::SA_RESTART as u32 as u64;
const SA_RESTORER: u64 = 0x0400_0000;

/// Signals 1 to 64 of a `sigset_t` (its first 8 bytes).
fn first_word(set: &libc::sigset_t) -> u64 {
    // SAFETY: a sigset_t is at least 8 bytes of plain data.
    unsafe { core::ptr::read_unaligned(core::ptr::from_ref(set).cast::<u64>()) }
}

/// Sets signals 1 to 64 of `set` (its first 8 bytes, all the kernel and
/// glibc's `sigaction` copy).
fn set_first_word(set: &mut libc::sigset_t, w: u64) {
    // SAFETY: as in `first_word`.
    unsafe { core::ptr::write_unaligned(core::ptr::from_mut(set).cast::<u64>(), w) }
}

/// The restorer the C library's `sigaction` gives every action (read back
/// from our own when we took the fault signals over).
static RESTORER: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// The kernel's action for a fault signal the library holds, given the
/// program's: our handler, SA_SIGINFO and SA_NODEFER (the program's mask
/// and SA_NODEFER are applied by the handler), the program's SA_RESTART
/// and SA_ONSTACK (always SA_ONSTACK for SIG_DFL and SIG_IGN).
fn kernel_fault_action(prog: &signals::Action) -> libc::sigaction {
    // SAFETY: a zeroed `struct sigaction` is valid (SIG_DFL, no flags).
    let mut k: libc::sigaction = unsafe { core::mem::zeroed() };
    k.sa_sigaction = fault_wrapper as *const () as usize;
    let mut flags =
        libc::SA_SIGINFO as u32 as u64 | SA_NODEFER | prog.flags & (SA_ONSTACK | SA_RESTART);
    if prog.handler <= 1 {
        flags |= SA_ONSTACK;
    }
    k.sa_flags = flags as u32 as c_int;
    k
}

/// Gives the kernel our fault handler for `sig`, with the flags that
/// `prog` (the program's action) calls for: 0, or -1 and errno.
fn install_fault(sig: c_int, prog: &signals::Action) -> c_int {
    let k = kernel_fault_action(prog);
    // SAFETY: our own action, with a handler of ours.
    unsafe { next::call_sigaction(&next::SIGACTION, sig, &k, core::ptr::null_mut()) }
}

/// Takes SIGSEGV and SIGBUS over, once, so that the library's copies may
/// fault (`user/fault.rs`): the program's actions (as the kernel showed
/// them, wrappers translated) become their shadows, and the kernel runs
/// [`fault_wrapper`] for both. Whether the library holds them.
pub fn hold_faults() -> bool {
    use core::sync::atomic::{AtomicBool, Ordering::Relaxed};
    static TRIED: AtomicBool = AtomicBool::new(false);
    if user::fault::ready() {
        return true;
    }
    if TRIED.swap(true, Relaxed) {
        return false;
    }
    let held = signals::lock();
    let mut saved: [Option<libc::sigaction>; 2] = [None, None];
    for (i, sig) in [libc::SIGBUS, libc::SIGSEGV].into_iter().enumerate() {
        // SAFETY: zeroed is a valid `struct sigaction`.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: a null `act` and our own `oact`.
        if unsafe { next::call_sigaction(&next::SIGACTION, sig, core::ptr::null(), &mut old) } != 0
        {
            return false;
        }
        let words = held.current(sig);
        let (h, f) = signals::translate(
            words,
            old.sa_sigaction,
            old.sa_flags as u32 as u64,
            wrappers(),
        );
        held.set_fault_action(
            sig,
            signals::Action::stored(
                h,
                f,
                old.sa_restorer.map_or(0, |r| r as usize),
                first_word(&old.sa_mask),
            ),
        );
        saved[i] = Some(old);
    }
    held.set_holds(true);
    for sig in [libc::SIGBUS, libc::SIGSEGV] {
        if install_fault(sig, &signals::fault_action(sig)) != 0 {
            held.set_holds(false);
            for (i, sig) in [libc::SIGBUS, libc::SIGSEGV].into_iter().enumerate() {
                if let Some(old) = &saved[i] {
                    // SAFETY: the action the kernel held before.
                    unsafe {
                        next::call_sigaction(&next::SIGACTION, sig, old, core::ptr::null_mut())
                    };
                }
            }
            return false;
        }
    }
    // SAFETY: zeroed is a valid `struct sigaction`.
    let mut ours: libc::sigaction = unsafe { core::mem::zeroed() };
    // SAFETY: a null `act` and our own `oact`.
    if unsafe {
        next::call_sigaction(
            &next::SIGACTION,
            libc::SIGSEGV,
            core::ptr::null(),
            &mut ours,
        )
    } == 0
    {
        RESTORER.store(ours.sa_restorer.map_or(0, |r| r as usize), Relaxed);
    }
    user::fault::set_ready(true);
    drop(held);
    true
}

/// `sigaction` for a fault signal the library holds (under the lock):
/// the program's action is recorded as the kernel would store it (the C
/// library adds SA_RESTORER and its restorer), the kernel keeps our
/// handler with the new SA_RESTART and SA_ONSTACK, and `oact` reads the
/// previous one as the C library's `sigaction` copies it out (handler,
/// flags, restorer, the first 8 bytes of the mask).
///
/// # Safety
/// `act` and `oact` are null or valid, as for `sigaction`.
unsafe fn fault_sigaction(
    held: &signals::Held,
    sig: c_int,
    act: *const libc::sigaction,
    oact: *mut libc::sigaction,
) -> c_int {
    let prev = signals::fault_action(sig);
    if !act.is_null() {
        // SAFETY: the caller's contract.
        let a = unsafe { &*act };
        let new = signals::Action::stored(
            a.sa_sigaction,
            a.sa_flags as u32 as u64 | SA_RESTORER,
            RESTORER.load(core::sync::atomic::Ordering::Relaxed),
            first_word(&a.sa_mask),
        );
        held.set_fault_action(sig, new);
        if install_fault(sig, &new) != 0 {
            held.set_fault_action(sig, prev);
            return -1;
        }
    }
    if !oact.is_null() {
        // SAFETY: the caller's contract.
        let o = unsafe { &mut *oact };
        o.sa_sigaction = prev.handler;
        o.sa_flags = prev.flags as u32 as c_int;
        // SAFETY: a restorer address the kernel held (or none).
        o.sa_restorer =
            unsafe { core::mem::transmute::<usize, Option<extern "C" fn()>>(prev.restorer) };
        set_first_word(&mut o.sa_mask, prev.mask);
    }
    0
}

/// Before an exec: a fault signal the program ignores stays ignored in
/// the new image (execve keeps SIG_IGN, resets handlers): the kernel gets
/// SIG_IGN back for it. Whether anything changed (for [`after_failed_exec`]).
pub fn before_exec() -> bool {
    let held = signals::lock();
    if !held.holds(libc::SIGSEGV) {
        return false;
    }
    user::fault::set_ready(false);
    for sig in [libc::SIGBUS, libc::SIGSEGV] {
        if signals::fault_action(sig).handler == libc::SIG_IGN {
            // SAFETY: a zeroed action is SIG_DFL; made SIG_IGN.
            let mut k: libc::sigaction = unsafe { core::mem::zeroed() };
            k.sa_sigaction = libc::SIG_IGN;
            // SAFETY: our own action.
            unsafe { next::call_sigaction(&next::SIGACTION, sig, &k, core::ptr::null_mut()) };
        }
    }
    true
}

/// The exec failed: our handler again for both fault signals.
pub fn after_failed_exec(changed: bool) {
    if !changed {
        return;
    }
    let held = signals::lock();
    for sig in [libc::SIGBUS, libc::SIGSEGV] {
        install_fault(sig, &signals::fault_action(sig));
    }
    user::fault::set_ready(true);
    drop(held);
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
    if held.holds(sig) {
        // SAFETY: the program's pointers, as it passed them.
        return unsafe { fault_sigaction(&held, sig, act, oact) };
    }
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
    if held.holds(sig) {
        if handler == libc::SIG_ERR {
            next::set_errno(libc::EINVAL);
            return libc::SIG_ERR;
        }
        // The C library's choices. glibc: sysv_signal "SA_ONESHOT |
        // SA_NOMASK" and an empty mask; signal, bsd_signal and ssignal
        // SA_RESTART and the signal itself in the mask. musl
        // (src/signal/signal.c): SA_RESTART and an empty mask, its
        // bsd_signal and __sysv_signal being aliases of signal.
        let sysv = !cfg!(target_env = "musl")
            && (core::ptr::eq(next, &next::SYSV_SIGNAL)
                || core::ptr::eq(next, &next::SYSV_SIGNAL_2));
        // SAFETY: a zeroed `struct sigaction` is valid.
        let mut act: libc::sigaction = unsafe { core::mem::zeroed() };
        act.sa_sigaction = handler;
        if sysv {
            act.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER;
        } else {
            act.sa_flags = libc::SA_RESTART;
            if !cfg!(target_env = "musl") {
                set_first_word(&mut act.sa_mask, 1 << (sig - 1));
            }
        }
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
        // SAFETY: our own `act` and `oact`.
        if unsafe { fault_sigaction(&held, sig, &act, &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
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
    // >= NSIG) { __set_errno (EINVAL); return SIG_ERR; }" (musl's
    // `sigaddset` refuses the same, its internal signals being 32 to 34).
    if disp == libc::SIG_ERR
        || !(1..=64).contains(&sig)
        || next::INTERNAL_SIGNALS & (1 << (sig - 1)) != 0
    {
        next::set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    let set: u64 = 1 << (sig - 1);
    // SAFETY: a zeroed `struct sigaction` is a valid one (SIG_DFL, no
    // flags, an empty mask).
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    if disp == SIG_HOLD {
        let was = next::change_signal_mask(libc::SIG_BLOCK, set);
        user::mask_is(None);
        let Some(was) = was else {
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
    let was = next::change_signal_mask(libc::SIG_UNBLOCK, set);
    user::mask_is(None);
    let Some(was) = was else {
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
    if held.holds(sig32) {
        let prev = signals::fault_action(sig32);
        if act != 0 {
            let new = signals::Action::stored(k[0] as usize, k[1], k[2] as usize, k[3]);
            held.set_fault_action(sig32, new);
            if install_fault(sig32, &new) != 0 {
                held.set_fault_action(sig32, prev);
                return -1;
            }
        }
        // "if (oact && copy_to_user(oact, &old_sa.sa, sizeof(old_sa.sa)))"
        let old = [
            prev.handler as u64,
            prev.flags,
            prev.restorer as u64,
            prev.mask,
        ];
        if oact != 0 && user::write_raw(oact, bytes(&old)).is_err() {
            next::set_errno(libc::EFAULT);
            return -1;
        }
        return 0;
    }
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

/// `sigprocmask` and `pthread_sigmask` through `next`: the call, then the
/// thread's fault state from the mask it leaves (`user/fault.rs`).
///
/// # Safety
/// As the C library's: `set` and `oset` are null or valid.
unsafe fn mask_via(
    next: &Next,
    how: c_int,
    set: *const libc::sigset_t,
    oset: *mut libc::sigset_t,
    errno_style: bool,
) -> c_int {
    let Some(f) = next.get() else {
        if errno_style {
            return libc::ENOSYS;
        }
        next::set_errno(libc::ENOSYS);
        return -1;
    };
    type F = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;
    // SAFETY: both symbols have this prototype.
    let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
    // SAFETY: zeroed is a valid sigset_t.
    let mut mine: libc::sigset_t = unsafe { core::mem::zeroed() };
    let o = if oset.is_null() {
        &mut mine as *mut libc::sigset_t
    } else {
        oset
    };
    // SAFETY: the program's `how` and `set`, and a valid `oset`.
    let r = unsafe { f(how, set, o) };
    // Both return 0 on success (sigprocmask -1, pthread_sigmask an errno).
    let now = if r != 0 {
        None
    } else if set.is_null() {
        // SAFETY: the call has just written `*o`.
        Some(first_word(unsafe { &*o }))
    } else {
        // SAFETY: the call has just read `*set` and written `*o`.
        let (old, s) = unsafe { (first_word(&*o), first_word(&*set)) };
        match how {
            libc::SIG_BLOCK => Some(old | s),
            libc::SIG_UNBLOCK => Some(old & !s),
            libc::SIG_SETMASK => Some(s),
            _ => None,
        }
    };
    user::mask_is(now);
    r
}

/// `int sigprocmask(int how, const sigset_t *set, sigset_t *oset)`.
///
/// # Safety
/// As the C library's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    oset: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: the program's contract, passed on.
    unsafe { mask_via(&next::SIGPROCMASK, how, set, oset, false) }
}

/// `int pthread_sigmask(int how, const sigset_t *set, sigset_t *oset)`
/// (an errno number on failure).
///
/// # Safety
/// As the C library's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    oset: *mut libc::sigset_t,
) -> c_int {
    // SAFETY: the program's contract, passed on.
    unsafe { mask_via(&next::PTHREAD_SIGMASK, how, set, oset, true) }
}

/// Calls that may give the thread another mask without telling us: the
/// fault state becomes unknown, then the next definition runs.
macro_rules! mask_unknown {
    ($($(#[$doc:meta])* fn $name:ident($($a:ident: $t:ty),*) -> $r:ty = $next:path;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As the C library's.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r {
            user::mask_is(None);
            let Some(f) = $next.get() else {
                // SAFETY: nothing to jump to: end as abort() would.
                unsafe { libc::abort() }
            };
            type F = unsafe extern "C" fn($($t),*) -> $r;
            // SAFETY: the symbol has this prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f($($a),*) }
        }
    )*};
}

mask_unknown! {
    /// `siglongjmp`: may restore the mask saved by `sigsetjmp`.
    fn siglongjmp(env: *mut c_void, val: c_int) -> ! = next::SIGLONGJMP;
    /// `longjmp`: glibc's `siglongjmp`.
    fn longjmp(env: *mut c_void, val: c_int) -> ! = next::LONGJMP;
    /// `__longjmp_chk`: `longjmp` under _FORTIFY_SOURCE.
    fn __longjmp_chk(env: *mut c_void, val: c_int) -> ! = next::LONGJMP_CHK;
    /// `setcontext`: sets the context's mask.
    fn setcontext(ucp: *const c_void) -> c_int = next::SETCONTEXT;
    /// `swapcontext`: sets the new context's mask.
    fn swapcontext(oucp: *mut c_void, ucp: *const c_void) -> c_int = next::SWAPCONTEXT;
    /// `sighold`: blocks a signal.
    fn sighold(sig: c_int) -> c_int = next::SIGHOLD;
    /// `sigrelse`: unblocks a signal.
    fn sigrelse(sig: c_int) -> c_int = next::SIGRELSE;
    /// `sigsetmask`: the BSD mask call.
    fn sigsetmask(mask: c_int) -> c_int = next::SIGSETMASK;
    /// `sigblock`: the BSD mask call.
    fn sigblock(mask: c_int) -> c_int = next::SIGBLOCK;
}
