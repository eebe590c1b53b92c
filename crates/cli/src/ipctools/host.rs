//! What the tools ask the C library, as util-linux does: user and group
//! names (`getpwuid(3)`, `getgrgid(3)`, so NSS and /etc/passwd answer alike),
//! local time (`localtime_r(3)`, honouring `TZ`), and `ctime(3)`'s text.
//!
//! # Safety
//! The `_r` calls write only into the structures and buffers passed here,
//! which live on this function's stack or in a `Vec` sized by the caller;
//! the returned name pointers point into that buffer and are read before it
//! goes away. No pointer outlives the call that produced it.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;

thread_local! {
    static USERS: RefCell<HashMap<u32, Option<Vec<u8>>>> = RefCell::new(HashMap::new());
    static GROUPS: RefCell<HashMap<u32, Option<Vec<u8>>>> = RefCell::new(HashMap::new());
}

/// Runs a `get*_r` call with a growing buffer until it stops asking for
/// more room (ERANGE), and returns the name it found.
fn lookup(call: impl Fn(&mut [libc::c_char]) -> (i32, *const libc::c_char)) -> Option<Vec<u8>> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        let (rc, name) = call(&mut buf);
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 || name.is_null() {
            return None;
        }
        // SAFETY: `name` points into `buf` (the pw_name / gr_name written
        // by the call), which is alive and NUL-terminated there.
        return Some(unsafe { CStr::from_ptr(name) }.to_bytes().to_vec());
    }
}

/// `getpwuid(uid)->pw_name`, or `None` when there is no such user.
pub fn user_name(uid: u32) -> Option<Vec<u8>> {
    USERS.with(|c| {
        c.borrow_mut()
            .entry(uid)
            .or_insert_with(|| {
                lookup(|buf| {
                    // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids).
                    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
                    let mut out: *mut libc::passwd = std::ptr::null_mut();
                    // SAFETY: `pw`, `buf` and `out` are valid for writes for
                    // the whole call; `buf.len()` is the buffer's size.
                    let rc = unsafe {
                        libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out)
                    };
                    (
                        rc,
                        if out.is_null() {
                            std::ptr::null()
                        } else {
                            pw.pw_name
                        },
                    )
                })
            })
            .clone()
    })
}

/// `getgrgid(gid)->gr_name`, or `None` when there is no such group.
pub fn group_name(gid: u32) -> Option<Vec<u8>> {
    GROUPS.with(|c| {
        c.borrow_mut()
            .entry(gid)
            .or_insert_with(|| {
                lookup(|buf| {
                    // SAFETY: all-zero is a valid `group` (null pointers, zero ids).
                    let mut gr: libc::group = unsafe { std::mem::zeroed() };
                    let mut out: *mut libc::group = std::ptr::null_mut();
                    // SAFETY: as in `user_name`.
                    let rc = unsafe {
                        libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out)
                    };
                    (
                        rc,
                        if out.is_null() {
                            std::ptr::null()
                        } else {
                            gr.gr_name
                        },
                    )
                })
            })
            .clone()
    })
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `ctime_r(&t, buf)`: `"Sat Nov 21 09:32:00 2026\n"` in local time
/// (asctime's `"%.3s %.3s%3d %.2d:%.2d:%.2d %d\n"`), or `None` where
/// `localtime_r` fails (a year beyond `int`).
pub fn ctime(t: i64) -> Option<String> {
    // SAFETY: all-zero is a valid `tm` (a null tm_zone is never read here).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let tt: libc::time_t = t;
    // SAFETY: both pointers are to live locals, valid for the call.
    let r = unsafe { libc::localtime_r(&tt, &mut tm) };
    if r.is_null() {
        return None;
    }
    let day = DAYS.get(tm.tm_wday as usize).copied().unwrap_or("???");
    let mon = MONTHS.get(tm.tm_mon as usize).copied().unwrap_or("???");
    Some(format!(
        "{day} {mon}{:3} {:02}:{:02}:{:02} {}\n",
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        i64::from(tm.tm_year) + 1900
    ))
}

/// `getpagesize()`.
pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant; no memory is passed.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}
