//! Signal handlers that say they ran (`ipcns::note_signal`): a semop or
//! msgrcv blocked on the calling thread fails with EINTR whatever the
//! moment the handler runs, its first microseconds of spinning included
//! (signal(7): never restarted, even under SA_RESTART); a handler that ran
//! before the call does not touch it.
//!
//! Each race runs in a forked child (its SIGUSR1 handler stays there): a
//! blocker thread starts a call on an object that never becomes
//! available, and the child's main thread sends it SIGUSR1 0 to 20 µs
//! later (busy-waiting), 30 times. A trial counts only if the handler saw
//! the flag the blocker sets right before its call; a blocker descheduled
//! between the flag and the call's mark (a loaded machine: the other
//! tests) runs the handler before the call, which then blocks, as the
//! kernel's call would after a handler run before it: up to
//! [`TOLERATED`] such trials per race are told and not counted.
//!
//! # Safety
//! `pthread_kill` is given the blocker thread's id while that thread runs
//! (it is joined after the last signal).
#![allow(unsafe_code)]

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::{Cred, Errno, Namespace};
use std::io::Write;
use std::os::unix::thread::JoinHandleExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

const TRIALS: u32 = 30;
/// One race at a time: two of them spin four threads on a small machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
/// Missed trials per race not counted (see the module doc).
const TOLERATED: u32 = 2;
/// How long after the signal a call may take to fail with EINTR.
const WITHIN: Duration = Duration::from_millis(200);

/// The blocker thread is in its call (set right before it); what the
/// handler saw of it (-1: not run).
static IN_CALL: AtomicI32 = AtomicI32::new(0);
static SAW: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_usr1(_: libc::c_int) {
    ipcns::note_signal();
    SAW.store(IN_CALL.load(SeqCst), SeqCst);
}

fn me() -> Cred {
    Cred::root(std::process::id() as i32)
}

/// What the blocker thread does each trial.
#[derive(Clone, Copy)]
enum Call {
    /// semtimedop(-1) on a semaphore at 0, 200 ms: EAGAIN when missed.
    Semop(i32),
    /// msgrcv on an empty queue: released by a message when missed.
    Msgrcv(i32),
}

/// In a forked child: `TRIALS` races of SIGUSR1 against the start of
/// `call`; the number of calls that did not fail with EINTR within
/// [`WITHIN`] of the signal (each printed).
///
/// A trial counts only if the handler ran once the call had started (it
/// sees [`IN_CALL`], set right before the call; up to twenty times as
/// many trials are run in all): a blocker descheduled before its call
/// runs the handler first, and the call then blocks, on the kernel as
/// here. Everything the call needs is ready before it starts.
fn race(path: std::path::PathBuf, call: Call) -> i32 {
    support::handle(libc::SIGUSR1, on_usr1, libc::SA_RESTART);
    let ns = Arc::new(Namespace::open_at(&path).expect("attach"));
    // Trial k: the main thread sets `go` to k; the blocker says it starts
    // the call (`armed`) and reports its result in `done` (k) and
    // `result`.
    let go = Arc::new(AtomicU32::new(0));
    let armed = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU32::new(0));
    let result = Arc::new(std::sync::Mutex::new(Ok(0)));
    let attempts = 20 * TRIALS;
    let blocker = {
        let (ns, go, armed, done, result) = (
            ns.clone(),
            go.clone(),
            armed.clone(),
            done.clone(),
            result.clone(),
        );
        std::thread::spawn(move || {
            let cred = me();
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: WITHIN.as_nanos() as i64,
            };
            let dec = [sembuf {
                sem_num: 0,
                sem_op: -1,
                sem_flg: 0,
            }];
            let mut buf = [0u8; 8];
            let mut seen = 0;
            loop {
                while go.load(SeqCst) == seen {
                    std::thread::yield_now();
                }
                seen = go.load(SeqCst);
                if seen > attempts {
                    return;
                }
                armed.store(true, SeqCst);
                IN_CALL.store(1, SeqCst);
                let r = match call {
                    Call::Semop(id) => ns.semtimedop(&cred, id, &dec, Some(&ts)),
                    Call::Msgrcv(id) => ns.msgrcv(&cred, id, &mut buf, 0, 0).map(|_| 0),
                };
                IN_CALL.store(0, SeqCst);
                *result.lock().unwrap() = r;
                done.store(seen, SeqCst);
            }
        })
    };
    let thread = blocker.as_pthread_t();
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let (mut counted, mut missed, mut tolerated, mut k) = (0, 0, 0, 0);
    while counted < TRIALS && k < attempts {
        k += 1;
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let delay = Duration::from_nanos((seed >> 33) % 20_001);
        armed.store(false, SeqCst);
        SAW.store(-1, SeqCst);
        go.store(k, SeqCst);
        while !armed.load(SeqCst) {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        while t.elapsed() < delay {
            std::hint::spin_loop();
        }
        let sent = Instant::now();
        // SAFETY: a signal to a thread of ours that is still running (it
        // returns only after the last trial).
        unsafe { libc::pthread_kill(thread, libc::SIGUSR1) };
        while done.load(SeqCst) != k && sent.elapsed() < WITHIN {
            std::thread::sleep(Duration::from_micros(50));
        }
        let late = done.load(SeqCst) != k;
        if late {
            // Missed: release it.
            if let Call::Msgrcv(id) = call {
                let _ = ns.msgsnd(&me(), id, 1, b"x", 0);
            }
            while done.load(SeqCst) != k {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if SAW.load(SeqCst) != 1 {
            continue;
        }
        let r = *result.lock().unwrap();
        if (r != Err(Errno::EINTR) || late) && tolerated < TOLERATED {
            tolerated += 1;
            let _ = writeln!(
                std::io::stderr(),
                "trial {k} (signal {delay:?} after the start): {r:?}; not counted \
                 ({tolerated} of {TOLERATED} allowed)"
            );
            continue;
        }
        counted += 1;
        if r != Err(Errno::EINTR) || late {
            // Straight to descriptor 2: the harness captures `eprintln!`,
            // and this child's capture is lost.
            let _ = writeln!(
                std::io::stderr(),
                "trial {k} (signal {delay:?} after the start): {r:?}"
            );
            missed += 1;
        }
    }
    go.store(attempts + 1, SeqCst);
    blocker.join().unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "{counted} trials counted of {k} run, {missed} missed, {tolerated} not counted"
    );
    if counted < TRIALS {
        return 100;
    }
    missed
}

/// SIGUSR1 0 to 20 µs after a semtimedop that must block starts: EINTR
/// every time (the kernel's answer), well before its 200 ms timeout.
#[test]
fn a_handler_while_semop_spins_is_eintr() {
    let t = TestNs::new("handlers-sem");
    let id = t.ns.semget(&me(), 0, 1, IPC_CREAT | 0o600).unwrap();
    let path = t.path().to_path_buf();
    let missed = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        support::fork_run(move || race(path, Call::Semop(id)))
    };
    assert_eq!(
        missed, 0,
        "semop calls not interrupted, of {TRIALS} (100: too few trials with the handler in the call)"
    );
    assert_eq!(
        t.ns.semctl(&me(), id, 0, GETNCNT, ipcns::sem::SemArg::None),
        Ok(0)
    );
    t.ns.check().unwrap();
}

/// The same for msgrcv on an empty queue.
#[test]
fn a_handler_while_msgrcv_spins_is_eintr() {
    let t = TestNs::new("handlers-msg");
    let id = t.ns.msgget(&me(), 0, IPC_CREAT | 0o600).unwrap();
    let path = t.path().to_path_buf();
    let missed = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        support::fork_run(move || race(path, Call::Msgrcv(id)))
    };
    assert_eq!(
        missed, 0,
        "msgrcv calls not interrupted, of {TRIALS} (100: too few trials with the handler in the call)"
    );
    t.ns.check().unwrap();
}

/// A handler that ran before the call does not end it: the call blocks
/// and times out (EAGAIN), or succeeds at once.
#[test]
fn a_handler_before_the_call_changes_nothing() {
    let t = TestNs::new("handlers-before");
    let id = t.ns.semget(&me(), 0, 1, IPC_CREAT | 0o600).unwrap();
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 30_000_000,
    };
    let dec = sembuf {
        sem_num: 0,
        sem_op: -1,
        sem_flg: 0,
    };
    ipcns::note_signal();
    let start = Instant::now();
    assert_eq!(
        t.ns.semtimedop(&me(), id, &[dec], Some(&ts)),
        Err(Errno::EAGAIN)
    );
    assert!(start.elapsed() >= Duration::from_millis(30));
    ipcns::note_signal();
    assert_eq!(t.ns.semop(&me(), id, &[sembuf { sem_op: 1, ..dec }]), Ok(0));
    ipcns::note_signal();
    assert_eq!(t.ns.semtimedop(&me(), id, &[dec], Some(&ts)), Ok(0));
}
