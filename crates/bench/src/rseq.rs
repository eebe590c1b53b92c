//! `ipcns bench rseq`: per-cpu counters and cpu-number reads with restartable
//! sequences (ipcns-rseq) beside their baselines, measured in one run, in the
//! shape of seed 004's tables: single-thread increment (sched_getcpu +
//! atomic, rseq cpu_id + atomic, rseq critical section, plain increment),
//! reading the cpu number (rseq area through a `ThreadArea`, `cpu_id()` with
//! its per-call lookup of the area, sched_getcpu, the getcpu system call, an
//! empty loop: all in one loop shape), then 2 and 4 threads (one shared
//! atomic, per-cpu atomics indexed by the rseq cpu_id, rseq per-cpu; unpinned
//! threads, each timing its own loop). Medians of several rounds; ratios and
//! goal verdicts.
//!
//! # Safety
//!
//! The `unsafe` is the raw `getcpu` system call baseline, given valid
//! pointers to locals, and the plain-increment floor on a local.

#![allow(unsafe_code)]

use super::progress::Progress;
use super::stats::{Goal, Spread, goal, json_num, ns_per_iter, ratio};
use super::sys::align_next_loop;
use ipcns_rseq::{PerCpu, PerCpuCounter};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;
const ITERS: u64 = 20_000_000;
const SYSCALL_ITERS: u64 = 1_000_000;
/// How long each round of the thread table runs.
const THREAD_RUN: Duration = Duration::from_millis(100);
const THREAD_ROUNDS: usize = 5;
/// Calls between two checks of the stop flag in the thread table.
const CHUNK: u64 = 1024;

/// ns per increment: median and spread of the rounds.
struct Single {
    getcpu_atomic: Spread,
    rseq_cpu_atomic: Spread,
    rseq_section: Spread,
    plain: Spread,
}

/// ns per read: median and spread of the rounds.
struct CpuRead {
    rseq: Spread,
    rseq_lookup: Spread,
    sched_getcpu: Spread,
    syscall: Spread,
    empty: Spread,
}

/// ns per operation per thread: median and spread of the rounds.
struct Threads {
    n: usize,
    shared: Spread,
    percpu_atomic: Spread,
    rseq: Spread,
}

fn single() -> Single {
    let cells = PerCpu::new(|_| AtomicU64::new(0));
    let getcpu_atomic = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            let cpu = ipcns_rseq::sched_getcpu() as usize % cells.len();
            cells.get(cpu).unwrap().fetch_add(1, Ordering::Relaxed);
        }
    });
    let rseq_cpu_atomic = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            let cpu = ipcns_rseq::current_cpu() as usize % cells.len();
            cells.get(cpu).unwrap().fetch_add(1, Ordering::Relaxed);
        }
    });
    let counter = PerCpuCounter::new();
    let rseq_section = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            counter.inc();
        }
    });
    let mut x = 0u64;
    let p = black_box(&mut x as *mut u64);
    let plain = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            // SAFETY: `p` points to the local `x`, alive for the loop.
            unsafe { p.write_volatile(p.read_volatile().wrapping_add(1)) };
        }
    });
    black_box(x);
    Single {
        getcpu_atomic,
        rseq_cpu_atomic,
        rseq_section,
        plain,
    }
}

fn getcpu_syscall() -> u32 {
    let mut cpu = 0u32;
    // SAFETY: getcpu(2) writes the cpu number to a valid local; node and the
    // unused cache argument may be null.
    let _ = unsafe { ipcns_sys::raw::syscall3(libc::SYS_getcpu, &raw mut cpu as usize, 0, 0) };
    cpu
}

/// `n` iterations of `black_box(read())`. Every row of the cpu-read table,
/// the empty loop included, runs this same loop, so rows differ by the read
/// only. The loop starts on a 64-byte boundary (the padding is executed once,
/// before it): on the Zen 4 this was tuned on, the same five-instruction rseq
/// read loop ran at one iteration per cycle inside one 64-byte block and at
/// one per two cycles across two, so without the alignment the ratio to the
/// empty loop depended on where the linker happened to put each loop.
#[inline(always)]
fn read_loop(n: u64, read: impl Fn() -> u32) {
    align_next_loop();
    for _ in 0..n {
        black_box(read());
    }
}

fn cpu_read() -> CpuRead {
    // The area's address, looked up once: each read is one volatile load of
    // `cpu_id` (the fallback mode has no area and reads sched_getcpu).
    let area = ipcns_rseq::ThreadArea::current();
    let rseq = ns_per_iter(ROUNDS, ITERS, |n| match area {
        Some(a) => read_loop(n, || a.cpu_id().unwrap_or(u32::MAX)),
        None => read_loop(n, ipcns_rseq::current_cpu),
    });
    let rseq_lookup = ns_per_iter(ROUNDS, ITERS, |n| {
        read_loop(n, || ipcns_rseq::cpu_id().unwrap_or(u32::MAX))
    });
    let sched_getcpu = ns_per_iter(ROUNDS, ITERS, |n| read_loop(n, ipcns_rseq::sched_getcpu));
    let syscall = ns_per_iter(ROUNDS, SYSCALL_ITERS, |n| read_loop(n, getcpu_syscall));
    let k = black_box(0u32);
    let empty = ns_per_iter(ROUNDS, ITERS, |n| read_loop(n, || k));
    CpuRead {
        rseq,
        rseq_lookup,
        sched_getcpu,
        syscall,
        empty,
    }
}

/// One thread's timed loop: `op(data)` in chunks of [`CHUNK`] calls until
/// `stop`. Returns when it started and ended, and the calls made. Not
/// inlined, so that every column's loop gets its data the same way, as a `&T`
/// argument (the single-thread rows run on a local): fields that nothing
/// writes (the counter's slot descriptor, the per-cpu array's base and
/// length) may stay in registers.
#[inline(never)]
fn timed_loop<T: Sync>(data: &T, op: impl Fn(&T), stop: &AtomicBool) -> Span {
    let start = Instant::now();
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..CHUNK {
            op(data);
        }
        ops += CHUNK;
    }
    Span {
        start,
        end: Instant::now(),
        ops,
    }
}

struct Span {
    start: Instant,
    end: Instant,
    ops: u64,
}

/// Median over rounds of ns per operation per thread (wall time / the mean
/// operations of one thread), with `n` fresh, unpinned threads calling
/// `op(data)` for [`THREAD_RUN`]. Each thread times its own loop, after a
/// start barrier; the wall time runs from the first start to the last end,
/// so neither the main thread (asleep, then blocked in `join`) nor thread
/// start-up is in it, and the run is long enough for the scheduler to have
/// spread the threads over the cpus. Returns the median and the operations
/// made, first uses included.
fn threaded<T: Sync>(n: usize, data: &T, op: impl Fn(&T) + Send + Sync + Copy) -> (Spread, u64) {
    let mut samples = Vec::with_capacity(THREAD_ROUNDS);
    let mut total = 0;
    for _ in 0..THREAD_ROUNDS {
        let ready = AtomicUsize::new(0);
        // Read by every thread between chunks: alone in its line, so that
        // the read stays a hit until the store that ends the round.
        let stop = CachePadded(AtomicBool::new(false));
        let spans: Vec<Span> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let (ready, stop) = (&ready, &stop.0);
                    s.spawn(move || {
                        op(data); // first use on this thread (registration) outside the timing
                        ready.fetch_add(1, Ordering::AcqRel);
                        while ready.load(Ordering::Acquire) < n {
                            std::thread::yield_now();
                        }
                        timed_loop(data, op, stop)
                    })
                })
                .collect();
            std::thread::sleep(THREAD_RUN);
            stop.0.store(true, Ordering::Relaxed);
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let first = spans.iter().map(|s| s.start).min().expect("n > 0");
        let last = spans.iter().map(|s| s.end).max().expect("n > 0");
        let ops: u64 = spans.iter().map(|s| s.ops).sum();
        total += ops + n as u64;
        let per_thread = ops as f64 / n as f64;
        samples.push((last - first).as_nanos() as f64 / per_thread);
    }
    (Spread::of(&mut samples), total)
}

fn threads(n: usize) -> anyhow::Result<Threads> {
    let shared_cell = CachePadded(AtomicU64::new(0));
    let (shared, shared_ops) = threaded(n, &shared_cell, |c| {
        c.0.fetch_add(1, Ordering::Relaxed);
    });
    let cells = PerCpu::new(|_| AtomicU64::new(0));
    let (percpu_atomic, _) = threaded(n, &cells, |c| {
        let cpu = ipcns_rseq::current_cpu() as usize % c.len();
        c.get(cpu).unwrap().fetch_add(1, Ordering::Relaxed);
    });
    let counter = PerCpuCounter::new();
    let (rseq, rseq_ops) = threaded(n, &counter, |c| c.inc());
    anyhow::ensure!(
        counter.sum() == rseq_ops as i64,
        "rseq counter {} != {rseq_ops}",
        counter.sum()
    );
    anyhow::ensure!(
        shared_cell.0.load(Ordering::Relaxed) == shared_ops,
        "shared counter lost updates"
    );
    Ok(Threads {
        n,
        shared,
        percpu_atomic,
        rseq,
    })
}

/// A value in a cache line of its own (the shared counter, the stop flag:
/// nothing else on the stack shares their lines).
#[repr(align(64))]
struct CachePadded<T>(T);

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let info = ipcns_rseq::info();
    let mut progress = Progress::new("rseq", 4);
    progress.step(0, &format!("per-cpu increments, {ROUNDS} rounds each"));
    let s = single();
    progress.step(1, &format!("cpu number reads, {ROUNDS} rounds each"));
    let r = cpu_read();
    progress.step(2, &format!("2 threads, {THREAD_ROUNDS} rounds"));
    let t2 = threads(2)?;
    progress.step(3, &format!("4 threads, {THREAD_ROUNDS} rounds"));
    let t = [t2, threads(4)?];
    progress.clear();

    let mut goals = vec![
        goal(
            "rseq increment >= 7x faster than sched_getcpu+atomic",
            ratio(s.getcpu_atomic.median, s.rseq_section.median),
            ratio(s.getcpu_atomic.median, s.rseq_section.median) >= 7.0,
        ),
        goal(
            "rseq increment <= 3x the plain increment",
            ratio(s.rseq_section.median, s.plain.median),
            ratio(s.rseq_section.median, s.plain.median) <= 3.0,
        ),
    ];
    for th in &t {
        let x = ratio(th.shared.median, th.rseq.median);
        let text = format!(
            "{} threads: rseq per-cpu >= 10x faster than one shared atomic",
            th.n
        );
        goals.push(goal(&text, x, x >= 10.0));
    }
    let x = ratio(r.rseq.median, r.empty.median);
    goals.push(goal(
        "reading the cpu number from rseq <= 2x the empty loop",
        x,
        x <= 2.0,
    ));

    if opts.json {
        print_json(&info, &s, &r, &t, &goals);
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        print_table(&info, &s, &r, &t, goals);
    }
    Ok(())
}

fn print_table(info: &ipcns_rseq::Info, s: &Single, r: &CpuRead, t: &[Threads], goals: &[Goal]) {
    println!(
        "ipcns bench rseq: mode {} (registered {} bytes, kernel feature size {}), {} possible cpus, medians of {ROUNDS} rounds (fastest-slowest)",
        info.mode,
        info.registered_size,
        info.feature_size,
        ipcns_rseq::possible_cpus()
    );
    println!();
    println!(
        "{:<48} {:>19} {:>14}",
        "per-cpu counter increment, single thread", "ns/op", "speedup (rseq)"
    );
    for (name, v) in [
        ("sched_getcpu + atomic", s.getcpu_atomic),
        ("rseq cpu_id + atomic", s.rseq_cpu_atomic),
        ("rseq critical section (ipcns)", s.rseq_section),
        ("plain non-atomic increment (floor)", s.plain),
    ] {
        println!(
            "  {name:<46} {:>19} {:>13.1}x",
            v.cell(2),
            ratio(v.median, s.rseq_section.median)
        );
    }
    println!();
    println!(
        "{:<48} {:>19} {:>14}",
        "reading the cpu number", "ns/op", "x empty loop"
    );
    for (name, v) in [
        ("rseq cpu_id (ipcns ThreadArea, one load)", r.rseq),
        (
            "rseq cpu_id() (ipcns, area looked up per call)",
            r.rseq_lookup,
        ),
        ("sched_getcpu (glibc, vDSO)", r.sched_getcpu),
        ("getcpu system call", r.syscall),
        ("empty loop", r.empty),
    ] {
        println!(
            "  {name:<46} {:>19} {:>13.1}x",
            v.cell(2),
            ratio(v.median, r.empty.median)
        );
    }
    println!();
    println!(
        "{:<10} {:>19} {:>19} {:>22} {:>12}",
        "threads", "shared atomic", "per-cpu atomics", "rseq per-cpu (ipcns)", "shared/rseq"
    );
    for th in t {
        println!(
            "  {:<8} {:>19} {:>19} {:>22} {:>11.1}x",
            th.n,
            th.shared.cell(2),
            th.percpu_atomic.cell(2),
            th.rseq.cell(2),
            ratio(th.shared.median, th.rseq.median)
        );
    }
    println!("  (ns per operation per thread: wall time / operations of one thread)");
    if !goals.is_empty() {
        println!();
    }
    for g in goals {
        println!("{}", g.line());
    }
}

fn print_json(info: &ipcns_rseq::Info, s: &Single, r: &CpuRead, t: &[Threads], goals: &[Goal]) {
    let threads: Vec<String> = t
        .iter()
        .map(|th| {
            format!(
                "{{\"threads\":{},{},{},{},\"shared_over_rseq\":{}}}",
                th.n,
                th.shared.json_fields("shared_atomic_ns"),
                th.percpu_atomic.json_fields("percpu_atomic_ns"),
                th.rseq.json_fields("rseq_ns"),
                json_num(ratio(th.shared.median, th.rseq.median))
            )
        })
        .collect();
    let goals: Vec<String> = goals.iter().map(Goal::json).collect();
    println!(
        "{{\"bench\":\"rseq\",\"mode\":\"{}\",\"registered_size\":{},\"feature_size\":{},\"possible_cpus\":{},\"rounds\":{ROUNDS},\
\"increment_ns\":{{{},{},{},{}}},\
\"cpu_read_ns\":{{{},{},{},{},{}}},\
\"threads\":[{}],\"goals\":[{}]}}",
        info.mode,
        info.registered_size,
        info.feature_size,
        ipcns_rseq::possible_cpus(),
        s.getcpu_atomic.json_fields("sched_getcpu_atomic"),
        s.rseq_cpu_atomic.json_fields("rseq_cpu_id_atomic"),
        s.rseq_section.json_fields("rseq_section"),
        s.plain.json_fields("plain"),
        r.rseq.json_fields("rseq"),
        r.rseq_lookup.json_fields("rseq_lookup"),
        r.sched_getcpu.json_fields("sched_getcpu"),
        r.syscall.json_fields("getcpu_syscall"),
        r.empty.json_fields("empty_loop"),
        threads.join(","),
        goals.join(",")
    );
}
