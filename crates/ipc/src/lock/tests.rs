//! The lock against the real system: stale holders of every kind are
//! taken over within a second, live ones never; repairs that fail are
//! retried; contention counts exactly.
//!
//! # Safety
//! The fork tests put a `Lock` in an anonymous `MAP_SHARED` page (zeroed:
//! a free lock) that stays mapped for the whole test; the children only
//! use the lock and `_exit`.
#![allow(unsafe_code)]

use super::{Liveness, Lock, Os, RealOs};
use crate::errno::Errno;
use core::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

struct SharedPage(*mut u8);

impl SharedPage {
    fn new() -> SharedPage {
        // SAFETY: a fresh anonymous shared mapping; checked below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        SharedPage(p.cast())
    }
    fn lock(&self) -> &Lock {
        // SAFETY: zeroed, aligned, mapped while `self` lives; `Lock` is
        // atomics only and zero is a free lock.
        unsafe { &*self.0.cast::<Lock>() }
    }
    fn flag(&self) -> &AtomicU32 {
        // SAFETY: as above, at offset 64 (past the lock).
        unsafe { &*self.0.add(64).cast::<AtomicU32>() }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`; no reference survives.
        unsafe { libc::munmap(self.0.cast(), 4096) };
    }
}

fn fork(f: impl FnOnce()) -> i32 {
    // SAFETY: the child runs `f` (lock operations on shared memory) and
    // `_exit`s without returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        f();
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    pid
}

fn reap(pid: i32) {
    let mut st = 0;
    // SAFETY: our own child; valid out-pointer.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// Takes `l` and says how long it took and whether it was told to repair.
fn timed(l: &Lock) -> (Duration, bool) {
    let t = Instant::now();
    let g = l.lock().expect("lock");
    (t.elapsed(), g.recovered())
}

#[test]
fn uncontended_and_repair_flag() {
    let l = Lock::new();
    {
        let g = l.lock().unwrap();
        assert!(!g.recovered());
    }
    assert_eq!(l.snapshot().0, 0, "released");
    // A repair that did not complete is reported to the next holder too.
    l.dirty.store(1, Ordering::Relaxed);
    assert!(l.lock().unwrap().recovered());
    {
        let mut g = l.lock().unwrap();
        assert!(g.recovered());
        g.repaired();
    }
    assert!(!l.lock().unwrap().recovered());
}

#[test]
fn recursive_lock_is_edeadlk() {
    let l = Lock::new();
    let _g = l.lock().unwrap();
    assert_eq!(l.lock().err(), Some(Errno::EDEADLK));
}

#[test]
fn dead_tid_is_taken_over_at_once() {
    // A tid that existed and is gone: a reaped child's.
    let pid = fork(|| {});
    reap(pid);
    let l = Lock::new();
    l.word.store(12345 << 32 | pid as u64, Ordering::Relaxed);
    let (t, rec) = timed(&l);
    assert!(rec);
    assert!(t < Duration::from_millis(500), "took {t:?}");
}

#[test]
fn garbage_word_naming_a_live_unrelated_thread_is_taken_over() {
    // tid 1 (init) lives; the tag is not its own.
    let l = Lock::new();
    l.word
        .store(0xdead_beef << 32 | 1 | super::WAITERS, Ordering::Relaxed);
    let (t, rec) = timed(&l);
    assert!(rec);
    assert!(t < Duration::from_secs(1), "took {t:?}");
    // Junk in every bit: a tid beyond any pid_max.
    let l = Lock::new();
    l.word.store(u64::MAX, Ordering::Relaxed);
    let (t, rec) = timed(&l);
    assert!(rec);
    assert!(t < Duration::from_secs(1), "took {t:?}");
}

#[test]
fn holders_are_told_apart_by_their_tag() {
    // Our own identity is alive; the same tid with another tag (another
    // boot, or a dead thread whose tid we reuse) is not.
    let me = RealOs.me();
    assert_eq!(RealOs.liveness(me), Liveness::Alive);
    assert_eq!(RealOs.liveness(me ^ (1 << 40)), Liveness::Gone);
    // A lock word naming our tid with a stale tag: taken over at once.
    let l = Lock::new();
    l.word.store(me ^ (7 << 32), Ordering::Relaxed);
    let (t, rec) = timed(&l);
    assert!(rec);
    assert!(t < Duration::from_millis(100), "took {t:?}");
    // The parent process (a live thread) with a tag from another boot.
    // SAFETY: getppid takes nothing and cannot fail.
    let ppid = unsafe { libc::getppid() } as u64;
    let l = Lock::new();
    l.word.store(0x1234_5678 << 32 | ppid, Ordering::Relaxed);
    let (t, rec) = timed(&l);
    assert!(rec);
    assert!(t < Duration::from_millis(500), "took {t:?}");
}

#[test]
fn zombie_holder_is_taken_over() {
    let page = SharedPage::new();
    let l = page.lock();
    let pid = fork(|| {
        core::mem::forget(l.lock().unwrap());
    });
    // Wait until the child holds it and has exited (a zombie: not reaped).
    while page.lock().snapshot().0 == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    let (t, rec) = timed(l);
    assert!(rec);
    assert!(t < Duration::from_secs(1), "took {t:?}");
    reap(pid);
}

#[test]
fn live_holder_is_never_taken_over() {
    let page = SharedPage::new();
    let l = page.lock();
    let pid = fork(|| {
        let g = l.lock().unwrap();
        page.flag().store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(400));
        page.flag().store(2, Ordering::SeqCst);
        drop(g);
    });
    while page.flag().load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (t, rec) = timed(l);
    assert_eq!(
        page.flag().load(Ordering::SeqCst),
        2,
        "taken from a live holder"
    );
    assert!(!rec);
    assert!(t >= Duration::from_millis(200), "took {t:?}");
    reap(pid);
}

#[test]
fn killed_holder_mid_section_is_repaired_by_the_next() {
    let page = SharedPage::new();
    let l = page.lock();
    let pid = fork(|| {
        let _g = l.lock().unwrap();
        page.flag().store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(30));
    });
    while page.flag().load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    reap(pid);
    let (t, rec) = timed(l);
    assert!(rec);
    assert!(t < Duration::from_millis(500), "took {t:?}");
}

/// `threads` threads each taking `l` `rounds` times, inside a non-atomic
/// increment in two steps `hold` apart (lost updates would show if two
/// threads were inside at once): the count they reach.
fn count_under(l: &std::sync::Arc<Lock>, threads: usize, rounds: u32, hold: Duration) -> u32 {
    let n = std::sync::Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..threads)
        .map(|_| {
            let (l, n) = (l.clone(), n.clone());
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    let _g = l.lock().unwrap();
                    let v = n.load(Ordering::Relaxed);
                    if !hold.is_zero() {
                        std::thread::sleep(hold);
                    }
                    n.store(v + 1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    n.load(Ordering::Relaxed)
}

#[test]
fn contention_counts_exactly() {
    let l = std::sync::Arc::new(Lock::new());
    assert_eq!(count_under(&l, 4, 20_000, Duration::ZERO), 80_000);
}

#[test]
fn sleepers_are_all_woken_and_counted_out() {
    // Holders that stay inside for 50 µs make the waiters sleep on the
    // futex (8 threads on the machine's cpus): exclusion holds, the count
    // of sleepers comes back to zero, the word is left free and unmarked,
    // and the whole stays far from what sleeps ended by their timeout (a
    // slice, 10 ms: 1,600 of them would take 16 s) would cost.
    let l = std::sync::Arc::new(Lock::new());
    let start = std::time::Instant::now();
    let n = count_under(&l, 8, 200, Duration::from_micros(50));
    let took = start.elapsed();
    assert_eq!(n, 1_600);
    assert_eq!(l.sleepers.load(Ordering::SeqCst), 0);
    assert_eq!(l.word.load(Ordering::SeqCst), 0, "left held or marked");
    assert!(
        took < Duration::from_secs(8),
        "sleepers left to time out: {took:?}"
    );
}

#[test]
fn a_thread_never_takes_an_exited_threads_identity() {
    // glibc hands an exited thread's stack and control block (so its
    // thread pointer) to the next thread it creates: the identity cache
    // keyed by thread pointer must give each thread its own tid, and the
    // fork child its own.
    let mine = |_| {
        let me = RealOs.me();
        assert_eq!(
            (me & super::TID_MASK) as i32,
            crate::sys::process::gettid(),
            "identity {me:#x}"
        );
        assert_eq!(RealOs.liveness(me), Liveness::Alive);
        me
    };
    let mut seen = std::collections::HashSet::new();
    for i in 0..200 {
        let who = std::thread::spawn(move || mine(i)).join().unwrap();
        assert!(seen.insert(who), "identity {who:#x} given twice");
    }
    let before = mine(0);
    let page = SharedPage::new();
    let flag = page.flag();
    let pid = fork(|| {
        let me = RealOs.me();
        let ok = me != before
            && (me & super::TID_MASK) as i32 == crate::sys::process::gettid()
            && std::thread::spawn(|| RealOs.me())
                .join()
                .is_ok_and(|t| t != me);
        flag.store(1 + u32::from(ok), Ordering::Relaxed);
    });
    reap(pid);
    assert_eq!(flag.load(Ordering::Relaxed), 2, "the fork child's identity");
}

/// Runs `body(arg)` on a new pthread and joins it.
fn on_pthread(body: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void, arg: *mut libc::c_void) {
    let mut t: libc::pthread_t = 0;
    // SAFETY: a valid start routine and an argument it understands.
    let made = unsafe { libc::pthread_create(&mut t, core::ptr::null(), body, arg) };
    assert_eq!(made, 0);
    // SAFETY: joins the thread just made.
    let joined = unsafe { libc::pthread_join(t, core::ptr::null_mut()) };
    assert_eq!(joined, 0);
}

/// A thread's identity, tid and thread pointer, as it sees them.
extern "C" fn ask(out: *mut libc::c_void) -> *mut libc::c_void {
    let v = [
        RealOs.me(),
        crate::sys::process::gettid() as u64,
        crate::sys::process::thread_pointer() as u64,
    ];
    // SAFETY: `out` points at the caller's `[u64; 3]`, alive until the join.
    unsafe { *(out as *mut [u64; 3]) = v };
    core::ptr::null_mut()
}

static DEAD_TP: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

extern "C" fn key_destructor(_: *mut libc::c_void) {
    let _ = RealOs.me();
    DEAD_TP.store(crate::sys::process::thread_pointer(), Ordering::Relaxed);
}

extern "C" fn set_key(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: a key made by the test; the value is a marker.
    unsafe {
        libc::pthread_setspecific(
            arg as usize as libc::pthread_key_t,
            core::ptr::dangling::<libc::c_void>(),
        )
    };
    core::ptr::null_mut()
}

extern "C" fn raw_exit(_: *mut libc::c_void) -> *mut libc::c_void {
    let _ = RealOs.me();
    DEAD_TP.store(crate::sys::process::thread_pointer(), Ordering::Relaxed);
    // SAFETY: ends this thread without glibc's exit path (what a program
    // issuing the system call itself does); the kernel still clears its
    // tid word, so the join returns.
    let _ = unsafe { crate::sys::raw::syscall1(libc::SYS_exit, 0) };
    core::ptr::null_mut()
}

/// Asks a new thread (on the dead one's control block if glibc reuses it)
/// for its identity, and checks it is its own.
fn next_thread_is_itself(what: &str) {
    let mut out = [0u64; 3];
    on_pthread(ask, (&raw mut out).cast());
    let reused = out[2] == DEAD_TP.load(Ordering::Relaxed) as u64;
    eprintln!("{what}: control block reused: {reused}");
    assert_eq!(
        out[0] & super::TID_MASK,
        out[1],
        "{what}: another thread's identity"
    );
}

#[test]
fn an_identity_first_asked_in_a_key_destructor_is_not_inherited() {
    // glibc runs pthread-key destructors after the thread-locals' own, so
    // the entry made there is never cleared by the thread's exit.
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: out-pointer to a local; the destructor is a plain function.
    let made = unsafe { libc::pthread_key_create(&mut key, Some(key_destructor)) };
    assert_eq!(made, 0);
    on_pthread(set_key, key as usize as *mut libc::c_void);
    next_thread_is_itself("key destructor");
}

#[test]
fn an_identity_of_a_thread_that_exited_raw_is_not_inherited() {
    on_pthread(raw_exit, core::ptr::null_mut());
    next_thread_is_itself("raw exit");
}

#[test]
fn an_ipc_nowait_bound_keeps_a_stricter_limit_in_force() {
    use super::gate;
    use super::{NOWAIT_LOCK_NS, NOWAIT_MARK, monotonic_ns};
    let deadline = || {
        let (inside, deadline) = gate::enter();
        gate::leave(&inside);
        deadline
    };
    // with_lock_limit around an IPC_NOWAIT call: the limit stays.
    let limit = monotonic_ns() + 50_000_000;
    {
        let _outer = gate::call_deadline(limit);
        let _inner = gate::call_deadline(NOWAIT_MARK);
        assert_eq!(deadline(), limit);
    }
    // A later limit around it: the IPC_NOWAIT bound, from now.
    let late = monotonic_ns() + 10 * NOWAIT_LOCK_NS;
    {
        let _outer = gate::call_deadline(late);
        let before = monotonic_ns();
        let _inner = gate::call_deadline(NOWAIT_MARK);
        let d = deadline();
        assert!(
            d >= before + NOWAIT_LOCK_NS && d < late,
            "{d} {before} {late}"
        );
    }
    // Alone, the mark stays a mark (no clock read on the way).
    {
        let _only = gate::call_deadline(NOWAIT_MARK);
        assert_eq!(deadline(), NOWAIT_MARK);
    }
    assert_eq!(deadline(), 0);
}

#[test]
fn a_leaf_lock_taken_inside_an_operation_keeps_the_calls_bound() {
    use super::{LEAF_GRACE_NS, NOWAIT_MARK, gate, monotonic_ns};
    let (outer, leaf) = (Lock::new(), Lock::new());
    // Another live thread keeps the leaf: a stopped participant, or a
    // hostile word with a live thread's identity.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
    let leaf = &leaf;
    std::thread::scope(|s| {
        s.spawn(move || {
            let g = leaf.lock().expect("leaf");
            held_tx.send(()).unwrap();
            let _ = end_rx.recv();
            drop(g);
        });
        held_rx.recv().unwrap();
        {
            // An IPC_NOWAIT call, inside its operation (the outer lock
            // held): the leaf gives up after the grace, the others do not.
            let _bound = gate::call_deadline(NOWAIT_MARK);
            let _op = outer.lock().expect("outer");
            let t = monotonic_ns();
            assert_eq!(leaf.lock_leaf().err(), Some(Errno(libc::ETIMEDOUT)));
            let took = monotonic_ns() - t;
            assert!(
                (LEAF_GRACE_NS..LEAF_GRACE_NS * 5).contains(&took),
                "{took} ns"
            );
        }
        // A call without a bound waits for the leaf, as for any lock:
        // until its holder lets go.
        let waiter = s.spawn(move || leaf.lock_leaf().map(drop));
        std::thread::sleep(std::time::Duration::from_millis(
            2 * LEAF_GRACE_NS / 1_000_000,
        ));
        assert!(!waiter.is_finished());
        end_tx.send(()).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
}

#[test]
fn a_forks_copy_of_a_held_noting_word_is_taken_over() {
    // A child forked while another thread of its parent noted an arena
    // inherits the word naming that thread: its first open must not spin
    // forever (chaos workers, forked by a test process whose other
    // threads open namespaces, hung in R state).
    super::os::noting_held_by_another_process();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        super::note_arena((0xfffe, 0xfffe), u64::MAX);
        super::forget_arena((0xfffe, 0xfffe), u64::MAX);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("note_arena spun on a word naming another process");
}

#[test]
fn a_sleeper_proven_alive_lately_is_dead_as_soon_as_its_process_exits() {
    // The waker's check of a sleeper: /proc once, then for a while only
    // whether the process has exited (a pidfd). A killed process is a
    // zombie until reaped: dead at once, though /proc showed it alive a
    // moment before.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id() as i32;
    let who = super::os::identity_of(pid as u32).expect("the child's identity");
    assert!(super::sleeper_identity_alive(pid, who), "alive (/proc)");
    assert!(
        super::sleeper_identity_alive(pid, who),
        "alive (lately proven)"
    );
    // Another identity of the same thread (a reused tid's): never proven.
    assert!(!super::sleeper_identity_alive(pid, who ^ (1 << 40)));
    child.kill().expect("kill");
    let zombie = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
    };
    let t = Instant::now();
    while !zombie() {
        assert!(t.elapsed() < Duration::from_secs(10), "no zombie");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!super::sleeper_identity_alive(pid, who), "a zombie");
    child.wait().expect("wait");
    assert!(!super::sleeper_identity_alive(pid, who), "reaped");
}
