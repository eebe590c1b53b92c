//! Adversarial C programs (`crates/cli/tests/c`) that broke ipcns once,
//! kept as regression tests: SIGKILL storms on SEM_UNDO holders and
//! waiters, thousands of short-lived processes, `exit` and `execve` while
//! other threads are inside IPC calls.
//!
//! Each program checks itself as programs do (right after `waitpid`, never
//! waiting for ipcns to settle), prints one line of `key=value` figures
//! and exits 0 when every check held. It runs twice: on the kernel in a
//! fresh IPC namespace (`unshare --ipc`, as root: this proves the scenario
//! and its checks), and under `ipcns run --strict --private --keep` with
//! the real `libipcns.so`, after which the kept namespace must pass
//! `ipcns ns check`. Both lines go to stderr, so that a CI log shows the
//! figures. Without root a test says `SKIPPED` (a failure under
//! `IPCNS_REQUIRE_KERNEL=1`).
//!
//! The library is the release build (one is made with cargo if
//! `$IPCNS_PRELOAD` does not name one): the speed of the library as it is
//! used is part of what is tested. The tests take a lock so that they run
//! one at a time (each keeps both cpus busy), about 30 s together on a busy
//! 2-cpu machine (and a release build of the library once, which CI makes
//! anyway); `IPCNS_ADVERSARY_SCALE=N` multiplies their work by N (5: 5,000
//! kills per storm, 10,000 short-lived processes).

mod kills;
mod threads;

use crate::kernel::{is_root, skip};
use crate::{TempDir, text};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The C sources, by program name.
const SOURCES: &[(&str, &str)] = &[
    ("storm", include_str!("../../c/storm.c")),
    ("many", include_str!("../../c/many.c")),
    ("exitrace", include_str!("../../c/exitrace.c")),
    ("execrace", include_str!("../../c/execrace.c")),
    ("execsleeper", include_str!("../../c/execsleeper.c")),
];

/// `IPCNS_ADVERSARY_SCALE` (default 1).
pub fn scale() -> u64 {
    match std::env::var("IPCNS_ADVERSARY_SCALE") {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("IPCNS_ADVERSARY_SCALE={s:?} is not a whole number >= 1")),
        Err(_) => 1,
    }
}

/// A line on the real stderr (not captured by the test harness).
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// One adversary at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `libipcns.so` as programs use it: `$IPCNS_PRELOAD` if set, else the
/// release build, made by cargo (once per test process) in the target
/// directory of the `ipcns` under test.
fn library() -> PathBuf {
    if let Some(p) = ipcns_testkit::preload::from_env() {
        return p;
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_ipcns"));
    let target = exe
        .parent()
        .and_then(Path::parent)
        .expect("the ipcns executable is in TARGET/PROFILE");
    ipcns_testkit::preload::build(&target.join("release"))
        .unwrap_or_else(|e| panic!("{e}"))
        .to_path_buf()
}

/// A test's programs, compiled into a temporary directory that is also
/// the `IPCNS_DIR` of its namespaces; `None` after reporting a skip.
pub struct Setup {
    dir: TempDir,
    lib: PathBuf,
    _serial: MutexGuard<'static, ()>,
}

impl Setup {
    pub fn new(test: &str, programs: &[&str]) -> Option<Setup> {
        if !is_root() {
            skip(
                test,
                "needs root for the kernel side (unshare --ipc, a fresh IPC namespace)",
            );
            return None;
        }
        let serial = serial();
        let dir = TempDir::new(&format!("adversary-{}", programs[0]));
        for name in programs {
            let src = SOURCES
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no C source {name}"))
                .1;
            let c = dir.path().join(format!("{name}.c"));
            std::fs::write(&c, src).unwrap();
            let r = Command::new("cc")
                .args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o"])
                .arg(dir.path().join(name))
                .arg(&c)
                .output()
                .expect("run cc (install gcc)");
            assert!(r.status.success(), "cc {name}.c: {}", text(&r.stderr));
        }
        Some(Setup {
            dir,
            lib: library(),
            _serial: serial,
        })
    }

    /// The path of a compiled program.
    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `PROGRAM ARGS` on the kernel, in a fresh IPC namespace.
    pub fn kernel(
        &self,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> Outcome {
        let mut c = Command::new("unshare");
        c.args(["--ipc", "--"])
            .arg(self.program(program))
            .args(args);
        self.prepare(&mut c, env);
        let (status, stdout, stderr, wall) = run_group(&mut c, limit);
        Outcome {
            side: "kernel",
            status,
            stdout,
            stderr,
            wall,
            check: None,
        }
    }

    /// `PROGRAM ARGS` under `ipcns run --strict --private --keep`, then
    /// `ipcns ns check` of the kept namespace.
    pub fn ipcns(
        &self,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> Outcome {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        c.args(["run", "--strict", "--private", "--keep", "--"])
            .arg(self.program(program))
            .args(args);
        self.prepare(&mut c, env);
        c.env("IPCNS_DIR", self.dir.path())
            .env("IPCNS_PRELOAD", &self.lib);
        let (status, stdout, stderr, wall) = run_group(&mut c, limit);
        let kept = stderr
            .lines()
            .find_map(|l| l.strip_prefix("ipcns: run: kept namespace "))
            .and_then(|l| l.split(' ').next())
            .map(str::to_string);
        let check = Some(match kept {
            None => "no namespace kept (ipcns run did not end)".to_string(),
            Some(name) => {
                let mut c = self.dir.command(&["ns", "check", &name]);
                let (st, out, err, _) = run_group(&mut c, Duration::from_secs(30));
                match st {
                    None => format!("ns check {name}: no answer within 30 s"),
                    Some(st) if st.success() && out.starts_with("ok") => out.trim().to_string(),
                    Some(st) => format!("ns check {name}: {st}: {}{}", out.trim(), err.trim()),
                }
            }
        });
        Outcome {
            side: "ipcns",
            status,
            stdout,
            stderr,
            wall,
            check,
        }
    }

    /// The environment both sides share: the directory as the working
    /// directory, nothing of the caller's ipcns or preloads.
    fn prepare(&self, c: &mut Command, env: &[(&str, &str)]) {
        c.current_dir(self.dir.path())
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_SHARED")
            .env("LC_ALL", "C");
        for (k, v) in env {
            c.env(k, v);
        }
    }
}

/// Runs `c` in a process group of its own; past `limit` the whole group is
/// killed (`None` then), so that no program or worker outlives the test.
fn run_group(c: &mut Command, limit: Duration) -> (Option<ExitStatus>, String, String, Duration) {
    use std::io::Read;
    let started = Instant::now();
    let mut child = c
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the program");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = started + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for the program") {
            break Some(st);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    // Whatever of the group is left (all of it after a timeout; workers a
    // broken program left behind otherwise).
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    if status.is_none() {
        let _ = child.wait();
    }
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    (status, text(&out), text(&err), wall)
}

/// A run of a program on one side.
pub struct Outcome {
    pub side: &'static str,
    /// `None`: killed at the time limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// ipcns: what `ipcns ns check` said ("ok: ..." when consistent).
    pub check: Option<String>,
}

impl Outcome {
    /// The figures: the last line of standard output, as key=value pairs.
    pub fn figures(&self) -> BTreeMap<&str, &str> {
        self.line()
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect()
    }

    /// The last line of standard output.
    pub fn line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }

    /// Figure `key` as a number; panics with the whole outcome if missing.
    pub fn num(&self, key: &str) -> f64 {
        self.figures()
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number {key} in the {} run:\n{self}", self.side))
    }

    /// Prints the run's figures: `adversary: WHAT [SIDE] S s: LINE` (and
    /// the check).
    pub fn show(&self, what: &str) {
        let status = match self.status {
            None => "KILLED at the time limit".to_string(),
            Some(st) if st.success() => "ok".to_string(),
            Some(st) => format!("FAILED ({st})"),
        };
        let check = self
            .check
            .as_deref()
            .map_or(String::new(), |c| format!(" | check: {c}"));
        say(&format!(
            "adversary: {what} [{}] {status} in {:.2} s: {}{check}",
            self.side,
            self.wall.as_secs_f64(),
            self.line()
        ));
    }

    /// The program's own checks held (exit status 0) and, for ipcns, the
    /// kept namespace is consistent.
    pub fn assert_ok(&self, what: &str) {
        assert!(
            self.status.is_some_and(|s| s.success()),
            "{what} [{}]: the program's checks failed:\n{self}",
            self.side
        );
        if let Some(c) = &self.check {
            assert!(
                c.starts_with("ok"),
                "{what} [{}]: ns check: {c}\n{self}",
                self.side
            );
        }
    }

    /// Figure `key` is `want`.
    pub fn assert_figure(&self, what: &str, key: &str, want: &str) {
        assert!(
            self.status.is_some(),
            "{what} [{}]: did not end within the time limit\n{self}",
            self.side
        );
        assert_eq!(
            self.figures().get(key).copied(),
            Some(want),
            "{what} [{}]: {key}\n{self}",
            self.side
        );
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail: Vec<&str> = self.stderr.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        writeln!(
            f,
            "  status: {}, {:.2} s",
            self.status
                .map_or("killed at the time limit".to_string(), |s| s.to_string()),
            self.wall.as_secs_f64()
        )?;
        writeln!(f, "  stdout: {}", self.stdout.trim_end())?;
        if let Some(c) = &self.check {
            writeln!(f, "  ns check: {c}")?;
        }
        write!(f, "  stderr (last 30 lines):\n    {}", tail.join("\n    "))
    }
}
