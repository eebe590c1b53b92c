//! Building the library and the C programs, running them on the kernel and
//! through the library, comparing.

use ipcns_testkit::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `target/<profile>/libipcns.so`, built once per test process by cargo
/// with the profile and target directory of this test binary.
pub fn lib() -> &'static Path {
    // This binary is <target>/<profile dir>/deps/<name>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("profile directory");
    ipcns_testkit::preload::build(profile_dir).unwrap_or_else(|e| panic!("{e}"))
}

/// Why kernel runs cannot be made here, if they cannot.
fn kernel_missing() -> Option<String> {
    if std::env::var_os("IPCNS_SKIP_KERNEL").is_some() {
        return Some("IPCNS_SKIP_KERNEL is set".to_string());
    }
    if !is_root() {
        return Some("unshare --ipc needs root".to_string());
    }
    match Command::new("unshare").args(["--ipc", "true"]).status() {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("unshare --ipc true: {s}")),
        Err(e) => Some(format!("unshare: {e}")),
    }
}

/// Whether the kernel runs happen; prints why not (and fails with
/// IPCNS_REQUIRE_KERNEL=1).
pub fn kernel_or_skip(test: &str) -> bool {
    match kernel_missing() {
        None => true,
        Some(why) => {
            skip(test, &why);
            false
        }
    }
}

/// Prints `SKIPPED test: why` (past the harness's capture), or fails the
/// test when IPCNS_REQUIRE_KERNEL=1.
pub fn skip(test: &str, why: &str) {
    if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
        panic!("{test}: IPCNS_REQUIRE_KERNEL=1 but {why}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Whether this process runs as root (uid 0 in /proc/self/status).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

/// A private scratch directory (an `IPCNS_DIR`, the built programs),
/// removed on drop.
pub fn scratch(tag: &str) -> TempDir {
    TempDir::new(&format!("ipcns-preload-{tag}"))
}

/// The C compiler: `$CC`, else gcc.
fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "gcc".to_string())
}

/// Whether a C compiler is there; prints why not (a failure with
/// IPCNS_REQUIRE_KERNEL=1, as CI installs gcc).
pub fn cc_or_skip(test: &str) -> bool {
    match Command::new(cc()).arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            skip(test, &format!("no C compiler ({}): install gcc", cc()));
            false
        }
    }
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// Compiles `tests/c/NAME.c` into `dir` (with `extra` flags); its path.
pub fn compile(name: &str, dir: &Path, extra: &[&str]) -> PathBuf {
    let src = sources().join(format!("{name}.c"));
    let out = dir.join(name);
    let o = Command::new(cc())
        .args(["-O1", "-Wall", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "{} {}:\n{}",
        cc(),
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The text of a child's output.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `unshare --ipc PROG`: the program on the kernel, in a fresh IPC
/// namespace.
pub fn on_kernel(prog: &Path) -> Output {
    Command::new("unshare")
        .arg("--ipc")
        .arg(prog)
        .stdin(Stdio::null())
        .output()
        .expect("run unshare")
}

/// What separates a program's output from the /proc/sysvipc dump after it.
pub const DUMP: &str = "@@ /proc/sysvipc after the run";

/// The program through the library on namespace `name` in `dir`
/// (`LD_PRELOAD`, `IPCNS_DIR`, `IPCNS`, and `env`). With `fresh`, inside
/// `unshare --ipc`, followed by [`DUMP`] and the three /proc/sysvipc files
/// of that IPC namespace (read without the library, which would show its
/// own).
pub fn through_lib(
    prog: &Path,
    dir: &Path,
    name: &str,
    env: &[(&str, &str)],
    fresh: bool,
) -> Output {
    let mut c = if fresh {
        // The library is preloaded inside the new IPC namespace only: in
        // `unshare` itself it would serve the unshare (a fresh ipcns
        // namespace, the kernel's left as it was).
        let mut c = Command::new("unshare");
        c.arg("--ipc")
            .arg("env")
            .arg(format!("LD_PRELOAD={}", lib().display()))
            .args(["sh", "-c"])
            .arg(format!(
                "\"$0\"; s=$?; echo '{DUMP}'; env -u LD_PRELOAD cat /proc/sysvipc/sem /proc/sysvipc/msg /proc/sysvipc/shm; exit $s"
            ))
            .arg(prog);
        c
    } else {
        Command::new(prog)
    };
    if !fresh {
        c.env("LD_PRELOAD", lib());
    }
    c.env("IPCNS_DIR", dir)
        .env("IPCNS", name)
        .env_remove("IPCNS_FD")
        .env_remove("IPCNS_SHARED")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run the program")
}

/// Splits a fresh-namespace run's output into the program's lines and the
/// /proc/sysvipc lines after it.
pub fn split_dump(out: &str) -> (String, Vec<String>) {
    match out.split_once(&format!("{DUMP}\n")) {
        Some((prog, dump)) => (prog.to_string(), dump.lines().map(str::to_string).collect()),
        None => (out.to_string(), Vec::new()),
    }
}

/// Asserts that two programs' outputs are the same line by line, naming
/// the first line that differs.
pub fn same_lines(test: &str, kernel: &str, ours: &str) {
    let (k, o): (Vec<&str>, Vec<&str>) = (kernel.lines().collect(), ours.lines().collect());
    for (i, (a, b)) in k.iter().zip(&o).enumerate() {
        assert_eq!(
            a,
            b,
            "{test}: line {} differs\nkernel:\n{kernel}\nlibipcns.so:\n{ours}",
            i + 1
        );
    }
    assert_eq!(
        k.len(),
        o.len(),
        "{test}: {} lines on the kernel, {} through libipcns.so\nkernel:\n{kernel}\nlibipcns.so:\n{ours}",
        k.len(),
        o.len()
    );
}
