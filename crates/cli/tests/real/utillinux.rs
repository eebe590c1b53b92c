//! util-linux's own `ipcmk`, `ipcs`, `lsipc` and `ipcrm`: objects made
//! with ipcmk are in the namespace (as the namespace's reader sees them),
//! listed by ipcs and lsipc with their sizes, modes and owners, shown in
//! detail by `ipcs -i`, and removed by ipcrm by id and by key; a second
//! removal fails as util-linux says.
//!
//! ipcs and lsipc list objects by reading /proc/sysvipc/* and the limits
//! from /proc/sys/kernel. Under ipcns those reads go through the library,
//! which serves them from the namespace (checked first by reading
//! /proc/sysvipc/shm under `ipcns run`).

use crate::harness::{self, Mode};
use crate::ipcs::{Row, Tables};
use std::time::Duration;

pub fn test() {
    harness::both(
        "util_linux",
        false,
        || harness::need_programs(&["ipcmk", "ipcs", "ipcrm", "lsipc", "cat"]),
        scenario,
    );
}

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `ipcmk ARGS` and returns the id it printed after `what: `.
fn ipcmk(m: &Mode, args: &[&str], what: &str) -> i32 {
    let out = harness::run(
        m.command("ipcmk").args(args).env("LC_ALL", "C"),
        LIMIT,
        "ipcmk",
    )
    .ok(&format!("{} ipcmk {args:?}", m.name()));
    out.stdout
        .trim()
        .strip_prefix(&format!("{what}: "))
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("ipcmk {args:?} printed {:?}", out.stdout))
}

fn tool(m: &Mode, program: &str, args: &[&str]) -> String {
    harness::run(
        m.command(program).args(args).env("LC_ALL", "C"),
        LIMIT,
        program,
    )
    .ok(&format!("{} {program} {args:?}", m.name()))
    .stdout
}

fn one(rows: &[Row], id: i32, what: &str) -> Row {
    let r: Vec<&Row> = rows.iter().filter(|r| r.id == id).collect();
    assert_eq!(r.len(), 1, "{what} {id} in {rows:?}");
    r[0].clone()
}

fn scenario(m: &Mode, _: &()) -> String {
    let shm = ipcmk(m, &["-M", "8192", "-p", "0640"], "Shared memory id");
    let q = ipcmk(m, &["-Q", "-p", "0600"], "Message queue id");
    let sem = ipcmk(m, &["-S", "4", "-p", "0660"], "Semaphore id");
    let keyed = ipcmk(m, &["-M", "4096"], "Shared memory id");

    // The namespace holds them, read without the library's help.
    let t = Tables::parse(&m.ipcs(&[]));
    let s = one(&t.segments, shm, "segment");
    assert_eq!((s.owner.as_str(), s.perms.as_str()), ("root", "640"));
    assert_eq!((s.num(0), s.num(1)), (8192, 0), "bytes and nattch");
    let k = one(&t.segments, keyed, "segment");
    assert_eq!((k.perms.as_str(), k.num(0)), ("644", 4096));
    let r = one(&t.queues, q, "queue");
    assert_eq!((r.perms.as_str(), r.num(0), r.num(1)), ("600", 0, 0));
    let r = one(&t.sets, sem, "set");
    assert_eq!((r.perms.as_str(), r.num(0)), ("660", 4));
    assert_eq!((t.segments.len(), t.queues.len(), t.sets.len()), (2, 1, 1));

    assert!(
        !m.is_ipcns() || proc_served(m, shm),
        "util_linux [ipcns]: /proc/sysvipc/shm under ipcns run does not show the namespace"
    );
    listing(m, &t, shm, q, sem);
    let listed = "ipcs, ipcs -i, lsipc, lsipc -g agree";

    // Removal by id, then by key; a second removal fails as util-linux says.
    let ids = [shm.to_string(), q.to_string(), sem.to_string()];
    tool(m, "ipcrm", &["-m", &ids[0], "-q", &ids[1], "-s", &ids[2]]);
    let again = harness::run(
        m.command("ipcrm").args(["-m", &ids[0]]).env("LC_ALL", "C"),
        LIMIT,
        "ipcrm",
    );
    assert_eq!(again.status.code(), Some(1), "second ipcrm -m: {again:?}");
    assert_eq!(again.stderr.trim(), format!("ipcrm: invalid id ({shm})"));
    tool(m, "ipcrm", &["-M", &k.key]);
    let gone = harness::run(
        m.command("ipcrm").args(["-M", &k.key]).env("LC_ALL", "C"),
        LIMIT,
        "ipcrm",
    );
    assert_eq!(gone.status.code(), Some(1), "second ipcrm -M: {gone:?}");
    assert_eq!(
        gone.stderr.trim(),
        format!("ipcrm: invalid key ({})", k.key)
    );
    assert!(Tables::parse(&m.ipcs(&[])).is_empty(), "left after ipcrm");
    format!("ipcmk made 4 objects, ipcrm removed them by id and key; {listed}")
}

/// Whether `cat /proc/sysvipc/shm` under this mode lists segment `shm`.
fn proc_served(m: &Mode, shm: i32) -> bool {
    let text = tool(m, "cat", &["/proc/sysvipc/shm"]);
    text.lines()
        .skip(1)
        .any(|l| l.split_whitespace().nth(1) == Some(&shm.to_string()))
}

/// util-linux's listings, run as this mode runs programs, agree with the
/// namespace's contents `t`.
fn listing(m: &Mode, t: &Tables, shm: i32, q: i32, sem: i32) {
    let real = Tables::parse(&tool(m, "ipcs", &[]));
    assert_eq!(real.segments, t.segments, "ipcs -m");
    assert_eq!(real.queues, t.queues, "ipcs -q");
    assert_eq!(real.sets, t.sets, "ipcs -s");

    let detail = tool(m, "ipcs", &["-m", "-i", &shm.to_string()]);
    for want in [
        format!("Shared memory Segment shmid={shm}"),
        "mode=0640\taccess_perms=0640".to_string(),
        "bytes=8192\t".to_string(),
        "nattch=0".to_string(),
        "att_time=Not set".to_string(),
    ] {
        assert!(
            detail.contains(&want),
            "ipcs -m -i: no {want:?} in\n{detail}"
        );
    }

    let lsipc = |args: &[&str]| -> Vec<Vec<String>> {
        tool(m, "lsipc", args)
            .lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let seg = one(&t.segments, shm, "segment");
    let rows = lsipc(&[
        "-m",
        "--raw",
        "--noheadings",
        "--bytes",
        "-o",
        "ID,KEY,PERMS,OWNER,SIZE,NATTCH",
    ]);
    assert!(
        rows.contains(&vec![
            shm.to_string(),
            seg.key.clone(),
            "rw-r-----".into(),
            "root".into(),
            "8192".into(),
            "0".into()
        ]),
        "lsipc -m: {rows:?}"
    );
    let rows = lsipc(&["-q", "--raw", "--noheadings", "-o", "ID,PERMS,OWNER"]);
    assert_eq!(
        rows,
        vec![vec![q.to_string(), "rw-------".into(), "root".into()]],
        "lsipc -q"
    );
    let rows = lsipc(&["-s", "--raw", "--noheadings", "-o", "ID,PERMS,NSEMS"]);
    assert_eq!(
        rows,
        vec![vec![sem.to_string(), "rw-rw----".into(), "4".into()]],
        "lsipc -s"
    );
    // The global view: used counts from the namespace, limits from its sysctls.
    let rows = lsipc(&["-g", "--raw", "--noheadings", "-o", "RESOURCE,USED"]);
    for (res, used) in [
        ("MSGMNI", "1"),
        ("SHMMNI", "2"),
        ("SEMMNI", "1"),
        ("SEMMNS", "4"),
    ] {
        assert!(
            rows.contains(&vec![res.to_string(), used.to_string()]),
            "lsipc -g: no {res} {used} in {rows:?}"
        );
    }
}
