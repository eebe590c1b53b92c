//! `bench supervisor` end to end, quick (`IPCNS_BENCH_QUICK=1`): its
//! children under the `ipcns` of this target directory (built here, as
//! `libipcns.so` is), every figure there and positive, the goals, the
//! throwaway namespaces removed. x86-64 only: the supervisor serves no
//! other architecture.
#![cfg(target_arch = "x86_64")]

use crate::{TempDir, spreads, text};
use std::path::{Path, PathBuf};

/// `ipcns` and `libipcns.so` beside the `ipcns-bench` under test (same
/// profile and target directory), built by cargo: no test of this package
/// makes cargo build them.
fn built() -> (PathBuf, PathBuf) {
    let bin = Path::new(env!("CARGO_BIN_EXE_ipcns-bench"));
    let profile_dir = bin.parent().expect("profile directory");
    let lib = ipcns_testkit::preload::build(profile_dir).unwrap_or_else(|why| panic!("{why}"));
    let ipcns = ipcns_testkit::build::artifact(profile_dir, "ipcns-cli", "ipcns")
        .unwrap_or_else(|why| panic!("{why}"));
    (ipcns.to_path_buf(), lib.to_path_buf())
}

/// The number after `"key":` in `json`, if any.
fn number(json: &str, key: &str) -> Option<f64> {
    let at = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = &json[at..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The object that follows `"name":` in `json` (no nested objects).
fn object<'a>(json: &'a str, name: &str) -> &'a str {
    let start = json
        .find(&format!("\"{name}\":{{"))
        .unwrap_or_else(|| panic!("no {name} in {json}"));
    let rest = &json[start..];
    &rest[..=rest.find('}').expect("the object's end")]
}

#[test]
fn bench_supervisor_json_and_table() {
    let (ipcns, lib) = built();
    let d = TempDir::new("bench-supervisor");
    let run = |args: &[&str]| {
        let o = d
            .command(args)
            .env("IPCNS_BENCH_QUICK", "1")
            .env("IPCNS_BIN", &ipcns)
            .env("IPCNS_PRELOAD", &lib)
            .output()
            .expect("run ipcns-bench");
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let out = run(&["supervisor", "--json"]);
    assert!(
        out.starts_with("{\"bench\":\"supervisor\",\"cpu\":\""),
        "{out}"
    );
    assert!(out.ends_with("]}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    let kernel = !out.contains("\"kernel\":null");
    let mut sides = vec!["supervisor", "library", "library_no_filter"];
    if kernel {
        sides.push("kernel");
    } else {
        assert!(!out.contains("\"kernel_skipped\":null"), "{out}");
    }
    for side in sides {
        let o = object(&out, side);
        let mut rows = vec!["noop_semop", "msg_pair", "shm_pair"];
        if side == "kernel" {
            rows.push("ping_pong");
        }
        for row in rows {
            for f in [row.to_string(), format!("{row}_min"), format!("{row}_max")] {
                let v = number(o, &f).unwrap_or_else(|| panic!("no {f} in {o}"));
                assert!(v > 0.0, "{side}.{f} = {v} in {out}");
            }
        }
    }
    for goal in [
        "{\"goal\":\"a served call (no-op semop) costs less than one kernel semaphore ping-pong round trip\",\"value\":",
        "{\"goal\":\"the library's no-op semop under the supervisor's filter stays within 5% (or 5 ns) of the library without it\",\"value\":",
        "{\"goal\":\"the library's msgsnd+msgrcv (8 bytes) under the supervisor's filter stays within 5% (or 5 ns) of the library without it\",\"value\":",
        "{\"goal\":\"the library's shmat+shmdt (4 KiB) under the supervisor's filter stays within 5% (or 5 ns) of the library without it\",\"value\":",
    ] {
        assert!(out.contains(goal), "no {goal} in {out}");
    }

    let out = run(&["supervisor", "--goals"]);
    assert!(out.starts_with("ipcns bench supervisor: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    for row in [
        "no-op semop ",
        "msgsnd+msgrcv 8 B, per pair ",
        "shmat+shmdt 4 KiB, per pair ",
    ] {
        let l = out.lines().find(|l| l.starts_with(row));
        let l = l.unwrap_or_else(|| panic!("no row {row} in {out}"));
        // Supervisor, library with and without the filter, and the kernel.
        assert_eq!(spreads(l), if kernel { 4 } else { 3 }, "{l}");
    }
    assert_eq!(out.matches("goal: ").count(), 4, "{out}");
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}
