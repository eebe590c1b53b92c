//! `ipcns bench supervisor`: what a System V IPC call costs when `ipcns
//! run`'s supervisor serves it (a static binary's, a raw system call's),
//! beside the same call served by `libipcns.so` in the same process and
//! the kernel's, all in one run.
//!
//! Three children of this program, one of each per round, taking turns
//! (which goes first rotating), so that a slow spell of the shared machine
//! falls on all of them:
//! - served: `ipcns run --private -- ipcns-bench __supervisor-child
//!   served`. Its supervisor column makes the calls with the system call
//!   instruction ([`Raw`]: no library sees it, not even the C library's
//!   `syscall`, which `libipcns.so` interposes), so the seccomp filter
//!   sends them to the supervisor; its library column makes them through
//!   the C library's `semop`, `msgsnd`, ... ([`Libc`]), which the
//!   preloaded `libipcns.so` answers without a system call. Both on the
//!   same objects (made by the library: the supervisor serves the same
//!   namespace), in turns chunk by chunk;
//! - unfiltered: the library column again, under `ipcns run --private
//!   --no-supervisor` (no filter): what the filter costs the library;
//! - kernel: raw system calls in a fresh IPC namespace (`fresh.rs`), no
//!   filter, and the kernel's semaphore ping-pong (two processes, one
//!   posts s0 and waits on s1, the other the reverse, each bound to a cpu
//!   when there are two): the reference for the first goal.
//!
//! Each child checks its seccomp filters (`/proc/self/status`), so that a
//! served column can never be the kernel's in disguise: more than this
//! program's for the served child, as many for the others.
//!
//! Rows, ns per call (per pair, per round trip): a no-op semop (wait for
//! zero on a semaphore at zero), msgsnd+msgrcv of 8 bytes, shmat+shmdt of
//! a 4 KiB segment, the kernel's ping-pong. A child's figure for a row is
//! the median of its chunks; the table gives the median of the rounds
//! and the fastest and slowest round. Served calls cost microseconds
//! (shmat and shmdt, made in the caller through ptrace, hundreds), so the
//! supervisor's rows make far fewer calls. Goals: a served call (the
//! no-op semop) costs less than one kernel ping-pong round trip; the
//! library's figures under the supervisor's filter stay within 5% (or
//! 5 ns) of the library's without it. `IPCNS_BENCH_QUICK=1` runs a
//! thousandth of it (the numbers then mean nothing).

use super::capi::{CApi, CShm, Libc, MsgBuf, Raw};
use super::fresh::{self, Fresh};
use super::lock::Placement;
use super::preload::{Check, beside_exe, ping_pong};
use super::progress::{Progress, round};
use super::stats::{Spread, cpu_line, cpu_model, json_str, median, quick, ratio};
use super::sys::allowed_cpus;
use anyhow::{Context, bail, ensure};
use ipcns::abi::sembuf;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The hidden subcommand of the three children: `__supervisor-child
/// served|unfiltered|kernel`.
pub const CHILD: &str = "__supervisor-child";

const ROUNDS: usize = 7;
/// A row's calls in a round are made in this many chunks (fewer if it
/// makes fewer calls), the round's figure the median of its chunks.
const CHUNKS: u64 = 50;
/// The segment's size.
const SEGMENT: usize = 4096;

/// Calls per round and child.
#[derive(Clone, Copy)]
struct Sizes {
    /// Served: no-op semops, message pairs, shmat+shmdt pairs.
    served: [u64; 3],
    /// Through the library, with or without the filter.
    library: [u64; 3],
    /// The kernel's.
    kernel: [u64; 3],
    /// Ping-pong round trips, after `warm` untimed ones.
    trips: u64,
    warm: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let div = if quick() { 1000 } else { 1 };
        let d = |v: [u64; 3]| v.map(|n| (n / div).max(1));
        Sizes {
            served: d([10_000, 3_000, 300]),
            library: d([1_000_000, 300_000, 20_000]),
            kernel: d([300_000, 100_000, 20_000]),
            trips: (2_000 / div).max(2),
            warm: (200 / div).max(1),
        }
    }
}

/// The rows' names: in the children's output and the JSON.
const ROWS: [&str; 3] = ["noop_semop", "msg_pair", "shm_pair"];

/// The objects a child measures on: a set of two semaphores at 0, a
/// queue, a 4 KiB segment.
struct Objects {
    set: i32,
    queue: i32,
    seg: i32,
}

impl Objects {
    fn make(a: &(impl CApi + CShm)) -> anyhow::Result<Objects> {
        let private = libc::IPC_PRIVATE;
        let set = a
            .semget(private, 2, libc::IPC_CREAT | 0o600)
            .map_err(|e| fail("semget", e))?;
        let queue = a
            .msgget(private, libc::IPC_CREAT | 0o600)
            .map_err(|e| fail("msgget", e))?;
        let seg = a.shmget_private(SEGMENT).map_err(|e| fail("shmget", e))?;
        Ok(Objects { set, queue, seg })
    }

    fn remove(&self, a: &(impl CApi + CShm)) {
        a.semctl_rmid(self.set);
        a.msgctl_rmid(self.queue);
        a.shmctl_rmid(self.seg);
    }
}

fn fail(what: &str, e: i32) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", ipcns::Errno(e))
}

/// `n` no-op semops; ns per call.
#[inline(never)]
fn noop(a: &impl CApi, o: &Objects, n: u64) -> anyhow::Result<f64> {
    let sops = [sembuf::default()];
    let t = Instant::now();
    for _ in 0..n {
        a.semop(o.set, &sops).map_err(|e| fail("semop", e))?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// `n` msgsnd+msgrcv pairs of 8 bytes; ns per pair.
#[inline(never)]
fn pairs(a: &impl CApi, o: &Objects, n: u64) -> anyhow::Result<f64> {
    let mut buf = MsgBuf::new(1);
    let t = Instant::now();
    for _ in 0..n {
        buf.mtype = 1;
        a.msgsnd(o.queue, &buf, 8, 0)
            .map_err(|e| fail("msgsnd", e))?;
        let got = a
            .msgrcv(o.queue, &mut buf, 8, 0, 0)
            .map_err(|e| fail("msgrcv", e))?;
        ensure!(got == 8, "msgrcv gave {got} bytes of 8");
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// `n` shmat+shmdt pairs; ns per pair.
#[inline(never)]
fn shm_pairs(a: &impl CShm, o: &Objects, n: u64) -> anyhow::Result<f64> {
    let t = Instant::now();
    for _ in 0..n {
        a.attach_detach(o.seg).map_err(|e| fail("shmat+shmdt", e))?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

/// One row in one round of one process: its sides (`calls[i]` calls
/// each) take turns chunk by chunk, which one goes first alternating,
/// after an untimed chunk each; `run(side, n)` makes `n` calls and gives
/// ns per call. Each side's figure: the median of its chunks (a chunk
/// during which another process had the cpu is an outlier, not a share
/// of a mean).
fn row(
    calls: &[u64],
    mut run: impl FnMut(usize, u64) -> anyhow::Result<f64>,
) -> anyhow::Result<Vec<f64>> {
    let chunks = calls.iter().copied().min().unwrap_or(1).clamp(1, CHUNKS);
    let chunk: Vec<u64> = calls.iter().map(|n| (n / chunks).max(1)).collect();
    for (side, &c) in chunk.iter().enumerate() {
        run(side, c)?;
    }
    let mut per = vec![Vec::with_capacity(chunks as usize); calls.len()];
    for k in 0..chunks as usize {
        for i in 0..calls.len() {
            let side = (i + k) % calls.len();
            per[side].push(run(side, chunk[side])?);
        }
    }
    Ok(per.iter_mut().map(|v| median(v)).collect())
}

/// This process's seccomp filters (`Seccomp_filters:` of
/// /proc/self/status; 0 when the kernel does not say).
fn seccomp_filters() -> anyhow::Result<u32> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp_filters:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// The child (see the module doc): one line of `NAME VALUE` words, its
/// seccomp filters first (`filters N`), the kernel's place (`where
/// fresh|fresh-userns`) next, then the figures.
pub fn child(args: &[String]) -> anyhow::Result<()> {
    let sizes = Sizes::from_env();
    let mut words = Vec::new();
    let mut say = |k: &str, v: String| {
        words.push(k.to_string());
        words.push(v);
    };
    let mode = match args {
        [m] => m.as_str(),
        _ => bail!("usage: ipcns bench {CHILD} served|unfiltered|kernel"),
    };
    let mut figures: Vec<(String, f64)> = Vec::new();
    match mode {
        "served" | "unfiltered" => {
            say("filters", seccomp_filters()?.to_string());
            let o = Objects::make(&Libc).context("through libipcns.so")?;
            let r = (|| {
                let served = mode == "served";
                let calls = |i: usize| {
                    if served {
                        vec![sizes.served[i], sizes.library[i]]
                    } else {
                        vec![sizes.library[i]]
                    }
                };
                // Side 0: the supervisor's (served child) or the
                // library's; side 1: the library's.
                let via_lib = |side: usize| !served || side == 1;
                let rows = [
                    row(&calls(0), |side, n| {
                        if via_lib(side) {
                            noop(&Libc, &o, n)
                        } else {
                            noop(&Raw, &o, n)
                        }
                    })?,
                    row(&calls(1), |side, n| {
                        if via_lib(side) {
                            pairs(&Libc, &o, n)
                        } else {
                            pairs(&Raw, &o, n)
                        }
                    })?,
                    row(&calls(2), |side, n| {
                        if via_lib(side) {
                            shm_pairs(&Libc, &o, n)
                        } else {
                            shm_pairs(&Raw, &o, n)
                        }
                    })?,
                ];
                for (name, v) in ROWS.iter().zip(rows) {
                    if served {
                        figures.push((format!("supervisor_{name}"), v[0]));
                        figures.push((format!("library_{name}"), v[1]));
                    } else {
                        figures.push((format!("library_{name}"), v[0]));
                    }
                }
                Ok::<(), anyhow::Error>(())
            })();
            o.remove(&Libc);
            r?;
        }
        "kernel" => {
            let how = fresh::enter()?;
            say("filters", seccomp_filters()?.to_string());
            say("where", how.word().to_string());
            let o = Objects::make(&Raw)?;
            let r = (|| {
                let one = |i: usize, f: &dyn Fn(u64) -> anyhow::Result<f64>| {
                    row(&[sizes.kernel[i]], |_, n| f(n)).map(|v| v[0])
                };
                figures.push(("kernel_noop_semop".into(), one(0, &|n| noop(&Raw, &o, n))?));
                figures.push(("kernel_msg_pair".into(), one(1, &|n| pairs(&Raw, &o, n))?));
                figures.push((
                    "kernel_shm_pair".into(),
                    one(2, &|n| shm_pairs(&Raw, &o, n))?,
                ));
                let place = Placement::new()?;
                figures.push((
                    "kernel_ping_pong".into(),
                    ping_pong(&Raw, o.set, &place, sizes.warm, sizes.trips)?,
                ));
                Ok::<(), anyhow::Error>(())
            })();
            o.remove(&Raw);
            r?;
        }
        other => bail!("{CHILD}: unknown side {other:?} (served, unfiltered or kernel)"),
    }
    for (k, v) in figures {
        say(&k, v.to_string());
    }
    println!("{}", words.join(" "));
    Ok(())
}

/// What a child said: its words in pairs.
struct Said(HashMap<String, String>);

impl Said {
    fn num(&self, k: &str) -> anyhow::Result<f64> {
        self.0
            .get(k)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("the child gave no {k}"))
    }
}

/// Runs `cmd` (a child); its words, or what it said on its standard
/// error.
fn run_child(mut cmd: Command) -> anyhow::Result<Said> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim();
        bail!("{}", said.strip_prefix("ipcns: ").unwrap_or(said));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = text.split_whitespace().collect();
    ensure!(w.len().is_multiple_of(2), "a child said {text:?}");
    Ok(Said(
        w.chunks_exact(2)
            .map(|p| (p[0].to_string(), p[1].to_string()))
            .collect(),
    ))
}

/// The `ipcns` that runs the served children: `$IPCNS_BIN`, else the one
/// beside this program.
fn ipcns_path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("IPCNS_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        ensure!(p.is_file(), "$IPCNS_BIN {} is not a file", p.display());
        return Ok(p);
    }
    beside_exe(
        "ipcns",
        "build it: cargo build --release -p ipcns-cli -p ipcns-preload; or set IPCNS_BIN",
    )
}

/// The kernel's figures, or why there are none.
struct Kernel {
    rows: [Spread; 3],
    ping_pong: Spread,
    place: Fresh,
}

/// The figures of one run.
struct Figures {
    supervisor: [Spread; 3],
    library: [Spread; 3],
    unfiltered: [Spread; 3],
    kernel: Result<Kernel, String>,
}

/// Every round of every child.
fn measure(ipcns: &Path, base: u32) -> anyhow::Result<Figures> {
    let me = std::env::current_exe().context("current_exe")?;
    let under = |extra: &[&str], side: &str| {
        let mut c = Command::new(ipcns);
        c.arg("run")
            .arg("--private")
            .args(extra)
            .arg("--")
            .arg(&me)
            .arg(CHILD)
            .arg(side);
        c
    };
    let mut served: Vec<Said> = Vec::new();
    let mut unfiltered: Vec<Said> = Vec::new();
    let mut kernel: Result<Vec<Said>, String> = Ok(Vec::new());
    let mut progress = Progress::new("supervisor", ROUNDS * 3);
    for r in 0..ROUNDS {
        for i in 0..3 {
            let side = (r + i) % 3;
            let what = [
                "served (ipcns run)",
                "library, no filter (ipcns run --no-supervisor)",
                "the kernel",
            ][side];
            progress.step(r * 3 + i, &format!("{}, {what}", round(r, ROUNDS)));
            match side {
                0 => {
                    let s = run_child(under(&[], "served"))
                        .context("the served child (ipcns run --private)")?;
                    let n = s.num("filters")? as u32;
                    ensure!(
                        n > base,
                        "the served child runs under no seccomp filter of ipcns run's: no supervisor \
                         (a kernel without seccomp user notification?)"
                    );
                    served.push(s);
                }
                1 => {
                    let s = run_child(under(&["--no-supervisor"], "unfiltered"))
                        .context("the library's child (ipcns run --private --no-supervisor)")?;
                    ensure!(
                        s.num("filters")? as u32 == base,
                        "ipcns run --no-supervisor left a seccomp filter in its program"
                    );
                    unfiltered.push(s);
                }
                _ => {
                    if let Ok(v) = &mut kernel {
                        let mut c = Command::new(&me);
                        c.arg(CHILD).arg("kernel").env_remove("LD_PRELOAD");
                        match run_child(c) {
                            Ok(s) => v.push(s),
                            Err(e) => kernel = Err(format!("{e:#}")),
                        }
                    }
                }
            }
        }
    }
    progress.clear();
    let spread = |v: &[Said], k: &str| -> anyhow::Result<Spread> {
        let mut x = v
            .iter()
            .map(|s| s.num(k))
            .collect::<anyhow::Result<Vec<f64>>>()?;
        Ok(Spread::of(&mut x))
    };
    let three = |v: &[Said], prefix: &str| -> anyhow::Result<[Spread; 3]> {
        Ok([
            spread(v, &format!("{prefix}_{}", ROWS[0]))?,
            spread(v, &format!("{prefix}_{}", ROWS[1]))?,
            spread(v, &format!("{prefix}_{}", ROWS[2]))?,
        ])
    };
    let kernel = match kernel {
        Ok(v) => {
            let place = v
                .first()
                .and_then(|s| s.0.get("where"))
                .and_then(|w| Fresh::from_word(w))
                .context("the kernel child said no place")?;
            ensure!(
                v.iter()
                    .all(|s| s.num("filters").ok() == Some(f64::from(base))),
                "the kernel child runs under a seccomp filter this program has not"
            );
            Ok(Kernel {
                rows: three(&v, "kernel")?,
                ping_pong: spread(&v, "kernel_ping_pong")?,
                place,
            })
        }
        Err(e) => Err(e),
    };
    Ok(Figures {
        supervisor: three(&served, "supervisor")?,
        library: three(&served, "library")?,
        unfiltered: three(&unfiltered, "library")?,
        kernel,
    })
}

/// The goals (see the module doc).
fn goals(f: &Figures) -> Vec<Check> {
    let mut g = Vec::new();
    let text =
        "a served call (no-op semop) costs less than one kernel semaphore ping-pong round trip";
    g.push(match &f.kernel {
        Ok(k) => {
            let x = ratio(f.supervisor[0].median, k.ping_pong.median);
            Check {
                text: text.to_string(),
                value: x,
                shown: format!(
                    "{:.0} ns against {:.0} ns ({x:.2}x)",
                    f.supervisor[0].median, k.ping_pong.median
                ),
                met: Some(x < 1.0),
            }
        }
        Err(_) => Check {
            text: text.to_string(),
            value: f64::NAN,
            shown: "NOT MEASURED (no kernel figures)".to_string(),
            met: None,
        },
    });
    for (i, what) in [
        "no-op semop",
        "msgsnd+msgrcv (8 bytes)",
        "shmat+shmdt (4 KiB)",
    ]
    .iter()
    .enumerate()
    {
        let (with, without) = (f.library[i].median, f.unfiltered[i].median);
        let more = with - without;
        g.push(Check {
            text: format!(
                "the library's {what} under the supervisor's filter stays within 5% (or 5 ns) of the library without it"
            ),
            value: more,
            shown: format!("{more:+.1} ns ({:+.1}%)", 100.0 * ratio(more, without)),
            met: Some(more <= (0.05 * without).max(5.0)),
        });
    }
    g
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let ncpus = allowed_cpus().map_or(0, |c| c.len());
    let ipcns = ipcns_path()?;
    let base = seccomp_filters()?;
    let f = measure(&ipcns, base)?;
    let goals = goals(&f);
    let place = Placement::new()?;
    let text = if opts.json {
        to_json(&cpu, ncpus, &ipcns, base, sizes, &f, &place, &goals)
    } else {
        table(
            &cpu,
            ncpus,
            &ipcns,
            base,
            sizes,
            &f,
            &place,
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
    ipcns: &Path,
    base: u32,
    sizes: Sizes,
    f: &Figures,
    place: &Placement,
    goals: &[Check],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "ipcns bench supervisor: System V IPC served by ipcns run's supervisor (raw system calls, seccomp user notification), beside the library (libipcns.so, interposed) and the kernel; medians of {ROUNDS} rounds (fastest-slowest)"
    ));
    line(cpu_line(cpu, ncpus));
    line(format!("ipcns: {} run --private", ipcns.display()));
    match &f.kernel {
        Ok(k) => line(format!("kernel: {}", k.place.describe())),
        Err(e) => line(format!("kernel columns skipped: {e}")),
    }
    if base > 0 {
        line(format!(
            "(this program runs under {base} seccomp filter(s) of its own: every column's system calls pass them)"
        ));
    }
    line(String::new());
    line(format!(
        "{:<36} {:>22} {:>18} {:>20} {:>20} {:>7} {:>7}",
        "ns per call", "supervisor", "library", "library, no filter", "kernel", "sup/k", "filter"
    ));
    // One decimal below 1000 ns, none above.
    let num = |x: Spread| {
        if x.median.is_finite() {
            x.cell(if x.median >= 1000.0 { 0 } else { 1 })
        } else {
            "-".to_string()
        }
    };
    let kernel = f.kernel.as_ref().ok();
    let names = [
        "no-op semop",
        "msgsnd+msgrcv 8 B, per pair",
        "shmat+shmdt 4 KiB, per pair",
    ];
    for (i, name) in names.iter().enumerate() {
        let k = kernel.map(|k| k.rows[i]);
        let sup_k = k.map_or("-".to_string(), |k| {
            format!("{:.1}x", ratio(f.supervisor[i].median, k.median))
        });
        let filter = format!("{:+.1}", f.library[i].median - f.unfiltered[i].median);
        line(format!(
            "{name:<36} {:>22} {:>18} {:>20} {:>20} {sup_k:>7} {filter:>7}",
            num(f.supervisor[i]),
            num(f.library[i]),
            num(f.unfiltered[i]),
            k.map_or("-".to_string(), num)
        ));
    }
    line(format!(
        "{:<36} {:>22} {:>18} {:>20} {:>20}",
        "semaphore ping-pong, per round trip",
        "-",
        "-",
        "-",
        kernel.map_or("-".to_string(), |k| num(k.ping_pong))
    ));
    line(format!(
        "  (calls per round: supervisor {} semops, {} message pairs, {} shm pairs: raw system calls served \
         through seccomp user notification, shmat and shmdt mapped in the caller through ptrace;",
        sizes.served[0], sizes.served[1], sizes.served[2],
    ));
    line(format!(
        "   library {} / {} / {}: the C library's calls, answered by libipcns.so (under the supervisor's \
         filter, and without it under ipcns run --no-supervisor);",
        sizes.library[0], sizes.library[1], sizes.library[2],
    ));
    line(format!(
        "   kernel {} / {} / {}: raw system calls, no filter; ping-pong: {} round trips after {}, {};",
        sizes.kernel[0],
        sizes.kernel[1],
        sizes.kernel[2],
        sizes.trips,
        sizes.warm,
        place.describe()
    ));
    line(
        "   sup/k: the supervisor's time over the kernel's; filter: the library with the filter minus without)"
            .to_string(),
    );
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
    ncpus: usize,
    ipcns: &Path,
    base: u32,
    sizes: Sizes,
    f: &Figures,
    place: &Placement,
    goals: &[Check],
) -> String {
    let side = |v: &[Spread]| {
        let fields: Vec<String> = ROWS
            .iter()
            .zip(v)
            .map(|(name, s)| s.json_fields(name))
            .collect();
        format!("{{{}}}", fields.join(","))
    };
    let kernel = match &f.kernel {
        Ok(k) => {
            // The three rows' fields, then the ping-pong's, in one object.
            let rows = side(&k.rows);
            format!(
                "{},{}}}",
                &rows[..rows.len() - 1],
                k.ping_pong.json_fields("ping_pong")
            )
        }
        Err(_) => "null".to_string(),
    };
    let counts = |v: [u64; 3]| format!("[{},{},{}]", v[0], v[1], v[2]);
    format!(
        "{{\"bench\":\"supervisor\",\"cpu\":{},\"cpus_usable\":{ncpus},\"ipcns\":{},\"seccomp_filters_of_its_own\":{base},\
         \"rounds\":{ROUNDS},\"calls\":{{\"supervisor\":{},\"library\":{},\"kernel\":{}}},\"trips\":{},\"placement\":{},\
         \"ns\":{{\"supervisor\":{},\"library\":{},\"library_no_filter\":{},\"kernel\":{}}},\
         \"kernel_namespace\":{},\"kernel_skipped\":{},\"goals\":[{}]}}\n",
        json_str(cpu),
        json_str(&ipcns.display().to_string()),
        counts(sizes.served),
        counts(sizes.library),
        counts(sizes.kernel),
        sizes.trips,
        place.json(),
        side(&f.supervisor),
        side(&f.library),
        side(&f.unfiltered),
        kernel,
        f.kernel
            .as_ref()
            .map_or("null".to_string(), |k| json_str(k.place.describe())),
        f.kernel
            .as_ref()
            .err()
            .map_or("null".to_string(), |e| json_str(e)),
        goals.iter().map(Check::json).collect::<Vec<_>>().join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::row;

    #[test]
    fn a_row_takes_turns_and_gives_each_side_its_median() {
        let mut seen = Vec::new();
        let v = row(&[10, 1000], |side, n| {
            seen.push((side, n));
            Ok(if side == 0 { 5.0 } else { 7.0 })
        })
        .unwrap();
        assert_eq!(v, vec![5.0, 7.0]);
        // 10 chunks (the fewer calls), after one untimed chunk each.
        assert_eq!(seen.len(), 2 + 2 * 10);
        assert_eq!(&seen[..4], &[(0, 1), (1, 100), (0, 1), (1, 100)]);
        assert_eq!(seen[4], (1, 100));
    }
}
