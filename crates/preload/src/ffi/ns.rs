//! `unshare` and the `syscall` forms of unshare, clone and clone3 with
//! CLONE_NEWIPC (`unshare.rs`): the flag is taken off, the rest goes to
//! the kernel (not called at all when nothing is left), and on success
//! the caller (unshare) or the child (clone) is switched to a fresh
//! private namespace. For `unshare` the namespace and its guardian are
//! made first, before the kernel sees the other flags (a guardian made
//! after `CLONE_NEWPID` would be the new pid namespace's init), and given
//! up if the kernel refuses them: its errno is returned, nothing of ours
//! changed. A clone with CLONE_NEWIPC that shares memory
//! (CLONE_VM) or names a new stack is refused with EINVAL: the child
//! would have to run our code on a stack it does not own, and with shared
//! memory it could not have a namespace of its own.
//!
//! # Safety
//! As `ffi/mod.rs`: `unshare` interposes the C library's on purpose. The
//! clone forms call the next `syscall` with the program's arguments (one
//! flag cleared; clone3's structure copied into a buffer of ours with its
//! true size), only fork-like (no new stack, no shared memory), so the
//! child returns through the same frames in its own copy of the memory.
#![allow(unsafe_code)]

use crate::next;
use core::ffi::{c_int, c_long};

const NEWIPC: c_long = libc::CLONE_NEWIPC as c_long;

/// The C convention for our own part's result.
fn ours(r: Result<(), i32>) -> c_long {
    match r {
        Ok(()) => 0,
        Err(e) => {
            next::set_errno(e);
            -1
        }
    }
}

fn switch(in_child: bool) -> Result<(), i32> {
    std::panic::catch_unwind(|| crate::unshare::new_namespace(in_child))
        .unwrap_or(Err(libc::ENOMEM))
}

/// `int unshare(int flags)`.
#[unsafe(no_mangle)]
pub extern "C" fn unshare(flags: c_int) -> c_int {
    use crate::unshare::{abandon, commit, prepare};
    use std::panic::{AssertUnwindSafe, catch_unwind};
    if flags & libc::CLONE_NEWIPC == 0 {
        return call_unshare(flags);
    }
    let rest = flags & !libc::CLONE_NEWIPC;
    let fresh = match catch_unwind(prepare).unwrap_or(Err(libc::ENOMEM)) {
        Ok(f) => f,
        Err(e) => return ours(Err(e)) as c_int,
    };
    if rest != 0 {
        let r = call_unshare(rest);
        if r != 0 {
            // The kernel's refusal stands, as if we had not been there.
            let e = next::errno();
            let _ = catch_unwind(AssertUnwindSafe(|| abandon(fresh)));
            next::set_errno(e);
            return r;
        }
    }
    ours(catch_unwind(AssertUnwindSafe(|| commit(fresh, false))).unwrap_or(Err(libc::ENOMEM)))
        as c_int
}

fn call_unshare(flags: c_int) -> c_int {
    match next::UNSHARE.get() {
        Some(f) => {
            type F = unsafe extern "C" fn(c_int) -> c_int;
            // SAFETY: unshare's prototype.
            let f: F = unsafe { core::mem::transmute::<usize, F>(f) };
            // SAFETY: an integer argument.
            unsafe { f(flags) }
        }
        // SAFETY: an integer argument.
        None => unsafe {
            next::__wrap_syscall(libc::SYS_unshare, flags as c_long, 0, 0, 0, 0, 0) as c_int
        },
    }
}

/// `syscall(SYS_unshare / SYS_clone / SYS_clone3, ...)` with CLONE_NEWIPC:
/// `Some` result; `None` when the flag is not there (passed on as is).
pub(super) fn syscall_ns(n: c_long, a: [c_long; 6]) -> Option<c_long> {
    match n {
        libc::SYS_unshare if a[0] & NEWIPC != 0 => Some(unshare(a[0] as c_int) as c_long),
        libc::SYS_clone if a[0] & NEWIPC != 0 => {
            // x86-64: clone(flags, stack, parent_tid, child_tid, tls).
            if a[0] & libc::CLONE_VM as c_long != 0 || a[1] != 0 {
                next::set_errno(libc::EINVAL);
                return Some(-1);
            }
            let mut b = a;
            b[0] &= !NEWIPC;
            // SAFETY: the program's fork-like clone, one flag cleared.
            let r = unsafe { next::call_syscall(n, b) };
            Some(if r == 0 { ours(switch(true)) } else { r })
        }
        libc::SYS_clone3 => {
            // struct clone_args: flags @0, stack @40, stack_size @48.
            let size = a[1] as usize;
            if !(64..=4096).contains(&size) {
                return None;
            }
            let mut args = vec![0u8; size];
            crate::user::read(a[0] as usize, &mut args).ok()?;
            let flags = u64::from_ne_bytes(args[..8].try_into().ok()?);
            if flags & NEWIPC as u64 == 0 {
                return None;
            }
            let stack = u64::from_ne_bytes(args[40..48].try_into().ok()?);
            if flags & libc::CLONE_VM as u64 != 0 || stack != 0 {
                next::set_errno(libc::EINVAL);
                return Some(-1);
            }
            args[..8].copy_from_slice(&(flags & !(NEWIPC as u64)).to_ne_bytes());
            let mut b = a;
            b[0] = args.as_ptr() as c_long;
            // SAFETY: the program's fork-like clone3 with our copy of its
            // arguments (the size it gave), one flag cleared.
            let r = unsafe { next::call_syscall(n, b) };
            Some(if r == 0 { ours(switch(true)) } else { r })
        }
        _ => None,
    }
}
