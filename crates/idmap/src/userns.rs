//! Starting a program in a new user namespace whose maps the caller then
//! writes: the setup every container tool and the differential tests need.
//!
//! # Safety
//! The only unsafe code registers a `pre_exec` hook, which runs in the
//! forked child before `execve`. It calls `unshare(2)` alone: one system
//! call, async-signal-safe, touching no memory of the parent's and taking no
//! lock, so it is sound even when the parent has other threads.
#![allow(unsafe_code)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Spawns `cmd` in a new user namespace (`unshare(CLONE_NEWUSER)` in the
/// child before `execve`). When this returns, the child runs the program in
/// its namespace, with no map written yet: write them with
/// [`crate::proc::write_map`].
pub fn spawn_in_new_userns(cmd: &mut Command) -> io::Result<Child> {
    // SAFETY: the hook only calls unshare(2), which is async-signal-safe and
    // needs no allocation (see the module's Safety section).
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    cmd.spawn()
}
