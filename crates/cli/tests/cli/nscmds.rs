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
    assert_eq!(text(&run(&["ns", "list"]).stdout), "alpha\ndefault\n");
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
    assert_eq!(text(&run(&["ns", "list"]).stdout), "alpha\ndefault\n");
    assert!(run(&["ns", "remove", "alpha"]).status.success());
    assert!(!dir.join("ipcns.alpha.d").exists());
    let o = run(&["ns", "remove", "alpha"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no such namespace"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["ns", "info", "bad/name"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&run(&["ns", "list"]).stdout), "default\n");
    let o = run(&["sysctl", "--ns", "default", "kernel.sem_next_id"]);
    assert_eq!(text(&o.stdout), "kernel.sem_next_id = -1\n");
    let _ = std::fs::remove_dir_all(&dir);
}
