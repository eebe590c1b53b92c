//! What `ipcns-bench` says when given no benchmark, a wrong one, an
//! argument that is not text or `--help`: what `ipcns bench` said when the
//! benchmarks were part of it (same text, same exit status).

use crate::{TempDir, text};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// `ipcns help bench`'s text (the command prints it without this program).
const USAGE: &str = include_str!("../../../cli/src/bench.txt");

#[test]
fn bad_usage_is_an_error_not_a_panic() {
    let d = TempDir::new("usage");
    for args in [&["nothing"][..], &["semget", "--jsn"], &["semget", "extra"]] {
        let out = d.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with("ipcns: bench: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = d.run(&["nothing"]);
    assert_eq!(
        text(&out.stderr),
        "ipcns: bench: unknown benchmark \"nothing\" \
         (expected contend, fork, idmap, lock, msg, preload, rseq, semget, semop, shm, stress or supervisor)\n"
    );
    // No benchmark: the usage, as an error.
    let out = d.run::<&str>(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), format!("ipcns: {USAGE}"));
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

#[test]
fn an_argument_that_is_not_text_is_named() {
    let d = TempDir::new("utf8");
    let out = d.run(&[OsStr::from_bytes(b"\xff")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        out.stderr,
        b"ipcns: bench: argument \"\\xFF\" is not UTF-8 text\n"
    );
    assert!(out.stdout.is_empty());
}

/// `--help` or `-h` anywhere prints `ipcns help bench`'s text, exit 0.
#[test]
fn help_is_ipcns_help_bench() {
    let d = TempDir::new("help");
    for args in [
        &["--help"][..],
        &["-h"],
        &["semget", "--help"],
        &["nothing", "-h"],
    ] {
        let out = d.run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), USAGE, "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
}

/// `--plot` without a file name, on a benchmark that draws nothing, or
/// into a file that cannot be written: a clear error, exit 1, before
/// anything is measured (so no run's figures are lost), no file left.
#[test]
fn plot_errors_are_said_before_measuring() {
    let d = TempDir::new("plot-errors");
    for (args, want) in [
        (
            &["semget", "--plot"][..],
            "ipcns: bench: --plot needs a file name (--plot FILE.svg)\n".to_string(),
        ),
        (
            &["semget", "--plot="],
            "ipcns: bench: --plot needs a file name (--plot FILE.svg)\n".to_string(),
        ),
        (
            &["semget", "--plot", "--json"],
            "ipcns: bench: --plot needs a file name (--plot FILE.svg)\n".to_string(),
        ),
        (
            &["lock", "--plot", "lock.svg"],
            "ipcns: bench: --plot: bench lock draws no chart (charts: msg, semget, semop)\n"
                .to_string(),
        ),
        (
            &["semget", "--plot", "/nonexistent-dir/semget.svg"],
            "ipcns: bench: cannot write /nonexistent-dir/semget.svg: No such file or directory\n"
                .to_string(),
        ),
    ] {
        let out = d.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&out.stderr), want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // A directory is not a file to write.
    let dir = d.0.display().to_string();
    let out = d.run(&["semop", "--plot", &dir]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("ipcns: bench: cannot write {dir}: Is a directory\n")
    );
    assert!(!d.0.join("lock.svg").exists());
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}
