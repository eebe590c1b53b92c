//! `ipcns bench rseq`: per-cpu counters and cpu-number reads with restartable
//! sequences (ipcns-rseq) beside their baselines, measured in one run, in the
//! shape of seed 004's tables: single-thread increment (sched_getcpu +
//! atomic, rseq cpu_id + atomic, rseq critical section, plain increment),
//! reading the cpu number (rseq area, sched_getcpu, the getcpu system call,
//! an empty loop), then 2 and 4 threads (one shared atomic, per-cpu atomics,
//! rseq per-cpu). Medians of several rounds; ratios and goal verdicts.
//!
//! # Safety
//!
//! The only `unsafe` is the raw `getcpu` system call baseline, given valid
//! pointers to locals.

#![allow(unsafe_code)]

use super::stats::{json_num, median, ns_per_iter, ratio};
use ipcns_rseq::{PerCpu, PerCpuCounter};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

const ROUNDS: usize = 7;
const ITERS: u64 = 20_000_000;
const SYSCALL_ITERS: u64 = 1_000_000;
const THREAD_ITERS: u64 = 4_000_000;
const THREAD_ROUNDS: usize = 5;

struct Single {
    getcpu_atomic: f64,
    rseq_cpu_atomic: f64,
    rseq_section: f64,
    plain: f64,
}

struct CpuRead {
    rseq: f64,
    sched_getcpu: f64,
    syscall: f64,
    empty: f64,
}

struct Threads {
    n: usize,
    shared: f64,
    percpu_atomic: f64,
    rseq: f64,
}

struct Goal {
    text: String,
    value: f64,
    met: bool,
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
    unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut u32,
            core::ptr::null_mut::<u32>(),
            core::ptr::null_mut::<u8>(),
        )
    };
    cpu
}

fn cpu_read() -> CpuRead {
    let rseq = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            black_box(ipcns_rseq::cpu_id());
        }
    });
    let sched_getcpu = ns_per_iter(ROUNDS, ITERS, |n| {
        for _ in 0..n {
            black_box(ipcns_rseq::sched_getcpu());
        }
    });
    let syscall = ns_per_iter(ROUNDS, SYSCALL_ITERS, |n| {
        for _ in 0..n {
            black_box(getcpu_syscall());
        }
    });
    let empty = ns_per_iter(ROUNDS, ITERS, |n| {
        for i in 0..n {
            black_box(i);
        }
    });
    CpuRead {
        rseq,
        sched_getcpu,
        syscall,
        empty,
    }
}

/// Median over rounds of wall time / ops per thread, with `n` threads each
/// running `op` THREAD_ITERS times.
fn threaded(n: usize, op: impl Fn() + Sync + Send + Clone + 'static) -> f64 {
    let mut samples = Vec::with_capacity(THREAD_ROUNDS);
    for _ in 0..THREAD_ROUNDS {
        let start = Arc::new(Barrier::new(n + 1));
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (start, op) = (start.clone(), op.clone());
                std::thread::spawn(move || {
                    op(); // first use on this thread (registration) outside the timing
                    start.wait();
                    for _ in 0..THREAD_ITERS {
                        op();
                    }
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        hs.into_iter().for_each(|h| h.join().unwrap());
        samples.push(t.elapsed().as_nanos() as f64 / THREAD_ITERS as f64);
    }
    median(&mut samples)
}

fn threads(n: usize) -> anyhow::Result<Threads> {
    let shared_cell = Arc::new(AtomicU64::new(0));
    let s = shared_cell.clone();
    let shared = threaded(n, move || {
        s.fetch_add(1, Ordering::Relaxed);
    });
    let cells = Arc::new(PerCpu::new(|_| AtomicU64::new(0)));
    let c = cells.clone();
    let percpu_atomic = threaded(n, move || {
        let cpu = ipcns_rseq::sched_getcpu() as usize % c.len();
        c.get(cpu).unwrap().fetch_add(1, Ordering::Relaxed);
    });
    let counter = Arc::new(PerCpuCounter::new());
    let k = counter.clone();
    let rseq = threaded(n, move || k.inc());
    let want = (THREAD_ROUNDS as u64 * n as u64 * (THREAD_ITERS + 1)) as i64;
    anyhow::ensure!(
        counter.sum() == want,
        "rseq counter {} != {want}",
        counter.sum()
    );
    anyhow::ensure!(
        shared_cell.load(Ordering::Relaxed) as i64 == want,
        "shared counter lost updates"
    );
    Ok(Threads {
        n,
        shared,
        percpu_atomic,
        rseq,
    })
}

fn goal(text: &str, value: f64, met: bool) -> Goal {
    Goal {
        text: text.to_string(),
        value,
        met,
    }
}

pub fn run(json: bool) -> anyhow::Result<()> {
    let info = ipcns_rseq::info();
    let s = single();
    let r = cpu_read();
    let t = [threads(2)?, threads(4)?];

    let mut goals = vec![
        goal(
            "rseq increment >= 7x faster than sched_getcpu+atomic",
            ratio(s.getcpu_atomic, s.rseq_section),
            ratio(s.getcpu_atomic, s.rseq_section) >= 7.0,
        ),
        goal(
            "rseq increment <= 3x the plain increment",
            ratio(s.rseq_section, s.plain),
            ratio(s.rseq_section, s.plain) <= 3.0,
        ),
    ];
    for th in &t {
        let x = ratio(th.shared, th.rseq);
        let text = format!(
            "{} threads: rseq per-cpu >= 10x faster than one shared atomic",
            th.n
        );
        goals.push(goal(&text, x, x >= 10.0));
    }
    let x = ratio(r.rseq, r.empty);
    goals.push(goal(
        "reading the cpu number from rseq <= 2x the empty loop",
        x,
        x <= 2.0,
    ));

    if json {
        print_json(&info, &s, &r, &t, &goals);
    } else {
        print_table(&info, &s, &r, &t, &goals);
    }
    Ok(())
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "NOT MET" }
}

fn print_table(info: &ipcns_rseq::Info, s: &Single, r: &CpuRead, t: &[Threads], goals: &[Goal]) {
    println!(
        "ipcns bench rseq: mode {} (registered {} bytes, kernel feature size {}), {} possible cpus, medians of {ROUNDS} rounds",
        info.mode,
        info.registered_size,
        info.feature_size,
        ipcns_rseq::possible_cpus()
    );
    println!();
    println!(
        "{:<48} {:>9} {:>14}",
        "per-cpu counter increment, single thread", "ns/op", "speedup (rseq)"
    );
    for (name, v) in [
        ("sched_getcpu + atomic", s.getcpu_atomic),
        ("rseq cpu_id + atomic", s.rseq_cpu_atomic),
        ("rseq critical section (ipcns)", s.rseq_section),
        ("plain non-atomic increment (floor)", s.plain),
    ] {
        println!("  {name:<46} {v:>9.2} {:>13.1}x", ratio(v, s.rseq_section));
    }
    println!();
    println!(
        "{:<48} {:>9} {:>14}",
        "reading the cpu number", "ns/op", "x empty loop"
    );
    for (name, v) in [
        ("rseq cpu_id (ipcns)", r.rseq),
        ("sched_getcpu (glibc, vDSO)", r.sched_getcpu),
        ("getcpu system call", r.syscall),
        ("empty loop", r.empty),
    ] {
        println!("  {name:<46} {v:>9.2} {:>13.1}x", ratio(v, r.empty));
    }
    println!();
    println!(
        "{:<10} {:>15} {:>17} {:>22} {:>12}",
        "threads", "shared atomic", "per-cpu atomics", "rseq per-cpu (ipcns)", "shared/rseq"
    );
    for th in t {
        println!(
            "  {:<8} {:>15.2} {:>17.2} {:>22.2} {:>11.1}x",
            th.n,
            th.shared,
            th.percpu_atomic,
            th.rseq,
            ratio(th.shared, th.rseq)
        );
    }
    println!("  (ns per operation per thread: wall time / operations of one thread)");
    println!();
    for g in goals {
        println!("goal: {}: {:.2}x {}", g.text, g.value, verdict(g.met));
    }
}

fn print_json(info: &ipcns_rseq::Info, s: &Single, r: &CpuRead, t: &[Threads], goals: &[Goal]) {
    let threads: Vec<String> = t
        .iter()
        .map(|th| {
            format!(
                "{{\"threads\":{},\"shared_atomic_ns\":{},\"percpu_atomic_ns\":{},\"rseq_ns\":{},\"shared_over_rseq\":{}}}",
                th.n,
                json_num(th.shared),
                json_num(th.percpu_atomic),
                json_num(th.rseq),
                json_num(ratio(th.shared, th.rseq))
            )
        })
        .collect();
    let goals: Vec<String> = goals
        .iter()
        .map(|g| {
            format!(
                "{{\"goal\":\"{}\",\"value\":{},\"met\":{}}}",
                g.text,
                json_num(g.value),
                g.met
            )
        })
        .collect();
    println!(
        "{{\"bench\":\"rseq\",\"mode\":\"{}\",\"registered_size\":{},\"feature_size\":{},\"possible_cpus\":{},\"rounds\":{ROUNDS},\
\"increment_ns\":{{\"sched_getcpu_atomic\":{},\"rseq_cpu_id_atomic\":{},\"rseq_section\":{},\"plain\":{}}},\
\"cpu_read_ns\":{{\"rseq\":{},\"sched_getcpu\":{},\"getcpu_syscall\":{},\"empty_loop\":{}}},\
\"threads\":[{}],\"goals\":[{}]}}",
        info.mode,
        info.registered_size,
        info.feature_size,
        ipcns_rseq::possible_cpus(),
        json_num(s.getcpu_atomic),
        json_num(s.rseq_cpu_atomic),
        json_num(s.rseq_section),
        json_num(s.plain),
        json_num(r.rseq),
        json_num(r.sched_getcpu),
        json_num(r.syscall),
        json_num(r.empty),
        threads.join(","),
        goals.join(",")
    );
}
