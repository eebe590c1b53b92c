//! `ipcns bench ARGS...`: the benchmarks are a program of their own,
//! `ipcns-bench` (crates/bench), kept out of this command because they
//! measure the kernel through the test oracle. This runs it in place of
//! `ipcns` (exec: its output and exit status are the command's), found
//! beside the running `ipcns`, else on PATH. The help is printed here, so
//! that `ipcns help bench` and `--help` need no other program.

use anyhow::{Context, bail};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// `ipcns help bench`; `ipcns-bench --help` prints the same file.
pub const USAGE: &str = include_str!("bench.txt").trim_ascii_end();

/// The benchmarks' executable.
const EXE: &str = "ipcns-bench";

/// Prints the help if asked (`-h` or `--help` anywhere, as the benchmarks
/// read their arguments) or the usage as an error if no benchmark is
/// named; otherwise execs `ipcns-bench ARGS...` and returns only if it
/// could not.
pub fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        let named = args.iter().find(|a| !a.starts_with('-'));
        return crate::print_out(&format!(
            "{}\n",
            named
                .and_then(|n| one(n))
                .unwrap_or_else(|| USAGE.to_string())
        ));
    }
    if args.is_empty() {
        bail!("bench: no benchmark named\nTry 'ipcns bench --help' for more information.");
    }
    let beside = beside_ipcns();
    let (exe, on_path) = match &beside {
        Some(p) if p.is_file() => (p.clone(), false),
        // A bare name: looked up on PATH, as execvp does.
        _ => (PathBuf::from(EXE), true),
    };
    let err = Command::new(&exe).args(args).exec();
    if on_path && err.kind() == std::io::ErrorKind::NotFound {
        let dir = beside
            .as_deref()
            .and_then(|p| p.parent())
            .map_or_else(String::new, |d| format!(" ({})", d.display()));
        bail!(
            "bench needs the {EXE} executable beside ipcns{dir} or on PATH: \
             cargo build --release -p {EXE}"
        );
    }
    Err(err).with_context(|| format!("bench: cannot run {}", exe.display()))
}

/// The benchmarks that `--plot` draws (`ipcns-bench`'s `plot::DRAWN`;
/// its tests check that [`USAGE`] names the same).
const DRAWN: [&str; 3] = ["msg", "semget", "semop"];

/// The help of one benchmark: its usage line, its paragraph of [`USAGE`]
/// and the options it takes, or None if there is no such benchmark.
fn one(name: &str) -> Option<String> {
    let mut lines = USAGE.lines().skip(2);
    let plots = DRAWN.contains(&name);
    let mut text = format!(
        "usage: ipcns bench {name} [--json] [--goals]{}\n",
        if plots { " [--plot FILE.svg]" } else { "" }
    );
    let first = lines.find(|l| {
        l.get(2..)
            .is_some_and(|r| r.split_whitespace().next() == Some(name))
    })?;
    text.push_str(first);
    for l in lines.take_while(|l| l.starts_with("          ")) {
        text.push('\n');
        text.push_str(l);
    }
    // The options' paragraph, less --plot's for a benchmark that draws
    // nothing.
    let opts = USAGE.lines().skip_while(|l| !l.starts_with("--json"));
    let mut in_plot = false;
    for l in opts {
        in_plot = l.starts_with("--plot") || (in_plot && l.starts_with(' '));
        if plots || !in_plot {
            text.push('\n');
            text.push_str(l);
        }
    }
    Some(text)
}

/// `ipcns-bench` in the running executable's directory.
fn beside_ipcns() -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.with_file_name(EXE))
}
