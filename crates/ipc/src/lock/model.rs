//! Model check of the lock with loom: threads stand in for processes, and
//! one of them "dies" (stops touching memory, and is seen dead by liveness
//! checks) at each step of its run in turn. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p ipcns --lib --release lock::model`.
//!
//! The protected state is two counters that a holder increments one after
//! the other (a multi-word update). Asserted: no two live threads are ever
//! inside at once; a death inside leaves the next holder told to repair;
//! after a repair the invariant holds again, and a repair cut short by a
//! second death is redone by the next holder; nobody waits forever (loom
//! reports a deadlock if all threads block).

use super::{Liveness, Lock, Os};
use crate::errno::Errno;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Errno a model thread returns when it has "died".
const DIED: Errno = Errno(-1);

struct World {
    lock: Lock,
    /// The protected state: a == b outside a critical section.
    a: AtomicU32,
    b: AtomicU32,
    /// Live threads inside the critical section.
    inside: AtomicU32,
    /// Per model thread (tid 1..=3): alive, and its token.
    alive: [AtomicU32; 4],
}

struct ModelOs<'w> {
    tid: u32,
    w: &'w World,
    /// Die at this step (counting `step` calls); u32::MAX = never.
    die_at: u32,
    steps: core::cell::Cell<u32>,
    /// This thread's repairs fail (it releases without completing them).
    fail_repair: bool,
}

impl Os for ModelOs<'_> {
    fn me(&self) -> u64 {
        (u64::from(self.tid) * 1000) << 32 | u64::from(self.tid)
    }
    fn wait(&self, _word: &AtomicU64, _expected: u32) -> bool {
        loom::thread::yield_now();
        true
    }
    fn wake(&self, _word: &AtomicU64) {}
    fn liveness(&self, who: u64) -> Liveness {
        let tid = (who & super::TID_MASK) as usize;
        match self.w.alive.get(tid) {
            Some(a) if a.load(Ordering::SeqCst) != 0 && who >> 32 == tid as u64 * 1000 => {
                Liveness::Alive
            }
            _ => Liveness::Gone,
        }
    }
    fn spins(&self) -> u32 {
        0
    }
    fn now_ns(&self) -> u64 {
        // Every reading is a slice later: each wake-up re-checks.
        let n = self.steps.get();
        u64::from(n) * 1_000
    }
    fn slice_ns(&self) -> u64 {
        1
    }
    fn step(&self) -> Result<(), Errno> {
        let n = self.steps.get();
        self.steps.set(n + 1);
        if n == self.die_at { Err(DIED) } else { Ok(()) }
    }
}

impl ModelOs<'_> {
    fn die(&self) {
        self.w.alive[self.tid as usize].store(0, Ordering::SeqCst);
    }
}

/// One holder's turn: lock, repair if told, two-word update, unlock.
fn turn(os: &ModelOs<'_>) -> Result<(), Errno> {
    let w = os.w;
    let recovered = w.lock.acquire(os)?;
    assert_eq!(w.inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
    if recovered && os.fail_repair {
        // A repair that failed (ENOMEM, say): released as it is.
        w.inside.fetch_sub(1, Ordering::SeqCst);
        return w.lock.release(os);
    }
    let r = (|| {
        if recovered {
            w.b.store(w.a.load(Ordering::SeqCst), Ordering::SeqCst);
            os.step()?;
            w.lock.mark_repaired();
        }
        assert_eq!(
            w.a.load(Ordering::SeqCst),
            w.b.load(Ordering::SeqCst),
            "state left half-updated without a repair"
        );
        w.a.fetch_add(1, Ordering::SeqCst);
        os.step()?;
        w.b.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })();
    w.inside.fetch_sub(1, Ordering::SeqCst);
    r?;
    w.lock.release(os)
}

fn world() -> World {
    World {
        lock: Lock::new(),
        a: AtomicU32::new(0),
        b: AtomicU32::new(0),
        inside: AtomicU32::new(0),
        alive: [
            AtomicU32::new(0),
            AtomicU32::new(1),
            AtomicU32::new(1),
            AtomicU32::new(1),
        ],
    }
}

fn run(die_at: u32, die2_at: u32, fail_repair: bool) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let w = Arc::new(world());
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || {
            let os = ModelOs {
                tid: 1,
                w: &w1,
                die_at,
                steps: core::cell::Cell::new(0),
                fail_repair: false,
            };
            if turn(&os).is_err() {
                os.die();
            }
        });
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || {
            let os = ModelOs {
                tid: 2,
                w: &w2,
                die_at: die2_at,
                steps: core::cell::Cell::new(0),
                fail_repair,
            };
            let r = turn(&os);
            if die2_at == u32::MAX {
                r.expect("a live thread completes its turn");
            } else if r.is_err() {
                os.die();
            }
        });
        t1.join().unwrap();
        t2.join().unwrap();
        // A third comer always gets the lock and finds the state whole
        // (after a repair if told).
        let os = ModelOs {
            tid: 3,
            w: &w,
            die_at: u32::MAX,
            steps: core::cell::Cell::new(0),
            fail_repair: false,
        };
        turn(&os).expect("the lock is never lost");
    });
}

#[test]
fn no_death() {
    run(u32::MAX, u32::MAX, false);
}

#[test]
fn death_at_every_step() {
    for k in 0..12 {
        run(k, u32::MAX, false);
    }
}

/// Two deaths: the second thread may die while repairing after the first
/// (the next holder must be told to repair again).
#[test]
fn two_deaths() {
    for k in 0..8 {
        for j in 0..8 {
            run(k, j, false);
        }
    }
}

/// A repair that fails is reported again to the next holder.
#[test]
fn failed_repair_is_retried() {
    for k in 0..12 {
        run(k, u32::MAX, true);
    }
}
