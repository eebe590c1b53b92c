//! The system calls of the guardian and of its start, raw (`ipcns_sys`),
//! none of them allocating: after the clone the guardian is a copy of a
//! process whose other threads may have held the C library's locks, so
//! it may only make system calls on memory it already has.
//!
//! # Safety
//! Every call passes numbers, NUL-terminated paths borrowed for the call,
//! or buffers of ours with their true lengths. `clone_quiet` is a fork
//! without a new stack: the child returns through the same frames in its
//! own copy of the memory (what `ffi/ns.rs` does for the program's clone).
#![allow(unsafe_code)]

use core::ffi::CStr;
use ipcns_sys::raw::{syscall0, syscall1, syscall2, syscall3, syscall4, syscall5};
use ipcns_sys::{Errno, Fd};

/// `pipe2(fds, O_CLOEXEC)`: pipe(2). (read end, write end).
pub fn pipe() -> Result<(Fd, Fd), Errno> {
    let mut fds = [0i32; 2];
    // SAFETY: the kernel writes two ints into `fds`, ours.
    unsafe {
        syscall2(
            libc::SYS_pipe2,
            fds.as_mut_ptr() as usize,
            libc::O_CLOEXEC as usize,
        )
    }?;
    // SAFETY: the kernel just made both descriptors for us alone.
    Ok(unsafe { (Fd::from_raw(fds[0]), Fd::from_raw(fds[1])) })
}

/// `fcntl(fd, F_DUPFD, min)`: a duplicate at the lowest free number from
/// `min`, inherited across exec (no FD_CLOEXEC). EINVAL when `min` is at
/// or past RLIMIT_NOFILE.
pub fn dup_from(fd: &Fd, min: i32) -> Result<Fd, Errno> {
    // SAFETY: integers only.
    let r = unsafe {
        syscall3(
            libc::SYS_fcntl,
            fd.raw() as usize,
            libc::F_DUPFD as usize,
            min as usize,
        )
    }?;
    // SAFETY: the kernel just made descriptor `r` for us alone.
    Ok(unsafe { Fd::from_raw(r as i32) })
}

/// `clone(0, NULL, NULL, NULL, 0)`: a copy of the calling process whose
/// exit signal is none. Linux reports such a child only to waits with
/// `__WCLONE` or `__WALL` (kernel/exit.c `eligible_child`), and sends its
/// parent no signal when it ends (`do_notify_parent` with signal 0), so
/// the program's `wait`, `waitpid(-1)` and SIGCHLD never see it. 0 in the
/// child, its pid in the parent.
pub fn clone_quiet() -> Result<i32, Errno> {
    // SAFETY: no new stack, no shared memory: a fork (see the module doc).
    unsafe { syscall5(libc::SYS_clone, 0, 0, 0, 0, 0) }.map(|p| p as i32)
}

/// `close_range(first, last, 0)` (Linux 5.9); without it, `close` of
/// each number up to the hard RLIMIT_NOFILE (a descriptor may have been
/// opened under a soft limit raised since, then lowered), at most 2^20.
pub fn close_range(first: u32, last: u32) {
    if first > last {
        return;
    }
    // SAFETY: integers only.
    if unsafe { syscall3(libc::SYS_close_range, first as usize, last as usize, 0) }.is_ok() {
        return;
    }
    let limit = hard_nofile().min(1 << 20) as u32;
    for fd in first..=last.min(limit.saturating_sub(1)) {
        close(fd as i32);
    }
}

/// The hard RLIMIT_NOFILE (`prlimit64(0, RLIMIT_NOFILE, NULL, &old)`:
/// `rlim_max`); 2^20 (the kernel's default `nr_open`) if unknown.
fn hard_nofile() -> u64 {
    // struct rlimit64 { rlim_cur, rlim_max }.
    let mut old = [0u64; 2];
    // SAFETY: no new limit; the old one into two u64 we own.
    let r = unsafe {
        syscall4(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_NOFILE as usize,
            0,
            old.as_mut_ptr() as usize,
        )
    };
    match r {
        Ok(_) => old[1],
        Err(_) => 1 << 20,
    }
}

/// `lseek(fd, 0, SEEK_SET)`: back to the start of a directory, for
/// `getdents64` to list it again (`Fd::seek` is for SEEK_DATA and
/// SEEK_HOLE only).
pub fn rewind(fd: &Fd) {
    // SAFETY: integers only.
    let _ = unsafe {
        syscall3(
            libc::SYS_lseek,
            fd.raw() as usize,
            0,
            libc::SEEK_SET as usize,
        )
    };
}

/// `close(fd)` of a number that is not an [`Fd`] of ours.
pub fn close(fd: i32) {
    // SAFETY: an integer only.
    let _ = unsafe { syscall1(libc::SYS_close, fd as usize) };
}

/// `setsid()`: a session and process group of its own, away from the
/// terminal's and the program's (a `kill(0, ...)` or a kill of the
/// program's process group does not reach it).
pub fn setsid() {
    // SAFETY: no argument.
    let _ = unsafe { syscall0(libc::SYS_setsid) };
}

/// `chdir(path)`.
pub fn chdir(path: &CStr) {
    // SAFETY: a NUL-terminated path.
    let _ = unsafe { syscall1(libc::SYS_chdir, path.as_ptr() as usize) };
}

/// `prctl(PR_SET_NAME, name)`: the name `ps` and /proc/PID/comm show
/// (15 bytes at most).
pub fn set_name(name: &CStr) {
    // SAFETY: a NUL-terminated string the kernel copies.
    let _ = unsafe {
        syscall2(
            libc::SYS_prctl,
            libc::PR_SET_NAME as usize,
            name.as_ptr() as usize,
        )
    };
}

/// `munmap(addr, len)` of a mapping the guardian never touches.
pub fn unmap(addr: usize, len: usize) {
    // SAFETY: the guardian calls it for shared mappings only (arenas,
    // segments, the program's shared files), which none of its code,
    // stack or data is in.
    let _ = unsafe { ipcns_sys::mem::munmap(addr, len) };
}

/// `getdents64(dir, buf)`: bytes of records written, 0 at the end;
/// EINTR retried.
pub fn getdents(dir: &Fd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: the kernel writes at most buf.len() bytes into our buffer.
        let r = unsafe {
            syscall3(
                libc::SYS_getdents64,
                dir.raw() as usize,
                buf.as_mut_ptr() as usize,
                buf.len(),
            )
        };
        if r != Err(Errno::EINTR) {
            return r;
        }
    }
}

/// `unlinkat(dir, name, flags)`; `dir` None is the working directory
/// (the name is then an absolute path: the guardian works from `/`).
pub fn unlinkat(dir: Option<&Fd>, name: &CStr, flags: i32) -> Result<(), Errno> {
    let d = dir.map_or(libc::AT_FDCWD, Fd::raw);
    // SAFETY: a NUL-terminated name.
    unsafe {
        syscall3(
            libc::SYS_unlinkat,
            d as usize,
            name.as_ptr() as usize,
            flags as usize,
        )
    }
    .map(drop)
}

/// `ppoll(fds, n, timeout, NULL)`: waits until one of `fds` is readable
/// or `timeout_ns` passed; whether one is (EINTR and errors count as a
/// timeout).
pub fn ppoll(fds: &mut [libc::pollfd], timeout_ns: u64) -> bool {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds` is ours, the kernel writes their `revents`; it reads
    // one timespec of ours; no signal mask.
    let r = unsafe {
        syscall5(
            libc::SYS_ppoll,
            fds.as_mut_ptr() as usize,
            fds.len(),
            &raw const ts as usize,
            0,
            0,
        )
    };
    r.is_ok_and(|n| n > 0)
}

/// `wait4(pid, NULL, WNOHANG | __WALL, NULL)`: reaps child `pid` if it
/// has ended (a guardian that ended before the process did stays a
/// zombie until then, or until this). The caller makes sure `pid` is a
/// guardian this very process started (a fork child inherits the
/// number, not the child).
pub fn reap(pid: i32) -> bool {
    // SAFETY: no status, no rusage.
    unsafe {
        syscall4(
            libc::SYS_wait4,
            pid as usize,
            0,
            (libc::WNOHANG | libc::__WALL) as usize,
            0,
        )
    }
    .is_ok_and(|r| r as i32 == pid)
}

/// `exit_group(code)`: the guardian's end, raw: no `atexit` handler, no
/// destructor, no stdio flush of the program's runs in it.
pub fn exit(code: i32) -> ! {
    loop {
        // SAFETY: an integer only; does not return.
        let _ = unsafe { syscall1(libc::SYS_exit_group, code as usize) };
    }
}

/// One page of the file `fd` is open on, mapped `PROT_NONE` and shared, for
/// good (never unmapped: the process's maps then name the file as long as
/// this image lives). Whether it was mapped.
pub fn hold_page(fd: &Fd) -> bool {
    // SAFETY: no MAP_FIXED: the kernel picks a free range; nothing refers
    // to the page, which no access may touch (PROT_NONE).
    unsafe { ipcns_sys::mem::mmap(0, 4096, libc::PROT_NONE, libc::MAP_SHARED, fd) }.is_ok()
}
