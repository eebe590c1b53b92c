//! `ipcns run`: the program's exit status, signals forwarded, the
//! environment and the arena's descriptor handed down, orphans reaped and
//! cleaned up after, `--strict`'s seccomp filter, private and shared
//! namespaces, and the plan printed without a program.
//!
//! The real `libipcns.so` is another crate's; these tests preload small
//! libraries compiled here with `cc` (`IPCNS_PRELOAD`), so they test the
//! mechanics of `ipcns run` alone.

use crate::kernel::{in_fresh_ipc_ns, is_root, skip};
use crate::{TempDir, output_within, text};
use ipcns::abi::{GETVAL, IPC_CREAT, SEM_UNDO, sembuf};
use ipcns::sem::SemArg;
use ipcns::{CreateOptions, Namespace};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Compiles `src` (C) with `cc` into `out`, with `flags`; panics with the
/// compiler's words if it fails (CI installs gcc).
fn compile(src: &str, out: &Path, flags: &[&str]) {
    let c = out.with_extension("c");
    std::fs::write(&c, src).unwrap();
    let r = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(&c)
        .output()
        .expect("run cc (install gcc)");
    assert!(
        r.status.success(),
        "cc {}: {}",
        c.display(),
        text(&r.stderr)
    );
}

/// A directory for the test: `IPCNS_DIR`, and a stand-in for the library
/// compiled in it.
struct Run {
    dir: TempDir,
    lib: PathBuf,
}

impl Run {
    fn new(tag: &str) -> Run {
        let dir = TempDir::new(&format!("run-{tag}"));
        let lib = dir.path().join("libipcns-standin.so");
        compile(
            "int ipcns_standin_loaded = 1;\n",
            &lib,
            &["-shared", "-fPIC"],
        );
        Run { dir, lib }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `ipcns run ARGS` with this directory as `IPCNS_DIR`, the stand-in
    /// as `IPCNS_PRELOAD`, and nothing of the caller's IPCNS_* or
    /// LD_PRELOAD.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.dir.command(&["run"]);
        c.args(args)
            .env("IPCNS_PRELOAD", &self.lib)
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS_SHARED")
            .env_remove("IPCNS_FD");
        c
    }

    /// Runs it to the end (at most 60 s).
    fn run(&self, args: &[&str]) -> Output {
        output_within(&mut self.command(args), Duration::from_secs(60))
            .unwrap_or_else(|| panic!("ipcns run {args:?} did not end within 60 s"))
    }

    /// `ipcns run ARGS -- sh -c SCRIPT`.
    fn sh(&self, args: &[&str], script: &str) -> Output {
        let mut a = args.to_vec();
        a.extend(["--", "sh", "-c", script]);
        self.run(&a)
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("ipcns run exits, it is not killed")
}

#[test]
fn the_exit_status_is_the_programs_with_128_plus_n_for_a_signal() {
    let r = Run::new("status");
    for (script, want) in [
        ("exit 0", 0),
        ("exit 3", 3),
        ("exit 255", 255),
        ("kill -KILL $$", 128 + 9),
        ("kill -TERM $$", 128 + 15),
        ("kill -SEGV $$", 128 + 11),
    ] {
        let o = r.sh(&[], script);
        assert_eq!(code(&o), want, "{script}: {}", text(&o.stderr));
    }
    // A program that is not there, or cannot be executed: the shells' 127
    // and 126, with the reason.
    let o = r.run(&["--", "/nonexistent/program"]);
    assert_eq!(code(&o), 127);
    assert_eq!(
        text(&o.stderr),
        "ipcns: run: /nonexistent/program: No such file or directory\n"
    );
    let source = r.lib.with_extension("c");
    let o = r.run(&[source.to_str().unwrap()]);
    assert_eq!(code(&o), 126, "{}", text(&o.stderr));
    // ipcns run's own failure: 125.
    let o = r.run(&["--ns", "a/b", "true"]);
    assert_eq!(code(&o), 125);
    assert!(text(&o.stderr).contains("invalid namespace name"));
}

#[test]
fn signals_sent_to_ipcns_run_reach_the_program() {
    let r = Run::new("signals");
    let script = "trap 'echo got USR1' USR1; trap 'echo got HUP' HUP; \
                  trap 'echo got INT; exit 8' INT; trap 'echo got TERM; exit 7' TERM; \
                  echo ready; i=0; while [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; exit 99";
    for (signals, last, want) in [
        (&["USR1", "HUP", "TERM"][..], "got TERM", 7),
        (&["INT"][..], "got INT", 8),
    ] {
        let mut child = r
            .command(&["--", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        for s in signals {
            // Only ipcns run is signalled (kill PID, not its group).
            let k = Command::new("kill")
                .arg(format!("-{s}"))
                .arg(child.id().to_string())
                .status()
                .unwrap();
            assert!(k.success());
            assert_eq!(lines.next().unwrap().unwrap(), format!("got {s}"));
        }
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(want), "after {last}");
    }
}

#[test]
fn a_terminals_interrupt_reaches_the_program_and_not_ipcns_run() {
    const TEST: &str = "a_terminals_interrupt_reaches_the_program_and_not_ipcns_run";
    use std::io::Write;
    let r = Run::new("tty");
    // script(1) runs ipcns run on a new terminal; ^C written to it makes
    // the terminal send SIGINT to its foreground process group, which
    // holds ipcns run and the program. The program counts, and exits
    // 40 + the count half a second after the first; ipcns run survives the
    // signal and exits with that. (ipcns run does not forward the
    // terminal's signal again, but two SIGINTs pending at once merge, so
    // this cannot tell: the rule is a unit test of the command.)
    // (script's shell reads the command line: the program is quoted, and
    // the shell execs ipcns run, since a shell left waiting would be killed
    // by the ^C itself: script runs $SHELL or /bin/sh, and dash does not
    // exec the last command of `-c` by itself.)
    let program = "n=0; trap \"n=\\$((n+1))\" INT; echo ready; \
                   i=0; while [ $n -eq 0 ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; \
                   sleep 0.5; exit $((40+n))";
    let inner = format!(
        "exec {} run -- sh -c '{program}'",
        env!("CARGO_BIN_EXE_ipcns")
    );
    let spawned = Command::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .env("IPCNS_DIR", r.path())
        .env("IPCNS_PRELOAD", &r.lib)
        .env_remove("IPCNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = spawned else {
        skip(TEST, "script(1) (bsdutils) is not installed");
        return;
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let l = lines.next().expect("ready").unwrap();
        if l.trim_end() == "ready" {
            break;
        }
    }
    child.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    child.stdin.as_mut().unwrap().flush().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(41), "one SIGINT");
}

#[test]
fn ld_preload_gets_the_library_first_and_keeps_what_was_there() {
    let r = Run::new("preload");
    let other = r.path().join("libother.so");
    compile("int other_loaded = 1;\n", &other, &["-shared", "-fPIC"]);
    let o = output_within(
        r.command(&[
            "--",
            "sh",
            "-c",
            "echo \"$LD_PRELOAD\"; cat /proc/self/maps",
        ])
        .env("LD_PRELOAD", &other),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        format!("{}:{}", r.lib.display(), other.display())
    );
    // Both are loaded.
    let maps = out.split_once('\n').unwrap().1;
    for lib in [&r.lib, &other] {
        assert!(
            maps.contains(lib.to_str().unwrap()),
            "{} in {maps}",
            lib.display()
        );
    }
    // Without a previous value: the library alone.
    let o = r.sh(&[], "echo \"$LD_PRELOAD\"");
    assert_eq!(text(&o.stdout), format!("{}\n", r.lib.display()));
}

#[test]
fn the_program_gets_the_namespace_by_name_and_by_an_inherited_descriptor() {
    let r = Run::new("fd");
    // The descriptor is the arena file itself (same inode), open O_RDWR,
    // and survives a child that clears its environment.
    let script = "stat -L -c %d:%i /proc/self/fd/$IPCNS_FD; \
                  stat -c %d:%i \"$IPCNS_DIR/ipcns.$IPCNS\"; \
                  sed -n 's/^flags:[[:space:]]*//p' /proc/self/fdinfo/$IPCNS_FD; \
                  env -i /bin/sh -c \"stat -L -c %d:%i /proc/self/fd/$IPCNS_FD\"; \
                  echo \"$IPCNS $IPCNS_DIR ${IPCNS_SHARED-unset}\"";
    for (args, name) in [(&["--ns", "given"][..], "given"), (&[][..], "default")] {
        let o = r.sh(args, script);
        assert_eq!(code(&o), 0, "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let l: Vec<&str> = out.lines().collect();
        assert_eq!(l.len(), 5, "{out}");
        assert_eq!(l[0], l[1], "IPCNS_FD is the arena");
        assert_eq!(l[3], l[1], "and stays open without the environment");
        let flags = u32::from_str_radix(l[2], 8).unwrap();
        assert_eq!(flags & 0o3, 0o2, "O_RDWR");
        assert_eq!(flags & 0o2000000, 0, "not close-on-exec");
        assert_eq!(l[4], format!("{name} {} unset", r.path().display()));
        // It is a namespace the other commands see.
        assert!(r.path().join(format!("ipcns.{name}")).is_file());
    }
    // $IPCNS names it when --ns does not.
    let o = output_within(
        r.command(&["--", "sh", "-c", "echo $IPCNS"])
            .env("IPCNS", "fromenv"),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(text(&o.stdout), "fromenv\n");
    // A relative IPCNS_DIR is handed down absolute.
    let o = output_within(
        r.command(&["--", "sh", "-c", "echo $IPCNS_DIR"])
            .current_dir(r.path())
            .env("IPCNS_DIR", "."),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(text(&o.stdout), format!("{}\n", r.path().display()));
}

/// The C program of the strict test: each of the twelve System V IPC system
/// calls made directly (`syscall(2)`, as Go or a static binary would),
/// then i386's through `int 0x80`, each line `NAME RESULT`.
const PROBE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ipc.h>
#include <sys/syscall.h>
static void show(const char *name, long r) {
    printf("%s %s\n", name, r < 0 ? strerrorname_np(errno) : "ok");
}
#ifdef __x86_64__
static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}
#endif
int main(void) {
    long id = syscall(SYS_semget, IPC_PRIVATE, 1, 0600);
    show("semget", id);
    if (id >= 0) syscall(SYS_semctl, id, 0, IPC_RMID, 0);
    show("semop", syscall(SYS_semop, -1, 0, 0));
    show("semtimedop", syscall(SYS_semtimedop, -1, 0, 0, 0));
    show("semctl", syscall(SYS_semctl, -1, 0, IPC_STAT, 0));
    show("msgget", syscall(SYS_msgget, 0x1badc0de, 0));
    show("msgsnd", syscall(SYS_msgsnd, -1, 0, 0, 0));
    show("msgrcv", syscall(SYS_msgrcv, -1, 0, 0, 0, 0));
    show("msgctl", syscall(SYS_msgctl, -1, IPC_STAT, 0));
    show("shmget", syscall(SYS_shmget, 0x1badc0de, 0, 0));
    show("shmat", syscall(SYS_shmat, -1, 0, 0));
    show("shmdt", syscall(SYS_shmdt, 0));
    show("shmctl", syscall(SYS_shmctl, -1, IPC_STAT, 0));
#ifdef __x86_64__
    long r = int80(393, IPC_PRIVATE, 1, 0600); /* i386 semget */
    printf("i386-semget %s\n", r >= 0 ? "ok" : strerrorname_np(-r));
    if (r >= 0) int80(394, r, 0, IPC_RMID);
    r = int80(117, 2 /* SEMGET */, IPC_PRIVATE, 1); /* i386 ipc() */
    printf("i386-ipc %s\n", r >= 0 ? "ok" : strerrorname_np(-r));
    if (r >= 0) int80(394, r, 0, IPC_RMID);
#endif
    show("getppid", syscall(SYS_getppid));
    return 0;
}
"#;

#[test]
fn strict_makes_the_kernels_ipc_system_calls_fail_with_enosys() {
    const TEST: &str = "strict_makes_the_kernels_ipc_system_calls_fail_with_enosys";
    let r = Run::new("strict");
    let probe = r.path().join("probe");
    compile(PROBE, &probe, &["-O1"]);
    // In a fresh kernel IPC namespace, so that the set the probe makes
    // (and removes) never touches the host's.
    in_fresh_ipc_ns(TEST, || {
        // Through a shell: the filter reaches descendants.
        let script = format!(
            "{}; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status",
            probe.display()
        );
        // Without the supervisor (which would serve them: below).
        let loose = r.sh(&["--no-supervisor"], &script);
        let strict = r.sh(&["--no-supervisor", "--strict"], &script);
        assert_eq!(code(&loose), 0, "{}", text(&loose.stderr));
        assert_eq!(code(&strict), 0, "{}", text(&strict.stderr));
        let (loose, strict) = (text(&loose.stdout), text(&strict.stdout));
        let lines = |t: &str| -> Vec<(String, String)> {
            t.lines()
                .map(|l| {
                    let (a, b) = l.split_once([' ', ':']).unwrap();
                    (a.to_string(), b.trim().to_string())
                })
                .collect()
        };
        let (loose, strict) = (lines(&loose), lines(&strict));
        assert_eq!(loose.len(), strict.len());
        // Without --strict, the process's own state (a container may
        // filter already); with it, a filter (mode 2) and no_new_privs.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        let own = |key: &str| {
            own.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().to_string())
                .unwrap()
        };
        let mut ipc = 0;
        for ((name, without), (name2, with)) in loose.iter().zip(&strict) {
            assert_eq!(name, name2);
            match name.as_str() {
                "getppid" => assert_eq!((without.as_str(), with.as_str()), ("ok", "ok")),
                "NoNewPrivs" | "Seccomp" => {
                    let want = if name == "Seccomp" { "2" } else { "1" };
                    assert_eq!(*without, own(&format!("{name}:")), "{name}");
                    assert_eq!(with, want, "{name}");
                }
                // A kernel without i386 emulation says ENOSYS either way:
                // nothing to tell apart then.
                n if n.starts_with("i386") && without == "ENOSYS" => {}
                _ => {
                    assert_ne!(
                        without, "ENOSYS",
                        "{name} reaches the kernel without --strict"
                    );
                    assert_eq!(with, "ENOSYS", "{name} under --strict");
                    ipc += 1;
                }
            }
        }
        assert!(ipc >= 12, "{loose:?}");
        // semget really reached the kernel without --strict.
        assert_eq!(loose[0], ("semget".to_string(), "ok".to_string()));
    });
}

/// The calls that reach the kernel (raw `syscall`, which the library does
/// not see) are served by the supervisor, with or without --strict: the
/// same answers as the kernel's (semget makes a set, the others' errnos),
/// and i386's calls (`int 0x80`), which nothing serves, fail with ENOSYS
/// rather than reach the kernel's namespace.
#[test]
fn the_supervisor_serves_the_calls_that_reach_the_kernel() {
    const TEST: &str = "the_supervisor_serves_the_calls_that_reach_the_kernel";
    let r = Run::new("served");
    let probe = r.path().join("probe");
    compile(PROBE, &probe, &["-O1"]);
    in_fresh_ipc_ns(TEST, || {
        let script = format!("{}; ipcs -s | grep -c '^0x' || true", probe.display());
        let kernel = r.sh(&["--no-supervisor"], &script);
        assert_eq!(code(&kernel), 0, "{}", text(&kernel.stderr));
        for opts in [&[][..], &["--strict"][..]] {
            let served = r.sh(opts, &script);
            assert_eq!(code(&served), 0, "{}", text(&served.stderr));
            let (k, s) = (text(&kernel.stdout), text(&served.stdout));
            let (k, s): (Vec<&str>, Vec<&str>) = (k.lines().collect(), s.lines().collect());
            assert_eq!(k.len(), s.len(), "{k:?} {s:?}");
            for (kl, sl) in k.iter().zip(&s) {
                if kl.starts_with("i386") {
                    assert!(sl.ends_with(" ENOSYS"), "{opts:?}: {sl}");
                } else {
                    assert_eq!(kl, sl, "{opts:?}");
                }
            }
        }
    });
}

#[test]
fn orphans_are_reparented_to_ipcns_run_and_reaped() {
    let r = Run::new("orphans");
    // A grandchild outlives its parent: it becomes ipcns run's child
    // (the program's parent), and once it ends it is reaped, not left a
    // zombie.
    let script = "sh -c 'sleep 0.3 & echo $! > gc.pid'; g=$(cat gc.pid); \
                  echo parent=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$g/status) run=$PPID; \
                  i=0; while [ -e /proc/$g ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; \
                  if [ -e /proc/$g ]; then echo \"left: $(grep State /proc/$g/status)\"; else echo reaped; fi";
    let o = output_within(
        r.command(&["--", "sh", "-c", script]).current_dir(r.path()),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let l: Vec<&str> = out.lines().collect();
    let (parent, run) = l[0].split_once(' ').unwrap();
    assert_eq!(
        parent.strip_prefix("parent="),
        run.strip_prefix("run="),
        "{out}"
    );
    assert_eq!(l[1], "reaped");
}

#[test]
fn ipcns_run_does_not_wait_for_descendants_left_running() {
    let r = Run::new("daemon");
    // The program starts a daemon and exits: ipcns run exits at once
    // with the program's status; the daemon goes on.
    let started = std::time::Instant::now();
    let o = r.sh(&[], "sleep 30 >/dev/null 2>&1 & echo $!; exit 4");
    assert_eq!(code(&o), 4);
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid = text(&o.stdout).trim().to_string();
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the daemon runs on"
    );
    let _ = Command::new("kill").arg(&pid).status();
}

/// This test binary's role when `ipcns run` starts it (the test below):
/// `hold` takes a semaphore with SEM_UNDO and waits to be killed,
/// `getval` prints the semaphore's value.
const ROLE: &str = "IPCNS_RUN_TEST_ROLE";

/// Its answers go on lines of their own, `role=...` (libtest has written
/// `test NAME ... ` without a newline before).
fn play(role: &str) {
    use std::io::Write;
    let name = std::env::var("IPCNS").unwrap();
    let semid: i32 = std::env::var("SEMID").unwrap().parse().unwrap();
    let ns = Namespace::open(&name).unwrap();
    let cred = ns.cred().unwrap();
    let mut out = std::io::stdout();
    match role {
        "hold" => {
            let op = sembuf {
                sem_num: 0,
                sem_op: 1,
                sem_flg: SEM_UNDO,
            };
            ns.semop(&cred, semid, &[op]).unwrap();
            writeln!(out, "\nrole=held").unwrap();
            out.flush().unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "getval" => {
            let v = ns.semctl(&cred, semid, 0, GETVAL, SemArg::None).unwrap();
            writeln!(out, "\nrole={v}").unwrap();
        }
        other => panic!("role {other}"),
    }
}

#[test]
fn a_descendant_killed_by_sigkill_gets_its_undo_applied_when_reaped() {
    const TEST: &str = "run::a_descendant_killed_by_sigkill_gets_its_undo_applied_when_reaped";
    if let Ok(role) = std::env::var(ROLE) {
        return play(&role);
    }
    let r = Run::new("undo");
    let ns = Namespace::create_at(&r.path().join("ipcns.u"), CreateOptions::default()).unwrap();
    let cred = ns.cred().unwrap();
    // Key 0 is IPC_PRIVATE.
    let semid = ns.semget(&cred, 0, 1, IPC_CREAT | 0o600).unwrap();
    // I, an orphan under ipcns run (its starting subshell exits), starts
    // G, which takes the semaphore with SEM_UNDO; I kills G with SIGKILL
    // and reaps it itself (a shell: no wait hook of the library's finishes
    // G). G's death word (ipcns's process/death.rs) tells the next reader
    // of the set that G died: the value is 0 at once, as on Linux, not
    // only once ipcns run reaps I and cleans up after every dead
    // participant.
    let me = format!("\"$EXE\" --exact {TEST} --nocapture --test-threads=1");
    let script = format!(
        "role() {{ {ROLE}=$1 {me} 2>/dev/null | sed -n 's/^role=//p'; }}; \
         ( sh -c '{ROLE}=hold {me} 2>/dev/null > held & h=$!; \
                  i=0; until grep -q role=held held || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done; \
                  kill -KILL $h; wait $h; echo > dead; \
                  i=0; until [ -e go ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done' & ); \
         i=0; until [ -e dead ] || [ $i -ge 3000 ]; do sleep 0.01; i=$((i+1)); done; \
         echo before=$(role getval); touch go; \
         i=0; v=$(role getval); \
         while [ \"$v\" != 0 ] && [ $i -lt 500 ]; do sleep 0.01; v=$(role getval); i=$((i+1)); done; \
         echo after=$v"
    );
    let o = output_within(
        r.command(&["--ns", "u", "--", "sh", "-c", &script])
            .current_dir(r.path())
            .env("EXE", std::env::current_exe().unwrap())
            .env("SEMID", semid.to_string()),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "before=0\nafter=0\n",
        "{}",
        text(&o.stderr)
    );
    assert_eq!(ns.semctl(&cred, semid, 0, GETVAL, SemArg::None), Ok(0));
}

#[test]
fn a_private_namespace_is_removed_at_the_end_unless_kept_or_in_use() {
    let r = Run::new("private");
    // The arenas (each with its segment directory, `NAME.d`, which ipcns
    // run makes with the segment pool it hands down).
    let arenas = || -> Vec<String> {
        r.dir
            .entries()
            .into_iter()
            .filter(|e| e.starts_with("ipcns.") && !e.ends_with(".d"))
            .collect()
    };
    // Fresh: another name each run, nothing left.
    let a = r.sh(
        &["--private"],
        "echo $IPCNS; ls \"$IPCNS_DIR\" | grep -c \"^ipcns.$IPCNS\\$\"",
    );
    let b = r.sh(&["--private"], "echo $IPCNS");
    assert_eq!(code(&a), 0, "{}", text(&a.stderr));
    let name = text(&a.stdout).lines().next().unwrap().to_string();
    assert!(name.starts_with("run-"), "{name}");
    assert_eq!(text(&a.stdout).lines().nth(1), Some("1"));
    assert_ne!(text(&b.stdout).trim(), name);
    assert_eq!(arenas(), Vec::<String>::new());
    assert_eq!(text(&a.stderr), "");
    // With a segment directory too (a shared one is made at creation).
    let o = r.sh(
        &["--private", "--shared"],
        "test -d \"$IPCNS_DIR/ipcns.$IPCNS.d\"",
    );
    assert_eq!(code(&o), 0);
    assert_eq!(
        r.dir
            .entries()
            .iter()
            .filter(|e| e.starts_with("ipcns."))
            .count(),
        0
    );
    // Kept on request, and said.
    let o = r.sh(&["--private", "--keep"], "echo $IPCNS");
    let name = text(&o.stdout).trim().to_string();
    assert_eq!(arenas(), vec![format!("ipcns.{name}")]);
    assert_eq!(
        text(&o.stderr),
        format!(
            "ipcns: run: kept namespace {name} in {}\n",
            r.path().display()
        )
    );
    std::fs::remove_file(r.path().join(format!("ipcns.{name}"))).unwrap();
    let _ = std::fs::remove_dir_all(r.path().join(format!("ipcns.{name}.d")));
    // Kept while a process the program started still runs.
    let o = r.sh(&["--private"], "sleep 30 >/dev/null 2>&1 & echo $! $IPCNS");
    let out = text(&o.stdout);
    let (pid, name) = out.trim().split_once(' ').unwrap();
    assert_eq!(arenas(), vec![format!("ipcns.{name}")]);
    assert!(text(&o.stderr).contains("processes the program started still run"));
    let _ = Command::new("kill").arg(pid).status();
    // --ns and --private exclude each other; --keep needs --private.
    assert_eq!(code(&r.run(&["--private", "--ns", "x", "true"])), 125);
    assert_eq!(code(&r.run(&["--keep", "true"])), 125);
}

#[test]
fn without_a_program_it_prints_the_plan_and_creates_nothing() {
    let r = Run::new("plan");
    let o = r.run(&["--ns", "p", "--strict"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let d = r.path().display();
    for want in [
        format!("library:   {} ($IPCNS_PRELOAD)\n", r.lib.display()),
        "namespace: p\n".to_string(),
        format!("arena:     {d}/ipcns.p\n"),
        "state:     would be created, mode 0600\n".to_string(),
        "strict:    yes: ".to_string(),
        format!("  LD_PRELOAD={}\n", r.lib.display()),
        "  IPCNS=p\n".to_string(),
        format!("  IPCNS_DIR={d}\n"),
        "  IPCNS_FD=N (".to_string(),
    ] {
        assert!(out.contains(&want), "{want:?} in\n{out}");
    }
    assert!(!out.contains("IPCNS_SHARED"));
    assert_eq!(
        r.dir.entries(),
        vec!["libipcns-standin.c", "libipcns-standin.so"]
    );
    // An existing one is described; --shared is handed down.
    Namespace::create_at(&r.path().join("ipcns.p"), CreateOptions::default()).unwrap();
    let o = r.run(&["--ns", "p", "--shared"]);
    let out = text(&o.stdout);
    assert!(out.contains("state:     exists, owner uid "), "{out}");
    assert!(
        out.contains("mode 0600, not created shared: other users cannot attach to it\n"),
        "{out}"
    );
    assert!(out.contains("  IPCNS_SHARED=1\n"), "{out}");
    assert!(out.contains("strict:    no: "), "{out}");
}

/// The glibc build an `LD_PRELOAD` value (a line) names: itself, or, when
/// the executable carries a musl build too, the one of the pair whose
/// `$PLATFORM` entry it is (src/run/musl.rs); its canonical path.
fn glibc_build(ld_preload: &str) -> PathBuf {
    let p = Path::new(ld_preload.trim_end());
    let p = match p.parent().and_then(Path::parent) {
        Some(pair) if p.ends_with("$PLATFORM/libipcns.so") => {
            pair.join(std::env::consts::ARCH).join("libipcns.so")
        }
        _ => p.to_path_buf(),
    };
    p.canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_library_is_found_beside_the_executable_or_named_in_the_error() {
    let r = Run::new("find");
    // A copy of ipcns in a directory of its own.
    let bin = r.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("ipcns");
    std::fs::copy(env!("CARGO_BIN_EXE_ipcns"), &exe).unwrap();
    let cmd = |args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("run")
            .args(args)
            .env("IPCNS_DIR", r.path())
            .env_remove("IPCNS_PRELOAD")
            .env_remove("IPCNS")
            .env_remove("LD_PRELOAD");
        output_within(&mut c, Duration::from_secs(60)).unwrap()
    };
    // Alone, it preloads the library it carries (an_executable_installed_
    // alone_carries_its_library has the details), unless it carries none.
    let o = cmd(&[]);
    let plan = text(&o.stdout);
    if plan.starts_with("library:   libipcns.so not found: ") {
        assert_eq!(code(&o), 125);
        assert!(plan.contains("carries no library"), "{plan}");
    } else {
        assert!(plan.contains("(carried by the ipcns executable)"), "{plan}");
    }
    // In ../lib/ipcns beside it (a package's place): before the carried.
    let lib_dir = r.path().join("lib/ipcns");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::copy(&r.lib, lib_dir.join("libipcns.so")).unwrap();
    let o = cmd(&["sh", "-c", "echo \"$LD_PRELOAD\""]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        glibc_build(&text(&o.stdout)),
        lib_dir.join("libipcns.so").canonicalize().unwrap()
    );
    // Beside the executable: first.
    std::fs::copy(&r.lib, bin.join("libipcns.so")).unwrap();
    let o = cmd(&["sh", "-c", "echo \"$LD_PRELOAD\""]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(
        glibc_build(&text(&o.stdout)),
        bin.join("libipcns.so").canonicalize().unwrap()
    );
    // A wrong $IPCNS_PRELOAD is an error, not a fallback.
    let mut c = Command::new(&exe);
    c.args(["run", "true"])
        .env("IPCNS_DIR", r.path())
        .env("IPCNS_PRELOAD", r.path().join("missing.so"));
    let o = output_within(&mut c, Duration::from_secs(60)).unwrap();
    assert_eq!(code(&o), 125);
    assert!(
        text(&o.stderr).contains("$IPCNS_PRELOAD is "),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_shared_namespace_serves_descendants_running_as_another_user() {
    const TEST: &str = "a_shared_namespace_serves_descendants_running_as_another_user";
    if !is_root() {
        skip(TEST, "needs root to run a descendant as nobody");
        return;
    }
    let r = Run::new("shared");
    // Let nobody in: the directory searchable and readable (the library).
    std::fs::set_permissions(r.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ipcns = env!("CARGO_BIN_EXE_ipcns");
    let as_nobody = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups -- \
         sh -c 'id -u; {ipcns} ipcmk -S 2 && head -c 8 <&$IPCNS_FD | od -An -tx8'"
    );
    let o = r.sh(&["--ns", "s", "--shared"], &as_nobody);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let magic = format!("{:016x}", ipcns::ARENA_MAGIC);
    assert!(out.starts_with("65534\nSemaphore id: 0\n"), "{out}");
    assert!(
        out.contains(&magic),
        "nobody reads the arena through IPCNS_FD: {out}"
    );
    let arena = std::fs::metadata(r.path().join("ipcns.s")).unwrap();
    assert_eq!(arena.mode() & 0o7777, 0o666);
    // root sees nobody's set.
    let o = r.dir.run(&["ipcs", "--ns", "s", "-s", "-c"]);
    assert!(text(&o.stdout).contains("nobody"), "{}", text(&o.stdout));
    // Without --shared the namespace is root's alone (mode 0600): nobody
    // cannot open it by path (the descriptor is still handed down: see the
    // README).
    let o = r.sh(&["--ns", "mine"], &as_nobody);
    assert_ne!(code(&o), 0);
    assert!(
        text(&o.stderr).contains("ipcns.mine: Permission denied"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn shared_makes_the_default_directory_searchable_and_no_more() {
    const TEST: &str = "shared_makes_the_default_directory_searchable_and_no_more";
    if !is_root() {
        skip(TEST, "needs root to run as a user of its own");
        return;
    }
    // A user of its own, so that its /dev/shm/ipcns-UID is the test's.
    let uid = 54321;
    let dir = PathBuf::from(format!("/dev/shm/ipcns-{uid}"));
    let _ = std::fs::remove_dir_all(&dir);
    let r = Run::new("searchable");
    std::fs::set_permissions(r.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--", env!("CARGO_BIN_EXE_ipcns"), "run"])
            .args(args)
            .args(["--", "sh", "-c", "stat -c %a \"$IPCNS_DIR\""])
            .env_remove("IPCNS_DIR")
            .env_remove("IPCNS")
            .env("IPCNS_PRELOAD", &r.lib);
        output_within(&mut c, Duration::from_secs(60)).unwrap()
    };
    // A private namespace leaves the directory as it was made: 0700.
    let o = run(&["--private"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "700\n");
    // A namespace for the group: group search only.
    let o = run(&["--private", "--mode", "0660"]);
    assert_eq!(text(&o.stdout), "710\n", "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).starts_with(&format!(
            "ipcns: run: {} is now mode 0710, so that other users reach shared namespace run-",
            dir.display()
        )),
        "{}",
        text(&o.stderr)
    );
    // For everyone: search for others too, never write.
    let o = run(&["--private", "--shared"]);
    assert_eq!(text(&o.stdout), "711\n", "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-v` says on standard error which namespace and library the run used,
/// whether the namespace was made for it, and at the end whether it was
/// removed or kept; without `-v` nothing of it is said.
#[test]
fn verbose_says_what_the_run_used_and_left() {
    let r = Run::new("verbose");
    let lib = r.lib.display().to_string();
    let o = r.run(&["-v", "--private", "--", "true"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("ipcns: run: namespace run-")
            && lines[0].contains(", made now), library ")
            && lines[0].ends_with(&format!("{lib} ($IPCNS_PRELOAD)")),
        "{err}"
    );
    let name = lines[0]["ipcns: run: namespace ".len()..]
        .split(' ')
        .next()
        .unwrap();
    assert_eq!(lines[1], format!("ipcns: run: removed namespace {name}"));
    let o = r.run(&["--verbose", "--ns", "app", "--", "true"]);
    assert!(
        text(&o.stderr).contains("namespace app ("),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains(", made now)"),
        "{}",
        text(&o.stderr)
    );
    assert!(text(&o.stderr).ends_with("ipcns: run: kept namespace app (not --private)\n"));
    let o = r.run(&["-v", "--ns", "app", "--", "true"]);
    assert!(
        text(&o.stderr).contains(", existing)"),
        "{}",
        text(&o.stderr)
    );
    let o = r.run(&["--ns", "app", "--", "true"]);
    assert_eq!(text(&o.stderr), "");
}

/// An `ipcns` executable alone (as `cargo install` installs it: no
/// library beside it) runs programs on the library it carries, written
/// out to the user's cache directory once and found there again; a file
/// there that is not the library is written again, never preloaded.
#[test]
fn an_executable_installed_alone_carries_its_library() {
    let d = TempDir::new("alone");
    let bin = d.path().join("bin");
    let home = d.path().join("home");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let exe = bin.join("ipcns");
    std::fs::copy(env!("CARGO_BIN_EXE_ipcns"), &exe).unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("run")
            .args(args)
            .env("HOME", &home)
            .env("IPCNS_DIR", d.path())
            .env_remove("XDG_CACHE_HOME")
            .env_remove("IPCNS_PRELOAD")
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_SHARED");
        output_within(&mut c, Duration::from_secs(60)).expect("ipcns run ended")
    };
    let plan = run(&["--private"]);
    let out = text(&plan.stdout);
    if out.contains("carries no library") || !plan.status.success() {
        crate::kernel::skip(
            "an_executable_installed_alone_carries_its_library",
            &format!("this build carries no library: {}", text(&plan.stderr)),
        );
        return;
    }
    let cache = home.join(".cache/ipcns");
    assert!(out.contains("(carried by the ipcns executable)"), "{out}");
    assert!(out.contains(&cache.display().to_string()), "{out}");
    // The program's System V IPC is served (under --strict the kernel's
    // would fail with ENOSYS): a queue made through the library.
    let probe = d.path().join("probe");
    compile(
        "#include <sys/msg.h>\n#include <stdio.h>\n\
         int main(void) { int q = msgget(IPC_PRIVATE, 0600); printf(\"queue %d\\n\", q); \
         return q < 0; }\n",
        &probe,
        &[],
    );
    let o = run(&["--strict", "--private", "--", probe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "queue 0\n");
    // The library (beside it, the musl build and their pair, if it
    // carries a musl build: tests/cli/musl.rs).
    let files: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libipcns-") && !n.starts_with("libipcns-musl-"))
        })
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let lib = &files[0];
    let bytes = std::fs::read(lib).unwrap();
    // Replaced by something else: written again before it is preloaded.
    std::fs::write(lib, b"not a library").unwrap();
    let o = run(&["--strict", "--private", "--", probe.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(std::fs::read(lib).unwrap(), bytes);
}

/// Programs that unshare CLONE_NEWIPC under the real library
/// (`unshare --ipc`): the guardian of each unshared namespace, reparented
/// here when the process that unshared ends, is no survivor of the run:
/// a `--private` namespace is removed at the end, and `ipcns ns list`
/// shows no `unshare-*` namespace left. One whose member outlives the
/// run (a background job of the unsharing shell) is listed while that
/// member runs, and gone once it has ended.
#[test]
fn unshared_namespaces_go_with_their_processes_and_are_no_survivors() {
    let test = "unshared_namespaces_go_with_their_processes_and_are_no_survivors";
    let path = std::env::var_os("PATH").unwrap_or_default();
    for p in ["unshare", "ipcmk", "sh"] {
        if !std::env::split_paths(&path).any(|d| d.join(p).is_file()) {
            skip(test, &format!("{p} is not installed"));
            return;
        }
    }
    // The real library, built beside the ipcns under test.
    let exe = Path::new(env!("CARGO_BIN_EXE_ipcns"));
    let lib = match ipcns_testkit::preload::from_env().map_or_else(
        || ipcns_testkit::preload::build(exe.parent().unwrap()).map(Path::to_path_buf),
        Ok,
    ) {
        Ok(l) => l,
        Err(why) => {
            skip(test, &why);
            return;
        }
    };
    let d = TempDir::new("unshared");
    let run = |args: &[&str]| {
        let mut c = d.command(&["run"]);
        c.args(args)
            .env("IPCNS_PRELOAD", &lib)
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_MEMBER_FD");
        output_within(&mut c, Duration::from_secs(60)).expect("ipcns run ended")
    };
    let list = || crate::nscmds::listed(&d.run(&["ns", "list"]));
    let o = run(&["--private", "--", "unshare", "--ipc", "ipcmk", "-Q"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "", "kept the private namespace?");
    assert_eq!(list(), Vec::<String>::new());
    // The unsharing shell exits first; its background job, a member,
    // uses the namespace 2 s later.
    let o = run(&[
        "--ns",
        "t",
        "--",
        "unshare",
        "--ipc",
        "sh",
        "-c",
        "ipcmk -Q >/dev/null && (sleep 2; ipcmk -Q) >/dev/null 2>&1 & exit 0",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    let names = list();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[1].starts_with("unshare-"), "{names:?}");
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while list() != ["t"] && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(list(), ["t"]);
}
