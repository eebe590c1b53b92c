//! The corruption fuzzer: namespaces populated with objects of every kind
//! are corrupted through the arena file (corrupt.rs), then a forked child
//! attaches and runs every library call on them. Errors are the expected
//! answers; a signal, a panic or a child still running after the deadline
//! is a failure.
//!
//! Half the arenas also get sleepers before the corruption: forked
//! children blocked in semop on the healthy arena, then killed, so that
//! their records stay queued. The bytes they changed (queue heads, waiter
//! records, saved operations) become extra regions, and at least one
//! corruption of such an arena lands there: random bytes, or a link
//! pointed at a record (cycles, shared tails). The child's semops never
//! wait without limit: IPC_NOWAIT on every operation, or a 1 ms timeout.
//!
//! Environment: IPCNS_FUZZ_CASES (default 2000), IPCNS_FUZZ_SEED (a fixed
//! default, so CI is repeatable), IPCNS_FUZZ_CASE=N (only case N, to
//! reproduce one), IPCNS_FUZZ_MAX_FAILURES (default 5: the run stops
//! there), IPCNS_FUZZ_TIMEOUT_MS (default 5000).

use crate::corrupt::{self, IPC_PRIVATE, Made, env_u64, getall, setall};
use crate::sleepers::{add_sleepers, corrupt_sleepers};
use crate::support::{self, TestNs};
use ipcns::Mech;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Namespace, SysResult};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The default seed ("ipcns_fz").
pub const DEFAULT_SEED: u64 = 0x6970_636e_735f_667a;

/// What the calls of one child returned.
#[derive(Default)]
struct Tally {
    calls: u64,
    ok: u64,
    errs: BTreeMap<String, u64>,
}

impl Tally {
    fn t<T>(&mut self, r: SysResult<T>) -> Option<T> {
        self.calls += 1;
        match r {
            Ok(v) => {
                self.ok += 1;
                Some(v)
            }
            Err(e) => {
                *self.errs.entry(e.name().to_string()).or_default() += 1;
                None
            }
        }
    }

    /// `check()`: its violations are counted as errors named `check-failed`.
    fn check<T>(&mut self, r: Result<T, String>) {
        self.calls += 1;
        match r {
            Ok(_) => self.ok += 1,
            Err(_) => *self.errs.entry("check-failed".to_string()).or_default() += 1,
        }
    }

    fn send(&self, sink: &UnixStream) {
        let mut s = format!("calls {}\nok {}\n", self.calls, self.ok);
        for (e, n) in &self.errs {
            s.push_str(&format!("err {e} {n}\n"));
        }
        let _ = (&*sink).write_all(s.as_bytes());
    }

    fn add(&mut self, report: &str) {
        for line in report.lines() {
            let w: Vec<&str> = line.split(' ').collect();
            match w.as_slice() {
                ["calls", n] => self.calls += n.parse::<u64>().unwrap_or(0),
                ["ok", n] => self.ok += n.parse::<u64>().unwrap_or(0),
                ["err", e, n] => {
                    *self.errs.entry(e.to_string()).or_default() += n.parse::<u64>().unwrap_or(0);
                }
                _ => {}
            }
        }
    }
}

/// One case's result.
struct Outcome {
    corruptions: Vec<String>,
    /// Exit code, `-signal`, or what the child was doing at the deadline.
    status: Result<i32, String>,
    report: String,
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGTRAP => "SIGTRAP",
        _ => "?",
    }
}

impl Outcome {
    /// What went wrong, if anything.
    fn failure(&self, timeout: Duration) -> Option<String> {
        // A panic's message, else what the child wrote to standard error.
        let said = self.report.lines().find_map(|l| l.strip_prefix("panic "));
        let stderr: Vec<&str> = self
            .report
            .lines()
            .filter(|l| {
                !["calls ", "ok ", "err ", "refused "]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .collect();
        let panic = match said {
            Some(m) => m.to_string(),
            None if stderr.is_empty() => "no message".to_string(),
            None => format!("stderr: {}", stderr.join(" | ")),
        };
        match &self.status {
            Ok(0) => None,
            Err(doing) => Some(format!("still running after {timeout:?} ({doing}), killed")),
            Ok(101) => Some(format!("panicked: {panic}")),
            Ok(s) if *s < 0 => Some(format!(
                "killed by signal {} ({}); {panic}",
                -s,
                signal_name(-s)
            )),
            Ok(c) => Some(format!("exit {c}: {panic}")),
        }
    }
}

/// Creates, populates and corrupts one namespace, then runs the calls on
/// it in a child with a deadline.
fn run_case(seed: u64, case: u64, timeout: Duration) -> Outcome {
    let mut rng = corrupt::case_rng(seed, case);
    let t = TestNs::with(
        "fuzz",
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    );
    let _segments = corrupt::SegmentFiles(t.path().to_path_buf());
    let made = corrupt::populate(&t.ns, &mut rng);
    let (sleepers, mut corruptions) = if rng.chance(1, 2) {
        add_sleepers(&t, &made, &mut rng)
    } else {
        (Vec::new(), Vec::new())
    };
    let regions = corrupt::regions(&t.ns);
    // From here on this process never reads the arena again.
    for k in 0..1 + rng.below(3) {
        corruptions.push(if !sleepers.is_empty() && (k == 0 || rng.chance(1, 3)) {
            corrupt_sleepers(&t.ns, t.path(), &sleepers, &mut rng)
        } else {
            corrupt::corrupt(&t.ns, t.path(), &regions, &mut rng)
        });
    }
    let (mut mine, theirs) = UnixStream::pair().expect("socketpair");
    let path = t.path().to_path_buf();
    let pid = support::fork_child(move || child(&path, &made, theirs));
    let status = support::wait_child_deadline(pid, timeout);
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    Outcome {
        corruptions,
        status,
        report,
    }
}

/// The forked child: attach, run every call, report the tally. Exits 0
/// whatever the calls return.
fn child(path: &Path, made: &Made, sink: UnixStream) -> i32 {
    support::child_reports_to(sink.try_clone().expect("clone the report socket"));
    let ns = match Namespace::open_at(path) {
        Ok(ns) => ns,
        Err(e) => {
            let _ = writeln!(&sink, "refused {e}");
            return 0;
        }
    };
    let mut c = Tally::default();
    exercise(&ns, made, &mut c);
    c.send(&sink);
    0
}

fn exercise(ns: &Namespace, made: &Made, c: &mut Tally) {
    let pid = std::process::id() as i32;
    let root = Cred::root(pid);
    let user = Cred::user(pid, 1000, 1000, vec![]);
    let sems = sem_calls(ns, &root, &user, made, c);
    let msgs = msg_calls(ns, &root, &user, made, c);
    let shms = shm_calls(ns, &root, &user, made, c);
    text_calls(ns, &root, &user, c);
    c.check(ns.check());
    let _ = ns.regions();
    let _ = ns.heap_in_use();
    for (i, &id) in sems.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        let who = if i % 4 == 0 { &root } else { &user };
        c.t(ns.semctl(who, id, 0, IPC_RMID, SemArg::None));
    }
    for &id in msgs.iter().step_by(2) {
        c.t(ns.msgctl(&root, id, IPC_RMID, MsgArg::None));
    }
    for &id in shms.iter().step_by(2) {
        c.t(ns.shmctl(&root, id, IPC_RMID, ShmArg::None));
    }
    again(ns, &root, c);
    c.check(ns.check());
}

/// Keys to look up that name no object.
fn absent(made: &Made) -> Vec<i32> {
    let mut v: Vec<i32> = made.gone.iter().copied().filter(|&k| k != 0).collect();
    v.push(0x7eed_0001);
    v
}

fn sem_calls(ns: &Namespace, root: &Cred, user: &Cred, made: &Made, c: &mut Tally) -> Vec<i32> {
    let excl = IPC_CREAT | IPC_EXCL | 0o600;
    for &(_, k, n) in made.sems.iter().filter(|s| s.1 != IPC_PRIVATE) {
        c.t(ns.semget(root, k, 0, 0));
        c.t(ns.semget(root, k, n, 0o600));
        c.t(ns.semget(root, k, n + 1, 0));
        c.t(ns.semget(root, k, 1, excl));
        c.t(ns.semget(user, k, 0, 0o600));
    }
    for k in absent(made) {
        c.t(ns.semget(root, k, 1, 0));
    }
    c.t(ns.semget(root, IPC_PRIVATE, 0, IPC_CREAT | 0o600));
    c.t(ns.semget(root, IPC_PRIVATE, 100_000, IPC_CREAT | 0o600));
    let mut ids: Vec<i32> = made.sems.iter().map(|s| s.0).collect();
    for idx in 0..64 {
        for cmd in [SEM_STAT, SEM_STAT_ANY] {
            let mut ds = semid64_ds::default();
            ids.extend(c.t(ns.semctl(root, idx, 0, cmd, SemArg::Ds(&mut ds))));
            c.t(ns.semctl(user, idx, 0, cmd, SemArg::Ds(&mut ds)));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    for (k, &id) in ids.iter().enumerate() {
        semops_on(ns, root, user, id, k < 3, c);
        sem_on(ns, root, user, id, c);
        semops_on(ns, root, user, id, false, c);
    }
    let mut si = seminfo::default();
    for cmd in [IPC_INFO, SEM_INFO] {
        c.t(ns.semctl(root, 0, 0, cmd, SemArg::Info(&mut si)));
    }
    c.t(ns.semctl(root, 0, 0, 99, SemArg::None));
    ids
}

fn sem_on(ns: &Namespace, root: &Cred, user: &Cred, id: i32, c: &mut Tally) {
    let mut ds = semid64_ds::default();
    c.t(ns.semctl(user, id, 0, IPC_STAT, SemArg::Ds(&mut ds)));
    c.t(ns.semctl(root, id, 0, IPC_STAT, SemArg::Ds(&mut ds)));
    for semnum in [-1, 0, 1, 5, 6, 7, 29, 39, 40, 1 << 20] {
        for cmd in [GETVAL, GETPID, GETNCNT, GETZCNT] {
            c.t(ns.semctl(root, id, semnum, cmd, SemArg::None));
        }
    }
    for (semnum, val) in [(0, 1), (5, 32767), (29, 7), (39, 2), (0, -1), (0, 40000)] {
        c.t(ns.semctl(root, id, semnum, SETVAL, SemArg::Val(val)));
    }
    let mut buf = [0u16; 64];
    c.t(getall(ns, root, id, &mut buf));
    c.t(getall(ns, root, id, &mut buf[..1]));
    c.t(getall(ns, user, id, &mut buf));
    let mut vals = [3u16; 64];
    c.t(setall(ns, root, id, &mut vals));
    c.t(setall(ns, root, id, &mut vals[..0]));
    c.t(setall(ns, user, id, &mut vals));
    ds.sem_perm.mode = 0o666;
    c.t(ns.semctl(user, id, 0, IPC_SET, SemArg::Ds(&mut ds)));
    c.t(ns.semctl(root, id, 0, IPC_SET, SemArg::Ds(&mut ds)));
}

/// semop and semtimedop on a set, then its counts. Never an unbounded
/// wait: a corrupt value can make even an increment block, so every
/// operation of an untimed call carries IPC_NOWAIT; the timed calls wait
/// 1 ms (only for the first sets: each costs its millisecond).
fn semops_on(ns: &Namespace, root: &Cred, user: &Cred, id: i32, timed: bool, c: &mut Tally) {
    let nw = IPC_NOWAIT as i16;
    let sop = |num: u16, op: i16, flg: i16| sembuf {
        sem_num: num,
        sem_op: op,
        sem_flg: flg,
    };
    for n in [0u16, 1, 5, 29, 39, 40, u16::MAX] {
        for v in [-1, 0, 1, 2, 32767, i16::MIN] {
            c.t(ns.semop(root, id, &[sop(n, v, nw)]));
        }
        c.t(ns.semop(user, id, &[sop(n, 1, nw)]));
        c.t(ns.semop(user, id, &[sop(n, 0, nw)]));
    }
    c.t(ns.semop(root, id, &[sop(0, 1, nw), sop(1, -1, nw), sop(0, -1, nw)]));
    c.t(ns.semop(root, id, &[sop(0, 2, nw), sop(0, 0, nw), sop(5, 1, nw)]));
    c.t(ns.semop(root, id, &[sop(1, 1, nw), sop(0, 1, nw), sop(0, -2, nw)]));
    c.t(ns.semop(root, id, &vec![sop(0, 0, nw); 600]));
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    c.t(ns.semtimedop(root, id, &[sop(0, i16::MIN, 0)], Some(&zero)));
    if timed {
        let ms = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        c.t(ns.semtimedop(root, id, &[sop(0, i16::MIN, 0)], Some(&ms)));
        c.t(ns.semtimedop(root, id, &[sop(1, 1, 0), sop(0, i16::MIN, 0)], Some(&ms)));
    }
    for n in [0, 1, 5] {
        c.t(ns.semctl(root, id, n, GETNCNT, SemArg::None));
        c.t(ns.semctl(root, id, n, GETZCNT, SemArg::None));
    }
}

fn msg_calls(ns: &Namespace, root: &Cred, user: &Cred, made: &Made, c: &mut Tally) -> Vec<i32> {
    let excl = IPC_CREAT | IPC_EXCL | 0o600;
    for &(_, k) in made.msgs.iter().filter(|q| q.1 != IPC_PRIVATE) {
        c.t(ns.msgget(root, k, 0));
        c.t(ns.msgget(root, k, excl));
        c.t(ns.msgget(user, k, 0o600));
    }
    for k in absent(made) {
        c.t(ns.msgget(root, k, 0));
    }
    let mut ids: Vec<i32> = made.msgs.iter().map(|q| q.0).collect();
    for idx in 0..64 {
        for cmd in [MSG_STAT, MSG_STAT_ANY] {
            let mut ds = msqid64_ds::default();
            ids.extend(c.t(ns.msgctl(root, idx, cmd, MsgArg::Ds(&mut ds))));
            c.t(ns.msgctl(user, idx, cmd, MsgArg::Ds(&mut ds)));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    for &id in &ids {
        let mut ds = msqid64_ds::default();
        c.t(ns.msgctl(user, id, IPC_STAT, MsgArg::Ds(&mut ds)));
        c.t(ns.msgctl(root, id, IPC_STAT, MsgArg::Ds(&mut ds)));
        ds.msg_perm.mode = 0o666;
        c.t(ns.msgctl(user, id, IPC_SET, MsgArg::Ds(&mut ds)));
        c.t(ns.msgctl(root, id, IPC_SET, MsgArg::Ds(&mut ds)));
    }
    let mut mi = msginfo::default();
    for cmd in [IPC_INFO, MSG_INFO] {
        c.t(ns.msgctl(root, 0, cmd, MsgArg::Info(&mut mi)));
    }
    c.t(ns.msgctl(root, 0, 99, MsgArg::None));
    ids
}

fn shm_calls(ns: &Namespace, root: &Cred, user: &Cred, made: &Made, c: &mut Tally) -> Vec<i32> {
    let excl = IPC_CREAT | IPC_EXCL | 0o600;
    for &(_, k, size) in made.shms.iter().filter(|m| m.1 != IPC_PRIVATE) {
        c.t(ns.shmget(root, k, 0, 0));
        c.t(ns.shmget(root, k, size, 0o600));
        c.t(ns.shmget(root, k, size + 1, 0));
        c.t(ns.shmget(root, k, 1, excl));
        c.t(ns.shmget(user, k, 0, 0o600));
    }
    for k in absent(made) {
        c.t(ns.shmget(root, k, 1, 0));
    }
    c.t(ns.shmget(root, IPC_PRIVATE, 0, IPC_CREAT | 0o600));
    let mut ids: Vec<i32> = made.shms.iter().map(|m| m.0).collect();
    for idx in 0..64 {
        for cmd in [SHM_STAT, SHM_STAT_ANY] {
            let mut ds = shmid64_ds::default();
            ids.extend(c.t(ns.shmctl(root, idx, cmd, ShmArg::Ds(&mut ds))));
            c.t(ns.shmctl(user, idx, cmd, ShmArg::Ds(&mut ds)));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    for &id in &ids {
        let mut ds = shmid64_ds::default();
        c.t(ns.shmctl(user, id, IPC_STAT, ShmArg::Ds(&mut ds)));
        c.t(ns.shmctl(root, id, IPC_STAT, ShmArg::Ds(&mut ds)));
        for who in [user, root] {
            for cmd in [SHM_LOCK, SHM_UNLOCK] {
                c.t(ns.shmctl(who, id, cmd, ShmArg::None));
            }
        }
        ds.shm_perm.mode = 0o666;
        c.t(ns.shmctl(user, id, IPC_SET, ShmArg::Ds(&mut ds)));
        c.t(ns.shmctl(root, id, IPC_SET, ShmArg::Ds(&mut ds)));
    }
    let mut info = shminfo64::default();
    c.t(ns.shmctl(root, 0, IPC_INFO, ShmArg::Info(&mut info)));
    let mut si = shm_info::default();
    c.t(ns.shmctl(root, 0, SHM_INFO, ShmArg::ShmInfo(&mut si)));
    c.t(ns.shmctl(root, 0, 99, ShmArg::None));
    ids
}

/// /proc/sysvipc text and the sysctls, read and written.
fn text_calls(ns: &Namespace, root: &Cred, user: &Cred, c: &mut Tally) {
    for m in Mech::ALL {
        c.t(ns.proc_text(root, m));
        c.t(ns.proc_text(user, m));
    }
    for name in ipcns::SYSCTLS {
        c.t(ns.sysctl_read(name));
    }
    c.t(ns.sysctl_read("nosuch"));
    for (name, value) in [
        ("sem_next_id", "3"),
        ("msg_next_id", "5"),
        ("shm_next_id", "7"),
        ("msgmni", "100"),
        ("sem", "250 32000 32 128"),
        ("shmmax", "1234567"),
        ("msgmnb", "-1"),
        ("shm_rmid_forced", "1"),
        ("shm_rmid_forced", "0"),
    ] {
        c.t(ns.sysctl_write(root, name, value));
    }
    c.t(ns.sysctl_write(user, "msgmni", "5"));
}

/// Objects of every kind created, used and removed once more.
fn again(ns: &Namespace, root: &Cred, c: &mut Tally) {
    for i in 0..4 {
        for key in [IPC_PRIVATE, 0x5eed_0000 + i] {
            let n = 1 + i * 12;
            if let Some(id) = c.t(ns.semget(root, key, n, IPC_CREAT | 0o600)) {
                let mut v = vec![1u16; n as usize];
                c.t(setall(ns, root, id, &mut v));
                c.t(getall(ns, root, id, &mut v));
                c.t(ns.semctl(root, id, n - 1, SETVAL, SemArg::Val(2)));
                c.t(ns.semctl(root, id, n - 1, GETVAL, SemArg::None));
                c.t(ns.semctl(root, id, 0, IPC_RMID, SemArg::None));
            }
            if let Some(id) = c.t(ns.msgget(root, key, IPC_CREAT | 0o600)) {
                c.t(ns.msgctl(root, id, IPC_RMID, MsgArg::None));
            }
            if let Some(id) = c.t(ns.shmget(root, key, 4096, IPC_CREAT | 0o600)) {
                c.t(ns.shmctl(root, id, IPC_RMID, ShmArg::None));
            }
        }
    }
}

#[test]
fn corrupted_arenas_give_errors_never_crashes() {
    let seed = env_u64("IPCNS_FUZZ_SEED", DEFAULT_SEED);
    let cases = env_u64("IPCNS_FUZZ_CASES", 2000);
    let max_failures = env_u64("IPCNS_FUZZ_MAX_FAILURES", 5) as usize;
    let timeout = Duration::from_millis(env_u64("IPCNS_FUZZ_TIMEOUT_MS", 5000));
    let range = match std::env::var("IPCNS_FUZZ_CASE") {
        Ok(_) => {
            let c = env_u64("IPCNS_FUZZ_CASE", 0);
            c..c + 1
        }
        Err(_) => 0..cases,
    };
    let start = Instant::now();
    let (mut arenas, mut refused, mut crashed, mut timeouts) = (0u64, 0u64, 0u64, 0u64);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for case in range {
        let o = run_case(seed, case, timeout);
        arenas += 1;
        refused += u64::from(o.report.lines().any(|l| l.starts_with("refused ")));
        tally.add(&o.report);
        if let Some(why) = o.failure(timeout) {
            if o.status.is_err() {
                timeouts += 1;
            } else {
                crashed += 1;
            }
            failures.push(format!(
                "case {case} (IPCNS_FUZZ_SEED={seed:#x} IPCNS_FUZZ_CASE={case}): {why}\n    corrupted: {}",
                o.corruptions.join("; ")
            ));
            if failures.len() >= max_failures {
                break;
            }
        }
    }
    let errs: Vec<String> = tally.errs.iter().map(|(e, n)| format!("{e} {n}")).collect();
    let _ = writeln!(
        std::io::stderr(),
        "fuzz: {arenas} arenas ({refused} refused at attach), {} calls ({} ok; {}), \
         {crashed} crashed, {timeouts} timed out; seed {seed:#x}, {:.1} s",
        tally.calls,
        tally.ok,
        errs.join(", "),
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} corrupted arenas crashed or hung the library{}:\n{}",
        failures.len(),
        if failures.len() >= max_failures {
            " (stopped there)"
        } else {
            ""
        },
        failures.join("\n")
    );
}
