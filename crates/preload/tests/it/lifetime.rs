//! An unshared namespace goes away with its last process (`src/guardian`),
//! as the kernel frees an IPC namespace: not while a process is in it
//! (by its membership descriptor, or by mapping the arena once it closed
//! that), and within a few seconds once the last one exited or was
//! killed. The guardian never shows in the program's waits.
//!
//! Through the library only: the kernel's namespaces leave no file to
//! look at (`unshare_waits_see_only_the_child` compares the waits with
//! the kernel when root).

use crate::support::{cc_or_skip, compile, kernel_or_skip, lib, same_lines, scratch, text};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the guardian may take once the last member is gone (the
/// kernel frees namespaces asynchronously too).
const DEADLINE: Duration = Duration::from_secs(5);

/// The unshared namespaces' files in `dir`: `ipcns.unshare-*` and their
/// segment directories.
fn unshared(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ipcns.unshare-"))
        .collect();
    v.sort();
    v
}

/// Polls until `dir` holds no unshared namespace's file, up to
/// [`DEADLINE`]; what is left then.
fn gone_within(dir: &Path) -> Vec<String> {
    let end = Instant::now() + DEADLINE;
    loop {
        let left = unshared(dir);
        if left.is_empty() || Instant::now() > end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nslife parent MODE` through the library, its stdin a pipe the test
/// holds (the exec'd child waits for its EOF).
struct Run {
    parent: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    /// The namespace's arena and segment directory.
    arena: PathBuf,
    child: i32,
}

impl Run {
    fn start(bin: &Path, dir: &Path, mode: &str) -> Run {
        let mut parent = Command::new(bin)
            .args(["parent", mode])
            .env("LD_PRELOAD", lib())
            .env("IPCNS_DIR", dir)
            .env("IPCNS", "t")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_MEMBER_FD")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run nslife");
        let stdin = parent.stdin.take();
        let mut out = BufReader::new(parent.stdout.take().unwrap());
        let mut line = |want: &str| {
            let mut l = String::new();
            out.read_line(&mut l).unwrap();
            l.trim_end()
                .strip_prefix(want)
                .unwrap_or_else(|| panic!("wanted '{want}...', got '{l}'"))
                .to_string()
        };
        let name = line("ns ");
        let child: i32 = line("child ").parse().unwrap();
        let st = parent.wait().unwrap();
        assert!(st.success(), "the parent: {st}");
        Run {
            parent,
            stdin,
            out,
            arena: dir.join(format!("ipcns.{name}")),
            child,
        }
    }

    /// Lets the child end (EOF on its stdin); what it printed after.
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        let _ = self.parent.wait();
        rest
    }
}

/// The namespace's files are there, its segment's file included.
fn assert_there(r: &Run, when: &str) {
    assert!(r.arena.exists(), "{when}: {} is gone", r.arena.display());
    let seg = ipcns_core::segment_dir_of(&r.arena);
    let segments = std::fs::read_dir(&seg).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| ipcns_core::is_segment_file(e.file_name().as_encoded_bytes()))
            .count()
    });
    assert!(segments > 0, "{when}: no segment file in {}", seg.display());
}

/// Whether process `pid` still runs (a zombie does not: init here may
/// not reap it).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

/// A process unshares, makes objects (an attached segment among them),
/// forks a child that execs a program using the namespace, and exits
/// first: the namespace stays while the child lives (well past the
/// guardian's reaction time), and its files are gone within the deadline
/// once the child has exited.
#[test]
fn unshared_namespace_goes_with_its_last_process() {
    let test = "unshared_namespace_goes_with_its_last_process";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let r = Run::start(&bin, s.path(), "open");
    assert!(alive(r.child));
    assert_there(&r, "at the parent's exit");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(r.child), "the child ended early");
    assert_there(&r, "1.5 s after the parent's exit, the child alive");
    let child = r.child;
    let rest = r.finish();
    assert_eq!(rest, "done\n", "the child, in the namespace to its end");
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "left {DEADLINE:?} after the last process: {left:?}"
    );
    assert!(!alive(child));
    // Nothing but the unshared one was ever made: no `t`, no other.
    let names: Vec<_> = std::fs::read_dir(s.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ipcns."))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// The last member killed with SIGKILL (it runs no exit code): gone too.
#[test]
fn unshared_namespace_goes_when_its_last_process_is_killed() {
    let test = "unshared_namespace_goes_when_its_last_process_is_killed";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let r = Run::start(&bin, s.path(), "open");
    assert_there(&r, "at the parent's exit");
    assert_eq!(ipcns_sys::process::kill(r.child, libc::SIGKILL), Ok(()));
    let left = gone_within(s.path());
    assert!(left.is_empty(), "left {DEADLINE:?} after SIGKILL: {left:?}");
    assert_eq!(r.finish(), "", "the killed child printed after");
}

/// A member that closed its membership descriptor (every descriptor from
/// 3 up) but maps the arena keeps the namespace until it exits.
#[test]
fn a_member_that_closed_the_descriptor_keeps_it_while_it_maps_it() {
    let test = "a_member_that_closed_the_descriptor_keeps_it_while_it_maps_it";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let r = Run::start(&bin, s.path(), "closed");
    // The child's descriptors: 0, 1, 2 and nothing else once it closed.
    let fds = |pid: i32| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let end = Instant::now() + DEADLINE;
    while fds(r.child) != ["0", "1", "2"] && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fds(r.child), ["0", "1", "2"], "the child did not close");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(alive(r.child));
    assert_there(
        &r,
        "2.5 s after the last descriptor closed, the arena mapped",
    );
    assert_eq!(r.finish(), "done\n");
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "left {DEADLINE:?} after the mapper's exit: {left:?}"
    );
}

/// The program's waits never see the guardian: one child forked after
/// the unshare, wait(NULL) gets it, then ECHILD, waitpid(-1, WNOHANG)
/// ECHILD, one SIGCHLD. On the kernel too (root), the same lines.
#[test]
fn unshare_waits_see_only_the_child() {
    let test = "unshare_waits_see_only_the_child";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let o = Command::new(&bin)
        .arg("waits")
        .env("LD_PRELOAD", lib())
        .env("IPCNS_DIR", s.path())
        .env("IPCNS", "t")
        .env_remove("IPCNS_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ours = text(&o.stdout);
    assert_eq!(
        ours,
        "wait 1: the child status 7\nwait 2: -1 ECHILD\nwaitpid -1 WNOHANG: -1 ECHILD\nSIGCHLD 1\n"
    );
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "left {DEADLINE:?} after the exit: {left:?}"
    );
    if kernel_or_skip(test) {
        let mut k = Command::new("unshare");
        k.arg("--ipc").arg(&bin).arg("waits");
        let k = k.stdin(Stdio::null()).output().unwrap();
        assert!(k.status.success(), "{}", text(&k.stderr));
        same_lines(test, &text(&k.stdout), &ours);
    }
}

/// A name an unshare gave is never made again by a process that finds
/// it gone: one line on stderr, and the calls fail with ENOSYS as when no
/// namespace can be opened; nothing is created.
#[test]
fn a_gone_unshared_namespace_is_not_made_again() {
    let test = "a_gone_unshared_namespace_is_not_made_again";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("first", s.path(), &[]);
    let name = "unshare-999999999-0badf00d";
    let o = Command::new(&bin)
        .env("LD_PRELOAD", lib())
        .env("IPCNS_DIR", s.path())
        .env("IPCNS", name)
        .env_remove("IPCNS_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("ipcns: cannot open namespace {name}: "))
            && err.contains("never made again")
            && err
                .trim_end()
                .ends_with("System V IPC calls fail with ENOSYS"),
        "{err}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("semget(0x5601"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with("= -1 ENOSYS"), "{line}");
    assert!(
        std::fs::read_dir(s.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .all(|e| !e.file_name().to_string_lossy().starts_with("ipcns.")),
        "a namespace was made"
    );
}

/// A member that closed every descriptor from 3 up (its membership one
/// too) and exec'd a program that makes no IPC call for 2 s (the library
/// maps the arena at the first), while the process that unshared exits at
/// once: its environment names the namespace, which stays, usable by it,
/// and goes once it has exited (Python's `close_fds`, sudo, `closefrom`).
#[test]
fn a_member_exec_d_with_its_descriptors_closed_keeps_it_before_its_first_call() {
    exec_d_with_descriptors_closed(
        "a_member_exec_d_with_its_descriptors_closed_keeps_it_before_its_first_call",
        "late",
    );
}

/// The same, with the environment naming the namespace as the library
/// reads it but not letter for letter: `IPCNS_DIR` spelt `DIR/.`, or a
/// second `IPCNS=` after the first (getenv takes the first); and with the
/// environment's first home overwritten by a process title, so that
/// `/proc/PID/environ` names nothing (the page the library maps at load
/// keeps it a member). The early modes fork the member before the process
/// that unshared makes any IPC call, so it has no record that its exec
/// would take over (which maps the arena at load by itself).
#[test]
fn a_member_exec_d_with_the_namespace_spelt_otherwise_keeps_it() {
    for mode in [
        "latedot",
        "latedup",
        "latetitle",
        "earlydot",
        "earlydup",
        "earlytitle",
    ] {
        exec_d_with_descriptors_closed(
            "a_member_exec_d_with_the_namespace_spelt_otherwise_keeps_it",
            mode,
        );
    }
}

fn exec_d_with_descriptors_closed(test: &str, mode: &str) {
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(&format!("{test}-{mode}"));
    let bin = compile("nslife", s.path(), &[]);
    let r = Run::start(&bin, s.path(), mode);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(r.child), "{mode}: the child ended early");
    assert_there(
        &r,
        "1.5 s after the parent's exit, before the child's first call",
    );
    let child = r.child;
    assert_eq!(r.finish(), "late ok\ndone\n", "{mode}");
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "{mode}: left {DEADLINE:?} after the member's exit: {left:?}"
    );
    assert!(!alive(child));
}

/// A member whose main thread exited (its `/proc/PID/maps` is empty)
/// while another thread lives and maps the arena, its descriptors closed
/// and its environment not naming the namespace (a fork child, no exec):
/// its tasks' maps keep the namespace until it exits.
#[test]
fn a_member_whose_leader_exited_keeps_it_by_its_threads() {
    let test = "a_member_whose_leader_exited_keeps_it_by_its_threads";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let r = Run::start(&bin, s.path(), "leader");
    let end = Instant::now() + DEADLINE;
    let maps_empty =
        |pid: i32| std::fs::read(format!("/proc/{pid}/maps")).is_ok_and(|m| m.is_empty());
    while !maps_empty(r.child) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(maps_empty(r.child), "the child's leader did not exit");
    std::thread::sleep(Duration::from_millis(2500));
    assert_there(&r, "2.5 s after the leader's exit, a thread alive");
    assert_eq!(r.finish(), "done\n");
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "left {DEADLINE:?} after the member's exit: {left:?}"
    );
}

/// An unshare the kernel refuses for its other flags (CLONE_PARENT:
/// EINVAL) changes nothing of ours: its errno, `$IPCNS` as it was, no
/// membership, no namespace file left, the calls in the old namespace.
#[test]
fn an_unshare_the_kernel_refuses_leaves_nothing() {
    let test = "an_unshare_the_kernel_refuses_leaves_nothing";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let o = nslife(&bin, s.path(), "refused");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "unshare = -1 EINVAL IPCNS=t member none\nmsgget(KEY, IPC_CREAT | 0600) >= 0 = 1\n"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(unshared(s.path()), Vec::<String>::new());
    assert!(s.path().join("ipcns.t").exists());
}

/// `nslife ARG` through the library, in namespace `t` of `dir`.
fn nslife(bin: &Path, dir: &Path, arg: &str) -> std::process::Output {
    Command::new(bin)
        .arg(arg)
        .env("LD_PRELOAD", lib())
        .env("IPCNS_DIR", dir)
        .env("IPCNS", "t")
        .env_remove("IPCNS_FD")
        .env_remove("IPCNS_MEMBER_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Whether the test runs as root (the pid namespace tests need it);
/// prints why it skips if not.
fn root_or_skip(test: &str) -> bool {
    if ipcns_sys::cred::geteuid() == 0 {
        return true;
    }
    crate::support::skip(test, "not root: a new pid namespace needs CAP_SYS_ADMIN");
    false
}

/// `unshare(CLONE_NEWPID | CLONE_NEWIPC)` (what `unshare -pif` does):
/// the guardian is made before the pid namespace, in the caller's, so the
/// first child is the new namespace's pid 1; the namespace goes with the
/// last process as usual.
#[test]
fn unshare_newpid_newipc_leaves_pid_1_to_the_child() {
    let test = "unshare_newpid_newipc_leaves_pid_1_to_the_child";
    if !cc_or_skip(test) || !root_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    let o = nslife(&bin, s.path(), "pidns");
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.starts_with("ns unshare-") && out.ends_with("\npid 1\n"),
        "{out}"
    );
    let left = gone_within(s.path());
    assert!(
        left.is_empty(),
        "left {DEADLINE:?} after the exit: {left:?}"
    );
}

/// `clone(CLONE_NEWPID | CLONE_NEWIPC)` and `unshare(CLONE_NEWPID)` then
/// `unshare(CLONE_NEWIPC)`: a guardian would be (or die with) the new pid
/// namespace's init, so none is made: no membership descriptor, and the
/// namespace stays for `ipcns ns prune` (documented), usable meanwhile.
#[test]
fn no_guardian_inside_a_new_pid_namespace() {
    let test = "no_guardian_inside_a_new_pid_namespace";
    if !cc_or_skip(test) || !root_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("nslife", s.path(), &[]);
    for how in ["clonepid", "apart"] {
        let o = nslife(&bin, s.path(), how);
        let out = text(&o.stdout);
        assert!(o.status.success(), "{how}: {out}{}", text(&o.stderr));
        let name = out
            .lines()
            .find_map(|l| l.strip_prefix("ns "))
            .unwrap_or_else(|| panic!("{how}: {out}"))
            .to_string();
        assert!(out.ends_with("member none\n"), "{how}: {out}");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            unshared(s.path()).contains(&format!("ipcns.{name}")),
            "{how}: removed"
        );
        let _ = std::fs::remove_file(s.path().join(format!("ipcns.{name}")));
        let _ = std::fs::remove_dir_all(s.path().join(format!("ipcns.{name}.d")));
    }
}
