//! `ipcns-bench` (what `ipcns bench` runs): the lock, msg, semop and shm
//! benchmarks run end to end (with `IPCNS_BENCH_QUICK=1`, a thousandth of
//! their iterations) and say all their numbers as JSON.

use crate::{TempDir, spreads, text};

#[test]
fn bench_lock_json_has_every_number() {
    let d = TempDir::new("bench-lock");
    let o = d
        .command(&["lock", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
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
        "\"uncontended_ns\":{\"ipcns\":",
        "\"ipcns_min\":",
        "\"glibc_plain_max\":",
        "\"glibc_robust_ns_min\":",
        "\"ipcns_handoffs_per_1000_max\":",
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
        .command(&["lock", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench lock: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    assert_eq!(out.matches("goal: ").count(), 2, "{out}");
    assert!(out.contains("  2 processes (fork) "), "{out}");
    // Every median with its fastest and slowest round.
    for (row, n) in [
        ("  ipcns lock ", 1),
        ("  glibc plain ", 1),
        ("  2 threads ", 4),
        ("  2 processes (fork) ", 4),
    ] {
        let l = out.lines().find(|l| l.starts_with(row)).expect(row);
        assert_eq!(spreads(l), n, "{l}");
    }
    // Standard error is a pipe: no progress line, not a byte of it.
    assert!(!o.stderr.contains(&b'\r'), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("lock: ["), "{}", text(&o.stderr));
    // Without --goals: the same table, no goal lines, no verdicts.
    let o = d
        .command(&["lock"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let plain = text(&o.stdout);
    assert!(plain.starts_with("ipcns bench lock: "), "{plain}");
    assert!(plain.contains("  2 processes (fork) "), "{plain}");
    assert!(!plain.contains("goal"), "{plain}");
    assert!(!plain.contains("MET"), "{plain}");
    assert!(!plain.ends_with("\n\n"), "{plain}");
    // `ipcns help` (its line for bench): crates/cli/tests/cli/command.rs.
    let help = d.run(&["--help"]);
    assert!(
        text(&help.stdout).starts_with(
            "usage: ipcns bench contend|fork|idmap|lock|msg|preload|rseq|semget|semop|shm|stress|supervisor\n         \
             [--json] [--goals] [--plot FILE.svg]\n"
        )
    );
}

/// The kernel half needs unshare(CLONE_NEWIPC): as root every kernel number
/// is there (but the extend row's, unless the kernel was booted with
/// ipcmni_extend); otherwise each says why it is missing and its goal is
/// not measured. Never a made-up number.
#[test]
fn bench_semop_json_has_every_number() {
    let d = TempDir::new("bench-semop");
    let o = d
        .command(&["semop", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\"bench\":\"semop\",\"cpu\":\""), "{out}");
    assert!(out.ends_with("]}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":5,",
        "\"ops_per_round\":1000,",
        "\"noop\":[{\"idx\":[1,2],\"extend\":false,\"ipcns_ns\":",
        "{\"idx\":[1,40],\"extend\":false,\"ipcns_ns\":",
        "{\"idx\":[1,3348],\"extend\":false,\"ipcns_ns\":",
        "{\"idx\":[1,27348],\"extend\":false,\"ipcns_ns\":",
        "{\"idx\":[1,15777204],\"extend\":true,\"ipcns_ns\":",
        "\"ipcns_spread_pct\":",
        "\"ipcns_ns_min\":",
        "\"ipcns_ns_max\":",
        "\"pingpong\":{\"cpus_bound\":",
        "\"trips_per_round\":10,",
        "\"warm_trips\":1,",
        "{\"goal\":\"ipcns >= 10x faster than the kernel per operation at id slots 1 and 2\",\"value\":",
        "{\"goal\":\"ipcns >= 10x faster than the kernel per operation at id slots 1 and 15777204\",\"value\":",
        "{\"goal\":\"ipcns rows within 2% of each other\",\"value\":",
        "{\"goal\":\"ping-pong round trip >= 3x faster than the kernel\",\"value\":",
        // A 40-byte head and 2 bytes per semaphore, in a 64-byte block.
        "\"undo_entry_bytes\":[{\"nsems\":1,\"bytes\":64.000},{\"nsems\":10,\"bytes\":64.000}],",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    // Every ipcns number is measured; a kernel number is a number or null
    // with the reason beside it, and so is each goal on it.
    assert!(!out.contains("\"ipcns_ns\":null"), "{out}");
    assert_eq!(
        out.matches("\"kernel_ns\":null").count(),
        out.matches("\"kernel_missing\":\"").count(),
        "{out}"
    );
    assert_eq!(
        out.matches("\"met\":null").count(),
        out.matches("\"not_measured\":\"").count(),
        "{out}"
    );
    if !out.contains("kernel unavailable") {
        // The kernel ran: only the extend row may lack its number, and only
        // on a kernel booted without ipcmni_extend.
        let missing = out.matches("\"kernel_ns\":null").count();
        assert!(missing <= 1, "{out}");
        assert_eq!(
            missing,
            out.matches("\"kernel_missing\":\"the kernel was booted without ipcmni_extend\"")
                .count(),
            "{out}"
        );
    }
    // The throwaway namespaces are gone.
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

#[test]
fn bench_semop_table() {
    let d = TempDir::new("bench-semop-table");
    let o = d
        .command(&["semop", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench semop: "), "{out}");
    assert!(out.lines().nth(3).unwrap().starts_with("cpu: "), "{out}");
    // Plain words: id slots, no seed numbers or index jargon.
    assert!(out.contains("\nsecond set's id slot "), "{out}");
    for jargon in ["seed", "idx", "&"] {
        assert!(!out.contains(jargon), "{jargon:?} in {out}");
    }
    for row in [
        "2 ",
        "40 ",
        "3348 ",
        "27348 ",
        "15777204 (ipcmni_extend) ",
        "round trip ",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "no row {row} in {out}"
        );
    }
    assert_eq!(out.matches("goal: ").count(), 7, "{out}");
    assert!(
        out.contains("goal: ipcns rows within 2% of each other: "),
        "{out}"
    );
    assert!(
        out.contains("\narena bytes per undo entry: 64 (set of 1), 64 (set of 10)\n"),
        "{out}"
    );
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

/// As semop's: every kernel number is there as root, else each says why it
/// is missing, and so are the goals of the rows that touch nothing
/// (shmat + shmdt, shmget + IPC_RMID). ipcns's shm_nattch counts are
/// Linux's: 3 attaches, 6 in a forked child, 3 after its exit, 0.
#[test]
fn bench_shm_json_has_every_number() {
    let d = TempDir::new("bench-shm");
    let o = d
        .command(&["shm", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\"bench\":\"shm\",\"cpu\":\""), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":5,",
        "\"pairs\":[{\"op\":\"shmat+shmdt\",\"size\":4096,\"pages_written\":0,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmat+shmdt\",\"size\":4096,\"pages_written\":1,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmat+shmdt\",\"size\":65536,\"pages_written\":0,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmat+shmdt\",\"size\":65536,\"pages_written\":16,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmat+shmdt\",\"size\":16777216,\"pages_written\":0,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmat+shmdt\",\"size\":16777216,\"pages_written\":4096,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmget+rmid\",\"size\":4096,\"pages_written\":0,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"shmget+rmid\",\"size\":1048576,\"pages_written\":0,\"pairs_per_round\":10,\"ipcns_ns\":",
        "{\"op\":\"whole life\",\"size\":1048576,\"pages_written\":256,\"pairs_per_round\":10,\"ipcns_ns\":",
        "\"nattch\":{\"steps\":[\"after 3 attaches\",\"in a child forked then\",\
\"after the child's exit\",\"after the 3 detaches\"],\"ipcns\":[3,6,3,0],\"kernel\":",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    assert!(!out.contains("\"ipcns_ns\":null"), "{out}");
    assert_eq!(out.matches("\"ipcns_ns_min\":").count(), 11, "{out}");
    assert_eq!(out.matches("\"ipcns_ns_max\":").count(), 11, "{out}");
    if out.contains("kernel unavailable") {
        assert!(out.ends_with(",\"goals\":[]}\n"), "{out}");
        assert_eq!(out.matches("\"kernel_ns\":null").count(), 11, "{out}");
        assert!(out.contains("\"kernel\":null,\"agree\":null,\"kernel_missing\":\""));
    } else {
        // Three shmat + shmdt rows and three shmget + IPC_RMID rows.
        assert_eq!(out.matches("{\"goal\":").count(), 6, "{out}");
        assert_eq!(out.matches("\"kernel_ns_min\":").count(), 11, "{out}");
        assert!(!out.contains("null"), "{out}");
        assert!(
            out.contains("\"kernel\":[3,6,3,0],\"agree\":true}"),
            "{out}"
        );
    }
    // The throwaway namespaces and their segment files are gone.
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

#[test]
fn bench_shm_table() {
    let d = TempDir::new("bench-shm-table");
    let o = d
        .command(&["shm", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench shm: "), "{out}");
    assert!(out.lines().nth(3).unwrap().starts_with("cpu: "), "{out}");
    for row in [
        "shmat+shmdt  4 KiB          none ",
        "shmat+shmdt  4 KiB       1 x 1 B ",
        "shmat+shmdt  64 KiB         none ",
        "shmat+shmdt  64 KiB     16 x 1 B ",
        "shmat+shmdt  16 MiB         none ",
        "shmat+shmdt  16 MiB   4096 x 1 B ",
        "shmget+rmid  4 KiB          none ",
        "shmget+rmid  1 MiB          none ",
        "whole life   1 MiB     256 x 1 B ",
        "after 3 attaches ",
        "in a child forked then ",
        "after the child's exit ",
        "after the 3 detaches ",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "no row {row} in {out}"
        );
    }
    // ipcns's and (unless missing) the kernel's median with their spread.
    let kernel = usize::from(!out.contains("kernel unavailable"));
    let pairs = ["shmat+", "shmget+", "whole life"];
    for l in out
        .lines()
        .filter(|l| pairs.iter().any(|p| l.starts_with(p)))
    {
        assert_eq!(spreads(l), 1 + kernel, "{l}");
    }
    let goals = out.lines().filter(|l| l.starts_with("goal: ")).count();
    assert!(goals == 6 || out.contains("kernel unavailable"), "{out}");
    assert!(
        out.contains("  ipcns and the kernel agree\n")
            || out.contains("  the kernel's counts are missing"),
        "{out}"
    );
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

#[test]
fn bench_msg_json_and_table() {
    let d = TempDir::new("bench-msg");
    let o = d
        .command(&["msg", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
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
        "\"ipcns_min\":",
        "\"ipcns_rounds\":[",
        "{\"bytes\":8,\"ipcns_ns\":",
        "\"scaling_pairs_per_s\":{\"ipcns_one\":",
        "\"ipcns_two_over_one\":",
        "\"bytes_per_queued_8_byte_message\":32.000,",
        "{\"goal\":\"two pairs on two cpus >= 1.6x the throughput of one pair\",\"value\":",
        "\"burst_scaling_pairs_per_s\":{\"burst\":16,\"ipcns_one\":",
        "{\"goal\":\"two pairs on two cpus, bursts of 16 (heap blocks), >= 1.6x one pair\",\"value\":",
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
        .command(&["msg", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench msg: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    assert!(
        out.contains("arena bytes per queued 8-byte message: 32.0"),
        "{out}"
    );
    assert!(out.contains("  two / one, bursts "), "{out}");
    assert!(out.matches("goal: ").count() >= 1, "{out}");
}

/// `libipcns.so` beside the `ipcns-bench` binary under test: built by
/// cargo (same profile and target directory), since no test of this
/// package makes cargo build a cdylib.
fn preload_lib() -> std::path::PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_ipcns-bench"));
    let profile_dir = bin.parent().expect("profile directory");
    ipcns_testkit::preload::build(profile_dir)
        .unwrap_or_else(|why| panic!("{why}"))
        .to_path_buf()
}

/// `bench preload`: every library and core number measured; the
/// kernel's there as root, else null with the reason; the throwaway
/// namespaces removed.
#[test]
fn bench_preload_json_has_every_number() {
    let lib = preload_lib();
    let d = TempDir::new("bench-preload");
    let o = d
        .command(&["preload", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .env("IPCNS_PRELOAD_LIB", &lib)
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with("{\"bench\":\"preload\",\"cpu\":\""),
        "{out}"
    );
    assert!(out.ends_with("]}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":7,",
        "\"ops\":1000,\"pairs\":300,\"trips\":3,",
        "\"ns\":{\"library\":{\"noop_semop\":",
        "\"core\":{\"noop_semop\":",
        "\"msg_pair_heap\":",
        "{\"goal\":\"no-op semop through libipcns.so >= 10x faster than the kernel\",\"value\":",
        "{\"goal\":\"msgsnd+msgrcv (8 bytes) through libipcns.so >= 10x faster than the kernel\",\"value\":",
        "{\"goal\":\"semaphore ping-pong through libipcns.so >= 3x faster than the kernel\",\"value\":",
        "{\"goal\":\"semget lookup through libipcns.so >= 10x faster than the kernel\",\"value\":",
        "{\"goal\":\"libipcns.so adds <= 5 ns per semop over the core\",\"value\":",
        "{\"goal\":\"libipcns.so adds <= 5 ns per msgsnd or msgrcv over the core\",\"value\":",
        "{\"goal\":\"libipcns.so adds <= 5 ns per semget over the core\",\"value\":",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    let library = &out[out.find("\"library\":{").unwrap()..out.find(",\"core\":").unwrap()];
    assert!(!library.contains("null"), "{out}");
    for f in [
        "noop_semop",
        "noop_semop_heap",
        "msg_pair",
        "msg_pair_heap",
        "semget_lookup",
        "ping_pong",
    ] {
        for g in [
            format!("\"{f}\":"),
            format!("\"{f}_min\":"),
            format!("\"{f}_max\":"),
        ] {
            assert!(library.contains(&g), "no {g} in {library}");
        }
    }
    if out.contains("\"kernel\":null") {
        assert!(!out.contains("\"kernel_skipped\":null"), "{out}");
    } else {
        assert!(out.contains("\"kernel_skipped\":null"), "{out}");
        assert!(
            out.contains("\"kernel_namespace\":\"a fresh IPC namespace"),
            "{out}"
        );
    }
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

#[test]
fn bench_preload_table() {
    let lib = preload_lib();
    let d = TempDir::new("bench-preload-table");
    let o = d
        .command(&["preload", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .env("IPCNS_PRELOAD_LIB", &lib)
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench preload: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    for row in [
        "no-op semop (sembuf on the stack) ",
        "no-op semop (sembuf on the heap) ",
        "msgsnd+msgrcv 8 B, per pair (stack) ",
        "msgsnd+msgrcv 8 B, per pair (heap) ",
        "semget lookup of an existing key ",
        "semaphore ping-pong, per round trip ",
    ] {
        let l = out.lines().find(|l| l.starts_with(row));
        let l = l.unwrap_or_else(|| panic!("no row {row} in {out}"));
        // The library's median with its spread, and the core's and the
        // kernel's where measured.
        assert!(spreads(l) >= 1, "{l}");
    }
    assert_eq!(
        spreads(
            out.lines()
                .find(|l| l.starts_with("no-op semop (sembuf on the stack)"))
                .unwrap()
        ),
        if out.contains("kernel columns skipped") {
            2
        } else {
            3
        },
        "{out}"
    );
    assert_eq!(out.matches("goal: ").count(), 11, "{out}");
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

/// `bench fork`: the four cases measured on every side (plain, an empty
/// preloaded object, the library), the checks
/// passed (SEM_UNDO state and shm_nattch right after the cycles), both
/// goals, the throwaway namespace removed.
#[test]
fn bench_fork_json_and_table() {
    let lib = preload_lib();
    let d = TempDir::new("bench-fork");
    let o = d
        .command(&["fork", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .env("IPCNS_PRELOAD_LIB", &lib)
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("{\"bench\":\"fork\",\"cpu\":\""), "{out}");
    assert!(out.ends_with("]}\n"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    for field in [
        "\"rounds\":7,\"cycles\":2,\"exec_cycles\":1,\"chunk\":10,",
        "{\"case\":\"exit\",\"name\":\"fork+_exit+waitpid\",\"cycles\":2,\"warm\":1,\"plain_us\":{\"median\":",
        "{\"case\":\"exec\",",
        "{\"case\":\"semundo\",",
        "{\"case\":\"shm\",",
        "\"empty_object_us\":{\"median\":",
        "\"library_us\":{\"median\":",
        "\"library_over_plain\":",
        "\"empty_over_plain\":",
        "\"library_over_empty\":",
        "\"mean_median\":",
        "\"round_means\":[",
        "\"checks\":{\"ok\":true,\"failures\":[]}",
        "{\"goal\":\"fork+exit+waitpid under libipcns.so <= 1.10x the plain program\",\"value\":",
        "{\"goal\":\"fork+exec+exit+waitpid under libipcns.so <= 1.10x the plain program\",\"value\":",
    ] {
        assert!(out.contains(field), "no {field} in {out}");
    }
    assert!(!out.contains("null"), "{out}");
    assert!(d.entries().is_empty(), "{:?}", d.entries());

    let o = d
        .command(&["fork", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .env("IPCNS_PRELOAD_LIB", &lib)
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("ipcns bench fork: "), "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("cpu: "), "{out}");
    for row in [
        "1. fork+_exit+waitpid ",
        "2. fork+execve+exit+waitpid ",
        "3. same as 1, SEM_UNDO held ",
        "4. same as 1, 64 KiB shm attached ",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "no row {row} in {out}"
        );
    }
    assert!(out.contains(" emp/pl  lib/emp "), "{out}");
    // plain, empty and library: each median with its fastest and slowest.
    for l in out
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
    {
        assert_eq!(spreads(l), 3, "{l}");
    }
    assert!(!out.contains('%'), "{out}");
    assert!(out.contains("\nchecks: after the cycles "), "{out}");
    assert_eq!(out.matches("goal: ").count(), 2, "{out}");
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}

/// `bench contend`: a row per shape, each with ipcns's throughput (and
/// the kernel's as root), its share of one process's, and the goals.
#[test]
fn bench_contend_json_and_table() {
    let d = TempDir::new("bench-contend");
    let o = d
        .command(&["contend", "--json"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with("{\"bench\":\"contend\",\"cpu\":\""),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    for (shape, n) in [
        ("lock", 1),
        ("lock", 2),
        ("lock", 4),
        ("lock", 8),
        ("queue", 1),
        ("queue", 2),
        ("queue", 4),
    ] {
        let row = format!("{{\"shape\":\"{shape}\",\"n\":{n},\"ipcns_per_s\":");
        assert!(out.contains(&row), "no {row} in {out}");
    }
    assert_eq!(out.matches("\"ipcns_per_s_min\":").count(), 7, "{out}");
    assert_eq!(out.matches("\"ipcns_per_s_max\":").count(), 7, "{out}");
    assert!(out.contains("\"round_ms\":20,"), "{out}");
    let root = effective_uid() == 0;
    if root {
        assert!(out.contains("\"kernel_missing\":null"), "{out}");
        assert_eq!(out.matches("\"kernel_per_s_min\":").count(), 7, "{out}");
        assert!(
            out.contains("{\"goal\":\"2 processes on one semaphore: at least the kernel's throughput\",\"value\":"),
            "{out}"
        );
    } else {
        eprintln!("bench contend: not root, the kernel columns are not checked");
    }
    assert!(
        out.contains("{\"goal\":\"4 producers and 4 consumers on one queue: at least 80% of one's throughput (as a fraction)\",\"value\":"),
        "{out}"
    );
    let o = d
        .command(&["contend", "--goals"])
        .env("IPCNS_BENCH_QUICK", "1")
        .output()
        .expect("run ipcns-bench");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("one semaphore as a lock"), "{out}");
    assert!(
        out.contains("one queue, P producers and P consumers"),
        "{out}"
    );
    assert!(out.contains("goal: 8 processes on one semaphore"), "{out}");
    // A row per shape, ipcns's median with its spread (and the kernel's).
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 7, "{out}");
    for l in rows {
        assert!(spreads(l) >= 1, "{l}");
    }
}

/// The effective uid, as /proc/self/status says it.
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|u| u.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// `--plot FILE.svg`: a quick semget, semop and msg each draw their
/// charts into the file, after the table: an SVG document with every
/// chart's title and the series ipcns (and the kernel's, as root).
#[test]
fn bench_plot_writes_an_svg_of_each_chart() {
    let d = TempDir::new("bench-plot");
    let out_dir = TempDir::new("bench-plot-out");
    for (bench, titles) in [
        (
            "semget",
            &[
                "semget of an existing key (lookup)",
                "semget of a new key (creation)",
            ][..],
        ),
        (
            "semop",
            &["no-op semop on one of two sets (the first at id slot 1)"],
        ),
        (
            "msg",
            &[
                "msgsnd + msgrcv in one process",
                "ping-pong between two processes, 8 bytes each way",
            ],
        ),
    ] {
        let file = out_dir.0.join(format!("{bench}.svg"));
        let o = d
            .command(&[bench, "--plot", file.to_str().unwrap()])
            .env("IPCNS_BENCH_QUICK", "1")
            .output()
            .expect("run ipcns-bench");
        assert!(o.status.success(), "{bench}: {}", text(&o.stderr));
        assert!(
            text(&o.stdout).starts_with(&format!("ipcns bench {bench}: ")),
            "{bench}"
        );
        let svg = std::fs::read_to_string(&file).expect("the plot was written");
        assert!(svg.starts_with("<svg "), "{bench}: {svg}");
        assert!(
            svg.contains("xmlns=\"http://www.w3.org/2000/svg\""),
            "{bench}"
        );
        assert!(svg.trim_end().ends_with("</svg>"), "{bench}");
        assert_eq!(svg.matches("<svg").count(), 1, "{bench}");
        let says = |t: &str| svg.contains(&format!(">\n{t}\n</text>"));
        for t in titles {
            assert!(says(t), "{bench}: no title {t:?} in {svg}");
        }
        assert!(says("ipcns"), "{bench}: no ipcns series");
        assert!(
            svg.matches("<polyline").count() >= titles.len(),
            "{bench}: a line per chart at least"
        );
        if effective_uid() == 0 {
            assert!(says("kernel"), "{bench}: no kernel series");
        }
        // A second run replaces the file rather than appending to it.
        let before = svg.len();
        let o = d
            .command(&[bench, "--json", &format!("--plot={}", file.display())])
            .env("IPCNS_BENCH_QUICK", "1")
            .output()
            .expect("run ipcns-bench");
        assert!(o.status.success(), "{bench}: {}", text(&o.stderr));
        let again = std::fs::read_to_string(&file).unwrap();
        assert_eq!(again.matches("<svg").count(), 1, "{bench}");
        assert!(again.len() < 2 * before, "{bench}");
    }
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}
