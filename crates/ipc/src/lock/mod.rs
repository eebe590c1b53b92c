//! Locks of ipcns's own, on a futex word in the arena, that survive the
//! death of their holder whatever the word holds.
//!
//! # Protocol
//! `word` is 0 when free, else the holder's identity: its thread id in bits
//! 0-29, [`WAITERS`] in bit 31 once someone may sleep on it, and in the
//! high 32 bits a tag of the holder thread's boot and start time (which
//! thread it is, even after its tid is reused). Taking a free lock is one
//! compare-and-swap that writes all of it at once (no system call, no
//! window in which the lock is held by nobody known); releasing it is one
//! more, plus a `FUTEX_WAKE` only if [`WAITERS`] was set. Waiters spin a
//! little (and, on a message queue's lock, give the cpu away a few times:
//! [`GIVE_WAY`]), then sleep on the word's low 32 bits (a shared futex)
//! with a timeout ([`Os::wait`]), counted in `sleepers` meanwhile and
//! setting [`WAITERS`] themselves before each sleep. A release with
//! [`WAITERS`] wakes one sleeper and hands it the baton: a waiter that has
//! slept, once woken, wakes the next if `sleepers` says others still
//! sleep, sets [`WAITERS`] again when it takes the lock on the same
//! condition, and wakes one if it gives up (its deadline). Nobody else
//! sets it: a waiter woken but not yet running is still counted in
//! `sleepers`, and every taker re-arming on that count made each of its
//! own releases a futile `FUTEX_WAKE` until the woken one ran (a million a
//! second between a message queue's sender and receiver, a third of their
//! throughput). A baton lost with its holder (killed after its wake) costs
//! the other sleepers at most their sleep's timeout, a slice.
//!
//! Before its first sleep, and whenever a slice has passed with the same
//! holder (whatever ended the sleeps: signals do not hold it off), a
//! waiter asks whether the holder lives: a thread with that tid exists, is not a
//! zombie, and has that tag. If not (it died, its tid was reused, the word
//! is garbage, or it dates from an earlier boot), the lock is taken over:
//! a compare-and-swap from the exact word observed, so a lock that changed
//! hands meanwhile is never stolen. No timing assumption is involved: a
//! holder that is alive is always recognised as such.
//!
//! Taking over sets `dirty`: the state the lock protects may be
//! half-changed. Every later holder is told ([`Guard::recovered`]) until
//! one calls [`Guard::repaired`] after its repair succeeded, so a repair
//! that fails (or whose runner dies) is retried by the next holder.
//!
//! Out of scope, as for any shared lock: a holder that is alive but stopped
//! (SIGSTOP, a debugger) stalls the others until it runs again; and a tag
//! collision (a new thread with the dead holder's tid and the same 32-bit
//! tag) keeps the lock until that thread ends.
//!
//! # Lock order
//! The one order every holder of several arena locks keeps (each file
//! that takes locks points here):
//!
//! 1. a mechanism's registry lock (creation, removal, a whole-namespace
//!    look: `registry.rs`);
//! 2. object locks (a set, a queue, a segment), several in ascending idx;
//! 3. the procs lock (`proc.rs`: the process table and each record's
//!    undo and attachment lists);
//! 4. the heap lock (`heap/global.rs`), a leaf: nothing is taken while it
//!    is held, and it is waited for within the call's bound at any depth
//!    ([`Lock::lock_leaf`]).
//!
//! A level may be skipped, never taken in reverse: a caller that holds a
//! later lock and needs an earlier one lets go first (the exit path takes
//! set locks and the procs lock in turn, never together). Only the
//! outermost lock carries a call's own deadline; a limit
//! (`gate::lock_limit`) bounds them all (`gate.rs`).
//!
//! # Layout
//! 24 bytes, all zero = free and clean: `word` @0 (the futex is its low
//! half), `dirty` @8, `sleepers` @12. No initialisation step: a zeroed
//! slot holds a valid lock.

#[cfg(not(loom))]
pub mod gate;
#[cfg(not(loom))]
pub mod local;
#[cfg(not(loom))]
mod os;
/// The clocks (the system-call layer's): deadlines and sleepers'
/// heartbeats in CLOCK_MONOTONIC ns, IPC objects' stamps in coarse wall
/// seconds.
#[cfg(not(loom))]
#[cfg(not(loom))]
use crate::sys::time::monotonic_ns;
#[cfg(all(not(loom), feature = "testing"))]
pub use os::identity_of;
#[cfg(not(loom))]
pub use os::{
    Holder, RECOVERIES, RealOs, Woke, boot_id, clear_in_fork_child, forget_arena, fork_generation,
    forks_now, futex_wait, futex_wake_all, holder_of, identity_alive, identity_verified_lately,
    my_identity, note_arena, own_start, parent_pid, process_alive, process_ending, process_start,
    random_u64, sleeper_identity_alive_as_of, thread_answers, thread_children, thread_count,
};

#[cfg(all(test, loom))]
mod model;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(all(test, not(loom)))]
use os::sleeper_identity_alive;

use crate::errno::Errno;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// `word` bit: a waiter may be sleeping; the releaser must wake one.
pub const WAITERS: u64 = 1 << 31;
/// `word` bits naming the holder's thread id (Linux tids are below 2^22).
pub const TID_MASK: u64 = (1 << 30) - 1;
/// `word` bits naming the holder: tid and tag.
const WHO: u64 = !WAITERS & !(1 << 30);

/// What the lock needs from the operating system (or from a model of it).
pub trait Os {
    /// The calling thread's identity as the word holds it: its tag in the
    /// high 32 bits, its tid (nonzero, within [`TID_MASK`]) in the low.
    fn me(&self) -> u64;
    /// Sleeps while the low half of `word` holds `expected`, at most one
    /// time slice; true when the slice ran out (not a wake-up or a change).
    fn wait(&self, word: &AtomicU64, expected: u32) -> bool;
    /// As [`Os::wait`], the slice cut short at `deadline` (monotonic ns),
    /// telling a wake-up apart.
    fn wait_until(&self, word: &AtomicU64, expected: u32, deadline: Option<u64>) -> WaitEnd {
        let _ = deadline;
        if self.wait(word, expected) {
            WaitEnd::TimedOut
        } else {
            WaitEnd::Other
        }
    }
    /// Wakes one sleeper on `word`.
    fn wake(&self, word: &AtomicU64);
    /// Whether the thread named by `who` (tid and tag) still lives.
    fn liveness(&self, who: u64) -> Liveness;
    /// Spins on a held lock before the first sleep.
    fn spins(&self) -> u32 {
        SPINS
    }
    /// Gives the cpu away after the spins, before the first sleep (see
    /// [`GIVE_WAY`]); false when it does not. None by default.
    fn give_way(&self) -> bool {
        false
    }
    /// A clock in nanoseconds (monotonic): how long a waiter has slept,
    /// whatever ended its sleeps.
    fn now_ns(&self) -> u64;
    /// The length of one sleep.
    fn slice_ns(&self) -> u64;
    /// A point between two steps of the algorithm where the model may kill
    /// the caller (`Err`); the real system never fails here.
    fn step(&self) -> Result<(), Errno> {
        Ok(())
    }
    /// Counts a takeover (statistics).
    fn took_over(&self) {}
    /// Whether the live thread named by `who` is no participant at all
    /// (maps none of the caller's arenas): a word a hostile participant
    /// wrote with a stranger's identity. Asked only of a holder that keeps
    /// a lock for [`STRANGER_NS`].
    fn stranger(&self, who: u64) -> bool {
        let _ = who;
        false
    }
}

/// The verdict on a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The thread lives and the tag is its own.
    Alive,
    /// No such thread (dead, a zombie, another thread with its tid, or
    /// another boot): the lock is free to take over.
    Gone,
}

/// A lock that survives its holder's death.
///
/// # Layout
/// See the module doc. `word` is changed by compare-and-swap only;
/// `dirty` is written by holders.
#[repr(C, align(8))]
pub struct Lock {
    word: AtomicU64,
    /// 1 while the protected state needs a repair.
    dirty: AtomicU32,
    /// Waiters inside a sleep, or about to sleep (raised before a waiter
    /// sets [`WAITERS`], lowered after its sleep): whether a waiter that
    /// slept wakes the next, or sets [`WAITERS`] for the others when it
    /// takes the lock. A hint only: one
    /// too many costs a spare wake-up; one too few a sleep of up to a
    /// slice (every sleep is bounded, and a sleeper sets [`WAITERS`]
    /// itself before each).
    sleepers: AtomicU32,
    _spare: AtomicU64,
}

// repr(C), atomics only, no Drop; any bits are a valid (if stale) lock.
#[cfg(not(loom))]
crate::shared::shared_types!(Lock);

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Lock>() == 24);
    assert!(core::mem::offset_of!(Lock, dirty) == 8);
    assert!(core::mem::offset_of!(Lock, sleepers) == 12);
    // The futex is the word's low half: little-endian machines only.
    assert!(cfg!(target_endian = "little"));
};

/// How a waiter's sleep ended ([`Os::wait_until`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WaitEnd {
    /// A `FUTEX_WAKE` woke it.
    Woken,
    /// Its slice (or its deadline) ran out.
    TimedOut,
    /// The word changed before it slept, or a signal.
    Other,
}

/// Spins before the first sleep (a holder usually leaves within a few µs).
const SPINS: u32 = 64;

/// Times a waiter on a lock taken with [`Lock::lock_giving_way`] gives the
/// cpu away (sched_yield) after its spins, before it sleeps: a holder
/// preempted on this cpu runs, one running elsewhere is waited for without
/// a sleep and its wake-up (on a virtual machine an idle cpu is woken by
/// the host, tens of µs). For a message queue's lock: 4 producer and 4
/// consumer processes on one queue of 2 cpus went 3x faster. Not for the
/// others: on a semaphore set's lock, stress-ng's semaphore switch pairs
/// went 8x slower (a yield costs the yielder its place in the
/// scheduler's order).
const GIVE_WAY: u32 = 8;

/// A lock deadline that means "[`NOWAIT_LOCK_NS`] after the wait starts".
pub const NOWAIT_MARK: u64 = 1;

/// How long a call with IPC_NOWAIT waits for a lock at most (its holder
/// stopped, or a hostile word): then it answers as if it would block.
pub const NOWAIT_LOCK_NS: u64 = 1_000_000_000;

/// The lock deadline of a call with an optional `deadline` (a timeout) and
/// IPC_NOWAIT or not ([`NOWAIT_LOCK_NS`]): the guard that keeps it in
/// force (`gate::call_deadline`), None when the call has neither.
#[cfg(not(loom))]
#[inline(always)]
pub fn bound_for(deadline: Option<u64>, nowait: bool) -> Option<gate::CallDeadline> {
    let d = match (deadline, nowait) {
        // The bound starts when a wait does: no clock read on the way.
        (None, true) => Some(NOWAIT_MARK),
        (Some(d), true) => Some(d.min(monotonic_ns().saturating_add(NOWAIT_LOCK_NS))),
        (d, false) => d,
    };
    d.map(gate::call_deadline)
}

/// How long a leaf lock (`Lock::lock_leaf`) is waited for at least by a
/// call with a bound: a call whose timeout is (nearly) over does not give
/// up a leaf over a holder's usual few microseconds.
pub const LEAF_GRACE_NS: u64 = 100_000_000;

/// Runs `f` with every arena lock it waits for waited for at most `limit`
/// in all (`ipcns::with_lock_limit`).
#[cfg(not(loom))]
pub fn with_limit<R>(limit: core::time::Duration, f: impl FnOnce() -> R) -> R {
    let ns = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
    let _limit = gate::lock_limit(monotonic_ns().saturating_add(ns).max(2));
    f()
}

/// A live holder that keeps a lock this long (and again each time this
/// long) is asked whether it is a participant at all ([`Os::stranger`]).
pub const STRANGER_NS: u64 = 1_000_000_000;

impl Lock {
    /// A free, clean lock (what zeroed memory holds).
    #[cfg(any(test, loom))]
    pub fn new() -> Lock {
        Lock {
            word: AtomicU64::new(0),
            dirty: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            _spare: AtomicU64::new(0),
        }
    }

    /// Takes the lock; `Ok(true)` when the state it protects needs a repair
    /// (a holder died, or a repair did not complete). EDEADLK if the caller
    /// holds it already.
    #[inline]
    pub fn acquire<O: Os>(&self, os: &O) -> Result<bool, Errno> {
        self.acquire_until(os, None)
    }

    /// [`Lock::acquire`], giving up with ETIMEDOUT once the monotonic
    /// clock (`Os::now_ns`) passes `deadline`: a holder that is alive but
    /// never lets go (stopped, or a word a hostile participant wrote with
    /// a live thread's identity) does not hold a caller with a timeout
    /// past it.
    #[inline]
    pub fn acquire_until<O: Os>(&self, os: &O, deadline: Option<u64>) -> Result<bool, Errno> {
        let me = os.me();
        // Acquire: pairs with the Release of the previous holder's
        // `release`, making the protected state it wrote visible.
        if self
            .word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return self.acquire_slow(os, me, deadline);
        }
        os.step()?;
        Ok(self.needs_repair())
    }

    /// Whether the state needs a repair (read by the holder).
    #[inline]
    fn needs_repair(&self) -> bool {
        // Relaxed: written by holders only, ordered by the word's
        // Acquire/Release.
        self.dirty.load(Ordering::Relaxed) != 0
    }

    #[cold]
    fn acquire_slow<O: Os>(&self, os: &O, me: u64, deadline: Option<u64>) -> Result<bool, Errno> {
        let deadline = deadline.map(|d| {
            if d == NOWAIT_MARK {
                os.now_ns().saturating_add(NOWAIT_LOCK_NS)
            } else {
                d
            }
        });
        let mut spins = 0;
        let mut ways = 0;
        let mut checked = false;
        // Whether this waiter has slept: then it may hold the baton (the
        // protocol above).
        let mut slept = false;
        // When the holder was last checked: a waiter whose sleeps keep
        // ending early (signals) still checks once a slice has passed.
        let mut last_check = 0u64;
        // When a live holder was last asked whether it is a stranger.
        let mut last_stranger = os.now_ns();
        loop {
            os.step()?;
            let v = self.word.load(Ordering::Relaxed);
            if v & TID_MASK == 0 {
                // Free. WAITERS set by a waiter that slept if others sleep
                // (the release that freed it woke one of them at most, and
                // they set it on the word they slept on, not on ours); not
                // by one that only spun, which holds no baton: every
                // release with WAITERS set makes a system call.
                let others = if slept && self.others_asleep() {
                    WAITERS
                } else {
                    0
                };
                if self
                    .word
                    .compare_exchange(v, me | others, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    os.step()?;
                    return Ok(self.needs_repair());
                }
                continue;
            }
            if v & WHO == me {
                // Our own identity: a recursive call.
                return Err(Errno(libc::EDEADLK));
            }
            if v & TID_MASK == me & TID_MASK {
                // Our tid with another tag: a dead thread's, since we are
                // the only live thread with this tid.
                if let Some(r) = self.take_over(os, v, me)? {
                    return Ok(r);
                }
                continue;
            }
            if spins < os.spins() {
                spins += 1;
                core::hint::spin_loop();
                continue;
            }
            if ways < GIVE_WAY && os.give_way() {
                ways += 1;
                continue;
            }
            if deadline.is_some_and(|d| os.now_ns() >= d) {
                // A woken waiter leaving hands its baton on.
                if slept && self.others_asleep() {
                    os.wake(&self.word);
                }
                return Err(Errno(libc::ETIMEDOUT));
            }
            if !checked {
                // Before the first sleep: a holder that is already gone
                // (a corpse, junk) is taken over without waiting a slice.
                checked = true;
                last_check = os.now_ns();
                if os.liveness(v & WHO) == Liveness::Gone
                    && let Some(r) = self.take_over(os, v, me)?
                {
                    return Ok(r);
                }
                continue;
            }
            // Counted before WAITERS is set: a waiter that takes the lock
            // after our sleep starts sees us (SeqCst, as its load).
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if v & WAITERS == 0
                && self
                    .word
                    .compare_exchange(v, v | WAITERS, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
            {
                self.not_sleeping();
                continue;
            }
            let ended = os.wait_until(&self.word, (v | WAITERS) as u32, deadline);
            let timed_out = ended == WaitEnd::TimedOut;
            slept = true;
            self.not_sleeping();
            if ended == WaitEnd::Woken && self.others_asleep() {
                // Others sleep: the next is woken now, as the release that
                // woke us would have if it had known (every sleeper up and
                // spinning when several processes share few cpus, without
                // a system call at every hand-over when one sleeps).
                os.wake(&self.word);
            }
            os.step()?;
            let v2 = self.word.load(Ordering::Relaxed);
            if v2 & WHO != v & WHO {
                continue;
            }
            let now = os.now_ns();
            if !timed_out && now.saturating_sub(last_check) < os.slice_ns() {
                continue;
            }
            last_check = now;
            let gone = os.liveness(v2 & WHO) == Liveness::Gone || {
                now.saturating_sub(last_stranger) >= STRANGER_NS && {
                    last_stranger = now;
                    os.stranger(v2 & WHO)
                }
            };
            if gone && let Some(r) = self.take_over(os, v2, me)? {
                return Ok(r);
            }
        }
    }

    /// Whether `sleepers` counts a waiter asleep (other than the caller,
    /// which is counted out after its sleep).
    fn others_asleep(&self) -> bool {
        self.sleepers.load(Ordering::SeqCst) != 0
    }

    /// A waiter's sleep is over (the count never goes below 0, whatever
    /// a participant wrote).
    fn not_sleeping(&self) {
        let _ = self
            .sleepers
            .fetch_update(Ordering::SeqCst, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Takes the lock from a dead holder: only if the word is still `seen`.
    fn take_over<O: Os>(&self, os: &O, seen: u64, me: u64) -> Result<Option<bool>, Errno> {
        // Acquire: as in `acquire`; the dead holder released nothing, so
        // what it wrote may be half done, hence `dirty`.
        if self
            .word
            .compare_exchange(seen, me | WAITERS, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Ok(None);
        }
        os.step()?;
        self.dirty.store(1, Ordering::Relaxed);
        os.took_over();
        Ok(Some(true))
    }

    /// The repair of the protected state has completed.
    pub fn mark_repaired(&self) {
        // Relaxed: published by the Release in `release`.
        self.dirty.store(0, Ordering::Relaxed);
    }

    /// Releases the lock held by the caller. If it was taken over meanwhile
    /// (the caller was judged dead), leaves it to its new holder.
    #[inline]
    pub fn release<O: Os>(&self, os: &O) -> Result<(), Errno> {
        let me = os.me();
        let mut v = self.word.load(Ordering::Relaxed);
        loop {
            if v & WHO != me {
                return Ok(());
            }
            // Release: pairs with the next holder's Acquire.
            match self
                .word
                .compare_exchange_weak(v, 0, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => v = now,
            }
        }
        os.step()?;
        if v & WAITERS != 0 {
            os.wake(&self.word);
        }
        Ok(())
    }

    /// The raw word and whether a repair is pending (for `ns info`, tests).
    pub fn snapshot(&self) -> (u64, bool) {
        (
            self.word.load(Ordering::Relaxed),
            self.dirty.load(Ordering::Relaxed) != 0,
        )
    }
}

#[cfg(not(loom))]
pub use guard::Guard;

#[cfg(not(loom))]
mod guard {
    use super::gate::{self, Inside};
    use super::{Liveness, Lock, Os, RealOs, WaitEnd};
    use crate::errno::Errno;
    use crate::sync::AtomicU64;
    use core::marker::PhantomData;

    /// The real system, for a thread whose identity is already known (the
    /// gate found it): no second look-up at each acquire and release.
    struct Known(u64, bool);

    impl Os for Known {
        #[inline(always)]
        fn me(&self) -> u64 {
            self.0
        }
        fn give_way(&self) -> bool {
            self.1 && {
                crate::sys::process::sched_yield();
                true
            }
        }
        fn wait(&self, word: &AtomicU64, expected: u32) -> bool {
            RealOs.wait(word, expected)
        }
        fn wait_until(&self, word: &AtomicU64, expected: u32, deadline: Option<u64>) -> WaitEnd {
            RealOs.wait_until(word, expected, deadline)
        }
        fn wake(&self, word: &AtomicU64) {
            RealOs.wake(word)
        }
        fn liveness(&self, who: u64) -> Liveness {
            RealOs.liveness(who)
        }
        fn now_ns(&self) -> u64 {
            RealOs.now_ns()
        }
        fn slice_ns(&self) -> u64 {
            RealOs.slice_ns()
        }
        fn took_over(&self) {
            RealOs.took_over()
        }
        fn stranger(&self, who: u64) -> bool {
            RealOs.stranger(who)
        }
    }

    impl Lock {
        /// Locks, waiting as long as a live holder keeps it.
        /// [`Guard::recovered`] is true when the protected state needs a repair.
        #[inline]
        pub fn lock(&self) -> Result<Guard<'_>, Errno> {
            self.lock_until(None)
        }

        /// [`Lock::lock`], its waiters giving the cpu away before they
        /// sleep ([`super::GIVE_WAY`]).
        #[inline]
        pub fn lock_giving_way(&self) -> Result<Guard<'_>, Errno> {
            self.lock_with(None, true, true)
        }

        /// Locks, giving up with ETIMEDOUT once CLOCK_MONOTONIC passes
        /// `deadline` (ns), if given. Passes the process's gate first
        /// (`gate.rs`): while another thread freezes the process, a thread
        /// holding no lock waits here.
        #[inline]
        pub fn lock_until(&self, deadline: Option<u64>) -> Result<Guard<'_>, Errno> {
            self.lock_with(deadline, true, false)
        }

        /// Locks a leaf (the heap's lock: taken last, held for a few
        /// stores), whose every user can fail as a whole before it changes
        /// anything (an allocation) or give up harmlessly (a free leaks its
        /// block). Unlike other locks taken inside an operation, it carries
        /// the call's bound ([`gate::call_bound`]: a timeout, IPC_NOWAIT's,
        /// a limit), though no earlier than [`super::LEAF_GRACE_NS`] from
        /// now: a participant that keeps the heap locked (stopped, or a
        /// hostile word with a live thread's identity) holds a timed or
        /// IPC_NOWAIT call no longer than that.
        pub fn lock_leaf(&self) -> Result<Guard<'_>, Errno> {
            let call = gate::call_bound();
            let d = (call != 0).then(|| {
                call.max(crate::sys::time::monotonic_ns().saturating_add(super::LEAF_GRACE_NS))
            });
            self.lock_with(d, true, false)
        }

        /// Locks, waiting as long as a live holder keeps it, whatever the
        /// call's deadline: for the cleanup that must follow a wait (a
        /// sleeper's record taken off its queue), which may not fail.
        pub fn lock_unbounded(&self) -> Result<Guard<'_>, Errno> {
            self.lock_with(None, false, false)
        }

        /// Locks, giving up at `deadline` (CLOCK_MONOTONIC ns) whatever
        /// the call's own: for a sleeper leaving its queue after its wait,
        /// which abandons its record instead when the lock is kept from it.
        pub fn lock_until_only(&self, deadline: u64) -> Result<Guard<'_>, Errno> {
            self.lock_with(Some(deadline), false, false)
        }

        // Always inlined: returned through memory, the guard was copied in
        // pieces and read back whole, a store-forwarding stall on every
        // lock (a sixth of a no-op semop, by perf annotate).
        #[inline(always)]
        fn lock_with(
            &self,
            deadline: Option<u64>,
            bounded: bool,
            give_way: bool,
        ) -> Result<Guard<'_>, Errno> {
            let (inside, call) = gate::enter();
            let deadline = match (deadline, if bounded { call } else { 0 }) {
                (d, 0) => d,
                (None, c) => Some(c),
                (Some(d), c) => Some(d.min(c)),
            };
            match self.acquire_until(&Known(inside.who, give_way), deadline) {
                Ok(_) => Ok({
                    crate::fault::step();
                    Guard {
                        lock: self,
                        inside,
                        _not_send: PhantomData,
                    }
                }),
                Err(e) => {
                    gate::leave(&inside);
                    Err(e)
                }
            }
        }
    }

    /// A held [`Lock`]; releases on drop. Not `Send`: the lock names the
    /// thread that took it.
    #[repr(C)]
    pub struct Guard<'a> {
        lock: &'a Lock,
        inside: Inside,
        _not_send: PhantomData<*const ()>,
    }

    impl Guard<'_> {
        /// The protected state needs a repair (its last holder died, or the
        /// last repair did not complete).
        /// Read from the lock itself (its `dirty` word, which only a
        /// holder writes), not kept in the guard: a guard of two words
        /// and a pointer is copied whole, without the narrow store of a
        /// flag read back by a wide load (a store-forwarding stall).
        pub fn recovered(&self) -> bool {
            self.lock.needs_repair()
        }

        /// Call after the repair succeeded: later holders are not told again.
        pub fn repaired(&mut self) {
            self.lock.mark_repaired();
        }
    }

    impl Drop for Guard<'_> {
        #[inline]
        fn drop(&mut self) {
            crate::fault::step();
            // Errors only come from a model's `step`; the real one has none.
            let _ = self.lock.release(&Known(self.inside.who, false));
            gate::leave(&self.inside);
        }
    }
}
