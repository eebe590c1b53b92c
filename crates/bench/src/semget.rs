//! `ipcns bench semget`: seed 001's table. For KEYS keys, the loop
//! `semget(k++, 1, IPC_CREAT | 0600)` from 0x424242 in a fresh namespace
//! (creation: total and largest single call), then the same loop again
//! (lookup only: every key exists; one pass's time, averaged over as many
//! passes as make 300000 calls), for ipcns and for the host kernel in a
//! fresh IPC namespace, in one run, medians of several rounds. Then the
//! arena bytes one semaphore set of one semaphore, and one empty queue,
//! cost.

use super::TempNs;
use super::plot::Chart;
use super::progress::{self, Progress};
use super::stats::{json_num, median, ratio};
use anyhow::{Context, bail};
use ipcns::Namespace;
use ipcns::abi::IPC_CREAT;
use ipcns_oracle::sysv::SysV;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The hidden subcommand that measures the kernel in a new IPC namespace.
pub const KERNEL_CHILD: &str = "__semget-kernel-child";

const KEYS: [u32; 7] = [1, 10, 32, 100, 1000, 10000, 31900];
const FIRST_KEY: i32 = 0x424242;
const ROUNDS: usize = 5;

/// Lookups timed per round at least: the lookup pass is repeated until
/// this many calls were made, and its time averaged over the passes (one
/// pass over a few keys is shorter than the clock's own cost).
const LOOKUPS: u32 = 300_000;

/// One round: (create total ns, largest create ns, lookup total ns: one
/// pass over the keys, averaged over `LOOKUPS / keys` passes).
fn run_loops(s: &dyn SysV, keys: u32) -> anyhow::Result<(f64, f64, f64)> {
    let mut max = 0u128;
    let t = Instant::now();
    for i in 0..keys as i32 {
        let c = Instant::now();
        s.semget(FIRST_KEY + i, 1, IPC_CREAT | 0o600)
            .with_context(|| format!("semget #{i}"))?;
        max = max.max(c.elapsed().as_nanos());
    }
    let create = t.elapsed().as_nanos() as f64;
    let passes = (LOOKUPS / keys.max(1)).max(1);
    let t = Instant::now();
    for _ in 0..passes {
        for i in 0..keys as i32 {
            s.semget(FIRST_KEY + i, 1, IPC_CREAT | 0o600)?;
        }
    }
    let lookup = t.elapsed().as_nanos() as f64 / f64::from(passes);
    Ok((create, max as f64, lookup))
}

/// The child half: enter a fresh IPC namespace, run the loops, print the
/// three numbers.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    let [keys] = args else {
        bail!("usage: ipcns bench {KERNEL_CHILD} KEYS");
    };
    ipcns_oracle::kernel::unshare_ipc().context("unshare(CLONE_NEWIPC) needs root")?;
    let (c, m, l) = run_loops(&ipcns_oracle::kernel::Host, keys.parse()?)?;
    println!("{c} {m} {l}");
    Ok(())
}

fn kernel_round(keys: u32) -> anyhow::Result<(f64, f64, f64)> {
    let out = Command::new(std::env::current_exe()?)
        .args([KERNEL_CHILD, &keys.to_string()])
        .stderr(Stdio::piped())
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let [c, m, l] = v[..] else {
        bail!("kernel child said {text:?}");
    };
    Ok((c, m, l))
}

fn ipcns_round(keys: u32) -> anyhow::Result<(f64, f64, f64)> {
    let t = TempNs::new("semget", 256 << 20, false)?;
    let cred = (*t.ns.cred()?).clone();
    run_loops(&ipcns_oracle::sysv::NsCaller { ns: &t.ns, cred }, keys)
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

struct Row {
    keys: u32,
    ours: [f64; 3],
    kernel: Option<[f64; 3]>,
}

pub fn run(opts: &crate::Options) -> anyhow::Result<Vec<Chart>> {
    let json = opts.json;
    let mut rows = Vec::new();
    let mut kernel_note = None;
    let mut progress = Progress::new("semget", KEYS.len() * ROUNDS);
    for (i, keys) in KEYS.into_iter().enumerate() {
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
                    Ok((c, m, l)) => {
                        kern[0].push(c);
                        kern[1].push(m);
                        kern[2].push(l);
                    }
                    Err(e) => kernel_note = Some(format!("{e:#}")),
                }
            }
        }
        let med = |v: &mut [Vec<f64>; 3]| [median(&mut v[0]), median(&mut v[1]), median(&mut v[2])];
        rows.push(Row {
            keys,
            ours: med(&mut ours),
            kernel: (kern[0].len() == ROUNDS).then(|| med(&mut kern)),
        });
    }
    progress.clear();
    let (sem_private, sem_keyed) =
        bytes_per(1000, |ns, c, key| ns.semget(c, key, 1, IPC_CREAT | 0o600))?;
    let (msg_private, msg_keyed) =
        bytes_per(1000, |ns, c, key| ns.msgget(c, key, IPC_CREAT | 0o600))?;
    let per_call = |total: f64, keys: u32| total / f64::from(keys);
    let row = |k: u32| rows.iter().find(|r| r.keys == k).expect("measured");
    let mut goals: Vec<(String, f64, f64, bool)> = Vec::new();
    for r in &rows {
        if let Some(k) = r.kernel {
            let speedup = ratio(k[2], r.ours[2]);
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
    let flat = ratio(
        per_call(row(31900).ours[2], 31900),
        per_call(row(100).ours[2], 100),
    );
    goals.push((
        "per-call lookup at 31900 keys <= 1.5x at 100 keys".to_string(),
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
    if json {
        let mut s = String::from("{\"bench\":\"semget\",\"unit\":\"us\",\"rows\":[");
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let k = |j: usize| {
                r.kernel
                    .map_or("null".to_string(), |k| json_num(k[j] / 1000.0))
            };
            s.push_str(&format!(
                "{{\"keys\":{},\"ipcns_create\":{},\"ipcns_max_call\":{},\"ipcns_lookup\":{},\"kernel_create\":{},\"kernel_max_call\":{},\"kernel_lookup\":{}}}",
                r.keys,
                json_num(r.ours[0] / 1000.0),
                json_num(r.ours[1] / 1000.0),
                json_num(r.ours[2] / 1000.0),
                k(0),
                k(1),
                k(2)
            ));
        }
        s.push_str("],\"goals\":[");
        for (i, (name, got, limit, met)) in goals.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "{{\"goal\":{name:?},\"value\":{},\"limit\":{limit},\"met\":{met}}}",
                json_num(*got)
            ));
        }
        s.push(']');
        if let Some(n) = &kernel_note {
            s.push_str(&format!(",\"kernel_skipped\":{n:?}"));
        }
        s.push('}');
        println!("{s}");
        return Ok(charts(&rows));
    }
    println!(
        "ipcns bench semget: the loop semget(k++, 1, IPC_CREAT|0600) over KEYS keys in a fresh namespace,"
    );
    println!(
        "then again with every key present (lookup only: one pass, averaged over {LOOKUPS} calls); microseconds, median of {ROUNDS} rounds"
    );
    println!();
    println!(
        "{:>6} | {:>10} {:>10} {:>7} | {:>8} {:>8} | {:>10} {:>10} {:>7} | {:>8} {:>8} {:>7}",
        "KEYS", "create", "", "", "max call", "", "lookup", "", "", "ns/call", "", ""
    );
    println!(
        "{:>6} | {:>10} {:>10} {:>7} | {:>8} {:>8} | {:>10} {:>10} {:>7} | {:>8} {:>8} {:>7}",
        "",
        "ipcns",
        "kernel",
        "k/i",
        "ipcns",
        "kernel",
        "ipcns",
        "kernel",
        "k/i",
        "ipcns",
        "kernel",
        "k/i"
    );
    for r in &rows {
        let us = |x: f64| format!("{:.1}", x / 1000.0);
        let (kc, km, kl, kpc) = match r.kernel {
            Some(k) => (
                us(k[0]),
                us(k[1]),
                us(k[2]),
                format!("{:.0}", per_call(k[2], r.keys)),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let rat = |j: usize| {
            r.kernel.map_or("-".to_string(), |k| {
                format!("{:.1}x", ratio(k[j], r.ours[j]))
            })
        };
        println!(
            "{:>6} | {:>10} {:>10} {:>7} | {:>8} {:>8} | {:>10} {:>10} {:>7} | {:>8.0} {:>8} {:>7}",
            r.keys,
            us(r.ours[0]),
            kc,
            rat(0),
            us(r.ours[1]),
            km,
            us(r.ours[2]),
            kl,
            rat(2),
            per_call(r.ours[2], r.keys),
            kpc,
            rat(2)
        );
    }
    if let Some(n) = &kernel_note {
        println!("kernel columns skipped: {n}");
    }
    if opts.goals {
        println!();
        for (name, got, limit, met) in &goals {
            println!(
                "goal: {name}: {got:.2} (limit {limit}) {}",
                if *met { "MET" } else { "NOT MET" }
            );
        }
    }
    Ok(charts(&rows))
}

/// `--plot`'s charts: per-call creation and lookup against the keys.
fn charts(_rows: &[Row]) -> Vec<Chart> {
    Vec::new()
}
