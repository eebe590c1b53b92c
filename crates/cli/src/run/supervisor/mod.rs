//! The supervisor: `ipcns run` serves the System V IPC system calls that
//! reach the kernel from the program's tree (static binaries, Go, musl
//! programs without their library, raw `syscall`s), from the run's
//! namespace, so that one tree never splits across two namespaces.
//!
//! The program is started under a seccomp filter (`seccomp::supervised`)
//! whose listener the child hands up before its exec (a socket pair,
//! SCM_RIGHTS). Calls served by `libipcns.so` never reach the filter; the
//! twelve calls that do (x86-64's) wait in the kernel while a thread here
//! makes them on the namespace for the caller (`serve.rs`): with the
//! caller's credentials of the moment (`Cred::read_of`), its record in the
//! process table (`ipcns::acting`: its undo entries, applied by the run's
//! reaper when it dies; its attachments), its memory read and written
//! through `process_vm_readv`/`writev` (`notify.rs`), and the errno the
//! library would give; shmat and shmdt map and unmap in the caller
//! (`trace.rs`).
//!
//! Threads: every idle thread waits in RECV; a call that may sleep
//! (semop, msgsnd, msgrcv without IPC_NOWAIT) first makes sure another
//! thread is idle, so many callers may wait at once, and the supervisor
//! never waits for one of them. Surplus idle threads leave.
//!
//! Signals: the filter is installed with `WAIT_KILLABLE_RECV`, so a caller
//! whose call was received waits for its answer through any signal but a
//! fatal one, and an answer given is always delivered (a message taken
//! from a queue is never lost, a semaphore operation made is never
//! reported as failed). A watcher looks at each sleeping call's caller
//! every few milliseconds: a signal pending for it that a handler will
//! take ends the sleep with EINTR, as the kernel's semop, msgsnd and
//! msgrcv end (never restarted, even under SA_RESTART); a caller gone
//! (killed) ends it and nothing is left behind (its undo entries are the
//! reaper's).
//!
//! # Safety
//! The signal handler only calls `ipcns::intr::note_signal`, which is
//! async-signal-safe; `sigaction` and `tgkill` take plain values.
#![allow(unsafe_code)]

pub mod handoff;
mod notify;
mod procfiles;
mod serve;
pub mod trace;

use super::seccomp;
use ipcns::Namespace;
use ipcns::acting::{self, Process};
use ipcns::intr::Mark;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// At most this many threads wait idle in RECV; more leave.
const MAX_IDLE: usize = 3;

/// The stack of a supervisor thread that may sleep in a call.
const THREAD_STACK: usize = 256 << 10;

/// How often a sleeping call's caller is looked at for signals (more
/// rarely with many: [`PER_SLEEPER`] each).
const PER_SLEEPER: Duration = Duration::from_micros(200);

/// How often a sleeping call's caller is looked at for signals, at most.
const WATCH: Duration = Duration::from_millis(4);

/// A call sleeping in a supervisor thread.
struct Sleeping {
    id: u64,
    /// The caller, and its process.
    tid: i32,
    pid: i32,
    /// The supervisor's thread making the call.
    worker: i32,
    /// [`AWAKE`] until the watcher ends the sleep ([`EINTR`], [`GONE`]) or
    /// the call ends by itself ([`DONE`]), whichever is first.
    end: AtomicU8,
    /// The watcher has sent its signal (after ending the sleep).
    sent: std::sync::atomic::AtomicBool,
    /// The caller's process, readable once it ended: the watcher ends
    /// the sleep of a caller killed at once, not at its next look.
    pidfd: Option<OwnedFd>,
}

const AWAKE: u8 = 0;
const EINTR: u8 = 1;
const GONE: u8 = 2;
const DONE: u8 = 3;

struct Shared {
    ns: Arc<Namespace>,
    listener: OwnedFd,
    idle: AtomicUsize,
    sleeping: Mutex<Vec<Arc<Sleeping>>>,
    /// Processes with attachments, as last seen (`watch`).
    attached: Mutex<HashMap<i32, Process>>,
    /// Processes met (pid, start time): `first_call` done.
    seen: Mutex<HashSet<(i32, u64)>>,
    /// Calling threads met, by thread id.
    known: Mutex<HashMap<i32, Known>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these; a poisoned lock's data is fine.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the supervisor: `ipcns __supervise SOCK ARENA PATH`, a process
/// of its own (so that it outlives `ipcns run` while daemons the program
/// left use it, and traces callers from outside the process that waits
/// for them), with the run's namespace (`ns`'s arena, found beside
/// `path`) and `sock`, through which the child sends the listener. Its
/// pid.
pub fn spawn(ns: &Namespace, path: &std::path::Path, sock: OwnedFd) -> std::io::Result<i32> {
    use std::os::unix::process::CommandExt;
    let arena = ns.file_dup()?;
    let fds = [sock.as_raw_fd(), arena.as_raw_fd()];
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg("__supervise")
        .arg(fds[0].to_string())
        .arg(fds[1].to_string())
        .arg(path)
        .env_remove("LD_PRELOAD")
        // Nothing of the caller's: a supervisor serving daemons the
        // program left must not keep its caller's pipes open.
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let hook = move || {
        for fd in fds {
            // SAFETY: F_SETFD on our own descriptors, between fork and
            // exec (async-signal-safe).
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the hook makes only async-signal-safe system calls.
    unsafe { cmd.pre_exec(hook) };
    let child = cmd.spawn()?;
    Ok(child.id() as i32)
}

/// `ipcns __supervise SOCK ARENA PATH` (see [`spawn`]): serves until no
/// process under the filter is left, then exits.
pub fn main(args: &[std::ffi::OsString]) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::Context;
    use std::os::fd::FromRawFd;
    let fd = |i: usize| -> anyhow::Result<OwnedFd> {
        let n: RawFd = args
            .get(i)
            .and_then(|a| a.to_str())
            .and_then(|a| a.parse().ok())
            .context("usage: ipcns __supervise SOCK ARENA PATH (started by ipcns run)")?;
        // SAFETY: F_GETFD takes no pointer.
        if n < 3 || unsafe { libc::fcntl(n, libc::F_GETFD) } < 0 {
            anyhow::bail!("descriptor {n} is not open");
        }
        // SAFETY: open (checked), handed to us by `spawn`, owned by nothing
        // else in this process.
        Ok(unsafe { OwnedFd::from_raw_fd(n) })
    };
    let (sock, arena) = (fd(0)?, fd(1)?);
    let path = args.get(2).map(std::path::PathBuf::from);
    // Its own session: the terminal's signals are the program's. Signals
    // `ipcns run` blocked are not ours to block.
    // SAFETY: plain calls; an empty mask and SIG_IGN dispositions.
    unsafe {
        libc::setsid();
        let mut none: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, core::ptr::null_mut());
        for sig in [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let ns = Namespace::open_fd(arena, path.as_deref()).context("the run's namespace")?;
    let Some(listener) = handoff::receive(&sock) else {
        return Ok(std::process::ExitCode::SUCCESS);
    };
    drop(sock);
    serve(Arc::new(ns), listener);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Serves the calls of `listener` until no process under the filter is
/// left.
fn serve(ns: Arc<Namespace>, listener: OwnedFd) {
    // Without it (before Linux 6.6) a call costs about ten times more (a
    // wake-up on another cpu), but works.
    let _ = notify::sync_wake_up(listener.as_raw_fd());
    install_interrupt();
    let sh = Arc::new(Shared {
        ns,
        listener,
        idle: AtomicUsize::new(0),
        sleeping: Mutex::new(Vec::new()),
        attached: Mutex::new(HashMap::new()),
        seen: Mutex::new(HashSet::new()),
        known: Mutex::new(HashMap::new()),
    });
    let w = Arc::clone(&sh);
    let _ = std::thread::Builder::new()
        .name("ipcns-watcher".into())
        .spawn(move || watch(&w));
    // The first receiver is this thread; when it leaves, the others
    // still serve unless the filter's processes are all gone.
    loop {
        receive(&sh);
        if ended(sh.listener.as_raw_fd()) {
            return;
        }
    }
}

/// A thread waiting in RECV and serving what it gets, until the filter's
/// processes are all gone or enough other threads are idle.
fn receive(sh: &Arc<Shared>) {
    let fd = sh.listener.as_raw_fd();
    loop {
        sh.idle.fetch_add(1, SeqCst);
        let got = notify::recv(fd);
        sh.idle.fetch_sub(1, SeqCst);
        match got {
            Ok(call) => {
                // A caller is never left waiting: if serving its call
                // panicked (a bug of ours), it gets ENOMEM (an answer
                // given already makes this one fail, harmlessly).
                let served =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve_one(sh, call)));
                if served.is_err() {
                    notify::reply(fd, call.id, Err(ipcns::Errno::ENOMEM));
                }
            }
            Err(_) if ended(fd) => return,
            // A caller gone before its call was read (ENOENT), EINTR.
            Err(_) => {}
        }
        if sh.idle.load(SeqCst) >= MAX_IDLE {
            return;
        }
    }
}

/// Whether every process under the filter is gone (the listener hangs up).
fn ended(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, ours, for the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// Another thread to wait in RECV while this one may sleep in a call.
fn ensure_idle(sh: &Arc<Shared>) {
    if sh.idle.load(SeqCst) > 0 {
        return;
    }
    let s = Arc::clone(sh);
    // A small stack: the calls use little, and as many threads as callers
    // sleep at once.
    let _ = std::thread::Builder::new()
        .name("ipcns-supervisor".into())
        .stack_size(THREAD_STACK)
        .spawn(move || receive(&s));
}

fn serve_one(sh: &Arc<Shared>, call: notify::Call) {
    let fd = sh.listener.as_raw_fd();
    if seccomp::HEARD.iter().any(|&(_, n)| n as i32 == call.nr) && call.nr != EXIT_GROUP {
        // A change of the caller's credentials, limits, user namespace or
        // program to come: what was read of it is read again at its next
        // call. The change itself is the kernel's.
        forget(sh, &call);
        notify::proceed(fd, call.id);
        return;
    }
    if matches!(
        call.nr,
        procfiles::OPEN | procfiles::OPENAT | procfiles::OPENAT2
    ) {
        serve_open(sh, &call);
        return;
    }
    if call.nr == EXIT_GROUP {
        forget(sh, &call);
        // Before the kernel's exit: the process's undo entries applied
        // and its attachments dropped, as `exit_sem` and `exit_shm` do
        // before its parent can see it gone.
        if let Some(tgid) = tgid_of(call.tid)
            && let Ok(p) = process(fd, call.id, tgid)
        {
            let _ = sh.ns.act(p, None, || sh.ns.exit_acting());
            locked(&sh.attached).remove(&tgid);
        }
        notify::proceed(fd, call.id);
        return;
    }
    // The call starts here: a signal noted on this thread from now on ends
    // its sleep (the watcher's, on the caller's behalf).
    let mark = Mark::now();
    let mut caller = None;
    let result = (|| {
        let (cred, p) = who(sh, &call).map_err(Failed)?;
        caller = Some(p);
        first_call(sh, p);
        // A process that exec'd since it attached: the old image's
        // attachments go before this image's first call is served.
        let was = locked(&sh.attached).get(&p.pid).copied();
        if let Some(was) = was
            && (was.start, was.image) != (p.start, p.image)
        {
            let still = was.start == p.start
                && sh
                    .ns
                    .act(p, None, || sh.ns.observe_acting())
                    .unwrap_or(false);
            let mut a = locked(&sh.attached);
            if still {
                a.insert(p.pid, p);
            } else {
                a.remove(&p.pid);
            }
        }
        let mem = notify::Memory {
            listener: fd,
            id: call.id,
            tid: call.tid,
        };
        if matches!(call.nr, serve::SHMAT | serve::SHMDT) {
            // Mapped or unmapped in the caller by the caller (`trace.rs`),
            // which then has its answer in its registers.
            let t = Rc::new(trace::Tracer::new(fd, call.id, call.tid, p.pid));
            let mapper: Rc<dyn acting::Mapper> = t.clone();
            let r = sh.ns.act(p, Some(mapper), || {
                serve::call(&sh.ns, &cred, &mem, mark, call.nr, &call.args)
            });
            if call.nr == serve::SHMAT && r.is_ok() {
                // Watched for an exec, which drops its attachments.
                locked(&sh.attached).insert(p.pid, p);
            }
            if t.finish(r) {
                return Err(Answered);
            }
            return r.map_err(Failed);
        }
        if !serve::may_block(call.nr, &call.args) {
            return sh
                .ns
                .act(p, None, || {
                    serve::call(&sh.ns, &cred, &mem, mark, call.nr, &call.args)
                })
                .map_err(Failed);
        }
        // First without sleeping (most calls need not): a call that
        // would sleep has done nothing, and is made again as it came.
        if let Some((quick, would_sleep)) = serve::without_sleep(call.nr, &call.args) {
            let r = sh.ns.act(p, None, || {
                serve::call_as(&sh.ns, &cred, &mem, mark, call.nr, &quick, true)
            });
            if r != Err(would_sleep) {
                return r.map_err(Failed);
            }
        }
        ensure_idle(sh);
        let s = Arc::new(Sleeping {
            id: call.id,
            tid: call.tid,
            pid: p.pid,
            worker: gettid(),
            end: AtomicU8::new(AWAKE),
            sent: std::sync::atomic::AtomicBool::new(false),
            // The caller's (still waiting, so its pid is not reused yet).
            pidfd: pidfd_open(p.pid).filter(|_| notify::valid(fd, call.id)),
        });
        locked(&sh.sleeping).push(Arc::clone(&s));
        let r = sh.ns.act(p, None, || {
            serve::call(&sh.ns, &cred, &mem, mark, call.nr, &call.args)
        });
        locked(&sh.sleeping).retain(|x| !Arc::ptr_eq(x, &s));
        let end = match s.end.compare_exchange(AWAKE, DONE, SeqCst, SeqCst) {
            Ok(_) => DONE,
            Err(end) => {
                // The watcher ended it: its signal is this call's, never
                // the next one's. Once sent, any system call takes it
                // (the handler runs before the call returns), and the
                // next call's mark is taken after.
                while !s.sent.load(SeqCst) {
                    std::thread::yield_now();
                }
                // SAFETY: no arguments.
                unsafe { libc::syscall(libc::SYS_getpid) };
                end
            }
        };
        match (end, r) {
            // Done before the signal could end it: done.
            (_, Ok(v)) => Ok(v),
            (EINTR, Err(_)) => Err(Failed(ipcns::Errno::EINTR)),
            (_, Err(e)) => Err(Failed(e)),
        }
    })();
    let result = match result {
        Ok(v) => Ok(v),
        Err(Failed(e)) => Err(e),
        Err(Answered) => return,
    };
    // A caller gone no longer waits: the answer goes nowhere.
    if !notify::reply(fd, call.id, result)
        && let Some(p) = caller
        && process_ended(p)
    {
        // Killed while its call was being made (the filter's wait ends
        // only for a fatal signal once the call is received; a thread
        // ended by another's exec also fails the answer, but its process
        // lives on: not this): what the call did is finished as the
        // kernel's exit would (its undo entries applied, its attachments
        // dropped), now rather than at the next reader's look.
        let _ = sh.ns.act(p, None, || sh.ns.exit_acting());
    }
}

/// An open under `--serve-proc` (`procfiles.rs`): one of the emulated
/// files answered, anything else let through.
fn serve_open(sh: &Shared, call: &notify::Call) {
    let fd = sh.listener.as_raw_fd();
    let mem = notify::Memory {
        listener: fd,
        id: call.id,
        tid: call.tid,
    };
    let open = match who(sh, call) {
        Ok((cred, _)) => procfiles::classify(&sh.ns, &cred, &mem, call.nr, &call.args),
        Err(_) => procfiles::Open::Theirs,
    };
    match open {
        procfiles::Open::Theirs => {
            notify::proceed(fd, call.id);
        }
        procfiles::Open::Ours(text, cloexec) => match text.and_then(|t| procfiles::memfd(&t)) {
            Ok(f) => {
                procfiles::send_fd(fd, call.id, &f, cloexec);
            }
            Err(e) => {
                notify::reply(fd, call.id, Err(e));
            }
        },
    }
}

/// What the supervisor knows of a calling thread: its credentials and
/// its process (read from /proc at its first call and after each change
/// the filter tells of), and its process's pidfd, which says whether the
/// thread id could name another thread by now.
struct Known {
    cred: Arc<ipcns::Cred>,
    process: Process,
    pidfd: OwnedFd,
}

/// The caller of `call`: its credentials and process, from what is known
/// of its thread if that still holds (its process lives and the thread
/// is still one of its own), else read afresh.
fn who(sh: &Shared, call: &notify::Call) -> Result<(Arc<ipcns::Cred>, Process), ipcns::Errno> {
    let fd = sh.listener.as_raw_fd();
    {
        let known = locked(&sh.known);
        if let Some(k) = known.get(&call.tid)
            && !ended_pidfd(k.pidfd.as_raw_fd())
            && thread_of(k.process.pid, call.tid)
        {
            return Ok((Arc::clone(&k.cred), k.process));
        }
    }
    let mut cred = sh
        .ns
        .cred_of(call.tid, 0, 0)
        .map_err(|_| ipcns::Errno::ESRCH)?;
    let pidfd = pidfd_open(cred.pid).ok_or(ipcns::Errno::ESRCH)?;
    let p = Process {
        tid: call.tid,
        ..process(fd, call.id, cred.pid)?
    };
    cred.start_time = p.start;
    let cred = Arc::new(cred);
    let mut known = locked(&sh.known);
    if known.len() >= MAX_KNOWN {
        // Threads of processes gone, mostly: forgotten, read again if not.
        known.clear();
    }
    known.insert(
        call.tid,
        Known {
            cred: Arc::clone(&cred),
            process: p,
            pidfd,
        },
    );
    Ok((cred, p))
}

/// At most this many threads known at once.
const MAX_KNOWN: usize = 4096;

/// Forgets what is known of `call`'s thread, and of every thread of its
/// process for an exec or an exit (or of the target of a `prlimit64`).
fn forget(sh: &Shared, call: &notify::Call) {
    let mut known = locked(&sh.known);
    let tgid = known.get(&call.tid).map(|k| k.process.pid);
    known.remove(&call.tid);
    let whole = match call.nr {
        EXIT_GROUP | EXECVE | EXECVEAT => tgid,
        PRLIMIT64 if call.args[0] != 0 => Some(call.args[0] as i32),
        _ => None,
    };
    if let Some(pid) = whole {
        known.retain(|_, k| k.process.pid != pid);
    }
}

/// Whether thread `tid` is one of process `pid`'s (`tgkill` with signal 0).
fn thread_of(pid: i32, tid: i32) -> bool {
    // SAFETY: plain integers; signal 0 only checks.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) == 0 }
}

/// Why a call did not return a value: its errno, or its answer given
/// already (in the caller's registers, by `trace.rs`).
enum Unanswered {
    Failed(ipcns::Errno),
    Answered,
}
use Unanswered::{Answered, Failed};

/// The process `tgid` that made call `id`: its start time and the number
/// of its program image, read now (each call: the process may have
/// exec'd since its last).
///
/// The image number: what an exec of a process changes in
/// `/proc/PID/stat`, where its new stack, heap, arguments and environment
/// begin (fields 28, 47, 48 and 50), randomised at each exec (unless the
/// program runs with address space randomisation off, where an exec of
/// the same program can go unseen: its attachments then stay counted).
fn process(fd: RawFd, id: u64, tgid: i32) -> Result<Process, ipcns::Errno> {
    let p = identity(tgid).ok_or(ipcns::Errno::ESRCH)?;
    // The numbers read are the caller's process's: the thread still waits.
    if !notify::valid(fd, id) {
        return Err(ipcns::Errno::ESRCH);
    }
    Ok(p)
}

/// Process `tgid` as [`process`] names it, if it is there.
fn identity(tgid: i32) -> Option<Process> {
    identity_and_parent(tgid).map(|(p, _)| p)
}

/// [`identity`] and the process's parent (field 4 of /proc/PID/stat).
fn identity_and_parent(tgid: i32) -> Option<(Process, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{tgid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted after its closing parenthesis (field 3 is index 0).
    let rest = stat.rfind(')').map(|i| &stat[i + 1..])?;
    let f: Vec<u64> = rest
        .split_ascii_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let field = |n: usize| f.get(n - 3).copied().unwrap_or(0);
    let start = field(22);
    let image = [28, 47, 48, 50]
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &n| {
            (h ^ field(n)).wrapping_mul(0x0000_0100_0000_01b3)
        })
        | 1;
    Some((
        Process {
            pid: tgid,
            start,
            image,
            tid: 0,
        },
        field(4) as i32,
    ))
}

/// At the first call of a process met: the attachments it inherited from
/// its parent by a fork the supervisor did not see (a mapping of the same
/// file at the same address in both) are counted as its own.
fn first_call(sh: &Shared, p: Process) {
    {
        let mut seen = locked(&sh.seen);
        if !seen.insert((p.pid, p.start)) {
            return;
        }
        if seen.len() > 100_000 {
            // Forget the oldest meetings: a second look costs little.
            seen.clear();
            seen.insert((p.pid, p.start));
        }
    }
    let Some((_, ppid)) = identity_and_parent(p.pid) else {
        return;
    };
    let Some(parent) = identity(ppid) else {
        return;
    };
    let (Ok(mine), Ok(theirs)) = (
        std::fs::read_to_string(format!("/proc/{}/maps", p.pid)),
        std::fs::read_to_string(format!("/proc/{ppid}/maps")),
    ) else {
        return;
    };
    // "START-END PERMS OFFSET DEV INODE": the mapping that starts at `at`.
    let at = |maps: &str, addr: u64| -> Option<(String, String)> {
        maps.lines().find_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let lo = u64::from_str_radix(f.next()?.split_once('-')?.0, 16).ok()?;
            let (dev, ino) = (f.nth(2)?, f.next()?);
            (lo == addr && ino != "0").then(|| (dev.to_string(), ino.to_string()))
        })
    };
    let mapped = |addr: u64| at(&mine, addr).is_some_and(|m| at(&theirs, addr) == Some(m));
    if sh.ns.act(p, None, || {
        sh.ns.inherit_acting((parent.pid, parent.start), &mapped)
    }) == Ok(true)
    {
        locked(&sh.attached).insert(p.pid, p);
    }
}

/// Whether process `p` has ended: gone from /proc, a zombie, or another
/// process with its pid.
fn process_ended(p: Process) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", p.pid)) else {
        return true;
    };
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return true;
    };
    let mut f = rest.split_ascii_whitespace();
    let state = f.next().unwrap_or("X");
    let start: u64 = f.nth(18).and_then(|v| v.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || start != p.start
}

/// Thread `tid`'s thread group (`Tgid:` of /proc/TID/status).
fn tgid_of(tid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits up to `pause` for the processes of `sleeping`'s callers; the
/// indices of those that ended (none when the time ran out).
fn wait_for_ends(sleeping: &[Arc<Sleeping>], pause: Duration) -> Vec<usize> {
    let mut fds: Vec<libc::pollfd> = sleeping
        .iter()
        .map(|s| libc::pollfd {
            fd: s.pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = pause.as_millis().clamp(1, 1000) as i32;
    // SAFETY: `fds` is ours for the call, its length given; -1 entries
    // are ignored by poll.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n <= 0 {
        return Vec::new();
    }
    fds.iter()
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
        .map(|(i, _)| i)
        .collect()
}

/// Whether the process of `pidfd` ended.
fn ended_pidfd(pidfd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, ours, for the call.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain integers; the descriptor returned is ours.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if r < 0 {
        return None;
    }
    // SAFETY: a new descriptor nothing else owns.
    Some(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(r as RawFd) })
}

fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// The signal that tells a supervisor thread its sleeping call is over.
fn interrupt_signal() -> i32 {
    libc::SIGRTMIN() + 4
}

extern "C" fn on_interrupt(_: libc::c_int) {
    ipcns::intr::note_signal();
}

fn install_interrupt() {
    // SAFETY: all-zero is a valid sigaction (no flags, empty mask); the
    // handler is async-signal-safe (module doc).
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_interrupt as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(interrupt_signal(), &sa, core::ptr::null_mut());
    }
}

/// x86-64's exit_group, execve, execveat and prlimit64, among the calls
/// the supervisor hears of (`seccomp::HEARD`).
const EXIT_GROUP: i32 = 231;
const EXECVE: i32 = 59;
const EXECVEAT: i32 = 322;
const PRLIMIT64: i32 = 302;

/// The watcher: every few milliseconds, ends the sleeping calls whose
/// caller is gone or has a signal coming that a handler will take, and
/// drops the attachments of processes that exec'd since.
fn watch(sh: &Arc<Shared>) {
    let fd = sh.listener.as_raw_fd();
    loop {
        // About 5,000 reads of /proc a second at most, however many sleep;
        // a caller's end wakes the watcher at once.
        let now: Vec<Arc<Sleeping>> = locked(&sh.sleeping).clone();
        let pause = WATCH.max(PER_SLEEPER * now.len() as u32);
        let gone = wait_for_ends(&now, pause);
        if ended(fd) && locked(&sh.sleeping).is_empty() {
            return;
        }
        let attached: Vec<Process> = locked(&sh.attached).values().copied().collect();
        for was in attached {
            let now = identity(was.pid).map(|p| Process { tid: was.tid, ..p });
            let keep = match now {
                Some(p) if p.start == was.start && p.image == was.image => continue,
                // An exec: the old image's attachments go (`me` sees the
                // new image number).
                Some(p) if p.start == was.start => sh
                    .ns
                    .act(p, None, || sh.ns.observe_acting())
                    .unwrap_or(false),
                // Gone: its exit_group, or the reaper, finished it.
                _ => false,
            };
            let mut a = locked(&sh.attached);
            match (keep, now) {
                (true, Some(p)) => a.insert(p.pid, p),
                _ => a.remove(&was.pid),
            };
        }
        // A signal sent to a process ends the sleep of one of its threads:
        // its main thread's if that one sleeps here, else the lowest.
        let coming: Vec<Coming> = now
            .iter()
            .map(|s| {
                if s.end.load(SeqCst) == AWAKE {
                    signal_coming(s.tid)
                } else {
                    Coming::No
                }
            })
            .collect();
        let takes_shared = |i: usize| {
            let me = &now[i];
            !now.iter().enumerate().any(|(j, o)| {
                j != i
                    && o.pid == me.pid
                    && coming[j] == Coming::Shared
                    && me.tid != me.pid
                    && (o.tid == o.pid || o.tid < me.tid)
            })
        };
        for (i, s) in now.iter().enumerate() {
            if s.end.load(SeqCst) != AWAKE {
                continue;
            }
            let end = if gone.contains(&i) || !notify::valid(fd, s.id) {
                GONE
            } else if coming[i] == Coming::Own || (coming[i] == Coming::Shared && takes_shared(i)) {
                EINTR
            } else {
                continue;
            };
            if s.end.compare_exchange(AWAKE, end, SeqCst, SeqCst).is_err() {
                // The call ended by itself meanwhile.
                continue;
            }
            // SAFETY: plain integers; the worker is a thread of ours,
            // which waits for `sent` before it takes another call.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    libc::getpid(),
                    s.worker,
                    interrupt_signal(),
                );
            }
            s.sent.store(true, SeqCst);
        }
    }
}

/// Whether thread `tid` has a signal pending (its own or its process's)
/// that it does not block and whose handler will run: what ends the
/// kernel's semop, msgsnd and msgrcv with EINTR. (A fatal one kills it;
/// an ignored one or a stop does not end the call.)
fn signal_coming(tid: i32) -> Coming {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return Coming::No;
    };
    let mask = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let taken = !mask("SigBlk") & mask("SigCgt");
    if mask("SigPnd") & taken != 0 {
        Coming::Own
    } else if mask("ShdPnd") & taken != 0 {
        Coming::Shared
    } else {
        Coming::No
    }
}

/// A signal coming for a sleeping caller ([`signal_coming`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Coming {
    No,
    /// Sent to the thread itself.
    Own,
    /// Sent to its process: one thread takes it (the kernel's
    /// `complete_signal`: the main thread if it may, else another), so it
    /// ends one sleeping call only.
    Shared,
}
