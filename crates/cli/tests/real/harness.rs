//! The two modes, and running a scenario in both: skips and their rule,
//! fresh kernel IPC namespaces, temporary directories, commands with a
//! time limit whose output cannot be held hostage by a daemon, users,
//! processes.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whether a skip is a failure (`IPCNS_REQUIRE_REAL=1`, set by CI).
pub fn require_real() -> bool {
    std::env::var("IPCNS_REQUIRE_REAL").as_deref() == Ok("1")
}

/// Prints `SKIPPED test: why`, or fails under `IPCNS_REQUIRE_REAL=1`.
pub fn skip(test: &str, why: &str) {
    if require_real() {
        panic!("{test}: IPCNS_REQUIRE_REAL=1 but {why}");
    }
    say(&format!("SKIPPED {test}: {why}"));
}

/// A line on the real stderr (not captured by the test harness), so that
/// figures and skips show in every run.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether we are root, read from /proc.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// The first of `paths` that is an executable file.
pub fn find_program(paths: &[&str]) -> Option<PathBuf> {
    paths.iter().map(PathBuf::from).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// A program by name, searched in `$PATH` and the sbin directories.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = path
        .split(':')
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"]);
    let candidates: Vec<String> = dirs
        .filter(|d| !d.is_empty())
        .map(|d| format!("{d}/{name}"))
        .collect();
    let refs: Vec<&str> = candidates.iter().map(String::as_str).collect();
    find_program(&refs)
}

/// Every program in `names`, or the reason one is missing.
pub fn need_programs(names: &[&str]) -> Result<(), String> {
    for n in names {
        if which(n).is_none() {
            return Err(format!("{n} is not installed"));
        }
    }
    Ok(())
}

/// A user of this machine.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// Looks `name` up with `id(1)` (so NSS is asked, as programs do).
    pub fn lookup(name: &str) -> Result<User, String> {
        let id = |flag: &str| -> Result<u32, String> {
            let o = Command::new("id")
                .args([flag, name])
                .output()
                .map_err(|e| format!("id: {e}"))?;
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .map_err(|_| format!("no user {name} on this machine"))
        };
        Ok(User {
            name: name.to_string(),
            uid: id("-u")?,
            gid: id("-g")?,
        })
    }
}

/// A temporary directory `ipcns-real-TAG` (mode 0755 unless chmodded),
/// removed on drop after every process still running from it has been
/// killed.
pub struct TempDir(ipcns_testkit::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(ipcns_testkit::TempDir::with_mode(
            &format!("ipcns-real-{tag}"),
            0o755,
        ))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Before the directory goes: the field drops after this.
        kill_strays(self.0.path());
    }
}

pub fn chown(p: &Path, u: &User) {
    std::os::unix::fs::chown(p, Some(u.uid), Some(u.gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

/// What a finished command left.
#[derive(Debug)]
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// Panics with the command's output unless it exited 0.
    pub fn ok(self, what: &str) -> Out {
        assert!(
            self.status.success(),
            "{what}: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }
}

/// An unnamed file for a child's output: a daemon that inherits it can
/// hold it open forever without holding us (as it would a pipe).
fn capture_file() -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(std::env::temp_dir())
        .expect("an O_TMPFILE file for a command's output")
}

fn read_back(mut f: File) -> String {
    let mut v = Vec::new();
    let _ = f.rewind();
    let _ = f.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// Runs `c` (standard input from /dev/null unless set) and waits at most
/// `limit` for it to exit; on time out kills it and panics naming `what`.
pub fn run(c: &mut Command, limit: Duration, what: &str) -> Out {
    let (out, err) = (capture_file(), capture_file());
    let mut child = c
        .stdout(Stdio::from(out.try_clone().expect("dup")))
        .stderr(Stdio::from(err.try_clone().expect("dup")))
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {c:?}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: still running after {limit:?}: {c:?}\n--- stdout\n{}\n--- stderr\n{}",
                read_back(out),
                read_back(err)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        status,
        stdout: read_back(out),
        stderr: read_back(err),
    }
}

/// Calls `f` every 50 ms until it gives a value, at most `limit`; panics
/// naming `what` after that.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` (a name: KILL, TERM...) to `pid` with kill(1).
pub fn kill(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `/proc/PID/stat` after the command name: state, ppid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Whether `pid` is a live process (a zombie is not).
pub fn alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z" && s != "X"))
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The live children of `pid`, sorted.
pub fn children(pid: u32) -> Vec<u32> {
    let mut v: Vec<u32> = pids()
        .into_iter()
        .filter(|&p| {
            alive(p)
                && stat_fields(p).and_then(|f| f.get(1).and_then(|pp| pp.parse::<u32>().ok()))
                    == Some(pid)
        })
        .collect();
    v.sort_unstable();
    v
}

/// Kills (SIGKILL) every process whose command line or working directory
/// names `dir`: what a failed scenario left running there (all of it
/// started by this test: `dir` is ours alone).
pub fn kill_strays(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let me = std::process::id();
    for _ in 0..3 {
        let mut found = false;
        for p in pids() {
            if p == me {
                continue;
            }
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{p}/cwd")).unwrap_or_default();
            let hit = cmdline.windows(needle.len()).any(|w| w == needle) || cwd.starts_with(dir);
            if hit && alive(p) {
                found = true;
                kill(p, "KILL");
            }
        }
        if !found {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `ipcns` executable under test.
pub fn ipcns_exe() -> &'static str {
    env!("CARGO_BIN_EXE_ipcns")
}

/// `libipcns.so` for `ipcns run`, or why the ipcns mode cannot run:
/// `$IPCNS_PRELOAD`, else the library built beside the `ipcns` executable
/// (`cargo build -p ipcns-preload` in the same profile, run once here so
/// that it is never stale), and `ipcns run` must exist.
pub fn ipcns_library() -> Result<PathBuf, String> {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        let help = Command::new(ipcns_exe())
            .args(["run", "--help"])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", ipcns_exe()))?;
        if !help.status.success() || !String::from_utf8_lossy(&help.stdout).contains("--strict") {
            return Err("this ipcns has no `run --strict` command yet".to_string());
        }
        if let Some(p) = ipcns_testkit::preload::from_env() {
            return Ok(p);
        }
        // TARGET/PROFILE/ipcns: build the library into the same place.
        let profile_dir = Path::new(ipcns_exe())
            .parent()
            .ok_or("the ipcns executable has no directory")?;
        ipcns_testkit::preload::build(profile_dir).map(Path::to_path_buf)
    })
    .clone()
}

/// The ipcns side of a mode: its namespace.
pub struct IpcnsNs {
    dir: TempDir,
    name: String,
    shared: bool,
    lib: PathBuf,
}

/// Where a scenario's programs get their System V IPC.
pub struct Mode {
    ipcns: Option<IpcnsNs>,
}

impl Mode {
    pub fn kernel() -> Mode {
        Mode { ipcns: None }
    }

    /// A fresh namespace `real-TAG` in a temporary `IPCNS_DIR`; `shared`:
    /// made with `--shared`, for scenarios whose programs run as several
    /// users.
    pub fn ipcns(tag: &str, shared: bool, lib: PathBuf) -> Mode {
        Mode {
            ipcns: Some(IpcnsNs {
                dir: TempDir::new(&format!("ns-{tag}")),
                name: format!("real-{tag}"),
                shared,
                lib,
            }),
        }
    }

    pub fn name(&self) -> &'static str {
        if self.ipcns.is_some() {
            "ipcns"
        } else {
            "kernel"
        }
    }

    pub fn is_ipcns(&self) -> bool {
        self.ipcns.is_some()
    }

    /// `program`, as this mode runs it: itself on the kernel; under
    /// `ipcns run --strict --no-supervisor [--shared] --ns NAME --` on
    /// ipcns, so that every call goes through `libipcns.so` (one that
    /// reaches the kernel fails with ENOSYS, and shows).
    pub fn command<S: AsRef<OsStr>>(&self, program: S) -> Command {
        self.command_as(program, false)
    }

    /// [`Mode::command`] with the supervisor serving what reaches the
    /// kernel (programs the library cannot reach: static, Go, PHP's
    /// RTLD_DEEPBIND extensions).
    pub fn command_served<S: AsRef<OsStr>>(&self, program: S) -> Command {
        self.command_as(program, true)
    }

    fn command_as<S: AsRef<OsStr>>(&self, program: S, served: bool) -> Command {
        match &self.ipcns {
            None => {
                let mut c = Command::new(program);
                c.stdin(Stdio::null());
                c
            }
            Some(ns) => {
                let mut c = Command::new(ipcns_exe());
                c.arg("run").arg("--strict");
                if !served {
                    c.arg("--no-supervisor");
                }
                if ns.shared {
                    c.arg("--shared");
                }
                c.args(["--ns", &ns.name, "--"])
                    .arg(program)
                    .env("IPCNS_DIR", ns.dir.path())
                    .env("IPCNS_PRELOAD", &ns.lib)
                    .env_remove("IPCNS")
                    .stdin(Stdio::null());
                c
            }
        }
    }

    /// `program` run as `user` (setpriv, supplementary groups cleared,
    /// HOME set to `home`), as this mode runs programs.
    pub fn as_user<S: AsRef<OsStr>>(&self, user: &User, home: &Path, program: S) -> Command {
        let mut c = self.command(which("setpriv").unwrap_or_else(|| "setpriv".into()));
        c.arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .arg("--clear-groups")
            .arg("--")
            .arg(program)
            .env("HOME", home)
            .env("USER", &user.name)
            .env("LOGNAME", &user.name);
        c
    }

    /// The namespace's objects as `ipcs ARGS` prints them: util-linux's
    /// own on the kernel, `ipcns ipcs` (the same text, read from the
    /// arena) on ipcns. Needs no help from the library.
    pub fn ipcs(&self, args: &[&str]) -> String {
        let mut c = match &self.ipcns {
            None => Command::new("ipcs"),
            Some(ns) => {
                let mut c = Command::new(ipcns_exe());
                c.arg("ipcs")
                    .env("IPCNS_DIR", ns.dir.path())
                    .env("IPCNS", &ns.name);
                c
            }
        };
        c.args(args).env("LC_ALL", "C").stdin(Stdio::null());
        run(&mut c, Duration::from_secs(20), "ipcs")
            .ok(&format!("{} ipcs {args:?}", self.name()))
            .stdout
    }

    /// After an ipcns run: `ipcns ns check` must find the namespace
    /// consistent, and the kernel's namespace (this thread's fresh one)
    /// must hold no object: nothing reached the kernel.
    fn after_ipcns(&self, test: &str) {
        let Some(ns) = &self.ipcns else { return };
        let mut c = Command::new(ipcns_exe());
        c.args(["ns", "check"])
            .env("IPCNS_DIR", ns.dir.path())
            .env("IPCNS", &ns.name);
        let out = run(&mut c, Duration::from_secs(30), "ipcns ns check");
        assert!(
            out.status.success() && out.stdout.starts_with("ok:"),
            "{test}: ipcns ns check after the run: {}\n{}{}",
            out.status,
            out.stdout,
            out.stderr
        );
        let kernel = run(
            Command::new("ipcs").env("LC_ALL", "C"),
            Duration::from_secs(20),
            "ipcs",
        )
        .ok("ipcs of the kernel namespace");
        let t = crate::ipcs::Tables::parse(&kernel.stdout);
        assert!(
            t.is_empty(),
            "{test}: objects reached the kernel's IPC namespace under ipcns run --strict:\n{}",
            kernel.stdout
        );
    }
}

/// Runs `f` on a new thread that entered a fresh kernel IPC namespace
/// (`unshare(CLONE_NEWIPC)` changes the calling thread only; the programs
/// it starts inherit it). `Err` if that is impossible.
fn in_fresh_ipc_ns<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            ipcns_oracle::kernel::unshare_ipc()
                .map_err(|e| format!("unshare(CLONE_NEWIPC): {e:?}"))?;
            Ok(f())
        });
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Runs scenario `test` in both modes: `setup` says what it needs (an
/// `Err` is a skip: the reason), `body` runs it in one mode and returns
/// its figures for the `real:` line. `shared`: the ipcns namespace is
/// used by several users.
pub fn both<S: Sync>(
    test: &str,
    shared: bool,
    setup: impl FnOnce() -> Result<S, String>,
    body: impl Fn(&Mode, &S) -> String + Sync,
) {
    if !is_root() {
        skip(
            test,
            "these scenarios run programs as other users: they need root",
        );
        return;
    }
    let s = match setup() {
        Ok(s) => s,
        Err(why) => {
            skip(test, &why);
            return;
        }
    };
    let once = |m: &Mode| {
        let t0 = Instant::now();
        let figures = body(m, &s);
        m.after_ipcns(test);
        say(&format!(
            "real: {test} [{}]: ok in {:.1} s: {figures}",
            m.name(),
            t0.elapsed().as_secs_f64()
        ));
    };
    if let Err(why) = in_fresh_ipc_ns(|| once(&Mode::kernel())) {
        skip(test, &why);
        return;
    }
    match ipcns_library() {
        Err(why) => skip(&format!("{test} [ipcns]"), &why),
        Ok(lib) => {
            let tag = test.replace('_', "-");
            in_fresh_ipc_ns(|| once(&Mode::ipcns(&tag, shared, lib)))
                .unwrap_or_else(|why| panic!("{test} [ipcns]: {why}"));
        }
    }
}
