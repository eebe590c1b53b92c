//! The kernel as the oracle: a thread that entered a fresh IPC namespace
//! (`unshare(CLONE_NEWIPC)` changes only the calling thread, and the
//! programs it starts inherit it) runs the real util-linux tools there,
//! beside `ipcns` on a fresh namespace in a temporary `IPCNS_DIR`, and the
//! two outputs are compared byte for byte.

use crate::TempDir;
use ipcns::{CreateOptions, Namespace};
use ipcns_oracle::sysv::{NsCaller, SysV};
use std::io::Write;
use std::process::{Command, Output};

/// Prints `SKIPPED test: why` (or panics under IPCNS_REQUIRE_KERNEL=1).
pub fn skip(test: &str, why: &str) {
    if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
        panic!("{test}: IPCNS_REQUIRE_KERNEL=1 but {why}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Whether we are root, read from /proc (no unsafe `geteuid` needed).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap_or(false)
}

/// Runs `f` on a new thread inside a fresh kernel IPC namespace; `None`
/// (after reporting the skip) where that or the util-linux tools are
/// unavailable. A panic in `f` fails the test.
pub fn in_fresh_ipc_ns<T: Send>(test: &str, f: impl FnOnce() -> T + Send) -> Option<T> {
    if Command::new("ipcs").arg("-V").output().is_err() {
        skip(test, "util-linux ipcs is not installed");
        return None;
    }
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            ipcns_oracle::kernel::unshare_ipc().ok()?;
            Some(f())
        });
        match h.join() {
            Ok(Some(v)) => Some(v),
            Ok(None) => {
                skip(test, "unshare(CLONE_NEWIPC) failed: these tests need root");
                None
            }
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// The whole seconds of the clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Waits, when needed, until at least 100 ms into a second with 400 ms of it
/// left, and returns that second. The kernel stamps objects with the
/// tick-granular `ktime_get_real_seconds()`, which can lag the clock by a
/// tick (more on an idle tickless cpu) just after a second begins.
pub fn settled_second() -> u64 {
    loop {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let ms = d.subsec_millis();
        if (100..600).contains(&ms) {
            return d.as_secs();
        }
        let wait = if ms < 100 { 100 - ms } else { 1100 - ms };
        std::thread::sleep(std::time::Duration::from_millis(u64::from(wait)));
    }
}

/// Runs `attempt` in fresh namespaces until it reports that its objects
/// were all made within one second (so that times print alike), at most
/// five times.
pub fn same_second(test: &str, attempt: impl Fn() -> bool + Sync) {
    for _ in 0..5 {
        match in_fresh_ipc_ns(test, &attempt) {
            None | Some(true) => return,
            Some(false) => continue,
        }
    }
    panic!("{test}: could not create the objects within one second");
}

/// An ipcns namespace in its own temporary directory, removed on drop.
pub struct Ns {
    /// Dropped (removed) first, before the namespace is.
    pub dir: TempDir,
    pub name: String,
    pub ns: Namespace,
}

impl Ns {
    pub fn new() -> Ns {
        Ns::with(CreateOptions::default())
    }

    pub fn with(opts: CreateOptions) -> Ns {
        let dir = TempDir::new("test");
        let name = "t".to_string();
        let ns = Namespace::create_at(&dir.path().join(format!("ipcns.{name}")), opts)
            .expect("create the test namespace");
        Ns { dir, name, ns }
    }

    /// The namespace as this (root) test process sees it.
    pub fn caller(&self) -> NsCaller<'_> {
        NsCaller {
            ns: &self.ns,
            cred: (*self.ns.cred().expect("credentials")).clone(),
        }
    }

    /// `ipcns TOOL --ns NAME ARGS` on this namespace.
    pub fn ours(&self, tool: &str, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        c.arg(tool).arg("--ns").arg(&self.name).args(args);
        c.env("IPCNS_DIR", self.dir.path());
        env(&mut c).output().expect("run ipcns")
    }

    /// `check`, both sides run as `uid`:`uid` without supplementary groups
    /// or capabilities (through util-linux `setpriv`).
    pub fn check_as(&self, uid: u32, tool: &str, args: &[&str]) -> Output {
        let ids = [
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".to_string(),
            "--".to_string(),
        ];
        let mut r = Command::new("setpriv");
        r.args(&ids).arg(tool).args(args);
        let real = env(&mut r).output().expect("run setpriv");
        let mut o = Command::new("setpriv");
        o.args(&ids)
            .arg(env!("CARGO_BIN_EXE_ipcns"))
            .arg(tool)
            .arg("--ns")
            .arg(&self.name)
            .args(args)
            .env("IPCNS_DIR", self.dir.path())
            .env("IPCNS_SHARED", "1");
        let ours = env(&mut o).output().expect("run setpriv");
        same(
            &format!("(uid {uid}) {tool} {}", args.join(" ")),
            &real,
            &ours,
        );
        ours
    }

    /// The real tool and ours on the same arguments: identical standard
    /// output, standard error and exit status.
    pub fn check(&self, tool: &str, args: &[&str]) -> Output {
        self.check_tz("UTC", tool, args)
    }

    /// `check` with this `TZ`.
    pub fn check_tz(&self, tz: &str, tool: &str, args: &[&str]) -> Output {
        let mut r = Command::new(tool);
        r.args(args);
        let real = env(&mut r)
            .env("TZ", tz)
            .output()
            .expect("run the util-linux tool");
        let mut o = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        o.arg(tool).arg("--ns").arg(&self.name).args(args);
        o.env("IPCNS_DIR", self.dir.path());
        let ours = env(&mut o).env("TZ", tz).output().expect("run ipcns");
        same(&format!("TZ={tz} {tool} {}", args.join(" ")), &real, &ours);
        ours
    }
}

impl Ns {
    /// [`Ns::check`] with arguments given as bytes (not necessarily UTF-8).
    pub fn check_bytes(&self, tool: &str, args: &[&[u8]]) -> Output {
        use std::os::unix::ffi::OsStrExt;
        let args: Vec<&std::ffi::OsStr> = args
            .iter()
            .map(|a| std::ffi::OsStr::from_bytes(a))
            .collect();
        let mut r = Command::new(tool);
        r.args(&args);
        let real = env(&mut r).output().expect("run the util-linux tool");
        let mut o = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        o.arg(tool).arg("--ns").arg(&self.name).args(&args);
        o.env("IPCNS_DIR", self.dir.path());
        let ours = env(&mut o).output().expect("run ipcns");
        let shown: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        same(&format!("{tool} {}", shown.join(" ")), &real, &ours);
        ours
    }
}

/// The environment both sides run in: C locale (util-linux is translated),
/// UTC.
fn env(c: &mut Command) -> &mut Command {
    c.env("LC_ALL", "C").env("TZ", "UTC").env_remove("IPCNS")
}

/// The real util-linux `tool ARGS` on the calling thread's IPC namespace.
pub fn real(tool: &str, args: &[&str]) -> Output {
    let mut c = Command::new(tool);
    c.args(args);
    env(&mut c).output().expect("run the util-linux tool")
}

/// Asserts two runs printed and returned the same.
pub fn same(what: &str, real: &Output, ours: &Output) {
    let t = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert_eq!(
        t(&real.stdout),
        t(&ours.stdout),
        "{what}: standard output differs (left: util-linux on the kernel, right: ipcns)"
    );
    assert_eq!(
        t(&real.stderr),
        t(&ours.stderr),
        "{what}: standard error differs (left: util-linux, right: ipcns)"
    );
    assert_eq!(
        real.status.code(),
        ours.status.code(),
        "{what}: exit status differs (left: util-linux, right: ipcns)"
    );
    // Byte for byte too: arguments that are not UTF-8 are quoted as given.
    assert!(
        real.stdout == ours.stdout && real.stderr == ours.stderr,
        "{what}: output differs in bytes that are not UTF-8"
    );
}

/// Runs `op` on the kernel and on the namespace and asserts the same
/// result (value or errno).
pub fn both<T: PartialEq + std::fmt::Debug>(ns: &Ns, what: &str, op: impl Fn(&dyn SysV) -> T) -> T {
    let k = op(&ipcns_oracle::kernel::Host);
    let n = op(&ns.caller());
    assert_eq!(k, n, "{what}: kernel (left) and ipcns (right) differ");
    k
}
