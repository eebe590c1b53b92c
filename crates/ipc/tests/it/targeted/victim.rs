//! The victim: a forked child that attaches to a case's arena, makes
//! itself at home (undo entries on the three sets, attachments of both
//! segments, sleepers on S1, Q2 and Q3), says it is ready, and after the
//! hostile write makes every call on the objects, its copies through
//! guarded buffers; then removes them, joins its sleepers and exits.
//!
//! Each call is announced (`call NAME`) and reported with its result, its
//! duration, its limit and the time it waited for a cpu (`done NAME
//! RESULT MICROS LIMIT_MICROS RUNQ_MICROS`, limit 0 for none), so that the
//! parent can name the call a victim died or hung in and judge every
//! bounded call by the time it had (a loaded machine's delays aside).
//! Bounds: a semtimedop's timeout plus [`SLACK`]; IPC_NOWAIT, [`SLACK`];
//! in a case where a live participant keeps a lock (`held`), the lock
//! limit the victim puts on its untimed calls ([`HELD_LIMIT`]) plus
//! [`HELD_SLACK`].
//!
//! Protocol lines to the parent: `ready`, `call`, `done`, `sleeper NAME
//! RESULT MICROS LIMIT_MICROS RUNQ_MICROS`, `stuck NAME WHY`, `unended
//! NAME WHY` (a sleeper left waiting where that is allowed), `underrun
//! NAME`, `rlimit BYTES`, `heap-audit ok|PROBLEM` (after the exit), `end`;
//! a fault or a panic writes its own line.
//!
//! # Safety
//! `touch` writes the pages of an attachment that `shmat` has just
//! returned, no more than the size IPC_STAT reports for it (what a program
//! may write).
#![allow(unsafe_code)]

use super::build::{Built, M1_SIZE, M2_SIZE, S1_N, S2_N, S3_N};
use super::guard::{self, Guarded};
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Cred, Errno, Namespace, SysResult};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// What a bounded call may take beyond its bound.
pub const SLACK: Duration = Duration::from_millis(1500);
/// The lock limit of the untimed calls when a live participant keeps a
/// lock.
pub const HELD_LIMIT: Duration = Duration::from_millis(100);
/// What a call under [`HELD_LIMIT`] may take beyond it: the library
/// promises the limit for all its lock waits together (`with_lock_limit`),
/// and the time a call waits for a cpu is not counted.
pub const HELD_SLACK: Duration = Duration::from_millis(600);
/// The timeout of the sleepers on S1.
const SEM_SLEEP: Duration = Duration::from_millis(1500);
/// The timed calls' timeout.
const TIMED: Duration = Duration::from_millis(10);
/// The most bytes of an attachment the victim writes (one per page).
const TOUCH_CAP: u64 = 256 << 20;
/// The victim's address space margin (RLIMIT_AS above what it maps).
pub const AS_MARGIN: u64 = 2 << 30;

/// How a call is bounded.
#[derive(Clone, Copy)]
enum B {
    /// No bound of its own (under a lock limit in a `held` case).
    Free,
    /// IPC_NOWAIT: within SLACK (under the lock limit too when held).
    NoWait,
    /// IPC_NOWAIT, never under a lock limit: the NOWAIT bound itself.
    Probe,
    /// A timeout (or a bound the call sets itself): within it plus SLACK.
    Within(Duration),
}

#[derive(Clone)]
struct Sink(Arc<UnixStream>);

impl Sink {
    fn line(&self, s: &str) {
        let mut b = String::with_capacity(s.len() + 1);
        b.push_str(s);
        b.push('\n');
        let _ = (&*self.0).write_all(b.as_bytes());
    }
}

fn res<T>(r: &SysResult<T>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) if e.raw() == libc::ETIMEDOUT => "ETIMEDOUT".to_string(),
        Err(e) if e.name() == "E?" => format!("errno{}", e.raw()),
        Err(e) => e.name().to_string(),
    }
}

struct Rec {
    sink: Sink,
    held: bool,
}

impl Rec {
    fn call<T>(&self, name: &str, b: B, f: impl FnOnce() -> SysResult<T>) -> SysResult<T> {
        let wrap = self.held && matches!(b, B::Free | B::NoWait);
        let limit = match b {
            _ if wrap => HELD_LIMIT + HELD_SLACK,
            B::Free => Duration::ZERO,
            B::NoWait | B::Probe => SLACK,
            B::Within(d) => d + SLACK,
        };
        self.sink.line(&format!("call {name}"));
        let (t0, q0) = (Instant::now(), run_delay());
        let r = if wrap {
            ipcns::with_lock_limit(HELD_LIMIT, f)
        } else {
            f()
        };
        let us = t0.elapsed().as_micros();
        let q = run_delay().saturating_sub(q0) / 1000;
        self.sink.line(&format!(
            "done {name} {} {us} {} {q}",
            res(&r),
            limit.as_micros()
        ));
        r
    }

    fn check_canary(&self, name: &str, g: &Guarded) {
        if !g.canary_intact() {
            self.sink.line(&format!("underrun {name}"));
        }
    }
}

/// Nanoseconds the calling thread has waited for a cpu (its run queue
/// delay, /proc/thread-self/schedstat): on a loaded machine, time a call
/// took without running.
fn run_delay() -> u64 {
    schedstat_delay("/proc/thread-self/schedstat")
}

/// [`run_delay`] of thread `tid` of this process.
fn run_delay_of(tid: i32) -> u64 {
    schedstat_delay(&format!("/proc/self/task/{tid}/schedstat"))
}

/// The run queue delay (the second field) of a `schedstat` file.
fn schedstat_delay(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn sop(num: u16, op: i16, flg: i16) -> sembuf {
    sembuf {
        sem_num: num,
        sem_op: op,
        sem_flg: flg,
    }
}

const NW: i16 = IPC_NOWAIT as i16;
const UNDO: i16 = SEM_UNDO;

fn ts(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// A sleeper thread: its name, whether it ended, and by when it must.
struct Sleeper {
    name: &'static str,
    done: Arc<AtomicBool>,
    started: Instant,
    /// Its own bound (a timeout), if it has one.
    bound: Option<Duration>,
    /// The queue whose removal must end its wait (msg sleepers).
    queue: Option<usize>,
    /// Its thread and that thread's run delay when it started (0 until
    /// it runs): `join` does not count its waits for a cpu.
    tid: Arc<AtomicU64>,
    delay0: Arc<AtomicU64>,
}

fn spawn(
    ns: &'static Namespace,
    sink: &Sink,
    name: &'static str,
    bound: Option<Duration>,
    queue: Option<usize>,
    f: impl FnOnce(&'static Namespace) -> SysResult<()> + Send + 'static,
) -> Sleeper {
    let done = Arc::new(AtomicBool::new(false));
    let (d, s) = (done.clone(), sink.clone());
    let started = Instant::now();
    let (tid, delay0) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (tid2, delay2) = (tid.clone(), delay0.clone());
    std::thread::spawn(move || {
        let (t0, q0) = (Instant::now(), run_delay());
        delay2.store(q0, SeqCst);
        // SAFETY: gettid has no arguments.
        tid2.store(unsafe { libc::gettid() } as u64, SeqCst);
        let r = f(ns);
        let limit = bound.map_or(0, |b| (b + SLACK).as_micros());
        let q = run_delay().saturating_sub(q0) / 1000;
        s.line(&format!(
            "sleeper {name} {} {} {limit} {q}",
            res(&r),
            t0.elapsed().as_micros()
        ));
        d.store(true, SeqCst);
    });
    Sleeper {
        name,
        done,
        started,
        bound,
        queue,
        tid,
        delay0,
    }
}

/// The victim's ids, and the set sizes it was shown.
struct Ids {
    sems: [(&'static str, i32, usize); 3],
    queues: [(&'static str, i32); 3],
    segs: [(&'static str, i32, u64); 2],
}

pub fn victim(path: &Path, built: &Built, held: bool, sock: UnixStream) -> i32 {
    crate::support::child_reports_to(sock.try_clone().expect("clone the report socket"));
    guard::catch_faults();
    let sink = Sink(Arc::new(sock.try_clone().expect("clone the report socket")));
    let ns: &'static Namespace = match Namespace::open_at(path) {
        Ok(ns) => Box::leak(Box::new(ns)),
        Err(e) => {
            sink.line(&format!("refused {e}"));
            return 0;
        }
    };
    let me = Cred::root(std::process::id() as i32);
    let ids = Ids {
        sems: [
            ("S1", built.id("s1"), S1_N as usize),
            ("S2", built.id("s2"), S2_N as usize),
            ("S3", built.id("s3"), S3_N as usize),
        ],
        queues: [
            ("Q1", built.id("q1")),
            ("Q2", built.id("q2")),
            ("Q3", built.id("q3")),
        ],
        segs: [
            ("M1", built.id("m1"), M1_SIZE),
            ("M2", built.id("m2"), M2_SIZE),
        ],
    };
    let setup = |what: &str, r: SysResult<i32>| {
        if let Err(e) = r {
            sink.line(&format!("setup-failed {what} {}", e.name()));
        }
    };
    // ---- at home in the healthy arena ----
    for &(_, id, _) in &ids.sems {
        let mut ds = semid64_ds::default();
        setup(
            "IPC_STAT",
            ns.semctl(&me, id, 0, IPC_STAT, SemArg::Ds(&mut ds)),
        );
    }
    let (s1, s2, s3) = (ids.sems[0].1, ids.sems[1].1, ids.sems[2].1);
    setup("undo S1", ns.semop(&me, s1, &[sop(3, 1, UNDO)]));
    setup("undo S2", ns.semop(&me, s2, &[sop(0, 1, UNDO)]));
    setup("undo S3", ns.semop(&me, s3, &[sop(0, 1, UNDO)]));
    let mut attached = Vec::new();
    for &(name, id, _) in &ids.segs {
        match ns.shmat(&me, id, 0, 0) {
            Ok(a) => attached.push((name, a)),
            Err(e) => sink.line(&format!("setup-failed shmat {}", e.name())),
        }
    }
    let mut sleepers = Vec::new();
    let cred = me.clone();
    sleepers.push(spawn(
        ns,
        &sink,
        "T1:semtimedop(S1,-1#1,UNDO)",
        Some(SEM_SLEEP),
        None,
        move |ns| {
            ns.semtimedop(&cred, s1, &[sop(1, -1, UNDO)], Some(&ts(SEM_SLEEP)))
                .map(|_| ())
        },
    ));
    wait_queued(ns, &me, s1, 1);
    let cred = me.clone();
    sleepers.push(spawn(
        ns,
        &sink,
        "T2:semtimedop(S1,0#2)",
        Some(SEM_SLEEP),
        None,
        move |ns| {
            ns.semtimedop(&cred, s1, &[sop(2, 0, 0)], Some(&ts(SEM_SLEEP)))
                .map(|_| ())
        },
    ));
    wait_queued(ns, &me, s1, 2);
    let q2 = ids.queues[1].1;
    let q3 = ids.queues[2].1;
    // Message sleepers have no timeout: their lock waits are bounded, and
    // the queue's removal ends them (or the victim's exit).
    let cred = me.clone();
    sleepers.push(spawn(
        ns,
        &sink,
        "T3:msgrcv(Q2,any)",
        None,
        Some(1),
        move |ns| {
            let mut g = Guarded::new(256);
            ipcns::with_lock_limit(Duration::from_secs(6), || {
                ns.msgrcv(&cred, q2, g.bytes(), 0, 0)
            })
            .map(|_| ())
        },
    ));
    std::thread::sleep(Duration::from_millis(5));
    let cred = me.clone();
    sleepers.push(spawn(
        ns,
        &sink,
        "T5:msgrcv(Q2,type7)",
        None,
        Some(1),
        move |ns| {
            let mut g = Guarded::new(64);
            ipcns::with_lock_limit(Duration::from_secs(6), || {
                ns.msgrcv(&cred, q2, g.bytes(), 7, 0)
            })
            .map(|_| ())
        },
    ));
    let cred = me.clone();
    sleepers.push(spawn(
        ns,
        &sink,
        "T4:msgsnd(Q3,10B)",
        None,
        Some(2),
        move |ns| {
            let mut g = Guarded::new(10);
            ipcns::with_lock_limit(Duration::from_secs(6), || {
                ns.msgsnd(&cred, q3, 4, g.bytes(), 0)
            })
            .map(|_| ())
        },
    ));
    let lim = guard::limit_address_space(AS_MARGIN);
    sink.line(&format!("rlimit {lim}"));
    sink.line("ready");
    let mut go = [0u8; 3];
    if (&*sink.0).read_exact(&mut go).is_err() || &go != b"go\n" {
        return 0;
    }
    // ---- after the hostile write ----
    let rec = Rec {
        sink: sink.clone(),
        held,
    };
    sem_calls(ns, &me, &rec, &ids);
    msg_calls(ns, &me, &rec, &ids);
    shm_calls(ns, &me, &rec, &ids, &attached);
    again(ns, &me, &rec);
    others(ns, &me, &rec);
    // Removal ends every wait left.
    let mut removed = [None; 3];
    for &(name, id, _) in &ids.sems {
        let _ = rec.call(&format!("{name}.IPC_RMID"), B::Free, || {
            ns.semctl(&me, id, 0, IPC_RMID, SemArg::None)
        });
    }
    for (i, &(name, id)) in ids.queues.iter().enumerate() {
        let r = rec.call(&format!("{name}.IPC_RMID"), B::Free, || {
            ns.msgctl(&me, id, IPC_RMID, MsgArg::None)
        });
        if r.is_ok() {
            removed[i] = Some(Instant::now());
        }
    }
    for &(name, id, _) in &ids.segs {
        let _ = rec.call(&format!("{name}.IPC_RMID"), B::Free, || {
            ns.shmctl(&me, id, IPC_RMID, ShmArg::None)
        });
    }
    join(&sink, &sleepers, &removed, held);
    let _ = rec.call("exit_process", B::Free, || ns.exit_process());
    // Its lock waits are bounded by the library (2 s in all, 1 s to
    // freeze the other threads); its work is not.
    let _ = rec.call("exit_ending", B::Within(Duration::from_secs(3)), || {
        ns.exit_ending()
    });
    // The heap after it all (judged where the case's stores left it
    // sound: the library must not have freed anything twice).
    let heap = rec.call("heap-audit", B::Free, || Ok(ns.problems().1));
    let bad = heap.iter().flatten().find(|p| p.starts_with("heap: "));
    sink.line(&format!("heap-audit {}", bad.map_or("ok", |p| p.as_str())));
    sink.line("end");
    0
}

/// Waits (2 s at most) until S1 has `n` sleepers (GETNCNT on 1 plus
/// GETZCNT on 2).
fn wait_queued(ns: &Namespace, me: &Cred, s1: i32, n: i32) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        let c = ns.semctl(me, s1, 1, GETNCNT, SemArg::None).unwrap_or(0)
            + ns.semctl(me, s1, 2, GETZCNT, SemArg::None).unwrap_or(0);
        if c >= n {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits for the sleepers: each within its bound (semtimedop's timeout),
/// or, for a message sleeper, within a sleep slice (1 s) and SLACK of its
/// queue's removal. A sleeper past that is `stuck`; one whose queue could
/// not be removed (or whose lock a live participant keeps) may wait on:
/// `unended`.
fn join(sink: &Sink, sleepers: &[Sleeper], removed: &[Option<Instant>; 3], held: bool) {
    for s in sleepers {
        let deadline = match (s.bound, s.queue.and_then(|q| removed[q])) {
            (Some(b), _) => Some(s.started + b + SLACK),
            (None, Some(t)) => Some(t + Duration::from_secs(1) + SLACK),
            (None, None) => None,
        };
        let mut until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_millis(300));
        // The sleeper's bound counts the time it had, not its waits for a
        // cpu (as the calls' bounds do): a loaded machine extends it.
        for _ in 0..8 {
            while !s.done.load(SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
            let tid = s.tid.load(SeqCst) as i32;
            let (Some(d), false) = (deadline, s.done.load(SeqCst) || tid == 0) else {
                break;
            };
            let waited = run_delay_of(tid).saturating_sub(s.delay0.load(SeqCst));
            let later = d + Duration::from_nanos(waited);
            if later <= until {
                break;
            }
            until = later;
        }
        if s.done.load(SeqCst) {
            continue;
        }
        match deadline {
            Some(_) if !(held && s.queue.is_some()) => {
                let why = if s.bound.is_some() {
                    "past its timeout"
                } else {
                    "its queue was removed"
                };
                sink.line(&format!("stuck {} {why}", s.name));
            }
            Some(_) => sink.line(&format!(
                "unended {} a live participant keeps a lock",
                s.name
            )),
            None => sink.line(&format!("unended {} its queue was not removed", s.name)),
        }
    }
}

fn sem_calls(ns: &Namespace, me: &Cred, rec: &Rec, ids: &Ids) {
    for &(name, id, shown) in &ids.sems {
        let c = |what: &str| format!("{name}.{what}");
        // The size seen before the write sizes the C caller's array (an
        // IPC_STAT now would show the victim the new size).
        getall_raw(ns, me, rec, id, &c(&format!("GETALL(raw,{shown})")), shown);
        let mut g = Guarded::new(shown * 2);
        let _ = rec.call(&c(&format!("GETALL(slice,{shown})")), B::Free, || {
            ns.semctl(me, id, 0, GETALL, SemArg::Array(&mut g.u16s()))
        });
        rec.check_canary(&c("GETALL(slice)"), &g);
        setall_raw(ns, me, rec, id, &c(&format!("SETALL(raw,{shown})")), shown);
        for (cmd, cname) in [
            (GETVAL, "GETVAL"),
            (GETPID, "GETPID"),
            (GETNCNT, "GETNCNT"),
            (GETZCNT, "GETZCNT"),
        ] {
            for n in [0, 1, 2, shown as i32 - 1] {
                let _ = rec.call(&c(&format!("{cname}#{n}")), B::Free, || {
                    ns.semctl(me, id, n, cmd, SemArg::None)
                });
            }
        }
        let _ = rec.call(&c("SETVAL#0=3"), B::Free, || {
            ns.semctl(me, id, 0, SETVAL, SemArg::Val(3))
        });
        let ops: [(&str, Vec<sembuf>, B); 7] = [
            (
                "semop(+1#0,UNDO,NOWAIT)",
                vec![sop(0, 1, UNDO | NW)],
                B::Probe,
            ),
            (
                "semop(-1#0,UNDO,NOWAIT)",
                vec![sop(0, -1, UNDO | NW)],
                B::NoWait,
            ),
            ("semop(0#4,NOWAIT)", vec![sop(4, 0, NW)], B::NoWait),
            ("semop(+1#1,NOWAIT)", vec![sop(1, 1, NW)], B::NoWait),
            ("semop(-1#2,NOWAIT)", vec![sop(2, -1, NW)], B::NoWait),
            (
                "semop(+2#0,-1#1,NOWAIT)",
                vec![sop(0, 2, NW), sop(1, -1, NW)],
                B::NoWait,
            ),
            (
                "semop(+1#last,UNDO,NOWAIT)",
                vec![sop(shown as u16 - 1, 1, UNDO | NW)],
                B::NoWait,
            ),
        ];
        for (what, o, b) in ops {
            let _ = rec.call(&c(what), b, || ns.semop(me, id, &o));
        }
        let t = ts(TIMED);
        let _ = rec.call(&c("semtimedop(-1#4,10ms)"), B::Within(TIMED), || {
            ns.semtimedop(me, id, &[sop(4, -1, 0)], Some(&t))
        });
        let _ = rec.call(&c("semtimedop(-1#4,UNDO,10ms)"), B::Within(TIMED), || {
            ns.semtimedop(me, id, &[sop(4, -1, UNDO)], Some(&t))
        });
        let zero = ts(Duration::ZERO);
        let _ = rec.call(
            &c("semtimedop(-9#0,0ms)"),
            B::Within(Duration::ZERO),
            || ns.semtimedop(me, id, &[sop(0, -9, 0)], Some(&zero)),
        );
        for n in [1, 2] {
            let _ = rec.call(&c(&format!("GETNCNT#{n}")), B::Free, || {
                ns.semctl(me, id, n, GETNCNT, SemArg::None)
            });
        }
        // Shown again: a caller trusts the size it is told now.
        let mut ds = semid64_ds::default();
        let now = rec
            .call(&c("IPC_STAT"), B::Free, || {
                ns.semctl(me, id, 0, IPC_STAT, SemArg::Ds(&mut ds))
            })
            .ok()
            .map(|_| ds.sem_nsems as usize);
        if let Some(n) = now.filter(|&n| n != shown && n <= 1 << 16) {
            getall_raw(ns, me, rec, id, &c(&format!("GETALL(raw,{n})")), n);
            setall_raw(ns, me, rec, id, &c(&format!("SETALL(raw,{n})")), n);
        }
        ds.sem_perm.mode = 0o660;
        let _ = rec.call(&c("IPC_SET"), B::Free, || {
            ns.semctl(me, id, 0, IPC_SET, SemArg::Ds(&mut ds))
        });
    }
}

fn getall_raw(ns: &Namespace, me: &Cred, rec: &Rec, id: i32, name: &str, n: usize) {
    let mut g = Guarded::new(n * 2);
    let mut raw = g.raw_u16();
    let _ = rec.call(name, B::Free, || {
        ns.semctl(me, id, 0, GETALL, SemArg::Array(&mut raw))
    });
    rec.check_canary(name, &g);
}

fn setall_raw(ns: &Namespace, me: &Cred, rec: &Rec, id: i32, name: &str, n: usize) {
    let mut g = Guarded::new(n * 2);
    g.u16s().iter_mut().for_each(|v| *v = 2);
    let mut raw = g.raw_u16();
    let _ = rec.call(name, B::Free, || {
        ns.semctl(me, id, 0, SETALL, SemArg::Array(&mut raw))
    });
}

fn msg_calls(ns: &Namespace, me: &Cred, rec: &Rec, ids: &Ids) {
    for &(name, id) in &ids.queues {
        let c = |what: &str| format!("{name}.{what}");
        let mut ds = msqid64_ds::default();
        let _ = rec.call(&c("IPC_STAT"), B::Free, || {
            ns.msgctl(me, id, IPC_STAT, MsgArg::Ds(&mut ds))
        });
        // Q2's receivers and Q3's sender are served first.
        let sends: &[(i64, usize, B)] = match name {
            "Q2" => &[(1, 5, B::Probe), (7, 40, B::NoWait)],
            _ => &[],
        };
        for &(t, len, b) in sends {
            let mut g = Guarded::new(len);
            let _ = rec.call(&c(&format!("msgsnd(type{t},{len}B,NOWAIT)")), b, || {
                ns.msgsnd(me, id, t, g.bytes(), IPC_NOWAIT)
            });
        }
        let recvs: [(i64, usize, i32, &str); 6] = [
            (0, 128, 0, "msgrcv(any,128B,NOWAIT)"),
            (0, 8, MSG_NOERROR, "msgrcv(any,8B,NOERROR,NOWAIT)"),
            (0, 0, MSG_COPY, "msgrcv(COPY#0,0B,NOWAIT)"),
            (1, 8192, MSG_COPY, "msgrcv(COPY#1,8KiB,NOWAIT)"),
            (-2, 8192, 0, "msgrcv(<=2,8KiB,NOWAIT)"),
            (3, 8192, MSG_EXCEPT, "msgrcv(!3,8KiB,NOWAIT)"),
        ];
        for (i, (t, len, fl, what)) in recvs.into_iter().enumerate() {
            let mut g = Guarded::new(len);
            let b = if i == 0 && name == "Q3" {
                B::Probe
            } else {
                B::NoWait
            };
            let _ = rec.call(&c(what), b, || {
                ns.msgrcv(me, id, g.bytes(), t, fl | IPC_NOWAIT)
            });
            rec.check_canary(&c(what), &g);
        }
        for len in [0usize, 17, 3000, 8000] {
            let mut g = Guarded::new(len);
            g.bytes().iter_mut().for_each(|b| *b = 0x6d);
            let _ = rec.call(
                &c(&format!("msgsnd(type2,{len}B,NOWAIT)")),
                B::NoWait,
                || ns.msgsnd(me, id, 2, g.bytes(), IPC_NOWAIT),
            );
        }
        let mut g = Guarded::new(8192);
        let _ = rec.call(&c("msgrcv(type2,8KiB,NOWAIT)"), B::NoWait, || {
            ns.msgrcv(me, id, g.bytes(), 2, IPC_NOWAIT)
        });
        rec.check_canary(&c("msgrcv(type2)"), &g);
        let mut ds = msqid64_ds::default();
        if rec
            .call(&c("IPC_STAT"), B::Free, || {
                ns.msgctl(me, id, IPC_STAT, MsgArg::Ds(&mut ds))
            })
            .is_ok()
        {
            ds.msg_perm.mode = 0o660;
            // The size limit as it was made (a hostile one is not kept).
            ds.msg_qbytes = ds.msg_qbytes.min(16384);
            let _ = rec.call(&c("IPC_SET"), B::Free, || {
                ns.msgctl(me, id, IPC_SET, MsgArg::Ds(&mut ds))
            });
        }
    }
}

fn shm_calls(ns: &Namespace, me: &Cred, rec: &Rec, ids: &Ids, attached: &[(&str, usize)]) {
    for &(name, id, _) in &ids.segs {
        let c = |what: &str| format!("{name}.{what}");
        let mut ds = shmid64_ds::default();
        let size = rec
            .call(&c("IPC_STAT"), B::Free, || {
                ns.shmctl(me, id, IPC_STAT, ShmArg::Ds(&mut ds))
            })
            .ok()
            .map(|_| ds.shm_segsz);
        if let Ok(addr) = rec.call(&c("shmat"), B::Free, || ns.shmat(me, id, 0, 0)) {
            if let Some(size) = size {
                let len = size.min(TOUCH_CAP) as usize;
                rec.sink
                    .line(&format!("call {name}.write-attachment({size}B)"));
                // SAFETY: the module doc: shmat mapped the segment at
                // `addr`; the victim writes what IPC_STAT says it holds.
                unsafe { guard::touch(addr, len) };
                rec.sink
                    .line(&format!("done {name}.write-attachment({size}B) ok 0 0 0"));
            }
            let _ = rec.call(&c("shmdt"), B::Free, || ns.shmdt(me, addr));
        }
        for &(n, addr) in attached {
            if n == name {
                let _ = rec.call(&c("shmdt(attached-before)"), B::Free, || ns.shmdt(me, addr));
            }
        }
        for (cmd, what) in [(SHM_LOCK, "SHM_LOCK"), (SHM_UNLOCK, "SHM_UNLOCK")] {
            let _ = rec.call(&c(what), B::Free, || ns.shmctl(me, id, cmd, ShmArg::None));
        }
        let mut ds = shmid64_ds::default();
        let _ = rec.call(&c("IPC_STAT"), B::Free, || {
            ns.shmctl(me, id, IPC_STAT, ShmArg::Ds(&mut ds))
        });
    }
}

/// New objects of every kind made, used and removed after the write (the
/// heap's lists, the process table, the registries at work).
fn again(ns: &Namespace, me: &Cred, rec: &Rec) {
    if let Ok(id) = rec.call("new-set.semget(10)", B::Free, || {
        ns.semget(me, 0, 10, IPC_CREAT | 0o600)
    }) {
        let _ = rec.call("new-set.semop(+1#9,UNDO,NOWAIT)", B::NoWait, || {
            ns.semop(me, id, &[sop(9, 1, UNDO | NW)])
        });
        getall_raw(ns, me, rec, id, "new-set.GETALL(raw,10)", 10);
        let _ = rec.call("new-set.IPC_RMID", B::Free, || {
            ns.semctl(me, id, 0, IPC_RMID, SemArg::None)
        });
    }
    if let Ok(id) = rec.call("new-queue.msgget", B::Free, || {
        ns.msgget(me, 0, IPC_CREAT | 0o600)
    }) {
        let mut g = Guarded::new(100);
        let _ = rec.call("new-queue.msgsnd(100B,NOWAIT)", B::NoWait, || {
            ns.msgsnd(me, id, 5, g.bytes(), IPC_NOWAIT)
        });
        let _ = rec.call("new-queue.msgrcv(100B,NOWAIT)", B::NoWait, || {
            ns.msgrcv(me, id, g.bytes(), 0, IPC_NOWAIT)
        });
        rec.check_canary("new-queue.msgrcv", &g);
        let _ = rec.call("new-queue.IPC_RMID", B::Free, || {
            ns.msgctl(me, id, IPC_RMID, MsgArg::None)
        });
    }
    if let Ok(id) = rec.call("new-segment.shmget(8192)", B::Free, || {
        ns.shmget(me, 0, 8192, IPC_CREAT | 0o600)
    }) {
        if let Ok(addr) = rec.call("new-segment.shmat", B::Free, || ns.shmat(me, id, 0, 0)) {
            // SAFETY: as in shm_calls: 8192 bytes just attached.
            unsafe { guard::touch(addr, 8192) };
            let _ = rec.call("new-segment.shmdt", B::Free, || ns.shmdt(me, addr));
        }
        let _ = rec.call("new-segment.IPC_RMID", B::Free, || {
            ns.shmctl(me, id, IPC_RMID, ShmArg::None)
        });
    }
}

/// The namespace-wide calls: *_STAT by index, the INFO commands, the
/// audit and the reaper.
fn others(ns: &Namespace, me: &Cred, rec: &Rec) {
    for idx in 0..4 {
        let mut sd = semid64_ds::default();
        let _ = rec.call(&format!("SEM_STAT#{idx}"), B::Free, || {
            ns.semctl(me, idx, 0, SEM_STAT, SemArg::Ds(&mut sd))
        });
        let mut md = msqid64_ds::default();
        let _ = rec.call(&format!("MSG_STAT#{idx}"), B::Free, || {
            ns.msgctl(me, idx, MSG_STAT, MsgArg::Ds(&mut md))
        });
        let mut hd = shmid64_ds::default();
        let _ = rec.call(&format!("SHM_STAT#{idx}"), B::Free, || {
            ns.shmctl(me, idx, SHM_STAT, ShmArg::Ds(&mut hd))
        });
    }
    let mut si = seminfo::default();
    let _ = rec.call("SEM_INFO", B::Free, || {
        ns.semctl(me, 0, 0, SEM_INFO, SemArg::Info(&mut si))
    });
    let mut mi = msginfo::default();
    let _ = rec.call("MSG_INFO", B::Free, || {
        ns.msgctl(me, 0, MSG_INFO, MsgArg::Info(&mut mi))
    });
    let mut hi = shm_info::default();
    let _ = rec.call("SHM_INFO", B::Free, || {
        ns.shmctl(me, 0, SHM_INFO, ShmArg::ShmInfo(&mut hi))
    });
    let _ = rec.call("check", B::Free, || ns.check().map_err(|_| Errno::EUCLEAN));
    let _ = rec.call("reap_exited", B::Free, || ns.reap_exited());
}
