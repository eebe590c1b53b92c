//! `ipcns run [OPTIONS] [--] PROGRAM ARGS...`: runs a program with
//! `libipcns.so` preloaded and a namespace handed down, as its child
//! subreaper; without a program, prints what it would do.
//!
//! The namespace is the one the other commands use (`--ns`, `$IPCNS`,
//! else `default`), as programs share the host's IPC namespace unless they
//! ask for another; `--private` gives a fresh one for this run only, as
//! `unshare --ipc` does, removed when the run ends.
//!
//! The run: become a child subreaper, block the forwarded signals and
//! SIGCHLD, attach (or create) the namespace, start the program with the
//! arena's descriptor inherited (and the seccomp filter under
//! `--strict`), then take signals one at a time: a forwarded one goes to
//! the program, SIGCHLD reaps every child that ended (the program,
//! orphans reparented here) and asks the reaper thread to clean up after
//! them in the namespace. When the program has ended, the dead are reaped
//! once more and `ipcns run` exits with its status; descendants still
//! running (daemons) are left to run, as a shell leaves them. The
//! guardians of namespaces the program unshared (`libipcns.so`'s, named
//! `ipcns-guardian`) are no such descendants: they end with the last
//! process of their namespace, and are waited for a moment.

mod carried;
mod musl;
mod plan;
mod reaper;
mod seccomp;
pub mod supervisor;
mod sys;

use anyhow::{Context, bail};
use ipcns::{Access, ArenaError, CreateOptions, Namespace};
use lexopt::prelude::*;
use reaper::Reaper;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::time::Duration;

pub const USAGE: &str = "\
usage: ipcns run [--ns NAME | --private [--keep]] [--shared | --mode OCTAL] [--strict] [--no-supervisor | --serve-proc] [-v] [--] PROGRAM [ARGS...]
       ipcns run [OPTIONS]        print what it would do, and exit
Runs PROGRAM with libipcns.so first in LD_PRELOAD, so that its System V IPC
calls work on an ipcns namespace instead of the kernel's.
  --ns NAME      the namespace (default $IPCNS, else \"default\"), created if missing
  --private      a fresh namespace run-PID-RANDOM for this run alone, removed with
                 its segment files when PROGRAM ends (kept while processes it
                 started still run)
  --keep         with --private: keep the namespace and print its name at the end
  --shared       create it with mode 0666 and hand IPCNS_SHARED=1 down, so that
                 descendants running as other users (setpriv, su) use it too;
                 the default directory /dev/shm/ipcns-UID is made searchable
  --mode OCTAL   the mode to create it with (group or other bits: shared)
  --strict       nothing reaches the kernel's System V IPC: with the supervisor
                 (the default) there is nothing more to block; with
                 --no-supervisor, a seccomp filter makes the kernel's twelve IPC
                 system calls fail with ENOSYS in PROGRAM and its descendants
  --no-supervisor  the library only: calls that reach the kernel (static
                 binaries, Go, raw system calls) go to the kernel's namespace
  --serve-proc   the supervisor also serves /proc/sysvipc/* and the IPC sysctls
                 (read) to programs the library cannot reach (a static ipcs);
                 every open of every process then costs a few microseconds more
  -v, --verbose  say on stderr which library and namespace the run uses (and
                 whether it made it), and at the end whether it removed or kept it
The library is $IPCNS_PRELOAD, else libipcns.so beside the ipcns executable
(cargo build --release -p ipcns-preload), else ../lib/ipcns/libipcns.so
beside it, else the copy the executable carries, written to ~/.cache/ipcns; its
musl build, for programs whose interpreter is musl's, likewise ($IPCNS_PRELOAD_MUSL),
both named by one LD_PRELOAD entry (DIR/$PLATFORM/libipcns.so). PROGRAM gets LD_PRELOAD, IPCNS,
IPCNS_DIR, IPCNS_FD (the arena file, open read-write and inherited, so a
descendant that changes uid or clears its environment stays in the namespace),
IPCNS_POOL_FD (the segment pool, likewise, so that it still reaches the
segments) and, for a shared namespace, IPCNS_SHARED=1.
ipcns run is the child subreaper of everything PROGRAM starts: it reaps orphans
and cleans up after descendants that die without exiting (SIGKILL: SEM_UNDO
applied, attachments dropped). It forwards HUP INT QUIT TERM USR1 USR2 ALRM
WINCH CONT to PROGRAM (not those the terminal sent to PROGRAM's process group
already), and exits when PROGRAM does, with its status, 128+N if signal N
killed it; descendants still running are left running. Its own failures exit
125, a PROGRAM that cannot be run 126, one not found 127.
Calls that reach the kernel (static binaries, Go, musl programs, raw system
calls) are served by a supervisor (`ipcns __supervise`, a seccomp user
notification listener) from the same namespace; i386 and x32 calls fail with
ENOSYS. The filter sets no_new_privs without CAP_SYS_ADMIN.";

/// The signals forwarded to the program (those a shell's job would get,
/// less the stops, which stop `ipcns run` with its process group).
const FORWARDED: [i32; 9] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// `ipcns run`'s own failure (env(1) and timeout(1) use 125 too).
const EXIT_FAILED: u8 = 125;
/// The program could not be executed (POSIX shells' 126).
const EXIT_CANNOT_RUN: u8 = 126;
/// The program was not found (shells' 127).
const EXIT_NOT_FOUND: u8 = 127;

/// The command line.
pub struct Options {
    ns: Option<String>,
    private: bool,
    keep: bool,
    shared: bool,
    mode: Option<u32>,
    strict: bool,
    no_supervisor: bool,
    serve_proc: bool,
    verbose: bool,
    program: Option<OsString>,
    args: Vec<OsString>,
}

fn parse(args: &[OsString]) -> anyhow::Result<Option<Options>> {
    let mut o = Options {
        ns: None,
        private: false,
        keep: false,
        shared: false,
        mode: None,
        strict: false,
        no_supervisor: false,
        serve_proc: false,
        verbose: false,
        program: None,
        args: Vec::new(),
    };
    let mut p = lexopt::Parser::from_args(args.iter().cloned());
    while let Some(a) = p.next()? {
        match a {
            Short('h') | Long("help") => return Ok(None),
            Long("ns") => o.ns = Some(crate::ns::valid_name(&p.value()?)?),
            Long("private") => o.private = true,
            Long("keep") => o.keep = true,
            Long("shared") => o.shared = true,
            Long("mode") => {
                let v = p.value()?;
                o.mode = Some(
                    v.to_str()
                        .and_then(|v| u32::from_str_radix(v, 8).ok())
                        .filter(|m| *m <= 0o777)
                        .with_context(|| format!("--mode {v:?}: not an octal mode (0 to 0777)"))?,
                );
            }
            Long("strict") => o.strict = true,
            Long("no-supervisor") => o.no_supervisor = true,
            Long("serve-proc") => o.serve_proc = true,
            Short('v') | Long("verbose") => o.verbose = true,
            Value(v) => {
                o.program = Some(v);
                o.args = p.raw_args()?.collect();
                break;
            }
            other => return Err(other.unexpected().into()),
        }
    }
    if o.private && o.ns.is_some() {
        bail!("--private and --ns exclude each other");
    }
    if o.keep && !o.private {
        bail!("--keep applies to --private only (a named namespace is kept anyway)");
    }
    if o.serve_proc && o.no_supervisor {
        bail!("--serve-proc needs the supervisor (not --no-supervisor)");
    }
    if o.shared && o.mode.is_some_and(|m| m & 0o077 == 0) {
        bail!("--shared with a --mode that gives group and other nothing");
    }
    Ok(Some(o))
}

pub fn run(args: &[OsString]) -> anyhow::Result<ExitCode> {
    let result = parse(args).and_then(|opts| match opts {
        None => crate::print_out(&format!("{USAGE}\n")),
        Some(opts) if opts.program.is_none() => plan::text(&opts).map(|(text, ok)| {
            let _ = crate::print_out(&text);
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FAILED)
            }
        }),
        Some(opts) => supervise(&opts),
    });
    // Our own failures exit 125, not 1: the program's 1 stays its own.
    result.or_else(|e| {
        if crate::is_broken_pipe(&e) {
            return Err(e);
        }
        let _ = writeln!(std::io::stderr(), "ipcns: run: {}", crate::message(&e));
        Ok(ExitCode::from(EXIT_FAILED))
    })
}

/// Attaches to the target namespace, creating it (with the target's mode)
/// if `create` and it is missing.
fn attach(t: &plan::Target, create: bool) -> anyhow::Result<Namespace> {
    let access = if t.shared {
        Access::Shared
    } else {
        Access::from_env()
    };
    let opts = CreateOptions {
        mode: t.mode,
        ..CreateOptions::default()
    };
    let ns = if t.private {
        Namespace::create(&t.name, opts)
    } else {
        match Namespace::open_as(&t.name, access) {
            Err(ArenaError::NotFound { .. }) if create => match Namespace::create(&t.name, opts) {
                Err(ArenaError::Exists { .. }) => Namespace::open_as(&t.name, access),
                r => r,
            },
            r => r,
        }
    };
    ns.with_context(|| format!("namespace {}", t.name))
}

/// Gives the default directory the search bits a shared namespace's other
/// users need (it stays unwritable to them), saying so.
fn open_for_search(t: &plan::Target) -> anyhow::Result<()> {
    let m = std::fs::symlink_metadata(&t.dir)
        .with_context(|| format!("{}", t.dir.display()))?
        .permissions()
        .mode();
    if let Some(x) = plan::missing_search(t.mode, m) {
        let mode = (m | x) & 0o7777;
        std::fs::set_permissions(&t.dir, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("{}: making it searchable", t.dir.display()))?;
        let _ = writeln!(
            std::io::stderr(),
            "ipcns: run: {} is now mode {mode:04o}, so that other users reach shared namespace {}",
            t.dir.display(),
            t.name
        );
    }
    Ok(())
}

/// The program's exit code as a shell reports it: its status, 128+N for
/// signal N.
fn exit_code(status: i32) -> u8 {
    let s = std::process::ExitStatus::from_raw(status);
    match (s.code(), s.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => EXIT_FAILED,
    }
}

/// Runs the program (see the module's doc).
fn supervise(opts: &Options) -> anyhow::Result<ExitCode> {
    let lib = musl::choose(plan::find_library()?, opts.program.as_deref())?;
    let t = plan::target(opts)?;
    // The supervisor serves the calls that reach the kernel; without it
    // (--no-supervisor, or a kernel without user notification), --strict
    // makes them fail with ENOSYS.
    let supervised = !opts.no_supervisor && supervisor_available(opts.verbose);
    let filter = if opts.strict && !supervised {
        if seccomp::NATIVE.is_empty() {
            bail!("--strict: no System V IPC system call table for this architecture");
        }
        seccomp::available().context("--strict: this kernel has no seccomp")?;
        Some(seccomp::Filter::native())
    } else {
        None
    };
    // Before the program exists: signals that arrive from now on wait for
    // the loop below, and orphans come to us.
    let set = sys::SigSet::of(&[FORWARDED.as_slice(), &[libc::SIGCHLD]].concat())?;
    set.block().context("blocking signals")?;
    sys::become_subreaper().context("prctl(PR_SET_CHILD_SUBREAPER)")?;
    if t.shared && t.default_dir {
        open_for_search(&t)?;
    }
    let existed = t.arena.exists();
    let ns = attach(&t, true)?;
    if opts.verbose {
        let _ = writeln!(
            std::io::stderr(),
            "ipcns: run: namespace {} ({}, {}), library {} ({})",
            t.name,
            t.arena.display(),
            if existed { "existing" } else { "made now" },
            lib.path.display(),
            lib.from
        );
    }
    if opts.shared && !ns.shared() {
        let _ = writeln!(
            std::io::stderr(),
            "ipcns: run: namespace {} was not created shared: other users cannot attach to it",
            t.name
        );
    }
    let fd = ns
        .file_dup()
        .context("duplicating the arena's descriptor")?;
    let mut cmd = Command::new(opts.program.as_deref().unwrap_or_default());
    cmd.args(&opts.args)
        .env(
            "LD_PRELOAD",
            plan::ld_preload(&lib.path, std::env::var_os("LD_PRELOAD").as_deref()),
        )
        .env("IPCNS", &t.name)
        .env("IPCNS_DIR", &t.dir)
        .env("IPCNS_FD", fd.as_raw_fd().to_string());
    // The segment pool too, if it can be had (made now if missing): a
    // descendant that changed uid reaches the segments through it.
    let pool = ns.pool_dup().ok();
    if let Some(p) = &pool {
        cmd.env("IPCNS_POOL_FD", p.as_raw_fd().to_string());
    }
    if t.shared || ns.shared() {
        cmd.env("IPCNS_SHARED", "1");
    }
    let inherited: Vec<i32> = [Some(fd.as_raw_fd()), pool.as_ref().map(|p| p.as_raw_fd())]
        .into_iter()
        .flatten()
        .collect();
    let ns = std::sync::Arc::new(ns);
    let (handoff, supervisor_pid) = if supervised {
        let (ours, theirs) =
            supervisor::handoff::channel().context("a socket pair for the supervisor")?;
        let pid = supervisor::spawn(&ns, &t.arena, ours).context("starting the supervisor")?;
        (Some(theirs), Some(pid))
    } else {
        (None, None)
    };
    let listener = handoff.as_ref().map(|h| sys::Listener {
        filter: supervised_filter(opts.serve_proc),
        sock: h.as_raw_fd(),
        no_new_privs: !sys::has_cap_sys_admin(),
    });
    sys::prepare(&mut cmd, inherited, filter, listener)?;
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            drop(handoff);
            drop(ns);
            remove_private(&t, opts.keep, false, opts.verbose);
            let program = opts.program.as_deref().unwrap_or_default();
            let _ = writeln!(
                std::io::stderr(),
                "ipcns: run: {}: {}",
                program.to_string_lossy(),
                crate::without_os_error(&e.to_string())
            );
            return Ok(ExitCode::from(
                if e.kind() == std::io::ErrorKind::NotFound {
                    EXIT_NOT_FOUND
                } else {
                    EXIT_CANNOT_RUN
                },
            ));
        }
    };
    drop(fd);
    drop(pool);
    // The child's end: the supervisor sees EOF if no listener came.
    drop(handoff);
    let pid = child.id() as i32;
    // Never waited through `child`: the loop reaps every child by pid.
    drop(child);
    let reaper = Reaper::start(ns);
    let status = watch(&set, pid, &reaper)?;
    // The supervisor ends once no process under its filter is left (at
    // once, unless the program left some running): not a survivor then.
    if let Some(s) = supervisor_pid {
        sys::wait_for(s, Duration::from_secs(2));
    }
    // The dead reaped with the program get their cleanup now; children
    // that ended since are reaped too (a few rounds: descendants that keep
    // dying must not keep us). Then whoever still runs is left.
    let mut survivors = true;
    for _ in 0..3 {
        reaper.finish(Duration::from_secs(2));
        let mut any = false;
        survivors = loop {
            match sys::reap()? {
                sys::Reaped::Child(..) => any = true,
                sys::Reaped::Running => break true,
                sys::Reaped::None => break false,
            }
        };
        if !any {
            break;
        }
    }
    if survivors {
        survivors = guardians_only(Duration::from_secs(5))?;
    }
    remove_private(&t, opts.keep, survivors, opts.verbose);
    Ok(ExitCode::from(exit_code(status)))
}

/// Whether this kernel can run the supervisor: seccomp user notification
/// (`SECCOMP_GET_ACTION_AVAIL` of `SECCOMP_RET_USER_NOTIF`, Linux 5.0) on
/// an architecture it serves. Said under -v when not.
fn supervisor_available(verbose: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if sys::user_notif_available() {
            return true;
        }
        if verbose {
            let _ = writeln!(
                std::io::stderr(),
                "ipcns: run: this kernel has no seccomp user notification: no supervisor"
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    if verbose {
        let _ = writeln!(
            std::io::stderr(),
            "ipcns: run: no supervisor on this architecture (x86-64 only)"
        );
    }
    false
}

#[cfg(target_arch = "x86_64")]
fn supervised_filter(opens: bool) -> seccomp::Filter {
    seccomp::supervised(opens)
}

#[cfg(not(target_arch = "x86_64"))]
fn supervised_filter(_: bool) -> seccomp::Filter {
    seccomp::Filter::native()
}

/// Whether processes the program started still run, once the guardians
/// of the namespaces it unshared (`libipcns.so`'s, reparented here when
/// the process that unshared ended) are set aside: they use none of the
/// run's namespace and end as soon as their own has no process left,
/// which, when they are all that is left here, is now. They are waited
/// for up to `limit` (and reaped), so that their namespaces are gone when
/// the run ends; any still there then is left running, as a survivor is.
///
/// Only a child positively seen to be a guardian (its name and its
/// descriptors, `sys::running_children`) is set aside: when `/proc`
/// cannot tell, or `wait4` says children run that `/proc` does not show,
/// or a child named so holds other descriptors at the end of `limit`,
/// they are survivors (the namespace is kept: better too long than
/// removed under a daemon).
fn guardians_only(limit: Duration) -> anyhow::Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let running = loop {
            match sys::reap()? {
                sys::Reaped::Child(..) => continue,
                sys::Reaped::Running => break true,
                sys::Reaped::None => break false,
            }
        };
        if !running {
            return Ok(false);
        }
        let late = std::time::Instant::now() > deadline;
        match sys::running_children() {
            Some(c) if c.others > 0 => return Ok(true),
            // All positively guardians, left running at the deadline.
            Some(c) if c.unsure == 0 && c.guardians > 0 && late => return Ok(false),
            // Unsure ones, or none seen while wait4 says some run (gone
            // since, or invisible here): look again until the deadline.
            _ if late => return Ok(true),
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Takes signals until the program `pid` has ended: forwards, reaps, asks
/// for cleanups. Its `wait` status.
fn watch(set: &sys::SigSet, pid: i32, reaper: &Reaper) -> anyhow::Result<i32> {
    loop {
        let Some(got) = set.wait().context("sigwaitinfo")? else {
            continue;
        };
        if got.signal != libc::SIGCHLD {
            if forwards(got.code, || sys::in_own_group(pid))
                && let Err(e) = sys::kill(pid, got.signal)
            {
                // (EPERM: the program made itself unreachable; we go on.)
                let _ = writeln!(
                    std::io::stderr(),
                    "ipcns: run: forwarding signal {} to {pid}: {e}",
                    got.signal
                );
            }
            continue;
        }
        // Signals merge: reap every child that has ended.
        let mut any = false;
        let mut main = None;
        while let sys::Reaped::Child(p, status) = sys::reap()? {
            any = true;
            if p == pid {
                main = Some(status);
            }
        }
        if any {
            reaper.request();
        }
        if let Some(status) = main {
            return Ok(status);
        }
    }
}

/// Whether a signal with `si_code` `code` is forwarded to the program. The
/// terminal's signals (`SI_KERNEL`: ^C, ^\, a window change, a hangup)
/// went to its whole foreground process group, so the program has them
/// already, unless it left our group (`program_in_our_group`, asked only
/// then). Everything else was sent to `ipcns run` alone (kill(2): `SI_USER`).
fn forwards(code: i32, program_in_our_group: impl FnOnce() -> bool) -> bool {
    code != libc::SI_KERNEL || !program_in_our_group()
}

/// Removes a `--private` namespace at the end, unless kept or still in use;
/// says what it kept.
fn remove_private(t: &plan::Target, keep: bool, survivors: bool, verbose: bool) {
    let mut err = std::io::stderr();
    if !t.private {
        if verbose {
            let _ = writeln!(err, "ipcns: run: kept namespace {} (not --private)", t.name);
        }
        return;
    }
    if keep {
        let _ = writeln!(
            err,
            "ipcns: run: kept namespace {} in {}",
            t.name,
            t.dir.display()
        );
    } else if survivors {
        let _ = writeln!(
            err,
            "ipcns: run: kept namespace {} in {}: processes the program started still run \
             (remove it with 'IPCNS_DIR={} ipcns ns remove {}' when they are done)",
            t.name,
            t.dir.display(),
            t.dir.display(),
            t.name
        );
    } else if let Err(e) = Namespace::remove_at(&t.arena) {
        let _ = writeln!(err, "ipcns: run: removing namespace {}: {e}", t.name);
    } else if verbose {
        let _ = writeln!(err, "ipcns: run: removed namespace {}", t.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminals_signals_are_not_sent_twice() {
        // ^C with the program in our process group: it has it already.
        assert!(!forwards(libc::SI_KERNEL, || true));
        // ... in a group of its own: it needs it.
        assert!(forwards(libc::SI_KERNEL, || false));
        // kill(2) and sigqueue(3) to ipcns run: always forwarded.
        assert!(forwards(libc::SI_USER, || true));
        assert!(forwards(libc::SI_QUEUE, || true));
    }

    #[test]
    fn exit_codes_are_as_a_shell_reports_them() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(255 << 8), 255);
        assert_eq!(exit_code(libc::SIGKILL), 137);
        assert_eq!(exit_code(libc::SIGSEGV | 0x80), 139);
    }

    #[test]
    fn options() {
        let a = |v: &[&str]| -> Vec<OsString> { v.iter().map(OsString::from).collect() };
        let o = parse(&a(&["--ns", "x", "--strict", "prog", "--ns", "y"]))
            .unwrap()
            .unwrap();
        assert_eq!(o.ns.as_deref(), Some("x"));
        assert!(o.strict);
        assert_eq!(o.program, Some(OsString::from("prog")));
        assert_eq!(o.args, a(&["--ns", "y"]));
        let o = parse(&a(&["--mode", "660", "--", "--prog"]))
            .unwrap()
            .unwrap();
        assert_eq!(o.mode, Some(0o660));
        assert_eq!(o.program, Some(OsString::from("--prog")));
        assert!(parse(&a(&["--help", "prog"])).unwrap().is_none());
        assert!(parse(&a(&["prog", "--help"])).unwrap().is_some());
        assert!(parse(&a(&["--mode", "9"])).is_err());
        assert!(parse(&a(&["--mode", "1777"])).is_err());
        assert!(parse(&a(&["--shared", "--mode", "600"])).is_err());
        assert!(parse(&a(&["--bogus"])).is_err());
    }
}
