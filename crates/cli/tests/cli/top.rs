//! `ipcns top`: a reading of a namespace with a busy program (operations
//! per second, totals, a blocked call), as a table and as JSON; its
//! errors.

use crate::{TempDir, text};
use ipcns::abi::{IPC_CREAT, sembuf};
use ipcns::{CreateOptions, Namespace};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn op(v: i16) -> sembuf {
    sembuf {
        sem_num: 0,
        sem_op: v,
        sem_flg: 0,
    }
}

#[test]
fn top_once_shows_the_busy_object() {
    let d = TempDir::new("top");
    let ns = Namespace::create_at(&d.path().join("ipcns.busy"), CreateOptions::default()).unwrap();
    let c = ns.cred().unwrap();
    let busy = ns.semget(&c, 0x70, 1, IPC_CREAT | 0o600).unwrap();
    let idle = ns.semget(&c, 0x71, 1, IPC_CREAT | 0o600).unwrap();
    let q = ns.msgget(&c, 0x72, IPC_CREAT | 0o600).unwrap();
    ns.msgsnd(&c, q, 1, b"twelve bytes", 0).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        // A caller blocked on the idle set, and a loop on the busy one.
        let blocked = sc.spawn(|| ns.semop(&c, idle, &[op(-1)]));
        sc.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = ns.semop(&c, busy, &[op(1)]);
                let _ = ns.semop(&c, busy, &[op(-1)]);
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        let o = d.run(&["top", "busy", "--once", "-d", "0.3"]);
        let j = d.run(&["top", "--ns", "busy", "--once", "-d", "0.2", "--json", "-s"]);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(ns.semop(&c, idle, &[op(1)]), Ok(0));
        assert_eq!(blocked.join().unwrap(), Ok(0));

        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("ipcns top: namespace busy ("), "{out}");
        assert!(lines[0].contains("3 objects, sorted by ops"), "{out}");
        assert!(lines[1].starts_with("TYPE "), "{out}");
        // Busiest first: the loop's set, thousands of operations a second.
        let first: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!((first[0], first[2]), ("sem", "0x70"), "{out}");
        let per_s: f64 = first[5].parse().unwrap();
        let total: u64 = first[6].parse().unwrap();
        assert!(per_s > 1000.0 && total as f64 >= per_s * 0.2, "{out}");
        // The blocked caller on the other set; the queue's message.
        let idle_row = lines
            .iter()
            .find(|l| l.contains(" 0x71 "))
            .expect("the idle set");
        assert_eq!(idle_row.split_whitespace().nth(7), Some("1"), "{out}");
        let q_row = lines
            .iter()
            .find(|l| l.starts_with("msg "))
            .expect("the queue");
        let f: Vec<&str> = q_row.split_whitespace().collect();
        assert_eq!((f[5], f[6], f[9], f[10]), ("0", "1", "1", "12"), "{out}");

        assert!(j.status.success(), "{}", text(&j.stderr));
        let js = text(&j.stdout);
        assert_eq!(js.lines().count(), 1, "{js}");
        assert!(js.starts_with("{\"namespace\":\"busy\",\"time\":"), "{js}");
        assert!(
            js.contains("\"type\":\"sem\",\"id\":0,\"key\":112,"),
            "{js}"
        );
        assert!(js.contains("\"slept\":1,\"waiting\":1,\"nsems\":1"), "{js}");
        assert!(!js.contains("\"type\":\"msg\""), "-s shows sets only: {js}");
    });
}

#[test]
fn top_errors_are_one_line_with_a_hint() {
    let d = TempDir::new("top-errors");
    let o = d.run(&["top", "nosuch", "--once"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with("ipcns: no such namespace: nosuch"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        d.entries().is_empty(),
        "a typo made nothing: {:?}",
        d.entries()
    );
    for (args, said) in [
        (
            &["top", "--once", "--frobnicate"][..],
            "ipcns: top: unknown option \"--frobnicate\"\nTry 'ipcns top --help' for more information.\n",
        ),
        (
            &["top", "-n", "0"],
            "ipcns: top: -n \"0\": not a count of readings (1 or more)\n",
        ),
        (
            &["top", "-d", "0"],
            "ipcns: top: -d \"0\": not an interval from 0.1 to 86400 seconds\n",
        ),
        (
            &["top", "--sort", "size"],
            "ipcns: top: --sort \"size\": not ops, id, waiting, bytes or pid\n",
        ),
    ] {
        let o = d.run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&o.stderr), said, "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let o = d.run(&["top", "--help"]);
    assert!(text(&o.stdout).starts_with("usage: ipcns top "));
}
