//! `ipcns bench msg`: message queues, ipcns beside the host kernel measured
//! in the same run (in a fresh IPC namespace: a child of this program that
//! unshares one, inside a new user namespace when not root: fresh.rs).
//!
//! - One process, msgsnd then msgrcv of one message of 8, 64, 1024 and
//!   8192 bytes on a queue of its own: ns per pair.
//! - Ping-pong: two processes on two cpus, one sends on queue A and waits
//!   on queue B, the other answers: ns per round trip (8 bytes each way).
//! - Scaling: "a pair" is one process doing msgsnd+msgrcv pairs of 8 bytes
//!   on a queue of its own; two pairs run at once, each bound to a cpu of
//!   its own, beside one pair alone: the ratio of their throughputs. Then
//!   the same in bursts: BURST messages sent, then BURST received, so
//!   that every message but one of each burst takes a block from the
//!   arena's heap and gives it back (a queue keeps one block for its next
//!   message; the heap serves the rest).
//! - Arena bytes per queued 8-byte message (heap growth over 1000 queued
//!   messages; the queue's slot is not counted).
//!
//! Medians of several rounds, and their spread (the fastest and the
//! slowest round). `IPCNS_BENCH_QUICK=1` cuts the iterations a
//! thousandfold (for the tests; the numbers then mean nothing).

use super::TempNs;
use super::plot::Chart;
use super::plot::Series;
use super::progress::Progress;
use super::stats::{Goal, Spread, cpu_model, goal, json_num, json_str, ratio};
use super::sys::{KernelMsgBuf, SharedPage, allowed_cpus, fork, set_cpus};
use anyhow::{Context, bail, ensure};
use ipcns::abi::{IPC_CREAT, IPC_RMID};
use ipcns::msg::MsgArg;
use ipcns::{Cred, Namespace};
use ipcns_oracle::sysv::SysV;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The hidden subcommand that measures the kernel in a new IPC namespace.
pub const KERNEL_CHILD: &str = "__msg-kernel-child";

const ROUNDS: usize = 7;
const SIZES: [usize; 4] = [8, 64, 1024, 8192];
const PAIRS: u64 = 200_000;
const ROUND_TRIPS: u64 = 50_000;
const QUEUED: u64 = 1000;
/// Messages sent before they are received, in the burst rows.
const BURST: u64 = 16;

/// Iteration counts: the real ones, or a thousandth with
/// `IPCNS_BENCH_QUICK=1`.
#[derive(Clone, Copy)]
struct Sizes {
    pairs: u64,
    round_trips: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let quick = super::stats::quick();
        let div = if quick { 1000 } else { 1 };
        Sizes {
            pairs: PAIRS / div,
            round_trips: ROUND_TRIPS / div,
        }
    }
}

/// Message queues as one side sees them: ipcns or the kernel.
trait Queues {
    fn create(&mut self) -> anyhow::Result<i32>;
    fn remove(&mut self, id: i32);
    fn send(&mut self, id: i32, mtype: i64, len: usize) -> anyhow::Result<()>;
    fn receive(&mut self, id: i32, cap: usize, msgtyp: i64) -> anyhow::Result<usize>;
    /// The same side for a forked child (its own credentials).
    fn in_child(&self) -> anyhow::Result<Self>
    where
        Self: Sized;
}

struct Ipcns<'a> {
    ns: &'a Namespace,
    cred: Cred,
    text: Vec<u8>,
    buf: Vec<u8>,
}

impl<'a> Ipcns<'a> {
    fn new(ns: &'a Namespace) -> anyhow::Result<Ipcns<'a>> {
        Ok(Ipcns {
            ns,
            cred: (*ns.cred()?).clone(),
            text: vec![0x5a; 8192],
            buf: vec![0; 8192],
        })
    }
}

impl Queues for Ipcns<'_> {
    fn create(&mut self) -> anyhow::Result<i32> {
        Ok(self.ns.msgget(&self.cred, 0, IPC_CREAT | 0o600)?)
    }
    fn remove(&mut self, id: i32) {
        let _ = self.ns.msgctl(&self.cred, id, IPC_RMID, MsgArg::None);
    }
    #[inline]
    fn send(&mut self, id: i32, mtype: i64, len: usize) -> anyhow::Result<()> {
        self.ns
            .msgsnd(&self.cred, id, mtype, &self.text[..len], 0)?;
        Ok(())
    }
    #[inline]
    fn receive(&mut self, id: i32, cap: usize, msgtyp: i64) -> anyhow::Result<usize> {
        Ok(self
            .ns
            .msgrcv(&self.cred, id, &mut self.buf[..cap], msgtyp, 0)?
            .1)
    }
    fn in_child(&self) -> anyhow::Result<Self> {
        Ipcns::new(self.ns)
    }
}

struct Kernel {
    buf: KernelMsgBuf,
}

impl Queues for Kernel {
    fn create(&mut self) -> anyhow::Result<i32> {
        Ok(ipcns_oracle::kernel::Host.msgget(0, IPC_CREAT | 0o600)?)
    }
    fn remove(&mut self, id: i32) {
        let _ = ipcns_oracle::kernel::Host.msgctl(id, IPC_RMID, MsgArg::None);
    }
    #[inline]
    fn send(&mut self, id: i32, mtype: i64, len: usize) -> anyhow::Result<()> {
        Ok(self.buf.send(id, mtype, len, 0)?)
    }
    #[inline]
    fn receive(&mut self, id: i32, cap: usize, msgtyp: i64) -> anyhow::Result<usize> {
        Ok(self.buf.receive(id, cap, msgtyp, 0)?)
    }
    fn in_child(&self) -> anyhow::Result<Self> {
        Ok(Kernel {
            buf: KernelMsgBuf::new(8192),
        })
    }
}

/// `n` msgsnd+msgrcv pairs of `len` bytes on queue `id`.
fn pairs<Q: Queues>(q: &mut Q, id: i32, len: usize, n: u64) -> anyhow::Result<()> {
    for _ in 0..n {
        q.send(id, 1, len)?;
        let got = q.receive(id, len, 0)?;
        ensure!(got == len, "received {got} bytes of {len}");
    }
    Ok(())
}

/// `n` msgsnd+msgrcv pairs of 8 bytes on queue `id`, `burst` sends then
/// `burst` receives at a time (`n` is rounded up to whole bursts).
fn bursts<Q: Queues>(q: &mut Q, id: i32, burst: u64, n: u64) -> anyhow::Result<()> {
    if burst <= 1 {
        return pairs(q, id, 8, n);
    }
    for _ in 0..n.div_ceil(burst) {
        for _ in 0..burst {
            q.send(id, 1, 8)?;
        }
        for _ in 0..burst {
            let got = q.receive(id, 8, 0)?;
            ensure!(got == 8, "received {got} bytes of 8");
        }
    }
    Ok(())
}

/// ns per pair for each size: median and spread of the rounds.
fn one_process<Q: Queues>(q: &mut Q, sizes: Sizes) -> anyhow::Result<Vec<Spread>> {
    let id = q.create()?;
    let mut out = Vec::new();
    for len in SIZES {
        pairs(q, id, len, sizes.pairs / 10 + 1)?;
        let mut v = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            pairs(q, id, len, sizes.pairs)?;
            v.push(t.elapsed().as_nanos() as f64 / sizes.pairs as f64);
        }
        out.push(Spread::of(&mut v));
    }
    q.remove(id);
    Ok(out)
}

/// The cpus two parties run on, if this process may use two.
fn two_cpus() -> anyhow::Result<(Option<[usize; 2]>, Vec<usize>)> {
    let allowed = allowed_cpus().context("sched_getaffinity")?;
    let cpus = (allowed.len() >= 2).then(|| [allowed[0], allowed[1]]);
    Ok((cpus, allowed))
}

/// ns per round trip between this process and a forked child, each bound
/// to a cpu of its own: each round's, in order.
fn ping_pong<Q: Queues>(q: &mut Q, sizes: Sizes) -> anyhow::Result<Vec<f64>> {
    let (cpus, allowed) = two_cpus()?;
    let (a, b) = (q.create()?, q.create()?);
    let n = sizes.round_trips;
    let total = n * (ROUNDS as u64 + 1);
    let parent_q: &Q = q;
    let child = fork(move || {
        // Made in the child: its own credentials (pid).
        let Ok(mut q) = parent_q.in_child() else {
            return false;
        };
        if let Some(c) = cpus
            && set_cpus(&c[1..]).is_err()
        {
            return false;
        }
        (0..total).all(|_| q.receive(a, 8, 0).is_ok() && q.send(b, 1, 8).is_ok())
    })
    .context("fork")?;
    let Some(child) = child else {
        bail!("ping-pong: this process has other threads");
    };
    if let Some(c) = cpus {
        set_cpus(&c[..1]).context("sched_setaffinity")?;
    }
    let mut v = Vec::with_capacity(ROUNDS);
    for round in 0..=ROUNDS {
        let t = Instant::now();
        for _ in 0..n {
            q.send(a, 1, 8)?;
            q.receive(b, 8, 0)?;
        }
        // The first round warms up.
        if round > 0 {
            v.push(t.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    set_cpus(&allowed).context("sched_setaffinity")?;
    ensure!(
        child.wait().context("waitpid")?,
        "ping-pong: the child failed"
    );
    q.remove(a);
    q.remove(b);
    Ok(v)
}

/// Throughput in pairs per second: one pair alone, then two at once (this
/// process and a forked child, each on a cpu and a queue of its own).
/// Medians and spreads of the rounds.
fn scaling<Q: Queues>(q: &mut Q, sizes: Sizes, burst: u64) -> anyhow::Result<(Spread, Spread)> {
    let (cpus, allowed) = two_cpus()?;
    let n = sizes.pairs.div_ceil(burst) * burst;
    let (a, b) = (q.create()?, q.create()?);
    if let Some(c) = cpus {
        set_cpus(&c[..1]).context("sched_setaffinity")?;
    }
    bursts(q, a, burst, n / 10 + 1)?;
    let mut one = Vec::with_capacity(ROUNDS);
    let mut two = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        bursts(q, a, burst, n)?;
        one.push(n as f64 / t.elapsed().as_secs_f64());
        // Two at once: a barrier, then each records its start and end
        // (ns after `base`, which the child inherits).
        let page = SharedPage::new()?;
        let base = Instant::now();
        let w = page.words();
        let parent_q: &Q = q;
        let child = fork(|| {
            let Ok(mut q) = parent_q.in_child() else {
                return false;
            };
            if let Some(c) = cpus
                && set_cpus(&c[1..]).is_err()
            {
                return false;
            }
            if bursts(&mut q, b, burst, n / 10 + 1).is_err() {
                return false;
            }
            party(w, 1, base, || bursts(&mut q, b, burst, n).is_ok())
        })
        .context("fork")?;
        let Some(child) = child else {
            bail!("scaling: this process has other threads");
        };
        let mine = party(w, 0, base, || bursts(q, a, burst, n).is_ok());
        ensure!(
            child.wait().context("waitpid")? && mine,
            "scaling: a party failed"
        );
        let start = w[8]
            .load(Ordering::Relaxed)
            .min(w[16].load(Ordering::Relaxed));
        let end = w[9]
            .load(Ordering::Relaxed)
            .max(w[17].load(Ordering::Relaxed));
        two.push(2.0 * n as f64 / (end.saturating_sub(start).max(1) as f64 / 1e9));
    }
    set_cpus(&allowed).context("sched_setaffinity")?;
    q.remove(a);
    q.remove(b);
    Ok((Spread::of(&mut one), Spread::of(&mut two)))
}

/// One party of the scaling round: waits for the other, runs `f`, records
/// its start and end in words `8 + 8 * who` and `9 + 8 * who`.
fn party(
    w: &[std::sync::atomic::AtomicU64; 512],
    who: usize,
    base: Instant,
    f: impl FnOnce() -> bool,
) -> bool {
    // AcqRel/Acquire: only a barrier.
    w[0].fetch_add(1, Ordering::AcqRel);
    while w[0].load(Ordering::Acquire) < 2 {
        std::hint::spin_loop();
    }
    let start = base.elapsed().as_nanos() as u64;
    let ok = f();
    let end = base.elapsed().as_nanos() as u64;
    // Relaxed: read after the child's exit or by this process.
    w[8 + 8 * who].store(start, Ordering::Relaxed);
    w[9 + 8 * who].store(end, Ordering::Relaxed);
    ok
}

/// Everything measured on one side: medians and spreads of the rounds.
struct Side {
    pairs: Vec<Spread>,
    ping_pong: Spread,
    /// Each round's round trip, in order.
    ping_pong_rounds: Vec<f64>,
    one: Spread,
    two: Spread,
    /// The same in bursts of [`BURST`].
    one_burst: Spread,
    two_burst: Spread,
}

impl Side {
    /// The figures as numbers, for the kernel child's line: each
    /// spread's median, min and max, the ping-pong's rounds.
    fn to_numbers(&self) -> Vec<f64> {
        let mut v = Vec::new();
        let mut spread = |s: &Spread| v.extend([s.median, s.min, s.max]);
        self.pairs.iter().for_each(&mut spread);
        for s in [&self.one, &self.two, &self.one_burst, &self.two_burst] {
            spread(s);
        }
        v.extend(&self.ping_pong_rounds);
        v
    }

    /// [`Side::to_numbers`] read back.
    fn from_numbers(v: &[f64]) -> Option<Side> {
        if v.len() != 3 * (SIZES.len() + 4) + ROUNDS {
            return None;
        }
        let at = |i: usize| Spread {
            median: v[3 * i],
            min: v[3 * i + 1],
            max: v[3 * i + 2],
        };
        let n = SIZES.len();
        let rounds = v[3 * (n + 4)..].to_vec();
        Some(Side {
            pairs: (0..n).map(at).collect(),
            one: at(n),
            two: at(n + 1),
            one_burst: at(n + 2),
            two_burst: at(n + 3),
            ping_pong: Spread::of(&mut rounds.clone()),
            ping_pong_rounds: rounds,
        })
    }
}

/// The steps of [`measure`], for the progress line.
const STEPS: usize = 4;

/// Everything on one side; `step(i, what)` is told each step as it starts.
fn measure<Q: Queues>(
    q: &mut Q,
    sizes: Sizes,
    step: &mut dyn FnMut(usize, &str),
) -> anyhow::Result<Side> {
    step(
        0,
        &format!(
            "msgsnd+msgrcv in one process, {} sizes, {ROUNDS} rounds",
            SIZES.len()
        ),
    );
    let pairs = one_process(q, sizes)?;
    step(
        1,
        &format!("ping-pong between two processes, {ROUNDS} rounds"),
    );
    let ping_pong_rounds = ping_pong(q, sizes)?;
    step(2, &format!("one pair beside two, {ROUNDS} rounds"));
    let (one, two) = scaling(q, sizes, 1)?;
    step(
        3,
        &format!("one pair beside two in bursts of {BURST}, {ROUNDS} rounds"),
    );
    let (one_burst, two_burst) = scaling(q, sizes, BURST)?;
    Ok(Side {
        pairs,
        ping_pong: Spread::of(&mut ping_pong_rounds.clone()),
        ping_pong_rounds,
        one,
        two,
        one_burst,
        two_burst,
    })
}

/// The child half: enter a fresh IPC namespace, measure the kernel, print
/// the numbers on one line.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    ensure!(args.is_empty(), "usage: ipcns bench {KERNEL_CHILD}");
    crate::fresh::enter()?;
    let mut k = Kernel {
        buf: KernelMsgBuf::new(8192),
    };
    let s = measure(&mut k, Sizes::from_env(), &mut |_, _| {})?;
    let nums: Vec<String> = s.to_numbers().iter().map(f64::to_string).collect();
    println!("{}", nums.join(" "));
    Ok(())
}

fn kernel_side() -> anyhow::Result<Side> {
    let words = crate::kernel_child_words(KERNEL_CHILD, &[])?;
    let v: Vec<f64> = words.iter().filter_map(|x| x.parse().ok()).collect();
    match Side::from_numbers(&v) {
        Some(s) if v.len() == words.len() => Ok(s),
        _ => bail!("kernel child said {words:?}"),
    }
}

/// Heap bytes per queued 8-byte message.
fn bytes_per_message() -> anyhow::Result<f64> {
    let t = TempNs::new("msg", 64 << 20, false)?;
    let mut q = Ipcns::new(&t.ns)?;
    let id = q.create()?;
    let before = t.ns.heap_in_use();
    for _ in 0..QUEUED {
        q.send(id, 1, 8)?;
    }
    Ok((t.ns.heap_in_use() - before) as f64 / QUEUED as f64)
}

pub fn run(opts: &crate::Options) -> anyhow::Result<Vec<Chart>> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let ncpus = allowed_cpus().map_or(0, |c| c.len());
    let mut progress = Progress::new("msg", 2 * STEPS);
    let ours = {
        let t = TempNs::new("msg", 64 << 20, false)?;
        let mut q = Ipcns::new(&t.ns)?;
        measure(&mut q, sizes, &mut |i, what| {
            progress.step(i, &format!("ipcns: {what}"));
        })?
    };
    progress.step(STEPS, "the kernel (a child process: one side at a time)");
    let (kernel, kernel_note) = match kernel_side() {
        Ok(k) => (Some(k), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    progress.clear();
    let bytes = bytes_per_message()?;
    let mut goals = Vec::new();
    if let Some(k) = &kernel {
        for (i, len) in SIZES.iter().enumerate() {
            let x = ratio(k.pairs[i].median, ours.pairs[i].median);
            goals.push(goal(
                &format!("msgsnd+msgrcv of {len} bytes >= 5x faster than the kernel"),
                x,
                x >= 5.0,
            ));
        }
        let x = ratio(k.ping_pong.median, ours.ping_pong.median);
        goals.push(goal(
            "ping-pong round trip >= 3x faster than the kernel",
            x,
            x >= 3.0,
        ));
    }
    let scale = ratio(ours.two.median, ours.one.median);
    goals.push(goal(
        "two pairs on two cpus >= 1.6x the throughput of one pair",
        scale,
        scale >= 1.6,
    ));
    let scale = ratio(ours.two_burst.median, ours.one_burst.median);
    goals.push(goal(
        &format!("two pairs on two cpus, bursts of {BURST} (heap blocks), >= 1.6x one pair"),
        scale,
        scale >= 1.6,
    ));
    let text = if opts.json {
        to_json(
            &cpu,
            sizes,
            &ours,
            kernel.as_ref(),
            kernel_note.as_deref(),
            bytes,
            &goals,
        )
    } else {
        table(
            &cpu,
            ncpus,
            sizes,
            &ours,
            kernel.as_ref(),
            kernel_note.as_deref(),
            bytes,
            if opts.goals { &goals } else { &[] },
        )
    };
    crate::print_out(&text)?;
    Ok(charts(&ours, kernel.as_ref()))
}

/// `--plot`'s charts: time per msgsnd+msgrcv against the message size,
/// and the ping-pong round trip of every round.
fn charts(ours: &Side, kernel: Option<&Side>) -> Vec<Chart> {
    let sides = || std::iter::once(("ipcns", ours)).chain(kernel.map(|k| ("kernel", k)));
    let sizes = sides()
        .map(|(name, s)| Series {
            name: name.to_string(),
            points: SIZES
                .iter()
                .zip(&s.pairs)
                .map(|(&len, p)| (len as f64, p.median))
                .collect(),
        })
        .collect();
    let rounds = sides()
        .map(|(name, s)| Series {
            name: name.to_string(),
            points: (1..)
                .zip(&s.ping_pong_rounds)
                .map(|(r, &ns)| (f64::from(r), ns))
                .collect(),
        })
        .collect();
    vec![
        Chart {
            title: "msgsnd + msgrcv in one process".to_string(),
            x_label: "message size, bytes".to_string(),
            x_log: true,
            y_label: "ns per msgsnd+msgrcv pair (median)".to_string(),
            y_log: false,
            series: sizes,
        },
        Chart {
            title: "ping-pong between two processes, 8 bytes each way".to_string(),
            x_label: "round".to_string(),
            x_log: false,
            y_label: "ns per round trip".to_string(),
            y_log: false,
            series: rounds,
        },
    ]
}

#[allow(clippy::too_many_arguments)]
fn table(
    cpu: &str,
    ncpus: usize,
    sizes: Sizes,
    ours: &Side,
    kernel: Option<&Side>,
    note: Option<&str>,
    bytes: f64,
    goals: &[Goal],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "ipcns bench msg: msgsnd and msgrcv, ipcns beside the kernel (a fresh IPC namespace), medians of {ROUNDS} rounds, (fastest-slowest)"
    ));
    line(format!("cpu: {cpu}, {ncpus} cpus usable"));
    line(String::new());
    let cell = |x: Spread| format!("{:.0} ({})", x.median, x.range(0));
    let k = |f: &dyn Fn(&Side) -> Spread| kernel.map_or("-".to_string(), |k| cell(f(k)));
    let r = |f: &dyn Fn(&Side) -> Spread| {
        kernel.map_or("-".to_string(), |k| {
            format!("{:.1}x", ratio(f(k).median, f(ours).median))
        })
    };
    let two_over_one = |s: &Side, burst: bool| {
        let (one, two) = if burst {
            (s.one_burst, s.two_burst)
        } else {
            (s.one, s.two)
        };
        format!("{:.2}x", ratio(two.median, one.median))
    };
    line(format!(
        "{:<42} {:>24} {:>24} {:>12}",
        "one process: msgsnd+msgrcv, ns per pair", "ipcns", "kernel", "kernel/ipcns"
    ));
    for (i, len) in SIZES.iter().enumerate() {
        line(format!(
            "  {:<40} {:>24} {:>24} {:>12}",
            format!("{len} bytes"),
            cell(ours.pairs[i]),
            k(&|s: &Side| s.pairs[i]),
            r(&|s: &Side| s.pairs[i])
        ));
    }
    line(format!("  ({} pairs per round)", sizes.pairs));
    line(format!(
        "{:<42} {:>24} {:>24} {:>12}",
        "ping-pong, 2 processes, ns per round trip",
        cell(ours.ping_pong),
        k(&|s: &Side| s.ping_pong),
        r(&|s: &Side| s.ping_pong)
    ));
    line(format!(
        "  ({} round trips of 8 bytes each way per round, on two queues, one cpu each)",
        sizes.round_trips
    ));
    line(format!(
        "{:<42} {:>24} {:>24}",
        "scaling: million pairs per second (8 bytes)", "ipcns", "kernel"
    ));
    // Millions a second, two decimals.
    let cell = |x: Spread| {
        let m = x.scaled(1e-6);
        format!("{:.2} ({})", m.median, m.range(2))
    };
    let k = |f: &dyn Fn(&Side) -> Spread| kernel.map_or("-".to_string(), |k| cell(f(k)));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        "one pair (one process, its own queue)",
        cell(ours.one),
        k(&|s: &Side| s.one)
    ));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        "two pairs at once, one cpu each",
        cell(ours.two),
        k(&|s: &Side| s.two)
    ));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        "two / one",
        two_over_one(ours, false),
        kernel.map_or("-".to_string(), |k| two_over_one(k, false))
    ));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        format!("one pair, bursts of {BURST}"),
        cell(ours.one_burst),
        k(&|s: &Side| s.one_burst)
    ));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        format!("two pairs at once, bursts of {BURST}"),
        cell(ours.two_burst),
        k(&|s: &Side| s.two_burst)
    ));
    line(format!(
        "  {:<40} {:>24} {:>24}",
        "two / one, bursts",
        two_over_one(ours, true),
        kernel.map_or("-".to_string(), |k| two_over_one(k, true))
    ));
    line(format!(
        "  (bursts: {BURST} msgsnd then {BURST} msgrcv; all but one block of each burst come from the heap)"
    ));
    line(format!(
        "arena bytes per queued 8-byte message: {bytes:.1} (a {}-byte header and the text, in the heap's 32-byte class; Linux: a 48-byte struct msg_msg and the text in one kmalloc-64)",
        ipcns::msg::MESSAGE_HEADER
    ));
    if let Some(n) = note {
        line(format!("kernel columns skipped: {n}"));
    }
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
    sizes: Sizes,
    ours: &Side,
    kernel: Option<&Side>,
    note: Option<&str>,
    bytes: f64,
    goals: &[Goal],
) -> String {
    let kn = |f: &dyn Fn(&Side) -> f64| kernel.map_or("null".to_string(), |k| json_num(f(k)));
    // `"NAME":median,"NAME_min":..,"NAME_max":..` of the kernel, or nulls.
    let kf = |name: &str, f: &dyn Fn(&Side) -> Spread| match kernel {
        Some(k) => f(k).json_fields(name),
        None => format!("\"{name}\":null,\"{name}_min\":null,\"{name}_max\":null"),
    };
    let rows: Vec<String> = SIZES
        .iter()
        .enumerate()
        .map(|(i, len)| {
            format!(
                "{{\"bytes\":{len},{},{},\"kernel_over_ipcns\":{}}}",
                ours.pairs[i].json_fields("ipcns_ns"),
                kf("kernel_ns", &|s: &Side| s.pairs[i]),
                kn(&|s: &Side| ratio(s.pairs[i].median, ours.pairs[i].median))
            )
        })
        .collect();
    let list = |v: &[f64]| v.iter().map(|&x| json_num(x)).collect::<Vec<_>>().join(",");
    let goals: Vec<String> = goals.iter().map(Goal::json).collect();
    let scaling = |one: &dyn Fn(&Side) -> Spread, two: &dyn Fn(&Side) -> Spread| {
        format!(
            "{},{},\"ipcns_two_over_one\":{},{},{},\"kernel_two_over_one\":{}",
            one(ours).json_fields("ipcns_one"),
            two(ours).json_fields("ipcns_two"),
            json_num(ratio(two(ours).median, one(ours).median)),
            kf("kernel_one", one),
            kf("kernel_two", two),
            kn(&|s: &Side| ratio(two(s).median, one(s).median))
        )
    };
    let mut s = format!(
        "{{\"bench\":\"msg\",\"cpu\":{},\"rounds\":{ROUNDS},\"pairs_per_round\":{},\"round_trips_per_round\":{},\
\"one_process\":[{}],\"ping_pong_ns\":{{{},{},\"kernel_over_ipcns\":{},\"ipcns_rounds\":[{}],\"kernel_rounds\":{}}},\
\"scaling_pairs_per_s\":{{{}}},\
\"burst_scaling_pairs_per_s\":{{\"burst\":{BURST},{}}},\
\"bytes_per_queued_8_byte_message\":{},\"goals\":[{}]",
        json_str(cpu),
        sizes.pairs,
        sizes.round_trips,
        rows.join(","),
        ours.ping_pong.json_fields("ipcns"),
        kf("kernel", &|s: &Side| s.ping_pong),
        kn(&|s: &Side| ratio(s.ping_pong.median, ours.ping_pong.median)),
        list(&ours.ping_pong_rounds),
        kernel.map_or("null".to_string(), |k| format!(
            "[{}]",
            list(&k.ping_pong_rounds)
        )),
        scaling(&|s: &Side| s.one, &|s: &Side| s.two),
        scaling(&|s: &Side| s.one_burst, &|s: &Side| s.two_burst),
        json_num(bytes),
        goals.join(",")
    );
    if let Some(n) = note {
        s.push_str(&format!(",\"kernel_skipped\":{}", json_str(n)));
    }
    s.push_str("}\n");
    s
}
