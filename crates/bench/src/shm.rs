//! `ipcns bench shm`: what a `shmat` + `shmdt` pair, a `shmget` +
//! `IPC_RMID` pair and a segment's whole life cost, ipcns beside the host
//! kernel in one run, and `shm_nattch` as both count it.
//!
//! Per size (4 KiB, 64 KiB, 16 MiB), two rows: a segment attached
//! (`shmat(id, NULL, 0)`) and detached at once, touching nothing (the cost
//! of the calls and the mapping), and the same with one byte written at
//! the start of every page in between (a page fault each: the pages exist
//! after the warm-up, so these are the faults that map them, not the ones
//! that allocate them). ns per pair. ipcns calls `Namespace::shmat` and
//! `shmdt` in a fresh namespace; the kernel side is a child process that
//! calls unshare(CLONE_NEWIPC) and then the raw `shmat` and `shmdt` system
//! calls. Both map a tmpfs file (ipcns its segment file, the kernel its
//! shmem file), so every fault is a shmem fault on both sides.
//!
//! Then, per size (4 KiB, 64 KiB, 1 MiB), a segment made and removed
//! (`shmget(IPC_PRIVATE, size, IPC_CREAT | 0600)` + `IPC_RMID`), never
//! attached; and a segment's whole life as stress-ng's `--shm-sysv` lives
//! it (made, attached, one byte written per page, detached, removed),
//! where both allocate every page: ipcns all of them at the first shmat
//! (so that no touch can meet a full tmpfs), the kernel each at its first
//! touch.
//!
//! Goals (issue 15): shmat + shmdt and shmget + IPC_RMID at least the
//! kernel's speed, on the rows that touch nothing.
//!
//! Medians of ROUNDS rounds, the ipcns and kernel rounds alternating, so
//! that a slow spell of the shared machine falls on both. Within a round
//! the rows take turns in CHUNKS chunks, and a round's figure for a row is
//! the median of its chunks' (as `bench semop` does).
//!
//! `shm_nattch` (IPC_STAT) of one segment: after 3 attaches in this
//! process, in a child forked then (which inherits the 3: Linux counts
//! them in `dup_mmap`), after that child's exit, and after the 3 detaches.
//! The two implementations must agree; the table says whether they do.
//!
//! Without the right to unshare (not root), the kernel column says why it
//! is missing. `IPCNS_BENCH_QUICK=1` cuts the pairs a thousandfold (for the
//! tests; the numbers then mean nothing).

use super::TempNs;
use super::progress::{self, Progress};
use super::stats::{Goal, Spread, cpu_model, goal, json_num, json_str, median, ratio};
use super::sys::{Segment, SharedPage, Shm, allowed_cpus, fork};
use anyhow::{Context, bail, ensure};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// The hidden subcommand that measures the kernel in a new IPC namespace.
pub const KERNEL_CHILD: &str = "__shm-kernel-child";

const SIZES: [usize; 3] = [4 << 10, 64 << 10, 16 << 20];

/// What a row does, per pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// shmat + shmdt of a segment made once (index into SIZES), touching
    /// each page or not.
    Pair(usize, bool),
    /// shmget + IPC_RMID of this many bytes.
    GetRmid(usize),
    /// shmget, shmat, a byte written per page, shmdt, IPC_RMID.
    Life(usize),
}

/// The rows: what each does and its pairs per round (fewer where a pair
/// faults in or allocates many pages).
const ROWS: [(Op, u64); 11] = [
    (Op::Pair(0, false), 10_000),
    (Op::Pair(0, true), 10_000),
    (Op::Pair(1, false), 10_000),
    (Op::Pair(1, true), 4_000),
    (Op::Pair(2, false), 10_000),
    (Op::Pair(2, true), 50),
    (Op::GetRmid(4 << 10), 5_000),
    (Op::GetRmid(64 << 10), 2_000),
    (Op::GetRmid(1 << 20), 300),
    (Op::Life(64 << 10), 2_000),
    (Op::Life(1 << 20), 300),
];

impl Op {
    /// The segment's size.
    fn size(self) -> usize {
        match self {
            Op::Pair(i, _) => SIZES[i],
            Op::GetRmid(size) | Op::Life(size) => size,
        }
    }

    /// Whether each page is written.
    fn touch(self) -> bool {
        matches!(self, Op::Pair(_, true) | Op::Life(_))
    }

    /// What the row does, for the table.
    fn name(self) -> &'static str {
        match self {
            Op::Pair(..) => "shmat+shmdt",
            Op::GetRmid(_) => "shmget+rmid",
            Op::Life(_) => "whole life",
        }
    }

    /// The row's goal, if it has one.
    fn goal(self) -> Option<String> {
        match self {
            Op::Pair(i, false) => Some(format!(
                "shmat + shmdt of {} at least the kernel's speed (k/i >= 1)",
                size_name(SIZES[i])
            )),
            Op::GetRmid(size) => Some(format!(
                "shmget + IPC_RMID of {} at least the kernel's speed (k/i >= 1)",
                size_name(size)
            )),
            _ => None,
        }
    }
}
const ROUNDS: usize = 5;
/// Turns per round, each row making a CHUNKS-th of its pairs per turn.
const CHUNKS: u64 = 10;
const PAGE: usize = 4096;

/// What `shm_nattch` is read after, in order.
const STEPS: [&str; 4] = [
    "after 3 attaches",
    "in a child forked then",
    "after the child's exit",
    "after the 3 detaches",
];

/// Pairs per row per round: the real ones, or a thousandth (at least
/// CHUNKS) with `IPCNS_BENCH_QUICK=1`.
fn pairs_per_round() -> [u64; ROWS.len()] {
    let quick = super::stats::quick();
    ROWS.map(|(_, n)| if quick { (n / 1000).max(CHUNKS) } else { n })
}

/// One round on one side (`via`): the three segments, a warm-up tenth of
/// each row (the touched rows' first pass allocates the pages), then the
/// rows in turns. ns per pair, in row order.
fn side_round(via: Shm<'_>, pairs: &[u64; ROWS.len()], round: usize) -> anyhow::Result<Vec<f64>> {
    let segs = SIZES
        .iter()
        .map(|&size| {
            Segment::new(via, size).with_context(|| format!("shmget(IPC_PRIVATE, {size}, 0600)"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let run = |r: usize, n: u64| -> anyhow::Result<f64> {
        let (op, _) = ROWS[r];
        let what = || format!("{} of {}", op.name(), size_name(op.size()));
        let t = Instant::now();
        for _ in 0..n {
            match op {
                Op::Pair(i, touch) => segs[i].attach_detach(touch).with_context(what)?,
                Op::GetRmid(size) => drop(Segment::new(via, size).with_context(what)?),
                Op::Life(size) => Segment::new(via, size)
                    .and_then(|seg| seg.attach_detach(true))
                    .with_context(what)?,
            }
        }
        Ok(t.elapsed().as_nanos() as f64)
    };
    for (r, &n) in pairs.iter().enumerate() {
        run(r, n / 10 + 1)?;
    }
    let mut per_pair = vec![Vec::with_capacity(CHUNKS as usize); ROWS.len()];
    for k in 0..CHUNKS as usize {
        // Each turn starts one row further: no row always first or last.
        for r in (0..ROWS.len()).map(|i| (i + round + k) % ROWS.len()) {
            let chunk = (pairs[r] / CHUNKS).max(1);
            per_pair[r].push(run(r, chunk)? / chunk as f64);
        }
    }
    Ok(per_pair.iter_mut().map(|v| median(v)).collect())
}

/// `shm_nattch` at each of [`STEPS`], on a 4 KiB segment of `via`'s.
fn nattch_steps(via: Shm<'_>) -> anyhow::Result<[u64; 4]> {
    let seg = Segment::new(via, SIZES[0]).context("shmget(IPC_PRIVATE, 4096, 0600)")?;
    let addrs = (0..3)
        .map(|_| seg.attach())
        .collect::<Result<Vec<_>, _>>()
        .context("shmat")?;
    let three = seg.nattch().context("IPC_STAT")?;
    // The child's reading, plus one (0: none).
    let page = SharedPage::new().context("mmap")?;
    let child = fork(|| {
        seg.nattch()
            .map(|n| page.words()[0].store(n + 1, Relaxed))
            .is_ok()
    })
    .context("fork")?;
    let Some(child) = child else {
        bail!("fork refused: this process has other threads");
    };
    ensure!(
        child.wait().context("waitpid")?,
        "the forked child could not read shm_nattch"
    );
    let in_child = page.words()[0].load(Relaxed).saturating_sub(1);
    let after_exit = seg.nattch().context("IPC_STAT")?;
    for a in addrs {
        seg.detach(a).context("shmdt")?;
    }
    let detached = seg.nattch().context("IPC_STAT")?;
    Ok([three, in_child, after_exit, detached])
}

fn ipcns_round(pairs: &[u64; ROWS.len()], round: usize) -> anyhow::Result<Vec<f64>> {
    let t = TempNs::new("shm", 64 << 20, false)?;
    let cred = t.cred()?;
    side_round(Shm::Ipcns(&t.ns, &cred), pairs, round)
}

fn ipcns_nattch() -> anyhow::Result<[u64; 4]> {
    let t = TempNs::new("shm", 64 << 20, false)?;
    let cred = t.cred()?;
    nattch_steps(Shm::Ipcns(&t.ns, &cred))
}

/// The child half, in a fresh IPC namespace: `pairs ROUND N...` prints ns
/// per pair for each row (N pairs each); `nattch` prints the four counts.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    crate::fresh::enter()?;
    let words: Vec<String> = match args {
        [what, round, n @ ..] if what == "pairs" && n.len() == ROWS.len() => {
            let mut pairs = [0; ROWS.len()];
            for (p, n) in pairs.iter_mut().zip(n) {
                *p = n.parse()?;
            }
            let v = side_round(Shm::Kernel, &pairs, round.parse()?)?;
            v.iter().map(f64::to_string).collect()
        }
        [what] if what == "nattch" => nattch_steps(Shm::Kernel)?
            .iter()
            .map(u64::to_string)
            .collect(),
        _ => bail!("usage: ipcns bench {KERNEL_CHILD} pairs ROUND N... | nattch"),
    };
    println!("{}", words.join(" "));
    Ok(())
}

/// Runs the kernel child with `args`; its stdout's words, parsed.
fn kernel_run<T: std::str::FromStr>(args: &[String], want: usize) -> anyhow::Result<Vec<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let out = Command::new(std::env::current_exe()?)
        .arg(KERNEL_CHILD)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim();
        bail!("{}", said.strip_prefix("ipcns: ").unwrap_or(said));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<T>, _>>()?;
    ensure!(v.len() == want, "kernel child said {text:?}");
    Ok(v)
}

/// A row's ns per pair: median and spread of the rounds.
struct Row {
    op: Op,
    pairs: u64,
    ipcns: Spread,
    kernel: Result<Spread, String>,
}

/// `shm_nattch` at each step, both sides.
struct Nattch {
    ipcns: [u64; 4],
    kernel: Result<[u64; 4], String>,
}

impl Nattch {
    /// Whether both said the same (None: the kernel's is missing).
    fn agree(&self) -> Option<bool> {
        self.kernel.as_ref().ok().map(|k| *k == self.ipcns)
    }
}

/// `4 KiB`, `64 KiB`, `16 MiB`.
fn size_name(size: usize) -> String {
    if size >= 1 << 20 {
        format!("{} MiB", size >> 20)
    } else {
        format!("{} KiB", size >> 10)
    }
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let pairs = pairs_per_round();
    let cpu = cpu_model();
    let cpus = allowed_cpus().context("sched_getaffinity")?.len();
    let mut kernel_note: Option<String> = None;
    let mut ours = vec![Vec::with_capacity(ROUNDS); ROWS.len()];
    let mut theirs = vec![Vec::with_capacity(ROUNDS); ROWS.len()];
    let mut progress = Progress::new("shm", 2 * ROUNDS + 1);
    for round in 0..ROUNDS {
        let rows = ROWS.len();
        progress.step(
            2 * round,
            &format!("{}, ipcns, {rows} rows", progress::round(round, ROUNDS)),
        );
        for (r, ns) in ipcns_round(&pairs, round)
            .context("ipcns")?
            .into_iter()
            .enumerate()
        {
            ours[r].push(ns);
        }
        if kernel_note.is_none() {
            progress.step(
                2 * round + 1,
                &format!(
                    "{}, the kernel, {rows} rows",
                    progress::round(round, ROUNDS)
                ),
            );
            let mut args = vec!["pairs".to_string(), round.to_string()];
            args.extend(pairs.iter().map(u64::to_string));
            match kernel_run::<f64>(&args, ROWS.len()) {
                Ok(v) => {
                    for (r, ns) in v.into_iter().enumerate() {
                        theirs[r].push(ns);
                    }
                }
                Err(e) => kernel_note = Some(format!("kernel unavailable: {e:#}")),
            }
        }
    }
    let rows: Vec<Row> = ROWS
        .iter()
        .enumerate()
        .map(|(r, &(op, _))| Row {
            op,
            pairs: pairs[r],
            ipcns: Spread::of(&mut ours[r]),
            kernel: match &kernel_note {
                Some(n) => Err(n.clone()),
                None => Ok(Spread::of(&mut theirs[r])),
            },
        })
        .collect();
    progress.step(2 * ROUNDS, "shm_nattch across a fork");
    let nattch = Nattch {
        ipcns: ipcns_nattch().context("ipcns shm_nattch")?,
        kernel: match &kernel_note {
            Some(n) => Err(n.clone()),
            None => kernel_run::<u64>(&["nattch".to_string()], STEPS.len())
                .map(|v| [v[0], v[1], v[2], v[3]])
                .map_err(|e| format!("kernel unavailable: {e:#}")),
        },
    };
    let goals: Vec<Goal> = rows
        .iter()
        .filter_map(|r| {
            let text = r.op.goal()?;
            let k = r.kernel.as_ref().ok()?;
            let v = ratio(k.median, r.ipcns.median);
            Some(goal(&text, v, v >= 1.0))
        })
        .collect();
    progress.clear();
    let text = if opts.json {
        to_json(&cpu, cpus, &rows, &nattch, &goals)
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        table(&cpu, cpus, &rows, &nattch, goals)
    };
    crate::print_out(&text)?;
    Ok(())
}

/// `none` or `N x 1 B`: what a row writes per pair.
fn touched(r: &Row) -> String {
    if r.op.touch() {
        format!("{} x 1 B", r.op.size().div_ceil(PAGE))
    } else {
        "none".to_string()
    }
}

fn table(cpu: &str, cpus: usize, rows: &[Row], nattch: &Nattch, goals: &[Goal]) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(
        "ipcns bench shm: shmat(id, NULL, 0) + shmdt pairs of a segment, touching nothing or one"
            .to_string(),
    );
    line(
        "byte per page in between; shmget + IPC_RMID pairs; a segment's whole life (made, attached,"
            .to_string(),
    );
    line(format!(
        "written, detached, removed); ns per pair, medians of {ROUNDS} rounds; the kernel in a fresh IPC namespace"
    ));
    line(format!(
        "cpu: {cpu}, {}",
        if cpus == 1 {
            "1 cpu usable".to_string()
        } else {
            format!("{cpus} cpus usable")
        }
    ));
    line(String::new());
    line(format!(
        "{:<12} {:<8} {:>10} {:>25} {:>25} {:>8} {:>7}",
        "what", "size", "written", "ipcns ns", "kernel ns", "k/i", "pairs"
    ));
    for r in rows {
        let (k, kr) = match &r.kernel {
            Ok(k) => (
                k.cell(0),
                format!("{:.2}x", ratio(k.median, r.ipcns.median)),
            ),
            Err(_) => ("unavailable".to_string(), "-".to_string()),
        };
        line(format!(
            "{:<12} {:<8} {:>10} {:>25} {k:>25} {kr:>8} {:>7}",
            r.op.name(),
            size_name(r.op.size()),
            touched(r),
            r.ipcns.cell(0),
            r.pairs
        ));
    }
    line(
        "  ((fastest-slowest) round beside each median; pairs per row per round; k/i above 1: ipcns"
            .to_string(),
    );
    line(
        "   is faster; the touched pages exist after the warm-up, so each shmat+shmdt write is a"
            .to_string(),
    );
    line(
        "   fault that maps one; ipcns allocates a segment's pages at its first shmat, the kernel"
            .to_string(),
    );
    line("   at their first touch: a whole life allocates every page on both sides)".to_string());
    if let Err(n) = &rows[0].kernel {
        line(format!("  {n}"));
    }
    for g in goals {
        line(g.line());
    }
    line(String::new());
    line(format!(
        "{:<32} {:>6} {:>7}",
        "shm_nattch (IPC_STAT)", "ipcns", "kernel"
    ));
    for (i, step) in STEPS.iter().enumerate() {
        let k = match &nattch.kernel {
            Ok(k) => k[i].to_string(),
            Err(_) => "-".to_string(),
        };
        line(format!("{step:<32} {:>6} {k:>7}", nattch.ipcns[i]));
    }
    line(match nattch.agree() {
        Some(true) => "  ipcns and the kernel agree".to_string(),
        Some(false) => "  ipcns and the kernel DISAGREE".to_string(),
        None => "  the kernel's counts are missing (see above)".to_string(),
    });
    s
}

fn to_json(cpu: &str, cpus: usize, rows: &[Row], nattch: &Nattch, goals: &[Goal]) -> String {
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            let k = match &r.kernel {
                Ok(k) => format!(
                    "{},\"kernel_over_ipcns\":{}",
                    k.json_fields("kernel_ns"),
                    json_num(ratio(k.median, r.ipcns.median))
                ),
                Err(why) => format!(
                    "\"kernel_ns\":null,\"kernel_over_ipcns\":null,\"kernel_missing\":{}",
                    json_str(why)
                ),
            };
            format!(
                "{{\"op\":{},\"size\":{},\"pages_written\":{},\"pairs_per_round\":{},{},{k}}}",
                json_str(r.op.name()),
                r.op.size(),
                if r.op.touch() {
                    r.op.size().div_ceil(PAGE)
                } else {
                    0
                },
                r.pairs,
                r.ipcns.json_fields("ipcns_ns")
            )
        })
        .collect();
    let list = |v: &[u64; 4]| {
        format!(
            "[{}]",
            v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
        )
    };
    let kernel = match &nattch.kernel {
        Ok(k) => list(k),
        Err(_) => "null".to_string(),
    };
    let agree = match nattch.agree() {
        Some(a) => a.to_string(),
        None => "null".to_string(),
    };
    let missing = match &nattch.kernel {
        Ok(_) => String::new(),
        Err(why) => format!(",\"kernel_missing\":{}", json_str(why)),
    };
    let steps: Vec<String> = STEPS.iter().map(|s| json_str(s)).collect();
    format!(
        "{{\"bench\":\"shm\",\"cpu\":{},\"cpus\":{cpus},\"rounds\":{ROUNDS},\"pairs\":[{}],\
\"nattch\":{{\"steps\":[{}],\"ipcns\":{},\"kernel\":{kernel},\"agree\":{agree}{missing}}},\
\"goals\":[{}]}}\n",
        json_str(cpu),
        rows.join(","),
        steps.join(","),
        list(&nattch.ipcns),
        goals.iter().map(Goal::json).collect::<Vec<_>>().join(",")
    )
}
