//! The heap's per-cpu caches (heap/cache.rs): refill and drain between a
//! cpu's stacks and the global lists with exact accounting; processes on
//! both cpus allocating and freeing at once, every block owned by one of
//! them at a time; churners killed at random, after which the heap is
//! still whole (nothing free twice, counts in range, the accounting within
//! what the dead held); arenas made by several threads at once, each of
//! whose heaps grows past the part mapped at first; hostile values in a
//! cache (offsets that are no block, a count out of range) checked before
//! use; and a process without rseq (a seccomp filter denies it): its
//! arenas have no caches, the lock serves it, and it cannot attach to an
//! arena whose caches need rseq.
//!
//! IPCNS_HEAP_KILLS: how many churners the kill test kills (default 60).
//!
//! # Safety
//! `pin` and the seccomp filter make plain system calls on this thread or
//! in a forked child before exec, with structures that outlive them; the
//! kill test's guard reaps its own children (`waitpid`).
#![allow(unsafe_code)]

use crate::corrupt::{Rng, env_u64};
use crate::support::{self, SharedWords, TestNs};
use ipcns::{CreateOptions, Namespace};
use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

fn opts() -> CreateOptions {
    CreateOptions {
        heap_size: 64 << 20,
        ..CreateOptions::default()
    }
}

/// Binds the calling thread to `cpu` (every cpu if `None`).
fn pin(cpu: Option<usize>) {
    let n = ipcns_rseq::possible_cpus();
    // SAFETY: a zeroed cpu set filled with CPU_SET, passed by reference
    // to sched_setaffinity for this thread (0).
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(c % n, &mut set),
            None => (0..n).for_each(|c| libc::CPU_SET(c, &mut set)),
        }
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Whether this process uses the caches (an rseq mode).
fn cached() -> bool {
    ipcns_rseq::mode() != ipcns_rseq::Mode::Fallback
}

/// Pinned to one cpu: 100 blocks of 32 bytes taken and given back. The
/// bytes in use follow exactly; given back, they are all free again, at
/// most a stack's worth in the cpu's cache and the rest on the list; taken
/// again, they are the same blocks (nothing new from the top). A class
/// with no cache (64 KiB) goes to the list.
#[test]
fn caches_refill_drain_and_account() {
    let t = TestNs::with("heap-cache", opts());
    let ns = &t.ns;
    pin(Some(ipcns_rseq::current_cpu() as usize));
    let s0 = ns.heap_stats();
    assert_eq!(
        s0.cache_cpus,
        if cached() {
            ipcns_rseq::possible_cpus() as u32
        } else {
            0
        }
    );
    let base = ns.heap_in_use();
    let blocks: Vec<u64> = (0..100).map(|_| ns.heap_alloc(24).unwrap()).collect();
    let set: BTreeSet<u64> = blocks.iter().copied().collect();
    assert_eq!(set.len(), 100, "a block handed out twice");
    assert!(blocks.iter().all(|b| b % 32 == 0));
    assert_eq!(ns.heap_in_use(), base + 3200);
    for &b in &blocks {
        ns.heap_free(b, 24).unwrap();
    }
    assert_eq!(ns.heap_in_use(), base);
    let s1 = ns.heap_stats();
    assert_eq!(
        (s1.listed + s1.cached) - (s0.listed + s0.cached),
        3200,
        "{s0:?} -> {s1:?}"
    );
    if cached() {
        let more = s1.cached - s0.cached;
        assert!(
            (32..=15 * 32).contains(&more),
            "{more} bytes more in the caches"
        );
    } else {
        assert_eq!(s1.cached, 0);
    }
    let again: BTreeSet<u64> = (0..100).map(|_| ns.heap_alloc(24).unwrap()).collect();
    assert_eq!(again, set, "the freed blocks are handed out again");
    assert_eq!(ns.heap_stats().used, s1.used, "nothing new from the top");
    for &b in &again {
        ns.heap_free(b, 24).unwrap();
    }
    let big = ns.heap_alloc(40_000).unwrap();
    ns.heap_free(big, 40_000).unwrap();
    let s2 = ns.heap_stats();
    assert_eq!(s2.cached, s1.cached, "64 KiB blocks are not cached");
    assert_eq!(s2.listed, s1.listed + 65536);
    assert_eq!(ns.heap_in_use(), base);
    ns.check().unwrap();
    pin(None);
}

/// Marks a block held by `me`: its first and last word.
fn stamp(ns: &Namespace, off: u64, size: u64, v: u64) {
    let last = off + (size.max(8) - 1) / 8 * 8;
    for at in [off, last] {
        ns.arena_word(at).expect("a block word").store(v, Relaxed);
    }
}

/// Whether the block still carries `v` (nobody else took it meanwhile).
fn stamped(ns: &Namespace, off: u64, size: u64, v: u64) -> bool {
    let last = off + (size.max(8) - 1) / 8 * 8;
    [off, last]
        .iter()
        .all(|&at| ns.arena_word(at).is_some_and(|w| w.load(Relaxed) == v))
}

/// A size: mostly cached classes, sometimes 32 or 64 KiB, rarely a run.
fn size(rng: &mut Rng) -> u64 {
    match rng.below(20) {
        0 => 20_000 + rng.below(45_000),
        1 => 70_000 + rng.below(20_000),
        _ => {
            let bits = 3 + rng.below(12);
            1 + rng.below(1 << bits)
        }
    }
}

/// The shared words of the churn tests: how many violations, the bytes
/// each churner holds, and the first violation and the first error seen,
/// for the parent to report (a forked child's panic message may be lost).
const VIOLATIONS: usize = 0;
/// `HELD + me`: the bytes churner `me` (0 to 2) holds now.
const HELD: usize = 1;
/// The first violation: what (1: not zeroed when handed out, 2: changed
/// while held), by whom (`me << 48 | round`), the block and its size, and
/// the words found at its first and last place.
const V_WHAT: usize = 4;
const V_WHO: usize = 5;
const V_OFF: usize = 6;
const V_SIZE: usize = 7;
const V_FIRST: usize = 8;
const V_LAST: usize = 9;
/// The first error of a free: its errno (`1 << 32 | me << 16 | errno`),
/// the block and its size.
const E_WHAT: usize = 10;
const E_OFF: usize = 11;
const E_SIZE: usize = 12;
const LOG_WORDS: usize = 13;

/// The words at the first and last place of a block of `size` at `off`.
fn stamps(ns: &Namespace, off: u64, size: u64) -> (u64, u64) {
    let last = off + (size.max(8) - 1) / 8 * 8;
    let w = |at| ns.arena_word(at).map_or(u64::MAX, |w| w.load(Relaxed));
    (w(off), w(last))
}

/// Counts a violation, noting the first.
fn violation(ns: &Namespace, log: &[AtomicU64], what: u64, who: u64, off: u64, n: u64) {
    if log[VIOLATIONS].fetch_add(1, Relaxed) == 0 {
        let (first, last) = stamps(ns, off, n);
        for (i, v) in [
            (V_WHO, who),
            (V_OFF, off),
            (V_SIZE, n),
            (V_FIRST, first),
            (V_LAST, last),
            (V_WHAT, what),
        ] {
            log[i].store(v, Relaxed);
        }
    }
}

/// Frees a block, noting the first error (and panicking on it).
fn free_or_note(ns: &Namespace, log: &[AtomicU64], me: u64, off: u64, n: u64) {
    if let Err(e) = ns.heap_free(off, n) {
        let code = e.0 as u64;
        if log[E_WHAT]
            .compare_exchange(0, 1 << 32 | me << 16 | code, Relaxed, Relaxed)
            .is_ok()
        {
            log[E_OFF].store(off, Relaxed);
            log[E_SIZE].store(n, Relaxed);
        }
        panic!("churner {me}: heap_free({off:#x}, {n}): {e}");
    }
}

/// What the log says went wrong, for a failure message.
fn log_report(log: &[AtomicU64]) -> String {
    let w = |i: usize| log[i].load(Relaxed);
    let mut out = format!("{} violation(s)", w(VIOLATIONS));
    if w(V_WHAT) != 0 {
        out += &format!(
            "; the first: block {:#x} of {} bytes {} churner {} (round {}): {:#x} at its start, {:#x} at its end",
            w(V_OFF),
            w(V_SIZE),
            if w(V_WHAT) == 1 {
                "not zeroed when handed to"
            } else {
                "changed while held by"
            },
            w(V_WHO) >> 48,
            w(V_WHO) & 0xffff_ffff_ffff,
            w(V_FIRST),
            w(V_LAST),
        );
    }
    if w(E_WHAT) != 0 {
        out += &format!(
            "; churner {} failed to free block {:#x} of {} bytes: errno {}",
            (w(E_WHAT) >> 16) & 0xffff,
            w(E_OFF),
            w(E_SIZE),
            w(E_WHAT) & 0xffff,
        );
    }
    out
}

/// Allocates and frees at random for `rounds` rounds (forever if 0),
/// moving between cpus; every block is stamped while held and checked
/// when freed (`log[VIOLATIONS]`, the first noted). `log[HELD + me]`:
/// bytes held now.
fn churn(ns: &Namespace, log: &[AtomicU64], me: u64, rounds: u64) {
    let mut rng =
        Rng::new(0x6865_6170 ^ me.wrapping_mul(0x9e37_79b9) ^ u64::from(std::process::id()));
    let mut hand: Vec<(u64, u64, u64)> = Vec::new();
    let mut held = 0u64;
    let mut round = 0u64;
    while rounds == 0 || round < rounds {
        round += 1;
        if round.is_multiple_of(500) {
            let cpu = rng.below(3) as usize;
            pin((cpu < 2).then_some(cpu));
        }
        if hand.len() < 24 && rng.chance(1, 2) {
            let n = size(&mut rng);
            if let Ok(off) = ns.heap_alloc(n) {
                let v = (me << 48) | round;
                // Zeroed when handed out: nobody else writes it.
                if !stamped(ns, off, n, 0) {
                    violation(ns, log, 1, v, off, n);
                }
                stamp(ns, off, n, v);
                hand.push((off, n, v));
                held += ipcns_heap_footprint(n);
                log[HELD + me as usize].store(held, Relaxed);
            }
        } else if !hand.is_empty() {
            let (off, n, v) = hand.swap_remove(rng.below(hand.len() as u64) as usize);
            if !stamped(ns, off, n, v) {
                violation(ns, log, 2, v, off, n);
            }
            held -= ipcns_heap_footprint(n);
            log[HELD + me as usize].store(held, Relaxed);
            free_or_note(ns, log, me, off, n);
        }
    }
    for (off, n, v) in hand {
        if !stamped(ns, off, n, v) {
            violation(ns, log, 2, v, off, n);
        }
        free_or_note(ns, log, me, off, n);
    }
    log[HELD + me as usize].store(0, Relaxed);
    pin(None);
}

/// The bytes the heap takes for `n` (its rounding).
fn ipcns_heap_footprint(n: u64) -> u64 {
    if n <= 65536 {
        n.max(32).next_power_of_two()
    } else {
        n.div_ceil(4096) * 4096
    }
}

/// Three processes and the test's own, allocating and freeing at once on
/// both cpus: no block is ever held by two, and at the end the heap is
/// whole with nothing in use.
#[test]
fn processes_churn_with_exclusive_ownership() {
    let t = TestNs::with("heap-churn", opts());
    let base = t.ns.heap_in_use();
    let log = SharedWords::new(LOG_WORDS);
    let words = log.words();
    let path = t.path().to_path_buf();
    let kids: Vec<i32> = (1..=3)
        .map(|me| {
            let path = path.clone();
            support::fork_child(move || {
                let ns = Namespace::open_at(&path).expect("attach");
                churn(&ns, words, me, 20_000);
                0
            })
        })
        .collect();
    churn(&t.ns, words, 0, 20_000);
    for pid in kids {
        let code = support::wait_child(pid);
        assert_eq!(code, 0, "churner {pid}: {}", log_report(words));
    }
    assert_eq!(
        words[VIOLATIONS].load(Relaxed),
        0,
        "a block held by two at once: {}",
        log_report(words)
    );
    let s = t.ns.heap_stats();
    assert_eq!(
        t.ns.heap_in_use(),
        base,
        "bytes in use once every block was freed; {s:?}; check: {:?}",
        t.ns.check()
    );
    t.ns.check().unwrap();
    eprintln!("heap churn: 4 processes x 20000 rounds, {s:?}");
    assert!(s.listed + s.cached <= s.used);
}

/// The churners of the kill test (pids, 0 for none): killed and reaped
/// when dropped, so that a failed assertion does not leave them churning
/// (forever) after the test binary ends.
struct Churners([i32; 2]);

impl Churners {
    /// Kills churner `k` and reaps it: its pid and how it ended (`-9`
    /// when killed).
    fn end(&mut self, k: usize) -> (i32, i32) {
        let pid = core::mem::replace(&mut self.0[k], 0);
        support::kill(pid);
        (pid, support::wait_child(pid))
    }
}

impl Drop for Churners {
    fn drop(&mut self) {
        for pid in self.0.iter_mut().filter(|p| **p > 0) {
            support::kill(*pid);
            let mut status = 0;
            // SAFETY: reaps our own child; `status` is a valid out-pointer.
            unsafe { libc::waitpid(*pid, &mut status, 0) };
            *pid = 0;
        }
    }
}

/// Churners on both cpus, killed one at a time at random moments and
/// replaced: the live ones never see a block of theirs taken, and after
/// the last is gone the heap is whole. The bytes in use are what the dead
/// held when killed (each may have been between a step and its count: a
/// block either way), and allocation goes on.
#[test]
fn killed_churners_never_double_own() {
    let t = TestNs::with("heap-kill", opts());
    let base = t.ns.heap_in_use();
    let log = SharedWords::new(LOG_WORDS);
    let words = log.words();
    let path = t.path().to_path_buf();
    let kills = env_u64("IPCNS_HEAP_KILLS", 60);
    let spawn = |me: u64| {
        let path = path.clone();
        support::fork_child(move || {
            let ns = Namespace::open_at(&path).expect("attach");
            churn(&ns, words, me, 0);
            0
        })
    };
    let mut rng = Rng::new(0x6b69_6c6c);
    let mut kids = Churners([0; 2]);
    kids.0[0] = spawn(1);
    kids.0[1] = spawn(2);
    let mut dead_held = 0u64;
    for i in 0..kills {
        std::thread::sleep(Duration::from_micros(200 + rng.below(3000)));
        let k = rng.below(2) as usize;
        let (pid, code) = kids.end(k);
        assert_eq!(
            code,
            -libc::SIGKILL,
            "kill {i}: churner {} (pid {pid}) ended by itself ({code}: 101 is a panic); {}",
            k + 1,
            log_report(words)
        );
        dead_held += words[HELD + 1 + k].load(Relaxed);
        words[HELD + 1 + k].store(0, Relaxed);
        kids.0[k] = spawn(k as u64 + 1);
    }
    for k in 0..2 {
        let (pid, code) = kids.end(k);
        assert_eq!(
            code,
            -libc::SIGKILL,
            "the last churner {} (pid {pid}) ended by itself ({code}); {}",
            k + 1,
            log_report(words)
        );
        dead_held += words[HELD + 1 + k].load(Relaxed);
    }
    assert_eq!(
        words[VIOLATIONS].load(Relaxed),
        0,
        "a block held by two at once: {}",
        log_report(words)
    );
    if let Err(e) = t.ns.check() {
        panic!("after {kills} kills: {e}");
    }
    let in_use = t.ns.heap_in_use().wrapping_sub(base) as i64;
    // Each kill may land between a block's move and its count.
    let slack = (kills + 2) * 90_112;
    assert!(
        in_use.abs_diff(dead_held as i64) <= slack,
        "{in_use} bytes in use (besides {base} before), the dead held {dead_held}, slack {slack}"
    );
    let s = t.ns.heap_stats();
    eprintln!(
        "heap kills: {kills} churners killed, they held {dead_held} bytes, {in_use} in use; {s:?}"
    );
    churn(&t.ns, words, 0, 2000);
    assert_eq!(
        words[VIOLATIONS].load(Relaxed),
        0,
        "after the kills, in the test's own churn: {}",
        log_report(words)
    );
    if let Err(e) = t.ns.check() {
        panic!("after {kills} kills and a churn: {e}");
    }
}

/// Arenas made by several threads of one process at once (as the tests
/// of this binary make theirs): each mapping is placed where it can grow
/// (`arena/map.rs`), so every heap grows past the part mapped at first
/// (the header, the tables and 8 MiB of heap) without an error. Threads
/// that read /proc/self/maps before any of them mapped chose the same
/// address, and all but the first were mapped where the kernel puts a
/// mapping, right below another one: their views past that part failed
/// with ENOMEM (a free's error, an allocation's leak, `check` finding "no
/// run"), which failed the churn tests that ran beside another test.
#[test]
fn arenas_made_at_once_all_grow() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 6;
    // 16 MiB of 64 KiB blocks: twice what is mapped at first.
    const BLOCKS: usize = 256;
    for round in 0..ROUNDS {
        let start = std::sync::Barrier::new(THREADS);
        let errors: Vec<String> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|i| {
                    let start = &start;
                    s.spawn(move || -> Result<(), String> {
                        start.wait();
                        let t = TestNs::with(&format!("heap-grow-{i}"), opts());
                        let mut got = Vec::with_capacity(BLOCKS);
                        for n in 0..BLOCKS {
                            let b = t
                                .ns
                                .heap_alloc(65536)
                                .map_err(|e| format!("thread {i}, block {n} (of 64 KiB): {e}"))?;
                            got.push(b);
                        }
                        for &b in &got {
                            t.ns.heap_free(b, 65536)
                                .map_err(|e| format!("thread {i}, free {b:#x}: {e}"))?;
                        }
                        t.ns.check()
                            .map(drop)
                            .map_err(|e| format!("thread {i}: {e}"))
                    })
                })
                .collect();
            threads
                .into_iter()
                .filter_map(|h| h.join().expect("a thread panicked").err())
                .collect()
        });
        assert!(errors.is_empty(), "round {round}: {errors:?}");
    }
}

/// Writes `v` at `off` of the arena file (as a faulty process would).
fn poke(t: &TestNs, off: u64, v: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(t.path())
        .unwrap();
    f.write_all_at(&v.to_le_bytes(), off).unwrap();
}

/// Offsets that are no 32-byte block, and counts out of range, written
/// into a cpu's stack of the smallest class: the allocations that meet
/// them skip them (leaked) and hand out real blocks; the check reports a
/// corrupt stack until its cpu's next user repairs it.
#[test]
fn hostile_cache_values_are_checked() {
    if !cached() {
        return;
    }
    let t = TestNs::with("heap-hostile", opts());
    let ns = &t.ns;
    let f = ns.facts();
    let cpu = ipcns_rseq::current_cpu();
    pin(Some(cpu as usize));
    let cpu = ipcns_rseq::current_cpu();
    let stack = f.caches + u64::from(cpu) * f.cpu_cache + f.stacks;
    // Real blocks first (to tell them from the bad ones).
    let good: Vec<u64> = (0..4).map(|_| ns.heap_alloc(32).unwrap()).collect();
    for &b in &good {
        ns.heap_free(b, 32).unwrap();
    }
    ns.check().unwrap();
    let bad = [
        1,
        f.heap_off + 8,
        f.size + 4096,
        f.size - 16,
        u64::MAX - 31,
        f.caches,
    ];
    for (i, &v) in bad.iter().enumerate() {
        poke(&t, stack + 8 + 8 * i as u64, v);
    }
    poke(&t, stack, bad.len() as u64);
    let e = ns.check().expect_err("bad offsets in a cache");
    assert!(e.contains("is no block of its class"), "{e}");
    let mut got = Vec::new();
    for _ in 0..4 {
        let b = ns.heap_alloc(32).unwrap();
        assert!(
            b.is_multiple_of(32) && b >= f.heap_off && b + 32 <= f.size,
            "{b:#x}"
        );
        assert!(!bad.contains(&b), "{b:#x} handed out");
        got.push(b);
    }
    ns.check().unwrap();
    for &b in &got {
        ns.heap_free(b, 32).unwrap();
    }
    // A count out of range: reported, then reset by the next user.
    poke(&t, stack, 1000);
    let e = ns.check().expect_err("a count of 1000");
    assert!(e.contains("count 1000"), "{e}");
    let b = ns.heap_alloc(32).unwrap();
    assert!(b.is_multiple_of(32) && b >= f.heap_off, "{b:#x}");
    ns.heap_free(b, 32).unwrap();
    ns.check().unwrap();
    poke(&t, stack, u64::MAX);
    ns.heap_free(ns.heap_alloc(32).unwrap(), 32).unwrap();
    ns.check().unwrap();
    pin(None);
}

/// The test binary's role when re-run without rseq.
const ROLE: &str = "IPCNS_HEAP_TEST_ROLE";
const PEER: &str = "IPCNS_HEAP_TEST_PEER";

/// A seccomp filter failing `rseq` with ENOSYS (x86-64): glibc's own
/// registration at start-up fails, and so does ipcns-rseq's.
fn deny_rseq() -> Vec<libc::sock_filter> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4),
        jeq(AUDIT_ARCH_X86_64, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        jeq(libc::SYS_rseq as u32, 0, 1),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// In the process without rseq: its own arena has no caches and serves it
/// under the lock (blocks, messages, a whole check); the arena of the
/// parent, whose caches need rseq, is refused.
fn without_rseq(peer: &str) {
    assert_eq!(ipcns_rseq::mode(), ipcns_rseq::Mode::Fallback);
    let t = TestNs::with("heap-norseq", opts());
    assert_eq!(t.ns.heap_stats().cache_cpus, 0);
    let log = SharedWords::new(LOG_WORDS);
    churn(&t.ns, log.words(), 0, 5000);
    assert_eq!(
        log.words()[VIOLATIONS].load(Relaxed),
        0,
        "{}",
        log_report(log.words())
    );
    let root = ipcns::Cred::root(std::process::id() as i32);
    let q =
        t.ns.msgget(&root, 0, ipcns::abi::IPC_CREAT | 0o600)
            .unwrap();
    let mut buf = [0u8; 64];
    for _ in 0..20 {
        for i in 0..16u8 {
            t.ns.msgsnd(&root, q, 1, &[i; 40], 0).unwrap();
        }
        for i in 0..16u8 {
            assert_eq!(t.ns.msgrcv(&root, q, &mut buf, 0, 0).unwrap(), (1, 40));
            assert_eq!(buf[..40], [i; 40]);
        }
    }
    t.ns.check().unwrap();
    assert_eq!(t.ns.heap_stats().cached, 0);
    let e = Namespace::open_at(std::path::Path::new(peer))
        .err()
        .expect("an arena with rseq caches is refused");
    assert!(e.to_string().contains("per-cpu data"), "{e}");
    eprintln!("heap without rseq: no caches, churn and messages under the lock, peer refused");
}

#[test]
fn heap_without_rseq_uses_the_lock() {
    const TEST: &str = "heap::heap_without_rseq_uses_the_lock";
    if std::env::var_os(ROLE).is_some() {
        without_rseq(&std::env::var(PEER).unwrap());
        return;
    }
    if !cached() {
        // Already without rseq: the scenario's peer would be refused
        // for the same reason; run it on an arena of our own.
        return;
    }
    let t = TestNs::with("heap-peer", opts());
    let prog = deny_rseq();
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "fallback")
        .env(PEER, t.path());
    // SAFETY: between fork and exec the closure makes two system calls
    // (prctl, seccomp) on a filter built before the fork, which outlives
    // them (moved into the closure).
    unsafe {
        c.pre_exec(move || {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut _,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            ipcns_sys::raw::syscall3(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER as usize,
                0,
                &raw const fprog as usize,
            )?;
            Ok(())
        });
    }
    let out = c.output().expect("run the test binary without rseq");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", out.status);
    assert!(
        err.contains("heap without rseq:"),
        "the child did not run:\n{err}"
    );
}
