//! Programs the LD_PRELOAD library cannot serve: statically linked ones
//! (`gcc -static`, `musl-gcc -static`) and musl's dynamic ones make the
//! kernel's System V IPC system calls themselves; `ipcns run --strict`
//! is to serve them (a seccomp supervisor).
//!
//! `tests/c/sysv12.c` makes all twelve calls through the scenarios that
//! involve the kernel's bookkeeping of processes (fork, exec, exit,
//! SIGKILL, signals, blocking and waking) and prints a transcript with
//! nothing in it that differs between two faithful runs: pids, times and
//! addresses are printed as relations by the program itself, so the
//! comparison here takes the lines as they are, ignoring none. Each build
//! runs on the kernel in a fresh IPC namespace (`unshare --ipc`: root) and
//! under `ipcns run --strict --private --shared` (shared: a child of the
//! program runs as uid 65534, which only a shared namespace serves; see
//! `run::a_shared_namespace_serves_descendants_running_as_another_user`),
//! and the transcripts must be equal line for line; a mismatch shows a
//! diff. The kernel's run must also have gone through, with the facts
//! listed in [`KERNEL_FACTS`]. Without root a test says `SKIPPED` (a
//! failure under `IPCNS_REQUIRE_KERNEL=1`): there is nothing to compare
//! with.
//!
//! The same program built dynamically with glibc, which the library
//! serves, gives the kernel's transcript too: the control that shows the
//! transcript asks nothing ipcns does not do.

use crate::kernel::{is_root, skip};
use crate::{TempDir, output_within, text};
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The program (see its header).
const SOURCE: &str = include_str!("../c/sysv12.c");

/// Lines the kernel's transcript of the whole program holds: the
/// scenarios reached the point they are about.
const KERNEL_FACTS: &[&str] = &[
    "sem: semtimedop(sem 0 -1, 100 ms) = -1 EAGAIN, after 100 ms or more: yes",
    "sem.undo-exit: sem 1: GETVAL 0 GETPID child GETNCNT 0 GETZCNT 0",
    "sem.undo-exec exec'd: sem 2: GETVAL 1 GETPID me GETNCNT 0 GETZCNT 0",
    "sem.undo-sigkill: holder: killed by SIGKILL",
    "sem.undo-sigkill: sem 0: GETVAL 1 GETPID holder GETNCNT 0 GETZCNT 0",
    "sem.undo-sigkill-wakes: waiter: exit 0",
    "sem.eintr child: semop(sem 0 -1) = -1 EINTR, the handler ran: yes",
    "sem.eintr-sa_restart child: semop(sem 0 -1) = -1 EINTR, the handler ran: yes",
    "sem.eidrm child: semop(sem 0 -1) = -1 EIDRM",
    "msg.blocked-receive child: msgrcv(type 5) = 8: type 5 text \"wake up\"",
    "msg.eidrm child: msgrcv(any type) = -1 EIDRM",
    "shm: shmat(unaligned, 0) = -1 EINVAL",
    "shm: shmat(unaligned, SHM_RND|SHM_REMAP) = the address asked",
    "shm.fork: reads \"written by the child\" \"middle\"",
    "shm.rdonly child: write faulted",
    "shm.exec child: nattch 5",
    "shm.exec exec'd: shmctl(0, IPC_STAT) = 0: key 0 mode 600 segsz 10000 nattch 2 \
     cpid parent lpid me atime now dtime now ctime now",
    "deny uid 65534: semop = -1 EACCES",
    "end: ran through",
];

/// How long a side may take (the program's own watchdog ends it in 30 s).
const LIMIT: Duration = Duration::from_secs(60);

/// One way of building the program.
struct Build {
    /// As the messages name it.
    name: &'static str,
    compiler: &'static str,
    flags: &'static [&'static str],
}

const GCC_STATIC: Build = Build {
    name: "gcc -static",
    compiler: "gcc",
    flags: &["-static"],
};
const GCC_DYNAMIC: Build = Build {
    name: "gcc",
    compiler: "gcc",
    flags: &[],
};
const MUSL_DYNAMIC: Build = Build {
    name: "musl-gcc",
    compiler: "musl-gcc",
    flags: &[],
};
const MUSL_STATIC: Build = Build {
    name: "musl-gcc -static",
    compiler: "musl-gcc",
    flags: &["-static"],
};

/// Whether `program` is on PATH.
fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(program).is_file())
}

/// A test's directory (the programs, and `IPCNS_DIR` of the ipcns side)
/// and the library; `None` after reporting a skip.
struct Sides {
    dir: TempDir,
    lib: PathBuf,
}

impl Sides {
    fn new(test: &str) -> Option<Sides> {
        if !is_root() {
            skip(
                test,
                "needs root for the kernel side (unshare --ipc, a fresh IPC namespace)",
            );
            return None;
        }
        if !on_path("unshare") {
            skip(test, "util-linux unshare is not installed");
            return None;
        }
        let dir = TempDir::new(&format!("static-{}", test.replace("::", "-")));
        // uid 65534 (the program's `deny` child) searches it: the segments
        // of the shared namespace are there.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = Path::new(env!("CARGO_BIN_EXE_ipcns"));
        let lib = ipcns_testkit::preload::from_env()
            .map_or_else(
                || ipcns_testkit::preload::build(exe.parent().unwrap()).map(Path::to_path_buf),
                Ok,
            )
            .unwrap_or_else(|e| panic!("{test}: the library: {e}"));
        Some(Sides { dir, lib })
    }

    /// Builds the program as `build` says, into `NAME`; its path.
    fn build(&self, build: &Build, name: &str) -> PathBuf {
        self.build_source(build, name, "sysv12.c", SOURCE)
    }

    /// Builds `source` (as file `file`) as `build` says, into `NAME`.
    fn build_source(&self, build: &Build, name: &str, file: &str, source: &str) -> PathBuf {
        let c = self.dir.path().join(file);
        if !c.exists() {
            std::fs::write(&c, source).unwrap();
        }
        let out = self.dir.path().join(name);
        let r = Command::new(build.compiler)
            .args(["-O1", "-Wall", "-Wextra", "-Werror"])
            .args(build.flags)
            .arg("-o")
            .arg(&out)
            .arg(&c)
            .output()
            .unwrap_or_else(|e| panic!("run {} (install it): {e}", build.compiler));
        assert!(
            r.status.success(),
            "{} {file}: {}",
            build.name,
            text(&r.stderr)
        );
        out
    }

    /// `ARGS` on the kernel, in a fresh IPC namespace.
    fn kernel<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        let mut c = Command::new("unshare");
        c.args(["--ipc", "--"]).args(args);
        self.finish(c)
    }

    /// `ARGS` under `ipcns run --strict --private --shared`.
    fn ipcns<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.ipcns_with(&[], args)
    }

    /// [`Sides::ipcns`] with the libraries `ipcns` carries (glibc's and
    /// musl's builds, for a musl program's loader), not `$IPCNS_PRELOAD`.
    fn ipcns_carried<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        let mut c = self
            .dir
            .command(&["run", "--strict", "--private", "--shared", "--"]);
        c.args(args)
            .env_remove("IPCNS_PRELOAD")
            .env_remove("IPCNS_PRELOAD_MUSL")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_SHARED");
        self.finish(c)
    }

    /// [`Sides::ipcns`] with `more` options of `ipcns run`.
    fn ipcns_with<S: AsRef<OsStr>>(&self, more: &[&str], args: &[S]) -> Output {
        let mut c = self
            .dir
            .command(&[&["run", "--strict", "--private", "--shared"], more, &["--"]].concat());
        c.args(args)
            .env("IPCNS_PRELOAD", &self.lib)
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_SHARED");
        self.finish(c)
    }

    /// Runs `c` in the directory, without the caller's preloads, within
    /// [`LIMIT`].
    fn finish(&self, mut c: Command) -> Output {
        c.current_dir(self.dir.path())
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS")
            .env("LC_ALL", "C");
        output_within(&mut c, LIMIT)
            .unwrap_or_else(|| panic!("{c:?} did not end within {} s", LIMIT.as_secs()))
    }
}

/// A line diff of `kernel` and `ours`: each change as the kernel's lines
/// (`-`) then ipcns's (`+`), at most [`RUN`] of each side shown, with two
/// lines of context around; each line with its number on its side.
fn diff(kernel: &str, ours: &str) -> String {
    let a: Vec<&str> = kernel.lines().collect();
    let b: Vec<&str> = ours.lines().collect();
    // lcs[i][j]: the length of the longest common subsequence of a[i..]
    // and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The common lines (context) and the changes between them, in order.
    let mut hunks: Vec<Hunk> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            hunks.push(Hunk::Same(i, a[i]));
            i += 1;
            j += 1;
            continue;
        }
        if !matches!(hunks.last(), Some(Hunk::Change(..))) {
            hunks.push(Hunk::Change(Vec::new(), Vec::new()));
        }
        let Some(Hunk::Change(minus, plus)) = hunks.last_mut() else {
            unreachable!()
        };
        if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            minus.push((i, a[i]));
            i += 1;
        } else {
            plus.push((j, b[j]));
            j += 1;
        }
    }
    let near = |k: usize| {
        hunks[k.saturating_sub(2)..(k + 3).min(hunks.len())]
            .iter()
            .any(|h| matches!(h, Hunk::Change(..)))
    };
    let mut out = String::new();
    let mut gap = false;
    for (k, h) in hunks.iter().enumerate() {
        match h {
            Hunk::Same(n, line) if near(k) => {
                if gap && !out.is_empty() {
                    out.push_str("  ...\n");
                }
                gap = false;
                out.push_str(&format!(" {:>4} | {line}\n", n + 1));
            }
            Hunk::Same(..) => gap = true,
            Hunk::Change(minus, plus) => {
                for (tag, side, lines) in [('-', "the kernel's", minus), ('+', "ipcns's", plus)] {
                    for (n, line) in lines.iter().take(RUN) {
                        out.push_str(&format!("{tag}{:>4} | {line}\n", n + 1));
                    }
                    if lines.len() > RUN {
                        out.push_str(&format!(
                            "{tag}     ... and {} more of {side} lines\n",
                            lines.len() - RUN
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The lines of one side of a change that [`diff`] shows.
const RUN: usize = 12;

/// A piece of [`diff`]: a common line (its number on the kernel's side),
/// or the lines of each side between two common ones.
enum Hunk<'a> {
    Same(usize, &'a str),
    Change(Vec<(usize, &'a str)>, Vec<(usize, &'a str)>),
}

/// The kernel's run went through; ipcns's printed the same lines, the
/// same errors, and exited alike.
fn compare(what: &str, kernel: &Output, ours: &Output, last: &str) {
    let (k, o) = (text(&kernel.stdout), text(&ours.stdout));
    assert!(
        kernel.status.success() && k.lines().last() == Some(last),
        "{what}: on the kernel: {} (last line not {last:?})\n{k}{}",
        kernel.status,
        text(&kernel.stderr)
    );
    assert_eq!(text(&kernel.stderr), "", "{what}: on the kernel");
    assert!(
        k == o,
        "{what}: the transcripts differ (- the kernel, + ipcns run; {} and {} lines):\n{}\
         ipcns run: {}, standard error:\n{}",
        k.lines().count(),
        o.lines().count(),
        diff(&k, &o),
        ours.status,
        text(&ours.stderr)
    );
    assert_eq!(
        (text(&kernel.stderr), kernel.status.code()),
        (text(&ours.stderr), ours.status.code()),
        "{what}: standard error and exit status (left: the kernel, right: ipcns run)"
    );
}

/// The whole program built as `build`, on both sides.
fn whole(test: &str, build: &Build) {
    if build.compiler == "musl-gcc" && !on_path("musl-gcc") {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: musl-gcc is not installed (Debian: musl-tools)"
        );
        return;
    }
    let Some(s) = Sides::new(test) else {
        return;
    };
    let prog = s.build(build, "sysv12");
    let k = s.kernel(&[&prog]);
    let kt = text(&k.stdout);
    for fact in KERNEL_FACTS {
        assert!(
            kt.lines().any(|l| l == *fact),
            "{test}: on the kernel, no line {fact:?}:\n{kt}"
        );
    }
    let o = if build.compiler == "musl-gcc" && !build.flags.contains(&"-static") {
        s.ipcns_carried(&[&prog])
    } else {
        s.ipcns(&[&prog])
    };
    compare(
        &format!("{test} ({})", build.name),
        &k,
        &o,
        "end: ran through",
    );
}

#[test]
fn a_gcc_static_program_gets_the_kernels_answers() {
    whole(
        "static_programs::a_gcc_static_program_gets_the_kernels_answers",
        &GCC_STATIC,
    );
}

#[test]
fn a_musl_static_program_gets_the_kernels_answers() {
    whole(
        "static_programs::a_musl_static_program_gets_the_kernels_answers",
        &MUSL_STATIC,
    );
}

/// musl's dynamic loader does not load the glibc library (it fails
/// without running the program): this one too must be served by the
/// supervisor.
#[test]
fn a_musl_dynamic_program_gets_the_kernels_answers() {
    whole(
        "static_programs::a_musl_dynamic_program_gets_the_kernels_answers",
        &MUSL_DYNAMIC,
    );
}

/// The control: built dynamically with glibc, the program is served by
/// the library, and gets the kernel's answers (so a static build's
/// mismatch is the supervisor's).
#[test]
fn the_library_serving_a_dynamic_build_gives_the_kernels_transcript() {
    whole(
        "static_programs::the_library_serving_a_dynamic_build_gives_the_kernels_transcript",
        &GCC_DYNAMIC,
    );
}

/// A tree of both kinds: a dynamically linked glibc parent (served by the
/// library) makes a set, a queue and a segment by key and starts the
/// static build on them; messages go both ways with each side blocked in
/// turn, each side wakes the other through a semaphore, the child's
/// SEM_UNDO is applied at its exit, and the data it writes through its
/// own attachment is read by the parent.
#[test]
fn a_dynamic_parent_and_its_static_child_share_objects_by_key() {
    const TEST: &str =
        "static_programs::a_dynamic_parent_and_its_static_child_share_objects_by_key";
    let Some(s) = Sides::new(TEST) else {
        return;
    };
    let parent = s.build(&GCC_DYNAMIC, "sysv12-dynamic");
    let child = s.build(&GCC_STATIC, "sysv12-static");
    let args = [
        parent.as_os_str(),
        OsStr::new("mixed-parent"),
        child.as_os_str(),
    ];
    let k = s.kernel(&args);
    let kt = text(&k.stdout);
    for fact in [
        "mixed static child: semget(KEY_MIX_SEM, 0, 0) = 0, the parent's: yes",
        "mixed: msgrcv(type 2) = 5: type 2 text \"pong\"",
        "mixed: sem 0: GETVAL 1 GETPID static child GETNCNT 0 GETZCNT 0",
        "mixed: reads \"the static child was here\"",
    ] {
        assert!(
            kt.lines().any(|l| l == fact),
            "{TEST}: on the kernel, no line {fact:?}:\n{kt}"
        );
    }
    let o = s.ipcns(&args);
    compare(TEST, &k, &o, "mixed: done");
}

/// `tests/c/sstorm.c` (see its header), gcc -static: many callers blocked
/// at once in the supervisor, and sleepers and an undo holder killed with
/// SIGKILL: nothing lost, nothing left behind, as on the kernel.
#[test]
fn many_blocked_callers_and_a_kill_storm_leave_nothing_behind() {
    const TEST: &str =
        "static_programs::many_blocked_callers_and_a_kill_storm_leave_nothing_behind";
    let Some(s) = Sides::new(TEST) else {
        return;
    };
    let prog = s.build_source(
        &GCC_STATIC,
        "sstorm",
        "sstorm.c",
        include_str!("../c/sstorm.c"),
    );
    let k = s.kernel(&[&prog]);
    for _ in 0..3 {
        let o = s.ipcns(&[&prog]);
        compare(TEST, &k, &o, "end: ran through");
    }
}

/// `tests/c/proclist.c`, gcc -static, reads `/proc/sysvipc/*` and the
/// IPC sysctls after the dynamic `ipcmk` (served by the library) made a
/// queue, a set and a segment: under `ipcns run --serve-proc` it sees the
/// namespace's objects, as on the kernel it sees the kernel's.
#[test]
fn a_static_lister_reads_proc_sysvipc_under_serve_proc() {
    const TEST: &str = "static_programs::a_static_lister_reads_proc_sysvipc_under_serve_proc";
    if !on_path("ipcmk") {
        skip(TEST, "util-linux ipcmk is not installed");
        return;
    }
    let Some(s) = Sides::new(TEST) else {
        return;
    };
    let prog = s.build_source(
        &GCC_STATIC,
        "proclist",
        "proclist.c",
        include_str!("../c/proclist.c"),
    );
    let script = format!(
        "ipcmk -Q >/dev/null && ipcmk -S 2 >/dev/null && ipcmk -M 4096 >/dev/null && {}",
        prog.display()
    );
    let k = s.kernel(&["sh", "-c", &script]);
    let o = s.ipcns_with(&["--serve-proc"], &["sh", "-c", &script]);
    compare(TEST, &k, &o, "end: ran through");
    assert!(
        text(&k.stdout).contains("shm: id 0 perms 644\n"),
        "{}",
        text(&k.stdout)
    );
}

/// A review's reproducers (tests/c/), gcc -static -pthread, each with the
/// kernel's output and exit status: a child SIGKILLed during a served
/// shmat is reaped by its parent (`shmkillwait.c`); a thread asleep in
/// semop when another execs takes no token (`exectoken.c`) and leaves the
/// process's semadj as it was (`execundo.c`); signals queued during a
/// served shmat arrive with their value and sender (`shmsig.c`); a signal
/// sent to a process ends the sleep of one of its threads, not all
/// (`twothreads.c`).
#[test]
fn the_reviews_reproducers_give_the_kernels_answers() {
    const TEST: &str = "static_programs::the_reviews_reproducers_give_the_kernels_answers";
    let Some(s) = Sides::new(TEST) else {
        return;
    };
    const THREADS: Build = Build {
        name: "gcc -static -pthread",
        compiler: "gcc",
        flags: &["-static", "-pthread"],
    };
    for (name, source, args) in [
        (
            "shmkillwait",
            include_str!("../c/shmkillwait.c"),
            &[][..] as &[&str],
        ),
        ("exectoken", include_str!("../c/exectoken.c"), &[]),
        ("execundo", include_str!("../c/execundo.c"), &[]),
        ("shmsig", include_str!("../c/shmsig.c"), &[]),
        ("twothreads", include_str!("../c/twothreads.c"), &[]),
    ] {
        let prog = s.build_source(&THREADS, name, &format!("{name}.c"), source);
        let argv: Vec<&OsStr> = std::iter::once(prog.as_os_str())
            .chain(args.iter().map(OsStr::new))
            .collect();
        let k = s.kernel(&argv);
        let o = s.ipcns(&argv);
        assert!(
            k.status.success(),
            "{name} on the kernel: {}",
            text(&k.stdout)
        );
        assert_eq!(
            (text(&k.stdout), k.status.code()),
            (text(&o.stdout), o.status.code()),
            "{name}: the kernel (left) and ipcns run (right); ipcns run's stderr: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn the_diff_shows_changed_and_missing_lines_with_context() {
    let k = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
    let o = "a\nb\nC\nd\ne\nf\ng\nh\n";
    assert_eq!(
        diff(k, o),
        "    1 | a\n    2 | b\n-   3 | c\n+   3 | C\n    4 | d\n    5 | e\n  ...\n    \
         7 | g\n    8 | h\n-   9 | i\n"
    );
    assert_eq!(diff(k, k), "");
    // A run cut short: the first lines of each side, and how many more.
    let long: String = (1..=20).map(|n| format!("{n}\n")).collect();
    let d = diff(&long, "1\nFATAL\n");
    assert!(d.starts_with("    1 | 1\n-   2 | 2\n"), "{d}");
    assert!(
        d.ends_with("-  13 | 13\n-     ... and 7 more of the kernel's lines\n+   2 | FATAL\n"),
        "{d}"
    );
}
