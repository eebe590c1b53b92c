//! The file calls interposed for `/proc` (`procfs/`): the open family,
//! `fopen`, and `write` with the descriptor-duplicating calls (so that a
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
//! prototype the C library gives it. The `fopencookie` callbacks get the
//! cookie this file boxed (freed once, by the close callback) and stdio's
//! own buffer with its true length.
#![allow(unsafe_code)]

use crate::next::{self, Next};
use crate::procfs::{self, path, path::Target};
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
fn path_bytes(path: *const c_char, buf: &mut [u8; path::MAX]) -> Option<&[u8]> {
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
fn errno() -> c_int {
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

/// An emulated `fopen` of `p` with mode `m`, or `None` if `p` is not one.
fn fopen_ours(p: &[u8], m: &[u8]) -> Option<*mut libc::FILE> {
    let t = procfs::target(libc::AT_FDCWD, p)?;
    let Some(flags) = mode_flags(m) else {
        next::set_errno(libc::EINVAL);
        return Some(core::ptr::null_mut());
    };
    let mut mz = [0u8; 17];
    mz[..m.len()].copy_from_slice(m);
    let m = mz;
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

/// After the next `fopen` returned `f`: `f`, or, for an emulated file,
/// ours (the kernel's stream closed).
fn after_fopen(path: *const c_char, mode: *const c_char, f: *mut libc::FILE) -> *mut libc::FILE {
    if f.is_null() && errno() == libc::EFAULT {
        return f;
    }
    let mut buf = [0u8; path::MAX];
    let Some(p) = path_bytes(path, &mut buf) else {
        return f;
    };
    if !(p.starts_with(b"/proc/sys") || (p.first() != Some(&b'/') && path::may_be_relative(p))) {
        return f;
    }
    let mut mbuf = [0u8; path::MAX];
    let Some(m) = path_bytes(mode, &mut mbuf) else {
        return f;
    };
    if m.len() > 16 {
        return f;
    }
    match std::panic::catch_unwind(|| fopen_ours(p, m)) {
        Ok(Some(ours)) => {
            if !f.is_null() {
                let e = errno();
                // SAFETY: the stream the next fopen just returned, ours to
                // close (nothing was written to it).
                unsafe { libc::fclose(f) };
                next::set_errno(e);
            }
            ours
        }
        _ => f,
    }
}

/// `FILE *fopen(const char *path, const char *mode)`.
#[unsafe(no_mangle)]
pub extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    after_fopen(path, mode, call_fopen(&next::FOPEN, path, mode))
}

/// `FILE *fopen64(const char *path, const char *mode)`.
#[unsafe(no_mangle)]
pub extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    after_fopen(path, mode, call_fopen(&next::FOPEN64, path, mode))
}
