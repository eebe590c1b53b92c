//! A logical process other than the driver: it serves the calls the
//! driver sends it, one at a time, and answers each on its channel; it
//! forks, exits and re-executes itself when told to.
//!
//! Channels: one datagram socket pair per logical process, made by the
//! driver before anything forks, so every process holds the child end of
//! every channel and a fork child takes over the channel of the number the
//! driver gave it (a process killed mid-send leaves no half message).
//!
//! Exec: the server keeps its channels open across `execve` of the test
//! binary itself (`/proc/self/exe`) with [`EXEC_ENV`] naming its number,
//! its channels and its side; a constructor in `os` catches that image
//! before the test harness starts and serves on (so the undo list and the
//! namespace stay, the attachments go, as with any program that execs).

use super::op::Op;
use super::os;
use crate::support;
use ipcns::{Cred, Namespace};
use ipcns_oracle::sysv::{NsCaller, SysV};
use std::ffi::OsStr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

/// The variable that tells a new image of the test binary to serve.
pub const EXEC_ENV: &str = "IPCNS_PROCDIFF_SERVE";

/// Logical processes besides the driver (P1..P8), over a script's life.
pub const MAX_PROCS: usize = 8;

/// Control words of the wire (operations use 1..=13, see `Op::words`).
pub const FORK: i64 = 100;
pub const EXIT: i64 = 101;
pub const EXEC: i64 = 102;

/// The System V implementation a script runs on.
pub enum Ctx<'a> {
    /// The calling process's kernel IPC namespace.
    Kernel,
    /// An ipcns namespace attached by this process (or its parent, before
    /// a fork), and where its arena is, for a new image to attach again.
    Ipcns { ns: &'a Namespace, path: &'a Path },
}

impl Ctx<'_> {
    /// Runs `f` as the calling process (ipcns: its credentials now).
    pub fn with<R>(&self, f: impl FnOnce(&dyn SysV) -> R) -> R {
        match self {
            Ctx::Kernel => f(&ipcns_oracle::kernel::Host),
            Ctx::Ipcns { ns, .. } => {
                let cred = ns
                    .cred()
                    .map(|c| (*c).clone())
                    .unwrap_or_else(|_| Cred::root(std::process::id() as i32));
                f(&NsCaller { ns, cred })
            }
        }
    }
}

/// Notes itself, as a program's handler does (`ipcns::intr`): a sleeper
/// that also waits for its set's holders' deaths ends only then.
extern "C" fn on_usr1(_: libc::c_int) {
    ipcns::note_signal();
}

/// Serves as P`me` on `chans[me - 1]` until told to exit or killed.
pub fn serve(ctx: &Ctx<'_>, me: usize, chans: &[UnixDatagram]) -> ! {
    // A handler that restarts what can be restarted: System V calls still
    // end with EINTR (signal(7)).
    support::handle(libc::SIGUSR1, on_usr1, libc::SA_RESTART);
    ipcns::intr::handlers_note_signals();
    os::ignore_children();
    let Some(chan) = chans.get(me.wrapping_sub(1)) else {
        os::exit_now(2)
    };
    let _ = chan.set_read_timeout(None);
    let say = |text: &str| {
        let _ = chan.send(text.as_bytes());
    };
    say(&format!("ready {}", std::process::id()));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match chan.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => os::exit_now(3),
        };
        let words: Vec<i64> = String::from_utf8_lossy(&buf[..n])
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        match words.first().copied() {
            Some(FORK) => {
                let next = words.get(1).copied().unwrap_or(0) as usize;
                // The child reports on its own channel once it runs, that
                // is after the fork handlers (ipcns counts the child's
                // attachments in one).
                let pid = support::fork_child(|| serve(ctx, next, chans));
                say(&format!("forked {pid}"));
            }
            Some(EXIT) => {
                // exit(3) through ipcns (what dropping the namespace does);
                // the kernel's exit path needs nothing.
                if let Ctx::Ipcns { ns, .. } = ctx {
                    let _ = ns.exit_process();
                }
                os::exit_now(0);
            }
            Some(EXEC) => {
                let e = exec(ctx, me, chans);
                say(&format!("0 exec failed: {e}"));
            }
            _ => match Op::from_words(&words) {
                Some(op) => {
                    let out = ctx.with(|s| op.run(s));
                    say(&format!("{} {}", out.addr.unwrap_or(0), out.text));
                }
                None => say("0 unreadable request"),
            },
        }
    }
}

/// Re-executes the test binary as P`me`; returns only if that fails.
fn exec(ctx: &Ctx<'_>, me: usize, chans: &[UnixDatagram]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    for c in chans {
        if let Err(e) = os::keep_across_exec(c.as_raw_fd()) {
            return e;
        }
    }
    let fds: Vec<String> = chans.iter().map(|c| c.as_raw_fd().to_string()).collect();
    let side = match ctx {
        Ctx::Kernel => "kernel".to_string(),
        Ctx::Ipcns { path, .. } => path.display().to_string(),
    };
    std::process::Command::new("/proc/self/exe")
        .env(EXEC_ENV, format!("{me};{};{side}", fds.join(",")))
        .exec()
}

/// The new image's work (called before `main`): serves as the process it
/// was, on the channels and side its spec names. Returns only on a bad
/// spec (its exit code).
pub fn after_exec(spec: &OsStr) -> i32 {
    let spec = spec.to_string_lossy();
    let mut parts = spec.splitn(3, ';');
    let (Some(me), Some(fds), Some(side)) = (parts.next(), parts.next(), parts.next()) else {
        return 4;
    };
    let Ok(me) = me.parse::<usize>() else {
        return 4;
    };
    let Ok(fds) = fds
        .split(',')
        .map(str::parse::<i32>)
        .collect::<Result<Vec<i32>, _>>()
    else {
        return 4;
    };
    let chans: Vec<UnixDatagram> = fds.into_iter().map(os::datagram_from_fd).collect();
    if side == "kernel" {
        serve(&Ctx::Kernel, me, &chans)
    }
    let path = PathBuf::from(side);
    match Namespace::open_at(&path) {
        Ok(ns) => serve(
            &Ctx::Ipcns {
                ns: &ns,
                path: &path,
            },
            me,
            &chans,
        ),
        Err(_) => 5,
    }
}
