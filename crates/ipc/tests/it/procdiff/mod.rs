//! Differential tests with real processes: scripts of steps over a few
//! logical processes (P0 the driver, P1... forked during the script, by
//! the driver or by each other) run on the kernel, in a fresh IPC
//! namespace, and on a fresh ipcns namespace; the two logs must be equal
//! line for line.
//!
//! A step is a System V call by one process (semget, semop and
//! semtimedop with and without SEM_UNDO, blocking or not, semctl
//! SETVAL/SETALL/GETVAL/GETALL/GETPID/GETNCNT/GETZCNT/IPC_STAT/IPC_RMID;
//! shmget, shmat (read-only too), shmdt, a byte stored into or loaded from
//! an attachment, shmctl IPC_STAT/IPC_RMID; msgget, msgsnd and msgrcv,
//! blocking or not, msgctl IPC_STAT/IPC_RMID/IPC_SET of the queue size), or
//! something done to a process: fork (the child inherits the attachments,
//! not the undo list), exit, SIGKILL, exec (the test binary again, serving
//! on: the undo list stays, the attachments go), SIGUSR1 with an
//! SA_RESTART handler (a blocked call ends with EINTR). Blocked calls are
//! seen asleep before the script goes on, and the step that completes one
//! names it (the order of wake-ups is the order of the steps; within one
//! step completions are listed by process). After every step the driver
//! looks at every object: values, GETNCNT, GETZCNT, GETPID, IPC_STAT of
//! sets, segments and queues (times as set or not, pids as process
//! names). See `driver` for how each step's effects are made certain to be
//! over before the next, and for what is kept out because the scheduler
//! would decide it.
//!
//! `random_scripts_match_the_kernel` writes scripts with proptest
//! (IPCNS_PROCDIFF_CASES, default 2000, within IPCNS_PROCDIFF_SECS, default
//! 60; IPCNS_PROCDIFF_SEED; IPCNS_PROCDIFF_STEPS, default 28, bounds the
//! random steps after the opening) and shrinks a failing one to a minimal script,
//! printed with the two logs side by side; it prints how many scripts ran
//! and what their logs showed (blocked calls, EINTR, EIDRM, forks,
//! exits, kills, execs...). `cases` holds scripted ones.
//!
//! Fork and nattch: Linux counts a fork child's attachments inside fork(),
//! in the parent, before fork returns; ipcns counts them in the child's
//! pthread_atfork handler, so for a moment after fork() returns in the
//! parent its nattch is low (a known difference, README). The driver
//! waits until the new process says it runs (after its fork handlers)
//! before the next step looks, so that moment is not looked at here.

mod cases;
mod driver;
mod op;
mod os;
mod script;
mod serve;

use crate::support::{self, TestNs};
use proptest::test_runner::{Config, TestCaseError, TestError, TestRng, TestRunner};
use script::Step;
use serve::Ctx;
use std::cell::Cell;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a driver may take for one script.
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

/// Runs `script` in a forked driver: on the kernel (a new IPC namespace)
/// when `arena` is None, else on the ipcns arena there. The driver's pid
/// and the socket its log comes back on.
fn spawn_driver(arena: Option<&Path>, script: &[Step]) -> (i32, UnixStream) {
    let (mine, theirs) = UnixStream::pair().expect("socketpair");
    let arena = arena.map(Path::to_path_buf);
    let pid = support::fork_child(move || {
        use std::os::fd::AsRawFd;
        // Other tests' pipes stay out of the script's processes, and the
        // whole script is one process group (killed at once if stuck).
        support::keep_only_fds(&[theirs.as_raw_fd()]);
        os::own_group();
        os::ignore_children();
        let mut log = |line: String| {
            let _ = (&theirs).write_all(format!("{line}\n").as_bytes());
        };
        match &arena {
            None => match ipcns_oracle::kernel::unshare_ipc() {
                Ok(()) => drive(&Ctx::Kernel, script, &mut log),
                Err(e) => log(format!("unshare(CLONE_NEWIPC): {e:?}")),
            },
            Some(path) => match ipcns::Namespace::open_at(path) {
                Ok(ns) => drive(&Ctx::Ipcns { ns: &ns, path }, script, &mut log),
                Err(e) => log(format!("open the arena: {e}")),
            },
        };
        0
    });
    (pid, mine)
}

fn drive(ctx: &Ctx<'_>, script: &[Step], log: &mut dyn FnMut(String)) {
    match driver::Driver::new(ctx, log) {
        Ok(d) => d.run(script),
        Err(e) => log(format!("channels: {e}")),
    }
}

/// The log a driver sends, then its end (a driver still there after
/// [`SCRIPT_LIMIT`] is described, then killed with its process group).
fn collect(pid: i32, mut sock: UnixStream) -> Vec<String> {
    let _ = sock.set_read_timeout(Some(SCRIPT_LIMIT));
    let mut out = String::new();
    let _ = sock.read_to_string(&mut out);
    let mut log: Vec<String> = out.lines().map(str::to_string).collect();
    let start = Instant::now();
    let code = loop {
        if let Some(code) = support::try_wait_child(pid) {
            break code;
        }
        if start.elapsed() > Duration::from_secs(5) {
            log.push(format!("driver stuck: {}", support::doing(pid)));
            os::kill(-pid, libc::SIGKILL);
            break support::wait_child(pid);
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    if code != 0 {
        log.push(format!("driver ended with {code}"));
    }
    log
}

/// Runs `script` on both sides at once: the kernel's log and ipcns's (the
/// latter ends with the namespace's check, if it fails). Nobody reaps a
/// killed process for ipcns: the driver observes as a program does (see
/// `driver`).
pub fn run_both(script: &[Step]) -> (Vec<String>, Vec<String>) {
    // A tmpfs when there is one: a script's arena lives for milliseconds.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let t = TestNs::in_dir(&dir, "procdiff", ipcns::CreateOptions::default());
    let (kpid, ksock) = spawn_driver(None, script);
    let (ipid, isock) = spawn_driver(Some(t.path()), script);
    let (kernel, mut ours) = std::thread::scope(|sc| {
        let k = sc.spawn(|| collect(kpid, ksock));
        let i = sc.spawn(|| collect(ipid, isock));
        (k.join().unwrap_or_default(), i.join().unwrap_or_default())
    });
    let _ = t.ns.reap_exited();
    if let Err(e) = t.ns.check() {
        ours.push(format!("ns check: {e}"));
    }
    (kernel, ours)
}

/// The two logs side by side, differing lines marked `!!`.
pub fn table(kernel: &[String], ours: &[String]) -> String {
    let mut out = String::new();
    for k in 0..kernel.len().max(ours.len()) {
        let (a, b) = (kernel.get(k), ours.get(k));
        if a == b {
            out.push_str(&format!("   {}\n", a.map_or("", String::as_str)));
        } else {
            out.push_str(&format!(
                "!! kernel: {}\n!! ipcns:  {}\n",
                a.map_or("(none)", String::as_str),
                b.map_or("(none)", String::as_str)
            ));
        }
    }
    out
}

/// Runs a script on both sides; the report of a difference.
pub fn differs(script: &[Step]) -> Option<String> {
    let (kernel, ours) = run_both(script);
    tally(&kernel);
    (kernel != ours).then(|| report(script, &kernel, &ours))
}

/// What the kernel's logs of the run showed, by kind: how much of what
/// matters the scripts reached.
static SEEN: std::sync::Mutex<std::collections::BTreeMap<&'static str, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Counts the events of a log (step lines only): a line counts for a kind
/// when it holds each of the kind's patterns (and none marked `!`).
fn tally(log: &[String]) {
    const KINDS: [(&str, &[&str]); 17] = [
        ("semop blocked", &[" semop ", ": blocked"]),
        ("msgrcv blocked", &[" msgrcv ", ": blocked"]),
        ("msgsnd blocked", &[" msgsnd ", ": blocked"]),
        ("steps completing blocked calls", &["; completed"]),
        ("EINTR", &["EINTR"]),
        ("EIDRM", &["EIDRM"]),
        ("E2BIG", &["E2BIG"]),
        ("short timeouts expired", &["timeout 4 ms: EAGAIN"]),
        ("SEM_UNDO semops done", &["UNDO", "]: 0"]),
        ("forks", &[" fork: P"]),
        ("forks by a child", &[" fork: P", "!P0 fork"]),
        ("exits", &["exit: exited"]),
        ("SIGKILLs", &[": killed"]),
        ("execs", &["exec: executed"]),
        ("shm bytes read", &[": byte "]),
        ("messages received", &[" bytes ["]),
        ("skipped", &[": skipped"]),
    ];
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    for line in log.iter().filter(|l| !l.starts_with("     ")) {
        for (name, pats) in KINDS {
            let holds = |p: &&str| match p.strip_prefix('!') {
                Some(absent) => !line.contains(absent),
                None => line.contains(p),
            };
            if pats.iter().all(holds) {
                *seen.entry(name).or_default() += 1;
            }
        }
        *seen.entry("steps").or_default() += 1;
    }
}

/// A script and its two logs.
pub fn report(script: &[Step], kernel: &[String], ours: &[String]) -> String {
    format!(
        "script:\n{}logs (kernel | ipcns):\n{}",
        script::listing(script),
        table(kernel, ours)
    )
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_scripts_match_the_kernel() {
    if !support::kernel_or_skip("random_scripts_match_the_kernel") {
        return;
    }
    let cases: u32 = env_or("IPCNS_PROCDIFF_CASES", 2000);
    let seed: u64 = env_or("IPCNS_PROCDIFF_SEED", 0x0008_d1ff);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(config, rng);
    // A bound on the run's time (a slow or loaded machine runs fewer
    // scripts, and says so); a failure found is always shrunk.
    let budget = Duration::from_secs(env_or("IPCNS_PROCDIFF_SECS", 60));
    let start = Instant::now();
    let (runs, steps, left) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0usize));
    let failed = Cell::new(false);
    let longest: usize = env_or("IPCNS_PROCDIFF_STEPS", 28);
    let result = runner.run(&script::script(4..longest.max(5)), |sc| {
        if !failed.get() && start.elapsed() > budget {
            left.set(left.get() + 1);
            return Ok(());
        }
        runs.set(runs.get() + 1);
        steps.set(steps.get() + sc.len());
        match differs(&sc) {
            Some(report) => {
                failed.set(true);
                Err(TestCaseError::fail(report))
            }
            None => Ok(()),
        }
    });
    let _ = writeln!(
        std::io::stderr(),
        "procdiff: {} scripts ({} steps, seed {seed}) on the kernel and ipcns in {:.1} s{}",
        runs.get(),
        steps.get(),
        start.elapsed().as_secs_f64(),
        if left.get() > 0 {
            format!(
                "; {} more not run: IPCNS_PROCDIFF_SECS={} s spent",
                left.get(),
                budget.as_secs()
            )
        } else {
            String::new()
        }
    );
    let seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(
        std::io::stderr(),
        "procdiff: kernel logs showed {}",
        seen.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, _)) => {
            panic!("ipcns differs from the kernel; minimal failing {why}")
        }
        Err(e) => panic!("{e}"),
    }
}
