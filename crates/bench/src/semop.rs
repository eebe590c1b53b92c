//! `ipcns bench semop`: seed 000's table, and a ping-pong, for ipcns and
//! the host kernel in one run.
//!
//! Seed 000 (cyclic id allocation, ipc/util.c `ipc_idr_alloc`) measured
//! "no-op semop() randomly on two IDs, with only these two IDs allocated",
//! the ids placed through /proc/sys/kernel/sem_next_id at indexes 1 & 2,
//! 1 & 40, 1 & 3348, 1 & 27348 and (ipcmni_extend) 1 & 15777204, 5 runs
//! each: the deeper the radix tree, the slower the call (3.2% slower at the
//! last). Here, per row: a fresh namespace, `sem_next_id` written before
//! each `semget(IPC_PRIVATE, 1, 0600)` (the id is checked to land at the
//! index), then OPS calls of `semop(id, {0, 0, 0}, 1)`, each on one of the
//! two ids as a xorshift bit says (the same sequence on both sides). The
//! operation waits for zero on a semaphore at zero: it succeeds at once and
//! changes only sempid and sem_otime. ipcns calls `Namespace::semop`; the
//! kernel side is a child process that calls unshare(CLONE_NEWIPC) before
//! each row and `semtimedop(id, sops, 1, NULL)`. The extend row is ipcns
//! only, unless the kernel was booted with ipcmni_extend (a boot option:
//! no namespace can ask for it).
//!
//! Ping-pong: one set of two semaphores at 0 and two forked processes bound
//! to a cpu each (as `bench lock` binds its parties). The initiator posts
//! s0 and waits on s1, the responder waits on s0 and posts s1 (semop(s0,
//! -1) then semop(s1, +1)); ns per round trip as the initiator times it,
//! after warm-up trips. The kernel pair runs in one fresh IPC namespace: a
//! child that calls unshare(CLONE_NEWIPC) and then forks the pair.
//!
//! Medians of ROUNDS rounds, the ipcns and kernel rounds alternating, so
//! that a slow spell of the shared machine falls on both. Within a round
//! of the table the rows take turns in chunks (all of a side's namespaces
//! open at once; the kernel child enters each row's with setns), so that
//! such a spell falls on every row alike, and a round's figure for a row
//! is the median of its chunks': the rows differ by a few percent at
//! most, and the seed's point is in those percents. Without the
//! right to unshare (not root), the kernel column says why it is missing
//! and its goals are not measured. The arena bytes of a one-semaphore set
//! are `bench semget`'s.
//!
//! Arena bytes per SEM_UNDO entry, for a set of 1 and of 10 semaphores: in
//! a fresh namespace (this process's record made first, by a SEM_UNDO
//! semop on a set of its own), `heap_in_use` across UNDO_SETS sets each made and
//! given one `semop(id, {0, +1, SEM_UNDO}, 1)`, less the same with
//! `sem_flg` 0 (what the sets and a semop cost without undo), per set. The
//! issue gives no goal for it: reported only.
//!
//! `IPCNS_BENCH_QUICK=1` cuts the iterations a thousandfold (for the tests;
//! the numbers then mean nothing).

use super::TempNs;
use super::fresh::{self, Fresh};
use super::lock::Placement;
use super::plot::Chart;
use super::plot::Series;
use super::progress::{self, Progress};
use super::stats::{Spread, cpu_model, json_num, json_str, median, ratio, verdict};
use super::sys::{align_next_loop, fork, semtimedop, set_cpus, setns_ipc};
use anyhow::{Context, bail, ensure};
use ipcns::abi::{IPC_CREAT, IPC_RMID, SEM_UNDO, sembuf};
use ipcns::sem::SemArg;
use ipcns::{Cred, Namespace, SysResult};
use ipcns_oracle::kernel::Host;
use ipcns_oracle::sysv::SysV;
use std::os::fd::AsFd;
use std::time::Instant;

/// The hidden subcommand that measures the kernel in new IPC namespaces.
pub const KERNEL_CHILD: &str = "__semop-kernel-child";

/// The index of the first set of every row.
const FIRST_IDX: u32 = 1;
/// The second set's index, and whether the row needs ipcmni_extend.
const ROWS: [(u32, bool); 5] = [
    (2, false),
    (40, false),
    (3348, false),
    (27348, false),
    (15_777_204, true),
];
const ROUNDS: usize = 5;
/// No-op calls per row per round, made in CHUNKS turns.
const OPS: u64 = 1_000_000;
const CHUNKS: u64 = 50;
/// Timed round trips per ping-pong round, after WARM_TRIPS untimed.
const TRIPS: u64 = 10_000;
const WARM_TRIPS: u64 = 1_000;
/// Sets per measurement of the bytes per undo entry, and their sizes.
const UNDO_SETS: i32 = 100;
const UNDO_NSEMS: [i32; 2] = [1, 10];

/// `ipc_mni`: indexes per id space, normal and ipcmni_extend.
const fn ipc_mni(extend: bool) -> u32 {
    if extend { 1 << 24 } else { 32768 }
}

/// Iteration counts: the real ones, or a thousandth with
/// `IPCNS_BENCH_QUICK=1`.
#[derive(Clone, Copy)]
struct Sizes {
    ops: u64,
    trips: u64,
    warm_trips: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let quick = super::stats::quick();
        let div = if quick { 1000 } else { 1 };
        Sizes {
            ops: OPS / div,
            trips: (TRIPS / div).max(1),
            warm_trips: (WARM_TRIPS / div).max(1),
        }
    }
}

/// Whether the host kernel was booted with `ipcmni_extend`.
fn kernel_extended() -> bool {
    std::fs::read_to_string("/proc/cmdline")
        .is_ok_and(|c| c.split_whitespace().any(|w| w == "ipcmni_extend"))
}

/// Creates the row's two sets: `sem_next_id` written (by `write`) before
/// each `semget(IPC_PRIVATE, 1, 0600)` (`create`), each id checked to land
/// at its index.
fn place(
    write: impl Fn(&str) -> SysResult<()>,
    create: impl Fn() -> SysResult<i32>,
    idx: u32,
    mni: u32,
) -> anyhow::Result<[i32; 2]> {
    let mut ids = [0; 2];
    for (id, want) in ids.iter_mut().zip([FIRST_IDX, idx]) {
        write(&want.to_string()).with_context(|| format!("write sem_next_id {want}"))?;
        *id = create().context("semget(IPC_PRIVATE, 1, 0600)")?;
        ensure!(
            (*id as u32) & (mni - 1) == want,
            "sem_next_id {want} gave id {id}, not index {want}"
        );
    }
    Ok(ids)
}

/// `ops` no-op semops, each on `ids[0]` or `ids[1]` as the top bit of a
/// xorshift64 generator says (the same sequence for every row and side),
/// in a loop that starts on a 64-byte boundary. The ns it took.
#[inline(always)]
fn noop_loop(
    ops: u64,
    ids: [i32; 2],
    mut semop: impl FnMut(i32, &[sembuf]) -> Result<(), i32>,
) -> anyhow::Result<f64> {
    let sops = [sembuf {
        sem_num: 0,
        sem_op: 0,
        sem_flg: 0,
    }];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let t = Instant::now();
    align_next_loop();
    for _ in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let id = ids[(x >> 63) as usize];
        if let Err(e) = semop(id, &sops) {
            bail!("no-op semop on id {id}: {}", ipcns::Errno(e));
        }
    }
    Ok(t.elapsed().as_nanos() as f64)
}

/// The order of the rows in turn `k` of [`interleave`]: each turn starts
/// one row further, so that no row always comes first or last.
fn row_order(k: usize) -> impl Iterator<Item = usize> {
    (0..ROWS.len()).map(move |i| (i + k) % ROWS.len())
}

/// One round of the table on one side: the rows take turns, CHUNKS
/// chunks of `ops / CHUNKS` calls each (`run(row, n)` makes `n` calls and
/// returns the ns they took), so that a slow spell of the shared machine
/// falls on every row alike instead of on the one that was running. Each
/// row's ns per call is the median of its chunks': a chunk during which
/// another process had the cpu for a time slice is an outlier, not a
/// share of the mean. `None` for a row that `present` says is missing.
fn interleave(
    ops: u64,
    round: usize,
    present: &[bool],
    mut run: impl FnMut(usize, u64) -> anyhow::Result<f64>,
) -> anyhow::Result<Vec<Option<f64>>> {
    let chunk = (ops / CHUNKS).max(1);
    let mut per_call = vec![Vec::with_capacity(CHUNKS as usize); ROWS.len()];
    for k in 0..CHUNKS as usize {
        for r in row_order(round + k).filter(|&r| present[r]) {
            per_call[r].push(run(r, chunk)? / chunk as f64);
        }
    }
    Ok(per_call
        .iter_mut()
        .zip(present)
        .map(|(v, &here)| here.then(|| median(v)))
        .collect())
}

/// One ipcns round of the table: a fresh namespace per row with its two
/// sets, a warm-up tenth each, then the rows interleaved. The sysctl
/// writes need CAP_SYS_ADMIN over the namespace, as /proc/sys/kernel's do;
/// a caller without it writes them as the namespace's admin (it created
/// the throwaway namespace, as `unshare -Ur` would make it the admin of a
/// kernel one). The measured calls use its own credentials.
fn ipcns_noop(ops: u64, round: usize) -> anyhow::Result<Vec<f64>> {
    let mut rows = Vec::with_capacity(ROWS.len());
    for (idx, extend) in ROWS {
        let t = TempNs::new("semop", 64 << 20, extend)?;
        let cred = t.cred()?;
        let admin = Cred {
            cap_sys_admin: true,
            ..cred.clone()
        };
        let ids = place(
            |n| t.ns.sysctl_write(&admin, "sem_next_id", n),
            || t.ns.semget(&cred, 0, 1, IPC_CREAT | 0o600),
            idx,
            ipc_mni(extend),
        )
        .with_context(|| format!("ipcns, idx {}", row_name(idx)))?;
        rows.push((t, cred, ids));
    }
    let run = |r: usize, n: u64| {
        let (t, cred, ids) = &rows[r];
        noop_loop(n, *ids, |id, sops| {
            t.ns.semop(cred, id, sops).map(drop).map_err(|e| e.0)
        })
    };
    for r in 0..ROWS.len() {
        run(r, ops / 10 + 1)?;
    }
    let v = interleave(ops, round, &[true; ROWS.len()], run)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

/// The kernel child's round of the table, in table order: per row, a
/// fresh IPC namespace (kept by a descriptor of its /proc/self/ns/ipc)
/// with the two sets and a warm-up tenth, then the rows interleaved, each
/// chunk entering its row's namespace first (setns, outside the timing).
/// `None` for the extend row on a kernel booted without ipcmni_extend.
fn kernel_noop(ops: u64, round: usize) -> anyhow::Result<(Fresh, Vec<Option<f64>>)> {
    let extended = kernel_extended();
    let mut rows = Vec::with_capacity(ROWS.len());
    let mut how = None;
    for (idx, extend) in ROWS {
        if extend && !extended {
            rows.push(None);
            continue;
        }
        // The first says how: the later ones are made inside the user
        // namespace the first may have made.
        let p = fresh::enter()?;
        how.get_or_insert(p);
        let ns = std::fs::File::open("/proc/self/ns/ipc").context("open /proc/self/ns/ipc")?;
        let ids = place(
            |n| Host.sysctl_write("sem_next_id", n),
            || Host.semget(0, 1, IPC_CREAT | 0o600),
            idx,
            ipc_mni(extended),
        )?;
        noop_loop(ops / 10 + 1, ids, semtimedop)?;
        rows.push(Some((ns, ids)));
    }
    let present: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let v = interleave(ops, round, &present, |r, n| {
        let Some((ns, ids)) = &rows[r] else {
            bail!("row {r} has no namespace");
        };
        setns_ipc(ns.as_fd()).context("setns(CLONE_NEWIPC)")?;
        noop_loop(n, *ids, semtimedop)
    })?;
    Ok((how.unwrap_or(Fresh::Ipc), v))
}

/// A set of two semaphores, as one side of the ping-pong sees it.
trait Pair {
    /// `semop(id, {num, delta, 0}, 1)`; the errno on failure.
    fn op(&self, num: u16, delta: i16) -> Result<(), i32>;
    /// `semctl(id, 0, IPC_RMID)`: ends the other side's wait with EIDRM.
    fn remove(&self);
}

struct IpcnsPair<'a> {
    ns: &'a Namespace,
    cred: Cred,
    id: i32,
}

impl Pair for IpcnsPair<'_> {
    #[inline]
    fn op(&self, num: u16, delta: i16) -> Result<(), i32> {
        let sops = [sembuf {
            sem_num: num,
            sem_op: delta,
            sem_flg: 0,
        }];
        self.ns
            .semop(&self.cred, self.id, &sops)
            .map(drop)
            .map_err(|e| e.0)
    }

    fn remove(&self) {
        let _ = self
            .ns
            .semctl(&self.cred, self.id, 0, IPC_RMID, SemArg::None);
    }
}

struct KernelPair {
    id: i32,
}

impl Pair for KernelPair {
    #[inline]
    fn op(&self, num: u16, delta: i16) -> Result<(), i32> {
        let sops = [sembuf {
            sem_num: num,
            sem_op: delta,
            sem_flg: 0,
        }];
        semtimedop(self.id, &sops)
    }

    fn remove(&self) {
        let _ = Host.semctl(self.id, 0, IPC_RMID, SemArg::None);
    }
}

/// The initiator: `warm` untimed round trips, then `trips` timed ones,
/// each posting s0 and waiting on s1. ns per round trip.
fn initiator(p: &impl Pair, warm: u64, trips: u64) -> Result<f64, i32> {
    let trip = || {
        p.op(0, 1)?;
        p.op(1, -1)
    };
    for _ in 0..warm {
        trip()?;
    }
    let t = Instant::now();
    for _ in 0..trips {
        trip()?;
    }
    Ok(t.elapsed().as_nanos() as f64 / trips as f64)
}

/// The responder: `n` times wait on s0, post s1.
fn responder(p: &impl Pair, n: u64) -> Result<(), i32> {
    for _ in 0..n {
        p.op(0, -1)?;
        p.op(1, 1)?;
    }
    Ok(())
}

/// One ping-pong round: this process initiates (bound to the first cpu), a
/// forked child responds (bound to the second); `pair` makes each side's
/// view (the child's after the fork: its own pid and credentials). A side
/// that fails removes the set, so that the other's wait ends (EIDRM)
/// instead of hanging.
fn pingpong_round<P: Pair>(
    place: &Placement,
    warm: u64,
    trips: u64,
    pair: impl Fn() -> anyhow::Result<P>,
) -> anyhow::Result<f64> {
    let mine = pair()?;
    let child = fork(|| {
        let r = place
            .bind(1)
            .map_err(anyhow::Error::from)
            .and_then(|()| pair())
            .and_then(|p| {
                responder(&p, warm + trips)
                    .map_err(|e| anyhow::anyhow!("responder: {}", ipcns::Errno(e)))
            });
        if r.is_err() {
            mine.remove();
        }
        r.is_ok()
    })
    .context("fork")?;
    let Some(child) = child else {
        bail!("fork refused: this process has other threads");
    };
    let r = place.bind(0).map_err(anyhow::Error::from).and_then(|()| {
        initiator(&mine, warm, trips).map_err(|e| anyhow::anyhow!("initiator: {}", ipcns::Errno(e)))
    });
    if r.is_err() {
        mine.remove();
    }
    set_cpus(&place.allowed).context("sched_setaffinity")?;
    let child_ok = child.wait().context("waitpid")?;
    let ns = r?;
    ensure!(child_ok, "the responder failed");
    Ok(ns)
}

fn ipcns_pingpong(place: &Placement, sizes: Sizes) -> anyhow::Result<f64> {
    let t = TempNs::new("semop", 64 << 20, false)?;
    let cred = t.cred()?;
    let id = t.ns.semget(&cred, 0, 2, IPC_CREAT | 0o600)?;
    pingpong_round(place, sizes.warm_trips, sizes.trips, || {
        Ok(IpcnsPair {
            ns: &t.ns,
            cred: t.cred()?,
            id,
        })
    })
}

/// Arena bytes per SEM_UNDO entry of a set of `nsems` semaphores (see the
/// module doc).
fn undo_bytes(nsems: i32) -> anyhow::Result<f64> {
    let t = TempNs::new("semop", 64 << 20, false)?;
    let cred = t.cred()?;
    let up = |flg| {
        [sembuf {
            sem_num: 0,
            sem_op: 1,
            sem_flg: flg,
        }]
    };
    // This process's record (the first SEM_UNDO operation makes it, and
    // the table of records, 2 KiB, with it): not a cost per entry.
    let own = t.ns.semget(&cred, 0, 1, IPC_CREAT | 0o600)?;
    t.ns.semop(&cred, own, &up(SEM_UNDO))?;
    let mut cost = [0.0; 2];
    for (c, flg) in cost.iter_mut().zip([0, SEM_UNDO]) {
        let before = t.ns.heap_in_use();
        for _ in 0..UNDO_SETS {
            let id = t.ns.semget(&cred, 0, nsems, IPC_CREAT | 0o600)?;
            t.ns.semop(&cred, id, &up(flg))?;
        }
        *c = t.ns.heap_in_use() as f64 - before as f64;
    }
    Ok((cost[1] - cost[0]) / f64::from(UNDO_SETS))
}

/// The child half: `noop OPS ROUND` prints how its namespaces were made
/// ([`Fresh::word`]), then one ns/call per row (`-` for a row not
/// measured); `pingpong WARM TRIPS` prints how, then ns per round trip.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    match args {
        [what, ops, round] if what == "noop" => {
            let (place, v) = kernel_noop(ops.parse()?, round.parse()?)?;
            let words: Vec<String> = v
                .iter()
                .map(|x| x.map_or("-".to_string(), |x| x.to_string()))
                .collect();
            println!("{} {}", place.word(), words.join(" "));
        }
        [what, warm, trips] if what == "pingpong" => {
            let how = fresh::enter()?;
            let id = Host.semget(0, 2, IPC_CREAT | 0o600)?;
            let place = Placement::new()?;
            let ns = pingpong_round(&place, warm.parse()?, trips.parse()?, || {
                Ok(KernelPair { id })
            })?;
            println!("{} {ns}", how.word());
        }
        _ => bail!("usage: ipcns bench {KERNEL_CHILD} noop OPS ROUND | pingpong WARM TRIPS"),
    }
    Ok(())
}

/// Runs the kernel child with `args`; its stdout's words.
fn kernel_run(args: &[String]) -> anyhow::Result<Vec<String>> {
    crate::kernel_child_words(KERNEL_CHILD, args)
}

fn kernel_noop_round(ops: u64, round: usize) -> anyhow::Result<(Fresh, Vec<Option<f64>>)> {
    let words = kernel_run(&["noop".to_string(), ops.to_string(), round.to_string()])?;
    let place = words.first().and_then(|w| Fresh::from_word(w));
    let (Some(place), true) = (place, words.len() == ROWS.len() + 1) else {
        bail!("kernel child said {words:?}");
    };
    let v = words[1..]
        .iter()
        .map(|w| match w.as_str() {
            "-" => Ok(None),
            w => Ok(Some(w.parse()?)),
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((place, v))
}

fn kernel_pingpong_round(sizes: Sizes) -> anyhow::Result<f64> {
    let words = kernel_run(&[
        "pingpong".to_string(),
        sizes.warm_trips.to_string(),
        sizes.trips.to_string(),
    ])?;
    let [how, w] = &words[..] else {
        bail!("kernel child said {words:?}");
    };
    ensure!(
        Fresh::from_word(how).is_some(),
        "kernel child said {words:?}"
    );
    Ok(w.parse()?)
}

/// Why a kernel number is missing.
#[derive(Clone)]
enum Missing {
    /// The kernel side could not run (not root: no unshare); what it said.
    Unavailable(String),
    /// The row needs ipcmni_extend, a boot option this kernel was not
    /// given.
    NotExtended,
}

impl Missing {
    /// For a goal line.
    fn short(&self) -> &'static str {
        match self {
            Missing::Unavailable(_) => "kernel unavailable",
            Missing::NotExtended => "the kernel was booted without ipcmni_extend",
        }
    }

    /// For the notes and the JSON.
    fn full(&self) -> String {
        match self {
            Missing::Unavailable(why) => format!("kernel unavailable: {why}"),
            Missing::NotExtended => self.short().to_string(),
        }
    }

    /// In the kernel column.
    fn cell(&self) -> &'static str {
        match self {
            Missing::Unavailable(_) => "unavailable",
            Missing::NotExtended => "-",
        }
    }
}

/// One row of seed 000's table: ns per call, median and spread of the
/// rounds.
struct Row {
    idx: u32,
    extend: bool,
    ipcns: Spread,
    kernel: Result<Spread, Missing>,
}

/// The ping-pong's ns per round trip, median and spread of the rounds.
struct PingPong {
    ipcns: Spread,
    kernel: Result<Spread, Missing>,
}

/// A goal: measured (the value, as shown, and whether it is met), or why
/// it could not be.
struct Check {
    text: String,
    outcome: Result<(f64, String, bool), Missing>,
}

impl Check {
    /// A goal on a kernel/ipcns ratio: at least `at_least`.
    fn speedup(text: String, kernel: &Result<Spread, Missing>, ipcns: f64, at_least: f64) -> Check {
        Check {
            text,
            outcome: kernel.as_ref().map_err(Clone::clone).map(|k| {
                let x = ratio(k.median, ipcns);
                (x, format!("{x:.2}x"), x >= at_least)
            }),
        }
    }

    fn line(&self) -> String {
        match &self.outcome {
            Ok((_, shown, met)) => format!("goal: {}: {shown} {}", self.text, verdict(*met)),
            Err(why) => format!("goal: {}: NOT MEASURED ({})", self.text, why.short()),
        }
    }

    fn json(&self) -> String {
        match &self.outcome {
            Ok((v, _, met)) => format!(
                "{{\"goal\":{},\"value\":{},\"met\":{met}}}",
                json_str(&self.text),
                json_num(*v)
            ),
            Err(why) => format!(
                "{{\"goal\":{},\"value\":null,\"met\":null,\"not_measured\":{}}}",
                json_str(&self.text),
                json_str(&why.full())
            ),
        }
    }
}

/// How a row is named in its goal: `1 and N`.
fn row_name(idx: u32) -> String {
    format!("{FIRST_IDX} and {idx}")
}

/// How a row is named in the table: its second set's id slot.
fn row_label(r: &Row) -> String {
    if r.extend {
        format!("{} (ipcmni_extend)", r.idx)
    } else {
        r.idx.to_string()
    }
}

pub fn run(opts: &crate::Options) -> anyhow::Result<Vec<Chart>> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let place = Placement::new()?;
    let extended = kernel_extended();
    let mut kernel_note: Option<String> = None;
    let mut kernel_place: Option<Fresh> = None;

    let mut ours = vec![Vec::with_capacity(ROUNDS); ROWS.len()];
    let mut theirs = vec![Vec::with_capacity(ROUNDS); ROWS.len()];
    let mut progress = Progress::new("semop", 4 * ROUNDS);
    for round in 0..ROUNDS {
        let slots = ROWS.len();
        progress.step(
            2 * round,
            &format!(
                "{}, no-op semop, ipcns, {slots} id slots",
                progress::round(round, ROUNDS)
            ),
        );
        for (r, ns) in ipcns_noop(sizes.ops, round)?.into_iter().enumerate() {
            ours[r].push(ns);
        }
        if kernel_note.is_none() {
            progress.step(
                2 * round + 1,
                &format!(
                    "{}, no-op semop, the kernel, {slots} id slots",
                    progress::round(round, ROUNDS)
                ),
            );
            match kernel_noop_round(sizes.ops, round) {
                Ok((place, v)) => {
                    kernel_place = Some(place);
                    for (r, x) in v.into_iter().enumerate() {
                        theirs[r].extend(x);
                    }
                }
                Err(e) => kernel_note = Some(format!("{e:#}")),
            }
        }
    }
    let rows: Vec<Row> = ROWS
        .iter()
        .enumerate()
        .map(|(r, &(idx, extend))| Row {
            idx,
            extend,
            ipcns: Spread::of(&mut ours[r]),
            kernel: match &kernel_note {
                Some(n) => Err(Missing::Unavailable(n.clone())),
                None if extend && !extended => Err(Missing::NotExtended),
                None => Ok(Spread::of(&mut theirs[r])),
            },
        })
        .collect();

    let mut pp_ours = Vec::with_capacity(ROUNDS);
    let mut pp_theirs = Vec::with_capacity(ROUNDS);
    let mut pp_note = kernel_note.clone();
    for round in 0..ROUNDS {
        progress.step(
            2 * ROUNDS + 2 * round,
            &format!("{}, ping-pong, ipcns", progress::round(round, ROUNDS)),
        );
        pp_ours.push(ipcns_pingpong(&place, sizes).context("ipcns ping-pong")?);
        if pp_note.is_none() {
            progress.step(
                2 * ROUNDS + 2 * round + 1,
                &format!("{}, ping-pong, the kernel", progress::round(round, ROUNDS)),
            );
            match kernel_pingpong_round(sizes) {
                Ok(ns) => pp_theirs.push(ns),
                Err(e) => pp_note = Some(format!("{e:#}")),
            }
        }
    }
    let pp = PingPong {
        ipcns: Spread::of(&mut pp_ours),
        kernel: match pp_note {
            Some(n) => Err(Missing::Unavailable(n)),
            None => Ok(Spread::of(&mut pp_theirs)),
        },
    };

    progress.clear();
    let undo = UNDO_NSEMS
        .iter()
        .map(|&n| {
            Ok((
                n,
                undo_bytes(n).with_context(|| format!("undo bytes, {n} semaphores"))?,
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    let mut goals: Vec<Check> = rows
        .iter()
        .map(|r| {
            Check::speedup(
                format!(
                    "ipcns >= 10x faster than the kernel per operation at id slots {}",
                    row_name(r.idx)
                ),
                &r.kernel,
                r.ipcns.median,
                10.0,
            )
        })
        .collect();
    let spread = spread_pct(&rows);
    goals.push(Check {
        text: "ipcns rows within 2% of each other".to_string(),
        outcome: Ok((spread, format!("{spread:.1}%"), spread <= 2.0)),
    });
    goals.push(Check::speedup(
        "ping-pong round trip >= 3x faster than the kernel".to_string(),
        &pp.kernel,
        pp.ipcns.median,
        3.0,
    ));

    let text = if opts.json {
        to_json(&cpu, sizes, &place, kernel_place, &rows, &pp, &undo, &goals)
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        table(&cpu, sizes, &place, kernel_place, &rows, &pp, &undo, goals)
    };
    crate::print_out(&text)?;
    Ok(charts(&rows))
}

/// `--plot`'s chart: ns per no-op semop against the second set's id slot
/// (the rows the kernel measured too, and ipcns's extend row beside them).
fn charts(rows: &[Row]) -> Vec<Chart> {
    let mut series = vec![Series {
        name: "ipcns".to_string(),
        points: rows
            .iter()
            .map(|r| (f64::from(r.idx), r.ipcns.median))
            .collect(),
    }];
    let kernel: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((f64::from(r.idx), r.kernel.as_ref().ok()?.median)))
        .collect();
    if !kernel.is_empty() {
        series.push(Series {
            name: "kernel".to_string(),
            points: kernel,
        });
    }
    vec![Chart {
        title: format!("no-op semop on one of two sets (the first at id slot {FIRST_IDX})"),
        x_label: "the second set's id slot".to_string(),
        x_log: true,
        y_label: "ns per semop (median)".to_string(),
        y_log: false,
        series,
    }]
}

/// max/min - 1 over the ipcns column, in percent.
fn spread_pct(rows: &[Row]) -> f64 {
    let max = rows.iter().map(|r| r.ipcns.median).fold(f64::MIN, f64::max);
    let min = rows.iter().map(|r| r.ipcns.median).fold(f64::MAX, f64::min);
    (ratio(max, min) - 1.0) * 100.0
}

/// `+x.x%` against the first row, or `-`.
fn versus(x: f64, base: f64) -> String {
    format!("{:+.1}%", (ratio(x, base) - 1.0) * 100.0)
}

#[allow(clippy::too_many_arguments)]
fn table(
    cpu: &str,
    sizes: Sizes,
    place: &Placement,
    kernel_place: Option<Fresh>,
    rows: &[Row],
    pp: &PingPong,
    undo: &[(i32, f64)],
    goals: &[Check],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(
        "ipcns bench semop: a no-op semop (wait for zero on a semaphore at zero) on one of two sets,"
            .to_string(),
    );
    line(format!(
        "picked at random per call, the only two in a fresh namespace: the first at id slot {FIRST_IDX}, the"
    ));
    line(format!(
        "second at the row's slot; ns per call, medians of {ROUNDS} rounds, (fastest-slowest)"
    ));
    line(super::stats::cpu_line(cpu, place.allowed.len()));
    if let Some(p) = kernel_place {
        line(format!("kernel: {}", p.describe()));
    }
    line(String::new());
    // One decimal for the no-op calls; none for the µs of a round trip.
    let cell = |x: &Spread| {
        let p = if x.median >= 1000.0 { 0 } else { 1 };
        format!("{:.p$} ({})", x.median, x.range(p))
    };
    line(format!(
        "{:<26} {:>20} {:>20} {:>12} | {:>17} {:>8}",
        "second set's id slot", "ipcns", "kernel", "kernel/ipcns", "vs slot 2: ipcns", "kernel"
    ));
    let base = &rows[0];
    for r in rows {
        let (k, kr, kv) = match (&r.kernel, &base.kernel) {
            (Ok(k), Ok(b)) => (
                cell(k),
                format!("{:.2}x", ratio(k.median, r.ipcns.median)),
                versus(k.median, b.median),
            ),
            (Ok(k), Err(_)) => (
                cell(k),
                format!("{:.2}x", ratio(k.median, r.ipcns.median)),
                "-".into(),
            ),
            (Err(m), _) => (m.cell().to_string(), "-".to_string(), "-".to_string()),
        };
        line(format!(
            "{:<26} {:>20} {k:>20} {kr:>12} | {:>17} {kv:>8}",
            row_label(r),
            cell(&r.ipcns),
            versus(r.ipcns.median, base.ipcns.median)
        ));
    }
    line(format!(
        "  ({} calls per row per round; a fresh namespace per row, the ids placed with sem_next_id)",
        sizes.ops
    ));
    for r in rows {
        match &r.kernel {
            Err(Missing::NotExtended) => line(format!(
                "  kernel at slot {}: -, {} (a boot option)",
                r.idx,
                Missing::NotExtended.short()
            )),
            Err(m @ Missing::Unavailable(_)) if std::ptr::eq(r, &rows[0]) => {
                line(format!("  {}", m.full()));
            }
            _ => {}
        }
    }
    line(String::new());
    line(format!(
        "{:<26} {:>20} {:>20} {:>12}",
        "ping-pong, ns", "ipcns", "kernel", "kernel/ipcns"
    ));
    let (k, kr) = match &pp.kernel {
        Ok(k) => (cell(k), format!("{:.2}x", ratio(k.median, pp.ipcns.median))),
        Err(m) => (m.cell().to_string(), "-".to_string()),
    };
    line(format!(
        "{:<26} {:>20} {k:>20} {kr:>12}",
        "round trip",
        cell(&pp.ipcns)
    ));
    line(format!(
        "  (2 processes, 2 semaphores: post s0, wait s1 / wait s0, post s1; {} timed round trips",
        sizes.trips
    ));
    line(format!(
        "   per round after {}; {}; the kernel pair in one fresh IPC namespace)",
        sizes.warm_trips,
        place.describe()
    ));
    if let Err(m) = &pp.kernel {
        line(format!("  {}", m.full()));
    }
    line(String::new());
    let per: Vec<String> = undo
        .iter()
        .map(|&(n, b)| format!("{b:.0} (set of {n})"))
        .collect();
    line(format!("arena bytes per undo entry: {}", per.join(", ")));
    line(format!(
        "  (heap_in_use over {UNDO_SETS} sets each given one SEM_UNDO semop, less the same without;"
    ));
    line("   the issue gives no goal for it: reported only)".to_string());
    if !goals.is_empty() {
        line(String::new());
    }
    for g in goals {
        line(g.line());
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn to_json(
    cpu: &str,
    sizes: Sizes,
    place: &Placement,
    kernel_place: Option<Fresh>,
    rows: &[Row],
    pp: &PingPong,
    undo: &[(i32, f64)],
    goals: &[Check],
) -> String {
    let spread = spread_pct(rows);
    let kernel = |k: &Result<Spread, Missing>, ipcns: &Spread| match k {
        Ok(k) => format!(
            "{},\"kernel_over_ipcns\":{}",
            k.json_fields("kernel_ns"),
            json_num(ratio(k.median, ipcns.median))
        ),
        Err(why) => format!(
            "\"kernel_ns\":null,\"kernel_over_ipcns\":null,\"kernel_missing\":{}",
            json_str(&why.full())
        ),
    };
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"idx\":[{FIRST_IDX},{}],\"extend\":{},{},{}}}",
                r.idx,
                r.extend,
                r.ipcns.json_fields("ipcns_ns"),
                kernel(&r.kernel, &r.ipcns)
            )
        })
        .collect();
    let undo: Vec<String> = undo
        .iter()
        .map(|&(n, b)| format!("{{\"nsems\":{n},\"bytes\":{}}}", json_num(b)))
        .collect();
    let goals: Vec<String> = goals.iter().map(Check::json).collect();
    format!(
        "{{\"bench\":\"semop\",\"cpu\":{},\"rounds\":{ROUNDS},\"ops_per_round\":{},\
\"noop\":[{}],\"ipcns_spread_pct\":{},\
\"pingpong\":{{\"cpus_bound\":{},\"trips_per_round\":{},\"warm_trips\":{},{},{}}},\
\"undo_entry_bytes\":[{}],\"kernel_namespace\":{},\"goals\":[{}]}}\n",
        json_str(cpu),
        sizes.ops,
        rows.join(","),
        json_num(spread),
        place.json(),
        sizes.trips,
        sizes.warm_trips,
        pp.ipcns.json_fields("ipcns_ns"),
        kernel(&pp.kernel, &pp.ipcns),
        undo.join(","),
        kernel_place.map_or("null".to_string(), |p| json_str(p.describe())),
        goals.join(",")
    )
}
