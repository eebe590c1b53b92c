//! `ipcns bench preload`: System V IPC as a C program sees it through
//! `libipcns.so`, beside the same operations on the core called directly
//! (what the library adds) and on the kernel through the C library's
//! wrappers, all in one run.
//!
//! The library is loaded with `dlopen` (from beside the `ipcns` binary, or
//! `$IPCNS_PRELOAD_LIB`) and its exported `semop`, `semget`, `msgsnd`,
//! `msgrcv` called through function pointers, as a program linked against
//! them would call them; it works on a throwaway namespace of its own
//! (`IPCNS_DIR`/`IPCNS` set before its first call). The core side calls
//! `Namespace` methods with credentials read once, on another throwaway
//! namespace. The kernel side is a child of this program in a fresh IPC
//! namespace (`unshare(CLONE_NEWIPC)` as root, else inside a new user
//! namespace, else the host's own, which the table then says).
//!
//! Rows, ns per call (per pair for messages, per round trip for the
//! ping-pong):
//! - no-op semop: wait for zero on a semaphore at zero (succeeds at once),
//!   the `struct sembuf` on the caller's stack; again with it on the heap,
//!   which the library copies by a copy that may fault (its SIGSEGV
//!   handler turns a fault into EFAULT);
//! - msgsnd+msgrcv of 8 bytes on one queue, the `struct msgbuf` on the
//!   stack, and again on the heap;
//! - semget lookup: `semget(key, 0, 0)` of an existing key;
//! - ping-pong: two processes bound to a cpu each, one posts s0 and waits
//!   on s1, the other waits on s0 and posts s1 (library and kernel).
//!
//! Core and library take turns in chunks of calls (so a slow spell of the
//! shared machine falls on both), each side's figure the median of its
//! chunks; ROUNDS x CHUNKS chunks per row. Beside it the fastest and the
//! slowest round (a round's figure: the median of its CHUNKS chunks). Goals: the library
//! 10x (semop), 5x (messages), 3x (ping-pong) and 10x (semget) faster than
//! the kernel; and at most 5 ns more per call than the core.
//! `IPCNS_BENCH_QUICK=1` runs a thousandth of it (the numbers then mean
//! nothing).

use super::TempNs;
use super::capi::{CApi, Lib, Libc, MsgBuf, unshare_user_ipc};
use super::lock::Placement;
use super::progress::Progress;
use super::stats::{
    Spread, cpu_line, cpu_model, json_num, json_str, median, quick, ratio, verdict,
};
use super::sys::{allowed_cpus, fork, set_cpus};
use anyhow::{Context, bail, ensure};
use ipcns::abi::{IPC_CREAT, IPC_RMID, sembuf};
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::{Cred, Namespace};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The hidden subcommand that measures the kernel.
pub const KERNEL_CHILD: &str = "__preload-kernel-child";

const ROUNDS: usize = 7;
/// Calls per round: no-op semops and semget lookups; msgsnd+msgrcv pairs.
const OPS: u64 = 1_000_000;
const PAIRS: u64 = 300_000;
/// The heap rows make this many times fewer calls (a thread whose fault
/// signals are blocked takes the kernel's check: a system call or two).
const PROBED_DIV: u64 = 2;
/// Ping-pong round trips per round, after WARM untimed ones.
const TRIPS: u64 = 3000;
const WARM: u64 = 300;
/// The key the lookup row finds.
const KEY: i32 = 0x1bc0_0001;

/// Iteration counts.
#[derive(Clone, Copy)]
struct Sizes {
    ops: u64,
    pairs: u64,
    trips: u64,
    warm: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let div = if quick() { 1000 } else { 1 };
        Sizes {
            ops: (OPS / div).max(PROBED_DIV),
            pairs: (PAIRS / div).max(PROBED_DIV),
            trips: (TRIPS / div).max(2),
            warm: (WARM / div).max(1),
        }
    }
}

/// The core called directly, as the library calls it.
struct Core<'a> {
    ns: &'a Namespace,
    cred: Cred,
}

impl CApi for Core<'_> {
    #[inline]
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> Result<i32, i32> {
        self.ns.semget(&self.cred, key, nsems, flg).map_err(|e| e.0)
    }
    #[inline]
    fn semop(&self, id: i32, sops: &[sembuf]) -> Result<(), i32> {
        self.ns
            .semop(&self.cred, id, sops)
            .map(drop)
            .map_err(|e| e.0)
    }
    fn semctl_rmid(&self, id: i32) {
        let _ = self.ns.semctl(&self.cred, id, 0, IPC_RMID, SemArg::None);
    }
    fn msgget(&self, key: i32, flg: i32) -> Result<i32, i32> {
        self.ns.msgget(&self.cred, key, flg).map_err(|e| e.0)
    }
    #[inline]
    fn msgsnd(&self, id: i32, buf: &MsgBuf, len: usize, flg: i32) -> Result<(), i32> {
        let text = &buf.text[..len.min(buf.text.len())];
        self.ns
            .msgsnd(&self.cred, id, buf.mtype, text, flg)
            .map(drop)
            .map_err(|e| e.0)
    }
    #[inline]
    fn msgrcv(
        &self,
        id: i32,
        buf: &mut MsgBuf,
        len: usize,
        typ: i64,
        flg: i32,
    ) -> Result<usize, i32> {
        let n = len.min(buf.text.len());
        let (t, got) = self
            .ns
            .msgrcv(&self.cred, id, &mut buf.text[..n], typ, flg)
            .map_err(|e| e.0)?;
        buf.mtype = t;
        Ok(got)
    }
    fn msgctl_rmid(&self, id: i32) {
        let _ = self.ns.msgctl(&self.cred, id, IPC_RMID, MsgArg::None);
    }
}

/// The objects one side measures on: a set of two semaphores at 0 with
/// key [`KEY`], and a queue.
struct Objects {
    set: i32,
    queue: i32,
}

impl Objects {
    fn make(a: &impl CApi) -> anyhow::Result<Objects> {
        let set = a
            .semget(KEY, 2, IPC_CREAT | 0o600)
            .map_err(|e| anyhow::anyhow!("semget: {}", ipcns::Errno(e)))?;
        let queue = a
            .msgget(0, IPC_CREAT | 0o600)
            .map_err(|e| anyhow::anyhow!("msgget: {}", ipcns::Errno(e)))?;
        Ok(Objects { set, queue })
    }

    fn remove(&self, a: &impl CApi) {
        a.semctl_rmid(self.set);
        a.msgctl_rmid(self.queue);
    }
}

fn fail(what: &str, e: i32) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", ipcns::Errno(e))
}

/// `n` no-op semops; ns per call. `heap`: the sembuf lives on the heap.
#[inline(never)]
fn noop(a: &impl CApi, o: &Objects, n: u64, heap: bool) -> anyhow::Result<f64> {
    let stack = [sembuf::default()];
    let boxed: Box<[sembuf]> = Box::new([sembuf::default()]);
    let sops: &[sembuf] = if heap { &boxed } else { &stack };
    let t = Instant::now();
    for _ in 0..n {
        a.semop(o.set, sops).map_err(|e| fail("semop", e))?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// `n` msgsnd+msgrcv pairs of 8 bytes; ns per pair.
#[inline(never)]
fn pairs(a: &impl CApi, o: &Objects, n: u64, heap: bool) -> anyhow::Result<f64> {
    let mut stack = MsgBuf::new(1);
    let mut boxed = Box::new(MsgBuf::new(1));
    let buf: &mut MsgBuf = if heap { &mut boxed } else { &mut stack };
    let t = Instant::now();
    for _ in 0..n {
        buf.mtype = 1;
        a.msgsnd(o.queue, buf, 8, 0)
            .map_err(|e| fail("msgsnd", e))?;
        let got = a
            .msgrcv(o.queue, buf, 8, 0, 0)
            .map_err(|e| fail("msgrcv", e))?;
        ensure!(got == 8, "msgrcv gave {got} bytes of 8");
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// `n` lookups of [`KEY`]; ns per call.
#[inline(never)]
fn lookups(a: &impl CApi, o: &Objects, n: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    for _ in 0..n {
        let id = a.semget(KEY, 0, 0).map_err(|e| fail("semget", e))?;
        ensure!(id == o.set, "semget found {id}, not {}", o.set);
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// One ping-pong round on set `set` (semaphores 0 and 1 at 0): a forked
/// child responds, this process initiates; ns per round trip, over
/// `trips` round trips after `warm` untimed ones. A side that fails
/// removes the set so that the other's wait ends (EIDRM).
pub(crate) fn ping_pong(
    a: &impl CApi,
    set: i32,
    place: &Placement,
    warm: u64,
    trips: u64,
) -> anyhow::Result<f64> {
    let op = |num: u16, delta: i16| {
        a.semop(
            set,
            &[sembuf {
                sem_num: num,
                sem_op: delta,
                sem_flg: 0,
            }],
        )
    };
    let total = warm + trips;
    let child = fork(|| {
        let ok = place.bind(1).is_ok() && (0..total).all(|_| op(0, -1).is_ok() && op(1, 1).is_ok());
        if !ok {
            a.semctl_rmid(set);
        }
        ok
    })
    .context("fork")?;
    let Some(child) = child else {
        bail!("fork refused: this process has other threads");
    };
    let r = place.bind(0).map_err(anyhow::Error::from).and_then(|()| {
        let trip = || op(0, 1).and_then(|()| op(1, -1));
        for _ in 0..warm {
            trip().map_err(|e| fail("initiator", e))?;
        }
        let t = Instant::now();
        for _ in 0..trips {
            trip().map_err(|e| fail("initiator", e))?;
        }
        Ok(t.elapsed().as_nanos() as f64 / trips as f64)
    });
    if r.is_err() {
        a.semctl_rmid(set);
    }
    set_cpus(&place.allowed).context("sched_setaffinity")?;
    let child_ok = child.wait().context("waitpid")?;
    let ns = r?;
    ensure!(child_ok, "the responder failed");
    Ok(ns)
}

/// One side's figures: medians and the spread of the rounds.
#[derive(Clone, Copy)]
struct Side {
    noop: Spread,
    noop_heap: Spread,
    pair: Spread,
    pair_heap: Spread,
    lookup: Spread,
    ping_pong: Spread,
}

/// Turns per round: each row's calls are made in this many chunks (5000
/// semops each: a chunk is short beside a time slice, so most chunks run
/// uninterrupted even on a loaded machine).
const CHUNKS: u64 = 200;

/// One row on one or two sides: ROUNDS x CHUNKS chunks of `n / CHUNKS`
/// calls (`run(side, calls)` makes them and gives ns per call), the sides
/// taking turns chunk by chunk (which one goes first alternating), after a
/// warm-up chunk each. Each side's figure is the median of its chunks': a
/// chunk during which another process had the cpu (the machine is shared)
/// is an outlier, not a share of the mean. Its min and max are the fastest
/// and the slowest round's figure, a round's the median of its CHUNKS
/// chunks (the median of all lies between them).
fn chunked(
    n: u64,
    sides: usize,
    mut run: impl FnMut(usize, u64) -> anyhow::Result<f64>,
) -> anyhow::Result<Vec<Spread>> {
    let chunk = (n / CHUNKS).max(1);
    let mut per = vec![Vec::with_capacity(ROUNDS * CHUNKS as usize); sides];
    for side in 0..sides {
        run(side, chunk)?;
    }
    for k in 0..ROUNDS * CHUNKS as usize {
        for i in 0..sides {
            let side = (i + k) % sides;
            per[side].push(run(side, chunk)?);
        }
    }
    Ok(per
        .iter_mut()
        .map(|v| {
            // Chunk k of a side is in round k / CHUNKS.
            let mut rounds: Vec<f64> = v.chunks_mut(CHUNKS as usize).map(median).collect();
            let rounds = Spread::of(&mut rounds);
            Spread {
                median: median(v),
                ..rounds
            }
        })
        .collect())
}

/// Ping-pong rounds; their median and spread.
fn ping_pong_rounds(a: &impl CApi, o: &Objects, sizes: Sizes) -> anyhow::Result<Spread> {
    let place = Placement::new()?;
    let mut v = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        v.push(ping_pong(a, o.set, &place, sizes.warm, sizes.trips)?);
    }
    Ok(Spread::of(&mut v))
}

/// Where the library is: `$IPCNS_PRELOAD_LIB`, else beside this program.
pub(crate) fn lib_path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("IPCNS_PRELOAD_LIB").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    beside_exe(
        "libipcns.so",
        "build it: cargo build --release -p ipcns-preload; or set IPCNS_PRELOAD_LIB",
    )
}

/// The file `name` beside this executable (the release directory), or an
/// error that says how to get it (`hint`).
pub(crate) fn beside_exe(name: &str, hint: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    let p = exe.with_file_name(name);
    ensure!(p.is_file(), "{} not found ({hint})", p.display());
    Ok(p)
}

/// A throwaway namespace reachable by name (`ipcns.NAME` in the arena
/// directory), for the library; removed on drop.
pub(crate) struct Named {
    pub(crate) dir: PathBuf,
    pub(crate) name: String,
}

impl Named {
    pub(crate) fn new() -> anyhow::Result<Named> {
        let dir = ipcns::namespace::dir()?;
        let name = format!(
            "bench-preload-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .subsec_nanos()
        );
        Namespace::create_at(
            &dir.join(format!("ipcns.{name}")),
            ipcns::CreateOptions {
                heap_size: 64 << 20,
                ..ipcns::CreateOptions::default()
            },
        )?;
        Ok(Named { dir, name })
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = Namespace::remove_at(&self.dir.join(format!("ipcns.{}", self.name)));
    }
}

/// The child half: a fresh IPC namespace if it can have one, the kernel
/// measured through the C library; one line: where, then the numbers.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    ensure!(args.is_empty(), "usage: ipcns bench {KERNEL_CHILD}");
    let place = if ipcns_oracle::kernel::unshare_ipc().is_ok() {
        "fresh"
    } else if unshare_user_ipc().is_ok() {
        "fresh-userns"
    } else {
        "host"
    };
    let sizes = Sizes::from_env();
    let o = Objects::make(&Libc)?;
    let r = (|| {
        let one = |f: &dyn Fn(u64) -> anyhow::Result<f64>, n: u64| {
            chunked(n, 1, |_, c| f(c)).map(|v| v[0])
        };
        Ok::<Side, anyhow::Error>(Side {
            noop: one(&|c| noop(&Libc, &o, c, false), sizes.ops)?,
            noop_heap: Spread::NONE,
            pair: one(&|c| pairs(&Libc, &o, c, false), sizes.pairs)?,
            pair_heap: Spread::NONE,
            lookup: one(&|c| lookups(&Libc, &o, c), sizes.ops)?,
            ping_pong: ping_pong_rounds(&Libc, &o, sizes)?,
        })
    })();
    o.remove(&Libc);
    let s = r?;
    // Each figure as median, min, max.
    let mut line = place.to_string();
    for f in [s.noop, s.pair, s.lookup, s.ping_pong] {
        line.push_str(&format!(" {} {} {}", f.median, f.min, f.max));
    }
    println!("{line}");
    Ok(())
}

/// The kernel's figures (heap rows = stack rows: the kernel copies either
/// alike) and where they were measured.
fn kernel_side() -> anyhow::Result<(Side, &'static str)> {
    let out = Command::new(std::env::current_exe()?)
        .arg(KERNEL_CHILD)
        .stderr(Stdio::piped())
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut w = text.split_whitespace();
    let place = match w.next() {
        Some("fresh") => "a fresh IPC namespace",
        Some("fresh-userns") => "a fresh IPC namespace in a new user namespace",
        Some("host") => "the host's IPC namespace (no right to make a fresh one)",
        _ => bail!("kernel child said {text:?}"),
    };
    let v: Vec<f64> = w.filter_map(|x| x.parse().ok()).collect();
    ensure!(v.len() == 12, "kernel child said {text:?}");
    let f: Vec<Spread> = v
        .chunks_exact(3)
        .map(|m| Spread {
            median: m[0],
            min: m[1],
            max: m[2],
        })
        .collect();
    let [noop, pair, lookup, ping_pong] = [f[0], f[1], f[2], f[3]];
    Ok((
        Side {
            noop,
            noop_heap: noop,
            pair,
            pair_heap: pair,
            lookup,
            ping_pong,
        },
        place,
    ))
}

/// A goal line: shown value and whether met, or why not measured.
pub(crate) struct Check {
    pub(crate) text: String,
    pub(crate) value: f64,
    pub(crate) shown: String,
    pub(crate) met: Option<bool>,
}

fn speedup(text: &str, kernel: Option<f64>, lib: f64, at_least: f64) -> Check {
    match kernel {
        Some(k) => {
            let x = ratio(k, lib);
            Check {
                text: text.to_string(),
                value: x,
                shown: format!("{x:.2}x"),
                met: Some(x >= at_least),
            }
        }
        None => Check {
            text: text.to_string(),
            value: f64::NAN,
            shown: "NOT MEASURED (no kernel figures)".to_string(),
            met: None,
        },
    }
}

fn overhead(text: &str, ns: f64) -> Check {
    Check {
        text: text.to_string(),
        value: ns,
        shown: format!("{ns:+.1} ns"),
        met: Some(ns <= 5.0),
    }
}

impl Check {
    pub(crate) fn line(&self) -> String {
        match self.met {
            Some(m) => format!("goal: {}: {} {}", self.text, self.shown, verdict(m)),
            None => format!("goal: {}: {}", self.text, self.shown),
        }
    }
    pub(crate) fn json(&self) -> String {
        format!(
            "{{\"goal\":{},\"value\":{},\"met\":{}}}",
            json_str(&self.text),
            json_num(self.value),
            self.met.map_or("null".to_string(), |m| m.to_string())
        )
    }
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let ncpus = allowed_cpus().map_or(0, |c| c.len());
    let path = lib_path()?;
    let named = Named::new()?;
    let lib = Lib::open(&path, &named.dir, &named.name)?;
    let lib_objs = Objects::make(&lib).context("through libipcns.so")?;
    let t = TempNs::new("preload", 64 << 20, false)?;
    let core = Core {
        ns: &t.ns,
        cred: t.cred()?,
    };
    let core_objs = Objects::make(&core).context("on the core")?;
    // Each row: the library and the core in turns (see `chunked`).
    let (lo, co) = (&lib_objs, &core_objs);
    let both = |lib_f: &dyn Fn(u64) -> anyhow::Result<f64>,
                core_f: &dyn Fn(u64) -> anyhow::Result<f64>,
                n: u64| {
        chunked(n, 2, |side, c| if side == 0 { lib_f(c) } else { core_f(c) }).map(|v| (v[0], v[1]))
    };
    let only =
        |f: &dyn Fn(u64) -> anyhow::Result<f64>, n: u64| chunked(n, 1, |_, c| f(c)).map(|v| v[0]);
    let mut progress = Progress::new("preload", 7);
    let mut step = |i: usize, what: &str| {
        progress.step(i, &format!("{what}, {ROUNDS} rounds"));
    };
    step(0, "no-op semop, library and core");
    let (noop_l, noop_c) = both(
        &|c| noop(&lib, lo, c, false),
        &|c| noop(&core, co, c, false),
        sizes.ops,
    )?;
    step(1, "msgsnd+msgrcv, library and core");
    let (pair_l, pair_c) = both(
        &|c| pairs(&lib, lo, c, false),
        &|c| pairs(&core, co, c, false),
        sizes.pairs,
    )?;
    step(2, "semget lookup, library and core");
    let (look_l, look_c) = both(
        &|c| lookups(&lib, lo, c),
        &|c| lookups(&core, co, c),
        sizes.ops,
    )?;
    step(3, "no-op semop, sembuf on the heap");
    let noop_heap = only(&|c| noop(&lib, lo, c, true), sizes.ops / PROBED_DIV)?;
    step(4, "msgsnd+msgrcv, message on the heap");
    let pair_heap = only(&|c| pairs(&lib, lo, c, true), sizes.pairs / PROBED_DIV)?;
    step(5, "semaphore ping-pong through the library");
    let ours = Side {
        noop: noop_l,
        noop_heap,
        pair: pair_l,
        pair_heap,
        lookup: look_l,
        ping_pong: ping_pong_rounds(&lib, lo, sizes)?,
    };
    let core_m = Side {
        noop: noop_c,
        noop_heap: Spread::NONE,
        pair: pair_c,
        pair_heap: Spread::NONE,
        lookup: look_c,
        ping_pong: Spread::NONE,
    };
    lib_objs.remove(&lib);
    core_objs.remove(&core);
    step(6, "the kernel (a child process)");
    let (kernel, place, note) = match kernel_side() {
        Ok((k, p)) => (Some(k), p, None),
        Err(e) => (None, "", Some(format!("{e:#}"))),
    };
    progress.clear();
    let ks = kernel;
    let goals = vec![
        speedup(
            "no-op semop through libipcns.so >= 10x faster than the kernel",
            ks.map(|k| k.noop.median),
            ours.noop.median,
            10.0,
        ),
        speedup(
            "msgsnd+msgrcv (8 bytes) through libipcns.so >= 10x faster than the kernel",
            ks.map(|k| k.pair.median),
            ours.pair.median,
            10.0,
        ),
        speedup(
            "no-op semop, sembuf on the heap, >= 10x faster than the kernel",
            ks.map(|k| k.noop_heap.median),
            ours.noop_heap.median,
            10.0,
        ),
        speedup(
            "msgsnd+msgrcv (8 bytes) on the heap >= 10x faster than the kernel",
            ks.map(|k| k.pair_heap.median),
            ours.pair_heap.median,
            10.0,
        ),
        speedup(
            "semaphore ping-pong through libipcns.so >= 3x faster than the kernel",
            ks.map(|k| k.ping_pong.median),
            ours.ping_pong.median,
            3.0,
        ),
        speedup(
            "semget lookup through libipcns.so >= 10x faster than the kernel",
            ks.map(|k| k.lookup.median),
            ours.lookup.median,
            10.0,
        ),
        overhead(
            "libipcns.so adds <= 5 ns per semop over the core",
            ours.noop.median - core_m.noop.median,
        ),
        overhead(
            "libipcns.so adds <= 5 ns per msgsnd or msgrcv over the core",
            (ours.pair.median - core_m.pair.median) / 2.0,
        ),
        overhead(
            "libipcns.so adds <= 5 ns per semget over the core",
            ours.lookup.median - core_m.lookup.median,
        ),
        overhead(
            "a sembuf on the heap costs <= 5 ns more than on the stack",
            ours.noop_heap.median - ours.noop.median,
        ),
        overhead(
            "a message on the heap costs <= 5 ns per call more than on the stack",
            (ours.pair_heap.median - ours.pair.median) / 2.0,
        ),
    ];
    let text = if opts.json {
        to_json(
            &cpu,
            &path,
            sizes,
            &ours,
            &core_m,
            kernel.as_ref(),
            place,
            note.as_deref(),
            &goals,
        )
    } else {
        table(
            &cpu,
            ncpus,
            &path,
            sizes,
            &ours,
            &core_m,
            kernel.as_ref(),
            place,
            note.as_deref(),
            if opts.goals { &goals } else { &[] },
        )
    };
    crate::print_out(&text)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn table(
    cpu: &str,
    ncpus: usize,
    path: &Path,
    sizes: Sizes,
    lib: &Side,
    core: &Side,
    kernel: Option<&Side>,
    place: &str,
    note: Option<&str>,
    goals: &[Check],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "ipcns bench preload: System V IPC through {} (dlopen, function pointers), beside the core called directly and the kernel through the C library; medians of {ROUNDS} rounds (fastest-slowest)",
        path.display()
    ));
    line(cpu_line(cpu, ncpus));
    match (kernel, note) {
        (Some(_), _) => line(format!("kernel: {place}")),
        (None, Some(n)) => line(format!("kernel columns skipped: {n}")),
        (None, None) => {}
    }
    line(String::new());
    line(format!(
        "{:<40} {:>22} {:>22} {:>22} {:>8} {:>10}",
        "ns per call", "library", "core", "kernel", "k/lib", "lib-core"
    ));
    // One decimal below 1000 ns, none above (a round trip's).
    let num = |x: Spread| {
        if x.median.is_finite() {
            x.cell(if x.median >= 1000.0 { 0 } else { 1 })
        } else {
            "-".to_string()
        }
    };
    let mut row = |name: &str, l: Spread, c: Spread, k: Option<Spread>| {
        let kr = k.map_or("-".to_string(), |k| {
            format!("{:.1}x", ratio(k.median, l.median))
        });
        let d = if c.median.is_finite() {
            format!("{:+.1}", l.median - c.median)
        } else {
            "-".to_string()
        };
        line(format!(
            "{name:<40} {:>22} {:>22} {:>22} {kr:>8} {d:>10}",
            num(l),
            num(c),
            k.map_or("-".to_string(), num)
        ));
    };
    row(
        "no-op semop (sembuf on the stack)",
        lib.noop,
        core.noop,
        kernel.map(|k| k.noop),
    );
    row(
        "no-op semop (sembuf on the heap)",
        lib.noop_heap,
        Spread::NONE,
        kernel.map(|k| k.noop_heap),
    );
    row(
        "msgsnd+msgrcv 8 B, per pair (stack)",
        lib.pair,
        core.pair,
        kernel.map(|k| k.pair),
    );
    row(
        "msgsnd+msgrcv 8 B, per pair (heap)",
        lib.pair_heap,
        Spread::NONE,
        kernel.map(|k| k.pair_heap),
    );
    row(
        "semget lookup of an existing key",
        lib.lookup,
        core.lookup,
        kernel.map(|k| k.lookup),
    );
    row(
        "semaphore ping-pong, per round trip",
        lib.ping_pong,
        Spread::NONE,
        kernel.map(|k| k.ping_pong),
    );
    line(format!(
        "  ({} semops and lookups, {} message pairs per round; the heap rows 1/{} of that: \
         a pointer off the caller's stack and image is copied by a copy that may fault; \
         ping-pong: {} round trips per round after {}, two processes on two cpus)",
        sizes.ops, sizes.pairs, PROBED_DIV, sizes.trips, sizes.warm
    ));
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
    path: &Path,
    sizes: Sizes,
    lib: &Side,
    core: &Side,
    kernel: Option<&Side>,
    place: &str,
    note: Option<&str>,
    goals: &[Check],
) -> String {
    let side = |s: &Side| {
        format!(
            "{{{},{},{},{},{},{}}}",
            s.noop.json_fields("noop_semop"),
            s.noop_heap.json_fields("noop_semop_heap"),
            s.pair.json_fields("msg_pair"),
            s.pair_heap.json_fields("msg_pair_heap"),
            s.lookup.json_fields("semget_lookup"),
            s.ping_pong.json_fields("ping_pong")
        )
    };
    format!(
        "{{\"bench\":\"preload\",\"cpu\":{},\"library\":{},\"rounds\":{ROUNDS},\"ops\":{},\"pairs\":{},\"trips\":{},\
         \"ns\":{{\"library\":{},\"core\":{},\"kernel\":{}}},\"kernel_namespace\":{},\"kernel_skipped\":{},\"goals\":[{}]}}\n",
        json_str(cpu),
        json_str(&path.display().to_string()),
        sizes.ops,
        sizes.pairs,
        sizes.trips,
        side(lib),
        side(core),
        kernel.map_or("null".to_string(), side),
        if kernel.is_some() {
            json_str(place)
        } else {
            "null".to_string()
        },
        note.map_or("null".to_string(), json_str),
        goals.iter().map(Check::json).collect::<Vec<_>>().join(",")
    )
}
