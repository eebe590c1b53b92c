//! Model check of the sleeper/waker handshake with loom: threads stand in
//! for processes, a mutex and condition variable for the shared futex
//! (FUTEX_WAIT checks the word under the mutex, as the kernel checks it
//! under its hash-bucket lock). Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p ipcns --lib --release park::model`.
//!
//! The scene: a semaphore at 0 and a sleeper queued to decrement it; a
//! waker posts +1 under the object lock and, finding the sleeper queued,
//! performs its decrement for it and completes the record (as
//! `update_queue` does); else the post stays in the value. A third thread
//! may make the sleeper's deadline pass, interrupt it with a signal (its
//! futex wait returns EINTR), or play a signal handler that notes it ran
//! (`intr.rs`: the counter moves, a watched SLEEPING word goes back to
//! QUEUED, and a futex wait in progress ends). The real handler runs on
//! the sleeper's thread, between two of its instructions, and sees
//! everything the sleeper did before; as a thread of its own it can also
//! fall in the middle of them, which is harsher. SeqCst fences on both
//! sides stand for the single thread's order (loom takes SeqCst accesses
//! for AcqRel, but models SeqCst fences).
//! Or it may nudge the sleeper, as a waker that completed another record
//! does (`park::nudge`: SLEEPING back to QUEUED, a wake-up).
//! Asserted in every interleaving: the decrement happened exactly when the
//! sleeper returns success, never twice and never lost (the post is
//! either consumed by the sleeper or left in the value); the record is off
//! the queue when the sleeper returns; and no wake-up is lost (without a
//! deadline or a signal the sleeper can only be ended by the waker: loom
//! fails the model if it would block forever).

use super::{Park, Slept, Wake, complete, finished, nudge, sleep};
use crate::sync::{AtomicI32, AtomicU32, Ordering};
use loom::sync::atomic::{AtomicBool, fence};
use loom::sync::{Arc, Condvar, Mutex};

struct World {
    /// The object lock, guarding whether the record is linked.
    queue: Mutex<bool>,
    state: AtomicU32,
    status: AtomicI32,
    /// The semaphore's value and how many times the sleeper's operation
    /// was performed.
    value: AtomicU32,
    applied: AtomicU32,
    /// The futex: its hash-bucket lock and wait queue.
    futex: Mutex<()>,
    woken: Condvar,
    /// The deadline passed / a signal handler ran.
    expired: AtomicBool,
    signalled: AtomicBool,
    /// Handlers noted (`intr.rs`'s counter), and whether the sleeper
    /// watches its state word.
    notes: AtomicU32,
    watched: AtomicBool,
}

/// The system as one thread sees it: the world and, for the sleeper, the
/// handlers noted when its call began.
struct ModelPark<'w>(&'w World, u32);

impl Park for ModelPark<'_> {
    fn now(&self) -> u64 {
        // The deadline is 1: passed once the timer thread says so.
        if self.0.expired.load(Ordering::SeqCst) {
            2
        } else {
            0
        }
    }
    fn wait(&self, word: &AtomicU32, expected: u32, _slice: u64) -> Wake {
        let w = self.0;
        let end = || {
            if w.signalled.load(Ordering::SeqCst) {
                Some(Wake::Interrupted)
            } else if w.expired.load(Ordering::SeqCst) {
                Some(Wake::TimedOut)
            } else {
                None
            }
        };
        let g = w.futex.lock().unwrap();
        if word.load(Ordering::SeqCst) != expected {
            return Wake::Woken;
        }
        if let Some(e) = end() {
            return e;
        }
        // A handler noted during the wait ends it with EINTR; one noted
        // before does not (the futex knows nothing of it).
        let notes = w.notes.load(Ordering::SeqCst);
        let _g = w.woken.wait(g).unwrap();
        end().unwrap_or(if w.notes.load(Ordering::SeqCst) != notes {
            Wake::Interrupted
        } else {
            Wake::Woken
        })
    }
    fn wake(&self, _word: &AtomicU32) {
        let _g = self.0.futex.lock().unwrap();
        self.0.woken.notify_all();
    }
    fn spin_ns(&self) -> u64 {
        0
    }
    fn tick_ns(&self) -> u64 {
        1
    }
    fn beat(&self) {}
    fn pause(&self) {}
    fn tick(&mut self) {}
    fn noted(&self) -> bool {
        // The sleeper's watch and CAS before, as its own handler sees them.
        fence(Ordering::SeqCst);
        self.0.notes.load(Ordering::SeqCst) != self.1
    }
    fn watch(&mut self, _word: &AtomicU32) {
        self.0.watched.store(true, Ordering::SeqCst);
    }
    fn unwatch(&mut self) {
        self.0.watched.store(false, Ordering::SeqCst);
    }
}

/// What ended the sleeper's wait in the scene, if anything but the waker.
#[derive(Clone, Copy)]
enum Third {
    Nobody,
    Deadline,
    Signal,
    Note,
    /// Another waker's nudge (`park::nudge`), under the object lock.
    Nudge,
}

/// The scene's start: the record queued, the semaphore at 0.
fn world() -> Arc<World> {
    Arc::new(World {
        queue: Mutex::new(true),
        state: AtomicU32::new(super::QUEUED),
        status: AtomicI32::new(-1),
        value: AtomicU32::new(0),
        applied: AtomicU32::new(0),
        futex: Mutex::new(()),
        woken: Condvar::new(),
        expired: AtomicBool::new(false),
        signalled: AtomicBool::new(false),
        notes: AtomicU32::new(0),
        watched: AtomicBool::new(false),
    })
}

/// What `note_signal` does, then the signal's own effect on a futex wait
/// in progress (it ends it).
fn note(w: &World) {
    w.notes.fetch_add(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if w.watched.load(Ordering::SeqCst) {
        let _ = w.state.compare_exchange(
            super::SLEEPING,
            super::QUEUED,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}

fn scene(third: Third) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        let w = world();
        let ws = w.clone();
        let sleeper = loom::thread::spawn(move || {
            // The call begins.
            let mut p = ModelPark(&ws, ws.notes.load(Ordering::SeqCst));
            let deadline = matches!(third, Third::Deadline).then_some(1);
            match sleep(&ws.state, &ws.status, deadline, &mut p) {
                Slept::Done(s) => Some(s),
                gave_up => {
                    let mut linked = ws.queue.lock().unwrap();
                    match finished(&ws.state, &ws.status) {
                        Some(s) => Some(s),
                        None => {
                            assert!(*linked, "a record neither queued nor done");
                            *linked = false;
                            assert_ne!(gave_up, Slept::Done(0));
                            None
                        }
                    }
                }
            }
        });
        let ww = w.clone();
        let waker = loom::thread::spawn(move || {
            let mut linked = ww.queue.lock().unwrap();
            if *linked {
                *linked = false;
                ww.applied.fetch_add(1, Ordering::SeqCst);
                complete(&ww.state, &ww.status, 0, &ModelPark(&ww, 0));
            } else {
                ww.value.fetch_add(1, Ordering::SeqCst);
            }
        });
        let third_thread = match third {
            Third::Nobody => None,
            Third::Nudge => {
                let wt = w.clone();
                Some(loom::thread::spawn(move || {
                    let linked = wt.queue.lock().unwrap();
                    if *linked {
                        nudge(&wt.state, &ModelPark(&wt, 0));
                    }
                }))
            }
            Third::Deadline | Third::Signal | Third::Note => {
                let wt = w.clone();
                Some(loom::thread::spawn(move || {
                    match third {
                        Third::Signal => wt.signalled.store(true, Ordering::SeqCst),
                        Third::Note => note(&wt),
                        _ => wt.expired.store(true, Ordering::SeqCst),
                    }
                    let _g = wt.futex.lock().unwrap();
                    wt.woken.notify_all();
                }))
            }
        };
        let result = sleeper.join().unwrap();
        waker.join().unwrap();
        if let Some(t) = third_thread {
            t.join().unwrap();
        }
        let (applied, value) = (
            w.applied.load(Ordering::SeqCst),
            w.value.load(Ordering::SeqCst),
        );
        match result {
            Some(s) => {
                assert_eq!(s, 0);
                assert_eq!((applied, value), (1, 0), "success without the decrement");
            }
            None => {
                assert!(
                    !matches!(third, Third::Nobody | Third::Nudge),
                    "gave up with nothing to end it"
                );
                assert_eq!((applied, value), (0, 1), "gave up, yet the post was taken");
            }
        }
        assert!(!*w.queue.lock().unwrap(), "the record was left queued");
    });
}

#[test]
fn waker_alone() {
    scene(Third::Nobody);
}

#[test]
fn deadline_races_the_waker() {
    scene(Third::Deadline);
}

#[test]
fn signal_races_the_waker() {
    scene(Third::Signal);
}

#[test]
fn noted_handler_races_the_waker() {
    scene(Third::Note);
}

/// A nudge (SLEEPING back to QUEUED, a wake-up) at any point of the
/// sleeper's wait loses no completion: the sleeper sleeps again and the
/// waker still ends it.
#[test]
fn nudge_races_the_waker() {
    scene(Third::Nudge);
}

/// A handler noted after the call began, with no waker: whatever the
/// moment (spinning, between the watch and the CAS, between the CAS and
/// the futex wait, during it), the sleep ends as Interrupted. A lost note
/// leaves the sleeper asleep for good, which loom reports.
#[test]
fn noted_handler_alone_ends_the_sleep() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let w = world();
        let began = Arc::new(AtomicBool::new(false));
        let (ws, bs) = (w.clone(), began.clone());
        let sleeper = loom::thread::spawn(move || {
            let mut p = ModelPark(&ws, ws.notes.load(Ordering::SeqCst));
            bs.store(true, Ordering::SeqCst);
            sleep(&ws.state, &ws.status, None, &mut p)
        });
        let wt = w.clone();
        let handler = loom::thread::spawn(move || {
            while !began.load(Ordering::SeqCst) {
                loom::thread::yield_now();
            }
            note(&wt);
            let _g = wt.futex.lock().unwrap();
            wt.woken.notify_all();
        });
        assert_eq!(sleeper.join().unwrap(), Slept::Interrupted);
        handler.join().unwrap();
    });
}
