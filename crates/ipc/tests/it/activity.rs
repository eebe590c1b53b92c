//! The activity counters `ipcns top` reads (`Namespace::activity`): each
//! completed semop, each message sent and received, each counted shmat
//! and shmdt, once; the calls blocked now; zero again for the next object
//! of an index.

use crate::support::TestNs;
use ipcns::abi::{IPC_CREAT, IPC_NOWAIT, IPC_RMID, sembuf};
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Errno, Mech, ObjectActivity};
use std::time::{Duration, Instant};

fn op(n: u16, v: i16, flg: i32) -> sembuf {
    sembuf {
        sem_num: n,
        sem_op: v,
        sem_flg: flg as i16,
    }
}

fn one(t: &TestNs, m: Mech, id: i32) -> ObjectActivity {
    let c = t.ns.cred().unwrap();
    let rows = t.ns.activity(&c, m).unwrap();
    rows.into_iter()
        .find(|r| r.id == id)
        .expect("the object is listed")
}

#[test]
fn every_operation_is_counted_once() {
    let t = TestNs::new("activity");
    let c = t.ns.cred().unwrap();
    let s = t.ns.semget(&c, 0x51, 2, IPC_CREAT | 0o640).unwrap();
    let q = t.ns.msgget(&c, 0x52, IPC_CREAT | 0o600).unwrap();
    let h = t.ns.shmget(&c, 0x53, 8192, IPC_CREAT | 0o600).unwrap();
    let r = one(&t, Mech::Sem, s);
    assert_eq!(
        (r.key, r.mode, r.ops, r.ops2, r.waiting, r.count),
        (0x51, 0o640, 0, 0, 0, 2)
    );
    // Three completed, one refused (EAGAIN: not counted).
    for _ in 0..3 {
        assert_eq!(t.ns.semop(&c, s, &[op(1, 1, 0)]), Ok(0));
    }
    assert_eq!(
        t.ns.semop(&c, s, &[op(0, -1, IPC_NOWAIT)]),
        Err(Errno::EAGAIN)
    );
    let r = one(&t, Mech::Sem, s);
    assert_eq!((r.ops, r.ops2, r.last_pid), (3, 0, 0));
    assert_eq!(r.last_pid, 0, "semaphore 0 was never changed");
    // Two sent, one received.
    t.ns.msgsnd(&c, q, 1, b"hello", 0).unwrap();
    t.ns.msgsnd(&c, q, 2, b"world!", 0).unwrap();
    let mut buf = [0u8; 64];
    t.ns.msgrcv(&c, q, &mut buf, 1, 0).unwrap();
    let r = one(&t, Mech::Msg, q);
    assert_eq!((r.ops, r.ops2, r.count, r.bytes), (2, 1, 1, 6));
    assert_eq!(r.last_pid, c.pid);
    // One shmat, one shmdt.
    let a = t.ns.shmat(&c, h, 0, 0).unwrap();
    let r = one(&t, Mech::Shm, h);
    assert_eq!((r.ops, r.nattch, r.bytes), (1, 1, 8192));
    assert_eq!(t.ns.shmdt(&c, a), Ok(0));
    let r = one(&t, Mech::Shm, h);
    assert_eq!((r.ops, r.nattch, r.last_pid), (2, 0, c.pid));
    // The next set in the same index starts from zero.
    t.ns.semctl(&c, s, 0, IPC_RMID, SemArg::None).unwrap();
    let s2 = t.ns.semget(&c, 0x51, 1, IPC_CREAT | 0o600).unwrap();
    assert_ne!(s2, s);
    let r = one(&t, Mech::Sem, s2);
    assert_eq!((r.ops, r.ops2), (0, 0));
    t.ns.shmctl(&c, h, IPC_RMID, ShmArg::None).unwrap();
    assert!(t.ns.activity(&c, Mech::Shm).unwrap().is_empty());
}

#[test]
fn blocked_calls_are_waiting_and_counted_as_slept() {
    let t = TestNs::new("activity-wait");
    let c = t.ns.cred().unwrap();
    let s = t.ns.semget(&c, 0, 1, IPC_CREAT | 0o600).unwrap();
    std::thread::scope(|sc| {
        let w = sc.spawn(|| t.ns.semop(&c, s, &[op(0, -1, 0)]));
        let deadline = Instant::now() + Duration::from_secs(10);
        while one(&t, Mech::Sem, s).waiting != 1 {
            assert!(Instant::now() < deadline, "the sleeper never showed");
            std::thread::sleep(Duration::from_millis(1));
        }
        let r = one(&t, Mech::Sem, s);
        assert_eq!((r.ops, r.ops2), (0, 1));
        assert_eq!(t.ns.semop(&c, s, &[op(0, 1, 0)]), Ok(0));
        assert_eq!(w.join().unwrap(), Ok(0));
    });
    let r = one(&t, Mech::Sem, s);
    // The post and the sleeper's decrement, completed by the poster.
    assert_eq!((r.ops, r.ops2, r.waiting), (2, 1, 0));
}
