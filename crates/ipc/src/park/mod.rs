//! The handshake between a sleeper and its waker on a waiter record's
//! `state` word (a shared futex): the part of the wait queue that decides
//! who owns the record and whether an operation happened, kept apart from
//! the arena so that loom can check it (`park/model.rs`).
//!
//! # Protocol
//! The record is queued QUEUED, under the object lock. The sleeper spins a
//! little, then says it sleeps (CAS QUEUED -> SLEEPING) and waits on the
//! futex while the word reads SLEEPING. A waker holding the object lock
//! unlinks the record, performs the sleeper's operation, stores the result
//! in `status` and swaps the word to DONE (Release), issuing FUTEX_WAKE
//! only if the word was SLEEPING: the CAS and the swap are on the same
//! word, so a sleeper that said it sleeps is always woken, and one that did
//! not never blocks (FUTEX_WAIT returns at once on a word that is no longer
//! SLEEPING). After DONE the record and its result are the sleeper's.
//!
//! A sleeper whose deadline passes or whose wait a signal handler cut takes
//! the object lock and asks [`finished`]: a waker that completed it first
//! did so under that lock, so the sleeper sees DONE and returns the
//! operation's result (it happened); otherwise the record is still queued,
//! and the sleeper unlinks it itself: the operation never happens.
//!
//! A waker holding the object lock may also nudge a record whose turn is
//! next ([`nudge`]): CAS SLEEPING -> QUEUED, then FUTEX_WAKE. Its sleeper,
//! back from the futex with the word QUEUED and no handler noted, spins
//! again for a while before it says it sleeps again; nothing is decided
//! by a nudge (the record stays queued, and a completion still swaps the
//! word to DONE).
//!
//! Signal handlers: a handler that runs while the sleeper is outside
//! FUTEX_WAIT (spinning, between the CAS and the system call, between two
//! slices) does not make the wait return EINTR. So the sleeper also asks
//! [`Park::noted`] (has a handler said it ran since the call began?) while
//! it spins, right after its CAS to SLEEPING and after every futex return;
//! and before the CAS it registers the word ([`Park::watch`]), which lets
//! such a handler CAS it back SLEEPING -> QUEUED so that a FUTEX_WAIT about
//! to start returns at once (`intr.rs` has the argument). To the waker
//! that CAS looks like a sleeper that never said it sleeps.

use crate::sync::{AtomicI32, AtomicU32, Ordering};

/// `state`: on the queue, spinning.
pub const QUEUED: u32 = 0;
/// `state`: on the queue, asleep in FUTEX_WAIT (the waker must wake it).
pub const SLEEPING: u32 = 1;
/// `state`: unlinked; `status` holds the result. The sleeper frees it.
pub const DONE: u32 = 2;
/// `state`: unlinked without its operation by a thread of the sleeper's
/// own process that is about to replace the program image (execve): the
/// sleeper, if it ever runs again (the execve failed), frees the record
/// and starts its call over.
pub const CANCELLED: u32 = 3;
/// `state`: given up by its sleeper (its timeout passed, or a handler ran)
/// while the object's lock was kept from it: still linked, never to be
/// completed; whoever holds the lock next unlinks and frees it (as a dead
/// sleeper's). Set only by the sleeper, from QUEUED or SLEEPING.
pub const ABANDONED: u32 = 4;

/// How one wait on the futex ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wake {
    /// Woken, or the word no longer held the value.
    Woken,
    /// The slice ran out.
    TimedOut,
    /// A signal handler ran.
    Interrupted,
}

/// How a sleep ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Slept {
    /// The waker finished it: the operation's result.
    Done(i32),
    /// The deadline passed while still queued.
    TimedOut,
    /// A signal handler ran while still queued.
    Interrupted,
    /// Taken off the queue without its operation ([`CANCELLED`]).
    Cancelled,
}

/// What the handshake needs of the system (the real one in `wait.rs`,
/// threads and a condition variable in the model).
pub trait Park {
    /// CLOCK_MONOTONIC, ns.
    fn now(&self) -> u64;
    /// FUTEX_WAIT on `word` while it holds `expected`, at most `slice` ns.
    fn wait(&self, word: &AtomicU32, expected: u32, slice: u64) -> Wake;
    /// FUTEX_WAKE of every sleeper on `word`.
    fn wake(&self, word: &AtomicU32);
    /// How long to spin before the first futex wait.
    fn spin_ns(&self) -> u64;
    /// How long to spin again after a [`nudge`].
    fn nudged_spin_ns(&self) -> u64 {
        0
    }
    /// The longest futex wait before `tick` runs.
    fn tick_ns(&self) -> u64;
    /// Called while spinning now and then (the sleeper's heartbeat).
    fn beat(&self);
    /// Gives the cpu away for a moment while spinning (sched_yield).
    fn pause(&self);
    /// Called after each slice that ran out (cleaning up after the dead).
    fn tick(&mut self);
    /// Whether a signal handler said it ran on this thread since the call
    /// began (`intr.rs`). None does unless the system says so.
    fn noted(&self) -> bool {
        false
    }
    /// Lets a handler that runs from now on end the wait on `word` before
    /// it starts (it CASes SLEEPING back to QUEUED). Called once, before
    /// the first CAS to SLEEPING.
    fn watch(&mut self, _word: &AtomicU32) {}
    /// Ends [`Park::watch`]; called before the sleep returns.
    fn unwatch(&mut self) {}
}

/// Ends a record's wait with `status` (0 or an errno) and wakes its
/// sleeper. Object lock held; the record is already unlinked (or, for a
/// message queue's handover, left for its sleeper to collect).
pub fn complete(state: &AtomicU32, status_word: &AtomicI32, status: i32, p: &impl Park) {
    status_word.store(status, Ordering::Relaxed);
    // Release: the sleeper's Acquire load of DONE sees the status (and the
    // operation's effects). The swap, on the word the sleeper CASes to
    // SLEEPING, tells whether it may be asleep.
    if state.swap(DONE, Ordering::Release) == SLEEPING {
        p.wake(state);
    }
}

/// Wakes a sleeper whose turn comes soon, without completing its record:
/// SLEEPING back to QUEUED (as a signal handler's reset, `intr.rs`), then
/// FUTEX_WAKE. The sleeper, finding its record QUEUED after a wake-up and
/// no handler noted, spins again ([`Park::nudged_spin_ns`]), so that the
/// waker that completes it next need not wake it from the kernel (on a
/// virtual machine, tens of µs when its cpu idles). Object lock held.
pub fn nudge(state: &AtomicU32, p: &impl Park) {
    if state
        .compare_exchange(SLEEPING, QUEUED, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        p.wake(state);
    }
}

/// Waits until the record is DONE, `deadline` (monotonic ns) passes, or a
/// signal handler runs. No lock held; the record is the caller's.
pub fn sleep(
    state: &AtomicU32,
    status: &AtomicI32,
    deadline: Option<u64>,
    p: &mut impl Park,
) -> Slept {
    let mut watching = false;
    let end = sleep_watching(state, status, deadline, p, &mut watching);
    if watching {
        p.unwatch();
    }
    end
}

fn sleep_watching(
    state: &AtomicU32,
    status: &AtomicI32,
    deadline: Option<u64>,
    p: &mut impl Park,
    watching: &mut bool,
) -> Slept {
    let mut start = p.now();
    p.beat();
    let mut spins = 0u32;
    let mut window = p.spin_ns();
    let mut spinning = window > 0;
    loop {
        // Acquire: pairs with the Release in `complete`.
        let s = state.load(Ordering::Acquire);
        if s == DONE {
            return Slept::Done(status.load(Ordering::Relaxed));
        }
        if s == CANCELLED {
            return Slept::Cancelled;
        }
        // signal(7): "If a blocked call to one of the following interfaces
        // is interrupted by a signal handler, then the call fails with the
        // error EINTR, regardless of the use of SA_RESTART: ... semop(2),
        // semtimedop(2), msgrcv(2), msgsnd(2)". Seen here after spinning,
        // after the CAS below and after every futex return.
        if p.noted() {
            return Slept::Interrupted;
        }
        // The clock only every 8th turn while spinning (a clock read costs
        // as much as the rest of a turn).
        spins = spins.wrapping_add(1);
        if spinning && !spins.is_multiple_of(8) {
            core::hint::spin_loop();
            continue;
        }
        let now = p.now();
        if let Some(d) = deadline
            && now >= d
        {
            return Slept::TimedOut;
        }
        spinning = now.saturating_sub(start) < window;
        if spinning {
            // A beat every 64 turns (a waker watching it learns that this
            // sleeper runs within a microsecond or so); a yield every 128
            // (every 512 left 4 and 8 processes on one semaphore of 2 cpus
            // at a third of the throughput; every 64, with the clock read
            // every 8th turn only, made ping-pong twice as slow).
            if spins.is_multiple_of(64) {
                p.beat();
                if spins.is_multiple_of(128) {
                    p.pause();
                }
            }
            core::hint::spin_loop();
            continue;
        }
        if !*watching {
            p.watch(state);
            *watching = true;
        }
        // Say we sleep; the waker then issues a FUTEX_WAKE. Relaxed: the
        // word itself is all the waker reads of it (its swap sees it).
        if s == QUEUED
            && state
                .compare_exchange(QUEUED, SLEEPING, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            continue;
        }
        // A handler that ran before the CAS found the word QUEUED and left
        // it: only the counter tells. One that runs from here on resets
        // the word, and the FUTEX_WAIT below returns at once.
        if p.noted() {
            return Slept::Interrupted;
        }
        let slice = deadline.map_or(p.tick_ns(), |d| d.saturating_sub(now).min(p.tick_ns()));
        match p.wait(state, SLEEPING, slice.max(1)) {
            Wake::Interrupted => {
                if state.load(Ordering::Acquire) != DONE {
                    return Slept::Interrupted;
                }
            }
            Wake::TimedOut => {
                p.beat();
                p.tick();
            }
            // QUEUED again without a handler noted (seen at the loop's
            // top, first): a waker's nudge, the turn is near.
            Wake::Woken => {
                if state.load(Ordering::Relaxed) == QUEUED && p.nudged_spin_ns() > 0 {
                    start = p.now();
                    window = p.nudged_spin_ns();
                    spinning = true;
                    p.beat();
                }
            }
        }
    }
}

/// After a sleep that ended without DONE, under the object lock: the
/// operation's result if a waker completed the record meanwhile (under
/// that same lock, so Relaxed loads see it), else None: the record is
/// still queued and the caller unlinks it.
pub fn finished(state: &AtomicU32, status: &AtomicI32) -> Option<i32> {
    (state.load(Ordering::Relaxed) == DONE).then(|| status.load(Ordering::Relaxed))
}

#[cfg(all(test, loom))]
mod model;
