//! `fopen` and `fopen64` on the emulated /proc files (`procfs/`): for
//! reading, a stream over our descriptor (`fdopen`); for writing a
//! sysctl, an `fopencookie` stream whose writes apply the text as
//! `write(2)` does (stdio's own writes do not pass through `write`). As in
//! `open.rs`, the next `fopen` is called first and the path compared only
//! after it returned without EFAULT.
//!
//! # Safety
//! As `open.rs`: the exported names interpose the C library's on purpose;
//! the path and mode are read in place only after the next `fopen` read
//! them. The `fopencookie` callbacks get the cookie this file boxed (freed
//! once, by the close callback) and stdio's own buffer with its true
//! length.
#![allow(unsafe_code)]

use super::open::{errno, path_bytes};
use crate::next::{self, Next};
use crate::procfs::{self, path, path::Target};
use core::ffi::{c_char, c_int, c_void};

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
