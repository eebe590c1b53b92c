//! `ipcns run` and programs whose interpreter is musl's (`src/run/musl.rs`):
//! C programs built with `musl-gcc` (dynamically linked, interpreter
//! `/lib/ld-musl-ARCH.so.1`) under `ipcns run --strict --private`, where
//! the kernel's System V IPC fails with ENOSYS, so that every success is
//! the musl build of the library's; compared line for line with the same
//! programs on the kernel in a fresh IPC namespace (`unshare --ipc`, as
//! root). And a glibc program exec'ing a musl program and back, in both
//! orders, on one namespace, with nothing said on stderr (neither loader
//! meets the other's build).
//!
//! The `ipcns` under test runs from a directory of its own with a home of
//! its own, so both builds of the library are the ones it carries (the
//! same sources, written out once). Without `musl-gcc` (Debian's
//! `musl-tools`), or when the executable carries no musl build (Rust's
//! target `x86_64-unknown-linux-musl` was not installed when it was
//! built), these tests say so and are skipped, or fail with
//! IPCNS_REQUIRE_KERNEL=1 (CI as root, whose `.ci/run` installs both).

use crate::kernel::{is_root, skip};
use crate::{TempDir, output_within, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A copy of the `ipcns` under test alone in `bin`, with `home` for its
/// carried libraries, and the C programs built here.
struct Setup {
    dir: TempDir,
    exe: PathBuf,
}

impl Setup {
    /// `None` (after saying why) without musl-gcc or a musl build.
    fn new(test: &str) -> Option<Setup> {
        if !Command::new("musl-gcc")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            skip(test, "musl-gcc is not installed (Debian's musl-tools)");
            return None;
        }
        let dir = TempDir::new(&format!("musl-{test}"));
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let exe = bin.join("ipcns");
        std::fs::copy(env!("CARGO_BIN_EXE_ipcns"), &exe).unwrap();
        let s = Setup { dir, exe };
        let plan = s.run(&["--private"]);
        let out = text(&plan.stdout);
        let library = out
            .lines()
            .find(|l| l.starts_with("library:"))
            .unwrap_or_default();
        if !plan.status.success() || !library.contains("musl's ") {
            skip(
                test,
                &format!(
                    "this ipcns carries no musl build of libipcns.so (Rust's target \
                     x86_64-unknown-linux-musl and musl-gcc are needed when it is built): \
                     {library}{}",
                    text(&plan.stderr)
                ),
            );
            return None;
        }
        Some(s)
    }

    /// `ipcns run ARGS` (at most 60 s), the namespaces in the test's
    /// directory, the libraries the executable carries.
    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(&self.exe);
        c.arg("run")
            .args(args)
            .env("HOME", self.dir.path().join("home"))
            .env("IPCNS_DIR", self.dir.path())
            .env_remove("XDG_CACHE_HOME")
            .env_remove("IPCNS_PRELOAD")
            .env_remove("IPCNS_PRELOAD_MUSL")
            .env_remove("LD_PRELOAD")
            .env_remove("IPCNS")
            .env_remove("IPCNS_FD")
            .env_remove("IPCNS_SHARED");
        output_within(&mut c, Duration::from_secs(60)).expect("ipcns run ended")
    }

    /// `tests/c/NAME.c` built with `cc` (and `flags`) into `OUT`.
    fn build(&self, cc: &str, name: &str, out: &str, flags: &[&str]) -> PathBuf {
        build(cc, name, &self.dir.path().join(out), flags)
    }
}

/// `tests/c/NAME.c` built with `cc` (and `flags`) into `out`.
fn build(cc: &str, name: &str, out: &Path, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let o = Command::new(cc)
        .args(["-O1", "-Wall", "-o"])
        .arg(out)
        .arg(&src)
        .args(flags)
        .output()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(
        o.status.success(),
        "{cc} {}: {}",
        src.display(),
        text(&o.stderr)
    );
    out.to_path_buf()
}

/// Whether the kernel runs can be made (root, `unshare --ipc`); says why
/// not otherwise.
fn kernel(test: &str) -> bool {
    if !is_root() {
        skip(test, "the kernel's side needs root (unshare --ipc)");
        return false;
    }
    true
}

/// `unshare --ipc PROG ARGS`: the program on the kernel, alone in a
/// fresh IPC namespace.
fn on_kernel(prog: &Path, args: &[&str]) -> Output {
    let mut c = Command::new("unshare");
    c.arg("--ipc").arg(prog).args(args);
    output_within(&mut c, Duration::from_secs(60)).expect("the program ended")
}

/// The program's calls (semaphores, queues, segments, their *ctl
/// structures in musl's layout, errnos) served by the musl build under
/// `--strict`, as the kernel answers them.
#[test]
fn run_serves_a_musl_program_as_the_kernel_does() {
    const TEST: &str = "run_serves_a_musl_program_as_the_kernel_does";
    let Some(s) = Setup::new(TEST) else {
        return;
    };
    let prog = s.build("musl-gcc", "muslipc", "muslipc", &[]);
    let bytes = std::fs::read(&prog).unwrap();
    assert!(
        bytes.windows(13).any(|w| w == b"/lib/ld-musl-"),
        "{}: not dynamically linked with musl's loader",
        prog.display()
    );
    let p = prog.to_str().unwrap();
    let ours = s.run(&["--strict", "--private", "--", p]);
    assert!(
        ours.status.success(),
        "{TEST}: {}\nstdout:\n{}\nstderr:\n{}",
        ours.status,
        text(&ours.stdout),
        text(&ours.stderr)
    );
    assert_eq!(text(&ours.stderr), "", "{TEST}: something was said");
    let out = text(&ours.stdout);
    assert!(
        out.contains("semget(0x5a10, 3, IPC_CREAT | IPC_EXCL | 0640) = 0\n"),
        "{out}"
    );
    if !kernel(TEST) {
        return;
    }
    let k = on_kernel(&prog, &[]);
    assert!(k.status.success(), "{TEST}: on the kernel: {}", k.status);
    assert_eq!(text(&k.stdout), out, "{TEST}: the kernel, then ipcns run");
}

/// A glibc program execs a musl program, which execs the glibc one again
/// (and the same from musl first), in one `ipcns run --strict --private`:
/// each image served by its own build, on one namespace (objects found
/// by key, messages and the segment's text passed along, the exec'd
/// image's attachment dropped, SEM_UNDO adjustments of images of both C
/// libraries applied at the chain's exit), as on the kernel; and no
/// loader says anything.
#[test]
fn run_shares_one_namespace_across_exec_between_glibc_and_musl() {
    const TEST: &str = "run_shares_one_namespace_across_exec_between_glibc_and_musl";
    let Some(s) = Setup::new(TEST) else {
        return;
    };
    let g = s.build("cc", "cross", "cross-glibc", &["-DLIBC=\"glibc\""]);
    let m = s.build("musl-gcc", "cross", "cross-musl", &["-DLIBC=\"musl\""]);
    let kernel = kernel(TEST);
    for (first, second) in [(&g, &m), (&m, &g)] {
        let (f, sec) = (first.to_str().unwrap(), second.to_str().unwrap());
        let ours = s.run(&["--strict", "--private", "--", f, "0", f, sec]);
        let out = text(&ours.stdout);
        assert!(
            ours.status.success(),
            "{TEST}: {f} first: {}\nstdout:\n{out}\nstderr:\n{}",
            ours.status,
            text(&ours.stderr)
        );
        assert_eq!(
            text(&ours.stderr),
            "",
            "{TEST}: {f} first: something was said"
        );
        assert!(out.contains("  after the chain: value 0\n"), "{out}");
        if kernel {
            let k = on_kernel(first, &["0", f, sec]);
            assert!(k.status.success(), "{TEST}: on the kernel: {}", k.status);
            assert_eq!(
                text(&k.stdout),
                out,
                "{TEST}: {f} first: the kernel, then ipcns run"
            );
        }
    }
}

/// Without a musl build (`$IPCNS_PRELOAD` names glibc's alone), a program
/// whose interpreter is musl's is refused with the reason, exit 125; with
/// `$IPCNS_PRELOAD_MUSL` too, the program gets the pair's entry, whose
/// `x86_64` (the platform) and `$PLATFORM` files are the two libraries.
/// Stand-ins for both: what is checked is `ipcns run`'s choice.
#[test]
fn run_refuses_a_musl_program_without_the_musl_library() {
    let d = TempDir::new("musl-refused");
    let standin = |name: &str| {
        let lib = d.path().join(name);
        std::fs::write(lib.with_extension("c"), "int ipcns_standin_loaded = 1;\n").unwrap();
        let o = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(lib.with_extension("c"))
            .output()
            .expect("run cc (install gcc)");
        assert!(o.status.success(), "{}", text(&o.stderr));
        lib
    };
    let (glibc, musl) = (standin("glibc.so"), standin("musl.so"));
    // A program that names musl's loader as its interpreter (never run).
    let prog = d.path().join("musl-prog");
    std::fs::write(prog.with_extension("c"), "int main(void) { return 0; }\n").unwrap();
    let o = Command::new("cc")
        .arg(format!(
            "-Wl,--dynamic-linker=/lib/ld-musl-{}.so.1",
            std::env::consts::ARCH
        ))
        .arg("-o")
        .arg(&prog)
        .arg(prog.with_extension("c"))
        .output()
        .expect("run cc");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let run = |musl_lib: Option<&Path>, args: &[&str]| {
        let mut c = d.command(&["run"]);
        c.args(args)
            .env("IPCNS_PRELOAD", &glibc)
            .env_remove("IPCNS_PRELOAD_MUSL")
            .env_remove("LD_PRELOAD");
        if let Some(m) = musl_lib {
            c.env("IPCNS_PRELOAD_MUSL", m);
        }
        output_within(&mut c, Duration::from_secs(60)).unwrap()
    };
    let o = run(None, &["--private", "--", prog.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "ipcns: run: {}: its interpreter is musl's (/lib/ld-musl-{}.so.1), and there is \
             no musl build of libipcns.so ($IPCNS_PRELOAD is set and $IPCNS_PRELOAD_MUSL is not)",
            prog.display(),
            std::env::consts::ARCH
        )),
        "{err}"
    );
    // Through PATH and a script's '#!/usr/bin/env' too.
    let script = d.path().join("script");
    std::fs::write(&script, "#!/usr/bin/env musl-prog\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = d.command(&["run", "--private", "--", "script"]);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![d.path().to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    c.env("PATH", std::env::join_paths(dirs).unwrap())
        .env("IPCNS_PRELOAD", &glibc)
        .env_remove("IPCNS_PRELOAD_MUSL");
    let o = output_within(&mut c, Duration::from_secs(60)).unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("its interpreter is musl's"));
    // A glibc program is run as before, with glibc's build alone.
    let o = run(
        None,
        &["--private", "--", "sh", "-c", "echo \"$LD_PRELOAD\""],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("{}\n", glibc.display()));
    // With both: the pair's entry, made beside glibc's build.
    let o = run(
        Some(&musl),
        &["--private", "--", "sh", "-c", "echo \"$LD_PRELOAD\""],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "");
    let entry = PathBuf::from(text(&o.stdout).trim_end());
    assert!(
        entry.ends_with("$PLATFORM/libipcns.so"),
        "{}",
        entry.display()
    );
    let pair = entry.parent().and_then(Path::parent).unwrap();
    assert_eq!(pair.parent(), Some(d.path()));
    let same =
        |a: &Path, b: &Path| std::fs::canonicalize(a).unwrap() == std::fs::canonicalize(b).unwrap();
    assert!(same(&entry, &musl));
    assert!(same(
        &pair.join(std::env::consts::ARCH).join("libipcns.so"),
        &glibc
    ));
}
