//! Free-list integrity: threads of three processes push and pop the same
//! per-cpu lists in a shared file mapping, moving between cpus; every element
//! popped is owned by exactly one thread, and at the end every element is on
//! a list exactly once. In all three modes.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::{FreeList, PerCpu};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const TEST: &str = "freelist_integrity_threads_and_processes";
const ELEMS: usize = 1024;
const ELEM: usize = 16;
const THREADS: usize = 3;
const ROUNDS: usize = 200_000;
const PATH_ENV: &str = "IPCNS_RSEQ_TEST_SHM";

fn layout() -> (usize, usize, usize) {
    let heads = FreeList::heads_bytes().next_multiple_of(64);
    let violations = heads + ELEMS * ELEM;
    (heads, violations, violations + 64)
}

fn attach(shm: &Shared) -> (FreeList, &AtomicU64) {
    let (region, violations, _) = layout();
    let heads =
        unsafe { PerCpu::<AtomicU64>::from_raw(shm.ptr.cast(), ipcns_rseq::possible_cpus()) };
    let list = unsafe { FreeList::new(heads, shm.ptr.add(region), ELEMS * ELEM) };
    (list, unsafe {
        AtomicU64::from_ptr(shm.ptr.add(violations).cast())
    })
}

fn owner(shm: &Shared, off: u32) -> &AtomicU32 {
    unsafe { AtomicU32::from_ptr(shm.ptr.add(layout().0 + off as usize + 4).cast()) }
}

/// Pops and pushes at random, checking ownership of every popped element.
fn churn(shm: &Shared, list: &FreeList, violations: &AtomicU64, me: u32) {
    let mut rng = Rng(0x1234_5678 ^ u64::from(me).wrapping_mul(0x9e37_79b9));
    let mut hand: Vec<u32> = Vec::new();
    for round in 0..ROUNDS {
        if round.is_multiple_of(1000) {
            let cpu = (rng.next() % 3) as usize;
            set_affinity(gettid(), (cpu < 2).then_some(cpu));
        }
        if hand.len() < 8 && rng.next().is_multiple_of(2) {
            if let Some(off) = list.pop() {
                if owner(shm, off)
                    .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                hand.push(off);
            }
        } else if let Some(off) = hand.pop() {
            if owner(shm, off)
                .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                violations.fetch_add(1, Ordering::Relaxed);
            }
            list.push(off).unwrap();
        }
    }
    for off in hand {
        if owner(shm, off)
            .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            violations.fetch_add(1, Ordering::Relaxed);
        }
        list.push(off).unwrap();
    }
    set_affinity(gettid(), None);
}

fn run_threads(shm: &Shared, list: &FreeList, violations: &AtomicU64, proc_id: u32) {
    std::thread::scope(|s| {
        for t in 0..THREADS as u32 {
            s.spawn(move || churn(shm, list, violations, (proc_id << 8) | (t + 1)));
        }
    });
}

fn scenario() {
    let path = format!("/dev/shm/ipcns-rseq-test-{}", std::process::id());
    let shm = Shared::file(&path, layout().2, true);
    let (mut list, violations) = attach(&shm);
    for i in 0..ELEMS {
        list.push((i * ELEM) as u32).unwrap();
    }
    let children: Vec<_> = (1..=2)
        .map(|k| {
            self_command(TEST, "flworker")
                .env(PATH_ENV, &path)
                .env("IPCNS_RSEQ_TEST_PROC", k.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    run_threads(&shm, &list, violations, std::process::id() & 0xff_ffff);
    for mut c in children {
        assert!(c.wait().unwrap().success(), "worker process failed");
    }
    std::fs::remove_file(&path).unwrap();
    let mut all = list.take_all();
    all.sort_unstable();
    let want: Vec<u32> = (0..ELEMS).map(|i| (i * ELEM) as u32).collect();
    eprintln!(
        "[freelist] mode {}: {} processes x {THREADS} threads x {ROUNDS} rounds, {} elements back, {} ownership violations",
        ipcns_rseq::mode(),
        3,
        all.len(),
        violations.load(Ordering::Relaxed)
    );
    assert_eq!(violations.load(Ordering::Relaxed), 0);
    assert_eq!(all, want, "every element exactly once");
    for i in 0..ELEMS {
        assert_eq!(owner(&shm, (i * ELEM) as u32).load(Ordering::Relaxed), 0);
    }
}

#[test]
fn freelist_integrity_threads_and_processes() {
    if role().as_deref() == Some("flworker") {
        let path = std::env::var(PATH_ENV).unwrap();
        let k: u32 = std::env::var("IPCNS_RSEQ_TEST_PROC")
            .unwrap()
            .parse()
            .unwrap();
        let shm = Shared::file(&path, layout().2, false);
        let (list, violations) = attach(&shm);
        run_threads(
            &shm,
            &list,
            violations,
            (std::process::id() & 0xff_ffff) ^ (k << 20),
        );
        return;
    }
    in_all_modes(TEST, scenario);
}
