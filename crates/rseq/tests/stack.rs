//! Bounded per-cpu stacks (`ops::stack_push`, `ops::stack_pop` and their
//! rseq-only forms in `ops::strict`): threads of three processes push and
//! pop values on the stacks of a shared file mapping, moving between cpus
//! and interrupted by signals; every value popped is owned by exactly one
//! thread, and at the end every value is either on a stack or in a hand,
//! once. Then the bounds: a full stack refuses, the words around a stack
//! are never written, a corrupt count is reported and nothing is read or
//! written through it. In all three modes (the rseq-only forms must refuse
//! in the fallback, touching nothing).

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::ops::{self, strict};
use ipcns_rseq::{BadCount, Index, Mode, Outcome, Slots};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const TEST: &str = "stack_ownership_threads_and_processes";
/// Values 1..=VALUES (0 is never pushed, so a zeroed stale word is caught).
const VALUES: usize = 96;
/// Capacity of each stack.
const CAP: u32 = 7;
/// One slot per cpu: a guard word, stack A (count + CAP values), a guard,
/// stack B, a guard; 8-word aligned.
const GUARD: u64 = 0x6775_6172_6467_7561;
const OFF_A: usize = 8;
const OFF_B: usize = OFF_A + 8 + CAP as usize * 8 + 8;
const STRIDE: usize = (OFF_B + 8 + CAP as usize * 8 + 8).next_multiple_of(64);
const THREADS: usize = 3;
const ROUNDS: usize = 100_000;
const PATH_ENV: &str = "IPCNS_RSEQ_TEST_SHM";

/// Bytes of the mapping: slots, then per value its owner word, then the
/// violation counter, then per value a count of hands it ended in.
fn layout() -> (usize, usize, usize, usize) {
    let slots = STRIDE * ipcns_rseq::possible_cpus();
    let owners = slots;
    let violations = owners + (VALUES + 1) * 4;
    let ended = violations + 8;
    (owners, violations, ended, ended + (VALUES + 1) * 4)
}

fn slots(shm: &Shared) -> Slots {
    unsafe { Slots::new(shm.ptr, STRIDE, ipcns_rseq::possible_cpus()) }
}

fn word(shm: &Shared, at: usize) -> &AtomicU64 {
    unsafe { AtomicU64::from_ptr(shm.ptr.add(at).cast()) }
}

fn u32_at(shm: &Shared, at: usize) -> &AtomicU32 {
    unsafe { AtomicU32::from_ptr(shm.ptr.add(at).cast()) }
}

fn owner(shm: &Shared, v: u64) -> &AtomicU32 {
    u32_at(shm, layout().0 + v as usize * 4)
}

fn strict_mode() -> bool {
    ipcns_rseq::mode() != Mode::Fallback
}

/// Pushes `v` on stack `off` of the current cpu: the rseq-only form in an
/// rseq mode (which must then never refuse), else the general one. False
/// if the stack is full.
fn push(s: &Slots, off: usize, v: u64) -> bool {
    loop {
        let o = if strict_mode() {
            unsafe { strict::stack_push(s, Index::Cpu, off, CAP, v) }
                .expect("a registered thread runs the section")
        } else {
            assert!(unsafe { strict::stack_push(s, Index::Cpu, off, CAP, v) }.is_none());
            unsafe { ops::stack_push(s, Index::Cpu, off, CAP, v) }
        };
        match o {
            Outcome::Success { value, .. } => {
                assert!((1..=u64::from(CAP)).contains(&value), "count {value}");
                return true;
            }
            Outcome::Miss { .. } => return false,
            Outcome::Abort => {}
        }
    }
}

/// Pops from stack `off` of the current cpu, as [`push`].
fn pop(s: &Slots, off: usize) -> Result<Option<u64>, BadCount> {
    loop {
        let o = if strict_mode() {
            unsafe { strict::stack_pop(s, Index::Cpu, off, CAP) }
                .expect("a registered thread runs the section")?
        } else {
            assert!(unsafe { strict::stack_pop(s, Index::Cpu, off, CAP) }.is_none());
            unsafe { ops::stack_pop(s, Index::Cpu, off, CAP) }?
        };
        match o {
            Outcome::Success { value, .. } => return Ok(Some(value)),
            Outcome::Miss { .. } => return Ok(None),
            Outcome::Abort => {}
        }
    }
}

/// Pushes and pops at random on both stacks, checking ownership of every
/// value popped; what is left in hand at the end is counted in `ended`.
fn churn(shm: &Shared, me: u32, first: u64) {
    let s = slots(shm);
    let violations = word(shm, layout().1);
    let claim = |v: u64, from: u32, to: u32| {
        if v == 0
            || v > VALUES as u64
            || owner(shm, v)
                .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            violations.fetch_add(1, Ordering::Relaxed);
        }
    };
    let mut rng = Rng(0x5eed_0000_0000_0001 ^ u64::from(me).wrapping_mul(0x9e37_79b9));
    // Each party starts with a few values of its own.
    let mut hand: Vec<u64> = (first..first + 4).collect();
    for &v in &hand {
        claim(v, 0, me);
    }
    for round in 0..ROUNDS {
        if round.is_multiple_of(1000) {
            let cpu = (rng.next() % 3) as usize;
            set_affinity(gettid(), (cpu < 2).then_some(cpu));
        }
        let off = if rng.next().is_multiple_of(2) {
            OFF_A
        } else {
            OFF_B
        };
        if hand.len() < 8 && rng.next().is_multiple_of(2) {
            if let Some(v) = pop(&s, off).expect("no corrupt count") {
                claim(v, 0, me);
                hand.push(v);
            }
        } else if let Some(&v) = hand.last() {
            claim(v, me, 0);
            if push(&s, off, v) {
                hand.pop();
            } else {
                claim(v, 0, me);
            }
        }
    }
    for v in hand {
        claim(v, me, 0);
        u32_at(shm, layout().2 + v as usize * 4).fetch_add(1, Ordering::Relaxed);
    }
    set_affinity(gettid(), None);
}

static SIGNALS: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_usr1(_: i32) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// The party's threads; in the first process a signaller interrupts them
/// (signals abort the sections they land in).
fn run_threads(shm: &Shared, proc_id: u32, signals: bool) {
    let tids: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let (tids, done) = (&tids, &done);
            sc.spawn(move || {
                tids[t].store(gettid() as u64, Ordering::Release);
                let me = (proc_id << 8) | (t as u32 + 1);
                let first = 1 + (proc_id as u64 * THREADS as u64 + t as u64) * 4;
                churn(shm, me, first);
                done.fetch_add(1, Ordering::Release);
            });
        }
        if signals {
            on_signal(libc::SIGUSR1, on_usr1);
            let mut n = 0;
            while done.load(Ordering::Acquire) < THREADS as u64 {
                for t in &tids {
                    let tid = t.load(Ordering::Acquire);
                    if tid != 0 && done.load(Ordering::Acquire) < THREADS as u64 {
                        tgkill(tid as i32, libc::SIGUSR1);
                        n += 1;
                    }
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            eprintln!("[stack] {n} signals sent");
        }
    });
}

/// Every value once: on a stack (within its count) or in a hand.
fn census(shm: &Shared) -> Vec<u64> {
    let mut seen = vec![0u32; VALUES + 1];
    for cpu in 0..ipcns_rseq::possible_cpus() {
        for off in [OFF_A, OFF_B] {
            let base = cpu * STRIDE + off;
            let n = word(shm, base).load(Ordering::Relaxed);
            assert!(n <= u64::from(CAP), "cpu {cpu} count {n}");
            for i in 0..n as usize {
                let v = word(shm, base + 8 + i * 8).load(Ordering::Relaxed);
                assert!((1..=VALUES as u64).contains(&v), "cpu {cpu} holds {v}");
                seen[v as usize] += 1;
            }
        }
        for g in [0, OFF_B - 8, STRIDE - 8] {
            assert_eq!(
                word(shm, cpu * STRIDE + g).load(Ordering::Relaxed),
                GUARD,
                "cpu {cpu}: guard word at {g} overwritten"
            );
        }
    }
    let mut out = Vec::new();
    for (v, &on_stacks) in seen.iter().enumerate().skip(1) {
        let ended = u32_at(shm, layout().2 + v * 4).load(Ordering::Relaxed);
        let started = v <= 3 * THREADS * 4;
        assert_eq!(
            on_stacks + ended,
            u32::from(started),
            "value {v}: {on_stacks} on stacks, {ended} in hands"
        );
        if started {
            out.push(v as u64);
        }
    }
    out
}

fn set_guards(shm: &Shared) {
    for cpu in 0..ipcns_rseq::possible_cpus() {
        for g in [0, OFF_B - 8, STRIDE - 8] {
            word(shm, cpu * STRIDE + g).store(GUARD, Ordering::Relaxed);
        }
    }
}

fn scenario() {
    let path = format!("/dev/shm/ipcns-rseq-stack-test-{}", std::process::id());
    let shm = Shared::file(&path, layout().3, true);
    set_guards(&shm);
    let children: Vec<_> = (1..=2)
        .map(|k| {
            self_command(TEST, "stackworker")
                .env(PATH_ENV, &path)
                .env("IPCNS_RSEQ_TEST_PROC", k.to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    run_threads(&shm, 0, true);
    for mut c in children {
        assert!(c.wait().unwrap().success(), "worker process failed");
    }
    std::fs::remove_file(&path).unwrap();
    let violations = word(&shm, layout().1).load(Ordering::Relaxed);
    let back = census(&shm);
    eprintln!(
        "[stack] mode {}: 3 processes x {THREADS} threads x {ROUNDS} rounds, {} values back, {violations} ownership violations, {} signals handled",
        ipcns_rseq::mode(),
        back.len(),
        SIGNALS.load(Ordering::Relaxed)
    );
    assert_eq!(violations, 0);
    for v in 1..=VALUES as u64 {
        assert_eq!(owner(&shm, v).load(Ordering::Relaxed), 0, "value {v}");
    }
}

#[test]
fn stack_ownership_threads_and_processes() {
    if role().as_deref() == Some("stackworker") {
        let path = std::env::var(PATH_ENV).unwrap();
        let k: u32 = std::env::var("IPCNS_RSEQ_TEST_PROC")
            .unwrap()
            .parse()
            .unwrap();
        let shm = Shared::file(&path, layout().3, false);
        run_threads(&shm, k, false);
        return;
    }
    in_all_modes(TEST, scenario);
}

/// Pinned to one cpu: last in, first out; a full stack refuses and leaves
/// its words alone; the neighbours are untouched; a count above the
/// capacity is reported by pop and refused by push, with nothing read or
/// written through it, until the owner stores a sane count.
fn bounds() {
    let shm = Shared::anon(layout().3);
    set_guards(&shm);
    let s = slots(&shm);
    let cpu = ipcns_rseq::current_cpu() as usize;
    set_affinity(gettid(), Some(cpu));
    let cpu = ipcns_rseq::current_cpu() as usize;
    let count = |off: usize| word(&shm, cpu * STRIDE + off);
    let value = |off: usize, i: usize| word(&shm, cpu * STRIDE + off + 8 + i * 8);

    assert_eq!(pop(&s, OFF_A), Ok(None));
    for v in 1..=u64::from(CAP) {
        assert!(push(&s, OFF_A, 100 + v));
        assert_eq!(count(OFF_A).load(Ordering::Relaxed), v);
    }
    assert!(!push(&s, OFF_A, 999), "a full stack refuses");
    assert_eq!(count(OFF_A).load(Ordering::Relaxed), u64::from(CAP));
    assert_eq!(
        word(&shm, cpu * STRIDE + OFF_B - 8).load(Ordering::Relaxed),
        GUARD
    );
    assert_eq!(count(OFF_B).load(Ordering::Relaxed), 0, "stack B untouched");
    for v in (1..=u64::from(CAP)).rev() {
        assert_eq!(pop(&s, OFF_A), Ok(Some(100 + v)));
    }
    assert_eq!(pop(&s, OFF_A), Ok(None));
    // The popped values stay above the count (stale, never read).
    assert_eq!(value(OFF_A, 0).load(Ordering::Relaxed), 101);

    // Corrupt counts: just above the capacity, and huge.
    for bad in [u64::from(CAP) + 1, u64::MAX - 1, 1 << 40] {
        count(OFF_B).store(bad, Ordering::Relaxed);
        assert_eq!(pop(&s, OFF_B), Err(BadCount(bad)));
        assert!(!push(&s, OFF_B, 5), "a push at count {bad} refuses");
        assert_eq!(count(OFF_B).load(Ordering::Relaxed), bad);
    }
    // The owner repairs it (a compare-and-store from the bad count).
    let bad = count(OFF_B).load(Ordering::Relaxed);
    loop {
        let o = if strict_mode() {
            unsafe { strict::cmp_store(&s, Index::Cpu, OFF_B, bad, 0) }.unwrap()
        } else {
            unsafe { ops::cmp_store(&s, Index::Cpu, OFF_B, bad, 0) }
        };
        match o {
            Outcome::Success { .. } => break,
            Outcome::Miss { .. } => panic!("the count changed"),
            Outcome::Abort => {}
        }
    }
    assert!(push(&s, OFF_B, 7));
    assert_eq!(pop(&s, OFF_B), Ok(Some(7)));
    for g in [0, OFF_B - 8, STRIDE - 8] {
        assert_eq!(word(&shm, cpu * STRIDE + g).load(Ordering::Relaxed), GUARD);
    }
    // The rseq-only add: exact, or refused in the fallback.
    let add = |v: u64| loop {
        match unsafe { strict::add(&s, Index::Cpu, OFF_A, v) } {
            Some(Outcome::Success { .. }) => return true,
            Some(_) => {}
            None => return false,
        }
    };
    let before = count(OFF_A).load(Ordering::Relaxed);
    assert_eq!(add(3), strict_mode());
    let want = if strict_mode() { before + 3 } else { before };
    assert_eq!(count(OFF_A).load(Ordering::Relaxed), want);
    set_affinity(gettid(), None);
    eprintln!(
        "[stack bounds] mode {}: LIFO, full, guards, corrupt counts",
        ipcns_rseq::mode()
    );
}

#[test]
fn stack_bounds_and_corrupt_counts() {
    in_all_modes("stack_bounds_and_corrupt_counts", bounds);
}
