//! `ipcns bench semget`: seed 001's table. For KEYS keys, the loop
//! `semget(k++, 1, IPC_CREAT | 0600)` from 0x424242 in a fresh namespace
//! (creation: total and largest single call), then the same loop again
//! (lookup only: every key exists; one pass's time, averaged over as many
//! passes as make 300000 calls), for ipcns and for the host kernel in a
//! fresh IPC namespace (fresh.rs), in one run, medians of several rounds
//! and their spread. Then the arena bytes one semaphore set of one
//! semaphore, and one empty queue, cost. `IPCNS_BENCH_QUICK=1` measures
//! up to 1000 keys, a thousandth of the lookups (the numbers then mean
//! nothing).

use super::TempNs;
use super::fresh::{self, Fresh};
use super::plot::Chart;
use super::plot::Series;
use super::progress::{self, Progress};
use super::stats::{Spread, json_num, json_str, quick, ratio};
use anyhow::{Context, bail};
use ipcns::Namespace;
use ipcns::abi::IPC_CREAT;
use ipcns_oracle::sysv::SysV;
use std::time::Instant;

/// The hidden subcommand that measures the kernel in a new IPC namespace.
pub const KERNEL_CHILD: &str = "__semget-kernel-child";

const KEYS: [u32; 7] = [1, 10, 32, 100, 1000, 10000, 31900];
/// With `IPCNS_BENCH_QUICK=1`.
const QUICK_KEYS: [u32; 4] = [1, 10, 100, 1000];
/// The row the flatness goal compares the last row with.
const FLAT_BASE: u32 = 100;
const FIRST_KEY: i32 = 0x424242;
const ROUNDS: usize = 5;

/// Lookups timed per round at least: the lookup pass is repeated until
/// this many calls were made, and its time averaged over the passes (one
/// pass over a few keys is shorter than the clock's own cost).
const LOOKUPS: u32 = 300_000;

/// One round: (create total ns, largest create ns, lookup total ns: one
/// pass over the keys, averaged over `lookups / keys` passes).
fn run_loops(s: &dyn SysV, keys: u32, lookups: u32) -> anyhow::Result<(f64, f64, f64)> {
    let mut max = 0u128;
    let t = Instant::now();
    for i in 0..keys as i32 {
        let c = Instant::now();
        s.semget(FIRST_KEY + i, 1, IPC_CREAT | 0o600)
            .with_context(|| format!("semget #{i}"))?;
        max = max.max(c.elapsed().as_nanos());
    }
    let create = t.elapsed().as_nanos() as f64;
    let passes = (lookups / keys.max(1)).max(1);
    let t = Instant::now();
    for _ in 0..passes {
        for i in 0..keys as i32 {
            s.semget(FIRST_KEY + i, 1, IPC_CREAT | 0o600)?;
        }
    }
    let lookup = t.elapsed().as_nanos() as f64 / f64::from(passes);
    Ok((create, max as f64, lookup))
}

/// The lookups timed per round: [`LOOKUPS`], a thousandth when quick.
fn lookups() -> u32 {
    if quick() { LOOKUPS / 1000 } else { LOOKUPS }
}

/// The child half: enter a fresh IPC namespace, run the loops, print
/// where, then the three numbers.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    let [keys] = args else {
        bail!("usage: ipcns bench {KERNEL_CHILD} KEYS");
    };
    let place = fresh::enter()?;
    let (c, m, l) = run_loops(&ipcns_oracle::kernel::Host, keys.parse()?, lookups())?;
    println!("{} {c} {m} {l}", place.word());
    Ok(())
}

fn kernel_round(keys: u32) -> anyhow::Result<(Fresh, [f64; 3])> {
    let words = crate::kernel_child_words(KERNEL_CHILD, &[keys.to_string()])?;
    let (place, v) = match &words[..] {
        [w, rest @ ..] => (
            Fresh::from_word(w),
            rest.iter()
                .filter_map(|x| x.parse().ok())
                .collect::<Vec<f64>>(),
        ),
        [] => (None, Vec::new()),
    };
    match (place, &v[..]) {
        (Some(p), &[c, m, l]) => Ok((p, [c, m, l])),
        _ => bail!("kernel child said {words:?}"),
    }
}

fn ipcns_round(keys: u32) -> anyhow::Result<(f64, f64, f64)> {
    let t = TempNs::new("semget", 256 << 20, false)?;
    let cred = (*t.ns.cred()?).clone();
    run_loops(
        &ipcns_oracle::sysv::NsCaller { ns: &t.ns, cred },
        keys,
        lookups(),
    )
}

/// Arena bytes per object: slot plus heap (arrays, key table share), for
/// `n` objects made by `make`.
fn bytes_per(
    n: u32,
    make: impl Fn(&Namespace, &ipcns::Cred, i32) -> ipcns::SysResult<i32>,
) -> anyhow::Result<(f64, f64)> {
    let mut out = [0.0; 2];
    for (k, keyed) in [false, true].into_iter().enumerate() {
        let t = TempNs::new("semget", 256 << 20, false)?;
        let cred = (*t.ns.cred()?).clone();
        let before = t.ns.heap_in_use();
        for i in 0..n as i32 {
            make(&t.ns, &cred, if keyed { FIRST_KEY + i } else { 0 })?;
        }
        let heap = (t.ns.heap_in_use() - before) as f64;
        out[k] = (ipcns::SLOT_BYTES as f64 * f64::from(n) + heap) / f64::from(n);
    }
    Ok((out[0], out[1]))
}

/// One row: the medians and spreads of the rounds, in ns: creation of all
/// the keys, the slowest single creation, one lookup pass.
struct Row {
    keys: u32,
    ours: [Spread; 3],
    kernel: Option<[Spread; 3]>,
}

impl Row {
    /// ns per call of side `s`'s figure `j` (creation or lookup).
    fn per_call(&self, s: &[Spread; 3], j: usize) -> Spread {
        s[j].scaled(1.0 / f64::from(self.keys))
    }
}

pub fn run(opts: &crate::Options) -> anyhow::Result<Vec<Chart>> {
    let keys_measured: &[u32] = if quick() { &QUICK_KEYS } else { &KEYS };
    let mut rows = Vec::new();
    let mut kernel_note = None;
    let mut place = None;
    let mut progress = Progress::new("semget", keys_measured.len() * ROUNDS);
    for (i, &keys) in keys_measured.iter().enumerate() {
        let mut ours = [vec![], vec![], vec![]];
        let mut kern = [vec![], vec![], vec![]];
        for round in 0..ROUNDS {
            progress.step(
                i * ROUNDS + round,
                &format!("{keys} keys, {}", progress::round(round, ROUNDS)),
            );
            let (c, m, l) = ipcns_round(keys)?;
            ours[0].push(c);
            ours[1].push(m);
            ours[2].push(l);
            if kernel_note.is_none() {
                match kernel_round(keys) {
                    Ok((p, k)) => {
                        place = Some(p);
                        for (v, x) in kern.iter_mut().zip(k) {
                            v.push(x);
                        }
                    }
                    Err(e) => kernel_note = Some(format!("{e:#}")),
                }
            }
        }
        let spread = |v: &mut [Vec<f64>; 3]| {
            [
                Spread::of(&mut v[0]),
                Spread::of(&mut v[1]),
                Spread::of(&mut v[2]),
            ]
        };
        rows.push(Row {
            keys,
            ours: spread(&mut ours),
            kernel: (kern[0].len() == ROUNDS).then(|| spread(&mut kern)),
        });
    }
    progress.clear();
    let (sem_private, sem_keyed) =
        bytes_per(1000, |ns, c, key| ns.semget(c, key, 1, IPC_CREAT | 0o600))?;
    let (msg_private, msg_keyed) =
        bytes_per(1000, |ns, c, key| ns.msgget(c, key, IPC_CREAT | 0o600))?;
    let mut goals: Vec<(String, f64, f64, bool)> = Vec::new();
    for r in &rows {
        if let Some(k) = r.kernel {
            let speedup = ratio(k[2].median, r.ours[2].median);
            goals.push((
                format!(
                    "lookup at {} keys >= 5x faster per call than the kernel",
                    r.keys
                ),
                speedup,
                5.0,
                speedup >= 5.0,
            ));
        }
    }
    let (base, last) = (
        rows.iter()
            .find(|r| r.keys == FLAT_BASE)
            .unwrap_or(&rows[0]),
        &rows[rows.len() - 1],
    );
    let flat = ratio(
        last.per_call(&last.ours, 2).median,
        base.per_call(&base.ours, 2).median,
    );
    goals.push((
        format!(
            "per-call lookup at {} keys <= 1.5x at {} keys",
            last.keys, base.keys
        ),
        flat,
        1.5,
        flat <= 1.5,
    ));
    for (what, b) in [
        ("bytes per set of one semaphore (private)", sem_private),
        ("bytes per set of one semaphore (keyed)", sem_keyed),
        ("bytes per empty queue (private)", msg_private),
        ("bytes per empty queue (keyed)", msg_keyed),
    ] {
        goals.push((format!("{what} <= 256"), b, 256.0, b <= 256.0));
    }
    let bytes = [sem_private, sem_keyed, msg_private, msg_keyed];
    let text = if opts.json {
        to_json(&rows, &goals, kernel_note.as_deref(), place)
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        table(&rows, goals, &bytes, kernel_note.as_deref(), place)
    };
    crate::print_out(&text)?;
    Ok(charts(&rows))
}

type GoalRow = (String, f64, f64, bool);

fn to_json(
    rows: &[Row],
    goals: &[GoalRow],
    kernel_note: Option<&str>,
    place: Option<Fresh>,
) -> String {
    let mut s = format!(
        "{{\"bench\":\"semget\",\"cpu\":{},\"unit\":\"us\",\"rows\":[",
        json_str(&super::stats::cpu_model())
    );
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let us = |x: Spread| x.scaled(1e-3);
        let fields = |side: &str, v: Option<[Spread; 3]>| match v {
            Some(v) => format!(
                "{},{},{}",
                us(v[0]).json_fields(&format!("{side}_create")),
                us(v[1]).json_fields(&format!("{side}_max_call")),
                us(v[2]).json_fields(&format!("{side}_lookup"))
            ),
            None => {
                format!("\"{side}_create\":null,\"{side}_max_call\":null,\"{side}_lookup\":null")
            }
        };
        s.push_str(&format!(
            "{{\"keys\":{},{},{}}}",
            r.keys,
            fields("ipcns", Some(r.ours)),
            fields("kernel", r.kernel)
        ));
    }
    s.push_str("],\"goals\":[");
    for (i, (name, got, limit, met)) in goals.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"goal\":{},\"value\":{},\"limit\":{limit},\"met\":{met}}}",
            json_str(name),
            json_num(*got)
        ));
    }
    s.push(']');
    if let Some(p) = place {
        s.push_str(&format!(",\"kernel_namespace\":{}", json_str(p.describe())));
    }
    if let Some(n) = kernel_note {
        s.push_str(&format!(",\"kernel_skipped\":{}", json_str(n)));
    }
    s.push_str("}\n");
    s
}

fn table(
    rows: &[Row],
    goals: &[GoalRow],
    bytes: &[f64; 4],
    kernel_note: Option<&str>,
    place: Option<Fresh>,
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(
        "ipcns bench semget: semget(key, 1, IPC_CREAT|0600) for each of N new keys in a fresh namespace,"
            .to_string(),
    );
    line(format!(
        "then for the same keys again (each exists: a lookup); medians of {ROUNDS} rounds, (fastest-slowest)"
    ));
    line(super::stats::cpu_line(
        &super::stats::cpu_model(),
        crate::sys::allowed_cpus().map_or(0, |c| c.len()),
    ));
    line(match (place, kernel_note) {
        (Some(p), None) => format!("kernel: {}", p.describe()),
        (_, Some(n)) => format!("kernel columns skipped: {n}"),
        (None, None) => String::new(),
    });
    // Per call: ns, with the rounds' spread.
    let cell = |x: Spread| format!("{:.0} ({})", x.median, x.range(0));
    let kcell = |r: &Row, j: usize| {
        r.kernel
            .map_or("-".to_string(), |k| cell(r.per_call(&k, j)))
    };
    let rat = |r: &Row, j: usize| {
        r.kernel.map_or("-".to_string(), |k| {
            format!("{:.1}x", ratio(k[j].median, r.ours[j].median))
        })
    };
    for (j, head) in [
        (0, "creating a new key, ns per call"),
        (2, "looking up an existing key, ns per call"),
    ] {
        line(String::new());
        line(format!(
            "{head:<42} {:>21} {:>21} {:>12}",
            "ipcns", "kernel", "kernel/ipcns"
        ));
        for r in rows {
            line(format!(
                "  {:<40} {:>21} {:>21} {:>12}",
                keys_text(r.keys),
                cell(r.per_call(&r.ours, j)),
                kcell(r, j),
                rat(r, j)
            ));
        }
    }
    line(String::new());
    line(format!(
        "{:<42} {:>21} {:>21}",
        "the slowest single creation, µs", "ipcns", "kernel"
    ));
    for r in rows {
        let us = |x: Spread| {
            let x = x.scaled(1e-3);
            format!("{:.1} ({})", x.median, x.range(1))
        };
        line(format!(
            "  {:<40} {:>21} {:>21}",
            keys_text(r.keys),
            us(r.ours[1]),
            r.kernel.map_or("-".to_string(), |k| us(k[1]))
        ));
    }
    line(format!(
        "  (a lookup pass is repeated until {} calls are made, its time averaged over the passes)",
        lookups()
    ));
    line(String::new());
    line(format!(
        "arena bytes per object: a set of one semaphore {:.0} (private) and {:.0} (with a key);",
        bytes[0], bytes[1]
    ));
    line(format!(
        "  an empty queue {:.0} (private) and {:.0} (with a key)",
        bytes[2], bytes[3]
    ));
    if !goals.is_empty() {
        line(String::new());
    }
    for (name, got, limit, met) in goals {
        line(format!(
            "goal: {name}: {got:.2} (limit {limit}) {}",
            if *met { "MET" } else { "NOT MET" }
        ));
    }
    s
}

/// `1 key`, `N keys`.
fn keys_text(n: u32) -> String {
    if n == 1 {
        "1 key".to_string()
    } else {
        format!("{n} keys")
    }
}

/// `--plot`'s charts: ns per call of creation and of lookup against the
/// number of keys, ipcns beside the kernel.
fn charts(rows: &[Row]) -> Vec<Chart> {
    let series = |j: usize| {
        let mut v = vec![Series {
            name: "ipcns".to_string(),
            points: rows
                .iter()
                .map(|r| (f64::from(r.keys), r.per_call(&r.ours, j).median))
                .collect(),
        }];
        if rows.iter().all(|r| r.kernel.is_some()) {
            v.push(Series {
                name: "kernel".to_string(),
                points: rows
                    .iter()
                    .filter_map(|r| Some((f64::from(r.keys), r.per_call(&r.kernel?, j).median)))
                    .collect(),
            });
        }
        v
    };
    let chart = |j: usize, title: &str| Chart {
        title: title.to_string(),
        x_label: "keys in the namespace".to_string(),
        x_log: true,
        y_label: "ns per semget call (median)".to_string(),
        y_log: true,
        series: series(j),
    };
    vec![
        chart(2, "semget of an existing key (lookup)"),
        chart(0, "semget of a new key (creation)"),
    ]
}
