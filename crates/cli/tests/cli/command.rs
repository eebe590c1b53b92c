//! The command as a whole: arguments that are not UTF-8, `--version` and
//! help, nothing created before the command line is known to be good, and
//! error messages that say the real problem once.

use crate::kernel::{Ns, in_fresh_ipc_ns};
use crate::{TempDir, ipcns_os, text};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn os(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// Arguments, the exit status, and standard error.
type Case<'a> = (&'a [&'a [u8]], i32, &'a [u8]);

/// Every place an argument can go, with a byte that is not UTF-8: an
/// error naming the argument (util-linux's own for the three tools), never
/// a panic.
#[test]
fn arguments_that_are_not_utf8() {
    let d = TempDir::new("bytes");
    let cases: &[Case] = &[
        (
            &[b"\xff"],
            1,
            b"ipcns: unknown command \"\\xFF\" ('ipcns help' lists them)\n",
        ),
        (
            &[b"ipcrm", b"shm", b"\xff"],
            1,
            b"ipcrm: invalid id: \xff\n",
        ),
        (
            &[b"ipcrm", b"-m", b"\xff"],
            1,
            b"ipcrm: failed to parse argument: '\xff'\n",
        ),
        (
            &[b"ipcrm", b"-v", b"--all=\xff"],
            1,
            b"ipcrm: unknown argument: \xff\n",
        ),
        (
            &[b"ipcs", b"-\xff"],
            1,
            b"ipcs: invalid option -- '\xff'\nTry 'ipcs --help' for more information.\n",
        ),
        (
            &[b"ipcmk", b"-M", b"1\xff"],
            1,
            b"ipcmk: failed to parse size: '1\xff': Invalid argument\n",
        ),
        (
            &[b"sysctl", b"kernel.msgmni=\xff"],
            1,
            b"ipcns: sysctl: argument \"kernel.msgmni=\\xFF\" is not UTF-8 text\n",
        ),
        (
            &[b"proc", b"\xff"],
            1,
            b"ipcns: proc: argument \"\\xFF\" is not UTF-8 text\n",
        ),
        (
            &[b"bench", b"\xff"],
            1,
            b"ipcns: bench: argument \"\\xFF\" is not UTF-8 text\n",
        ),
        (
            &[b"idmap", b"show", b"\xff"],
            1,
            b"ipcns: invalid pid \"\\xFF\"\n",
        ),
        (
            &[b"idmap", b"map", b"self", b"--uid", b"1\xff"],
            1,
            b"ipcns: --uid: \"1\\xFF\" is not a number from 0 to 4294967295\n",
        ),
    ];
    for (args, code, stderr) in cases {
        let args: Vec<&OsStr> = args.iter().map(|a| os(a)).collect();
        let o = d.run(&args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}");
        assert_eq!(
            text(&o.stderr),
            text(stderr),
            "{args:?}: standard error (lossy)"
        );
        assert_eq!(o.stderr, *stderr, "{args:?}: standard error (bytes)");
    }
    // ipcs ignores operands, as util-linux's does.
    assert!(d.run(&["ns", "create", "default"]).status.success());
    let o = d.run(&[os(b"ipcs"), os(b"-q"), os(b"\xff")]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("\n------ Message Queues --------\n"));
    // Namespace names are text, from every source.
    for args in [
        &[os(b"--ns"), os(b"\xff"), os(b"ipcs")][..],
        &[os(b"ipcs"), os(b"--ns=a\xff")],
        &[os(b"ns"), os(b"create"), os(b"\xff")],
        &[os(b"ns"), os(b"info"), os(b"\xff")],
    ] {
        let o = d.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            text(&o.stderr).starts_with("ipcns: invalid namespace name \""),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
    let o = d
        .command(&["ipcs"])
        .env("IPCNS", os(b"\xff"))
        .output()
        .unwrap();
    assert!(
        text(&o.stderr).starts_with("ipcns: $IPCNS: invalid namespace name \"\\xFF\": "),
        "{}",
        text(&o.stderr)
    );
}

/// A map file whose name is not UTF-8 is read like any other.
#[test]
fn idmap_check_takes_any_file_name() {
    let d = TempDir::new("idmap-name");
    let file = d.path().join(os(b"map\xff"));
    std::fs::write(&file, "0 100000 65536\n").unwrap();
    let o = ipcns_os(&[os(b"idmap"), os(b"check"), file.as_os_str()], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout)
            .ends_with(": valid, 1 extent; Linux keeps up to 5 inline and scans them linearly\n"),
        "{}",
        text(&o.stdout)
    );
    let o = ipcns_os(
        &[
            os(b"idmap"),
            os(b"check"),
            os(b"-"),
            os(b"--parent"),
            file.as_os_str(),
        ],
        "0 0 10\n",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// The three tools on arguments that are not UTF-8, beside util-linux's
/// on the kernel: the same bytes out.
#[test]
fn tools_quote_bytes_as_util_linux_does() {
    in_fresh_ipc_ns("tools_quote_bytes_as_util_linux_does", || {
        let ns = Ns::new();
        let cases: &[(&str, &[&[u8]])] = &[
            ("ipcrm", &[b"shm", b"\xff", b"1"]),
            ("ipcrm", &[b"-m", b"\xff"]),
            ("ipcrm", &[b"-M", b"0x\xff"]),
            ("ipcrm", &[b"-Q", b"0\xff"]),
            ("ipcrm", &[b"--all=\xff"]),
            ("ipcrm", &[b"-v", b"\xfe"]),
            ("ipcrm", &[b"-\xff"]),
            ("ipcrm", &[b"--\xff"]),
            ("ipcrm", &[b"--sh\xff", b"1"]),
            ("ipcs", &[b"-i", b"\xff", b"-q"]),
            ("ipcs", &[b"-q\xff"]),
            ("ipcs", &[b"--x\xff"]),
            ("ipcs", &[b"-m", b"\xff"]),
            ("ipcmk", &[b"-M", b"\xff"]),
            ("ipcmk", &[b"-S", b"2\xff"]),
            ("ipcmk", &[b"-p", b"\xff", b"-Q"]),
            ("ipcmk", &[b"-Q\xc3\xa9"]),
        ];
        for (tool, args) in cases {
            ns.check_bytes(tool, args);
        }
    });
}

/// `--version`, `help TOPIC` and `--help` on every subcommand: exit 0 and
/// the subcommand's help on standard output.
#[test]
fn version_and_help() {
    let d = TempDir::new("help");
    let want = format!("ipcns {}\n", env!("CARGO_PKG_VERSION"));
    for flag in ["--version", "-V"] {
        let o = d.run(&[flag]);
        assert!(o.status.success());
        assert_eq!(text(&o.stdout), want);
    }
    let topics = [
        "idmap", "bench", "ipcs", "ipcmk", "ipcrm", "sysctl", "proc", "ns", "run",
    ];
    for topic in topics {
        let help = d.run(&["help", topic]);
        assert!(help.status.success(), "help {topic}");
        let flag = d.run(&[topic, "--help"]);
        assert!(flag.status.success(), "{topic} --help");
        assert!(!help.stdout.is_empty(), "help {topic}");
        assert_eq!(text(&help.stdout), text(&flag.stdout), "help {topic}");
    }
    // util-linux's own help for the three tools.
    assert!(text(&d.run(&["help", "ipcrm"]).stdout).starts_with("\nUsage:\n ipcrm [options]\n"));
    // The benchmarks' line and help, printed without the ipcns-bench
    // executable (crates/bench/tests checks that it prints the same help).
    assert!(text(&d.run(&["help"]).stdout).contains(
        "bench contend|fork|idmap|lock|msg|preload|rseq|semget|semop|shm|stress|supervisor "
    ));
    assert!(text(&d.run(&["bench", "--help"]).stdout).contains(
        "ipcns bench contend|fork|idmap|lock|msg|preload|rseq|semget|semop|shm|stress|supervisor\n         \
             [--json] [--goals] [--plot FILE.svg]\n"
    ));
    for args in [
        &["ns", "-h"][..],
        &["ns", "create", "--help"],
        &["ns", "list", "--help"],
        &["ns", "info", "-h"],
        &["ns", "check", "--help"],
        &["ns", "remove", "--help"],
        &["idmap", "check", "--help"],
        &["idmap", "show", "-h"],
        &["idmap", "write", "self", "--help"],
        &["bench", "semget", "--help"],
        &["sysctl", "-h"],
        &["proc", "-h"],
        &["--ns", "x", "ns", "info", "--help"],
        &["run", "--strict", "-h"],
        &["--ns", "x", "run", "--help"],
    ] {
        let o = d.run(args);
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).starts_with("usage: ipcns "),
            "{args:?}: {}",
            text(&o.stdout)
        );
    }
    for args in [&["help", "nope"][..], &["help", "ns", "create"]] {
        let o = d.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            text(&o.stderr).contains("help topics: run ipcs"),
            "{args:?}"
        );
    }
    assert!(d.entries().is_empty(), "help made files: {:?}", d.entries());
}

/// Commands that only print help or version, or fail on their command
/// line, leave an empty `IPCNS_DIR` empty: options are read before the
/// namespace is attached (and so created).
#[test]
fn help_and_bad_options_create_nothing() {
    let d = TempDir::new("nothing");
    let cases: &[(&[&str], i32)] = &[
        (&["ipcs", "--bogus"], 1),
        (&["ipcs", "-h"], 0),
        (&["ipcs", "-V"], 0),
        (&["ipcs", "-i", "abc", "-q"], 1),
        (&["ipcs", "-i", "1"], 1),
        (&["ipcs", "--ns"], 1),
        (&["ipcmk"], 1),
        (&["ipcmk", "--help"], 0),
        (&["ipcmk", "-M", "abc"], 1),
        (&["ipcmk", "-Q", "-x"], 1),
        (&["ipcrm"], 0),
        (&["ipcrm", "--help"], 0),
        (&["ipcrm", "-x"], 1),
        (&["ipcrm", "-m", "zz"], 1),
        (&["ipcrm", "-M", "0"], 1),
        (&["ipcrm", "-a=foo"], 1),
        (&["ipcrm", "sem"], 1),
        (&["ipcrm", "msg", "x"], 1),
        (&["sysctl", "--help"], 0),
        (&["sysctl", "--bogus"], 1),
        (&["proc", "--help"], 0),
        (&["proc", "nope"], 1),
        (&["proc"], 1),
        (&["ns", "--help"], 0),
        (&["ns", "info", "--help"], 0),
        (&["ns", "info", "a", "b"], 1),
        (&["ns", "check", "--bogus"], 1),
        (&["ns", "create"], 1),
        (&["ns", "create", "x", "--mode", "999"], 1),
        (&["ns", "bogus"], 1),
        (&["--ns", "bad/name", "ipcs"], 1),
        (&["ipcmk", "--ns", ".hidden", "-Q"], 1),
        (&["run", "--help"], 0),
        (&["run", "--bogus", "true"], 125),
        (&["run", "--mode", "999", "true"], 125),
        (&["run", "--ns", "bad/name", "true"], 125),
    ];
    for (args, code) in cases {
        let o = d.run(args);
        assert_eq!(
            o.status.code(),
            Some(*code),
            "{args:?}: {}",
            text(&o.stderr)
        );
        assert!(d.entries().is_empty(), "{args:?} made {:?}", d.entries());
    }
    // A command that reads it does not make the namespace; ipcmk does.
    assert_eq!(d.run(&["ipcs"]).status.code(), Some(1));
    assert!(d.entries().is_empty(), "ipcs made {:?}", d.entries());
    assert!(d.run(&["ipcmk", "-Q"]).status.success());
    assert_eq!(d.entries(), ["ipcns.default"]);
}

/// A refused open says "Permission denied" once, with the file it was.
#[test]
fn permission_denied_is_said_once() {
    use std::os::unix::fs::PermissionsExt;
    let d = TempDir::new("eacces");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(d.run(&["ipcmk", "-Q"]).status.success());
    let arena = d.path().join("ipcns.default");
    let o = if crate::kernel::is_root() {
        // Root reads any file: ask as uid 1000 instead (the file is 0600).
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=1000", "--regid=1000", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_ipcns"))
            .arg("ipcs")
            .env("IPCNS_DIR", d.path())
            .env_remove("IPCNS");
        match c.output() {
            Ok(o) => o,
            Err(e) => {
                crate::kernel::skip("permission_denied_is_said_once", &format!("setpriv: {e}"));
                return;
            }
        }
    } else {
        std::fs::set_permissions(&arena, std::fs::Permissions::from_mode(0o000)).unwrap();
        d.run(&["ipcs"])
    };
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "ipcns: namespace default: {}: Permission denied\n",
            arena.display()
        )
    );
}

/// A missing `IPCNS_DIR` is named as such (not as a temporary file that
/// is "no such namespace"), and a bad name as a bad name.
#[test]
fn missing_directory_and_bad_names_are_named() {
    let d = TempDir::new("nodir");
    let missing = d.path().join("nope");
    for args in [
        &["ipcs"][..],
        &["ipcmk", "-Q"],
        &["sysctl", "kernel.msgmni"],
        &["proc", "sem"],
        &["ns", "list"],
        &["ns", "info"],
        &["ns", "info", "x"],
        &["ns", "check"],
        &["ns", "check", "x"],
        &["ns", "create", "x"],
        &["ns", "remove", "x"],
    ] {
        let o = d.command(args).env("IPCNS_DIR", &missing).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(
            text(&o.stderr),
            format!(
                "ipcns: {}: the namespace directory ($IPCNS_DIR) does not exist\n",
                missing.display()
            ),
            "{args:?}"
        );
    }
    assert!(!missing.exists());
    for args in [
        &["ns", "info", "bad/name"][..],
        &["ns", "create", ".x"],
        &["ns", "remove", ""],
        &["ipcs", "--ns", "a b"],
    ] {
        let o = d.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert!(
            err.starts_with("ipcns: invalid namespace name \"")
                && ["empty", "allowed", "starts with"]
                    .iter()
                    .any(|why| err.contains(why))
                && !err.contains("not an ipcns arena"),
            "{args:?}: {err}"
        );
    }
    assert!(d.entries().is_empty(), "{:?}", d.entries());
    // A valid name that is not there is "no such namespace".
    let o = d.run(&["ns", "info", "x"]);
    assert_eq!(
        text(&o.stderr),
        format!(
            "ipcns: {}: no such namespace\n",
            d.path().join("ipcns.x").display()
        )
    );
}

/// A command that reads a namespace or changes what is in it (ipcs,
/// ipcrm, proc, sysctl, `ns info`, `ns check` on `--ns`) says that a
/// missing one is missing, exits 1 and makes nothing: a mistyped name
/// used to leave a new empty namespace behind. ipcmk makes it.
#[test]
fn a_missing_namespace_is_named_and_never_made() {
    let d = TempDir::new("typo");
    for args in [
        &["ipcs", "--ns", "nosuch", "-s"][..],
        &["ipcs", "--ns", "nosuch"],
        &["ipcrm", "--ns", "nosuch", "-s", "0"],
        &["sysctl", "--ns", "nosuch", "kernel.msgmni"],
        &["sysctl", "--ns", "nosuch", "kernel.msgmni=100"],
        &["proc", "--ns", "nosuch", "sem"],
        &["ns", "info", "--ns", "nosuch"],
        &["ns", "check", "--ns", "nosuch"],
        &["--ns", "nosuch", "ipcs"],
    ] {
        let o = d.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&o.stdout), "", "{args:?}");
        assert_eq!(
            text(&o.stderr),
            "ipcns: no such namespace: nosuch (ipcns ns list shows them; ipcmk, \
             'ipcns ns create nosuch' or 'ipcns run --ns nosuch' makes one)\n",
            "{args:?}"
        );
        assert!(d.entries().is_empty(), "{args:?}: {:?}", d.entries());
    }
    let o = d.run(&["ipcmk", "--ns", "made", "-Q"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = d.run(&["ipcs", "--ns", "made", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// The user who made a namespace writes its sysctls, as the root of the
/// user namespace that owns a kernel IPC namespace writes its
/// /proc/sys/kernel files (ipc_permissions): a bad value is EINVAL, not
/// EACCES; another user, let into a shared namespace, only reads them.
#[test]
fn the_owner_tunes_its_namespace() {
    use std::os::unix::fs::PermissionsExt;
    if !crate::kernel::is_root() {
        crate::kernel::skip(
            "the_owner_tunes_its_namespace",
            "needs root to act as two users",
        );
        return;
    }
    let d = TempDir::new("owner");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let as_user = |uid: u32, args: &[&str]| {
        let mut c = std::process::Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_ipcns"))
            .args(args)
            .env("IPCNS_DIR", d.path())
            .env("IPCNS_SHARED", "1")
            .env_remove("IPCNS");
        c.output()
    };
    let o = match as_user(1000, &["ns", "create", "own", "--mode", "0666"]) {
        Ok(o) => o,
        Err(e) => {
            crate::kernel::skip("the_owner_tunes_its_namespace", &format!("setpriv: {e}"));
            return;
        }
    };
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = as_user(1000, &["sysctl", "--ns", "own", "kernel.msgmni=100"]).unwrap();
    assert_eq!(
        (o.status.code(), text(&o.stdout), text(&o.stderr)),
        (Some(0), "kernel.msgmni = 100\n".to_string(), String::new())
    );
    let o = as_user(1000, &["sysctl", "--ns", "own", "kernel.msgmni=-5"]).unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "ipcns: kernel.msgmni: EINVAL: Invalid argument\n"
    );
    let o = as_user(1001, &["sysctl", "--ns", "own", "kernel.msgmni=7"]).unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "ipcns: kernel.msgmni: EACCES: Permission denied\n"
    );
    let o = as_user(1001, &["sysctl", "-n", "--ns", "own", "kernel.msgmni"]).unwrap();
    assert_eq!(
        (o.status.code(), text(&o.stdout)),
        (Some(0), "100\n".to_string())
    );
}

/// `ipcns man` is ipcns(1), made from the help texts: man(1) renders it
/// without a warning, and it holds every command's `--help` word for word;
/// `ipcns completions bash|zsh|fish` are scripts their shells accept
/// (each shell checked where it is installed; CI installs them), offering
/// every command and, after `ipcns ns`, its subcommands.
#[test]
fn man_page_and_completions_are_made_from_the_help() {
    let d = TempDir::new("docs");
    let o = d.run(&["man"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = d.path().join("ipcns.1");
    std::fs::write(&page, &o.stdout).unwrap();
    let src = text(&o.stdout);
    for c in [
        "run", "ipcs", "ipcmk", "ipcrm", "sysctl", "proc", "ns", "idmap", "bench",
    ] {
        assert!(
            src.contains(&format!(".SH \"IPCNS {}\"", c.to_uppercase())),
            "{c}"
        );
        let help = text(&d.run(&[c, "--help"]).stdout);
        let first = help.lines().next().unwrap().replace('-', "\\-");
        assert!(src.contains(&first), "{c}: {first:?} not in the page");
    }
    match std::process::Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
    {
        Ok(m) => {
            assert!(m.status.success(), "{}", text(&m.stderr));
            assert_eq!(text(&m.stderr), "", "man warned");
            let shown = text(&m.stdout);
            assert!(
                shown.contains("IPCNS(1)") && shown.contains("ipcns - Linux System V IPC"),
                "{shown}"
            );
        }
        Err(e) => crate::kernel::skip(
            "man_page_and_completions_are_made_from_the_help",
            &format!("man: {e}"),
        ),
    }
    for (shell, check) in [
        ("bash", &["-n"][..]),
        ("zsh", &["-n"]),
        ("fish", &["--no-execute"]),
    ] {
        let o = d.run(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", text(&o.stderr));
        let script = text(&o.stdout);
        for c in ["run", "ipcs", "ns", "man", "completions"] {
            assert!(script.contains(c), "{shell}: {c}");
        }
        assert!(
            script.contains("create list info check remove prune"),
            "{shell}"
        );
        let file = d.path().join(format!("completion.{shell}"));
        std::fs::write(&file, &o.stdout).unwrap();
        match std::process::Command::new(shell)
            .args(check)
            .arg(&file)
            .output()
        {
            Ok(r) => assert!(
                r.status.success(),
                "{shell} refused it: {}",
                text(&r.stderr)
            ),
            Err(e)
                if crate::kernel::is_root() && std::env::var_os("IPCNS_REQUIRE_REAL").is_some() =>
            {
                panic!("{shell}: {e} (CI installs it)")
            }
            Err(e) => crate::kernel::skip(
                "man_page_and_completions_are_made_from_the_help",
                &format!("{shell}: {e}"),
            ),
        }
    }
    let o = d.run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(1));
}
