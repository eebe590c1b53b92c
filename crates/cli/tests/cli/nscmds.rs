//! `ipcns sysctl`, `ipcns proc` and `ipcns ns`.

use crate::ipcs::populate;
use crate::kernel::{Ns, in_fresh_ipc_ns, real};
use crate::text;

/// Every sysctl reads as procps `sysctl` prints the kernel's, in a fresh
/// namespace and after writes; bad writes fail with the errno and change
/// nothing.
#[test]
fn sysctl_matches_the_kernel() {
    if std::process::Command::new("sysctl")
        .arg("-V")
        .output()
        .is_err()
    {
        crate::kernel::skip(
            "sysctl_matches_the_kernel",
            "procps sysctl is not installed",
        );
        return;
    }
    in_fresh_ipc_ns("sysctl_matches_the_kernel", || {
        let ns = Ns::new();
        let names: Vec<String> = ipcns::SYSCTLS
            .iter()
            .map(|n| format!("kernel.{n}"))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let read = |ns: &Ns| {
            let k = real("sysctl", &names);
            let o = ns.ours("sysctl", &[]);
            assert_eq!(text(&k.stdout), text(&o.stdout));
            assert!(o.status.success());
        };
        read(&ns);
        for w in [
            "kernel.msgmni=100",
            "kernel.sem=250 32000 32 128",
            "kernel.shmmax=1234567",
        ] {
            let k = real("sysctl", &["-w", w]);
            let o = ns.ours("sysctl", &[w]);
            assert_eq!(text(&k.stdout), text(&o.stdout), "{w}");
            assert!(o.status.success(), "{w}");
        }
        // procps refuses the 0444 *_next_id files; root writes them anyway.
        crate::kernel::both(&ns, "msg_next_id", |s| s.sysctl_write("msg_next_id", "77"))
            .expect("write msg_next_id");
        read(&ns);
        let o = ns.ours("sysctl", &["kernel.sem_next_id=5"]);
        assert_eq!(text(&o.stdout), "kernel.sem_next_id = 5\n");
        let o = ns.ours(
            "sysctl",
            &["msgmni=-5", "kernel.shmmni=4096", "nosuch", "sem"],
        );
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(
            text(&o.stderr),
            "ipcns: msgmni: EINVAL: Invalid argument\n\
             ipcns: nosuch: ENOENT: No such file or directory\n"
        );
        assert_eq!(
            text(&o.stdout),
            "kernel.shmmni = 4096\nkernel.sem = 250\t32000\t32\t128\n"
        );
        let o = ns.ours("sysctl", &["-n", "kernel.msgmni"]);
        assert_eq!(text(&o.stdout), "100\n");
    });
}

/// `ipcns proc` prints what /proc/sysvipc shows for the same objects.
#[test]
fn proc_matches_the_kernel() {
    crate::kernel::same_second("proc_matches_the_kernel", || {
        let ns = Ns::new();
        let t0 = crate::kernel::settled_second();
        populate(&ns);
        if crate::kernel::now_secs() != t0 {
            return false;
        }
        for m in ["sem", "msg", "shm"] {
            let k = real("cat", &[&format!("/proc/sysvipc/{m}")]);
            let o = ns.ours("proc", &[m]);
            assert_eq!(text(&k.stdout), text(&o.stdout), "proc {m}");
        }
        let o = ns.ours("proc", &["nope"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o.stderr).starts_with("ipcns: proc: "));
        true
    });
}

#[test]
fn ns_create_list_info_remove() {
    let dir = std::env::temp_dir().join(format!("ipcns-cli-ns.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ipcns"))
            .args(args)
            .env("IPCNS_DIR", &dir)
            .env_remove("IPCNS")
            .output()
            .unwrap()
    };
    let o = run(&["ns", "create", "alpha", "--extend", "--mode", "640"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        format!("{}\n", dir.join("ipcns.alpha").display())
    );
    let o = run(&["ns", "create", "alpha"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("namespace exists already"),
        "{}",
        text(&o.stderr)
    );
    // First use of the default namespace creates it.
    let o = run(&["ipcmk", "-S", "2"]);
    assert_eq!(text(&o.stdout), "Semaphore id: 0\n");
    let o = run(&["ipcmk", "--ns", "alpha", "-Q"]);
    assert_eq!(text(&o.stdout), "Message queue id: 0\n");
    assert_eq!(listed(&run(&["ns", "list"])), ["alpha", "default"]);
    let info = text(&run(&["ns", "info", "alpha"]).stdout);
    for want in [
        "name:    alpha\n",
        "mode:    0640",
        "extend:  yes (ipc_mni 16777216, 24-bit index)\n",
        "sem:     0 sets, 0 semaphores\n",
        "msg:     1 queues, 0 messages, 0 bytes queued\n",
        "shm:     0 segments, 0 pages\n",
    ] {
        assert!(info.contains(want), "{want:?} not in\n{info}");
    }
    let info = text(&run(&["ns", "info"]).stdout);
    assert!(info.contains("sem:     1 sets, 2 semaphores\n"), "{info}");
    assert!(
        info.contains("extend:  no (ipc_mni 32768, 15-bit index)\n"),
        "{info}"
    );
    // `--ns` may also come before the command.
    let o = run(&["--ns", "alpha", "ns", "info"]);
    assert!(
        text(&o.stdout).contains("name:    alpha\n"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["--ns=alpha", "ipcmk", "-M", "100"]);
    assert_eq!(text(&o.stdout), "Shared memory id: 0\n");
    // A segment's file is no namespace, and goes with its namespace.
    assert!(dir.join("ipcns.alpha.d/shm.1").exists());
    assert_eq!(listed(&run(&["ns", "list"])), ["alpha", "default"]);
    assert!(run(&["ns", "remove", "alpha"]).status.success());
    assert!(!dir.join("ipcns.alpha.d").exists());
    let o = run(&["ns", "remove", "alpha"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no such namespace"),
        "{}",
        text(&o.stderr)
    );
    // Several at once: each said, the others still removed.
    for n in ["b1", "b2"] {
        assert!(run(&["ns", "create", n]).status.success());
    }
    let o = run(&["ns", "remove", "b1", "nosuch", "b2"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "ipcns: {}: no such namespace\n",
            dir.join("ipcns.nosuch").display()
        )
    );
    assert_eq!(listed(&run(&["ns", "list"])), ["default"]);
    let o = run(&["ns", "info", "bad/name"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("ipcns: invalid namespace name \"bad/name\": "),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(listed(&run(&["ns", "list"])), ["default"]);
    let o = run(&["sysctl", "--ns", "default", "kernel.sem_next_id"]);
    assert_eq!(text(&o.stdout), "kernel.sem_next_id = -1\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ns check`: the census when the namespace is consistent, each problem
/// and exit 1 when it is not.
#[test]
fn ns_check_reports_the_census_or_the_problems() {
    let d = crate::TempDir::new("check");
    let o = d.run(&["ipcmk", "-Q", "-S", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        d.run(&["ipcmk", "--ns", "other", "-M", "4096"])
            .status
            .success()
    );
    let o = d.run(&["ns", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "ok: 1 semaphore sets, 1 queues, 0 segments\n"
    );
    let o = d.run(&["ns", "check", "other"]);
    assert_eq!(
        text(&o.stdout),
        "ok: 0 semaphore sets, 0 queues, 1 segments\n"
    );
    let o = d.run(&["--ns", "other", "ns", "check"]);
    assert_eq!(
        text(&o.stdout),
        "ok: 0 semaphore sets, 0 queues, 1 segments\n"
    );
    // Break a counter: the queue registry says 5 queues, there is 1.
    // (Through the file: the header's msg registry is at 128 + 192, its
    // in_use 32 bytes in; layout version 3.)
    use std::os::unix::fs::FileExt;
    let arena = std::fs::OpenOptions::new()
        .write(true)
        .open(d.path().join("ipcns.default"))
        .unwrap();
    let in_use = |n: u32| {
        arena
            .write_all_at(&n.to_le_bytes(), 128 + 192 + 32)
            .unwrap()
    };
    in_use(5);
    let o = d.run(&["ns", "check", "default"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "msg: in_use is 5, the objects say 1\n");
    assert_eq!(text(&o.stderr), "");
    in_use(1);
    assert!(d.run(&["ns", "check"]).status.success());
    let o = d.run(&["ns", "check", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no such namespace"),
        "{}",
        text(&o.stderr)
    );
}

/// The NAME column of `ns list`.
pub(crate) fn listed(o: &std::process::Output) -> Vec<String> {
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let mut lines = out.lines();
    let header = lines.next().expect("a header");
    assert!(
        header.starts_with("OWNER ") && header.ends_with("  NAME"),
        "{out}"
    );
    lines
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect()
}

/// `ns list`: owner, mode, size and name in aligned columns, and only
/// arenas: a FIFO (which would block an open), a symbolic link to an
/// arena, a directory, a segment file and other files are skipped, the
/// FIFO without being opened.
#[test]
fn ns_list_shows_arenas_only_and_never_blocks() {
    use std::os::unix::fs::MetadataExt;
    let d = crate::TempDir::new("list");
    assert!(
        d.run(&["ns", "create", "alpha", "--mode", "640"])
            .status
            .success()
    );
    assert!(d.run(&["ipcmk", "-M", "10"]).status.success());
    let mkfifo = std::process::Command::new("mkfifo")
        .arg(d.path().join("ipcns.fifo"))
        .status()
        .expect("run mkfifo");
    assert!(mkfifo.success());
    std::os::unix::fs::symlink("ipcns.alpha", d.path().join("ipcns.link")).unwrap();
    std::fs::create_dir(d.path().join("ipcns.dir")).unwrap();
    std::fs::write(d.path().join("ipcns.junk"), "IPCNSARN but no arena").unwrap();
    let o = crate::output_within(
        &mut d.command(&["ns", "list"]),
        std::time::Duration::from_secs(20),
    )
    .expect("ns list did not finish: it opened the FIFO");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(listed(&o), ["alpha", "default"]);
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let name_at = lines[0].find("NAME").unwrap();
    let size_end = lines[0].find("USED").unwrap() + 4;
    for (line, (name, mode)) in lines[1..]
        .iter()
        .zip([("alpha", "0640"), ("default", "0600")])
    {
        let meta = std::fs::metadata(d.path().join(format!("ipcns.{name}"))).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        let owner = if crate::kernel::is_root() {
            "root".to_string()
        } else {
            cols[0].to_string()
        };
        // The bytes allocated to the arena and its segment files (not the
        // arena's length, nor the sparse pool's), in du -h's units.
        let segs: u64 = std::fs::read_dir(d.path().join(format!("ipcns.{name}.d")))
            .map(|es| {
                es.filter_map(|e| e.ok()?.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.blocks() * 512)
                    .sum()
            })
            .unwrap_or(0);
        let used = meta.blocks() * 512 + segs;
        let (v, unit) = if used < 1 << 20 {
            (used as f64 / 1024.0, "K")
        } else {
            (used as f64 / 1048576.0, "M")
        };
        let shown = if v < 10.0 {
            format!("{:.1}{unit}", (v * 10.0).ceil() / 10.0)
        } else {
            format!("{:.0}{unit}", v.ceil())
        };
        assert_eq!(cols, [owner.as_str(), mode, &shown, name], "{out}");
        assert!(meta.len() > used, "{out}");
        assert_eq!(meta.uid() == 0, cols[0] == "root", "{out}");
        // Aligned: names in one column, sizes right-aligned under USED.
        assert_eq!(line.find(name), Some(name_at), "{out}");
        assert_eq!(
            line.find(cols[2]).map(|i| i + cols[2].len()),
            Some(size_end),
            "{out}"
        );
    }
}

/// A participant stopped while holding a registry lock stalls the others
/// (out of scope, as for any shared lock); `ns info` must not: it names the
/// holder, its state, and skips what that lock guards. Once the holder is
/// killed, the next caller takes the lock over at once.
#[test]
#[allow(unsafe_code)]
fn ns_info_names_a_stopped_holder_and_does_not_block() {
    use std::time::Duration;
    let d = crate::TempDir::new("holder");
    assert!(d.run(&["ipcmk", "-S", "2"]).status.success());
    let path = d.path().join("ipcns.default");
    // SAFETY: the child opens the namespace, takes a lock and stops itself;
    // it never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let ns = ipcns::Namespace::open_at(&path).expect("attach");
        let _ = ns.hold_registry(ipcns::Mech::Sem, || {
            // SAFETY: stops this process; the parent kills it.
            unsafe { libc::raise(libc::SIGSTOP) };
        });
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    let mut st = 0;
    // SAFETY: waits for our child to stop.
    unsafe { libc::waitpid(pid, &mut st, libc::WUNTRACED) };
    assert!(libc::WIFSTOPPED(st));
    let o = crate::output_within(&mut d.command(&["ns", "info"]), Duration::from_secs(10))
        .expect("ns info blocked on the held lock");
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        out.contains(&format!("sem registry held by thread {pid} (state T)")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "not counted: its registry is held by thread {pid}"
        )),
        "{out}"
    );
    assert!(out.contains("msg:     0 queues"), "{out}");
    // SAFETY: kills our stopped child, then reaps it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, &mut st, 0);
    }
    let o = crate::output_within(&mut d.command(&["ipcs", "-s"]), Duration::from_secs(5))
        .expect("ipcs after the holder died");
    assert!(o.status.success());
    let o = d.run(&["ns", "info"]);
    assert!(
        text(&o.stdout).contains("locks:   none held"),
        "{}",
        text(&o.stdout)
    );
}

/// `ns prune` removes the namespaces `ipcns run --private --keep` and
/// `unshare` made once their maker is gone and no process maps them, and
/// never one a user named; `--dry-run` only says.
#[test]
fn ns_prune_removes_only_the_dead_runs() {
    let d = crate::TempDir::new("prune");
    assert!(d.run(&["ns", "create", "mine"]).status.success());
    for _ in 0..2 {
        let o = d.run(&["run", "--private", "--keep", "--", "true"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    // Named as an unshare by a live process (this one): kept.
    let live = format!("unshare-{}-0000abcd", std::process::id());
    assert!(d.run(&["ns", "create", &live]).status.success());
    // A run's name whose pid is gone but whose arena a live process maps:
    // kept while it does.
    let held = "run-999999999-00000001";
    assert!(d.run(&["ns", "create", held]).status.success());
    let ns = ipcns::Namespace::open_at(&d.path().join(format!("ipcns.{held}"))).unwrap();
    let names = listed(&d.run(&["ns", "list"]));
    let runs: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("run-") && n.as_str() != held)
        .collect();
    assert_eq!(runs.len(), 2, "{names:?}");
    let o = d.run(&["ns", "prune", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut want: Vec<String> = runs.iter().map(|n| format!("would remove {n}")).collect();
    want.sort();
    assert_eq!(text(&o.stdout).lines().collect::<Vec<_>>(), want);
    assert_eq!(listed(&d.run(&["ns", "list"])), names);
    let o = d.run(&["ns", "prune"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).matches("removed run-").count(), 2);
    let mut left = vec!["mine".to_string(), held.to_string(), live.clone()];
    left.sort();
    assert_eq!(listed(&d.run(&["ns", "list"])), left);
    drop(ns);
    let o = d.run(&["ns", "prune"]);
    assert_eq!(text(&o.stdout), format!("removed {held}\n"));
    let mut left = vec!["mine".to_string(), live];
    left.sort();
    assert_eq!(listed(&d.run(&["ns", "list"])), left);
}
