//! Free-list integrity: threads of three processes push and pop the same
//! per-cpu lists in a shared file mapping, moving between cpus; every element
//! popped is owned by exactly one thread, and at the end every element is on
//! a list exactly once. Then a region of 8 GiB, whose blocks past 4 GiB are
//! reached by index, and corrupt heads and links next to an unmapped page.
//! In all three modes.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::{BadIndex, FreeList, PerCpu};
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
    let list = unsafe { FreeList::new(heads, shm.ptr.add(region), ELEM, ELEMS as u32) };
    (list, unsafe {
        AtomicU64::from_ptr(shm.ptr.add(violations).cast())
    })
}

fn owner(shm: &Shared, i: u32) -> &AtomicU32 {
    unsafe { AtomicU32::from_ptr(shm.ptr.add(layout().0 + i as usize * ELEM + 4).cast()) }
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
            if let Some(i) = list.pop().unwrap() {
                if owner(shm, i)
                    .compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    violations.fetch_add(1, Ordering::Relaxed);
                }
                hand.push(i);
            }
        } else if let Some(i) = hand.pop() {
            if owner(shm, i)
                .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                violations.fetch_add(1, Ordering::Relaxed);
            }
            list.push(i).unwrap();
        }
    }
    for i in hand {
        if owner(shm, i)
            .compare_exchange(me, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            violations.fetch_add(1, Ordering::Relaxed);
        }
        list.push(i).unwrap();
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
    for i in 0..ELEMS as u32 {
        list.push(i).unwrap();
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
    let all = list.take_all().unwrap();
    let want: Vec<u32> = (0..ELEMS as u32).collect();
    eprintln!(
        "[freelist] mode {}: {} processes x {THREADS} threads x {ROUNDS} rounds, {} elements back, {} ownership violations",
        ipcns_rseq::mode(),
        3,
        all.len(),
        violations.load(Ordering::Relaxed)
    );
    assert_eq!(violations.load(Ordering::Relaxed), 0);
    assert_eq!(all, want, "every element exactly once");
    for i in 0..ELEMS as u32 {
        assert_eq!(owner(&shm, i).load(Ordering::Relaxed), 0);
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

const BIG: usize = 8 << 30;
const BLOCK: usize = 32;
const PAGE: usize = 4096;
const BIG_ROUNDS: usize = 50_000;

/// `BIG` bytes of private anonymous memory reserved with `MAP_NORESERVE`
/// (pages exist once touched), followed by one inaccessible page, so that
/// reading the block just past the last one faults. Unmapped on drop.
struct Big(*mut u8);

// SAFETY: raw memory, accessed through atomics and the list's operations.
unsafe impl Sync for Big {}

impl Big {
    fn map() -> Big {
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                BIG + PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap of {BIG} bytes with MAP_NORESERVE: {}",
            std::io::Error::last_os_error()
        );
        let p = p.cast::<u8>();
        let guard = unsafe { libc::mprotect(p.add(BIG).cast(), PAGE, libc::PROT_NONE) };
        assert_eq!(guard, 0, "mprotect: {}", std::io::Error::last_os_error());
        Big(p)
    }

    fn word(&self, i: u32, at: usize) -> &AtomicU32 {
        unsafe { AtomicU32::from_ptr(self.0.add(i as usize * BLOCK + at).cast()) }
    }
}

impl Drop for Big {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.0.cast(), BIG + PAGE) };
    }
}

/// The heads of a heap-allocated set, and a way to overwrite all of them (a
/// corrupting process) while a `FreeList` owns them.
fn heads_with_handle() -> (PerCpu<AtomicU64>, impl Fn(u32)) {
    let heads = FreeList::new_heads();
    let words: Vec<usize> = heads
        .iter()
        .map(|h| h as *const AtomicU64 as usize)
        .collect();
    let set = move |enc: u32| {
        for &w in &words {
            unsafe { &*(w as *const AtomicU64) }.store(u64::from(enc), Ordering::Relaxed);
        }
    };
    (heads, set)
}

/// An 8 GiB region of 32-byte blocks (2^28 indexes): blocks past 4 GiB are
/// linked at the right addresses, threads pop and push them with exclusive
/// ownership, the rest of each block is untouched, and corrupt heads and
/// links (pointing at the guard page or further) are reported, not read.
fn big_region() {
    let big = Big::map();
    let blocks = (BIG / BLOCK) as u32;
    let above_4g = ((4usize << 30) / BLOCK) as u32;
    let (heads, set_heads) = heads_with_handle();
    let mut list = unsafe { FreeList::new(heads, big.0, BLOCK, blocks) };
    assert_eq!(list.push(blocks), Err(BadIndex(blocks)));

    // Links land at region + index * 32, beyond 4 GiB: pinned to one cpu,
    // push a then b; b's link is a + 1, a's is 0 (end of list).
    let (a, b) = (above_4g + 3, blocks - 1);
    set_affinity(gettid(), Some(ipcns_rseq::current_cpu() as usize));
    big.word(a, 0).store(0xdead, Ordering::Relaxed);
    list.push(a).unwrap();
    list.push(b).unwrap();
    assert_eq!(big.word(b, 0).load(Ordering::Relaxed), a + 1);
    assert_eq!(big.word(a, 0).load(Ordering::Relaxed), 0);
    assert_eq!(list.pop(), Ok(Some(b)));
    assert_eq!(list.pop(), Ok(Some(a)));
    assert_eq!(list.pop(), Ok(None));
    set_affinity(gettid(), None);

    // Mostly past 4 GiB (and the last block), a few below; each block's
    // bytes 8..12 hold a pattern that no list operation may touch.
    let mut elems: Vec<u32> = (above_4g..blocks).step_by(262_147).collect();
    elems.extend([0, 1, 1000, above_4g - 1, blocks - 1]);
    elems.sort_unstable();
    elems.dedup();
    for &i in &elems {
        big.word(i, 4).store(0, Ordering::Relaxed);
        big.word(i, 8).store(i ^ 0x5a5a_5a5a, Ordering::Relaxed);
        list.push(i).unwrap();
    }
    let violations = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 1..=THREADS as u32 {
            let (list, big, violations) = (&list, &big, &violations);
            s.spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ u64::from(t));
                let mut hand = Vec::new();
                for round in 0..BIG_ROUNDS {
                    if round.is_multiple_of(1000) {
                        let cpu = (rng.next() % 3) as usize;
                        set_affinity(gettid(), (cpu < 2).then_some(cpu));
                    }
                    if hand.len() < 4 && rng.next().is_multiple_of(2) {
                        if let Some(i) = list.pop().unwrap() {
                            if big.word(i, 4).swap(t, Ordering::AcqRel) != 0 {
                                violations.fetch_add(1, Ordering::Relaxed);
                            }
                            hand.push(i);
                        }
                    } else if let Some(i) = hand.pop() {
                        if big.word(i, 4).swap(0, Ordering::AcqRel) != t {
                            violations.fetch_add(1, Ordering::Relaxed);
                        }
                        list.push(i).unwrap();
                    }
                }
                for i in hand {
                    big.word(i, 4).store(0, Ordering::Release);
                    list.push(i).unwrap();
                }
                set_affinity(gettid(), None);
            });
        }
    });
    assert_eq!(violations.load(Ordering::Relaxed), 0);
    assert_eq!(list.take_all(), Ok(elems.clone()));
    for &i in &elems {
        assert_eq!(big.word(i, 8).load(Ordering::Relaxed), i ^ 0x5a5a_5a5a);
    }

    // A head one block past the end (the guard page) or far beyond.
    for enc in [blocks + 1, u32::MAX] {
        set_heads(enc);
        assert_eq!(list.pop(), Err(BadIndex(enc - 1)));
        assert_eq!(list.take_all(), Err(BadIndex(enc - 1)));
        assert_eq!(list.pop(), Ok(None), "take_all empties corrupt lists");
    }
    // A link to the guard page: its block is popped (once per cpu the
    // thread visits), then the link is the head and is reported.
    big.word(b, 0).store(blocks + 1, Ordering::Relaxed);
    set_heads(b + 1);
    let mut pops = 0;
    let err = loop {
        match list.pop() {
            Ok(got) => assert_eq!(got, Some(b)),
            Err(e) => break e,
        }
        pops += 1;
        assert!(pops <= list.cpus(), "{pops} pops of a corrupt list");
    };
    assert_eq!(err, BadIndex(blocks));
    assert_eq!(list.take_all(), Err(BadIndex(blocks)));
    eprintln!(
        "[freelist big] mode {}: {} blocks of {BLOCK} bytes ({} GiB), {} elements ({} past 4 GiB), {THREADS} threads x {BIG_ROUNDS} rounds, corrupt heads and links reported",
        ipcns_rseq::mode(),
        blocks,
        BIG >> 30,
        elems.len(),
        elems.iter().filter(|&&i| i >= above_4g).count(),
    );
    drop(list);
}

#[test]
fn freelist_region_above_4gib() {
    in_all_modes("freelist_region_above_4gib", big_region);
}
