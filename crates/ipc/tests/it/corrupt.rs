//! The corruption engine of the fuzzers, shared by the core's
//! (tests/it/fuzz.rs) and the command's (crates/cli/tests/cli/fuzz.rs,
//! which includes this file by path): a seeded generator, a namespace
//! populated with objects of every kind, and corruptions written through
//! the arena file (pwrite, not the mapping) over the regions that
//! `Namespace::regions` names.
#![allow(dead_code)]

use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Cred, Namespace, SysResult};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// splitmix64: small, seedable, good enough to pick corruptions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// The generator of case `case` of a run seeded with `seed`.
pub fn case_rng(seed: u64, case: u64) -> Rng {
    let mut r = Rng::new(seed ^ case.wrapping_mul(0xd6e8_feb8_6659_fd93));
    r.next();
    r
}

/// An unsigned number from the environment (decimal or 0x hex).
pub fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(s) => {
            let s = s.trim();
            let v = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            v.unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
        }
        Err(_) => default,
    }
}

/// `semctl(id, 0, SETALL, vals)`.
pub fn setall(ns: &Namespace, cred: &Cred, id: i32, vals: &mut [u16]) -> SysResult<i32> {
    ns.semctl(cred, id, 0, SETALL, SemArg::Array(&mut &mut *vals))
}

/// `semctl(id, 0, GETALL, out)`.
pub fn getall(ns: &Namespace, cred: &Cred, id: i32, out: &mut [u16]) -> SysResult<i32> {
    ns.semctl(cred, id, 0, GETALL, SemArg::Array(&mut &mut *out))
}

/// What [`populate`] left in the namespace.
#[derive(Debug, Clone, Default)]
pub struct Made {
    /// (id, key, nsems) of each set.
    pub sems: Vec<(i32, i32, i32)>,
    /// (id, key) of each queue.
    pub msgs: Vec<(i32, i32)>,
    /// (id, key, size) of each segment.
    pub shms: Vec<(i32, i32, u64)>,
    /// Keys of removed objects (absent now).
    pub gone: Vec<i32>,
}

fn key(rng: &mut Rng) -> i32 {
    if rng.chance(1, 3) {
        IPC_PRIVATE
    } else {
        0x1000 + rng.below(300) as i32
    }
}

/// `IPC_PRIVATE`.
pub const IPC_PRIVATE: i32 = 0;

/// Creates sets (1 to 40 semaphores, keyed or private, SETALL values),
/// queues and segments, some at ids asked for through `*_next_id`, removes
/// a few (free lists, key deletions), and leaves a `sem_next_id` pending.
pub fn populate(ns: &Namespace, rng: &mut Rng) -> Made {
    let root = Cred::root(std::process::id() as i32);
    let flg = IPC_CREAT | IPC_EXCL | 0o600;
    let mut made = Made::default();
    for _ in 0..2 + rng.below(10) {
        if rng.chance(1, 4) {
            let id = (rng.below(4) << 15) + rng.below(64);
            let _ = ns.sysctl_write(&root, "sem_next_id", &id.to_string());
        }
        let (k, n) = (key(rng), 1 + rng.below(40) as i32);
        if let Ok(id) = ns.semget(&root, k, n, flg) {
            let mut vals: Vec<u16> = (0..n).map(|_| rng.below(32768) as u16).collect();
            let _ = setall(ns, &root, id, &mut vals);
            made.sems.push((id, k, n));
        }
    }
    for _ in 0..rng.below(6) {
        if rng.chance(1, 4) {
            let _ = ns.sysctl_write(&root, "msg_next_id", &rng.below(64).to_string());
        }
        let k = key(rng);
        if let Ok(id) = ns.msgget(&root, k, flg) {
            made.msgs.push((id, k));
            // Messages queued, some taken back: their blocks stay queued,
            // cached by the queue, or free in the heap's per-cpu caches.
            let text = vec![0x6du8; 8192];
            let mut buf = vec![0u8; 8192];
            for _ in 0..rng.below(6) {
                let bits = 3 + rng.below(11);
                let len = rng.below(1 << bits) as usize;
                let _ = ns.msgsnd(&root, id, 1 + rng.below(3) as i64, &text[..len], IPC_NOWAIT);
            }
            for _ in 0..rng.below(4) {
                let _ = ns.msgrcv(&root, id, &mut buf, 0, IPC_NOWAIT);
            }
        }
    }
    for _ in 0..rng.below(5) {
        let (k, size) = (key(rng), 1 + rng.below(1 << 20));
        if let Ok(id) = ns.shmget(&root, k, size, flg) {
            made.shms.push((id, k, size));
        }
    }
    for _ in 0..1 + rng.below(4) {
        remove_one(ns, &root, rng, &mut made);
    }
    if rng.chance(1, 2) {
        let _ = ns.sysctl_write(&root, "sem_next_id", &rng.below(128).to_string());
    }
    made
}

fn remove_one(ns: &Namespace, root: &Cred, rng: &mut Rng, made: &mut Made) {
    match rng.below(3) {
        0 if !made.sems.is_empty() => {
            let (id, k, _) = made
                .sems
                .swap_remove(rng.below(made.sems.len() as u64) as usize);
            let _ = ns.semctl(root, id, 0, IPC_RMID, SemArg::None);
            made.gone.push(k);
        }
        1 if !made.msgs.is_empty() => {
            let (id, k) = made
                .msgs
                .swap_remove(rng.below(made.msgs.len() as u64) as usize);
            let _ = ns.msgctl(root, id, IPC_RMID, MsgArg::None);
            made.gone.push(k);
        }
        2 if !made.shms.is_empty() => {
            let (id, k, _) = made
                .shms
                .swap_remove(rng.below(made.shms.len() as u64) as usize);
            let _ = ns.shmctl(root, id, IPC_RMID, ShmArg::None);
            made.gone.push(k);
        }
        _ => {}
    }
}

/// A named byte range of the arena, as `Namespace::regions` lists it.
#[derive(Debug, Clone)]
pub struct Region {
    pub name: String,
    pub off: u64,
    pub len: u64,
}

pub fn regions(ns: &Namespace) -> Vec<Region> {
    ns.regions()
        .into_iter()
        .map(|r| Region {
            name: r.name,
            off: r.off,
            len: r.len,
        })
        .collect()
}

/// A region's kind: its name without indexes (`sem.slot[3].lock` is
/// `sem.slot.lock`), so that the many slots do not crowd out the header.
fn category(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Picks a region: a kind uniformly, then a region of that kind.
pub fn pick_region<'a>(regions: &'a [Region], rng: &mut Rng) -> &'a Region {
    let mut kinds: Vec<String> = regions.iter().map(|r| category(&r.name)).collect();
    kinds.sort();
    kinds.dedup();
    let kind = rng.pick(&kinds).clone();
    let of_kind: Vec<usize> = (0..regions.len())
        .filter(|&i| category(&regions[i].name) == kind)
        .collect();
    &regions[*rng.pick(&of_kind)]
}

/// Values a faulty participant might leave in a word: limits, all ones,
/// sign bits, small offsets, offsets at and past the end, offsets into the
/// header and the heap's first block.
fn extreme(rng: &mut Rng, f: &ipcns::regions::Facts) -> u64 {
    let (size, heap_off, regs, heap) = (f.size, f.heap_off, f.registries, f.heap_state);
    let v = [
        0,
        1,
        2,
        u64::MAX,
        u64::from(u32::MAX),
        0x7fff_ffff,
        0x8000_0000,
        i32::MIN as i64 as u64,
        i64::MAX as u64,
        1 << 63,
        1 << 32,
        8,
        24,
        32,
        64,
        4096,
        0x1_0000,
        size,
        size - 4,
        size - 8,
        size - 32,
        size - 4096,
        size + 4096,
        heap_off,
        heap_off - 8,
        heap_off + 32,
        regs,
        heap,
        rng.next(),
    ];
    *rng.pick(&v)
}

/// Writes one corruption over a region picked from `regions` through the
/// arena file at `path`; says what it did.
pub fn corrupt(ns: &Namespace, path: &Path, regions: &[Region], rng: &mut Rng) -> String {
    let facts = ns.facts();
    let r = pick_region(regions, rng);
    let at = |x: u64| r.off + x.min(r.len.saturating_sub(1));
    let (off, bytes, what) = match rng.below(4) {
        0 => {
            let n = 1 + rng.below(r.len.min(64));
            let off = at(rng.below(r.len - n + 1));
            let b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            (off, b, format!("{n} random bytes"))
        }
        1 => {
            let w = if r.len >= 8 && rng.chance(1, 2) {
                8
            } else if r.len >= 4 {
                4
            } else {
                r.len
            };
            let off = r.off + rng.below(r.len / w) * w;
            let b = extreme(rng, &facts).to_le_bytes()[..w as usize].to_vec();
            let v = b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x));
            (off, b, format!("u{} {v:#x}", w * 8))
        }
        2 => {
            let n = 1 + rng.below(r.len.min(512));
            let off = at(rng.below(r.len - n + 1));
            let any = rng.next() as u8;
            let fill = *rng.pick(&[0x00u8, 0xff, 0x41, 0x80, 0x7f, any]);
            (
                off,
                vec![fill; n as usize],
                format!("{n} bytes of {fill:#04x}"),
            )
        }
        _ => {
            let page = at(rng.below(r.len)) / 4096 * 4096;
            if page == 0 {
                // The header's page holds the magic number: zeroing it all
                // would only test the attach check, so zero the region.
                (r.off, vec![0; r.len as usize], "zeroed".to_string())
            } else {
                let n = 4096.min(facts.size - page);
                (page, vec![0; n as usize], "a zeroed 4 KiB page".to_string())
            }
        }
    };
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the arena file");
    f.write_all_at(&bytes, off).expect("pwrite the arena file");
    let rel = i128::from(off) - i128::from(r.off);
    format!("{what} at {}{rel:+} ({off:#x})", r.name)
}

/// Removes the segment files of the arena at `path` when dropped, even
/// as a failing test unwinds.
pub struct SegmentFiles(pub std::path::PathBuf);

impl Drop for SegmentFiles {
    fn drop(&mut self) {
        remove_segments(&self.0);
    }
}

/// Removes the backing files of the segments of the arena at `path`.
pub fn remove_segments(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!("{}.shm.", name.to_string_lossy());
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
