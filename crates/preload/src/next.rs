//! What lies below the library: the raw system call instruction, and the
//! next definition of every symbol it interposes (`dlsym(RTLD_NEXT, ...)`:
//! the C library's, or another preloaded library's).
//!
//! The library's own system calls (and those of the core and of Rust's
//! standard library linked into it) never go through an interposable
//! symbol: the cdylib is linked with `--wrap=syscall` (build.rs), so every
//! call to `syscall` from inside it lands in [`__wrap_syscall`], which
//! issues the instruction itself. Only the program's calls reach the
//! exported `syscall` (ffi.rs).
//!
//! # Safety
//! [`raw`] has the system-call layer (`ipcns_sys::raw`) execute the
//! `syscall` (x86-64) or `svc 0` (aarch64) instruction, with the registers the Linux system call
//! ABI names and every register the kernel clobbers declared; what the kernel does with
//! the arguments is the caller's contract (pointers it names must be
//! valid for what that system call does with them). [`Next`] keeps the
//! address `dlsym` returned for a symbol whose C prototype its user states
//! at the call (the `call*` functions transmute it to that prototype only);
//! `dlsym` is given NUL-terminated names (C string literals).
#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_long, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};
use ipcns_sys::signal;

/// `syscall(n, a...)` as the kernel sees it: the raw return value
/// (-errno on failure).
///
/// # Safety
/// The arguments must be valid for system call `n` (pointers to memory
/// that call may read or write); `n` must not be one that returns twice or
/// on another stack (clone, fork, vfork).
#[inline]
pub unsafe fn raw(n: c_long, a: [c_long; 6]) -> c_long {
    // SAFETY: the caller's contract, passed on (`ipcns_sys::raw` issues
    // the instruction).
    unsafe { ipcns_sys::raw::raw(n, a) }
}

/// A raw system call's result as `Result`: the value, or the errno.
pub fn result(r: c_long) -> Result<c_long, i32> {
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r)
    }
}

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: as in `set_errno`.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno, a valid
    // int for the thread's whole life.
    unsafe { *libc::__errno_location() = e };
}

/// `syscall(3)` for the code linked into this library: the C library's
/// convention (-1 and errno on failure) over the raw instruction. The
/// linker sends every `syscall` reference from inside the library here
/// (`--wrap=syscall`), so the core's futexes and file work, and Rust's
/// standard library, reach the kernel without passing through any
/// interposable symbol, ours included.
///
/// # Safety
/// As [`raw`]: the callers (the core, std) pass what each call needs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_syscall(
    n: c_long,
    a: c_long,
    b: c_long,
    c: c_long,
    d: c_long,
    e: c_long,
    f: c_long,
) -> c_long {
    // SAFETY: forwarded as given (see the contract above).
    match result(unsafe { raw(n, [a, b, c, d, e, f]) }) {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The next definition of one symbol, looked up once.
pub struct Next {
    name: &'static core::ffi::CStr,
    /// The address; 0 not looked up yet, 1 looked up and absent.
    addr: AtomicUsize,
}

impl Next {
    pub const fn new(name: &'static core::ffi::CStr) -> Next {
        Next {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The address, or `None` if nothing after this library defines it.
    /// Racing first calls both look it up and store the same value.
    pub fn get(&self) -> Option<usize> {
        // Relaxed: the value is a pure function of the name (a racing
        // writer stores the same address), and the code it points to was
        // mapped before either thread could look it up.
        match self.addr.load(Ordering::Relaxed) {
            0 => self.resolve(),
            1 => None,
            a => Some(a),
        }
    }

    #[cold]
    fn resolve(&self) -> Option<usize> {
        let name: *const c_char = self.name.as_ptr();
        // SAFETY: a NUL-terminated name; RTLD_NEXT asks for the next
        // object's definition after this library in the search order.
        let p: *mut c_void = unsafe { libc::dlsym(libc::RTLD_NEXT, name) };
        let a = p as usize;
        self.addr
            .store(if a <= 1 { 1 } else { a }, Ordering::Relaxed);
        (a > 1).then_some(a)
    }
}

/// The symbols passed on to their next definition.
pub static SYSCALL: Next = Next::new(c"syscall");
pub static SETUID: Next = Next::new(c"setuid");
pub static SETEUID: Next = Next::new(c"seteuid");
pub static SETREUID: Next = Next::new(c"setreuid");
pub static SETRESUID: Next = Next::new(c"setresuid");
pub static SETGID: Next = Next::new(c"setgid");
pub static SETEGID: Next = Next::new(c"setegid");
pub static SETREGID: Next = Next::new(c"setregid");
pub static SETRESGID: Next = Next::new(c"setresgid");
pub static SETGROUPS: Next = Next::new(c"setgroups");
pub static SETFSUID: Next = Next::new(c"setfsuid");
pub static SETFSGID: Next = Next::new(c"setfsgid");
pub static CAPSET: Next = Next::new(c"capset");

/// Looks every symbol up (at load time, so that the first call of each
/// costs nothing more).
pub fn resolve_all() {
    for n in [
        &SYSCALL,
        &SETUID,
        &SETEUID,
        &SETREUID,
        &SETRESUID,
        &SETGID,
        &SETEGID,
        &SETREGID,
        &SETRESGID,
        &SETGROUPS,
        &SETFSUID,
        &SETFSGID,
        &CAPSET,
        &OPEN,
        &OPEN64,
        &OPENAT,
        &OPENAT64,
        &OPEN_2,
        &OPEN64_2,
        &OPENAT_2,
        &OPENAT64_2,
        &FOPEN,
        &FOPEN64,
        &WRITE,
        &CLOSE,
        &DUP,
        &DUP2,
        &DUP3,
        &FCNTL,
        &FCNTL64,
        &UNSHARE,
        &WAIT4,
        &EXIT,
        &WAITID,
        &PWRITE,
        &PWRITE64,
        &SIGACTION,
        &SIGACTION_2,
        &SIGNAL,
        &BSD_SIGNAL,
        &SSIGNAL,
        &SYSV_SIGNAL,
        &SYSV_SIGNAL_2,
        &SIGPROCMASK,
        &PTHREAD_SIGMASK,
        &SIGLONGJMP,
        &LONGJMP,
        &LONGJMP_CHK,
        &SETCONTEXT,
        &SWAPCONTEXT,
        &SIGHOLD,
        &SIGRELSE,
        &SIGSETMASK,
        &SIGBLOCK,
    ] {
        n.get();
    }
}

/// The next `syscall(n, a...)`; the raw instruction (with the C
/// library's convention) when there is none.
///
/// # Safety
/// As for the program's own call: the arguments are valid for system call
/// `n`.
pub unsafe fn call_syscall(n: c_long, a: [c_long; 6]) -> c_long {
    match SYSCALL.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_long, ...) -> c_long;
            // SAFETY: `syscall` is `long syscall(long, ...)` in every C
            // library this runs on.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the caller's arguments, forwarded as they came.
            unsafe { f(n, a[0], a[1], a[2], a[3], a[4], a[5]) }
        }
        // SAFETY: as above.
        None => unsafe { __wrap_syscall(n, a[0], a[1], a[2], a[3], a[4], a[5]) },
    }
}

/// A system call standing in for a missing next symbol: its number and
/// arguments (the C library's wrappers are thin over these).
pub type Fallback = (c_long, [c_long; 3]);

/// Calls the next `int NAME(unsigned, ...)` of one to three id arguments
/// (setuid ... setresgid, setfsuid, setfsgid); without one, `fallback`.
pub fn call_ids(next: &Next, ids: &[u32], fallback: Fallback) -> i32 {
    let Some(f) = next.get() else {
        let (n, [a, b, c]) = fallback;
        // SAFETY: integer arguments only.
        return unsafe { __wrap_syscall(n, a, b, c, 0, 0, 0) as i32 };
    };
    match *ids {
        [a] => {
            type F = unsafe extern "C" fn(u32) -> i32;
            // SAFETY: the symbols called with one id take one id.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: an integer argument only.
            unsafe { f(a) }
        }
        [a, b] => {
            type F = unsafe extern "C" fn(u32, u32) -> i32;
            // SAFETY: the symbols called with two ids take two.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: integer arguments only.
            unsafe { f(a, b) }
        }
        [a, b, c] => {
            type F = unsafe extern "C" fn(u32, u32, u32) -> i32;
            // SAFETY: the symbols called with three ids take three.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: integer arguments only.
            unsafe { f(a, b, c) }
        }
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

/// Calls the next `int NAME(T, void *)` (setgroups: `size_t, const gid_t
/// *`; capset: two pointers), passing both words as they came.
///
/// # Safety
/// The words are the program's arguments to that function, forwarded
/// unchanged: whatever they point to is the program's business.
pub unsafe fn call_word_ptr(next: &Next, n: c_long, a: usize, b: usize) -> i32 {
    match next.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(usize, usize) -> i32;
            // SAFETY: setgroups and capset take two machine words.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the caller's arguments, forwarded (contract above).
            unsafe { f(a, b) }
        }
        // SAFETY: as above.
        None => unsafe { __wrap_syscall(n, a as c_long, b as c_long, 0, 0, 0, 0) as i32 },
    }
}

/// Writes `msg` to stderr (descriptor 2) with one raw `write`.
pub fn say(msg: &str) {
    let b = msg.as_bytes();
    // SAFETY: writes `b.len()` bytes of a live string to descriptor 2.
    let _ = unsafe {
        raw(
            libc::SYS_write,
            [2, b.as_ptr() as c_long, b.len() as c_long, 0, 0, 0],
        )
    };
}

/// A close-on-exec duplicate of descriptor `fd` (`F_DUPFD_CLOEXEC`), or
/// `None` if `fd` is not open.
pub fn dup_cloexec(fd: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return None;
    }
    // SAFETY: fcntl on a descriptor number; no memory is involved.
    let r = result(unsafe {
        raw(
            libc::SYS_fcntl,
            [fd as c_long, libc::F_DUPFD_CLOEXEC as c_long, 3, 0, 0, 0],
        )
    })
    .ok()?;
    // SAFETY: the kernel just made descriptor `r` for us alone: nothing
    // else owns or will close it.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(r as i32) })
}

/// The file calls interposed for the /proc emulation (`ffi/open.rs`).
pub static OPEN: Next = Next::new(c"open");
pub static OPEN64: Next = Next::new(c"open64");
pub static OPENAT: Next = Next::new(c"openat");
pub static OPENAT64: Next = Next::new(c"openat64");
pub static OPEN_2: Next = Next::new(c"__open_2");
pub static OPEN64_2: Next = Next::new(c"__open64_2");
pub static OPENAT_2: Next = Next::new(c"__openat_2");
pub static OPENAT64_2: Next = Next::new(c"__openat64_2");
pub static FOPEN: Next = Next::new(c"fopen");
pub static FOPEN64: Next = Next::new(c"fopen64");
pub static WRITE: Next = Next::new(c"write");
pub static PWRITE: Next = Next::new(c"pwrite");
pub static PWRITE64: Next = Next::new(c"pwrite64");
pub static CLOSE: Next = Next::new(c"close");
pub static DUP: Next = Next::new(c"dup");
pub static DUP2: Next = Next::new(c"dup2");
pub static DUP3: Next = Next::new(c"dup3");
pub static FCNTL: Next = Next::new(c"fcntl");
pub static FCNTL64: Next = Next::new(c"fcntl64");

/// `setenv(key, value, 1)` (the C library's: not thread safe, see
/// `unshare.rs`); a value with a NUL is not set.
pub fn set_env(key: &str, value: &[u8]) {
    let (Ok(k), Ok(v)) = (
        std::ffi::CString::new(key),
        std::ffi::CString::new(value.to_vec()),
    ) else {
        return;
    };
    // SAFETY: two NUL-terminated strings; setenv copies them.
    unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
}

/// `unsetenv(key)`.
pub fn unset_env(key: &str) {
    let Ok(k) = std::ffi::CString::new(key) else {
        return;
    };
    // SAFETY: a NUL-terminated string.
    unsafe { libc::unsetenv(k.as_ptr()) };
}

pub static UNSHARE: Next = Next::new(c"unshare");
pub static WAIT4: Next = Next::new(c"wait4");
pub static EXIT: Next = Next::new(c"_exit");
pub static WAITID: Next = Next::new(c"waitid");

/// The signal calls whose handlers are wrapped (`ffi/signals.rs`).
pub static SIGACTION: Next = Next::new(c"sigaction");
pub static SIGACTION_2: Next = Next::new(c"__sigaction");
pub static SIGNAL: Next = Next::new(c"signal");
pub static BSD_SIGNAL: Next = Next::new(c"bsd_signal");
pub static SSIGNAL: Next = Next::new(c"ssignal");
pub static SYSV_SIGNAL: Next = Next::new(c"sysv_signal");
pub static SYSV_SIGNAL_2: Next = Next::new(c"__sysv_signal");

/// The calls that change (or may restore) the calling thread's signal
/// mask, interposed to keep its fault state (`user/fault.rs`).
pub static SIGPROCMASK: Next = Next::new(c"sigprocmask");
pub static PTHREAD_SIGMASK: Next = Next::new(c"pthread_sigmask");
pub static SIGLONGJMP: Next = Next::new(c"siglongjmp");
pub static LONGJMP: Next = Next::new(c"longjmp");
pub static LONGJMP_CHK: Next = Next::new(c"__longjmp_chk");
pub static SETCONTEXT: Next = Next::new(c"setcontext");
pub static SWAPCONTEXT: Next = Next::new(c"swapcontext");
pub static SIGHOLD: Next = Next::new(c"sighold");
pub static SIGRELSE: Next = Next::new(c"sigrelse");
pub static SIGSETMASK: Next = Next::new(c"sigsetmask");
pub static SIGBLOCK: Next = Next::new(c"sigblock");

/// The next `int sigaction(int, const struct sigaction *, struct
/// sigaction *)` (or `__sigaction`); -1 with ENOSYS when there is none.
///
/// # Safety
/// `act` is null or points to a `struct sigaction` the call may read,
/// `oact` is null or points to one it may write (the C library's own
/// contract: it dereferences both itself).
pub unsafe fn call_sigaction(
    next: &Next,
    sig: c_int,
    act: *const libc::sigaction,
    oact: *mut libc::sigaction,
) -> c_int {
    let Some(f) = next.get() else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    type F = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    // SAFETY: the symbols looked up under these names have this prototype.
    let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
    // SAFETY: the caller's contract, passed on.
    unsafe { f(sig, act, oact) }
}

/// The next `sighandler_t NAME(int, sighandler_t)` (signal, bsd_signal,
/// ssignal, sysv_signal): its result, or `SIG_ERR` with ENOSYS
/// when there is none. Handlers travel as machine words.
pub fn call_signal(next: &Next, sig: c_int, handler: usize) -> usize {
    let Some(f) = next.get() else {
        set_errno(libc::ENOSYS);
        return libc::SIG_ERR;
    };
    type F = unsafe extern "C" fn(c_int, usize) -> usize;
    // SAFETY: the symbols looked up under these names have this prototype
    // (a handler is a function pointer: one machine word).
    let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
    // SAFETY: integers only; the handler is installed, never called, here.
    unsafe { f(sig, handler) }
}

/// The C library's internal signals (signal N as bit N-1), which a
/// program may neither handle nor block: glibc's 32 and 33 (thread
/// cancellation, set*id broadcasts: `__is_internal_signal`); musl's 32 to
/// 34 (SIGEV_THREAD timers, cancellation, `__synccall` for the set*id
/// family: `sigaddset` refuses them).
#[cfg(not(target_env = "musl"))]
pub const INTERNAL_SIGNALS: u64 = (1 << 31) | (1 << 32);
#[cfg(target_env = "musl")]
pub const INTERNAL_SIGNALS: u64 = (1 << 31) | (1 << 32) | (1 << 33);

/// Blocks every signal but the C library's internal ones
/// ([`INTERNAL_SIGNALS`], whose handlers never touch signal actions) on
/// the calling thread; the mask it replaced.
pub fn block_signals() -> u64 {
    let all: u64 = !INTERNAL_SIGNALS;
    let mut old: u64 = 0;
    let _ = signal::sigprocmask(libc::SIG_BLOCK, Some(&all), Some(&mut old));
    old
}

/// `sigprocmask(how, {set}, &old)` for the calling thread (signals 1 to
/// 64 as bits 0 to 63): the mask it replaced, None if the kernel refused.
pub fn change_signal_mask(how: c_int, set: u64) -> Option<u64> {
    let mut old: u64 = 0;
    match signal::sigprocmask(how, Some(&set), Some(&mut old)) {
        Ok(()) => Some(old),
        Err(e) => {
            set_errno(e.raw());
            None
        }
    }
}

/// Sets the calling thread's signal mask back to `mask` (from
/// [`block_signals`]).
pub fn set_signal_mask(mask: u64) {
    let _ = signal::sigprocmask(libc::SIG_SETMASK, Some(&mask), None);
}
