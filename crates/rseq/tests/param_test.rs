//! The scenarios of the kernel's rseq `param_test`
//! (tools/testing/selftests/rseq/param_test.c: spinlock, list, buffer,
//! increment), rewritten over this library, each in all three modes, with
//! more threads than cpus.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::{FreeList, Index, Outcome, PerCpu, PerCpuCounter, current_cpu, ops};
use std::sync::atomic::{AtomicU64, Ordering};

const THREADS: usize = 5;
const REPS: u64 = 100_000;

fn threads(f: impl Fn(usize) + Sync) {
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let f = &f;
            s.spawn(move || f(t));
        }
    });
}

/// Per-cpu spinlock taken with load-compare-store on the current cpu's lock
/// word; the data of that cpu is then updated with plain loads and stores.
fn spinlock() {
    let locks = PerCpu::new(|_| AtomicU64::new(0));
    let data = PerCpu::new(|_| AtomicU64::new(0));
    let s = locks.slots();
    threads(|_| {
        for _ in 0..REPS {
            let cpu = loop {
                match unsafe { ops::cmp_store(&s, Index::Cpu, 0, 0, 1) } {
                    Outcome::Success { slot, .. } => break slot as usize,
                    Outcome::Miss { .. } => std::thread::yield_now(),
                    Outcome::Abort => {}
                }
            };
            let d = data.get(cpu).unwrap();
            d.store(d.load(Ordering::Relaxed) + 1, Ordering::Relaxed); // protected by the lock
            locks.get(cpu).unwrap().store(0, Ordering::Release);
        }
    });
    let total: u64 = data.iter().map(|d| d.load(Ordering::Relaxed)).sum();
    eprintln!(
        "[param spinlock] mode {}: total {total}",
        ipcns_rseq::mode()
    );
    assert_eq!(total, THREADS as u64 * REPS);
}

#[test]
fn param_spinlock() {
    in_all_modes("param_spinlock", spinlock);
}

/// Per-cpu linked lists: each thread pops a node from its cpu and pushes it
/// back (maybe on another cpu); at the end every node is there once and the
/// sum of their data is unchanged.
fn list() {
    const NODES: usize = 100;
    let mut region = vec![0u64; NODES * 2]; // node: link (4 bytes) + pad, data
    for i in 0..NODES {
        region[2 * i + 1] = i as u64 + 1;
    }
    let base = region.as_mut_ptr().cast::<u8>();
    let mut l = unsafe { FreeList::new(FreeList::new_heads(), base, 16, NODES as u32) };
    for i in 0..NODES as u32 {
        l.push(i).unwrap();
    }
    let shared = &l;
    threads(|_| {
        for _ in 0..REPS {
            if let Some(i) = shared.pop().unwrap() {
                shared.push(i).unwrap();
            }
        }
    });
    let all = l.take_all().unwrap();
    let sum: u64 = all.iter().map(|&i| region[2 * i as usize + 1]).sum();
    eprintln!(
        "[param list] mode {}: {} nodes, data sum {sum}",
        ipcns_rseq::mode(),
        all.len()
    );
    assert_eq!(all, (0..NODES as u32).collect::<Vec<_>>());
    assert_eq!(sum, (NODES as u64 * (NODES as u64 + 1)) / 2);
}

#[test]
fn param_list() {
    in_all_modes("param_list", list);
}

const CAP: usize = 400;

/// One cpu's buffer: an offset and an array of items.
#[repr(C)]
struct Buffer {
    offset: AtomicU64,
    array: [AtomicU64; CAP],
}

const ARRAY: usize = core::mem::offset_of!(Buffer, array);

fn buffer_push(b: &PerCpu<Buffer>, item: u64) -> bool {
    loop {
        let off = b
            .get(current_cpu() as usize)
            .unwrap()
            .offset
            .load(Ordering::Relaxed);
        if off == ops::BUSY {
            continue; // a fallback-mode commit in progress
        }
        if off as usize == CAP {
            return false;
        }
        // try-store the item at array[off], then commit offset = off + 1.
        match unsafe {
            ops::cmp_trystore_store(
                &b.slots(),
                Index::Cpu,
                0,
                off,
                ARRAY + 8 * off as usize,
                item,
                off + 1,
            )
        } {
            Outcome::Success { .. } => return true,
            Outcome::Miss { .. } | Outcome::Abort => {}
        }
    }
}

fn buffer_pop(b: &PerCpu<Buffer>) -> Option<u64> {
    loop {
        let slot = b.get(current_cpu() as usize).unwrap();
        let off = slot.offset.load(Ordering::Acquire);
        if off == 0 || off == ops::BUSY {
            if off == 0 {
                return None;
            }
            continue;
        }
        let head = slot.array[off as usize - 1].load(Ordering::Relaxed);
        // commit offset = off - 1 if offset and array[off - 1] are unchanged.
        match unsafe {
            ops::cmp_cmp_store(
                &b.slots(),
                Index::Cpu,
                0,
                off,
                ARRAY + 8 * (off as usize - 1),
                head,
                off - 1,
            )
        } {
            Outcome::Success { .. } => return Some(head),
            Outcome::Miss { .. } | Outcome::Abort => {}
        }
    }
}

/// Per-cpu array buffers (try-store then store to push, double compare to
/// pop): each thread pops an item and pushes it back; at the end every item
/// is present once.
fn buffer() {
    let per_cpu = CAP / ipcns_rseq::possible_cpus().max(1);
    let mut next = 1u64;
    let b = PerCpu::new(|_| {
        let buf = Buffer {
            offset: AtomicU64::new(0),
            array: core::array::from_fn(|_| AtomicU64::new(0)),
        };
        for i in 0..per_cpu {
            buf.array[i].store(next, Ordering::Relaxed);
            next += 1;
        }
        buf.offset.store(per_cpu as u64, Ordering::Relaxed);
        buf
    });
    let items = next - 1;
    threads(|_| {
        for _ in 0..REPS {
            if let Some(x) = buffer_pop(&b) {
                assert!(buffer_push(&b, x), "buffer full");
            }
        }
    });
    let mut all: Vec<u64> = b
        .iter()
        .flat_map(|s| {
            (0..s.offset.load(Ordering::Relaxed) as usize)
                .map(|i| s.array[i].load(Ordering::Relaxed))
        })
        .collect();
    all.sort_unstable();
    eprintln!(
        "[param buffer] mode {}: {} items back of {items}",
        ipcns_rseq::mode(),
        all.len()
    );
    assert_eq!(all, (1..=items).collect::<Vec<_>>());
}

#[test]
fn param_buffer() {
    in_all_modes("param_buffer", buffer);
}

/// Per-cpu counters incremented with load-add-store.
fn increment() {
    let c = PerCpuCounter::new();
    threads(|_| (0..REPS).for_each(|_| c.inc()));
    eprintln!("[param increment] mode {}: {}", ipcns_rseq::mode(), c.sum());
    assert_eq!(c.sum(), (THREADS as u64 * REPS) as i64);
}

#[test]
fn param_increment() {
    in_all_modes("param_increment", increment);
}
