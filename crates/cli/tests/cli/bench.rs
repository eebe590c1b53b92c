//! `ipcns bench ARGS`: the command runs the `ipcns-bench` executable in
//! its place (exec: same process, its output and exit status), the one
//! beside the running `ipcns` first, else the one on PATH, and says how to
//! build it when there is none. The benchmarks themselves are tested with
//! their crate (crates/bench/tests); here `ipcns-bench` is a script that
//! shows what it was given.

use crate::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A directory of its own under cargo's test scratch space (the target
/// directory's filesystem, so the command under test can be linked into
/// it), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("bench-exec-{tag}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }

    /// A sub-directory, created.
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir_all(&d).expect("create a scratch sub-directory");
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `ipcns` under test, linked (or copied) into `dir`: its
/// `current_exe` is then `dir/ipcns`.
fn ipcns_in(dir: &Path) -> PathBuf {
    let exe = dir.join("ipcns");
    let built = env!("CARGO_BIN_EXE_ipcns");
    if std::fs::hard_link(built, &exe).is_err() {
        std::fs::copy(built, &exe).expect("copy ipcns");
    }
    exe
}

/// An `ipcns-bench` in `dir` that prints its pid and its arguments, one a
/// line, says `from WHO` on standard error and exits with `code`.
fn fake_bench(dir: &Path, who: &str, code: u8) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("ipcns-bench");
    let script = format!(
        "#!/bin/sh\necho \"pid $$\"\nprintf '%s\\n' \"$@\"\necho 'from {who}' >&2\nexit {code}\n"
    );
    std::fs::write(&path, script).expect("write the fake ipcns-bench");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("make the fake ipcns-bench executable");
}

/// Runs `exe ARGS` with `path` as PATH; the output and the pid it ran as.
/// A script written a moment ago can be busy (ETXTBSY) while another
/// test's fork still holds its descriptor: that run is tried again.
fn run(exe: &Path, args: &[&str], path: &Path) -> (Output, u32) {
    for _ in 0..100 {
        let child = Command::new(exe)
            .args(args)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ipcns");
        let pid = child.id();
        let out = child.wait_with_output().expect("wait for ipcns");
        if !text(&out.stderr).contains("Text file busy") {
            return (out, pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("ipcns-bench stayed busy (ETXTBSY)");
}

/// The arguments reach `ipcns-bench` as given, in the same process; its
/// output and exit status are the command's. The one beside `ipcns` wins
/// over the one on PATH.
#[test]
fn bench_execs_the_executable_beside_ipcns() {
    let s = Scratch::new("beside");
    let bin = s.dir("bin");
    let on_path = s.dir("path");
    let ipcns = ipcns_in(&bin);
    fake_bench(&bin, "beside", 7);
    fake_bench(&on_path, "path", 9);
    let (o, pid) = run(
        &ipcns,
        &["bench", "semget", "--json", "two words"],
        &on_path,
    );
    assert_eq!(o.status.code(), Some(7), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        format!("pid {pid}\nsemget\n--json\ntwo words\n")
    );
    assert_eq!(text(&o.stderr), "from beside\n");
}

#[test]
fn bench_execs_the_executable_on_path_when_none_is_beside() {
    let s = Scratch::new("path");
    let bin = s.dir("bin");
    let on_path = s.dir("path");
    let ipcns = ipcns_in(&bin);
    fake_bench(&on_path, "path", 9);
    let (o, pid) = run(&ipcns, &["bench", "lock"], &on_path);
    assert_eq!(o.status.code(), Some(9), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("pid {pid}\nlock\n"));
    assert_eq!(text(&o.stderr), "from path\n");
}

/// Without `ipcns-bench` anywhere: an error saying where it was looked for
/// and how to build it, exit 1 as any usage error of the command; the help
/// and the usage are still printed (the command has them).
#[test]
fn bench_without_the_executable_says_how_to_build_it() {
    let s = Scratch::new("none");
    let bin = s.dir("bin");
    let empty = s.dir("empty");
    let ipcns = ipcns_in(&bin);
    let (o, _) = run(&ipcns, &["bench", "semget", "--json"], &empty);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert_eq!(
        text(&o.stderr),
        format!(
            "ipcns: bench needs the ipcns-bench executable beside ipcns ({}) or on PATH: \
             cargo build --release -p ipcns-bench\n",
            bin.display()
        )
    );
    // A benchmark's help is its own paragraph; the whole list without one.
    let (help, _) = run(&ipcns, &["bench", "semget", "--help"], &empty);
    assert!(help.status.success(), "{}", text(&help.stderr));
    assert_eq!(
        text(&help.stdout),
        "usage: ipcns bench semget [--json] [--goals] [--plot FILE.svg]\n  \
         semget  semget creation and lookup: ipcns beside the kernel\n\
         --json  prints the results as one line of JSON, the goals included.\n\
         --goals ends the table with the goals the figures are held to, each\n        \
         MET or NOT MET.\n\
         --plot FILE.svg\n        \
         also draws ipcns beside the kernel into FILE.svg (msg, semget\n        \
         and semop only).\n"
    );
    // A benchmark that draws nothing has no --plot.
    let (help, _) = run(&ipcns, &["bench", "lock", "--help"], &empty);
    let help = text(&help.stdout);
    assert!(
        help.starts_with("usage: ipcns bench lock [--json] [--goals]\n  lock    "),
        "{help}"
    );
    assert!(help.ends_with("each\n        MET or NOT MET.\n"), "{help}");
    assert!(!help.contains("--plot"), "{help}");
    let (all, _) = run(&ipcns, &["bench", "--help"], &empty);
    let (topic, _) = run(&ipcns, &["help", "bench"], &empty);
    assert_eq!(text(&all.stdout), text(&topic.stdout));
    assert!(text(&all.stdout).starts_with("usage: ipcns bench contend|fork|idmap|lock|"));
    let (usage, _) = run(&ipcns, &["bench"], &empty);
    assert_eq!(usage.status.code(), Some(1));
    assert_eq!(
        text(&usage.stderr),
        "ipcns: bench: no benchmark named\nTry 'ipcns bench --help' for more information.\n"
    );
}
