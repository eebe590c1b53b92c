//! The process calls `ipcns run` makes: becoming a child subreaper,
//! blocking and awaiting signals, reaping children, sending signals, and
//! preparing the program between fork and exec.
//!
//! # Safety
//! Every call here takes integers, or pointers to locals of the type the
//! call expects (a `sigset_t` built with `sigemptyset`/`sigaddset`, a
//! `siginfo_t` the kernel fills, an `int` status), valid for the call. The
//! `pre_exec` hook runs in the forked child before exec and makes only
//! async-signal-safe system calls (`fcntl`, `prctl`) on values built
//! before the fork; it allocates nothing and takes no lock.
#![allow(unsafe_code)]

use super::seccomp::{self, Filter};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are
/// reparented to this process instead of init (prctl(2)), so that it
/// learns of their death and can clean up after them.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: integers only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A set of signals.
pub struct SigSet(libc::sigset_t);

impl SigSet {
    pub fn of(signals: &[i32]) -> io::Result<SigSet> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given.
        if unsafe { libc::sigemptyset(set.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: initialised by sigemptyset just above.
        let mut set = unsafe { set.assume_init() };
        for &s in signals {
            // SAFETY: `set` is an initialised sigset_t; a bad number is EINVAL.
            if unsafe { libc::sigaddset(&mut set, s) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SigSet(set))
    }

    /// `pthread_sigmask(SIG_BLOCK, self)`: the signals stay pending until
    /// [`SigSet::wait`] takes them. Threads started afterwards inherit the
    /// mask, so none of them takes these signals either.
    pub fn block(&self) -> io::Result<()> {
        // SAFETY: `self.0` is an initialised set; no old mask is asked for.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.0, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }

    /// `sigwaitinfo(self)`: the next pending signal of the set, with how it
    /// was sent (`si_code`). `Ok(None)` on EINTR (a stop and continue, a signal outside
    /// the set).
    pub fn wait(&self) -> io::Result<Option<Arrived>> {
        let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: `self.0` is initialised, `info` is writable siginfo_t.
        let sig = unsafe { libc::sigwaitinfo(&self.0, info.as_mut_ptr()) };
        if sig < 0 {
            let e = io::Error::last_os_error();
            // sigwaitinfo(2): "EINTR: The wait was interrupted by a signal
            // handler" or, on Linux, by a stop and continue.
            return match e.raw_os_error() {
                Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: sigwaitinfo succeeded, so it filled `info` (and it was
        // zeroed before in any case).
        let info = unsafe { info.assume_init() };
        Ok(Some(Arrived {
            signal: sig,
            code: info.si_code,
        }))
    }
}

/// A signal taken by [`SigSet::wait`].
#[derive(Debug, Clone, Copy)]
pub struct Arrived {
    pub signal: i32,
    /// `si_code`: `SI_USER` for kill(2), `SI_KERNEL` for the terminal's
    /// signals to its foreground process group, ...
    pub code: i32,
}

/// What [`reap`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    /// A child that ended: its pid and `wait` status.
    Child(i32, i32),
    /// Children remain, none has ended.
    Running,
    /// No child at all.
    None,
}

/// `waitpid(-1, &status, WNOHANG)`: one ended child, if any.
pub fn reap() -> io::Result<Reaped> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a local int the kernel writes.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        return match pid {
            0 => Ok(Reaped::Running),
            p if p > 0 => Ok(Reaped::Child(p, status)),
            _ => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // waitpid(2): "EINTR: WNOHANG was not set and an
                    // unblocked signal or a SIGCHLD was caught" (never
                    // here, but harmless to retry).
                    Some(libc::EINTR) => continue,
                    // waitpid(2): "ECHILD: ... does not have any unwaited-for
                    // children".
                    Some(libc::ECHILD) => Ok(Reaped::None),
                    _ => Err(e),
                }
            }
        };
    }
}

/// `kill(pid, sig)`; a process already gone (ESRCH) is no error.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: integers only.
    if unsafe { libc::kill(pid, sig) } != 0 {
        let e = io::Error::last_os_error();
        // kill(2): "ESRCH: The target process or process group does not
        // exist" (it ended; its SIGCHLD is on its way).
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}

/// Whether process `pid` is in the caller's process group (`getpgid`,
/// `getpgrp`); false if it is gone.
pub fn in_own_group(pid: i32) -> bool {
    // SAFETY: integers only; getpgrp cannot fail.
    let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
    theirs >= 0 && theirs == ours
}

/// Prepares `cmd`'s child, between fork and exec: its signal mask emptied
/// (it inherits ours, which blocks the forwarded signals; std resets
/// SIGPIPE's disposition but not the mask), the descriptor `fd` loses
/// `FD_CLOEXEC` (`fcntl(F_SETFD, 0)`) so that the program inherits it,
/// and `filter`, if any, is installed.
pub fn prepare(cmd: &mut Command, fd: RawFd, filter: Option<Filter>) -> io::Result<()> {
    let empty = SigSet::of(&[])?;
    let hook = move || {
        // SAFETY: `empty.0` is an initialised set; no old mask is asked for.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &empty.0, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        // SAFETY: fcntl on an integer descriptor, async-signal-safe.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(f) = &filter {
            seccomp::install(f)?;
        }
        Ok(())
    };
    // SAFETY: the hook makes only async-signal-safe system calls on values
    // moved into it before the fork (see the module's doc).
    unsafe {
        cmd.pre_exec(hook);
    }
    Ok(())
}
