//! The process calls `ipcns run` makes: becoming a child subreaper,
//! blocking and awaiting signals, reaping children, sending signals, and
//! preparing the program between fork and exec.
//!
//! The system calls are the system-call layer's (`ipcns_sys`), with its
//! errno numbers turned into `io::Error`s; signal sets are the kernel's
//! (64 bits, signal N as bit N - 1).
//!
//! # Safety
//! `siginfo_t` is zeroed before the kernel fills it. The `pre_exec` hook
//! runs in the forked child before exec and makes only async-signal-safe
//! system calls (`rt_sigprocmask`, `fcntl`, `prctl`) on values built
//! before the fork; it allocates nothing and takes no lock.
#![allow(unsafe_code)]

use super::seccomp::{self, Filter};
use ipcns_sys::{Errno, Fd, process, signal};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are
/// reparented to this process instead of init (prctl(2)), so that it
/// learns of their death and can clean up after them.
pub fn become_subreaper() -> io::Result<()> {
    Ok(process::set_child_subreaper(true)?)
}

/// A set of signals.
pub struct SigSet(u64);

impl SigSet {
    /// EINVAL for a number that is no signal, or one of the C library's
    /// two internal ones (32, 33), as glibc's `sigaddset` refuses them.
    pub fn of(signals: &[i32]) -> io::Result<SigSet> {
        let mut set = 0;
        for &s in signals {
            if signal::bit(s) == 0 || s == 32 || s == 33 {
                return Err(Errno::EINVAL.into());
            }
            set |= signal::bit(s);
        }
        Ok(SigSet(set))
    }

    /// `rt_sigprocmask(SIG_BLOCK, self)` (what `pthread_sigmask` makes):
    /// the signals stay pending until [`SigSet::wait`] takes them. Threads
    /// started afterwards inherit the mask, so none of them takes these
    /// signals either.
    pub fn block(&self) -> io::Result<()> {
        Ok(signal::sigprocmask(libc::SIG_BLOCK, Some(&self.0), None)?)
    }

    /// `sigwaitinfo(self)` (`rt_sigtimedwait` without a timeout): the next
    /// pending signal of the set, with how it was sent (`si_code`, SI_TKILL
    /// folded into SI_USER as the C library's does). `Ok(None)` on EINTR
    /// (a stop and continue, a signal outside the set).
    pub fn wait(&self) -> io::Result<Option<Arrived>> {
        // SAFETY: siginfo_t is plain data: all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
        match signal::sigtimedwait(&self.0, &mut info, None) {
            Ok(sig) => Ok(Some(Arrived {
                signal: sig,
                // glibc's sigtimedwait: "The kernel generates a SI_TKILL
                // code in si_code in case tkill is used ... we fold the
                // results here."
                code: match info.si_code {
                    libc::SI_TKILL => libc::SI_USER,
                    c => c,
                },
            })),
            // sigwaitinfo(2): "EINTR: The wait was interrupted by a signal
            // handler" or, on Linux, by a stop and continue.
            Err(Errno::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
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
        return match process::wait4(-1, libc::WNOHANG) {
            Ok((0, _)) => Ok(Reaped::Running),
            Ok((p, status)) => Ok(Reaped::Child(p, status)),
            // waitpid(2): "EINTR: WNOHANG was not set and an unblocked
            // signal or a SIGCHLD was caught" (never here, but harmless
            // to retry).
            Err(Errno::EINTR) => continue,
            // waitpid(2): "ECHILD: ... does not have any unwaited-for
            // children".
            Err(e) if e.raw() == libc::ECHILD => Ok(Reaped::None),
            Err(e) => Err(e.into()),
        };
    }
}

/// Waits up to `limit` for child `pid` to end, and reaps it; whether it
/// ended (or was reaped already).
pub fn wait_for(pid: i32, limit: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        match process::wait4(pid, libc::WNOHANG) {
            Ok((0, _)) => {}
            Ok(_) => return true,
            Err(Errno::EINTR) => continue,
            Err(_) => return true,
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The name `libipcns.so` gives the guardian of a namespace a program
/// unshared (`crates/preload/src/guardian`).
const GUARDIAN: &str = "ipcns-guardian";

/// This process's children that still run (zombies aside), from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Children {
    /// Positively guardians of unshared namespaces: named
    /// `ipcns-guardian`, holding no descriptor but pipes (one at most,
    /// its read end) and pidfds (those it waits on).
    pub guardians: usize,
    /// Named so, but holding other descriptors now (a guardian in the
    /// middle of a scan, or not a guardian): looked at again.
    pub unsure: usize,
    /// Anything else.
    pub others: usize,
}

/// The running children of this process (see [`Children`]); `None` when
/// `/proc` cannot tell: it cannot be listed, is not this pid namespace's
/// (`/proc/self` is not this pid), or a process's `stat` cannot be read
/// for another reason than its end.
pub fn running_children() -> Option<Children> {
    let me = process::getpid();
    let own = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|l| l.to_str()?.parse::<i32>().ok());
    if own != Some(me) {
        return None;
    }
    // A /proc that does not list every process (hidepid=invisible or
    // ptraceable) may hide a survivor: cannot tell.
    let hides = std::fs::read_to_string("/proc/self/mountinfo").map_or(true, |m| {
        m.lines().any(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let dash = f.iter().position(|w| *w == "-");
            f.get(4) == Some(&"/proc")
                && dash.and_then(|d| f.get(d + 1)) == Some(&"proc")
                && dash.and_then(|d| f.get(d + 3)).is_some_and(|o| {
                    o.split(',').any(|o| {
                        matches!(
                            o,
                            "hidepid=2" | "hidepid=invisible" | "hidepid=4" | "hidepid=ptraceable"
                        )
                    })
                })
        })
    });
    if hides {
        return None;
    }
    let me = me.to_string();
    let mut c = Children::default();
    for p in std::fs::read_dir("/proc").ok()? {
        let p = p.ok()?;
        if !p
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit)
        {
            continue;
        }
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let stat = match std::fs::read_to_string(p.path().join("stat")) {
            Ok(s) => s,
            // It ended since the listing.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => continue,
            Err(_) => return None,
        };
        let (head, tail) = stat.rsplit_once(") ")?;
        let mut f = tail.split(' ');
        let (state, ppid) = (f.next()?, f.next()?);
        if ppid != me || state == "Z" || state == "X" {
            continue;
        }
        if head
            .split_once(" (")
            .is_none_or(|(_, comm)| comm != GUARDIAN)
        {
            c.others += 1;
        } else if guardian_fds(&p.path()) {
            c.guardians += 1;
        } else {
            c.unsure += 1;
        }
    }
    Some(c)
}

/// Whether the descriptors of process `dir` (`/proc/PID`) are a
/// guardian's: pipes (one at most) and pidfds, nothing else.
fn guardian_fds(dir: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
        return false;
    };
    let mut pipes = 0;
    for fd in fds {
        let Ok(target) = fd.and_then(|fd| std::fs::read_link(fd.path())) else {
            return false;
        };
        let t = target.as_os_str().as_encoded_bytes();
        if t.starts_with(b"pipe:[") {
            pipes += 1;
        } else if t != b"anon_inode:[pidfd]" {
            return false;
        }
    }
    pipes <= 1
}

/// `kill(pid, sig)`; a process already gone (ESRCH) is no error.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    match process::kill(pid, sig) {
        // kill(2): "ESRCH: The target process or process group does not
        // exist" (it ended; its SIGCHLD is on its way).
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether process `pid` is in the caller's process group (`getpgid`,
/// `getpgrp`, which is `getpgid(0)`); false if it is gone.
pub fn in_own_group(pid: i32) -> bool {
    matches!((process::getpgid(pid), process::getpgid(0)), (Ok(theirs), Ok(ours)) if theirs == ours)
}

/// Prepares `cmd`'s child, between fork and exec: its signal mask emptied
/// (it inherits ours, which blocks the forwarded signals; std resets
/// SIGPIPE's disposition but not the mask), the descriptors `fds` lose
/// `FD_CLOEXEC` (`fcntl(F_SETFD, 0)`) so that the program inherits it,
/// and `filter`, if any, is installed.
pub fn prepare(
    cmd: &mut Command,
    fds: Vec<RawFd>,
    filter: Option<Filter>,
    listener: Option<Listener>,
) -> io::Result<()> {
    let empty = SigSet::of(&[])?;
    let hook = move || {
        signal::sigprocmask(libc::SIG_SETMASK, Some(&empty.0), None)?;
        // The descriptors are the parent's (the child's copies are closed
        // by exec or kept by it, never here).
        for &fd in &fds {
            Fd::with_raw(fd, |f| f.set_cloexec(false))?;
        }
        if let Some(f) = &filter {
            seccomp::install(f)?;
        }
        if let Some(l) = &listener {
            // Killable waits once a call is received (Linux 5.19; see
            // `supervisor`), else without.
            let fd = match seccomp::install_listener(
                &l.filter,
                libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                l.no_new_privs,
            ) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    seccomp::install_listener(&l.filter, 0, l.no_new_privs)?
                }
                r => r?,
            };
            let sent = crate::run::supervisor::handoff::send(l.sock, fd);
            // SAFETY: our own new descriptor, closed once.
            unsafe { libc::close(fd) };
            sent?;
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

/// Whether `SECCOMP_RET_USER_NOTIF` is an action this kernel knows
/// (`seccomp(SECCOMP_GET_ACTION_AVAIL)`).
pub fn user_notif_available() -> bool {
    let action: u32 = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: the action is read from a local for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    r == 0
}

/// Whether this process has CAP_SYS_ADMIN in its effective set (bit 21
/// of `CapEff:` in /proc/self/status): a filter may then be installed
/// without no_new_privs.
pub fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// What the child needs to hand the supervisor its listener: the filter,
/// its end of the socket pair, and whether to set no_new_privs first.
pub struct Listener {
    pub filter: Filter,
    pub sock: RawFd,
    pub no_new_privs: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_child_is_no_guardian() {
        let mut k = Command::new("sleep").arg("5").spawn().unwrap();
        let c = running_children().expect("/proc is this pid namespace's");
        let _ = k.kill();
        let _ = k.wait();
        assert!(c.others >= 1 && c.guardians == 0, "{c:?}");
        // This process holds more than pipes and pidfds.
        assert!(!guardian_fds(std::path::Path::new("/proc/self")));
    }
}
