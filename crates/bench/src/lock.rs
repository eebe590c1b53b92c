//! `ipcns bench lock`: the arena's lock (ipcns's own, on a futex word:
//! taking a free lock is one compare-and-swap, releasing it one more, no
//! system call) beside what it replaced, glibc's robust process-shared
//! pthread mutex, measured in one run on this machine.
//!
//! Uncontended: one thread, lock+unlock pairs on a lock in a `MAP_SHARED`
//! page, with a plain (private, not robust) pthread mutex for reference.
//! Contended: two parties (threads, then forked processes on the same
//! shared pages), each bound to a cpu of its own, take the lock up to N
//! times each to add one to a shared counter, until one of them has done
//! N; ns per acquisition is the wall time over all acquisitions, the
//! counter must come out exact, and the handoffs (acquisitions that took
//! the lock from the other party) say how often it changed hands. Medians
//! of several rounds, the two locks' rounds alternating.
//!
//! `IPCNS_BENCH_QUICK=1` cuts the iterations a thousandfold (for the tests;
//! the numbers then mean nothing).

use super::progress::{self, Progress};
use super::stats::{Goal, Spread, cpu_model, goal, json_num, json_str, ns_per_iter, ratio};
use super::sys::{PthreadMutex, SharedPage, align_next_loop, allowed_cpus, fork, set_cpus};
use anyhow::{Context, ensure};
use ipcns::lockbench::BenchLock;
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::Instant;

const ROUNDS: usize = 7;
/// Lock+unlock pairs per round of the uncontended table.
const PAIRS: u64 = 20_000_000;
/// Acquisitions per party per round of the contended table.
const PER_PARTY: u64 = 5_000_000;
/// Parties of the contended table: the machine's two cores.
const PARTIES: usize = 2;

/// A lock that runs a closure inside a critical section.
trait Section: Sync {
    fn section<R>(&self, f: impl FnOnce() -> R) -> R;
}

impl Section for BenchLock {
    #[inline]
    fn section<R>(&self, f: impl FnOnce() -> R) -> R {
        BenchLock::section(self, f)
    }
}

impl Section for PthreadMutex {
    #[inline]
    fn section<R>(&self, f: impl FnOnce() -> R) -> R {
        PthreadMutex::section(self, f)
    }
}

/// Iteration counts: the real ones, or a thousandth with
/// `IPCNS_BENCH_QUICK=1`.
struct Sizes {
    pairs: u64,
    per_party: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let quick = super::stats::quick();
        let div = if quick { 1000 } else { 1 };
        Sizes {
            pairs: PAIRS / div,
            per_party: PER_PARTY / div,
        }
    }
}

/// ns per lock+unlock pair: median and spread of the rounds.
struct Uncontended {
    ipcns: Spread,
    robust: Spread,
    plain: Spread,
}

/// Two parties: ns per acquisition, and how many acquisitions in 1000
/// passed the lock to the other party; median and spread of the rounds.
struct Contended {
    ipcns: Spread,
    robust: Spread,
    ipcns_handoffs: Spread,
    robust_handoffs: Spread,
}

/// `n` empty critical sections, in a loop that starts on a 64-byte
/// boundary (the same for every row, see [`align_next_loop`]).
#[inline(always)]
fn pairs<L: Section>(lock: &L, n: u64) {
    let lock = black_box(lock);
    align_next_loop();
    for _ in 0..n {
        lock.section(|| ());
    }
}

fn uncontended(sizes: &Sizes) -> anyhow::Result<Uncontended> {
    let ipcns_lock = BenchLock::new().context("map the ipcns lock's page")?;
    let robust_lock = PthreadMutex::robust_shared().context("robust pthread mutex")?;
    let plain_lock = PthreadMutex::plain().context("plain pthread mutex")?;
    Ok(Uncontended {
        ipcns: ns_per_iter(ROUNDS, sizes.pairs, |n| pairs(&ipcns_lock, n)),
        robust: ns_per_iter(ROUNDS, sizes.pairs, |n| pairs(&robust_lock, n)),
        plain: ns_per_iter(ROUNDS, sizes.pairs, |n| pairs(&plain_lock, n)),
    })
}

/// Words of the contended round's shared page. In one cache line, written
/// under the lock: the counter, the last holder (party + 1) and the number
/// of times the lock passed from one party to the other. Then, a line each:
/// the start barrier, the flag the first party to finish raises, and each
/// party's start and end (ns since the round's base instant) and
/// acquisitions.
const COUNTER: usize = 0;
const LAST: usize = 1;
const HANDOFFS: usize = 2;
const READY: usize = 8;
const DONE: usize = 16;
const fn span(party: usize) -> usize {
    24 + 8 * party
}
/// Acquisitions between two looks at [`DONE`].
const CHUNK: u64 = 1024;

/// Where the parties run: party `i` bound to `cpus[i]`, or all unbound if
/// this process may use fewer cpus than there are parties. Unbound, the
/// scheduler often started both on one cpu and moved one away only after
/// a time slice (a few ms, a large part of a round), so for that long one
/// party ran alone and uncontended. `bench semop` places its ping-pong
/// pair the same way.
pub(super) struct Placement {
    cpus: Option<Vec<usize>>,
    /// What this thread may use, restored after a process round.
    pub(super) allowed: Vec<usize>,
}

impl Placement {
    pub(super) fn new() -> anyhow::Result<Placement> {
        let allowed = allowed_cpus().context("sched_getaffinity")?;
        let cpus = (allowed.len() >= PARTIES).then(|| allowed[..PARTIES].to_vec());
        Ok(Placement { cpus, allowed })
    }

    /// How the parties run, for the table.
    pub(super) fn describe(&self) -> String {
        match &self.cpus {
            Some(c) => format!("parties bound to cpus {} and {}", c[0], c[1]),
            None => format!("parties not bound: {} cpu allowed", self.allowed.len()),
        }
    }

    /// The cpus the parties are bound to, as JSON.
    pub(super) fn json(&self) -> String {
        match &self.cpus {
            Some(c) => format!(
                "[{}]",
                c.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            ),
            None => "null".to_string(),
        }
    }

    /// Binds the calling thread to party `who`'s cpu.
    pub(super) fn bind(&self, who: usize) -> std::io::Result<()> {
        match &self.cpus {
            Some(c) => set_cpus(&c[who..=who]),
            None => Ok(()),
        }
    }
}

/// One party: bound to its cpu, the first use of the lock (a thread's
/// first ipcns lock call finds its identity in /proc) and the start barrier
/// outside the timing, then up to `n` times lock; counter += 1; unlock. The
/// first party to finish raises [`DONE`], and the other stops at its next
/// look: an unfair lock lets one party finish well before the other, which
/// would then run alone, uncontended.
fn party<L: Section>(
    lock: &L,
    page: &SharedPage,
    who: usize,
    n: u64,
    base: Instant,
    place: &Placement,
) -> std::io::Result<()> {
    place.bind(who)?;
    let w = page.words();
    lock.section(|| ());
    // AcqRel/Acquire: only a barrier; the timing needs no data from it.
    w[READY].fetch_add(1, Ordering::AcqRel);
    while w[READY].load(Ordering::Acquire) < PARTIES as u64 {
        std::thread::yield_now();
    }
    let (counter, last, handoffs) = (&w[COUNTER], &w[LAST], &w[HANDOFFS]);
    let me = who as u64 + 1;
    let start = base.elapsed().as_nanos() as u64;
    let mut done = 0;
    while done < n {
        let k = CHUNK.min(n - done);
        align_next_loop();
        for _ in 0..k {
            lock.section(|| {
                // Loads and stores, not fetch_adds: nothing but the lock
                // orders them (its Acquire and Release), so a lock that
                // let two parties in at once would lose counts.
                let v = counter.load(Ordering::Relaxed);
                counter.store(v + 1, Ordering::Relaxed);
                let prev = last.load(Ordering::Relaxed);
                if prev != me {
                    last.store(me, Ordering::Relaxed);
                    let h = handoffs.load(Ordering::Relaxed);
                    handoffs.store(h + u64::from(prev != 0), Ordering::Relaxed);
                }
            });
        }
        done += k;
        // Relaxed: a hint to stop; the counts are read after the join.
        if w[DONE].load(Ordering::Relaxed) != 0 {
            break;
        }
    }
    let end = base.elapsed().as_nanos() as u64;
    w[DONE].store(1, Ordering::Relaxed);
    // Relaxed: read after the join or the child's exit, which order them.
    w[span(who)].store(start, Ordering::Relaxed);
    w[span(who) + 1].store(end, Ordering::Relaxed);
    w[span(who) + 2].store(done, Ordering::Relaxed);
    Ok(())
}

/// One round's ns per acquisition and handoffs per 1000 acquisitions.
struct Round {
    ns: f64,
    handoffs: f64,
}

/// The round's numbers, after checking the counter.
fn round_result(page: &SharedPage, what: &str) -> anyhow::Result<Round> {
    let w = page.words();
    let get = |i: usize| w[i].load(Ordering::Relaxed);
    let total: u64 = (0..PARTIES).map(|p| get(span(p) + 2)).sum();
    let counter = get(COUNTER);
    ensure!(
        counter == total,
        "{what}: the counter is {counter} after {total} locked increments: the lock let two holders in"
    );
    let first = (0..PARTIES).map(|p| get(span(p))).min().unwrap_or(0);
    let last = (0..PARTIES).map(|p| get(span(p) + 1)).max().unwrap_or(0);
    Ok(Round {
        ns: last.saturating_sub(first) as f64 / total as f64,
        handoffs: get(HANDOFFS) as f64 * 1000.0 / total as f64,
    })
}

/// One round with two threads. Fresh counter page; every thread times its
/// own loop, the wall time runs from the first start to the last end.
fn threads_round<L: Section>(
    lock: &L,
    n: u64,
    place: &Placement,
    what: &str,
) -> anyhow::Result<Round> {
    let page = SharedPage::new()?;
    let base = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..PARTIES)
            .map(|who| {
                let page = &page;
                s.spawn(move || party(lock, page, who, n, base, place))
            })
            .collect();
        for h in hs {
            h.join()
                .expect("a bench thread panicked")
                .context("sched_setaffinity")?;
        }
        anyhow::Ok(())
    })?;
    round_result(&page, what)
}

/// One round with two processes: this one and a forked child, on the same
/// shared pages (the lock's and the counter's). `None` if the process has
/// other threads (fork is then refused).
fn processes_round<L: Section>(
    lock: &L,
    n: u64,
    place: &Placement,
    what: &str,
) -> anyhow::Result<Option<Round>> {
    let page = SharedPage::new()?;
    let base = Instant::now();
    let Some(child) = fork(|| party(lock, &page, 1, n, base, place).is_ok()).context("fork")?
    else {
        return Ok(None);
    };
    let mine = party(lock, &page, 0, n, base, place);
    set_cpus(&place.allowed).context("sched_setaffinity")?;
    mine.context("sched_setaffinity")?;
    ensure!(child.wait().context("waitpid")?, "{what}: the child failed");
    round_result(&page, what).map(Some)
}

/// Medians and spreads of the rounds of both locks.
fn medians(ipcns: &[Round], robust: &[Round]) -> Contended {
    let m =
        |v: &[Round], f: fn(&Round) -> f64| Spread::of(&mut v.iter().map(f).collect::<Vec<_>>());
    Contended {
        ipcns: m(ipcns, |r| r.ns),
        robust: m(robust, |r| r.ns),
        ipcns_handoffs: m(ipcns, |r| r.handoffs),
        robust_handoffs: m(robust, |r| r.handoffs),
    }
}

fn contended_threads(
    sizes: &Sizes,
    place: &Placement,
    progress: &mut Progress,
) -> anyhow::Result<Contended> {
    let ipcns_lock = BenchLock::new()?;
    let robust_lock = PthreadMutex::robust_shared()?;
    let mut ipcns = Vec::with_capacity(ROUNDS);
    let mut robust = Vec::with_capacity(ROUNDS);
    // Alternate the two locks, so that a slow spell of the machine falls
    // on both.
    for r in 0..ROUNDS {
        progress.step(
            1 + ROUNDS + r,
            &format!("2 threads contending, {}", progress::round(r, ROUNDS)),
        );
        let n = sizes.per_party;
        ipcns.push(threads_round(&ipcns_lock, n, place, "ipcns, 2 threads")?);
        robust.push(threads_round(
            &robust_lock,
            n,
            place,
            "glibc robust, 2 threads",
        )?);
    }
    Ok(medians(&ipcns, &robust))
}

fn contended_processes(
    sizes: &Sizes,
    place: &Placement,
    progress: &mut Progress,
) -> anyhow::Result<Option<Contended>> {
    let ipcns_lock = BenchLock::new()?;
    let robust_lock = PthreadMutex::robust_shared()?;
    let mut ipcns = Vec::with_capacity(ROUNDS);
    let mut robust = Vec::with_capacity(ROUNDS);
    for r in 0..ROUNDS {
        progress.step(
            1 + r,
            &format!("2 processes contending, {}", progress::round(r, ROUNDS)),
        );
        let n = sizes.per_party;
        let a = processes_round(&ipcns_lock, n, place, "ipcns, 2 processes")?;
        let b = processes_round(&robust_lock, n, place, "glibc robust, 2 processes")?;
        let (Some(a), Some(b)) = (a, b) else {
            return Ok(None);
        };
        ipcns.push(a);
        robust.push(b);
    }
    Ok(Some(medians(&ipcns, &robust)))
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let mut progress = Progress::new("lock", 1 + 2 * ROUNDS);
    progress.step(0, &format!("uncontended, {ROUNDS} rounds per lock"));
    let u = uncontended(&sizes)?;
    // Processes first: fork needs a process with one thread, and the
    // thread rounds leave exited threads that may linger for a moment.
    let place = Placement::new()?;
    let p = contended_processes(&sizes, &place, &mut progress)?;
    let t = contended_threads(&sizes, &place, &mut progress)?;
    progress.clear();

    let x = ratio(u.ipcns.median, u.robust.median);
    let y = ratio(t.ipcns.median, t.robust.median);
    let goals = [
        goal(
            "uncontended lock+unlock <= 1.0x glibc's robust mutex",
            x,
            x <= 1.0,
        ),
        goal(
            "2-thread contended acquisition <= 1.5x glibc's robust mutex",
            y,
            y <= 1.5,
        ),
    ];
    let text = if opts.json {
        to_json(&cpu, &sizes, &place, &u, &t, p.as_ref(), &goals)
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        table(&cpu, &sizes, &place, &u, &t, p.as_ref(), goals)
    };
    crate::print_out(&text)?;
    Ok(())
}

fn table(
    cpu: &str,
    sizes: &Sizes,
    place: &Placement,
    u: &Uncontended,
    t: &Contended,
    p: Option<&Contended>,
    goals: &[Goal],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "ipcns bench lock: ipcns's arena lock beside glibc's pthread mutexes, medians of {ROUNDS} rounds (fastest-slowest)"
    ));
    line(super::stats::cpu_line(cpu, place.allowed.len()));
    line(String::new());
    line(format!(
        "{:<52} {:>19} {:>14}",
        "uncontended lock+unlock, one thread", "ns/pair", "x glibc robust"
    ));
    for (name, v) in [
        ("ipcns lock (futex word, MAP_SHARED page)", u.ipcns),
        ("glibc robust process-shared mutex (MAP_SHARED)", u.robust),
        ("glibc plain private mutex (reference)", u.plain),
    ] {
        line(format!(
            "  {name:<50} {:>19} {:>13.2}x",
            v.cell(2),
            ratio(v.median, u.robust.median)
        ));
    }
    line(format!("  ({} pairs per round)", sizes.pairs));
    line(String::new());
    line(format!(
        "{:<24} {:>21} {:>21} {:>12} {:>21} {:>19} {:>8}",
        "contended, 2 parties",
        "ipcns",
        "glibc robust",
        "ipcns/glibc",
        "handoffs/1000: ipcns",
        "glibc",
        "counter"
    ));
    let row = |name: &str, c: &Contended| {
        format!(
            "  {name:<22} {:>21} {:>21} {:>11.2}x {:>21} {:>19} {:>8}",
            c.ipcns.cell(2),
            c.robust.cell(2),
            ratio(c.ipcns.median, c.robust.median),
            c.ipcns_handoffs.cell(1),
            c.robust_handoffs.cell(1),
            "exact"
        )
    };
    line(row("2 threads", t));
    line(match p {
        Some(p) => row("2 processes (fork)", p),
        None => format!(
            "  {:<22} skipped (the process has other threads)",
            "2 processes (fork)"
        ),
    });
    line(format!(
        "  (ns per acquisition: wall time / all acquisitions, each party doing up to {} of",
        sizes.per_party
    ));
    line(
        "   lock; counter += 1; unlock until one has done them all; handoffs: acquisitions"
            .to_string(),
    );
    line(format!(
        "   in 1000 that took the lock from the other party; {})",
        place.describe()
    ));
    if !goals.is_empty() {
        line(String::new());
    }
    for g in goals {
        line(g.line());
    }
    s
}

fn to_json(
    cpu: &str,
    sizes: &Sizes,
    place: &Placement,
    u: &Uncontended,
    t: &Contended,
    p: Option<&Contended>,
    goals: &[Goal],
) -> String {
    let contended = |c: &Contended| {
        format!(
            "{{{},{},\"ipcns_over_glibc_robust\":{},{},{},\"counter_exact\":true}}",
            c.ipcns.json_fields("ipcns_ns"),
            c.robust.json_fields("glibc_robust_ns"),
            json_num(ratio(c.ipcns.median, c.robust.median)),
            c.ipcns_handoffs.json_fields("ipcns_handoffs_per_1000"),
            c.robust_handoffs
                .json_fields("glibc_robust_handoffs_per_1000")
        )
    };
    let goals: Vec<String> = goals.iter().map(Goal::json).collect();
    format!(
        "{{\"bench\":\"lock\",\"cpu\":{},\"rounds\":{ROUNDS},\"pairs_per_round\":{},\"acquisitions_per_party\":{},\
\"uncontended_ns\":{{{},{},{}}},\"uncontended_ipcns_over_glibc_robust\":{},\
\"contended\":{{\"cpus_bound\":{},\"threads\":{},\"processes\":{}}},\"goals\":[{}]}}\n",
        json_str(cpu),
        sizes.pairs,
        sizes.per_party,
        u.ipcns.json_fields("ipcns"),
        u.robust.json_fields("glibc_robust"),
        u.plain.json_fields("glibc_plain"),
        json_num(ratio(u.ipcns.median, u.robust.median)),
        place.json(),
        contended(t),
        p.map_or_else(|| "null".to_string(), contended),
        goals.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No exclusion at all.
    struct NoLock;

    impl Section for NoLock {
        fn section<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
    }

    /// The counter check is what makes "exact" mean something: with two
    /// cpus and no lock, some round loses counts.
    #[test]
    fn a_lock_that_lets_two_in_is_caught() {
        let place = Placement::new().unwrap();
        if place.cpus.is_none() {
            return; // one cpu: the parties never overlap for sure
        }
        let caught = (0..20).any(|_| threads_round(&NoLock, 1_000_000, &place, "no lock").is_err());
        assert!(caught, "20 rounds without a lock kept an exact count");
    }

    #[test]
    fn the_locks_keep_the_count() {
        let place = Placement::new().unwrap();
        let ipcns_lock = BenchLock::new().unwrap();
        let robust_lock = PthreadMutex::robust_shared().unwrap();
        for _ in 0..3 {
            threads_round(&ipcns_lock, 20_000, &place, "ipcns").unwrap();
            threads_round(&robust_lock, 20_000, &place, "glibc robust").unwrap();
        }
    }
}
