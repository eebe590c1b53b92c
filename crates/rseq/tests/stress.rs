//! Exact totals under stress, in all three modes: more threads than cpus,
//! threads moved between cpus, a storm of signals whose handler also
//! increments, and a fork in the middle whose child adds into the same
//! (shared) counter.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::{Index, Outcome, PerCpu, PerCpuCounter, ops};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};

const PER_THREAD: u64 = 1_000_000;
const CHILD_ADDS: u64 = 50_000;

static COUNTER: AtomicPtr<PerCpuCounter> = AtomicPtr::new(core::ptr::null_mut());
static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: i32) {
    let c = COUNTER.load(Ordering::Acquire);
    if !c.is_null() {
        // SAFETY: the counter outlives the signal storm (cleared before drop).
        unsafe { &*c }.add(1);
        HANDLED.fetch_add(1, Ordering::Relaxed);
    }
}

fn stress_scenario() {
    let shm = Shared::anon(PerCpuCounter::bytes());
    let cells =
        unsafe { PerCpu::<AtomicU64>::from_raw(shm.ptr.cast(), ipcns_rseq::possible_cpus()) };
    let counter = Arc::new(PerCpuCounter::from_cells(cells));
    HANDLED.store(0, Ordering::Relaxed);
    COUNTER.store(Arc::as_ptr(&counter) as *mut _, Ordering::Release);
    on_signal(libc::SIGUSR1, on_usr1);

    let threads = 2 * ipcns_rseq::possible_cpus() + 2;
    let tids: Arc<Vec<AtomicI32>> = Arc::new((0..threads).map(|_| AtomicI32::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(std::sync::Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let (c, tids, started) = (counter.clone(), tids.clone(), started.clone());
            std::thread::spawn(move || {
                c.add(1); // first use registers outside any signal handler
                tids[i].store(gettid(), Ordering::Release);
                started.wait();
                for _ in 1..PER_THREAD {
                    c.inc();
                }
            })
        })
        .collect();
    counter.add(1); // initialise the main thread before forking
    started.wait();

    // Migrate and signal the workers until they are done.
    let storm = {
        let (tids, done) = (tids.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let (mut signals, mut moves) = (0u64, 0u64);
            while !done.load(Ordering::Acquire) || signals < 200 {
                let tid = tids[(rng.next() % tids.len() as u64) as usize].load(Ordering::Acquire);
                if rng.next().is_multiple_of(4) {
                    let cpu = (rng.next() % 3) as usize;
                    set_affinity(tid, (cpu < 2).then_some(cpu));
                    moves += 1;
                } else if !done.load(Ordering::Acquire) {
                    tgkill(tid, libc::SIGUSR1);
                    signals += 1;
                } else {
                    tgkill(common::gettid(), libc::SIGUSR1); // ourselves once workers are gone
                    signals += 1;
                }
            }
            (signals, moves)
        })
    };

    // Fork in the middle: the child adds into the same shared counter.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        for _ in 0..CHILD_ADDS {
            counter.inc();
        }
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );

    workers.into_iter().for_each(|w| w.join().unwrap());
    done.store(true, Ordering::Release);
    let (signals, moves) = storm.join().unwrap();
    COUNTER.store(core::ptr::null_mut(), Ordering::Release);

    let handled = HANDLED.load(Ordering::Relaxed);
    let expect = threads as u64 * PER_THREAD + 1 + CHILD_ADDS + handled;
    eprintln!(
        "[stress] mode {}: {threads} threads, {signals} signals sent, {handled} handled, {moves} migrations, sum {} (expect {expect})",
        ipcns_rseq::mode(),
        counter.sum()
    );
    assert!(handled > 0, "no signal was handled");
    assert_eq!(counter.sum() as u64, expect);
}

#[test]
fn counter_exact_under_stress() {
    in_all_modes("counter_exact_under_stress", stress_scenario);
}

/// Raw operations report aborts (counted here) and are still exact, indexed
/// by cpu and by mm_cid.
fn raw_ops_scenario() {
    for index in [Index::Cpu, Index::MmCid] {
        let cells = Arc::new(PerCpu::new(|_| AtomicU64::new(0)));
        let aborts = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (cells, aborts) = (cells.clone(), aborts.clone());
                std::thread::spawn(move || {
                    let s = cells.slots();
                    let mut done = 0;
                    while done < 50_000 {
                        match unsafe { ops::add(&s, index, 0, 1) } {
                            Outcome::Success { slot, .. } => {
                                assert!((slot as usize) < s.len());
                                done += 1;
                            }
                            Outcome::Abort => {
                                aborts.fetch_add(1, Ordering::Relaxed);
                            }
                            Outcome::Miss { .. } => panic!("add cannot miss"),
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        let sum: u64 = cells.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        eprintln!(
            "[raw] mode {} index {index:?} (mm_cid available: {}): sum {sum}, {} aborts",
            ipcns_rseq::mode(),
            ipcns_rseq::mm_cid_available(),
            aborts.load(Ordering::Relaxed)
        );
        assert_eq!(sum, 200_000);
    }
}

#[test]
fn raw_add_exact_by_cpu_and_mm_cid() {
    in_all_modes("raw_add_exact_by_cpu_and_mm_cid", raw_ops_scenario);
}

static PINGS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr2(_: i32) {
    PINGS.fetch_add(1, Ordering::Release);
}

/// Signals delivered one at a time to a thread looping on a critical section
/// abort some of its sections (rseq modes), and the total stays exact.
fn abort_scenario() {
    on_signal(libc::SIGUSR2, on_usr2);
    PINGS.store(0, Ordering::Relaxed);
    let cells = Arc::new(PerCpu::new(|_| AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicI32::new(0));
    let worker = {
        let (cells, stop, tid) = (cells.clone(), stop.clone(), tid.clone());
        std::thread::spawn(move || {
            let s = cells.slots();
            let _ = unsafe { ops::add(&s, Index::Cpu, 0, 0) };
            tid.store(gettid(), Ordering::Release);
            let (mut done, mut aborts) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match unsafe { ops::add(&s, Index::Cpu, 0, 1) } {
                    Outcome::Success { .. } => done += 1,
                    Outcome::Abort => aborts += 1,
                    Outcome::Miss { .. } => unreachable!(),
                }
            }
            (done, aborts)
        })
    };
    while tid.load(Ordering::Acquire) == 0 {
        std::hint::spin_loop();
    }
    let tid = tid.load(Ordering::Acquire);
    for i in 0..2000 {
        tgkill(tid, libc::SIGUSR2);
        while PINGS.load(Ordering::Acquire) <= i {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (done, aborts) = worker.join().unwrap();
    let sum: u64 = cells.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    eprintln!(
        "[abort] mode {}: {done} committed, {aborts} aborted by 2000 signals",
        ipcns_rseq::mode()
    );
    assert_eq!(sum, done);
    if ipcns_rseq::mode().uses_atomics() {
        assert_eq!(aborts, 0, "atomics do not abort without contention");
    } else {
        assert!(aborts > 0, "2000 signals never hit a critical section");
    }
}

#[test]
fn signals_abort_sections() {
    in_all_modes("signals_abort_sections", abort_scenario);
}
