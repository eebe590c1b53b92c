//! Chaos of semaphores: worker processes pass tokens between the
//! semaphores of three sets while a driver kills one of them with SIGKILL
//! at random moments, thousands of times, and forks a replacement. Two
//! kills in five are aimed: at a worker the driver has just seen begin a
//! call that posts (a waker, in `update_queue` and the set's journal).
//! No SEM_UNDO (ENOSYS today).
//!
//! # What the workers do
//! Take k tokens (`[-k a]`, `[-1 a, -1 b]`, `[0 b, -1 a]`) blocking, with a
//! short semtimedop timeout or with IPC_NOWAIT; put them elsewhere in a
//! separate call (`[+k a]`, `[+1 a, +1 b]`); move tokens inside a set in
//! one call (`[-1 a, +1 b]`, `[+1 b, -1 a]`, `[-1 a, -1 b, +2 c]`), so that
//! a half-applied array shows; wait for zero; read (GETALL, GETVAL,
//! GETNCNT, GETZCNT, GETPID, IPC_STAT), checking what one reader can.
//!
//! # The invariant, exactly
//! Every completed operation conserves tokens: the values of all
//! semaphores plus the tokens in the workers' hands are the initial total.
//! Each worker keeps one word in a ledger (a `MAP_SHARED` mapping made
//! before forking): its hand and, while a call is under way, the call
//! (stored before the call, then a fence); the call's end and the new hand
//! are one store after it. A worker killed with a call under way is in a
//! window: the call may or may not have completed, which a ledger alone
//! can only bound. The driver resolves each exactly: after the kill it
//! stops the survivors at a safe point (an odd pause epoch in the ledger,
//! and SIGUSR1 to break their waits: semop fails with EINTR), then reads
//! the values (locking a set rolls a dead holder's journal forward). The
//! victim's call is then the only unknown, and the equation must say
//! "not done" or "done": taking k, 0 or +k in its hand; putting k, 0 or
//! -k; anything else, 0. Other answers are tokens created or destroyed.
//! The answer is final: every waker has returned, and wakers drop
//! sleepers that are gone (a dead sleeper completed later shows at a later
//! pause).
//!
//! At each pause, with every survivor parked (no one sleeps): each value
//! within 0..=total; every sleeper queue, read from the arena file, free
//! of cycles and of records that are no live sleeper's (the run stops at
//! once then: the driver's own posts could hang); GETNCNT and GETZCNT 0 on
//! every semaphore (a dead sleeper must not linger); the victim's hand put
//! back on random semaphores by the driver raises the values by exactly
//! that much (no dead sleeper takes a post); `check()` passes. At the end
//! the workers leave at a safe point and the parent checks it all again,
//! then makes a last round of semops. Findings are collected, not fatal at
//! once, so that one run reports every kind it meets; a hang (a worker
//! that does not park in 10 s) ends the run with the arena's queues.
//!
//! The tests after it reproduce what it found, each in its smallest
//! scenario.
//!
//! IPCNS_CHAOS_KILLS (default 3500: 20-40 s in debug), IPCNS_CHAOS_SEED,
//! IPCNS_CHAOS_WORKERS (default 5, at most 15); when a run stops early,
//! IPCNS_CHAOS_HOLD (seconds to leave the workers for a debugger) and
//! IPCNS_CHAOS_KEEP=1 (a copy of the arena).

use crate::corrupt::{Rng, env_u64, getall};
use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::{CreateOptions, Cred, Errno, Namespace};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

/// Semaphores per set: the first two fit the slot's inline array, the
/// third is on the heap.
const SIZES: [u16; 3] = [4, 5, 9];
/// Tokens a worker holds at most.
const MAX_HAND: u64 = 4;
/// How often the driver signals a worker that has not parked yet.
const SIGNAL_EVERY: Duration = Duration::from_millis(12);

// Ledger words: three for the driver, then a block per worker slot.
/// The pause epoch: odd while the driver wants every worker parked.
const PAUSE: usize = 0;
/// Nonzero: parked workers leave.
const QUIT: usize = 1;
/// The tokens in circulation: the initial total, moved by the driver
/// after a finding of tokens created or destroyed (reported once).
const TOTAL: usize = 2;
const SLOTS: usize = 8;
const SLOT_WORDS: usize = 8;
// A slot's words.
/// The hand and the call under way ([`encode`]).
const STATE: usize = 0;
/// The pause epoch at which the worker parked.
const PARKED: usize = 1;
/// Calls that completed.
const OPS: usize = 2;
/// Calls that ended in EAGAIN (IPC_NOWAIT, timeouts).
const AGAIN: usize = 3;
/// Calls that ended in EINTR (the driver's pauses).
const INTR: usize = 4;
/// Locks the worker took over from dead holders (`ipcns::recoveries()`
/// less what it inherited), as last published.
const RECOV: usize = 5;

#[derive(Clone, Copy)]
struct Ledger(&'static [AtomicU64]);

impl Ledger {
    fn new(slots: usize) -> Ledger {
        Ledger(support::shared_words(SLOTS + slots * SLOT_WORDS))
    }
    fn ctl(self, w: usize) -> &'static AtomicU64 {
        &self.0[w]
    }
    fn slot(self, s: usize, w: usize) -> &'static AtomicU64 {
        &self.0[SLOTS + s * SLOT_WORDS + w]
    }
}

/// The forms of a worker's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Take,
    TakeTwo,
    TakeIfZero,
    Put,
    PutTwo,
    Move,
    MoveBack,
    MoveThree,
    Zero,
    Read,
}

const SHAPES: [Shape; 10] = [
    Shape::Take,
    Shape::TakeTwo,
    Shape::TakeIfZero,
    Shape::Put,
    Shape::PutTwo,
    Shape::Move,
    Shape::MoveBack,
    Shape::MoveThree,
    Shape::Zero,
    Shape::Read,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Block,
    Timed,
    NoWait,
}

/// A call of a worker: what the ledger holds while it is under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    shape: Shape,
    k: u64,
    set: usize,
    /// a, b, c (for a read, `a` picks the command).
    sems: [u16; 3],
    mode: Mode,
}

impl Call {
    /// What the call does to the hand when it completes.
    fn delta(&self) -> i64 {
        match self.shape {
            Shape::Take | Shape::TakeTwo | Shape::TakeIfZero => self.k as i64,
            Shape::Put | Shape::PutTwo => -(self.k as i64),
            _ => 0,
        }
    }

    fn sops(&self) -> Vec<sembuf> {
        let [a, b, c] = self.sems;
        let k = self.k as i16;
        let flg = if self.mode == Mode::NoWait {
            IPC_NOWAIT as i16
        } else {
            0
        };
        let op = |n: u16, v: i16| sembuf {
            sem_num: n,
            sem_op: v,
            sem_flg: flg,
        };
        match self.shape {
            Shape::Take => vec![op(a, -k)],
            Shape::TakeTwo => vec![op(a, -1), op(b, -1)],
            Shape::TakeIfZero => vec![op(b, 0), op(a, -1)],
            Shape::Put => vec![op(a, k)],
            Shape::PutTwo => vec![op(a, 1), op(b, 1)],
            Shape::Move => vec![op(a, -1), op(b, 1)],
            Shape::MoveBack => vec![op(b, 1), op(a, -1)],
            Shape::MoveThree => vec![op(a, -1), op(b, -1), op(c, 2)],
            Shape::Zero => vec![op(a, 0)],
            Shape::Read => vec![],
        }
    }

    fn describe(&self) -> String {
        let ops: Vec<String> = self
            .sops()
            .iter()
            .map(|o| format!("s{}{:+}", o.sem_num, o.sem_op))
            .collect();
        format!(
            "{:?} (k {}) on set {} [{}] {:?}",
            self.shape,
            self.k,
            self.set,
            ops.join(", "),
            self.mode
        )
    }
}

/// The ledger word: the hand in bits 0-15; bit 16 set while a call is
/// under way, then its shape (17-20), k (21-23), set (24-27), mode
/// (28-29) and semaphores (30-37, 38-45, 46-53).
fn encode(hand: u64, call: Option<&Call>) -> u64 {
    let Some(c) = call else { return hand };
    let shape = SHAPES.iter().position(|&s| s == c.shape).unwrap() as u64;
    let mode = c.mode as u64;
    hand | 1 << 16
        | shape << 17
        | c.k << 21
        | (c.set as u64) << 24
        | mode << 28
        | u64::from(c.sems[0]) << 30
        | u64::from(c.sems[1]) << 38
        | u64::from(c.sems[2]) << 46
}

fn decode(w: u64) -> (u64, Option<Call>) {
    let hand = w & 0xffff;
    if w & 1 << 16 == 0 {
        return (hand, None);
    }
    let call = Call {
        shape: SHAPES[((w >> 17) & 0xf) as usize % SHAPES.len()],
        k: (w >> 21) & 7,
        set: ((w >> 24) & 0xf) as usize,
        mode: [Mode::Block, Mode::Timed, Mode::NoWait][((w >> 28) & 3) as usize % 3],
        sems: [
            ((w >> 30) & 0xff) as u16,
            ((w >> 38) & 0xff) as u16,
            ((w >> 46) & 0xff) as u16,
        ],
    };
    (hand, Some(call))
}

/// The next call of a worker holding `hand` tokens.
fn plan(rng: &mut Rng, hand: u64) -> Call {
    let set = rng.below(SIZES.len() as u64) as usize;
    let n = u64::from(SIZES[set]);
    let a = rng.below(n);
    let b = (a + 1 + rng.below(n - 1)) % n;
    let c = rng.below(n);
    let mode = match rng.below(20) {
        0..=6 => Mode::Block,
        7..=14 => Mode::Timed,
        _ => Mode::NoWait,
    };
    let r = rng.below(100);
    let (shape, k) = if hand >= MAX_HAND || (hand > 0 && r < 55) {
        if hand >= 2 && rng.chance(1, 3) {
            (Shape::PutTwo, 2)
        } else {
            (Shape::Put, 1 + rng.below(hand))
        }
    } else if r < 70 {
        match rng.below(10) {
            0 | 1 if hand + 2 <= MAX_HAND => (Shape::TakeTwo, 2),
            2 => (Shape::TakeIfZero, 1),
            3 if hand + 2 <= MAX_HAND => (Shape::Take, 2),
            _ => (Shape::Take, 1),
        }
    } else if r < 86 {
        (
            *rng.pick(&[Shape::Move, Shape::MoveBack, Shape::MoveThree]),
            0,
        )
    } else if r < 91 {
        (Shape::Zero, 0)
    } else {
        (Shape::Read, 0)
    };
    Call {
        shape,
        k,
        set,
        sems: [a as u16, b as u16, c as u16],
        mode,
    }
}

/// What a worker needs: the namespace, the sets, the ledger.
#[derive(Clone)]
struct Ctx {
    path: std::path::PathBuf,
    ids: [i32; 3],
    led: Ledger,
}

/// A worker's life: calls until killed or told to quit (0). A call that
/// fails in a way it cannot, or a read that sees the impossible, ends it
/// with a line on its fd 2 (the driver's report socket) and code 3.
fn worker(ctx: &Ctx, slot: usize, seed: u64) -> i32 {
    let led = ctx.led;
    let Ok(ns) = Namespace::open_at(&ctx.path) else {
        eprintln!("slot {slot}: cannot attach");
        return 3;
    };
    let me = Cred::root(std::process::id() as i32);
    let mut rng = Rng::new(seed);
    let mut hand = 0u64;
    let state = led.slot(slot, STATE);
    // The count is per process, inherited through fork: ours is the rest.
    let inherited = ipcns::recoveries();
    loop {
        // A safe point: no call under way, the hand recorded.
        led.slot(slot, RECOV)
            .store(ipcns::recoveries() - inherited, SeqCst);
        let epoch = led.ctl(PAUSE).load(SeqCst);
        if epoch % 2 == 1 {
            led.slot(slot, PARKED).store(epoch, SeqCst);
            while led.ctl(PAUSE).load(SeqCst) == epoch {
                if led.ctl(QUIT).load(SeqCst) != 0 {
                    return 0;
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            continue;
        }
        let call = plan(&mut rng, hand);
        // The call before it is made: from here a kill leaves a window.
        state.store(encode(hand, Some(&call)), SeqCst);
        // No store of the call may come before the ledger's (a SeqCst
        // store alone lets later accesses move above it; the fence not).
        std::sync::atomic::fence(SeqCst);
        let r = if call.shape == Shape::Read {
            read(&ns, &me, ctx, &call)
        } else {
            let timeout = (call.mode == Mode::Timed).then(|| libc::timespec {
                tv_sec: 0,
                tv_nsec: 20_000 + rng.below(2_000_000) as libc::c_long,
            });
            let sops = call.sops();
            match ns.semtimedop(&me, ctx.ids[call.set], &sops, timeout.as_ref()) {
                Ok(_) => {
                    hand = (hand as i64 + call.delta()) as u64;
                    Ok(())
                }
                // IPC_NOWAIT, or the timeout; never for a plain wait.
                Err(Errno::EAGAIN) if call.mode != Mode::Block => {
                    led.slot(slot, AGAIN).fetch_add(1, SeqCst);
                    Ok(())
                }
                // The driver's SIGUSR1 (semop is never restarted).
                Err(Errno::EINTR) if call.mode != Mode::NoWait => {
                    led.slot(slot, INTR).fetch_add(1, SeqCst);
                    Ok(())
                }
                Err(e) => Err(format!("{}: {e:?}", call.describe())),
            }
        };
        // The end of the call and the new hand, in one store (SeqCst: a
        // release, after everything the call did).
        state.store(encode(hand, None), SeqCst);
        if let Err(why) = r {
            eprintln!("slot {slot} pid {}: {why}", std::process::id());
            return 3;
        }
        led.slot(slot, OPS).fetch_add(1, SeqCst);
    }
}

/// A read, and what a single reader can check: no value above the total,
/// no set holding more than the total, counts and pids plausible.
fn read(ns: &Namespace, me: &Cred, ctx: &Ctx, call: &Call) -> Result<(), String> {
    let (id, n) = (ctx.ids[call.set], SIZES[call.set]);
    let a = i32::from(call.sems[1] % n);
    let total = ctx.led.ctl(TOTAL).load(SeqCst) as i32;
    let bad = |what: String| Err(format!("set {}: {what}", call.set));
    let one = |cmd| ns.semctl(me, id, a, cmd, SemArg::None);
    match call.sems[0] % 6 {
        0 => {
            let mut vals = vec![0u16; usize::from(n)];
            getall(ns, me, id, &mut vals).map_err(|e| format!("GETALL: {e:?}"))?;
            let sum: i32 = vals.iter().map(|&v| i32::from(v)).sum();
            if sum > total {
                return bad(format!("GETALL {vals:?}: more than the {total} tokens"));
            }
        }
        1 => match one(GETVAL) {
            Ok(v) if (0..=total).contains(&v) => {}
            v => return bad(format!("GETVAL s{a}: {v:?}")),
        },
        2 => match one(GETNCNT) {
            Ok(v) if (0..=1000).contains(&v) => {}
            v => return bad(format!("GETNCNT s{a}: {v:?}")),
        },
        3 => match one(GETZCNT) {
            Ok(v) if (0..=1000).contains(&v) => {}
            v => return bad(format!("GETZCNT s{a}: {v:?}")),
        },
        4 => match one(GETPID) {
            Ok(v) if v >= 0 => {}
            v => return bad(format!("GETPID s{a}: {v:?}")),
        },
        _ => {
            let mut ds = semid64_ds::default();
            match ns.semctl(me, id, 0, IPC_STAT, SemArg::Ds(&mut ds)) {
                Ok(_) if ds.sem_nsems == u64::from(n) => {}
                v => return bad(format!("IPC_STAT: {v:?}, nsems {}", ds.sem_nsems)),
            }
        }
    }
    Ok(())
}

/// What a run found, by kind: how often, and the first few in detail.
#[derive(Default)]
struct Findings(BTreeMap<&'static str, (u64, Vec<String>)>);

impl Findings {
    fn add(&mut self, kind: &'static str, detail: String) {
        let e = self.0.entry(kind).or_default();
        e.0 += 1;
        if e.1.len() < 4 {
            e.1.push(detail);
        }
    }

    fn report(&self, seed: u64) -> String {
        let mut msg = format!("chaos (seed {seed:#x}) found:");
        for (kind, (n, ex)) in &self.0 {
            msg.push_str(&format!("\n- {kind}: {n} times"));
            for e in ex {
                msg.push_str(&format!("\n    {e}"));
            }
        }
        msg
    }
}

/// Counters of a run.
#[derive(Default)]
struct Stats {
    kills: u64,
    ops: u64,
    again: u64,
    intr: u64,
    worker_recoveries: u64,
    /// Kills by what the victim was doing.
    at: BTreeMap<String, u64>,
    /// Kills inside a take or a put: the ambiguous cases of a bare ledger.
    windows: u64,
    /// Of those, the calls the equation says had completed.
    windows_done: u64,
    /// Tokens the driver put back from dead hands.
    returned: u64,
    /// Pauses that found a dead sleeper counted by GETNCNT/GETZCNT.
    lingering: u64,
    /// Kills aimed at a worker inside a call that posts.
    aimed: u64,
}

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// The driver's side of a run.
struct Driver<'a> {
    t: &'a TestNs,
    ctx: Ctx,
    root: Cred,
    pids: Vec<i32>,
    rng: Rng,
    seed: u64,
    born: u64,
    reports: UnixStream,
    sink: UnixStream,
    found: Findings,
    stats: Stats,
}

impl Driver<'_> {
    fn spawn(&mut self, slot: usize) {
        for w in 0..SLOT_WORDS {
            self.ctx.led.slot(slot, w).store(0, SeqCst);
        }
        self.born += 1;
        let seed = self.seed ^ self.born.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let ctx = self.ctx.clone();
        let sink = self.sink.try_clone().unwrap();
        self.pids[slot] = support::fork_child(move || {
            support::child_reports_to(sink);
            worker(&ctx, slot, seed)
        });
    }

    /// What the workers wrote to their fd 2 so far.
    fn reports(&mut self) -> String {
        let mut out = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.reports.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        out.trim().to_string()
    }

    /// Adds a slot's counters to the run's (before it is reused).
    fn collect(&mut self, slot: usize) {
        let led = self.ctx.led;
        self.stats.ops += led.slot(slot, OPS).load(SeqCst);
        self.stats.again += led.slot(slot, AGAIN).load(SeqCst);
        self.stats.intr += led.slot(slot, INTR).load(SeqCst);
        self.stats.worker_recoveries += led.slot(slot, RECOV).load(SeqCst);
    }

    /// Parks every live worker at a safe point. Workers that ended on
    /// their own meanwhile are reaped, reported and returned (their slots
    /// are to be resolved and refilled). Err: a worker did not park within
    /// 10 s (a hang), with what each was doing.
    fn pause(&mut self) -> Result<Vec<(usize, i32)>, String> {
        let led = self.ctx.led;
        let epoch = led.ctl(PAUSE).fetch_add(1, SeqCst) + 1;
        assert!(epoch % 2 == 1);
        let start = Instant::now();
        let mut ended = Vec::new();
        let mut signalled = vec![None::<Instant>; self.pids.len()];
        loop {
            let mut waiting = 0;
            for (slot, last) in signalled.iter_mut().enumerate() {
                let pid = self.pids[slot];
                if pid == 0 || led.slot(slot, PARKED).load(SeqCst) == epoch {
                    continue;
                }
                if let Some(code) = support::try_wait_child(pid) {
                    ended.push((slot, code));
                    self.pids[slot] = 0;
                    continue;
                }
                // Breaks a wait (EINTR). Repeated, since one that lands
                // while the sleeper still spins is not seen; but seldom:
                // a lock waiter re-checks a dead holder only after a
                // 10 ms sleep that no signal cut short (see the test
                // `signals_do_not_starve_the_takeover_of_a_dead_holders_lock`).
                if last.is_none_or(|t| t.elapsed() > SIGNAL_EVERY) {
                    support::signal(pid, libc::SIGUSR1);
                    *last = Some(Instant::now());
                }
                waiting += 1;
            }
            if waiting == 0 {
                return Ok(ended);
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(self.stuck(epoch));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    /// What the workers that did not park are doing.
    fn stuck(&self, epoch: u64) -> String {
        let led = self.ctx.led;
        let mut out = String::new();
        for (slot, &pid) in self.pids.iter().enumerate() {
            if pid == 0 || led.slot(slot, PARKED).load(SeqCst) == epoch {
                continue;
            }
            let (hand, call) = decode(led.slot(slot, STATE).load(SeqCst));
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let st = stat.rsplit_once(") ").map_or("?", |(_, r)| &r[..1]);
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            out.push_str(&format!(
                "\n  slot {slot} pid {pid} (state {st}, wchan {wchan}): hand {hand}, in {}",
                call.map_or("no call".to_string(), |c| c.describe())
            ));
        }
        out
    }

    /// The tokens in circulation.
    fn total(&self) -> u64 {
        self.ctx.led.ctl(TOTAL).load(SeqCst)
    }

    /// The values of every set (locking each repairs what a dead holder
    /// left), checked within 0..=total.
    fn values(&mut self) -> Vec<Vec<u16>> {
        let total = self.total();
        let mut all = Vec::new();
        for (set, &id) in self.ctx.ids.iter().enumerate() {
            let mut vals = vec![0u16; usize::from(SIZES[set])];
            if let Err(e) = getall(&self.t.ns, &self.root, id, &mut vals) {
                self.found.add("GETALL fails", format!("set {set}: {e:?}"));
            }
            if vals.iter().any(|&v| u64::from(v) > total) {
                self.found.add(
                    "value out of range",
                    format!("set {set}: {vals:?} (total {total})"),
                );
            }
            all.push(vals);
        }
        all
    }

    /// GETNCNT and GETZCNT of every semaphore that is not 0, as text.
    fn sleepers(&mut self) -> Option<String> {
        let mut out = Vec::new();
        for (set, &id) in self.ctx.ids.iter().enumerate() {
            for n in 0..i32::from(SIZES[set]) {
                let nc = self.t.ns.semctl(&self.root, id, n, GETNCNT, SemArg::None);
                let zc = self.t.ns.semctl(&self.root, id, n, GETZCNT, SemArg::None);
                if nc != Ok(0) || zc != Ok(0) {
                    out.push(format!("set {set} s{n}: ncnt {nc:?} zcnt {zc:?}"));
                }
            }
        }
        (!out.is_empty()).then(|| out.join(", "))
    }

    /// With every live worker parked: solves the equation for the dead
    /// ones' calls (`dead`: slot, ledger word, how it ended), checks the
    /// rest, and puts the dead hands back in circulation. `what` names
    /// the moment in findings.
    fn resolve(&mut self, dead: &[(usize, u64, i32)], what: &str) {
        let led = self.ctx.led;
        let vals = self.values();
        let sum: u64 = vals.iter().flatten().map(|&v| u64::from(v)).sum();
        let mut live = 0u64;
        for (slot, &pid) in self.pids.iter().enumerate() {
            if pid == 0 {
                continue;
            }
            let (hand, call) = decode(led.slot(slot, STATE).load(SeqCst));
            assert!(call.is_none(), "slot {slot} parked inside a call");
            live += hand;
        }
        let mut hands = 0u64;
        // Every outcome the dead calls allow: each done or not.
        let mut allowed = vec![0i64];
        let mut desc = Vec::new();
        for &(slot, word, code) in dead {
            let (hand, call) = decode(word);
            hands += hand;
            let key = call.map_or("between calls".to_string(), |c| format!("{:?}", c.shape));
            *self.stats.at.entry(key).or_default() += 1;
            if let Some(c) = call {
                let d = c.delta();
                allowed = allowed.iter().flat_map(|&x| [x, x + d]).collect();
                allowed.sort_unstable();
                allowed.dedup();
                if d != 0 {
                    self.stats.windows += 1;
                }
            }
            desc.push(format!(
                "slot {slot} (ended {code}) hand {hand} in {}",
                call.map_or("no call".to_string(), |c| c.describe())
            ));
        }
        let total = self.total() as i64;
        let mut x = total - sum as i64 - live as i64 - hands as i64;
        if !allowed.contains(&x) {
            self.found.add(
                "tokens not conserved",
                format!(
                    "{what}: values {vals:?} (sum {sum}) + live hands {live} + dead hands \
                     {hands} = {} of {total}; the dead calls allow {allowed:?}; dead: {}",
                    total - x,
                    desc.join("; ")
                ) + &self.dump(),
            );
            // What circulates now, the dead calls taken as not done: the
            // next pause compares with that.
            x = 0;
            let now = sum + live + hands;
            self.ctx.led.ctl(TOTAL).store(now, SeqCst);
        } else if x != 0 {
            self.stats.windows_done += 1;
        }
        // A corrupt queue can hang the driver's own posts: the run ends.
        let (view, bad) = self.arena_view();
        if !bad.is_empty() {
            let dead: Vec<String> = dead
                .iter()
                .map(|&(s, w, _)| format!("slot {s}: {:?}", decode(w)))
                .collect();
            self.found.add(
                "sleeper queue corrupt",
                format!(
                    "{what} (dead: {}): {}{view}",
                    dead.join("; "),
                    bad.join("; ")
                ),
            );
            self.abort(format!("{what}: a sleeper queue is corrupt, the run stops"));
        }
        // The dead hands, as the values say.
        let back = (hands as i64 + x) as u64;
        if let Some(s) = self.sleepers() {
            self.stats.lingering += 1;
            self.found.add(
                "dead sleeper counted by GETNCNT/GETZCNT",
                format!("{what}, no live sleeper: {s}; dead: {}", desc.join("; ")),
            );
        }
        // Back in circulation: one post per token (sometimes two in one
        // call), which no dead sleeper may take.
        let mut left = back;
        while left > 0 {
            let set = self.rng.below(3) as usize;
            let n = u64::from(SIZES[set]);
            let a = self.rng.below(n) as u16;
            let b = ((u64::from(a) + 1 + self.rng.below(n - 1)) % n) as u16;
            let two = left >= 2 && self.rng.chance(1, 2);
            let mut sops = vec![sembuf {
                sem_num: a,
                sem_op: 1,
                sem_flg: 0,
            }];
            if two {
                sops.push(sembuf {
                    sem_num: b,
                    sem_op: 1,
                    sem_flg: 0,
                });
            }
            match self.t.ns.semop(&self.root, self.ctx.ids[set], &sops) {
                Ok(_) => left -= sops.len() as u64,
                Err(e) => {
                    self.found
                        .add("post fails", format!("{what}: set {set}: {e:?}"));
                    break;
                }
            }
        }
        self.stats.returned += back - left;
        let after: u64 = self.values().iter().flatten().map(|&v| u64::from(v)).sum();
        if after != sum + (back - left) {
            self.found.add(
                "post taken by a dead sleeper",
                format!(
                    "{what}: {} posted, the values went from {sum} to {after}",
                    back - left
                ),
            );
            self.ctx.led.ctl(TOTAL).store(after + live, SeqCst);
        }
        if let Err(e) = self.t.ns.check() {
            self.found.add("check() fails", format!("{what}: {e}"));
        }
    }

    /// Resumes the parked workers.
    fn resume(&mut self) {
        let e = self.ctx.led.ctl(PAUSE).fetch_add(1, SeqCst) + 1;
        assert!(e.is_multiple_of(2));
    }

    /// The sets' locks, journals and sleeper queues as the arena file
    /// holds them, read without a lock (what a hang or a lost token left),
    /// and what is wrong in the queues: a cycle, or a record that is not a
    /// live sleeper's (state DONE or past it: a free-list link in its
    /// first word; no operations: `wait::release` took them). Offsets:
    /// object.rs `SemSlot` (lock @0, dirty @8, queue @120, journal @128)
    /// and wait.rs `Waiter`.
    fn arena_view(&self) -> (String, Vec<String>) {
        use std::os::unix::fs::FileExt;
        let Ok(f) = std::fs::File::open(&self.ctx.path) else {
            return ("arena unreadable".to_string(), Vec::new());
        };
        let word = |off: u64| {
            let mut b = [0u8; 8];
            f.read_exact_at(&mut b, off)
                .map_or(u64::MAX, |_| u64::from_le_bytes(b))
        };
        let regions = self.t.ns.regions();
        let (mut out, mut bad) = (String::new(), Vec::new());
        for (set, &id) in self.ctx.ids.iter().enumerate() {
            let name = format!("sem.slot[{}]", id & 0x7fff);
            let Some(s) = regions.iter().find(|r| r.name == name).map(|r| r.off) else {
                continue;
            };
            let (lock, j) = (word(s), word(s + 128));
            out.push_str(&format!(
                "\n  set {set} @{s:#x}: lock tid {} dirty {}, journal op {} len {} @{:#x}; queue:",
                lock & 0x3fff_ffff,
                word(s + 8) as u32,
                j as u32,
                j >> 32,
                word(s + 136)
            ));
            let mut cur = word(s + 120);
            let mut seen = Vec::new();
            while cur != 0 && seen.len() < 16 {
                if seen.contains(&cur) {
                    out.push_str(&format!(" CYCLE back to @{cur:#x}"));
                    bad.push(format!("set {set}: the queue cycles back to @{cur:#x}"));
                    break;
                }
                seen.push(cur);
                let (w0, who, w3) = (word(cur), word(cur + 16), word(cur + 24));
                let (ops, blocking) = (word(cur + 32), word(cur + 40) as u32);
                let freed = w0 as u32 >= 2 || ops == 0;
                out.push_str(&format!(
                    "\n    @{cur:#x}: state {} status {} tid {} pid {} nops {} ops @{ops:#x} \
                     blocking {blocking:#x}{}",
                    w0 as u32,
                    (w0 >> 32) as i32,
                    who & 0x3fff_ffff,
                    w3 as u32 as i32,
                    w3 >> 32,
                    if freed {
                        " <- NOT A LIVE SLEEPER'S"
                    } else {
                        ""
                    }
                ));
                if freed {
                    bad.push(format!(
                        "set {set}: queued record @{cur:#x} is not a live sleeper's (first word \
                         {w0:#x}, ops @{ops:#x})"
                    ));
                }
                cur = word(cur + 8);
            }
        }
        (out, bad)
    }

    fn dump(&self) -> String {
        self.arena_view().0
    }

    /// Kills everything left and fails with `why` and the findings. With
    /// IPCNS_CHAOS_HOLD=N the processes are left N seconds first (for a
    /// debugger), with IPCNS_CHAOS_KEEP=1 the arena is copied to the
    /// temporary directory.
    fn abort(&mut self, why: String) -> ! {
        let mut why = format!("{why}\narena:{}", self.dump());
        if env_u64("IPCNS_CHAOS_KEEP", 0) != 0 {
            let copy = std::env::temp_dir().join(format!("ipcns-chaos-{:#x}.arena", self.seed));
            let _ = std::fs::copy(&self.ctx.path, &copy);
            why.push_str(&format!("\n(copied to {})", copy.display()));
        }
        let hold = env_u64("IPCNS_CHAOS_HOLD", 0);
        if hold > 0 {
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("{why}\nholding the workers {:?} for {hold} s\n", self.pids),
            );
            std::thread::sleep(Duration::from_secs(hold));
        }
        for &pid in &self.pids {
            if pid != 0 {
                support::kill(pid);
                support::wait_child(pid);
            }
        }
        let reports = self.reports();
        panic!(
            "{}\nand then, {why}\nworker reports: {reports}",
            self.found.report(self.seed)
        );
    }

    /// A worker seen inside a call that posts (a put or a move), within
    /// 5 ms, after a random 0-30 µs more.
    fn poster(&mut self) -> Option<usize> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(5) {
            for slot in 0..self.pids.len() {
                let (_, call) = decode(self.ctx.led.slot(slot, STATE).load(SeqCst));
                if call.is_some_and(|c| c.sops().iter().any(|o| o.sem_op > 0)) {
                    self.stats.aimed += 1;
                    spin(Duration::from_micros(self.rng.below(30)));
                    return Some(slot);
                }
            }
            std::hint::spin_loop();
        }
        None
    }

    /// One kill at a random moment, the pause, the resolution, the
    /// replacement.
    fn round(&mut self, round: u64) {
        // A random moment: sometimes right after the resume (everyone
        // starting over), mostly later.
        if self.rng.chance(1, 4) {
            spin(Duration::from_micros(self.rng.below(300)));
        } else {
            std::thread::sleep(Duration::from_micros(100 + self.rng.below(4000)));
        }
        // Often the victim is one that has just begun a call that posts
        // (a waker: update_queue, the journal), killed a few µs in; else
        // anyone.
        let aimed = if self.rng.chance(2, 5) {
            self.poster()
        } else {
            None
        };
        let slot = aimed.unwrap_or_else(|| self.rng.below(self.pids.len() as u64) as usize);
        let pid = self.pids[slot];
        support::kill(pid);
        let code = support::wait_child(pid);
        self.pids[slot] = 0;
        self.stats.kills += 1;
        let mut dead = vec![(slot, self.ctx.led.slot(slot, STATE).load(SeqCst), code)];
        if code != -libc::SIGKILL {
            let r = self.reports();
            self.found.add(
                "worker ended on its own",
                format!("slot {slot} code {code}: {r}"),
            );
        }
        let ended = match self.pause() {
            Ok(e) => e,
            Err(why) => self.abort(format!(
                "kill {round}: workers did not park within 10 s (a hang):{why}"
            )),
        };
        for (s, code) in ended {
            let r = self.reports();
            self.found.add(
                "worker ended on its own",
                format!("slot {s} code {code}: {r}"),
            );
            dead.push((s, self.ctx.led.slot(s, STATE).load(SeqCst), code));
        }
        self.resolve(&dead, &format!("kill {round}"));
        for &(s, _, _) in &dead {
            self.collect(s);
            self.spawn(s);
        }
        self.resume();
    }
}

#[test]
fn tokens_are_conserved_through_thousands_of_kills() {
    let kills = env_u64("IPCNS_CHAOS_KILLS", 3500);
    let seed = env_u64("IPCNS_CHAOS_SEED", 0xc4a0_5eed);
    let workers = env_u64("IPCNS_CHAOS_WORKERS", 5).clamp(2, 15) as usize;
    let t = TestNs::with(
        "chaos",
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    );
    let root = Cred::root(std::process::id() as i32);
    let mut rng = Rng::new(seed);
    // The sets and their first tokens: about two per worker.
    let mut ids = [0; 3];
    let mut total = 0u64;
    for (set, &n) in SIZES.iter().enumerate() {
        ids[set] =
            t.ns.semget(&root, 0, i32::from(n), IPC_CREAT | 0o600)
                .unwrap();
        let mut vals: Vec<u16> = (0..n).map(|_| rng.below(4) as u16).collect();
        total += vals.iter().map(|&v| u64::from(v)).sum::<u64>();
        t.ns.semctl(&root, ids[set], 0, SETALL, SemArg::Array(&mut vals))
            .unwrap();
    }
    // Inherited by every worker: no window in which SIGUSR1 kills one.
    extern "C" fn on_usr1(_: libc::c_int) {}
    support::handle(libc::SIGUSR1, on_usr1, libc::SA_RESTART);
    let (reports, sink) = UnixStream::pair().unwrap();
    reports.set_nonblocking(true).unwrap();
    let mut d = Driver {
        t: &t,
        ctx: Ctx {
            path: t.path().to_path_buf(),
            ids,
            led: Ledger::new(workers),
        },
        root,
        pids: vec![0; workers],
        rng,
        seed,
        born: 0,
        reports,
        sink,
        found: Findings::default(),
        stats: Stats::default(),
    };
    d.ctx.led.ctl(TOTAL).store(total, SeqCst);
    let start = Instant::now();
    for slot in 0..workers {
        d.spawn(slot);
    }
    for round in 0..kills {
        d.round(round);
    }
    // The end: everyone parked, the equation exact (no call under way).
    let ended = match d.pause() {
        Ok(e) => e,
        Err(why) => d.abort(format!("the end: workers did not park (a hang):{why}")),
    };
    let dead: Vec<(usize, u64, i32)> = ended
        .iter()
        .map(|&(s, c)| (s, d.ctx.led.slot(s, STATE).load(SeqCst), c))
        .collect();
    d.resolve(&dead, "the end");
    d.ctx.led.ctl(QUIT).store(1, SeqCst);
    let mut hands = 0;
    for slot in 0..workers {
        let pid = d.pids[slot];
        if pid == 0 {
            continue;
        }
        match support::wait_child_deadline(pid, Duration::from_secs(10)) {
            Ok(0) => {}
            other => d
                .found
                .add("worker did not quit", format!("slot {slot}: {other:?}")),
        }
        hands += decode(d.ctx.led.slot(slot, STATE).load(SeqCst)).0;
        d.collect(slot);
        d.pids[slot] = 0;
    }
    let elapsed = start.elapsed();
    final_checks(&mut d, hands);
    let s = &d.stats;
    let rec = ipcns::recoveries();
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!(
            "chaos: seed {seed:#x}, {workers} workers, {total} tokens: {} kills ({} aimed at a \
             poster) in {:.1} s, \
             {} semops completed ({} EAGAIN, {} EINTR), lock takeovers {} (driver {rec}, \
             workers {}), kills in a take/put window {} (ambiguous for a bare ledger; resolved \
             exactly: {} had completed), {} tokens returned from dead hands, {} pauses with a \
             dead sleeper counted; victims were in: {:?}\n",
            s.kills,
            s.aimed,
            elapsed.as_secs_f64(),
            s.ops,
            s.again,
            s.intr,
            rec + s.worker_recoveries,
            s.worker_recoveries,
            s.windows,
            s.windows_done,
            s.returned,
            s.lingering,
            s.at,
        ),
    );
    assert!(d.found.0.is_empty(), "{}", d.found.report(seed));
}

/// With no worker left: no sleeper counted, posts kept, `check()`, and a
/// last round of semops by the parent (a sleeper woken, a move, the total).
fn final_checks(d: &mut Driver<'_>, hands: u64) {
    let t = d.t;
    let (ns, root, ids, total) = (&t.ns, &d.root.clone(), d.ctx.ids, d.total());
    if let Some(s) = d.sleepers() {
        d.found.add(
            "dead sleeper counted by GETNCNT/GETZCNT",
            format!("the end, no process left but the parent: {s}"),
        );
    }
    for (set, &id) in ids.iter().enumerate() {
        for n in 0..SIZES[set] {
            let v0 = ns.semctl(root, id, i32::from(n), GETVAL, SemArg::None);
            let posted = ns.semop(root, id, &[op(n, 1, 0)]);
            let v1 = ns.semctl(root, id, i32::from(n), GETVAL, SemArg::None);
            if posted.is_err() || v1 != v0.map(|v| v + 1) {
                d.found.add(
                    "post taken by a dead sleeper",
                    format!("the end, set {set} s{n}: {v0:?}, post {posted:?}, then {v1:?}"),
                );
            }
            let _ = ns.semop(root, id, &[op(n, -1, IPC_NOWAIT)]);
        }
    }
    if let Err(e) = ns.check() {
        d.found.add("check() fails", format!("the end: {e}"));
    }
    // A sleeper woken by a post: empty s0 of set 0, wait on it in a
    // thread, post.
    let id = ids[0];
    let v = ns.semctl(root, id, 0, GETVAL, SemArg::None).unwrap();
    if v > 0 {
        ns.semop(root, id, &[op(0, -(v as i16), IPC_NOWAIT)])
            .unwrap();
    }
    let five = libc::timespec {
        tv_sec: 5,
        tv_nsec: 0,
    };
    std::thread::scope(|sc| {
        let sleeper = sc.spawn(|| ns.semtimedop(root, id, &[op(0, -1, 0)], Some(&five)));
        let start = Instant::now();
        while ns.semctl(root, id, 0, GETNCNT, SemArg::None) == Ok(0)
            && start.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        ns.semop(root, id, &[op(0, 1, 0)]).unwrap();
        assert_eq!(sleeper.join().unwrap(), Ok(0), "the last sleeper");
    });
    // Put s0's tokens back, then a move across two semaphores of set 1.
    if v > 0 {
        ns.semop(root, id, &[op(0, v as i16, 0)]).unwrap();
    }
    let mut before = vec![0u16; usize::from(SIZES[1])];
    getall(ns, root, ids[1], &mut before).unwrap();
    if let Some(a) = before.iter().position(|&x| x > 0) {
        let b = (a + 1) % before.len();
        ns.semop(
            root,
            ids[1],
            &[op(a as u16, -1, IPC_NOWAIT), op(b as u16, 1, 0)],
        )
        .unwrap();
        let mut after = vec![0u16; before.len()];
        getall(ns, root, ids[1], &mut after).unwrap();
        let mut want = before.clone();
        want[a] -= 1;
        want[b] += 1;
        assert_eq!(after, want, "the last move");
    }
    // The total, with the hands the workers left with.
    let mut sum = hands;
    for (set, &id) in ids.iter().enumerate() {
        let mut vals = vec![0u16; usize::from(SIZES[set])];
        getall(ns, root, id, &mut vals).unwrap();
        sum += vals.iter().map(|&v| u64::from(v)).sum::<u64>();
    }
    if sum != total {
        d.found.add(
            "tokens not conserved",
            format!("the end: values and hands hold {sum} of {total}"),
        );
    }
}

// What the chaos found, each in its smallest scenario. The first is in
// every run; the journal's window (the last) was hit in 3 of 5 seeds at
// 8000 kills and 1 of 3 at the default 3500; the signals were the
// driver's own at first (a SIGUSR1 every 100 µs: a hang).

fn op(n: u16, v: i16, flg: i32) -> sembuf {
    sembuf {
        sem_num: n,
        sem_op: v,
        sem_flg: flg as i16,
    }
}

/// Forks a process that attaches and makes one semop; its pid.
fn semop_child(path: &std::path::Path, id: i32, sops: Vec<sembuf>) -> i32 {
    let path = path.to_path_buf();
    support::fork_child(move || {
        let ns = Namespace::open_at(&path).expect("attach");
        let me = Cred::root(std::process::id() as i32);
        match ns.semop(&me, id, &sops) {
            Ok(_) => 0,
            Err(_) => 1,
        }
    })
}

fn wait_ncnt(ns: &Namespace, c: &Cred, id: i32, n: i32, want: i32) {
    let start = Instant::now();
    while ns.semctl(c, id, n, GETNCNT, SemArg::None) != Ok(want) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "GETNCNT never {want}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A sleeper killed while queued is still counted by GETNCNT (and
/// GETZCNT) until its operation could proceed: `count_waiting` counts
/// every record of the queue, and `update_queue` drops a dead sleeper only
/// when its operation no longer blocks. In Linux the killed task wakes and
/// unlinks its entry before it exits (ipc/sem.c `do_semtimedop`:
/// `unlink_queue` on the way out of an interrupted sleep).
#[test]
fn a_dead_sleeper_is_not_counted_as_waiting() {
    let t = TestNs::new("chaos-count");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 2, IPC_CREAT | 0o600).unwrap();
    let child = semop_child(t.path(), id, vec![op(0, -1, 0)]);
    wait_ncnt(&t.ns, &root, id, 0, 1);
    support::kill(child);
    support::wait_child(child);
    // A change elsewhere in the set does not drop it either.
    t.ns.semop(&root, id, &[op(1, 1, 0)]).unwrap();
    assert_eq!(
        t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None),
        Ok(0),
        "GETNCNT counts a sleeper that was killed"
    );
}

/// A dead sleeper whose pid a new process got takes the next post: the
/// waker asks `wait::sleeper_alive`, which checks only that a thread with
/// the recorded tgid and tid exists (`tgkill(pid, tid, 0)` and /proc),
/// not the start-time tag that `who` carries and lock liveness compares.
/// pid_max is 32768 in many containers, so pids come back quickly. Here
/// the reuse is forced in a PID namespace of our own (ns_last_pid).
#[test]
fn a_dead_sleepers_reused_pid_does_not_make_it_alive() {
    let t = TestNs::new("chaos-pid");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    let path = t.path().to_path_buf();
    let r = support::in_new_pid_ns(move || {
        let ns = Namespace::open_at(&path).expect("attach");
        let me = Cred::root(std::process::id() as i32);
        let dead = semop_child(&path, id, vec![op(0, -1, 0)]);
        wait_ncnt(&ns, &me, id, 0, 1);
        support::kill(dead);
        support::wait_child(dead);
        // Start times (the tag) count clock ticks (10 ms): a pid reused
        // within the same tick cannot be told apart (README: known
        // limits). Let one pass.
        std::thread::sleep(Duration::from_millis(25));
        // The next fork gets the dead sleeper's pid.
        if std::fs::write("/proc/sys/kernel/ns_last_pid", (dead - 1).to_string()).is_err() {
            return 100;
        }
        let heir = support::fork_child(|| {
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        if heir != dead {
            return 101;
        }
        ns.semop(&me, id, &[op(0, 1, 0)]).unwrap();
        let v = ns.semctl(&me, id, 0, GETVAL, SemArg::None).unwrap();
        support::kill(heir);
        support::wait_child(heir);
        v
    });
    match r {
        Err(why) => {
            eprintln!("SKIPPED a_dead_sleepers_reused_pid_does_not_make_it_alive: {why}");
        }
        Ok(100 | 101) => {
            eprintln!("SKIPPED: could not give the dead sleeper's pid to a new process")
        }
        Ok(v) => assert_eq!(v, 1, "the post went to a sleeper killed before it was made"),
    }
}

/// A waiter for a lock re-checks its holder's liveness only when a 10 ms
/// sleep ran out (`acquire_slow`: `if !timed_out || ... { continue; }`):
/// a waiter that gets a signal more often than that (an interval timer,
/// a profiler; the chaos driver's SIGUSR1 at first) never takes over from
/// a holder that died after its first check, and waits as long as the
/// signals come.
#[test]
fn signals_do_not_starve_the_takeover_of_a_dead_holders_lock() {
    let t = TestNs::new("chaos-starve");
    let (mut tell, mut told) = UnixStream::pair().unwrap();
    let path = t.path().to_path_buf();
    let holder = support::fork_child(move || {
        let ns = Namespace::open_at(&path).expect("attach");
        let _ = ns.hold_registry(ipcns::Mech::Sem, || {
            let _ = std::io::Write::write_all(&mut tell, b"h");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        0
    });
    let mut b = [0u8; 1];
    told.read_exact(&mut b).unwrap();
    let path = t.path().to_path_buf();
    let waiter = support::fork_child(move || {
        let ns = Namespace::open_at(&path).expect("attach");
        let me = Cred::root(std::process::id() as i32);
        support::alarm_every(Duration::from_millis(2));
        i32::from(ns.semget(&me, 0x5157, 1, IPC_CREAT | 0o600).is_err())
    });
    // The waiter finds the holder alive and sleeps; then the holder dies.
    std::thread::sleep(Duration::from_millis(200));
    support::kill(holder);
    support::wait_child(holder);
    let r = support::wait_child_deadline(waiter, Duration::from_secs(2));
    assert_eq!(
        r,
        Ok(0),
        "with a SIGALRM every 2 ms, the waiter did not take the dead holder's lock in 2 s"
    );
}

/// The window behind the chaos's hangs, opened with a debugger: a waker
/// killed after `wait::complete` marked the sleeper DONE and before
/// `clear_journal` (here: at its first instruction) leaves the set locked
/// with a SEMOP journal naming the sleeper's record. The sleeper returns
/// and frees the record; the next sleeper anywhere gets the same block
/// (class 64 is LIFO). The next locker of the first set repairs:
/// `repair_object` finds `state != DONE` (it is the new sleeper's) and
/// completes it: a semop on another set returns 0 without its operation
/// (a token from nothing), its freed record stays linked in that set's
/// queue, and the next sleeper there reuses it and links it to itself: the
/// next waker walks the cycle forever, holding the set's lock.
#[test]
fn a_journal_left_by_a_killed_waker_completes_only_its_own_sleeper() {
    let skip = |why: &str| eprintln!("SKIPPED a_journal_left_by_a_killed_waker...: {why}");
    if std::process::Command::new("gdb")
        .arg("--version")
        .output()
        .is_err()
    {
        return skip("no gdb to stop the waker at an instruction");
    }
    let t = TestNs::new("chaos-journal");
    let root = Cred::root(std::process::id() as i32);
    let x = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    let z = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    let sleeper = semop_child(t.path(), x, vec![op(0, -1, 0)]);
    wait_ncnt(&t.ns, &root, x, 0, 1);
    // The waker posts when told, under a debugger that kills it at
    // `clear_journal`.
    let (mut go, mut wait_go) = UnixStream::pair().unwrap();
    let path = t.path().to_path_buf();
    let waker = support::fork_child(move || {
        let ns = Namespace::open_at(&path).expect("attach");
        let me = Cred::root(std::process::id() as i32);
        let mut b = [0u8; 1];
        let _ = wait_go.read_exact(&mut b);
        i32::from(ns.semop(&me, x, &[op(0, 1, 0)]).is_err())
    });
    let armed = t.path().with_extension("armed");
    let gdb = std::process::Command::new("gdb")
        .args(["-p", &waker.to_string(), "-batch", "-ex"])
        .arg("break ipcns::sem::clear_journal")
        .arg("-ex")
        .arg(format!("shell touch {}", armed.display()))
        .args(["-ex", "continue", "-ex", "signal SIGKILL"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut gdb) = gdb else {
        support::kill(waker);
        support::wait_child(waker);
        return skip("gdb would not start");
    };
    let start = Instant::now();
    while !armed.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_file(&armed);
    let _ = std::io::Write::write_all(&mut go, b"g");
    let _ = gdb.wait();
    if support::wait_child(waker) != -libc::SIGKILL {
        return skip("gdb did not stop the waker at clear_journal");
    }
    // The sleeper got its token and freed its record.
    assert_eq!(support::wait_child(sleeper), 0);
    // Another sleeper, on another set that nobody posts to.
    let other = semop_child(t.path(), z, vec![op(0, -1, 0)]);
    wait_ncnt(&t.ns, &root, z, 0, 1);
    // The first set's next locker repairs.
    assert_eq!(t.ns.semctl(&root, x, 0, GETVAL, SemArg::None), Ok(0));
    std::thread::sleep(Duration::from_millis(100));
    let ended = support::try_wait_child(other);
    if ended.is_none() {
        support::kill(other);
        support::wait_child(other);
    }
    assert_eq!(
        ended,
        None,
        "the repair of one set completed a sleeper of another (value {:?})",
        t.ns.semctl(&root, z, 0, GETVAL, SemArg::None)
    );
}
