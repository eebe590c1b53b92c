//! The command on corrupted namespaces: each arena is populated through the
//! library, corrupted through its file (the core's corruption engine,
//! crates/ipc/tests/it/corrupt.rs), then read and cleared by `ipcns ipcs`,
//! `ipcrm`, `ns info`, `proc` and `sysctl`. Each must exit 0 or 1: never a
//! signal, a panic (101) or a hang.
//!
//! Environment: IPCNS_CLI_FUZZ_CASES (default 100), IPCNS_FUZZ_SEED (as the
//! core's fuzzer), IPCNS_CLI_FUZZ_CASE=N (only case N),
//! IPCNS_FUZZ_MAX_FAILURES (default 5: the run stops there).

#[path = "../../../ipc/tests/it/corrupt.rs"]
mod corrupt;

use corrupt::env_u64;
use ipcns::{CreateOptions, Namespace};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The default seed, the core fuzzer's ("ipcns_fz").
const DEFAULT_SEED: u64 = 0x6970_636e_735f_667a;

/// A command may take this long.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The commands run on each arena, in this order (`ipcrm -a` last but one).
const COMMANDS: &[&[&str]] = &[
    &["ipcs", "-a"],
    &["ipcs", "-u"],
    &["ipcs", "-l"],
    &["ns", "info"],
    &["proc", "sem"],
    &["proc", "msg"],
    &["proc", "shm"],
    &["sysctl"],
    &["ipcrm", "-a"],
    &["ipcs", "-a"],
];

/// `ipcns ARGS --ns NAME` with `IPCNS_DIR=dir`: `Ok(exit code)`, or what
/// went wrong (a signal, a timeout), with the command's standard error.
fn run(dir: &Path, name: &str, args: &[&str]) -> Result<i32, String> {
    let err_path = dir.join("stderr");
    let err_file = std::fs::File::create(&err_path).expect("create the stderr file");
    // Output to /dev/null: a pipe nobody reads could fill and stall it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ipcns"))
        .args(args)
        .arg("--ns")
        .arg(name)
        .env("IPCNS_DIR", dir)
        .env_remove("IPCNS")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file)
        .spawn()
        .expect("run ipcns");
    let start = Instant::now();
    let mut doing = String::new();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for ipcns") {
            break Some(s);
        }
        if start.elapsed() > TIMEOUT {
            // What it was doing: a sleeper in a futex waits for a lock, a
            // runner loops.
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
            let wchan = std::fs::read_to_string(format!("/proc/{}/wchan", child.id()));
            doing = format!(
                " (state {}, wchan {:?})",
                stat.as_deref()
                    .unwrap_or_default()
                    .rsplit_once(") ")
                    .and_then(|(_, r)| r.split(' ').next())
                    .unwrap_or("?"),
                wchan.unwrap_or_default()
            );
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let stderr = match stderr.trim_end() {
        "" => String::new(),
        s => format!(": {}", s.replace('\n', " | ")),
    };
    match status.map(|s| (s.code(), std::os::unix::process::ExitStatusExt::signal(&s))) {
        Some((Some(c @ (0 | 1)), _)) => Ok(c),
        Some((Some(c), _)) => Err(format!("exit {c}{stderr}")),
        Some((None, Some(sig))) => Err(format!("killed by signal {sig}{stderr}")),
        Some((None, None)) => Err(format!("no exit code nor signal{stderr}")),
        None => Err(format!(
            "still running after {TIMEOUT:?}{doing}, killed{stderr}"
        )),
    }
}

#[test]
fn corrupted_namespaces_exit_0_or_1() {
    let seed = env_u64("IPCNS_FUZZ_SEED", DEFAULT_SEED);
    let cases = env_u64("IPCNS_CLI_FUZZ_CASES", 100);
    let max_failures = env_u64("IPCNS_FUZZ_MAX_FAILURES", 5) as usize;
    let scratch = crate::TempDir::new("fuzz");
    let dir = scratch.path();
    let start = Instant::now();
    let (mut runs, mut exit1, mut failures) = (0u64, 0u64, Vec::new());
    let mut arenas = 0;
    let range = match std::env::var("IPCNS_CLI_FUZZ_CASE") {
        Ok(_) => {
            let c = env_u64("IPCNS_CLI_FUZZ_CASE", 0);
            c..c + 1
        }
        Err(_) => 0..cases,
    };
    for case in range {
        // The core fuzzer's cases, shifted so the two explore different ones.
        let mut rng = corrupt::case_rng(seed, case + (1 << 32));
        let name = format!("f{case}");
        let path = dir.join(format!("ipcns.{name}"));
        let opts = CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        };
        let ns = Namespace::create_at(&path, opts).expect("create a namespace");
        corrupt::populate(&ns, &mut rng);
        let regions = corrupt::regions(&ns);
        let corruptions: Vec<String> = (0..1 + rng.below(3))
            .map(|_| corrupt::corrupt(&ns, &path, &regions, &mut rng))
            .collect();
        drop(ns);
        arenas += 1;
        let mut failed = Vec::new();
        for args in COMMANDS {
            runs += 1;
            match run(dir, &name, args) {
                Ok(c) => exit1 += u64::from(c == 1),
                Err(why) => {
                    let hung = why.starts_with("still running");
                    failed.push(format!("ipcns {}: {why}", args.join(" ")));
                    if hung {
                        // The next would most likely hang as long.
                        failed.push("(the remaining commands not run)".to_string());
                        break;
                    }
                }
            }
        }
        if !failed.is_empty() {
            failures.push(format!(
                "case {case} (IPCNS_FUZZ_SEED={seed:#x} IPCNS_CLI_FUZZ_CASE={case}):\n    {}\n    corrupted: {}",
                failed.join("\n    "),
                corruptions.join("; ")
            ));
            if failures.len() >= max_failures {
                break;
            }
        }
        let _ = std::fs::remove_file(&path);
        corrupt::remove_segments(&path);
    }
    drop(scratch);
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!(
            "cli fuzz: {arenas} arenas, {runs} runs ({exit1} exit 1), {} arenas failed; seed {seed:#x}, {:.1} s\n",
            failures.len(),
            start.elapsed().as_secs_f64()
        ),
    );
    assert!(
        failures.is_empty(),
        "ipcns crashed or hung on {} corrupted namespaces{}:\n{}",
        failures.len(),
        if failures.len() >= max_failures {
            " (stopped there)"
        } else {
            ""
        },
        failures.join("\n")
    );
}
