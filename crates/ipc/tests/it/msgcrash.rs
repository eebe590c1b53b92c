//! Crash safety of msgsnd and msgrcv: a sender and a receiver pass
//! numbered messages through two queues (one small enough to fill, so
//! senders block too; receivers block on empty queues and search by type)
//! and are killed with SIGKILL at random points, round after round. Each
//! logs a number only after its call returned. Afterwards every message
//! logged as sent was received exactly once or is still queued, except at
//! most one per killed receiver (received, or handed over, but not yet
//! logged); no number arrives twice; a number never logged as sent is at
//! most the one in flight of each killed sender; and `Namespace::check`
//! finds the queues' lists and counts exact after every round.

use crate::support::{self, TestNs};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::{CreateOptions, Cred, Namespace};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Words per worker log: a count, then the numbers (each stored as n + 1
/// at the slot the count handed out; a 0 is a slot whose store a kill
/// prevented).
const LOG_WORDS: usize = 1 << 18;
const WORKERS: usize = 4;

/// Appends `n` to a worker's log: one counter bump and one store, no
/// system call (so the kills land in msgsnd and msgrcv, not in logging).
fn log(w: &[AtomicU64], n: u64) {
    let i = w[0].fetch_add(1, Relaxed) as usize + 1;
    if let Some(slot) = w.get(i) {
        slot.store(n + 1, Relaxed);
    }
}

/// The numbers of a log, which is cleared.
fn take_log(w: &[AtomicU64]) -> Vec<u64> {
    let n = (w[0].swap(0, Relaxed) as usize).min(w.len() - 1);
    w[1..=n]
        .iter()
        .filter_map(|x| x.swap(0, Relaxed).checked_sub(1))
        .collect()
}

fn sender(path: &Path, qs: [i32; 2], base: u64, seed: u64, logw: &[AtomicU64]) -> i32 {
    let ns = Namespace::open_at(path).expect("attach");
    let me = Cred::root(std::process::id() as i32);
    let mut rng = Rng(seed | 1);
    for n in base.. {
        let mut text = n.to_le_bytes().to_vec();
        text.resize(8 + rng.below(60) as usize, 0x5a);
        let q = qs[rng.below(2) as usize];
        let flg = if rng.below(4) == 0 { IPC_NOWAIT } else { 0 };
        match ns.msgsnd(&me, q, 1 + (n % 3) as i64, &text, flg) {
            Ok(_) => log(logw, n),
            Err(ipcns::Errno::EAGAIN) => {}
            Err(e) => {
                eprintln!("msgsnd: {e:?}");
                return 1;
            }
        }
    }
    0
}

fn receiver(path: &Path, qs: [i32; 2], seed: u64, logw: &[AtomicU64]) -> i32 {
    let ns = Namespace::open_at(path).expect("attach");
    let me = Cred::root(std::process::id() as i32);
    let mut rng = Rng(seed | 1);
    let mut buf = [0u8; 128];
    loop {
        let q = qs[rng.below(2) as usize];
        let (typ, flg) = match rng.below(6) {
            0 => (0, IPC_NOWAIT),
            1 => (-2, 0),
            2 => (2, MSG_EXCEPT),
            3 => (1 + rng.below(3) as i64, 0),
            _ => (0, 0),
        };
        match ns.msgrcv(&me, q, &mut buf, typ, flg) {
            Ok((t, len)) if t != 99 && len >= 8 => {
                log(logw, u64::from_le_bytes(buf[..8].try_into().unwrap()));
            }
            Ok(other) => {
                eprintln!("msgrcv: odd message {other:?}");
                return 1;
            }
            Err(ipcns::Errno::ENOMSG) => {}
            Err(e) => {
                eprintln!("msgrcv: {e:?}");
                return 1;
            }
        }
    }
}

#[test]
fn killed_senders_and_receivers_lose_and_duplicate_nothing() {
    let t = TestNs::with(
        "msgcrash",
        CreateOptions {
            heap_size: 16 << 20,
            ..CreateOptions::default()
        },
    );
    let rounds: u64 = std::env::var("IPCNS_MSG_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let root = Cred::root(std::process::id() as i32);
    let q0 = t.ns.msgget(&root, 0, IPC_CREAT | 0o600).unwrap();
    let q1 = t.ns.msgget(&root, 0, IPC_CREAT | 0o600).unwrap();
    // A small queue fills at a few messages: senders block on it.
    let mut ds = msqid64_ds::default();
    t.ns.msgctl(&root, q0, IPC_STAT, MsgArg::Ds(&mut ds))
        .unwrap();
    ds.msg_qbytes = 200;
    t.ns.msgctl(&root, q0, IPC_SET, MsgArg::Ds(&mut ds))
        .unwrap();
    let qs = [q0, q1];
    let shared = support::SharedWords::new(LOG_WORDS * WORKERS);
    let logs: Vec<&[AtomicU64]> = shared.words().chunks(LOG_WORDS).collect();
    let mut rng = Rng(0x6d73_6763);
    let mut sent = HashSet::new();
    let mut got: HashMap<u64, u32> = HashMap::new();
    let (mut killed_receivers, mut killed_senders) = (0u64, 0u64);
    let before = ipcns::recoveries();
    for round in 0..rounds {
        // Workers 0 and 1 send, 2 and 3 receive.
        let pids: Vec<i32> = (0..WORKERS)
            .map(|k| {
                let p = t.path().to_path_buf();
                let seed = rng.next();
                let logw = logs[k];
                support::fork_child(move || {
                    if k < 2 {
                        sender(&p, qs, (round << 33) | ((k as u64) << 32), seed, logw)
                    } else {
                        receiver(&p, qs, seed, logw)
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_micros(1000 + rng.below(4000)));
        // Kill them in a random order, moments apart.
        let mut order = pids.clone();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for &pid in &order {
            support::kill(pid);
            std::thread::sleep(std::time::Duration::from_micros(rng.below(100)));
        }
        for &pid in &pids {
            let code = support::wait_child(pid);
            assert_eq!(
                code,
                -libc::SIGKILL,
                "round {round}: a worker failed ({code})"
            );
        }
        killed_senders += 2;
        killed_receivers += 2;
        for (k, l) in logs.iter().enumerate() {
            for n in take_log(l) {
                if k < 2 {
                    assert!(sent.insert(n), "{n} logged as sent twice");
                } else {
                    *got.entry(n).or_default() += 1;
                }
            }
        }
        t.ns.check()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        // Still usable: a probe through each queue.
        for q in qs {
            match t.ns.msgsnd(&root, q, 99, b"probe", IPC_NOWAIT) {
                Ok(_) => {
                    let mut b = [0u8; 8];
                    assert_eq!(t.ns.msgrcv(&root, q, &mut b, 99, IPC_NOWAIT), Ok((99, 5)));
                }
                Err(e) => assert_eq!(e, ipcns::Errno::EAGAIN, "round {round}"),
            }
        }
    }
    // Drain what is still queued.
    let mut queued = 0;
    for q in qs {
        let mut buf = [0u8; 128];
        while let Ok((_, len)) = t.ns.msgrcv(&root, q, &mut buf, 0, IPC_NOWAIT) {
            assert!(len >= 8);
            *got.entry(u64::from_le_bytes(buf[..8].try_into().unwrap()))
                .or_default() += 1;
            queued += 1;
        }
    }
    let dups: Vec<_> = got.iter().filter(|&(_, &c)| c > 1).collect();
    assert!(dups.is_empty(), "delivered twice: {dups:?}");
    let lost = sent.iter().filter(|n| !got.contains_key(n)).count() as u64;
    let unlogged = got.keys().filter(|n| !sent.contains(n)).count() as u64;
    let _ = writeln!(
        std::io::stderr(),
        "msg crash: {rounds} rounds, {} messages sent, {} received or queued ({queued} still queued), \
{lost} unaccounted (killed receivers: {killed_receivers}), {unlogged} sent by killed senders, \
{} locks recovered from dead holders",
        sent.len(),
        got.len(),
        ipcns::recoveries() - before
    );
    assert!(lost <= killed_receivers, "{lost} messages lost");
    assert!(unlogged <= killed_senders);
    assert!(
        sent.len() as u64 > rounds,
        "too few messages passed to test anything"
    );
    t.ns.check().unwrap();
    let mut i = msginfo::default();
    t.ns.msgctl(&root, 0, MSG_INFO, MsgArg::Info(&mut i))
        .unwrap();
    assert_eq!((i.msgmap, i.msgtql), (0, 0));
}
