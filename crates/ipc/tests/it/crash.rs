//! Crash safety and concurrency: processes killed with SIGKILL at random
//! points while creating and removing objects leave a namespace that is
//! exactly consistent and usable; two processes working at once end with
//! exactly the objects they should.

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Namespace};

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

/// Creates, changes and removes objects of every kind, forever.
fn churn(path: &std::path::Path, seed: u64) -> i32 {
    let ns = Namespace::open_at(path).expect("attach");
    let cred = Cred::root(std::process::id() as i32);
    let mut rng = Rng(seed | 1);
    let mut ids: Vec<(u8, i32)> = Vec::new();
    loop {
        let key = if rng.below(2) == 0 {
            0
        } else {
            1 + rng.below(40) as i32
        };
        match rng.below(8) {
            0 | 1 => {
                if let Ok(id) = ns.semget(&cred, key, 1 + rng.below(12) as i32, IPC_CREAT | 0o600) {
                    ids.push((0, id));
                }
            }
            2 => {
                if let Ok(id) = ns.msgget(&cred, key, IPC_CREAT | 0o600) {
                    ids.push((1, id));
                }
            }
            3 => {
                if let Ok(id) = ns.shmget(&cred, key, 1 + rng.below(10000), IPC_CREAT | 0o600) {
                    ids.push((2, id));
                }
            }
            4 => {
                if let Some(&(0, id)) = ids.get(rng.below(ids.len() as u64 + 1) as usize) {
                    let mut vals = [7u16; 12];
                    let _ = ns.semctl(&cred, id, 0, SETALL, SemArg::Array(&mut vals));
                }
            }
            _ => {
                if ids.is_empty() {
                    continue;
                }
                let (k, id) = ids.swap_remove(rng.below(ids.len() as u64) as usize);
                let _ = match k {
                    0 => ns.semctl(&cred, id, 0, IPC_RMID, SemArg::None),
                    1 => ns.msgctl(&cred, id, IPC_RMID, MsgArg::None),
                    _ => ns.shmctl(&cred, id, IPC_RMID, ShmArg::None),
                };
            }
        }
    }
}

#[test]
fn killed_at_random_points_the_namespace_stays_consistent() {
    let t = TestNs::with(
        "crash",
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    );
    let rounds: u64 = std::env::var("IPCNS_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut rng = Rng(0x5eed);
    let root = Cred::root(std::process::id() as i32);
    let path = t.path().to_path_buf();
    for round in 0..rounds {
        let seed = rng.next();
        let p = path.clone();
        let pid = support::fork_child(move || churn(&p, seed));
        std::thread::sleep(std::time::Duration::from_micros(200 + rng.below(3000)));
        support::kill(pid);
        support::wait_child(pid);
        let census =
            t.ns.check()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        // Still usable: one more object of each kind, found by key, removed.
        let s =
            t.ns.semget(&root, 0x7777, 3, IPC_CREAT | 0o600)
                .expect("semget after a crash");
        let mut vals = [1u16, 2, 3];
        t.ns.semctl(&root, s, 0, SETALL, SemArg::Array(&mut vals))
            .unwrap();
        let mut got = [0u16; 3];
        t.ns.semctl(&root, s, 0, GETALL, SemArg::Array(&mut got))
            .unwrap();
        // A killed SETALL is all or nothing: here, ours completed.
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(t.ns.semget(&root, 0x7777, 0, 0), Ok(s));
        t.ns.semctl(&root, s, 0, IPC_RMID, SemArg::None).unwrap();
        assert_eq!(t.ns.check().unwrap(), census);
    }
    // Every set's values are whole: all 7s (churn's SETALL) or all 0s.
    let mut n = 0;
    for idx in 0..32768 {
        let mut ds = semid64_ds::default();
        let Ok(id) =
            t.ns.semctl(&root, idx, 0, SEM_STAT_ANY, SemArg::Ds(&mut ds))
        else {
            continue;
        };
        let mut vals = vec![0u16; ds.sem_nsems as usize];
        t.ns.semctl(&root, id, 0, GETALL, SemArg::Array(&mut vals))
            .unwrap();
        assert!(
            vals.iter().all(|&v| v == vals[0]),
            "set {id} holds half a SETALL: {vals:?}"
        );
        n += 1;
    }
    let rec = ipcns::recoveries();
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!(
            "crash: {rounds} kills, {rec} locks recovered from dead holders, {n} sets left, all whole\n"
        ),
    );
    // The kills must have landed inside locks, or the test proves nothing.
    assert!(
        rounds < 50 || rec > 0,
        "no kill landed while a lock was held"
    );
    // Repairs rebuild the key tables in place: with every object removed,
    // the heap holds the three tables and at most a few blocks leaked by
    // kills inside the allocator (107 KB leaked when each repair made a new
    // table).
    for idx in 0..32768 {
        let mut ds = semid64_ds::default();
        if let Ok(id) =
            t.ns.semctl(&root, idx, 0, SEM_STAT_ANY, SemArg::Ds(&mut ds))
        {
            t.ns.semctl(&root, id, 0, IPC_RMID, SemArg::None).unwrap();
        }
        let mut ds = msqid64_ds::default();
        if let Ok(id) = t.ns.msgctl(&root, idx, MSG_STAT_ANY, MsgArg::Ds(&mut ds)) {
            t.ns.msgctl(&root, id, IPC_RMID, MsgArg::None).unwrap();
        }
        let mut ds = shmid64_ds::default();
        if let Ok(id) = t.ns.shmctl(&root, idx, SHM_STAT_ANY, ShmArg::Ds(&mut ds)) {
            t.ns.shmctl(&root, id, IPC_RMID, ShmArg::None).unwrap();
        }
    }
    assert_eq!(t.ns.check().unwrap(), ipcns::Census::default());
    let left = t.ns.heap_in_use();
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!("crash: heap bytes in use with no object left: {left}\n"),
    );
    assert!(
        left <= 16 << 10,
        "{left} heap bytes in use with no object left"
    );
}

#[test]
fn two_processes_at_once_end_with_exactly_their_objects() {
    let t = TestNs::with(
        "two",
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    );
    let work = |base: i32| {
        let path = t.path().to_path_buf();
        move || {
            let ns = Namespace::open_at(&path).expect("attach");
            let cred = Cred::root(std::process::id() as i32);
            for i in 0..150 {
                let key = base + i;
                let s = ns
                    .semget(&cred, key, 2, IPC_CREAT | IPC_EXCL | 0o600)
                    .expect("semget");
                let q = ns
                    .msgget(&cred, key, IPC_CREAT | IPC_EXCL | 0o600)
                    .expect("msgget");
                let m = ns
                    .shmget(&cred, key, 4096, IPC_CREAT | IPC_EXCL | 0o600)
                    .expect("shmget");
                if i % 2 == 1 {
                    ns.semctl(&cred, s, 0, IPC_RMID, SemArg::None)
                        .expect("sem rmid");
                    ns.msgctl(&cred, q, IPC_RMID, MsgArg::None)
                        .expect("msg rmid");
                    ns.shmctl(&cred, m, IPC_RMID, ShmArg::None)
                        .expect("shm rmid");
                }
            }
            0
        }
    };
    let a = support::fork_child(work(1000));
    let b = support::fork_child(work(5000));
    assert_eq!(support::wait_child(a), 0);
    assert_eq!(support::wait_child(b), 0);
    let census = t.ns.check().unwrap();
    assert_eq!((census.sem, census.msg, census.shm), (150, 150, 150));
    let root = Cred::root(1);
    for base in [1000, 5000] {
        for i in 0..150 {
            let want = i % 2 == 0;
            assert_eq!(
                t.ns.semget(&root, base + i, 0, 0).is_ok(),
                want,
                "sem key {}",
                base + i
            );
            assert_eq!(t.ns.msgget(&root, base + i, 0).is_ok(), want);
            assert_eq!(t.ns.shmget(&root, base + i, 0, 0).is_ok(), want);
        }
    }
}
