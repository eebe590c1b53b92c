//! Sleepers for the corruption fuzzer (fuzz.rs): forked children blocked
//! in semop on a healthy arena, each until it sleeps, then killed, so that
//! their waiter records stay queued; the bytes they changed (queue heads in
//! the sets' slots, records and saved operations in the heap) as regions;
//! and corruptions aimed there, among them links that make a queue a cycle
//! or share a tail (a record's `next` is at +8, wait.rs's Layout).

use crate::corrupt::{self, Made, Region, Rng};
use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::{Cred, Namespace};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// GETNCNT + GETZCNT over a set: its sleepers.
fn queued(ns: &Namespace, root: &Cred, id: i32, nsems: i32) -> i32 {
    (0..nsems)
        .map(|n| {
            ns.semctl(root, id, n, GETNCNT, SemArg::None).unwrap_or(0)
                + ns.semctl(root, id, n, GETZCNT, SemArg::None).unwrap_or(0)
        })
        .sum()
}

/// The state letter of a process (/proc/PID/stat), if it exists.
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The ranges of the arena file worth watching for sleepers: the sets'
/// slots (queue heads) and the heap's used part (records, operations).
fn watched(ns: &Namespace) -> Vec<(u64, u64)> {
    corrupt::regions(ns)
        .into_iter()
        .filter(|r| {
            r.name == "heap.used" || (r.name.starts_with("sem.slot[") && r.name.ends_with(']'))
        })
        .map(|r| (r.off, r.len))
        .collect()
}

fn read_at(path: &Path, off: u64, len: u64) -> Vec<u8> {
    let f = std::fs::File::open(path).expect("open the arena file");
    let mut b = vec![0u8; len as usize];
    f.read_exact_at(&mut b, off).expect("read the arena file");
    b
}

/// Blocks 1 to 3 forked children in semop on sets of the healthy arena
/// (a decrement that must wait, a wait for zero, or both in one call),
/// each until it sleeps, then kills them all: their records stay queued.
/// Returns the byte ranges they changed, as regions, and what was done.
pub fn add_sleepers(t: &TestNs, made: &Made, rng: &mut Rng) -> (Vec<Region>, Vec<String>) {
    if made.sems.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let root = Cred::root(std::process::id() as i32);
    let before: Vec<(u64, Vec<u8>)> = watched(&t.ns)
        .into_iter()
        .map(|(off, len)| (off, read_at(t.path(), off, len)))
        .collect();
    let mut pids = Vec::new();
    let mut said = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let &(id, _, n) = rng.pick(&made.sems);
        let (a, b) = (rng.below(n as u64) as u16, rng.below(n as u64) as u16);
        let sop = |num, op| sembuf {
            sem_num: num,
            sem_op: op,
            sem_flg: 0,
        };
        let sops = match rng.below(3) {
            0 => vec![sop(a, i16::MIN)],
            1 => {
                let v = 1 + rng.below(100) as i32;
                let _ = t.ns.semctl(&root, id, i32::from(a), SETVAL, SemArg::Val(v));
                vec![sop(a, 0)]
            }
            _ => vec![sop(a, 1), sop(b, i16::MIN)],
        };
        let was = queued(&t.ns, &root, id, n);
        let path = t.path().to_path_buf();
        let ops = sops.clone();
        let pid = support::fork_child(move || {
            let Ok(ns) = Namespace::open_at(&path) else {
                return 1;
            };
            let _ = ns.semop(&Cred::root(std::process::id() as i32), id, &ops);
            0
        });
        // Queued, then asleep in the kernel (its record says SLEEPING).
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2)
            && (queued(&t.ns, &root, id, n) <= was || proc_state(pid) != Some('S'))
            && proc_state(pid) != Some('Z')
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        let asleep = queued(&t.ns, &root, id, n) > was && proc_state(pid) == Some('S');
        said.push(format!(
            "sleeper on set {id}{}: {sops:?}",
            if asleep { "" } else { " (never slept)" }
        ));
        pids.push(pid);
    }
    for &pid in &pids {
        support::kill(pid);
        support::wait_child(pid);
    }
    // What changed: byte runs closer than 32 apart merged, 8-aligned.
    let mut regions = Vec::new();
    let heap_off = t.ns.facts().heap_off;
    for (off, len) in watched(&t.ns) {
        let now = read_at(t.path(), off, len);
        let old = before.iter().find(|(o, _)| *o == off).map(|(_, b)| b);
        let changed: Vec<u64> = (0..len)
            .filter(|&i| {
                let was = old.and_then(|b| b.get(i as usize)).copied().unwrap_or(0);
                now[i as usize] != was
            })
            .collect();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for i in changed {
            match runs.last_mut() {
                Some((_, end)) if i < *end + 32 => *end = i + 1,
                _ => runs.push((i, i + 1)),
            }
        }
        for (lo, hi) in runs {
            let (lo, hi) = (off + lo / 8 * 8, off + hi.div_ceil(8) * 8);
            let kind = if lo >= heap_off {
                "sem.sleeper"
            } else {
                "sem.sleeper.head"
            };
            regions.push(Region {
                name: format!("{kind}[{}]", regions.len()),
                off: lo,
                len: hi - lo,
            });
        }
    }
    (regions, said)
}

/// One corruption among the sleepers' bytes: random (corrupt.rs), or a
/// link, a word (often a record's `next`, at +8) made to point at a
/// record, its own or another's, or at the heap's start.
pub fn corrupt_sleepers(ns: &Namespace, path: &Path, sleepers: &[Region], rng: &mut Rng) -> String {
    if rng.chance(1, 2) {
        return corrupt::corrupt(ns, path, sleepers, rng);
    }
    let heap_off = ns.facts().heap_off;
    let r = rng.pick(sleepers);
    let base = r.off / 64 * 64;
    let at = if r.off >= heap_off && rng.chance(1, 2) {
        base + 8
    } else {
        r.off + rng.below((r.len / 8).max(1)) * 8
    };
    let records: Vec<u64> = sleepers
        .iter()
        .filter(|s| s.off >= heap_off)
        .map(|s| s.off / 64 * 64)
        .collect();
    let value = match rng.below(4) {
        0 if !records.is_empty() => *rng.pick(&records),
        1 => base,
        2 => base + 64,
        _ => heap_off,
    };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the arena file");
    f.write_all_at(&value.to_le_bytes(), at)
        .expect("pwrite the arena file");
    let rel = i128::from(at) - i128::from(r.off);
    format!("link {value:#x} at {}{rel:+} ({at:#x})", r.name)
}
