//! `/proc/sysvipc/*` and `/proc/sys/kernel/<ipc sysctl>` through the
//! real tools (util-linux `ipcmk`, `ipcs`, `lsipc`, `ipcrm`, procps
//! `sysctl`, the shell's `echo >`, `dd`), `tests/sh/procfs.sh`: run on the
//! kernel in a fresh IPC namespace and with the whole shell under the
//! library in another, the outputs equal line for line; the kernel's
//! files of the second namespace stay empty and its sysctls untouched.

use crate::support::{kernel_or_skip, lib, same_lines, scratch, skip, text};
use std::path::Path;
use std::process::{Command, Stdio};

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sh/procfs.sh")
}

fn tools_or_skip(test: &str) -> bool {
    for t in ["ipcmk", "ipcs", "lsipc", "ipcrm", "sysctl", "dd", "unshare"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .stdout(Stdio::null())
            .status()
            .map_or(true, |s| !s.success())
        {
            skip(test, &format!("{t} is not installed"));
            return false;
        }
    }
    true
}

#[test]
fn tools_see_the_namespace() {
    let test = "tools_see_the_namespace";
    if !tools_or_skip(test) || !kernel_or_skip(test) {
        return;
    }
    let kernel = Command::new("unshare")
        .args(["--ipc", "sh"])
        .arg(script())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let s = scratch(test);
    // The script under the library, then (without it) the kernel's own
    // view of that IPC namespace.
    let ours = Command::new("unshare")
        .args(["--ipc", "sh", "-c"])
        .arg(
            "LD_PRELOAD=\"$1\" sh \"$0\"; echo '@@'; cat /proc/sysvipc/sem /proc/sysvipc/msg \
             /proc/sysvipc/shm; cat /proc/sys/kernel/msgmni /proc/sys/kernel/msg_next_id \
             /proc/sys/kernel/msgmax /proc/sys/kernel/shmmni",
        )
        .arg(script())
        .arg(lib())
        .env("IPCNS_DIR", s.path())
        .env("IPCNS", "procfs")
        .env_remove("LD_PRELOAD")
        .env_remove("IPCNS_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let k = format!("{}{}", text(&kernel.stdout), text(&kernel.stderr));
    let all = text(&ours.stdout);
    let (o, dump) = all.split_once("@@\n").expect("the script ran");
    let o = format!("{o}{}", text(&ours.stderr));
    assert!(k.contains("Message queue id: 5"), "{k}");
    same_lines(test, &k, &o);
    // Nothing reached the kernel: headers only, default sysctls.
    let d: Vec<&str> = dump.lines().collect();
    assert_eq!(d.len(), 7, "{dump}");
    assert!(d[0].trim_start().starts_with("key"), "{dump}");
    assert_eq!(&d[3..], ["32000", "-1", "8192", "4096"], "{dump}");
}

/// A namespace that cannot be opened: the files are absent (ENOENT, as on
/// a kernel without System V IPC), never the kernel's.
#[test]
fn no_namespace_no_files() {
    let s = scratch("no_namespace_no_files");
    let out = Command::new("sh")
        .args([
            "-c",
            "cat /proc/sys/kernel/msgmni; echo rc=$?; echo 5 > /proc/sys/kernel/msgmni; echo rc=$?",
        ])
        .env("LD_PRELOAD", lib())
        .env("IPCNS_DIR", s.path().join("absent"))
        .env("IPCNS", "x")
        .env_remove("IPCNS_FD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let o = text(&out.stdout);
    assert_eq!(o, "rc=1\nrc=2\n", "{o}{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("No such file"),
        "{}",
        text(&out.stderr)
    );
}
