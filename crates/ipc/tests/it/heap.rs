//! The heap's per-cpu caches (heap/cache.rs): refill and drain between a
//! cpu's stacks and the global lists with exact accounting; processes on
//! both cpus allocating and freeing at once, every block owned by one of
//! them at a time; churners killed at random, after which the heap is
//! still whole (nothing free twice, counts in range, the accounting within
//! what the dead held); hostile values in a cache (offsets that are no
//! block, a count out of range) checked before use; and a process without
//! rseq (a seccomp filter denies it): its arenas have no caches, the lock
//! serves it, and it cannot attach to an arena whose caches need rseq.
//!
//! IPCNS_HEAP_KILLS: how many churners the kill test kills (default 60).
//!
//! # Safety
//! `pin` and the seccomp filter make plain system calls on this thread or
//! in a forked child before exec, with structures that outlive them.
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

/// Allocates and frees at random for `rounds` rounds (forever if 0),
/// moving between cpus; every block is stamped while held and checked
/// when freed (`log[0]`: violations). `log[1 + me]`: bytes held now.
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
                    log[0].fetch_add(1, Relaxed);
                }
                stamp(ns, off, n, v);
                hand.push((off, n, v));
                held += ipcns_heap_footprint(n);
                log[1 + me as usize].store(held, Relaxed);
            }
        } else if !hand.is_empty() {
            let (off, n, v) = hand.swap_remove(rng.below(hand.len() as u64) as usize);
            if !stamped(ns, off, n, v) {
                log[0].fetch_add(1, Relaxed);
            }
            held -= ipcns_heap_footprint(n);
            log[1 + me as usize].store(held, Relaxed);
            ns.heap_free(off, n).unwrap();
        }
    }
    for (off, n, v) in hand {
        if !stamped(ns, off, n, v) {
            log[0].fetch_add(1, Relaxed);
        }
        ns.heap_free(off, n).unwrap();
    }
    log[1 + me as usize].store(0, Relaxed);
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
    let log = SharedWords::new(8);
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
        assert_eq!(support::wait_child(pid), 0);
    }
    assert_eq!(words[0].load(Relaxed), 0, "a block held by two at once");
    assert_eq!(t.ns.heap_in_use(), base);
    t.ns.check().unwrap();
    let s = t.ns.heap_stats();
    eprintln!("heap churn: 4 processes x 20000 rounds, {s:?}");
    assert!(s.listed + s.cached <= s.used);
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
    let log = SharedWords::new(8);
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
    let mut kids = [spawn(1), spawn(2)];
    let mut dead_held = 0u64;
    for _ in 0..kills {
        std::thread::sleep(Duration::from_micros(200 + rng.below(3000)));
        let k = rng.below(2) as usize;
        support::kill(kids[k]);
        assert_eq!(support::wait_child(kids[k]), -libc::SIGKILL);
        dead_held += words[2 + k].load(Relaxed);
        words[2 + k].store(0, Relaxed);
        kids[k] = spawn(k as u64 + 1);
    }
    for (k, pid) in kids.into_iter().enumerate() {
        support::kill(pid);
        support::wait_child(pid);
        dead_held += words[2 + k].load(Relaxed);
    }
    assert_eq!(words[0].load(Relaxed), 0, "a block held by two at once");
    if let Err(e) = t.ns.check() {
        panic!("after {kills} kills: {e}");
    }
    let in_use = t.ns.heap_in_use() - base;
    // Each kill may land between a block's move and its count.
    let slack = (kills + 2) * 90_112;
    assert!(
        in_use.abs_diff(dead_held) <= slack,
        "{in_use} bytes in use, the dead held {dead_held}"
    );
    let s = t.ns.heap_stats();
    eprintln!(
        "heap kills: {kills} churners killed, they held {dead_held} bytes, {in_use} in use; {s:?}"
    );
    churn(&t.ns, words, 0, 2000);
    t.ns.check().unwrap();
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
    let log = SharedWords::new(8);
    churn(&t.ns, log.words(), 0, 5000);
    assert_eq!(log.words()[0].load(Relaxed), 0);
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
