//! `ipcns-bench WHAT [--json]`, which `ipcns bench WHAT [--json]` runs:
//! benchmark programs. Each prints ipcns beside a baseline measured in the
//! same run, with the ratios, in the shape of the seed's table. Medians of
//! several rounds: the machine is shared and noisy.
//!
//! A program of its own, out of the shipped `ipcns` command, because it
//! measures the kernel through the test oracle (`ipcns-oracle`); `ipcns`
//! finds it beside itself or on PATH (crates/cli/src/bench.rs).

pub mod capi;
pub mod contend;
pub mod fork;
pub mod fresh;
pub mod idmap;
pub mod lock;
pub mod msg;
pub mod plot;
pub mod preload;
pub mod progress;
pub mod rseq;
pub mod semget;
pub mod semop;
pub mod shm;
pub mod stats;
pub mod stress;
pub mod supervisor;
mod sys;

use anyhow::{Context, bail};
use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

/// `ipcns help bench`'s text: the command owns it (it prints it without
/// this program), this program prints the same. Not published, so it may
/// read a file of another crate.
pub const USAGE: &str = include_str!("../../cli/src/bench.txt").trim_ascii_end();

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match all_utf8(&args).and_then(|args| run(&args)) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Said as `ipcns` says it: this is `ipcns bench` to its user.
            let _ = writeln!(io::stderr(), "ipcns: {}", message(&e));
            ExitCode::FAILURE
        }
    }
}

/// Every argument as text, or an error naming the first that is not
/// (`bench: argument "\xFF" is not UTF-8 text`, as `ipcns` says it).
fn all_utf8(args: &[OsString]) -> anyhow::Result<Vec<String>> {
    args.iter()
        .map(|a| match a.to_str() {
            Some(s) => Ok(s.to_string()),
            None => bail!("bench: argument {a:?} is not UTF-8 text"),
        })
        .collect()
}

pub fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let Some(what) = args.first() else {
        bail!("{USAGE}");
    };
    // Hidden: the child half of the kernel measurement, run inside a fresh
    // user namespace by `bench idmap` itself.
    if what == contend::KERNEL_CHILD {
        return contend::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == idmap::KERNEL_CHILD {
        return idmap::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == msg::KERNEL_CHILD {
        return msg::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == preload::KERNEL_CHILD {
        return preload::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == semget::KERNEL_CHILD {
        return semget::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == semop::KERNEL_CHILD {
        return semop::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == shm::KERNEL_CHILD {
        return shm::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    // Hidden: `bench supervisor`'s children (under `ipcns run`, and the
    // kernel's).
    if what == supervisor::CHILD {
        return supervisor::child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    let opts = Options::parse(&args[1..])?;
    if opts.plot.is_some()
        && !plot::DRAWN.contains(&what.as_str())
        && BENCHES.contains(&what.as_str())
    {
        bail!(
            "bench: --plot: bench {what} draws no chart (charts: {})",
            plot::DRAWN.join(", ")
        );
    }
    // Opened before the benchmark runs, so that a file that cannot be
    // written is said at once, not after minutes of measuring.
    let mut plot_file = match &opts.plot {
        Some(path) => Some(plot::Output::open(path)?),
        None => None,
    };
    // stress says first whether stress-ng is there.
    if what != "stress" && BENCHES.contains(&what.as_str()) {
        stats::warn_if_busy();
    }
    let none = |()| Vec::new();
    let charts = match what.as_str() {
        "contend" => contend::run(&opts).map(none).context("bench contend"),
        "fork" => fork::run(&opts).map(none).context("bench fork"),
        "idmap" => idmap::run(&opts).map(none).context("bench idmap"),
        "lock" => lock::run(&opts).map(none).context("bench lock"),
        "msg" => msg::run(&opts).context("bench msg"),
        "preload" => preload::run(&opts).map(none).context("bench preload"),
        "rseq" => rseq::run(&opts).map(none).context("bench rseq"),
        "semget" => semget::run(&opts).context("bench semget"),
        "semop" => semop::run(&opts).context("bench semop"),
        "shm" => shm::run(&opts).map(none).context("bench shm"),
        "stress" => stress::run(&opts).map(none).context("bench stress"),
        "supervisor" => supervisor::run(&opts).map(none).context("bench supervisor"),
        other => bail!(
            "bench: unknown benchmark {other:?} (expected contend, fork, idmap, lock, msg, preload, rseq, semget, semop, shm, stress or supervisor)"
        ),
    };
    let charts = match charts {
        Ok(c) => c,
        Err(e) => {
            if let Some(f) = plot_file.take() {
                f.abandon();
            }
            return Err(e);
        }
    };
    if let Some(f) = plot_file {
        f.write(&plot::svg(&charts)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The benchmarks, as `ipcns bench NAME` names them.
const BENCHES: [&str; 12] = [
    "contend",
    "fork",
    "idmap",
    "lock",
    "msg",
    "preload",
    "rseq",
    "semget",
    "semop",
    "shm",
    "stress",
    "supervisor",
];

/// What the options after the benchmark's name ask for.
#[derive(Debug, Default)]
pub struct Options {
    /// `--json`: one line of JSON instead of the table (goals included).
    pub json: bool,
    /// `--goals`: the table ends with a `goal:` line per goal.
    pub goals: bool,
    /// `--plot FILE.svg`: ipcns beside the kernel, drawn into FILE.
    pub plot: Option<std::path::PathBuf>,
}

impl Options {
    /// `[--json] [--goals] [--plot FILE.svg]` (also `--plot=FILE.svg`).
    pub fn parse(args: &[String]) -> anyhow::Result<Options> {
        const EXPECTED: &str = "expected --json, --goals or --plot FILE.svg";
        let mut o = Options::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--json" => o.json = true,
                "--goals" => o.goals = true,
                "--plot" => match it.next() {
                    Some(f) if !f.is_empty() && !f.starts_with("--") => o.plot = Some(f.into()),
                    _ => bail!("bench: --plot needs a file name (--plot FILE.svg)"),
                },
                other => match other.strip_prefix("--plot=") {
                    Some("") => bail!("bench: --plot needs a file name (--plot FILE.svg)"),
                    Some(f) => o.plot = Some(f.into()),
                    None => bail!("bench: unknown option {other:?} ({EXPECTED})"),
                },
            }
        }
        Ok(o)
    }
}

/// Runs this program again as the kernel half `child` (a benchmark's
/// hidden first argument) with `args`; the words of its standard output,
/// or what it said on its standard error.
pub fn kernel_child_words(child: &str, args: &[String]) -> anyhow::Result<Vec<String>> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .arg(child)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim();
        bail!("{}", said.strip_prefix("ipcns: ").unwrap_or(said));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// A throwaway namespace where namespaces live (the per-user directory on
/// /dev/shm, tmpfs), as a user's would; removed with its segment files on
/// drop. Every benchmark measures ipcns in one of these.
pub struct TempNs {
    pub ns: ipcns::Namespace,
    path: std::path::PathBuf,
}

impl TempNs {
    /// `ipcns-bench-TAG-PID-NANOS`, with a heap of `heap_size` bytes,
    /// extend mode if asked.
    pub fn new(tag: &str, heap_size: u64, extend: bool) -> anyhow::Result<TempNs> {
        let path = ipcns::namespace::dir()?.join(format!(
            "ipcns-bench-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        ));
        let ns = ipcns::Namespace::create_at(
            &path,
            ipcns::CreateOptions {
                extend,
                heap_size,
                ..ipcns::CreateOptions::default()
            },
        )?;
        Ok(TempNs { ns, path })
    }

    /// The caller's credentials in the namespace.
    pub fn cred(&self) -> anyhow::Result<ipcns::Cred> {
        Ok((*self.ns.cred()?).clone())
    }
}

impl Drop for TempNs {
    fn drop(&mut self) {
        let _ = ipcns::Namespace::remove_at(&self.path);
    }
}

/// The error and its causes, each said once (as `ipcns` says them: a cause
/// whose text the message above it already includes is not repeated).
fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

/// Writes `text` to standard output (a broken pipe surfaces as an error
/// that `main` treats as success).
fn print_out(text: &str) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
