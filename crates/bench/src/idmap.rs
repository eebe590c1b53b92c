//! `ipcns bench idmap`: seed 003's table. For N extents laid out so that
//! the looked-up id is in the last extent searched, ns per lookup down and
//! up for ipcns (`IdMap`), a linear scan of the same extents, and the
//! kernel's own algorithm (binary search with a comparison callback), all in
//! one run; and the host kernel's cost measured as the seed did: mean
//! `fstat` of cached files owned by a mapped id, from inside a child user
//! namespace with N extents, 1000 files.

use super::progress::Progress;
use super::stats::{Spread, json_num, ns_per_iter, ratio};
use super::sys::{align_next_loop, fstat_uid};
use anyhow::{Context, bail};
use ipcns_idmap::baseline::{KernelSortedMap, LinearMap};
use ipcns_idmap::proc::{Pid, Setgroups, write_maps};
use ipcns_idmap::{Extent, IdMap};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The hidden subcommand the kernel measurement runs in the new namespace.
pub const KERNEL_CHILD: &str = "__idmap-kernel-child";

const SIZES: [usize; 11] = [0, 1, 2, 3, 5, 10, 50, 100, 200, 300, 340];
const FILES: usize = 1000;
/// Extents of 2 ids, back to back: small numbers, so that even 340 of them
/// fit the kernel's single write of under 4096 bytes.
const STRIDE: u32 = 2;
const LOWER_BASE: u32 = 1000;
const ROUNDS: usize = 11;
const ITERS: u64 = 1_000_000;

/// N extents of 2 ids: inside `2i..`, outside `1000 + 2i..`,
/// written in ascending order so that the last one written (the last a
/// linear scan reaches, and the last in both sorted arrays) holds the ids
/// looked up.
fn layout(n: usize) -> IdMap {
    let v: Vec<Extent> = (0..n as u32)
        .map(|i| Extent::new(i * STRIDE, LOWER_BASE + i * STRIDE, STRIDE))
        .collect();
    IdMap::new(&v).expect("bench layout is a valid map")
}

/// The ids looked up: inside the last extent (or where it would be, for N = 0).
fn probe(n: usize) -> (u32, u32) {
    let last = n.saturating_sub(1) as u32;
    (last * STRIDE + 1, LOWER_BASE + last * STRIDE + 1)
}

/// One row's ns per lookup (down, up): median and spread of the rounds.
struct Row {
    n: usize,
    ipcns: (Spread, Spread),
    linear: (Spread, Spread),
    bsearch: (Spread, Spread),
    kernel: Option<Spread>,
}

fn time_lookup(f: impl Fn(u32) -> Option<u32>, id: u32) -> Spread {
    ns_per_iter(ROUNDS, ITERS, |iters| {
        let mut acc = 0u32;
        // Every row's loop starts on a 64-byte boundary (see sys.rs).
        align_next_loop();
        for _ in 0..iters {
            acc ^= f(black_box(id)).unwrap_or(1);
        }
        black_box(acc);
    })
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let kernel = KernelBench::new();
    let mut kernel_note = None;
    let mut rows = Vec::new();
    let mut progress = Progress::new("idmap", SIZES.len());
    for (i, n) in SIZES.into_iter().enumerate() {
        progress.step(i, &format!("an id map of {n} extents"));
        let map = layout(n);
        let lin = LinearMap::new(&map);
        let ker = KernelSortedMap::new(&map);
        let (down, up) = probe(n);
        if n > 0 {
            // The layout must really put the probes where the table says.
            anyhow::ensure!(map.map_down(down) == Some(up) && map.map_up(up) == Some(down));
        }
        let row_kernel = match &kernel {
            Ok(k) => match k.measure(&map, up) {
                Ok(ns) => Some(ns),
                Err(e) => {
                    kernel_note.get_or_insert(format!("{e:#}"));
                    None
                }
            },
            Err(e) => {
                kernel_note.get_or_insert(format!("{e:#}"));
                None
            }
        };
        rows.push(Row {
            n,
            ipcns: (
                time_lookup(|id| map.map_down(id), down),
                time_lookup(|id| map.map_up(id), up),
            ),
            linear: (
                time_lookup(|id| lin.map_down(id), down),
                time_lookup(|id| lin.map_up(id), up),
            ),
            bsearch: (
                time_lookup(|id| ker.map_down(id), down),
                time_lookup(|id| ker.map_up(id), up),
            ),
            kernel: row_kernel,
        });
    }
    let get = |n: usize| rows.iter().find(|r| r.n == n).expect("size measured");
    let (r1, r340) = (get(1), get(340));
    let goals = [
        (
            "ipcns at 340 extents <= 2x ipcns at 1 (down)",
            ratio(r340.ipcns.0.median, r1.ipcns.0.median),
            2.0,
        ),
        (
            "ipcns at 340 extents <= 2x ipcns at 1 (up)",
            ratio(r340.ipcns.1.median, r1.ipcns.1.median),
            2.0,
        ),
        (
            "ipcns at 340 <= 0.7x binary search at 340 (down)",
            ratio(r340.ipcns.0.median, r340.bsearch.0.median),
            0.7,
        ),
        (
            "ipcns at 340 <= 0.7x binary search at 340 (up)",
            ratio(r340.ipcns.1.median, r340.bsearch.1.median),
            0.7,
        ),
    ];
    progress.clear();
    if opts.json {
        print_json(&rows, &goals, kernel_note.as_deref());
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        print_table(&rows, goals, kernel_note.as_deref());
    }
    Ok(())
}

fn print_table(rows: &[Row], goals: &[(&str, f64, f64)], kernel_note: Option<&str>) {
    println!(
        "ipcns bench idmap: ns per lookup, median of {ROUNDS} rounds (fastest-slowest); the id is in the last extent searched"
    );
    println!(
        "kernel: mean fstat of {FILES} cached files owned by that id, from inside a user namespace with N extents"
    );
    println!();
    println!(
        "{:>7} | {:>19} {:>19} | {:>19} {:>19} | {:>19} {:>19} | {:>7} {:>7} | {:>19} {:>9}",
        "extents",
        "ipcns",
        "",
        "linear",
        "",
        "bsearch",
        "",
        "ipcns/bsearch",
        "",
        "kernel",
        "kernel/N0"
    );
    println!(
        "{:>7} | {:>19} {:>19} | {:>19} {:>19} | {:>19} {:>19} | {:>7} {:>7} | {:>19} {:>9}",
        "", "down", "up", "down", "up", "down", "up", "down", "up", "fstat", ""
    );
    let k0 = rows.first().and_then(|r| r.kernel);
    for r in rows {
        let k = r.kernel.map_or("-".to_string(), |k| k.cell(1));
        let kr = match (r.kernel, k0) {
            (Some(k), Some(k0)) => format!("{:.2}x", k.median / k0.median),
            _ => "-".to_string(),
        };
        println!(
            "{:>7} | {:>19} {:>19} | {:>19} {:>19} | {:>19} {:>19} | {:>6.2}x {:>6.2}x | {:>19} {:>9}",
            r.n,
            r.ipcns.0.cell(2),
            r.ipcns.1.cell(2),
            r.linear.0.cell(2),
            r.linear.1.cell(2),
            r.bsearch.0.cell(2),
            r.bsearch.1.cell(2),
            ratio(r.ipcns.0.median, r.bsearch.0.median),
            ratio(r.ipcns.1.median, r.bsearch.1.median),
            k,
            kr
        );
    }
    if let Some(note) = kernel_note {
        println!("kernel column skipped: {note}");
    }
    if !goals.is_empty() {
        println!();
    }
    for (name, got, limit) in goals {
        let verdict = if *got <= *limit { "MET" } else { "NOT MET" };
        println!("goal: {name}: {got:.2}x (limit {limit}x) {verdict}");
    }
}

fn print_json(rows: &[Row], goals: &[(&str, f64, f64)], kernel_note: Option<&str>) {
    let mut s = String::from("{\"bench\":\"idmap\",\"unit\":\"ns\",\"rows\":[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"extents\":{},{},{},{},{},{},{},{}}}",
            r.n,
            r.ipcns.0.json_fields("ipcns_down"),
            r.ipcns.1.json_fields("ipcns_up"),
            r.linear.0.json_fields("linear_down"),
            r.linear.1.json_fields("linear_up"),
            r.bsearch.0.json_fields("bsearch_down"),
            r.bsearch.1.json_fields("bsearch_up"),
            r.kernel.map_or("\"kernel_fstat\":null".to_string(), |k| {
                k.json_fields("kernel_fstat")
            })
        ));
    }
    s.push_str("],\"goals\":[");
    for (i, (name, got, limit)) in goals.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"goal\":\"{name}\",\"ratio\":{},\"limit\":{limit},\"met\":{}}}",
            json_num(*got),
            got <= limit
        ));
    }
    s.push(']');
    if let Some(note) = kernel_note {
        s.push_str(&format!(",\"kernel_skipped\":{:?}", note));
    }
    s.push('}');
    println!("{s}");
}

/// The kernel measurement: files owned by the probe id in a private
/// directory, and a child of ours in a new user namespace that fstats them.
struct KernelBench {
    dir: PathBuf,
}

impl KernelBench {
    fn new() -> anyhow::Result<KernelBench> {
        let dir = std::env::temp_dir().join(format!("ipcns-bench-idmap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(KernelBench { dir })
    }

    /// Median and spread over rounds of the mean ns per fstat, inside a
    /// namespace with `map`.
    fn measure(&self, map: &IdMap, kuid: u32) -> anyhow::Result<Spread> {
        // Files owned by the probe id (uid and gid), readable by anyone.
        for i in 0..FILES {
            let p = self.dir.join(i.to_string());
            if !p.exists() {
                std::fs::write(&p, b"")?;
            }
            std::os::unix::fs::chown(&p, Some(kuid), Some(kuid))
                .context("chown needs root: the kernel measurement runs as root only")?;
        }
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.arg(KERNEL_CHILD)
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = ipcns_idmap::userns::spawn_in_new_userns(&mut cmd)
            .context("cannot create a user namespace")?;
        let pid = Pid::Id(child.id());
        let result = (|| {
            if !map.is_empty() {
                write_maps(pid, Some(map), Some(map), Setgroups::Leave)?;
            }
            let mut stdin = child.stdin.take().expect("piped");
            writeln!(stdin, "go")?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
            let said = || format!("child said {line:?}");
            let v: Vec<f64> = line
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .with_context(said)?;
            let [median, min, max] = v[..] else {
                bail!("{}", said());
            };
            anyhow::Ok(Spread { min, median, max })
        })();
        let _ = child.kill();
        let _ = child.wait();
        result
    }
}

impl Drop for KernelBench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The child half: open the files, wait for the maps, time fstat on each,
/// print the median ns per call and the fastest and slowest pass.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    let [dir] = args else {
        bail!("usage: ipcns bench {KERNEL_CHILD} DIR");
    };
    let files: Vec<std::fs::File> = (0..FILES)
        .map(|i| std::fs::File::open(Path::new(dir).join(i.to_string())))
        .collect::<Result<_, _>>()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let mut samples = Vec::with_capacity(ROUNDS * 2);
    for _ in 0..ROUNDS * 2 {
        let t = std::time::Instant::now();
        let mut acc = 0u32;
        for f in &files {
            acc ^= fstat_uid(f.as_fd())?;
        }
        black_box(acc);
        samples.push(t.elapsed().as_nanos() as f64 / FILES as f64);
    }
    let s = Spread::of(&mut samples);
    println!("{:.3} {:.3} {:.3}", s.median, s.min, s.max);
    Ok(())
}
