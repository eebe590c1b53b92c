//! The builder: a forked child that creates a case's arena and fills it
//! with live objects, reports where they are, and then stays alive,
//! mapping the arena (a live participant: the thread a hostile lock word
//! names when "a participant never lets go"), until the case ends.
//!
//! What it makes (the victim adds its own undo entries, attachments and
//! sleepers):
//! - S1: 8 semaphores (a heap array), with an undo entry of the builder's
//!   (P1, the second entry on S1's list once the victim has made its
//!   own); S2: 3 semaphores (kept inline in the slot); S3: 40.
//! - Q1: three queued messages; Q2: empty (the victim's receivers wait
//!   there); Q3: full (qbytes 64, 60 bytes queued: a sender waits).
//! - M1: a segment of 3 pages and 123 bytes; M2: one page.
//! - Free blocks on the heap's global lists (classes 32, 64 and 128
//!   bytes): 40 blocks of each allocated and freed, so the per-cpu caches
//!   fill and drain half-stacks to the lists.

use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::{CreateOptions, Cred, Mech, Namespace};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

pub const S1_N: i32 = 8;
pub const S2_N: i32 = 3;
pub const S3_N: i32 = 40;
pub const M1_SIZE: u64 = 3 * 4096 + 123;
pub const M2_SIZE: u64 = 4096;
/// Q3's byte limit and what it holds (a 10-byte message does not fit).
pub const Q3_QBYTES: u64 = 64;
pub const Q3_HELD: usize = 60;
/// S1's values: semaphore 1 is 0 (a decrement waits), 2 is 1 (a wait for
/// zero waits), 4 is 0 (the victim's timed waits).
pub const S1_VALS: [u16; 8] = [5, 0, 1, 3, 0, 2, 7, 0];

/// The arena options of every case (the default heap: 4 GiB, sparse).
pub fn options() -> CreateOptions {
    CreateOptions::default()
}

/// What the builder reports: named numbers (ids, offsets, layout facts).
#[derive(Debug, Clone, Default)]
pub struct Built(pub BTreeMap<String, u64>);

impl Built {
    pub fn get(&self, k: &str) -> u64 {
        *self
            .0
            .get(k)
            .unwrap_or_else(|| panic!("the builder did not report {k}"))
    }
    pub fn id(&self, k: &str) -> i32 {
        self.get(k) as i32
    }
}

/// The builder's life, in the forked child. Exits when the parent closes
/// its end of `sink` (or kills it).
pub fn builder(path: &Path, sink: UnixStream) -> i32 {
    crate::support::child_reports_to(sink.try_clone().expect("clone the report socket"));
    let ns = match Namespace::create_at(path, options()) {
        Ok(ns) => ns,
        Err(e) => {
            let _ = writeln!(&sink, "error create: {e}");
            return 1;
        }
    };
    let mut out = BTreeMap::new();
    if let Err(e) = fill(&ns, &mut out) {
        let _ = writeln!(&sink, "error {e}");
        return 1;
    }
    let mut text = String::new();
    for (k, v) in &out {
        text.push_str(&format!("{k} {v}\n"));
    }
    text.push_str("built\n");
    let _ = (&sink).write_all(text.as_bytes());
    // Alive and mapping the arena until the parent is done.
    let mut buf = [0u8; 64];
    let _ = (&sink).read(&mut buf);
    // Never runs the library's exit on the arena the test corrupted.
    std::mem::forget(ns);
    0
}

fn fill(ns: &Namespace, out: &mut BTreeMap<String, u64>) -> Result<(), String> {
    let me = Cred::root(std::process::id() as i32);
    let flg = IPC_CREAT | IPC_EXCL | 0o600;
    let e = |what: &str| {
        let what = what.to_string();
        move |x: ipcns::Errno| format!("{what}: {}", x.name())
    };
    let s1 = ns
        .semget(&me, 0x7a11_0001, S1_N, flg)
        .map_err(e("semget S1"))?;
    let s2 = ns.semget(&me, 0, S2_N, flg).map_err(e("semget S2"))?;
    let s3 = ns
        .semget(&me, 0x7a11_0003, S3_N, flg)
        .map_err(e("semget S3"))?;
    let mut v1 = S1_VALS;
    ns.semctl(&me, s1, 0, SETALL, SemArg::Array(&mut v1))
        .map_err(e("SETALL S1"))?;
    let mut v2 = [1u16; S2_N as usize];
    ns.semctl(&me, s2, 0, SETALL, SemArg::Array(&mut v2))
        .map_err(e("SETALL S2"))?;
    let mut v3 = [4u16; S3_N as usize];
    ns.semctl(&me, s3, 0, SETALL, SemArg::Array(&mut v3))
        .map_err(e("SETALL S3"))?;
    // P1: the builder's undo entry on S1.
    let undo = sembuf {
        sem_num: 0,
        sem_op: 1,
        sem_flg: SEM_UNDO,
    };
    ns.semop(&me, s1, &[undo]).map_err(e("semop S1 SEM_UNDO"))?;
    let q1 = ns.msgget(&me, 0x7a11_0011, flg).map_err(e("msgget Q1"))?;
    let q2 = ns.msgget(&me, 0x7a11_0012, flg).map_err(e("msgget Q2"))?;
    let q3 = ns.msgget(&me, 0, flg).map_err(e("msgget Q3"))?;
    for (t, n) in [(1, 10), (2, 300), (3, 5000)] {
        ns.msgsnd(&me, q1, t, &vec![t as u8; n], IPC_NOWAIT)
            .map_err(e("msgsnd Q1"))?;
    }
    let mut ds = msqid64_ds::default();
    ns.msgctl(&me, q3, IPC_STAT, MsgArg::Ds(&mut ds))
        .map_err(e("IPC_STAT Q3"))?;
    ds.msg_qbytes = Q3_QBYTES;
    ns.msgctl(&me, q3, IPC_SET, MsgArg::Ds(&mut ds))
        .map_err(e("IPC_SET Q3"))?;
    ns.msgsnd(&me, q3, 1, &[3u8; Q3_HELD], IPC_NOWAIT)
        .map_err(e("msgsnd Q3"))?;
    let m1 = ns
        .shmget(&me, 0x7a11_0021, M1_SIZE, flg)
        .map_err(e("shmget M1"))?;
    let m2 = ns.shmget(&me, 0, M2_SIZE, flg).map_err(e("shmget M2"))?;
    // Free blocks on the global lists.
    for class in [32u64, 64, 128] {
        let blocks: Vec<u64> = (0..40)
            .map(|_| ns.heap_alloc(class))
            .collect::<Result<_, _>>()
            .map_err(e("heap_alloc"))?;
        for b in blocks {
            ns.heap_free(b, class).map_err(e("heap_free"))?;
        }
    }
    let ids = [
        ("s1", Mech::Sem, s1),
        ("s2", Mech::Sem, s2),
        ("s3", Mech::Sem, s3),
        ("q1", Mech::Msg, q1),
        ("q2", Mech::Msg, q2),
        ("q3", Mech::Msg, q3),
        ("m1", Mech::Shm, m1),
        ("m2", Mech::Shm, m2),
    ];
    let regions = ns.regions();
    for (name, m, id) in ids {
        out.insert(name.to_string(), id as u32 as u64);
        let want = format!("{}.slot[{}]", m.name(), id as u32 & 0x7fff);
        let r = regions
            .iter()
            .find(|r| r.name == want)
            .ok_or_else(|| format!("no region {want}"))?;
        out.insert(format!("slot.{name}"), r.off);
    }
    let f = ns.facts();
    out.insert("size".into(), f.size);
    out.insert("heap_off".into(), f.heap_off);
    out.insert("registries".into(), f.registries);
    out.insert("heap_state".into(), f.heap_state);
    out.insert("caches".into(), f.caches);
    out.insert("cache_cpus".into(), u64::from(f.cache_cpus));
    out.insert("cpu_cache".into(), f.cpu_cache);
    out.insert("stacks".into(), f.stacks);
    out.insert("stack".into(), f.stack);
    out.insert("pid".into(), u64::from(std::process::id()));
    Ok(())
}

/// Reads the builder's report (up to "built"), or what went wrong.
pub fn read_built(sock: &UnixStream) -> Result<Built, String> {
    let mut r = BufReader::new(sock.try_clone().map_err(|e| e.to_string())?);
    let mut built = Built::default();
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(format!("the builder ended before reporting: {built:?}")),
            Ok(_) => {}
        }
        let l = line.trim_end();
        if l == "built" {
            return Ok(built);
        }
        match l.split_once(' ') {
            Some((k, v)) if v.parse::<u64>().is_ok() => {
                built.0.insert(k.to_string(), v.parse().unwrap_or(0));
            }
            _ => return Err(format!("builder: {l}")),
        }
    }
}
