//! The file calls interposed for `/proc` (`procfs/`): the open family
//! (`fopen` in `stdio.rs`), and `write` with the descriptor-duplicating calls (so that a
//! write on a duplicate of a descriptor open on a sysctl, as a shell's
//! `echo 5 > /proc/sys/kernel/msg_next_id` makes, is applied too).
//!
//! The next definition is called first, unchanged; then, unless the
//! kernel refused the path with EFAULT, its first bytes are compared with
//! the emulated files' names (`procfs::target`; in place: the kernel has
//! just read them). For every other path that is all: the result and
//! errno are the next definition's. For an emulated one, the descriptor
//! (or stream) the next definition opened on the kernel's file is closed
//! and ours returned instead. So a bad pointer is the kernel's EFAULT, and
//! the library reads the caller's path only after the kernel did (another
//! thread unmapping it in between, which the program cannot do safely
//! anyway, is the one way left to fault there). `open`
//! and `openat` are variadic in C: their `mode` is taken as a fixed
//! parameter, which is where x86-64 and aarch64 Linux pass both (as for
//! `semctl`, `ffi/mod.rs`); `fcntl`'s third argument likewise.
//!
//! # Safety
//! The exported names interpose the C library's on purpose (`no_mangle`).
//! A path (and `fopen`'s mode) is read in place only after the next
//! definition returned without EFAULT, i.e. after the kernel (or the C
//! library) read it up to its NUL; at most [`path::MAX`] bytes, stopping
//! at the NUL. Other pointers of the program are read through `user.rs`
//! or passed on unchanged; each next definition is called with the
//! prototype the C library gives it.
#![allow(unsafe_code)]

use crate::next::{self, Next};
use crate::procfs::{self, path};
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

/// The bytes of the program's path before its NUL, if there are at most
/// [`path::MAX`] of them. Only called after the kernel or the C library
/// read the string (module doc).
pub(super) fn path_bytes(path: *const c_char, buf: &mut [u8; path::MAX]) -> Option<&[u8]> {
    if (path as usize) < 4096 {
        return None;
    }
    for i in 0..path::MAX {
        // SAFETY: the string was just read up to its NUL by the next
        // definition (module doc); we stop at the NUL.
        let b = unsafe { *path.add(i) } as u8;
        if b == 0 {
            return Some(&buf[..i]);
        }
        buf[i] = b;
    }
    None
}

/// The calling thread's errno.
pub(super) fn errno() -> c_int {
    // SAFETY: the calling thread's errno, valid for its life.
    unsafe { *libc::__errno_location() }
}

/// After the next definition's open returned `r`: `r` itself, or, for an
/// emulated file, ours (the kernel's descriptor closed).
#[inline(always)]
fn after_open(dirfd: c_int, path: *const c_char, flags: c_int, r: c_int) -> c_int {
    if r < 0 && errno() == libc::EFAULT {
        return r;
    }
    let mut buf = [0u8; path::MAX];
    let Some(p) = path_bytes(path, &mut buf) else {
        return r;
    };
    // The cheap test first: an absolute path outside /proc/sys*, or a
    // relative one not ending in one of the names.
    if !(p.starts_with(b"/proc/sys") || (p.first() != Some(&b'/') && path::may_be_relative(p))) {
        return r;
    }
    emulated(dirfd, p, flags, r)
}

#[cold]
fn emulated(dirfd: c_int, p: &[u8], flags: c_int, r: c_int) -> c_int {
    let res = std::panic::catch_unwind(|| {
        let t = procfs::target(dirfd, p)?;
        procfs::open(t, flags)
    });
    match res {
        Ok(Some(x)) => {
            if r >= 0 {
                crate::kfile::close(r);
            }
            ret(x)
        }
        _ => r,
    }
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
    let r = call_open(&next::OPEN, path, flags, mode);
    after_open(libc::AT_FDCWD, path, flags, r)
}

/// `int open64(const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn open64(path: *const c_char, flags: c_int, mode: u32) -> c_int {
    let r = call_open(&next::OPEN64, path, flags, mode);
    after_open(libc::AT_FDCWD, path, flags, r)
}

/// `int __open_2(const char *path, int flags)` (`_FORTIFY_SOURCE`).
#[unsafe(no_mangle)]
pub extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    let r = call_open(&next::OPEN_2, path, flags, 0);
    after_open(libc::AT_FDCWD, path, flags, r)
}

/// `int __open64_2(const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    let r = call_open(&next::OPEN64_2, path, flags, 0);
    after_open(libc::AT_FDCWD, path, flags, r)
}

/// `int openat(int dirfd, const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    let r = call_openat(&next::OPENAT, dirfd, path, flags, mode);
    after_open(dirfd, path, flags, r)
}

/// `int openat64(int dirfd, const char *path, int flags, ...)`.
#[unsafe(no_mangle)]
pub extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: u32) -> c_int {
    let r = call_openat(&next::OPENAT64, dirfd, path, flags, mode);
    after_open(dirfd, path, flags, r)
}

/// `int __openat_2(int dirfd, const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let r = call_openat(&next::OPENAT_2, dirfd, path, flags, 0);
    after_open(dirfd, path, flags, r)
}

/// `int __openat64_2(int dirfd, const char *path, int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let r = call_openat(&next::OPENAT64_2, dirfd, path, flags, 0);
    after_open(dirfd, path, flags, r)
}

/// The `syscall()` forms of SYS_open, SYS_openat and SYS_openat2, after
/// the next `syscall` returned `r` (the C convention: -1 and errno).
pub(super) fn syscall_after(n: c_long, a: c_long, b: c_long, c: c_long, r: c_long) -> c_long {
    let (dirfd, path, flags) = match n {
        libc::SYS_open => (libc::AT_FDCWD, a, b as c_int),
        libc::SYS_openat => (a as c_int, b, c as c_int),
        _ => {
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let mut how = [0u8; 8];
            if crate::user::read(c as usize, &mut how).is_err() {
                return r;
            }
            (a as c_int, b, u64::from_ne_bytes(how) as c_int)
        }
    };
    if r > c_int::MAX as c_long {
        return r;
    }
    c_long::from(after_open(dirfd, path as *const c_char, flags, r as c_int))
}

/// `ssize_t write(int fd, const void *buf, size_t n)`: a descriptor open
/// for writing on a sysctl has the text applied first (`procfs`).
#[unsafe(no_mangle)]
pub extern "C" fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    if procfs::track::any() {
        let r = std::panic::catch_unwind(|| procfs::before_write(fd, buf as usize, n, None));
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

/// `ssize_t pwrite(int fd, const void *buf, size_t n, off_t at)` (and
/// `pwrite64`): as `write`, at offset `at`.
fn pwrite_with(next: &Next, fd: c_int, buf: *const c_void, n: usize, at: i64) -> isize {
    if procfs::track::any() {
        let r = std::panic::catch_unwind(|| procfs::before_write(fd, buf as usize, n, Some(at)));
        if let Ok(Err(e)) = r {
            next::set_errno(e);
            return -1;
        }
    }
    match next.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_int, *const c_void, usize, i64) -> isize;
            // SAFETY: pwrite's prototype (off_t is 64 bits here).
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's arguments, passed on.
            unsafe { f(fd, buf, n, at) }
        }
        // SAFETY: as above, to the system call.
        None => unsafe {
            next::__wrap_syscall(
                libc::SYS_pwrite64,
                fd as c_long,
                buf as c_long,
                n as c_long,
                at as c_long,
                0,
                0,
            ) as isize
        },
    }
}

/// `ssize_t pwrite(int fd, const void *buf, size_t n, off_t at)`.
#[unsafe(no_mangle)]
pub extern "C" fn pwrite(fd: c_int, buf: *const c_void, n: usize, at: i64) -> isize {
    pwrite_with(&next::PWRITE, fd, buf, n, at)
}

/// `ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t at)`.
#[unsafe(no_mangle)]
pub extern "C" fn pwrite64(fd: c_int, buf: *const c_void, n: usize, at: i64) -> isize {
    pwrite_with(&next::PWRITE64, fd, buf, n, at)
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

/// Before a call closes `fd` (close, or dup2/dup3 replacing it): text
/// written on an emulated sysctl that our `write` did not see is applied
/// (`procfs::closing`).
fn before_close(fd: c_int) {
    if procfs::track::any() && procfs::track::get(fd).is_some() {
        let _ = std::panic::catch_unwind(|| procfs::closing(fd));
    }
}

/// `int close(int fd)`.
#[unsafe(no_mangle)]
pub extern "C" fn close(fd: c_int) -> c_int {
    before_close(fd);
    let r = match next::CLOSE.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_int) -> c_int;
            // SAFETY: close's prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's argument, passed on.
            unsafe { f(fd) }
        }
        // SAFETY: as above, to the system call.
        None => unsafe {
            next::__wrap_syscall(libc::SYS_close, fd as c_long, 0, 0, 0, 0, 0) as c_int
        },
    };
    if procfs::track::any() {
        procfs::track::forget(fd);
    }
    r
}

/// `int dup2(int old, int new)`.
#[unsafe(no_mangle)]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        before_close(new);
    }
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
    if old != new {
        before_close(new);
    }
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
