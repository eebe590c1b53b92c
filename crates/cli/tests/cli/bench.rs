//! `ipcns bench`: the lock and msg benchmarks run end to end (with
//! `IPCNS_BENCH_QUICK=1`, a thousandth of their iterations) and say all their
//! numbers as JSON.

use crate::{TempDir, text};

#[test]
fn bench_lock_json_has_every_number() {
    let d = TempDir::new("bench-lock");
    let o = d
        .command(&["bench", "lock", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\"bench\":\"lock\",\"cpu\":\""), "{out}");
    assert!(out.ends_with("]}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":",
        "\"pairs_per_round\":20000,",
        "\"acquisitions_per_party\":5000,",
        "\"uncontended_ns\":{\"ipcns\":",
        "\"glibc_robust\":",
        "\"glibc_plain\":",
        "\"uncontended_ipcns_over_glibc_robust\":",
        "\"contended\":{\"cpus_bound\":",
        "\"threads\":{\"ipcns_ns\":",
        // The test binary's child has one thread: the process rows run.
        "\"processes\":{\"ipcns_ns\":",
        "\"glibc_robust_ns\":",
        "\"ipcns_handoffs_per_1000\":",
        "\"counter_exact\":true",
        "{\"goal\":\"uncontended lock+unlock <= 1.0x glibc's robust mutex\",\"value\":",
        "{\"goal\":\"2-thread contended acquisition <= 1.5x glibc's robust mutex\",\"value\":",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    assert!(!out.contains("null"), "{out}");
}

#[test]
fn bench_lock_table_and_usage() {
    let d = TempDir::new("bench-lock-table");
    let o = d
        .command(&["bench", "lock"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench lock: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    assert_eq!(out.matches("goal: ").count(), 2, "{out}");
    assert!(out.contains("  2 processes (fork) "), "{out}");
    let help = d.run(&["bench", "--help"]);
    assert!(text(&help.stdout).contains("ipcns bench idmap|lock|msg|rseq|semget"));
    assert!(text(&d.run(&["help"]).stdout).contains("bench idmap|lock|msg|rseq|semget"));
}

#[test]
fn bench_msg_json_and_table() {
    let d = TempDir::new("bench-msg");
    let o = d
        .command(&["bench", "msg", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\"bench\":\"msg\",\"cpu\":\""), "{out}");
    assert!(out.ends_with("}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":7,",
        "\"pairs_per_round\":200,",
        "\"round_trips_per_round\":50,",
        "\"one_process\":[{\"bytes\":8,\"ipcns_ns\":",
        "{\"bytes\":8192,\"ipcns_ns\":",
        "\"ping_pong_ns\":{\"ipcns\":",
        "\"scaling_pairs_per_s\":{\"ipcns_one\":",
        "\"ipcns_two_over_one\":",
        "\"bytes_per_queued_8_byte_message\":32.000,",
        "{\"goal\":\"two pairs on two cpus >= 1.6x the throughput of one pair\",\"value\":",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    // As root the kernel is measured too (in a fresh IPC namespace);
    // otherwise it says why not.
    if out.contains("\"kernel_skipped\":") {
        assert!(out.contains("\"kernel_ns\":null"), "{out}");
    } else {
        assert!(!out.contains("null"), "{out}");
        assert!(
            out.contains(
                "{\"goal\":\"ping-pong round trip >= 3x faster than the kernel\",\"value\":"
            ),
            "{out}"
        );
    }
    let o = d
        .command(&["bench", "msg"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench msg: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    assert!(
        out.contains("arena bytes per queued 8-byte message: 32.0"),
        "{out}"
    );
    assert!(out.matches("goal: ").count() >= 1, "{out}");
}
