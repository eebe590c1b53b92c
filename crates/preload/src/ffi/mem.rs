//! The memory calls that change what an attachment maps, as Linux's
//! SysV mappings see them: `munmap` of a whole attachment detaches it
//! (`shm_close`: shm_nattch, dtime, lpid; the destruction of a removed
//! segment's last attachment), and so does `mmap` with MAP_FIXED over
//! it; `mremap` of a whole attachment moves it (shmdt finds it at its new
//! address); a call on part of one marks it, so that shmdt unmaps only the
//! pieces still mapping the segment (`ipcns_core`'s `shm/attach.rs`,
//! `unmapped`, `mremapped`).
//!
//! Each call goes to its next definition first (the C library's, or a
//! tool's such as a sanitizer), unchanged; the bookkeeping follows its
//! success and only in a process image that has attachments (one look at
//! the table's bitmap: nothing else on the way of a program's other
//! mappings). `errno` is kept as the call left it.
//!
//! `mremap` is variadic in C (the new address only with MREMAP_FIXED):
//! it is taken as a fifth word, where x86-64 and aarch64 Linux pass it
//! (as `syscall`'s, module doc of `ffi/mod.rs`).

use crate::next::{self, Next};
use crate::{cred, state};
use core::ffi::{c_int, c_long, c_void};

static MUNMAP: Next = Next::new(c"munmap");
static MMAP: Next = Next::new(c"mmap");
static MMAP64: Next = Next::new(c"mmap64");
static MREMAP: Next = Next::new(c"mremap");

const MAP_FAILED: usize = usize::MAX;

/// Looks the next definitions up (at load, as `next::resolve_all`).
pub fn resolve() {
    for n in [&MUNMAP, &MMAP, &MMAP64, &MREMAP] {
        n.get();
    }
}

/// `syscall(SYS_munmap / SYS_mmap / SYS_mremap, ...)`: the system call,
/// then the same bookkeeping as the functions'.
///
/// # Safety
/// As the program's own call: the arguments are valid for system call `n`.
pub unsafe fn syscall_mem(n: c_long, a: [c_long; 6]) -> c_long {
    let ns = attached();
    let whole = match (n, ns) {
        (libc::SYS_mremap, Some(ns)) if a[3] as c_int & libc::MREMAP_DONTUNMAP == 0 => {
            ns.to_mremap(a[0] as usize, page_end(0, a[1] as usize))
        }
        _ => None,
    };
    // SAFETY: the caller's contract.
    let r = unsafe { next::call_syscall(n, a) };
    if r == -1 {
        return r;
    }
    match n {
        libc::SYS_munmap => unmapped(a[0] as usize, a[1] as usize),
        libc::SYS_mmap if a[3] as c_int & libc::MAP_FIXED != 0 => {
            unmapped(r as usize, a[1] as usize)
        }
        libc::SYS_mremap => moved(
            whole,
            (a[0] as usize, a[1] as usize),
            (r as usize, a[2] as usize),
        ),
        _ => {}
    }
    r
}

/// After a successful mremap.
fn moved(whole: Option<usize>, (old, old_len): (usize, usize), (new, new_len): (usize, usize)) {
    if let Some(ns) = attached() {
        keep(|| {
            let _ = cred::with_caller(ns, |c| {
                ns.mremapped(
                    c,
                    whole,
                    (old, page_end(0, old_len)),
                    (new, page_end(0, new_len)),
                )
            });
        });
    }
}

/// The namespace, if this image has attachments in it.
fn attached() -> Option<&'static ipcns_core::Namespace> {
    state::opened().filter(|ns| ns.has_attachments())
}

/// Runs the bookkeeping `f`, keeping errno and every panic inside.
fn keep(f: impl FnOnce()) {
    let e = next::errno();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    next::set_errno(e);
}

fn page_end(addr: usize, len: usize) -> usize {
    addr.saturating_add(len).saturating_add(4095) & !4095
}

/// After `[addr, addr + len)` was unmapped or replaced by the program.
fn unmapped(addr: usize, len: usize) {
    if let Some(ns) = attached() {
        keep(|| {
            let _ = cred::with_caller(ns, |c| ns.unmapped(c, addr, page_end(addr, len)));
        });
    }
}

/// `int munmap(void *addr, size_t len)`.
#[unsafe(no_mangle)]
pub extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    let r = match MUNMAP.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(*mut c_void, usize) -> c_int;
            // SAFETY: `munmap`'s prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's own call, forwarded unchanged.
            unsafe { f(addr, len) }
        }
        None => {
            // SAFETY: as above, as the system call.
            let r = unsafe {
                next::__wrap_syscall(libc::SYS_munmap, addr as c_long, len as c_long, 0, 0, 0, 0)
            };
            r as c_int
        }
    };
    if r == 0 {
        unmapped(addr as usize, len);
    }
    r
}

type MmapFn = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void;

fn call_mmap(
    next: &Next,
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    let p = match next.get().or_else(|| MMAP.get()) {
        Some(f) => {
            // SAFETY: `mmap`'s (and `mmap64`'s) prototype on 64-bit Linux.
            let f: MmapFn = unsafe { core::mem::transmute::<usize, MmapFn>(f) };
            // SAFETY: the program's own call, forwarded unchanged.
            unsafe { f(addr, len, prot, flags, fd, off) }
        }
        None => {
            // SAFETY: as above, as the system call.
            let r = unsafe {
                next::__wrap_syscall(
                    libc::SYS_mmap,
                    addr as c_long,
                    len as c_long,
                    c_long::from(prot),
                    c_long::from(flags),
                    c_long::from(fd),
                    off as c_long,
                )
            };
            r as usize as *mut c_void
        }
    };
    // MAP_FIXED replaced what was there (MAP_FIXED_NOREPLACE never does).
    if flags & libc::MAP_FIXED != 0 && p as usize != MAP_FAILED {
        unmapped(p as usize, len);
    }
    p
}

/// `void *mmap(void *addr, size_t len, int prot, int flags, int fd,
/// off_t off)`.
#[unsafe(no_mangle)]
pub extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    call_mmap(&MMAP, addr, len, prot, flags, fd, off)
}

/// `void *mmap64(...)`: `mmap` on 64-bit Linux.
#[unsafe(no_mangle)]
pub extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    call_mmap(&MMAP64, addr, len, prot, flags, fd, off)
}

/// `void *mremap(void *old, size_t old_len, size_t new_len, int flags,
/// ... /* void *new_addr */)`.
#[unsafe(no_mangle)]
pub extern "C" fn mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    // MREMAP_DONTUNMAP leaves the old mapping where it is.
    let whole = attached()
        .filter(|_| flags & libc::MREMAP_DONTUNMAP == 0)
        .and_then(|ns| ns.to_mremap(old as usize, page_end(0, old_len)));
    let p = match MREMAP.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(*mut c_void, usize, usize, c_int, ...) -> *mut c_void;
            // SAFETY: `mremap`'s prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: the program's own call, forwarded unchanged.
            unsafe { f(old, old_len, new_len, flags, new_addr) }
        }
        None => {
            // SAFETY: as above, as the system call.
            let r = unsafe {
                next::__wrap_syscall(
                    libc::SYS_mremap,
                    old as c_long,
                    old_len as c_long,
                    new_len as c_long,
                    c_long::from(flags),
                    new_addr as c_long,
                    0,
                )
            };
            r as usize as *mut c_void
        }
    };
    if p as usize != MAP_FAILED {
        moved(whole, (old as usize, old_len), (p as usize, new_len));
    }
    p
}
