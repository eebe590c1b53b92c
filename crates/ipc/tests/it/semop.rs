//! semop and semtimedop on ipcns: the checks and their order, all or
//! nothing, blocking and waking (in one process and across processes),
//! GETNCNT/GETZCNT, timeouts, EIDRM, EINTR under SA_RESTART, and sleepers
//! killed while queued.

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::{Cred, Errno, Namespace};
use std::time::{Duration, Instant};

fn op(n: u16, v: i16, flg: i32) -> sembuf {
    sembuf {
        sem_num: n,
        sem_op: v,
        sem_flg: flg as i16,
    }
}

fn val(ns: &Namespace, c: &Cred, id: i32, n: i32) -> i32 {
    ns.semctl(c, id, n, GETVAL, SemArg::None).unwrap()
}

#[test]
fn checks_in_linux_order_and_all_or_nothing() {
    let t = TestNs::new("semop-checks");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 2, IPC_CREAT | 0o600).unwrap();
    assert_eq!(t.ns.semop(&root, id, &[]), Err(Errno::EINVAL));
    assert_eq!(t.ns.semop(&root, -1, &[op(0, 1, 0)]), Err(Errno::EINVAL));
    let many = vec![op(0, 0, 0); 501];
    assert_eq!(t.ns.semop(&root, id, &many), Err(Errno::E2BIG));
    let bad = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000_000,
    };
    assert_eq!(
        t.ns.semtimedop(&root, id, &[op(0, 1, 0)], Some(&bad)),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        t.ns.semop(&root, id + 1, &[op(0, 1, 0)]),
        Err(Errno::EINVAL)
    );
    assert_eq!(t.ns.semop(&root, id, &[op(2, 1, 0)]), Err(Errno::EFBIG));
    let user = Cred::user(1, 1000, 1000, vec![]);
    assert_eq!(t.ns.semop(&user, id, &[op(0, 1, 0)]), Err(Errno::EACCES));
    assert_eq!(t.ns.semop(&root, id, &[op(0, 1, 0), op(1, 2, 0)]), Ok(0));
    assert_eq!((val(&t.ns, &root, id, 0), val(&t.ns, &root, id, 1)), (1, 2));
    // All or nothing: the second would block (NOWAIT): nothing changes.
    assert_eq!(
        t.ns.semop(&root, id, &[op(0, 5, 0), op(1, -3, IPC_NOWAIT)]),
        Err(Errno::EAGAIN)
    );
    assert_eq!((val(&t.ns, &root, id, 0), val(&t.ns, &root, id, 1)), (1, 2));
    // ERANGE above SEMVMX, judged in order.
    assert_eq!(
        t.ns.semop(&root, id, &[op(0, 32767, 0)]),
        Err(Errno::ERANGE)
    );
    // The same semaphore twice: the second sees the first's result.
    assert_eq!(t.ns.semop(&root, id, &[op(0, 4, 0), op(0, -5, 0)]), Ok(0));
    assert_eq!(val(&t.ns, &root, id, 0), 0);
    // Wait-for-zero on zero passes; on nonzero with NOWAIT: EAGAIN.
    assert_eq!(t.ns.semop(&root, id, &[op(0, 0, 0)]), Ok(0));
    assert_eq!(
        t.ns.semop(&root, id, &[op(1, 0, IPC_NOWAIT)]),
        Err(Errno::EAGAIN)
    );
    // sempid of every semaphore touched; otime set.
    assert_eq!(
        t.ns.semctl(&root, id, 0, GETPID, SemArg::None),
        Ok(std::process::id() as i32)
    );
    let mut ds = semid64_ds::default();
    t.ns.semctl(&root, id, 0, IPC_STAT, SemArg::Ds(&mut ds))
        .unwrap();
    assert!(ds.sem_otime > 0);
    // A read-only caller may wait for zero (no alter): read permission.
    let id2 = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o604).unwrap();
    assert_eq!(t.ns.semop(&user, id2, &[op(0, 0, 0)]), Ok(0));
    assert_eq!(t.ns.semop(&user, id2, &[op(0, 1, 0)]), Err(Errno::EACCES));
}

#[test]
fn sleepers_are_woken_in_order_with_their_operation_done() {
    let t = TestNs::new("semop-wake");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    std::thread::scope(|sc| {
        let a = sc.spawn(|| t.ns.semop(&root, id, &[op(0, -1, 0)]));
        while t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None) != Ok(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let z = sc.spawn(|| t.ns.semop(&root, id, &[op(0, 0, 0)]));
        assert_eq!(t.ns.semop(&root, id, &[op(0, 2, 0)]), Ok(0));
        assert_eq!(a.join().unwrap(), Ok(0));
        // The zero-waiter is still waiting: 1 left.
        while t.ns.semctl(&root, id, 0, GETZCNT, SemArg::None) != Ok(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(val(&t.ns, &root, id, 0), 1);
        assert_eq!(t.ns.semctl(&root, id, 0, SETVAL, SemArg::Val(0)), Ok(0));
        assert_eq!(z.join().unwrap(), Ok(0));
    });
    assert_eq!(t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None), Ok(0));
    assert_eq!(t.ns.semctl(&root, id, 0, GETZCNT, SemArg::None), Ok(0));
}

#[test]
fn timeout_removal_and_signals() {
    let t = TestNs::new("semop-end");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 60_000_000,
    };
    let start = Instant::now();
    assert_eq!(
        t.ns.semtimedop(&root, id, &[op(0, -1, 0)], Some(&ts)),
        Err(Errno::EAGAIN)
    );
    assert!(start.elapsed() >= Duration::from_millis(60));
    assert_eq!(t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None), Ok(0));
    // Removal fails every sleeper with EIDRM.
    std::thread::scope(|sc| {
        let a = sc.spawn(|| t.ns.semop(&root, id, &[op(0, -1, 0)]));
        while t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None) != Ok(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(t.ns.semctl(&root, id, 0, IPC_RMID, SemArg::None), Ok(0));
        assert_eq!(a.join().unwrap(), Err(Errno::EIDRM));
    });
    // A signal with a handler, even SA_RESTART: EINTR.
    let id = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        extern "C" fn on_usr1(_: libc::c_int) {}
        support::handle(libc::SIGUSR1, on_usr1, libc::SA_RESTART);
        let ns = Namespace::open_at(&path).unwrap();
        let me = Cred::root(std::process::id() as i32);
        match ns.semop(&me, id, &[op(0, -1, 0)]) {
            Err(Errno::EINTR) => 0,
            other => {
                eprintln!("semop after a signal: {other:?}");
                1
            }
        }
    });
    while t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None) != Ok(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    support::signal(child, libc::SIGUSR1);
    assert_eq!(support::wait_child(child), 0);
    assert_eq!(t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None), Ok(0));
}

#[test]
fn processes_wake_each_other_and_dead_sleepers_take_nothing() {
    let t = TestNs::new("semop-procs");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 2, IPC_CREAT | 0o600).unwrap();
    // Ping-pong: the child waits on 0 and posts 1, 1000 times.
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let me = Cred::root(std::process::id() as i32);
        for _ in 0..1000 {
            if ns.semop(&me, id, &[op(0, -1, 0)]).is_err()
                || ns.semop(&me, id, &[op(1, 1, 0)]).is_err()
            {
                return 1;
            }
        }
        0
    });
    for _ in 0..1000 {
        assert_eq!(t.ns.semop(&root, id, &[op(0, 1, 0)]), Ok(0));
        assert_eq!(t.ns.semop(&root, id, &[op(1, -1, 0)]), Ok(0));
    }
    assert_eq!(support::wait_child(child), 0);
    // A sleeper killed while queued: its decrement is never done.
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let me = Cred::root(std::process::id() as i32);
        let _ = ns.semop(&me, id, &[op(0, -1, 0)]);
        0
    });
    while t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None) != Ok(1) {
        std::thread::sleep(Duration::from_millis(1));
    }
    support::kill(child);
    support::wait_child(child);
    assert_eq!(t.ns.semop(&root, id, &[op(0, 1, 0)]), Ok(0));
    assert_eq!(val(&t.ns, &root, id, 0), 1, "a dead sleeper took the token");
    assert_eq!(t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None), Ok(0));
    t.ns.check().unwrap();
}
