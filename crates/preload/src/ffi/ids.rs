//! The credential calls: each passed to its next definition (glibc's, or
//! another preloaded library's), then, when it succeeded, the cached
//! credentials are read again at the next IPC call (`cred.rs`). errno is
//! the next definition's, untouched.
//!
//! # Safety
//! As `ffi/mod.rs`: the exported names interpose the C library's on
//! purpose (`no_mangle`); the arguments are passed on unchanged, pointers
//! (setgroups' list, capset's header and data) never dereferenced here.
#![allow(unsafe_code)]

use crate::{cred, next};
use core::ffi::{c_int, c_long, c_void};

/// The system calls after which the cached credentials are read again.
/// (A raw `syscall(SYS_setuid, ...)` changes the calling thread only,
/// unlike glibc's `setuid`; ipcns keeps one set of credentials per
/// process, the thread group leader's as /proc/self/status shows them.)
pub(super) fn changes_creds(n: c_long) -> bool {
    matches!(
        n,
        libc::SYS_setuid
            | libc::SYS_setgid
            | libc::SYS_setreuid
            | libc::SYS_setregid
            | libc::SYS_setresuid
            | libc::SYS_setresgid
            | libc::SYS_setgroups
            | libc::SYS_setfsuid
            | libc::SYS_setfsgid
            | libc::SYS_capset
    )
}

/// A credential call's result, passed through; on success the cached
/// credentials are dropped (errno is not touched).
fn after(r: c_int) -> c_int {
    if r == 0 {
        cred::changed();
    }
    r
}

/// `int setuid(uid_t uid)`: glibc's (which, in a multithreaded process,
/// changes every thread before returning), then the credentials re-read.
#[unsafe(no_mangle)]
pub extern "C" fn setuid(uid: u32) -> c_int {
    after(next::call_ids(
        &next::SETUID,
        &[uid],
        (libc::SYS_setuid, [uid as c_long, 0, 0]),
    ))
}

/// `int seteuid(uid_t euid)`.
#[unsafe(no_mangle)]
pub extern "C" fn seteuid(euid: u32) -> c_int {
    after(next::call_ids(
        &next::SETEUID,
        &[euid],
        (libc::SYS_setresuid, [-1, euid as c_long, -1]),
    ))
}

/// `int setreuid(uid_t ruid, uid_t euid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setreuid(ruid: u32, euid: u32) -> c_int {
    after(next::call_ids(
        &next::SETREUID,
        &[ruid, euid],
        (libc::SYS_setreuid, [ruid as c_long, euid as c_long, 0]),
    ))
}

/// `int setresuid(uid_t ruid, uid_t euid, uid_t suid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setresuid(ruid: u32, euid: u32, suid: u32) -> c_int {
    after(next::call_ids(
        &next::SETRESUID,
        &[ruid, euid, suid],
        (
            libc::SYS_setresuid,
            [ruid as c_long, euid as c_long, suid as c_long],
        ),
    ))
}

/// `int setgid(gid_t gid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setgid(gid: u32) -> c_int {
    after(next::call_ids(
        &next::SETGID,
        &[gid],
        (libc::SYS_setgid, [gid as c_long, 0, 0]),
    ))
}

/// `int setegid(gid_t egid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setegid(egid: u32) -> c_int {
    after(next::call_ids(
        &next::SETEGID,
        &[egid],
        (libc::SYS_setresgid, [-1, egid as c_long, -1]),
    ))
}

/// `int setregid(gid_t rgid, gid_t egid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setregid(rgid: u32, egid: u32) -> c_int {
    after(next::call_ids(
        &next::SETREGID,
        &[rgid, egid],
        (libc::SYS_setregid, [rgid as c_long, egid as c_long, 0]),
    ))
}

/// `int setresgid(gid_t rgid, gid_t egid, gid_t sgid)`.
#[unsafe(no_mangle)]
pub extern "C" fn setresgid(rgid: u32, egid: u32, sgid: u32) -> c_int {
    after(next::call_ids(
        &next::SETRESGID,
        &[rgid, egid, sgid],
        (
            libc::SYS_setresgid,
            [rgid as c_long, egid as c_long, sgid as c_long],
        ),
    ))
}

/// `int setgroups(size_t size, const gid_t *list)`.
#[unsafe(no_mangle)]
pub extern "C" fn setgroups(size: usize, list: *const u32) -> c_int {
    // SAFETY: the program's arguments, forwarded unchanged.
    after(unsafe {
        next::call_word_ptr(&next::SETGROUPS, libc::SYS_setgroups, size, list as usize)
    })
}

/// `int setfsuid(uid_t fsuid)`: returns the previous fsuid (no error
/// indication), so the credentials are re-read whatever it did.
#[unsafe(no_mangle)]
pub extern "C" fn setfsuid(fsuid: u32) -> c_int {
    let r = next::call_ids(
        &next::SETFSUID,
        &[fsuid],
        (libc::SYS_setfsuid, [fsuid as c_long, 0, 0]),
    );
    cred::changed();
    r
}

/// `int setfsgid(gid_t fsgid)`: as setfsuid.
#[unsafe(no_mangle)]
pub extern "C" fn setfsgid(fsgid: u32) -> c_int {
    let r = next::call_ids(
        &next::SETFSGID,
        &[fsgid],
        (libc::SYS_setfsgid, [fsgid as c_long, 0, 0]),
    );
    cred::changed();
    r
}

/// `int capset(cap_user_header_t hdrp, const cap_user_data_t datap)`.
#[unsafe(no_mangle)]
pub extern "C" fn capset(hdrp: *mut c_void, datap: *const c_void) -> c_int {
    // SAFETY: the program's arguments, forwarded unchanged.
    after(unsafe {
        next::call_word_ptr(
            &next::CAPSET,
            libc::SYS_capset,
            hdrp as usize,
            datap as usize,
        )
    })
}
