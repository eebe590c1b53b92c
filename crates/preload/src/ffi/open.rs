//! The file calls interposed for `/proc` (`procfs/`): the open family,
//! `fopen`, and `write` with the descriptor-duplicating calls (so that a
//! write on a duplicate of a descriptor open on a sysctl, as a shell's
//! `echo 5 > /proc/sys/kernel/msg_next_id` makes, is applied too).
//!
//! A path is looked at first (its first bytes, `procfs::target_of`); every
//! other path goes to the next definition unchanged, errno its own. `open`
//! and `openat` are variadic in C: their `mode` is taken as a fixed
//! parameter, which is where x86-64 and aarch64 Linux pass both (as for
//! `semctl`, `ffi/mod.rs`); `fcntl`'s third argument likewise.
//!
//! # Safety
//! The exported names interpose the C library's on purpose (`no_mangle`).
//! The program's pointers are read only through `user.rs` (never a
//! fault) or passed on unchanged; each next definition is called with the
//! prototype the C library gives it. The `fopencookie` callbacks get the
//! cookie this file boxed (freed once, by the close callback) and stdio's
//! own buffer with its true length.
#![allow(unsafe_code)]

use crate::next::{self, Next};
use crate::procfs::{self, path::Target};
use core::ffi::{c_char, c_int, c_long, c_void};

/// The result of an emulated open in the C convention.
fn ret(r: Result<i32, i32>) -> c_int {
    match r {
        Ok(fd) => fd,
        Err(e) => {
            next::set_errno(e);
            -1
        }
    }
}

/// An emulated open of `path` relative to `dirfd`, or `None` for the next
/// definition.
#[inline(always)]
fn ours(dirfd: c_int, path: *const c_char, flags: c_int) -> Option<c_int> {
    let t = std::panic::catch_unwind(|| {
        let t = procfs::target_of(dirfd, path as usize)?;
        procfs::open(t, flags).map(ret)
    });
    t.ok().flatten()
}

fn call_open(n: &Next, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    match n.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(*const c_char, c_int, u32) -> c_int;
            // SAFETY: open, open64, __open_2 and __open64_2 take (path,
            // flags[, mode]); the extra register is ignored by the latter.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(path, flags, mode) }
        }
        None => call_openat(&next::OPENAT, libc::AT_FDCWD, path, flags, mode),
    }
}

fn call_openat(n: &Next, dirfd: c_int, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    match n.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_int, *const c_char, c_int, u32) -> c_int;
            // SAFETY: openat, openat64, __openat_2 and __openat64_2 take
            // (dirfd, path, flags[, mode]).
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(dirfd, path, flags, mode) }
        }
        // SAFETY: the program's arguments, passed on to the system call.
        None => unsafe {
            next::__wrap_syscall(
                libc::SYS_openat,
                dirfd as c_long,
                path as c_long,
                flags as c_long,
                mode as c_long,
                0,
                0,
            ) as c_int
        },
    }
}

/// `int open(const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn open(path: *const c_char, flags: c_int, mode: u32) -> c_int {
    ours(libc::AT_FDCWD, path, flags).unwrap_or_else(|| call_open(&next::OPEN, path, flags, mode))
}

/// `int open64(const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn open64(path: *const c_char, flags: c_int, mode: u32) -> c_int {
    ours(libc::AT_FDCWD, path, flags).unwrap_or_else(|| call_open(&next::OPEN64, path, flags, mode))
}

/// `int __open_2(const char *path, int flags)` (`_FORTIFY_SOURCE`).
#[unsafe(no_mangle)]
pub extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    ours(libc::AT_FDCWD, path, flags).unwrap_or_else(|| call_open(&next::OPEN_2, path, flags, 0))
}

/// `int __open64_2(const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    ours(libc::AT_FDCWD, path, flags).unwrap_or_else(|| call_open(&next::OPEN64_2, path, flags, 0))
}

/// `int openat(int dirfd, const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    ours(dirfd, path, flags).unwrap_or_else(|| call_openat(&next::OPENAT, dirfd, path, flags, mode))
}

/// `int openat64(int dirfd, const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    ours(dirfd, path, flags)
        .unwrap_or_else(|| call_openat(&next::OPENAT64, dirfd, path, flags, mode))
}

/// `int __openat_2(int dirfd, const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    ours(dirfd, path, flags).unwrap_or_else(|| call_openat(&next::OPENAT_2, dirfd, path, flags, 0))
}

/// `int __openat64_2(int dirfd, const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    ours(dirfd, path, flags)
        .unwrap_or_else(|| call_openat(&next::OPENAT64_2, dirfd, path, flags, 0))
}

/// The `syscall()` forms: `Some` result for SYS_open, SYS_openat and
/// SYS_openat2 on an emulated path (the raw convention: -1 and errno).
pub(super) fn syscall_open(n: c_long, a: c_long, b: c_long, c: c_long) -> Option<c_long> {
    let (dirfd, path, flags) = match n {
        libc::SYS_open => (libc::AT_FDCWD, a as usize, b as c_int),
        libc::SYS_openat => (a as c_int, b as usize, c as c_int),
        libc::SYS_openat2 => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let mut how = [0u8; 8];
            crate::user::read(c as usize, &mut how).ok()?;
            (a as c_int, b as usize, u64::from_ne_bytes(how) as c_int)
        }
        _ => return None,
    };
    ours(dirfd, path as *const c_char, flags).map(c_long::from)
}

/// `ssize_t write(int fd, const void *buf, size_t n)`: a descriptor open
/// for writing on a sysctl has the text applied first (`procfs`).
#[unsafe(no_mangle)]
pub extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    if procfs::track::any() {
        let r = std::panic::catch_unwind(|| procfs::before_write(fd, buf as usize, n));
        if let Ok(Err(e)) = r {
            next::set_errno(e);
            return -1;
        }
    }
    match next::WRITE.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;
            // SAFETY: write's prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(fd, buf, n) }
        }
        // SAFETY: as above, to the system call.
        None => unsafe {
            next::__wrap_syscall(
                libc::SYS_write,
                fd as c_long,
                buf as c_long,
                n as c_long,
                0,
                0,
                0,
            ) as isize
        },
    }
}

/// After a duplicating call made `new` from `old` (when it succeeded).
fn dup_done(old: c_int, new: c_int) -> c_int {
    if new >= 0 && procfs::track::any() && old != new {
        procfs::track::copy(old, new);
    }
    new
}

fn call_ints(n: &Next, sys: c_long, a: [c_long; 3]) -> c_int {
    match n.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_long, c_long, c_long) -> c_int;
            // SAFETY: dup, dup2, dup3 and fcntl take up to three words
            // (ints, or fcntl's argument word); extra registers are
            // ignored.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(a[0], a[1], a[2]) }
        }
        // SAFETY: as above, to the system call.
        None => unsafe { next::__wrap_syscall(sys, a[0], a[1], a[2], 0, 0, 0) as c_int },
    }
}

/// `int dup(int fd)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup(fd: c_int) -> c_int {
    dup_done(
        fd,
        call_ints(&next::DUP, libc::SYS_dup, [fd as c_long, 0, 0]),
    )
}

/// `int dup2(int old, int new)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    dup_done(
        old,
        call_ints(
            &next::DUP2,
            libc::SYS_dup2,
            [old as c_long, new as c_long, 0],
        ),
    )
}

/// `int dup3(int old, int new, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_done(
        old,
        call_ints(
            &next::DUP3,
            libc::SYS_dup3,
            [old as c_long, new as c_long, flags as c_long],
        ),
    )
}

fn fcntl_with(n: &Next, fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let r = call_ints(
        n,
        libc::SYS_fcntl,
        [fd as c_long, cmd as c_long, arg as c_long],
    );
    if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
        dup_done(fd, r)
    } else {
        r
    }
}

/// `int fcntl(int fd, int cmd, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    fcntl_with(&next::FCNTL, fd, cmd, arg)
}

/// `int fcntl64(int fd, int cmd, ...)` (glibc 2.28's name).
#[unsafe(no_mangle)]
pub extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    let n = if next::FCNTL64.get().is_some() {
        &next::FCNTL64
    } else {
        &next::FCNTL
    };
    fcntl_with(n, fd, cmd, arg)
}

#[repr(C)]
struct CookieIo {
    read: Option<extern "C" fn(*mut c_void, *mut c_char, usize) -> isize>,
    write: Option<extern "C" fn(*mut c_void, *const c_char, usize) -> isize>,
    seek: Option<extern "C" fn(*mut c_void, *mut i64, c_int) -> c_int>,
    close: Option<extern "C" fn(*mut c_void) -> c_int>,
}

unsafe extern "C" {
    fn fopencookie(cookie: *mut c_void, mode: *const c_char, io: CookieIo) -> *mut libc::FILE;
}

/// A stream open for writing on a sysctl.
struct Cookie {
    sysctl: usize,
    /// The text read back (mode `r+`), and how far reads and writes went.
    text: Vec<u8>,
    pos: usize,
}

extern "C" fn cookie_read(c: *mut c_void, buf: *mut c_char, size: usize) -> isize {
    // SAFETY: our boxed cookie, alive until the close callback.
    let c = unsafe { &mut *(c as *mut Cookie) };
    let rest = c.text.get(c.pos..).unwrap_or(&[]);
    let n = rest.len().min(size);
    // SAFETY: stdio's buffer of `size` bytes; `n <= size`.
    unsafe { core::ptr::copy_nonoverlapping(rest.as_ptr(), buf as *mut u8, n) };
    c.pos += n;
    n as isize
}

extern "C" fn cookie_write(c: *mut c_void, buf: *const c_char, size: usize) -> isize {
    // SAFETY: our boxed cookie, alive until the close callback.
    let c = unsafe { &mut *(c as *mut Cookie) };
    if c.pos == 0 && size > 0 {
        // SAFETY: stdio's buffer holding `size` bytes.
        let b = unsafe { core::slice::from_raw_parts(buf as *const u8, size) };
        let r =
            std::panic::catch_unwind(|| procfs::apply(c.sysctl, b)).unwrap_or(Err(libc::EINVAL));
        if let Err(e) = r {
            next::set_errno(e);
            return -1;
        }
    }
    c.pos += size;
    size as isize
}

extern "C" fn cookie_close(c: *mut c_void) -> c_int {
    // SAFETY: the box made in `fopen_ours`, freed here only (stdio calls
    // close once).
    drop(unsafe { Box::from_raw(c as *mut Cookie) });
    0
}

/// The `open` flags of an `fopen` mode string (glibc's `_IO_new_file_fopen`).
fn mode_flags(m: &[u8]) -> Option<c_int> {
    let mut f = match m.first()? {
        b'r' => libc::O_RDONLY,
        b'w' => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        b'a' => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
        _ => return None,
    };
    for &b in &m[1..] {
        match b {
            b'+' => f = (f & !libc::O_ACCMODE) | libc::O_RDWR,
            b'e' => f |= libc::O_CLOEXEC,
            b'x' => f |= libc::O_EXCL,
            b',' => break,
            _ => {}
        }
    }
    Some(f)
}

/// An emulated `fopen`, or `None` for the next definition.
fn fopen_ours(path: *const c_char, mode: *const c_char) -> Option<*mut libc::FILE> {
    let t = procfs::target_of(libc::AT_FDCWD, path as usize)?;
    let mut m = [0u8; 16];
    let n = procfs::c_string(mode as usize, &mut m)?;
    let Some(flags) = mode_flags(&m[..n]) else {
        next::set_errno(libc::EINVAL);
        return Some(core::ptr::null_mut());
    };
    let fail = |e| {
        next::set_errno(e);
        Some(core::ptr::null_mut())
    };
    match t {
        Target::Sysctl(i) if flags & libc::O_ACCMODE != libc::O_RDONLY => {
            if let Err(e) = procfs::may_write() {
                return fail(e);
            }
            let text = if flags & libc::O_ACCMODE == libc::O_RDWR {
                match procfs::read_sysctl(i) {
                    Ok(t) => t.into_bytes(),
                    Err(e) => return fail(e),
                }
            } else {
                Vec::new()
            };
            let c = Box::into_raw(Box::new(Cookie {
                sysctl: i,
                text,
                pos: 0,
            }));
            let io = CookieIo {
                read: Some(cookie_read),
                write: Some(cookie_write),
                seek: None,
                close: Some(cookie_close),
            };
            // SAFETY: our cookie and callbacks; the mode string is ours.
            let f = unsafe { fopencookie(c as *mut c_void, m.as_ptr() as *const c_char, io) };
            if f.is_null() {
                // SAFETY: not handed to stdio: still ours.
                drop(unsafe { Box::from_raw(c) });
            }
            Some(f)
        }
        _ => {
            let fd = match procfs::open(t, flags)? {
                Ok(fd) => fd,
                Err(e) => return fail(e),
            };
            // SAFETY: a descriptor of ours and the NUL-terminated mode.
            let f = unsafe { libc::fdopen(fd, m.as_ptr() as *const c_char) };
            if f.is_null() {
                crate::kfile::close(fd);
            }
            Some(f)
        }
    }
}

fn call_fopen(n: &Next, path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    match n.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;
            // SAFETY: fopen's prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(path, mode) }
        }
        None => {
            next::set_errno(libc::ENOSYS);
            core::ptr::null_mut()
        }
    }
}

/// `FILE *fopen(const char *path, const char *mode)`.
#[unsafe(no_mangle)]
pub extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    std::panic::catch_unwind(|| fopen_ours(path, mode))
        .ok()
        .flatten()
        .unwrap_or_else(|| call_fopen(&next::FOPEN, path, mode))
}

/// `FILE *fopen64(const char *path, const char *mode)`.
#[unsafe(no_mangle)]
pub extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    std::panic::catch_unwind(|| fopen_ours(path, mode))
        .ok()
        .flatten()
        .unwrap_or_else(|| call_fopen(&next::FOPEN64, path, mode))
}
