//! Which namespace a program lands in: a descriptor handed down wins;
//! a namespace that cannot be opened makes every call fail with ENOSYS and
//! says why once; a call made from inside the choice fails at once.

use crate::support::{
    cc_or_skip, compile, kernel_or_skip, lib, on_kernel, same_lines, scratch, text,
};
use ipcns_core::{CreateOptions, Namespace};
use std::process::{Command, Stdio};

/// `IPCNS_FD=7` open on an arena wins over `IPCNS_DIR`/`IPCNS`, which name
/// another (absent) namespace; the segment directory is found beside the
/// descriptor's file. A descriptor that is not an arena is passed over.
#[test]
fn descriptor_wins() {
    let test = "descriptor_wins";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("first", s.path(), &[]);
    let handed = s.path().join("handed");
    let named = s.path().join("named");
    std::fs::create_dir_all(&handed).unwrap();
    std::fs::create_dir_all(&named).unwrap();
    let arena = handed.join("ipcns.x");
    Namespace::create_at(
        &arena,
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    )
    .unwrap();
    let out = Command::new("sh")
        .args(["-c", "exec 7<>\"$0\"; exec \"$1\""])
        .arg(&arena)
        .arg(&bin)
        .env("LD_PRELOAD", lib())
        .env("IPCNS_FD", "7")
        .env("IPCNS_DIR", &named)
        .env("IPCNS", "y")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let ours = text(&out.stdout);
    assert!(
        std::fs::read_dir(&named).unwrap().next().is_none(),
        "a namespace was made in IPCNS_DIR"
    );
    // The objects are in the handed-down arena, the segment's file beside it.
    let ns = Namespace::open_at(&arena).unwrap();
    let me = ns.cred().unwrap();
    assert!(ns.semget(&me, 0x5601, 0, 0).is_ok(), "{ours}");
    assert!(ns.msgget(&me, 0x6601, 0).is_ok(), "{ours}");
    assert!(ns.shmget(&me, 0x7601, 0, 0).is_ok(), "{ours}");
    assert!(
        ipcns_core::segment_dir_of(&arena).join("shm.1").exists(),
        "{ours}"
    );
    if kernel_or_skip(test) {
        let k = on_kernel(&bin);
        same_lines(test, &text(&k.stdout), &ours);
    }
    // Descriptor 0 (/dev/null) is no arena: IPCNS_DIR/IPCNS decide.
    let out = Command::new(&bin)
        .env("LD_PRELOAD", lib())
        .env("IPCNS_FD", "0")
        .env("IPCNS_DIR", &named)
        .env("IPCNS", "y")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), ours);
    assert!(named.join("ipcns.y").exists());
}

/// A namespace that cannot be opened: one line on stderr naming it and
/// why, and ENOSYS from every call (as from a kernel without System V
/// IPC).
#[test]
fn unopenable_namespace_is_enosys() {
    let test = "unopenable";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("first", s.path(), &[]);
    for (dir, name, why) in [
        (s.path().join("no/such/dir"), "t", "no such directory"),
        (s.path().to_path_buf(), "../x", "invalid namespace name"),
    ] {
        let out = Command::new(&bin)
            .env("LD_PRELOAD", lib())
            .env("IPCNS_DIR", &dir)
            .env("IPCNS", name)
            .env_remove("IPCNS_FD")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("ipcns: cannot open namespace {name}: "))
                && stderr.contains(why)
                && stderr
                    .trim_end()
                    .ends_with("System V IPC calls fail with ENOSYS"),
            "{stderr}"
        );
        for call in [
            "semget(0x5601",
            "msgget(0x6601",
            "h = ",
            "p = shmat",
            "semop(",
        ] {
            let line = stdout
                .lines()
                .find(|l| l.starts_with(call))
                .unwrap_or_else(|| panic!("no {call} in {stdout}"));
            assert!(line.ends_with("= -1 ENOSYS"), "{line}");
        }
    }
}

/// Another preloaded library whose getenv (which the choice of namespace
/// calls) makes a System V call: that inner call fails at once with
/// ENOSYS, and the outer calls then succeed.
#[test]
fn reentry_fails_fast() {
    let test = "reentry";
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile("first", s.path(), &[]);
    let hook = s.path().join("libhook.so");
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".to_string()))
        .args(["-O1", "-Wall", "-shared", "-fPIC", "-o"])
        .arg(&hook)
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/hook.c"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let both = format!("{} {}", lib().display(), hook.display());
    let out = Command::new(&bin)
        .env("LD_PRELOAD", &both)
        .env("IPCNS_DIR", s.path())
        .env("IPCNS", "t")
        .env_remove("IPCNS_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some("hook: semget inside the choice = -1 ENOSYS"),
        "{stdout}"
    );
    assert_eq!(
        lines.next(),
        Some("semget(0x5601, 2, IPC_CREAT | 0600) = 0"),
        "{stdout}"
    );
}
