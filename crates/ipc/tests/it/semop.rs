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
        assert_eq!(t.ns.semop(&root, id, &[op(0, 2, 0)]), Ok(0));
        assert_eq!(a.join().unwrap(), Ok(0));
        // 1 left: a zero-waiter waits.
        let z = sc.spawn(|| t.ns.semop(&root, id, &[op(0, 0, 0)]));
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
        extern "C" fn on_usr1(_: libc::c_int) {
            ipcns::note_signal();
        }
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
    // One signal is enough, whenever it comes (spinning, or asleep): the
    // handler says it ran (`note_signal`).
    support::signal(child, libc::SIGUSR1);
    let code = support::wait_child_deadline(child, Duration::from_secs(5));
    assert_eq!(code, Ok(0));
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

/// SEM_UNDO: adjustments applied at exit (normal, or found dead and
/// reaped), clamped, cleared by SETVAL, skipped for removed sets, never
/// inherited by a fork child; ERANGE past SEMAEM.
#[test]
fn undo_at_exit_and_after_death() {
    let t = TestNs::new("semop-undo");
    let root = Cred::root(std::process::id() as i32);
    let id = t.ns.semget(&root, 0, 3, IPC_CREAT | 0o600).unwrap();
    let path = t.path().to_path_buf();
    let run = |f: fn(&Namespace, &Cred, i32) -> i32| {
        let p = path.clone();
        support::fork_run(move || {
            let ns = Namespace::open_at(&p).unwrap();
            let me = Cred::root(std::process::id() as i32);
            f(&ns, &me, id)
            // `ns` dropped: the process's exit path.
        })
    };
    // Normal exit: +2 undone.
    assert_eq!(
        run(|ns, me, id| ns
            .semop(me, id, &[op(0, 2, SEM_UNDO as i32)])
            .map_or(1, |_| 0)),
        0
    );
    assert_eq!(val(&t.ns, &root, id, 0), 0);
    // -1 on 5, undone: back to 5; sempid is the exiting process's.
    t.ns.semctl(&root, id, 1, SETVAL, SemArg::Val(5)).unwrap();
    assert_eq!(
        run(|ns, me, id| ns
            .semop(me, id, &[op(1, -1, SEM_UNDO as i32)])
            .map_or(1, |_| 0)),
        0
    );
    assert_eq!(val(&t.ns, &root, id, 1), 5);
    // Clamped to SEMVMX.
    t.ns.semctl(&root, id, 2, SETVAL, SemArg::Val(2)).unwrap();
    let p = path.clone();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&p).unwrap();
        let me = Cred::root(std::process::id() as i32);
        if ns.semop(&me, id, &[op(2, -2, SEM_UNDO as i32)]).is_err() {
            return 1;
        }
        std::thread::sleep(Duration::from_secs(30));
        0
    });
    while val(&t.ns, &root, id, 2) != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(t.ns.semop(&root, id, &[op(2, 32766, 0)]), Ok(0));
    // Killed: its adjustment is applied by whoever reaps it.
    support::kill(child);
    support::wait_child(child);
    assert_eq!(t.ns.reap_exited(), Ok(1));
    assert_eq!(val(&t.ns, &root, id, 2), 32767);
    assert_eq!(t.ns.reap_exited(), Ok(0));
    // SETVAL clears every process's adjustment for that semaphore.
    t.ns.semctl(&root, id, 0, SETVAL, SemArg::Val(0)).unwrap();
    let p = path.clone();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&p).unwrap();
        let me = Cred::root(std::process::id() as i32);
        if ns.semop(&me, id, &[op(0, 1, SEM_UNDO as i32)]).is_err() {
            return 1;
        }
        std::thread::sleep(Duration::from_secs(30));
        0
    });
    while val(&t.ns, &root, id, 0) != 1 {
        std::thread::sleep(Duration::from_millis(1));
    }
    t.ns.semctl(&root, id, 0, SETVAL, SemArg::Val(5)).unwrap();
    support::kill(child);
    support::wait_child(child);
    t.ns.reap_exited().unwrap();
    assert_eq!(val(&t.ns, &root, id, 0), 5);
    // A sleeper waiting on a dead holder's semaphore gets it when the
    // holder is reaped (by the sleeper itself, within a tick).
    t.ns.semctl(&root, id, 0, SETVAL, SemArg::Val(1)).unwrap();
    let p = path.clone();
    let holder = support::fork_child(move || {
        let ns = Namespace::open_at(&p).unwrap();
        let me = Cred::root(std::process::id() as i32);
        if ns.semop(&me, id, &[op(0, -1, SEM_UNDO as i32)]).is_err() {
            return 1;
        }
        std::thread::sleep(Duration::from_secs(30));
        0
    });
    while val(&t.ns, &root, id, 0) != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::scope(|sc| {
        let w = sc.spawn(|| t.ns.semop(&root, id, &[op(0, -1, 0)]));
        while t.ns.semctl(&root, id, 0, GETNCNT, SemArg::None) != Ok(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        support::kill(holder);
        support::wait_child(holder);
        assert_eq!(w.join().unwrap(), Ok(0));
    });
    assert_eq!(val(&t.ns, &root, id, 0), 0);
    // Out of range: the adjustment may reach -(SEMAEM + 1), no further.
    let id2 = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    assert_eq!(
        t.ns.semop(&root, id2, &[op(0, 32767, SEM_UNDO as i32)]),
        Ok(0)
    );
    assert_eq!(t.ns.semop(&root, id2, &[op(0, -32767, 0)]), Ok(0));
    assert_eq!(t.ns.semop(&root, id2, &[op(0, 1, SEM_UNDO as i32)]), Ok(0));
    assert_eq!(t.ns.semop(&root, id2, &[op(0, -1, 0)]), Ok(0));
    assert_eq!(
        t.ns.semop(&root, id2, &[op(0, 1, SEM_UNDO as i32)]),
        Err(Errno::ERANGE)
    );
    assert_eq!(val(&t.ns, &root, id2, 0), 0);
    // A fork child starts with no adjustments; the parent's stay.
    t.ns.semctl(&root, id2, 0, SETVAL, SemArg::Val(0)).unwrap();
    assert_eq!(t.ns.semop(&root, id2, &[op(0, 1, SEM_UNDO as i32)]), Ok(0));
    let ns_ref = &t.ns;
    assert_eq!(
        support::fork_run(|| {
            let _ = ns_ref.exit_process();
            0
        }),
        0
    );
    assert_eq!(val(&t.ns, &root, id2, 0), 1);
    // A set removed before the exit: skipped.
    let id3 = t.ns.semget(&root, 0, 1, IPC_CREAT | 0o600).unwrap();
    assert_eq!(t.ns.semop(&root, id3, &[op(0, 1, SEM_UNDO as i32)]), Ok(0));
    t.ns.semctl(&root, id3, 0, IPC_RMID, SemArg::None).unwrap();
    assert_eq!(t.ns.exit_process(), Ok(()));
    assert_eq!(val(&t.ns, &root, id2, 0), 0, "our own exit undid +1");
    t.ns.check().unwrap();
}
