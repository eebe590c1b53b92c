//! Sleepers in the arena: one record per blocked caller, on a FIFO list
//! hanging off the object it waits on, with a shared futex word the waker
//! flips when it has completed (or failed) the caller's operation for it.
//!
//! # Protocol
//! A caller that must block allocates a [`Waiter`] from the heap, fills it
//! and appends it to the object's queue, all under the object lock; then
//! it releases the lock and sleeps on `state` while it reads
//! [`QUEUED`] or [`SLEEPING`]. A waker (under the object lock) unlinks the
//! record, writes `status`, then swaps `state` to [`DONE`] (Release) and
//! issues a `FUTEX_WAKE` only if the sleeper said it was sleeping. After
//! `DONE` the record belongs to the sleeper, which reads `status` and
//! frees it. A sleeper that gives up (timeout, signal) takes the object
//! lock and, if its record is still queued, unlinks and frees it itself.
//!
//! A sleeper that died (SIGKILL) cannot take its turn: wakers check the
//! sleeper's thread exists before completing its operation, and unlink and
//! free the record of one that does not. Every walk of a queue is bounded
//! by the heap's size in records.
//!
//! # Layout
//! 64 bytes (one heap block of class 64): `state` @0, `status` @4, `next`
//! @8, `who` @16, `pid` @24, then five words whose meaning is the
//! mechanism's: @28, `ops` @32, @40, @44, @48 and @56. They are read and
//! written only through a mechanism's view, which names them:
//! [`SemWaiter`] (`nops`, `ops`, `blocking`, `ticket`, `undo_entry`,
//! `heartbeat`) and [`MsgWaiter`] (`kind`, `size`, `mode`, `msgtyp`,
//! `heartbeat`).

use crate::chain::Chain;
use crate::errno::Errno;
use crate::lock::{self, Woke};
use crate::park;
use crate::session::Session;
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

pub use crate::intr::Mark;
pub use crate::park::{ABANDONED, CANCELLED, DONE, QUEUED, SLEEPING, Slept};

/// A blocked caller.
#[repr(C, align(64))]
pub struct Waiter {
    pub state: AtomicU32,
    /// 0, or the errno the operation ends with.
    pub status: AtomicI32,
    /// Heap offset of the next record in the queue, 0 at the end.
    pub next: AtomicU64,
    /// The sleeping thread, as lock words name it (tag << 32 | tid).
    pub who: AtomicU64,
    /// Its thread group id (the process of the sleeping thread, which
    /// wakers ask whether it lives; a semop records the caller's pid,
    /// which a supervisor's thread may sleep for, after its operations).
    pub pid: AtomicI32,
    /// The mechanism's words, by offset ([`SemWaiter`], [`MsgWaiter`]).
    x28: AtomicU32,
    /// Heap offset of the operation's arguments (a semop's sembufs; 0 for
    /// a message sleeper), freed with the record.
    ops: AtomicU64,
    x40: AtomicU32,
    x44: AtomicU32,
    x48: AtomicU64,
    /// A semaphore sleeper's heartbeat; a message sleeper's trusted spin.
    x56: AtomicU64,
}

impl Waiter {
    /// The record as a semop sleeper's.
    #[inline]
    pub fn sem(&self) -> SemWaiter<'_> {
        SemWaiter(self)
    }

    /// The record as a msgsnd or msgrcv sleeper's.
    #[inline]
    pub fn msg(&self) -> MsgWaiter<'_> {
        MsgWaiter(self)
    }
}

/// A semop sleeper's record: its operations and what it blocks on.
#[derive(Clone, Copy)]
pub struct SemWaiter<'a>(&'a Waiter);

impl<'a> SemWaiter<'a> {
    /// How many sembufs the operation has (at [`SemWaiter::ops`]).
    pub fn nops(self) -> &'a AtomicU32 {
        &self.0.x28
    }

    /// Heap offset of the operation's sembufs.
    pub fn ops(self) -> &'a AtomicU64 {
        &self.0.ops
    }

    /// The blocking operation's semaphore number, with bit 31 set when it
    /// waits for zero (GETZCNT) rather than to decrement (GETNCNT).
    pub fn blocking(self) -> &'a AtomicU32 {
        &self.0.x40
    }

    /// A ticket drawn at enqueue (never 0): a journal names the record by
    /// offset and ticket, so a record freed and reused is not the one it
    /// means.
    pub fn ticket(self) -> &'a AtomicU32 {
        &self.0.x44
    }

    /// The caller's undo entry for the set (SEM_UNDO), or 0.
    pub fn undo_entry(self) -> &'a AtomicU64 {
        &self.0.x48
    }

    /// When the sleeper last said it is alive (spinning: [`beat`]).
    pub fn heartbeat(self) -> &'a AtomicU64 {
        &self.0.x56
    }
}

/// A message sleeper's record: which kind it is and what it wants.
#[derive(Clone, Copy)]
pub struct MsgWaiter<'a>(&'a Waiter);

impl<'a> MsgWaiter<'a> {
    /// A sender or a receiver (`msg/queue.rs`'s `KIND_*`, bits 0-7); bits
    /// 8-31: the caller's thread when a supervisor sleeps for it, else 0.
    pub fn kind(self) -> &'a AtomicU32 {
        &self.0.x28
    }

    /// A receiver: the largest message it takes (`r_maxsize`); a sender:
    /// its message's size.
    pub fn size(self) -> &'a AtomicU32 {
        &self.0.x40
    }

    /// The message block handed to a receiver by a sender (0 until
    /// then; now the receiver's).
    pub fn handed(self) -> &'a AtomicU64 {
        &self.0.ops
    }

    /// Bits 0-7: a receiver's search mode (`r_mode`); bits 8-15: how often
    /// a scan met the finished record (`msg/queue.rs`).
    pub fn flags(self) -> &'a AtomicU32 {
        &self.0.x44
    }

    /// A receiver's message type (`r_msgtype`).
    pub fn msgtyp(self) -> &'a AtomicU64 {
        &self.0.x48
    }

    /// When the receiver last said it is alive (CLOCK_MONOTONIC ns): its
    /// queueing, then its spin's beats ([`beat`], the same word as a
    /// semop sleeper's heartbeat).
    pub fn heartbeat(self) -> &'a AtomicU64 {
        &self.0.x56
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Waiter>() == 64);
    assert!(offset_of!(Waiter, next) == 8);
    assert!(offset_of!(Waiter, pid) == 24);
    assert!(offset_of!(Waiter, x28) == 28);
    assert!(offset_of!(Waiter, ops) == 32);
    assert!(offset_of!(Waiter, x40) == 40);
    assert!(offset_of!(Waiter, x44) == 44);
    assert!(offset_of!(Waiter, x48) == 48);
    assert!(offset_of!(Waiter, x56) == 56);
};

// repr(C), atomics only, no Drop.
crate::arena::map::shared_types!(Waiter);

/// Bytes of a record.
pub const WAITER_BYTES: u64 = 64;

/// The record at `off`, if `off` can be one (inside the heap, aligned).
pub fn at(a: &Session, off: u64) -> Result<&Waiter, Errno> {
    if off == 0 || !off.is_multiple_of(WAITER_BYTES) || !a.in_heap(off, WAITER_BYTES) {
        return Err(Errno::EUCLEAN);
    }
    a.view(off)
}

/// The most records a queue is taken to hold: more sleepers than this on
/// one object means the list is corrupt, and it is cut there.
const MAX_QUEUE: u64 = 1 << 16;

/// The records of the queue whose head is `head`, in order (a snapshot:
/// the object lock is held). A corrupt link, a link back to a record
/// already on the list (a cycle, found in constant memory: `chain.rs`) or
/// a list longer than [`MAX_QUEUE`] ends the list there: the link is cut.
/// The snapshot is the only memory a walk takes (at most `MAX_QUEUE`
/// offsets; if even that cannot be had, the records it holds so far).
pub fn snapshot(a: &Session, head: &AtomicU64) -> Vec<u64> {
    let next = |off: u64| at(a, off).ok().map(|w| w.next.load(Relaxed));
    let mut out: Vec<u64> = Vec::new();
    let mut walk = Chain::new(head.load(Relaxed), next);
    for off in walk.by_ref() {
        if out.len() as u64 >= MAX_QUEUE
            || (out.len() == out.capacity() && out.try_reserve(out.len().max(4)).is_err())
        {
            cut_after(a, head, out.last().copied());
            return out;
        }
        out.push(off);
    }
    if walk.broken() {
        match crate::chain::cut_point(head.load(Relaxed), next) {
            // A cycle: cut where it closes, and walk the sound list again.
            Some(closing) => {
                if let Ok(w) = at(a, closing) {
                    w.next.store(0, Relaxed);
                }
                out.clear();
                out.extend(Chain::new(head.load(Relaxed), next).take(MAX_QUEUE as usize));
            }
            // A bad link (or the limit): cut after the last good record.
            None => cut_after(a, head, out.last().copied()),
        }
    }
    out
}

/// Ends the queue after record `last` (at its head when `None`).
fn cut_after(a: &Session, head: &AtomicU64, last: Option<u64>) {
    match last.and_then(|p| at(a, p).ok()) {
        Some(p) => p.next.store(0, Relaxed),
        None => head.store(0, Relaxed),
    }
}

/// How many records at the head of a queue spin before they sleep
/// ([`sleep`]). Measured with `ipcns bench contend` on 2 cpus (pairs/s,
/// two runs each, against every sleeper spinning): 4 processes on one
/// semaphore used as a lock 66k and 114k (86k, 60k), 8 processes 40k and
/// 47k (38k, 34k); 2 producer and consumer pairs on one queue 2.3M and
/// 3.1M messages/s (1.7M, 2.0M), 4 pairs 1.6M and 1.3M (0.7M, 1.1M). With
/// only the head spinning, 4 processes on the semaphore fell to 46k: the
/// holder that queues again right after its release found no cpu spinning
/// for the next turn.
pub const SPINNERS: usize = 3;

/// Whether `off` is among the first `n` records of the queue (a walk of at
/// most `n`).
pub fn among_first(a: &Session, head: &AtomicU64, off: u64, n: usize) -> bool {
    let mut p = head.load(Relaxed);
    for _ in 0..n {
        if p == off {
            return true;
        }
        match at(a, p) {
            Ok(w) => p = w.next.load(Relaxed),
            Err(_) => return false,
        }
    }
    false
}

/// Nudges the record's sleeper, whose turn comes next: it spins instead
/// of sleeping ([`park::nudge`]). Object lock held.
pub fn nudge(w: &Waiter) {
    as_waker(w, |p| park::nudge(&w.state, p));
}

/// Appends `off` at the end of the queue (FIFO).
pub fn append(a: &Session, head: &AtomicU64, off: u64) -> Result<(), Errno> {
    at(a, off)?.next.store(0, Relaxed);
    match snapshot(a, head).last() {
        None => head.store(off, Relaxed),
        Some(&last) => at(a, last)?.next.store(off, Relaxed),
    }
    Ok(())
}

/// Unlinks `off` from the queue, if it is on it.
pub fn unlink(a: &Session, head: &AtomicU64, off: u64) -> Result<bool, Errno> {
    // A well-formed queue (cycles are cut by `snapshot`).
    let queue = snapshot(a, head);
    if !queue.contains(&off) {
        return Ok(false);
    }
    let next = at(a, off)?.next.load(Relaxed);
    if head.load(Relaxed) == off {
        head.store(next, Relaxed);
        return Ok(true);
    }
    for p in queue {
        let pw = at(a, p)?;
        if pw.next.load(Relaxed) == off {
            pw.next.store(next, Relaxed);
            return Ok(true);
        }
    }
    Ok(false)
}

/// Ends a queued record's wait with `status` (0 or an errno): unlinks it
/// and wakes its sleeper. Object lock held.
pub fn complete(a: &Session, head: &AtomicU64, off: u64, status: i32) -> Result<(), Errno> {
    unlink(a, head, off)?;
    let w = at(a, off)?;
    as_waker(w, |p| park::complete(&w.state, &w.status, status, p));
    Ok(())
}

/// Takes queued record `off` off its queue without its operation, for a
/// sleeper of the caller's own process that an execve is about to end
/// ([`CANCELLED`]): unlinked, marked, woken. A record already DONE (or no
/// longer on the queue) is left alone. Whether it was cancelled. Object
/// lock held.
pub fn cancel(a: &Session, head: &AtomicU64, off: u64) -> Result<bool, Errno> {
    let w = at(a, off)?;
    if w.state.load(Relaxed) == DONE || !unlink(a, head, off)? {
        return Ok(false);
    }
    // Release: as `park::complete`; the swap tells whether it sleeps.
    if w.state
        .swap(CANCELLED, core::sync::atomic::Ordering::Release)
        == SLEEPING
    {
        lock::futex_wake_all(&w.state);
    }
    Ok(true)
}

/// The sleeper of record `w` gives it up without the object's lock (kept
/// from it past its wait's end): unless a waker finished it first (its
/// result is then `Some`, and the record the caller's as after any
/// completion), it is marked ABANDONED, left linked for the lock's next
/// holder to drop, and must not be touched again.
pub fn abandon(w: &Waiter) -> Option<i32> {
    for from in [QUEUED, SLEEPING] {
        // Acquire on failure: a DONE seen carries the waker's status.
        match w.state.compare_exchange(
            from,
            ABANDONED,
            Relaxed,
            core::sync::atomic::Ordering::Acquire,
        ) {
            Ok(_) => return None,
            Err(DONE) => return Some(w.status.load(Relaxed)),
            Err(_) => {}
        }
    }
    // Neither QUEUED, SLEEPING nor DONE (CANCELLED: unlinked by an
    // execve of ours): nothing linked to give up.
    match w.state.load(core::sync::atomic::Ordering::Acquire) {
        DONE => Some(w.status.load(Relaxed)),
        _ => None,
    }
}

/// A sleeper that beat within this long may still be spinning: the waker
/// watches its heartbeat move instead of reading /proc.
const HEARTBEAT_NS: u64 = 2_000_000;
/// How long a waker watches for the heartbeat to move.
const WATCH_NS: u64 = 50_000;
/// How long it watches a sleeper whose identity was verified lately
/// (its pidfd decides after that).
const SHORT_WATCH_NS: u64 = 3_000;

/// Whether the sleeper of a record still lives. A thread that does not
/// answer `tgkill` is gone. A spinning sleeper beats every microsecond or
/// two: a heartbeat that moves while the waker watches proves it alive
/// (nobody else writes it, so a process that took over a reused pid cannot
/// pass for it). Otherwise /proc decides: not a zombie, and its start time
/// matches the tag in `who` (for an identity /proc showed alive lately, a
/// pidfd says whether its process has exited: `lock::sleeper_identity_alive_as_of`).
pub fn sleeper_alive(w: &Waiter) -> bool {
    // A record its sleeper gave up is as good as a dead sleeper's.
    if w.state.load(Relaxed) == ABANDONED {
        return false;
    }
    let who = w.who.load(Relaxed);
    let (pid, tid) = (w.pid.load(Relaxed), (who & 0x3fff_ffff) as u32);
    let start = now_ns();
    // An identity /proc showed alive lately: a short look at the heartbeat
    // (a spinning sleeper beats every microsecond or so), then its pidfd,
    // without watching for long a heartbeat that a descheduled sleeper
    // (more sleepers than cpus) would not move, while this waker holds the
    // object's lock.
    let verified = lock::identity_verified_lately(who, start);
    if !verified && !lock::thread_answers(pid, tid) {
        return false;
    }
    let first = w.x56.load(Relaxed);
    // Only a spinning sleeper beats; one asleep in the kernel does not.
    if w.state.load(Relaxed) == QUEUED && start.saturating_sub(first) < HEARTBEAT_NS {
        let watch = if verified { SHORT_WATCH_NS } else { WATCH_NS };
        while now_ns().saturating_sub(start) < watch {
            if w.x56.load(Relaxed) != first {
                return true;
            }
            core::hint::spin_loop();
        }
    }
    lock::sleeper_identity_alive_as_of(pid, who, start, verified)
}

/// Drops every record of the queue whose sleeper is gone. Object lock
/// held.
pub fn prune(a: &Session, head: &AtomicU64) {
    for off in snapshot(a, head) {
        if let Ok(w) = at(a, off)
            && w.state.load(Relaxed) != DONE
            && !sleeper_alive(w)
        {
            let _ = drop_dead(a, head, off);
        }
    }
}

/// Records that the sleeper is alive now (its heartbeat).
pub fn beat(w: &Waiter) {
    w.sem().heartbeat().store(now_ns(), Relaxed);
}

/// Unlinks and frees a record whose sleeper died (only once it is off the
/// queue: a record still linked is never freed). Object lock held.
pub fn drop_dead(a: &Session, head: &AtomicU64, off: u64) -> Result<(), Errno> {
    if unlink(a, head, off)? {
        release(a, off);
    }
    Ok(())
}

/// Frees a record and what it points to. Its ticket is cleared first, so
/// a journal naming the old record never takes a new one for it.
pub fn release(a: &Session, off: u64) {
    if let Ok(w) = at(a, off) {
        // Only a semop sleeper's record has a ticket and operations (a
        // message sleeper's `ops` is 0).
        let s = w.sem();
        s.ticket().store(0, Relaxed);
        let ops = s.ops().swap(0, Relaxed);
        if ops != 0 {
            let _ = a.free(ops, ops_bytes(s.nops().load(Relaxed)));
        }
    }
    let _ = a.free(off, WAITER_BYTES);
}

/// Heap bytes of `n` saved operations (8 bytes each) and the pid the
/// operation records (`sem::op::enqueue`).
pub fn ops_bytes(n: u32) -> u64 {
    (u64::from(n).max(1) + 1) * 8
}

/// Spins on the record for this long before sleeping in the kernel (a
/// partner on another cpu usually answers within a few microseconds).
const SPIN_NS: u64 = 20_000;

/// How often a sleeper runs its `tick` (cleaning up after dead processes
/// whose undo entries may be what it waits for).
const TICK_NS: u64 = 100_000_000;

/// The real system under the handshake: shared futexes, the monotonic
/// clock, the record's heartbeat, the thread's signal handlers.
struct RealPark<'w, 't> {
    w: &'w Waiter,
    tick: &'t mut dyn FnMut(u128),
    /// Death words (`process/death.rs`) whose marking should wake the
    /// sleeper, to run its tick at once: those of the SEM_UNDO holders of
    /// its set, whose death may complete it.
    deaths: &'t [&'w AtomicU32],
    /// The death words seen marked already (bit `i` for `deaths[i]`):
    /// each ends one wait only.
    spent: core::cell::Cell<u128>,
    /// Those of them the tick was told about already.
    told: u128,
    /// The sleeper's call's start (None: a waker's).
    mark: Option<Mark>,
    /// The registration `watch` replaced.
    prev: usize,
    /// How long to spin before the first futex wait.
    spin: u64,
    /// What a stop of the process does to the wait ([`OnStop`]), and
    /// what it needs to see one.
    stop: StopWatch,
}

/// What a stop of the process (SIGSTOP, SIGTSTP, ... and SIGCONT, no
/// handler) does to a blocked call. signal(7): semop and semtimedop fail
/// with EINTR after it, msgsnd and msgrcv are restarted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OnStop {
    Eintr,
    Restart,
}

/// Sees a stop of the process during a futex wait, which the kernel
/// hides: the wait is interrupted with ERESTARTSYS (or its timed form),
/// the thread stops, and after SIGCONT the wait starts again, with no
/// handler to tell. What shows is the thread's count of voluntary
/// context switches (`ru_nvcsw`): a futex wait that sleeps once adds 1
/// (and 0 when it returns at once); a stop adds its own, and the wait
/// started again after it another (or none, when its slice ran out
/// during the stop). So the count is read before the sleeper's first
/// futex wait and after each wait that did not end the call (not after
/// one that completed it: the operation happened, and wins), and a count
/// that grew by more than the waits made says the thread was stopped (or
/// its wait started again after a signal that woke it: the kernel's
/// semop returns EINTR whatever that signal turns out to be). While this
/// process forks, one more is not enough: a fork holds the memory map's
/// lock while it copies it, and a fault of the sleeper's meanwhile (on
/// its stack, made copy-on-write, or in the futex call) sleeps for the
/// lock, a switch of its own; then it takes two more, a stop's sleep and
/// the wait's again (`forks::forks`, counted from the first
/// sleep on). The tick between slices (which may block on locks) starts
/// the count again. Not seen: a stop while the sleeper spins (its first
/// 20 µs), one that lands before the futex wait sleeps when the wait
/// started again then returns at once, and, while the process forks, a
/// stop that outlasts the wait's slice.
struct StopWatch {
    on: OnStop,
    /// The count before the first wait since the last tick, if read.
    base: core::cell::Cell<Option<i64>>,
    /// Futex waits made since `base` was read.
    waits: core::cell::Cell<i64>,
    /// The forks of this process ended when `base` was read.
    forks: core::cell::Cell<u64>,
    /// A stop was seen.
    seen: core::cell::Cell<bool>,
}

impl StopWatch {
    fn new(on: OnStop) -> StopWatch {
        StopWatch {
            on,
            base: core::cell::Cell::new(None),
            waits: core::cell::Cell::new(0),
            forks: core::cell::Cell::new(0),
            seen: core::cell::Cell::new(false),
        }
    }

    /// Before a futex wait.
    fn before(&self) {
        if self.on == OnStop::Eintr && self.base.get().is_none() {
            forks::count_forks();
            self.forks.set(forks::forks().1);
            // Twice: the first call's write of its answer onto our stack
            // may fault (a page a fork made copy-on-write), and a fault
            // that sleeps for the memory map's lock is a voluntary switch
            // of its own, counted after the read. The second finds the
            // page written.
            let _ = crate::sys::process::voluntary_switches();
            self.base.set(crate::sys::process::voluntary_switches());
            self.waits.set(0);
        }
    }

    /// After a futex wait that left the record not DONE: whether the
    /// thread was stopped (or otherwise blocked) beyond its waits.
    fn after(&self) -> bool {
        self.waits.set(self.waits.get() + 1);
        let (Some(base), Some(now)) = (self.base.get(), crate::sys::process::voluntary_switches())
        else {
            return false;
        };
        // A fork since `base` (or one in progress then) can add one.
        let forked = forks::forks().0 != self.forks.get();
        let extra = if forked { 2 } else { 1 };
        if now - base >= self.waits.get() + extra {
            self.seen.set(true);
        }
        self.seen.get()
    }

    /// After the tick (which may block on locks).
    fn restart(&self) {
        self.base.set(None);
    }
}

impl park::Park for RealPark<'_, '_> {
    fn now(&self) -> u64 {
        now_ns()
    }
    fn wait(&self, word: &AtomicU32, expected: u32, slice: u64) -> park::Wake {
        self.stop.before();
        let r = if !self.deaths.is_empty() && crate::intr::handlers_noted() {
            wait_or_death(word, expected, self.deaths, &self.spent, slice)
        } else {
            wait_on(word, expected, slice)
        };
        if self.stop.on == OnStop::Eintr
            && word.load(core::sync::atomic::Ordering::Acquire) != park::DONE
            && self.stop.after()
        {
            return park::Wake::Interrupted;
        }
        r
    }
    fn wake(&self, word: &AtomicU32) {
        lock::futex_wake_all(word);
    }
    fn spin_ns(&self) -> u64 {
        self.spin
    }
    fn nudged_spin_ns(&self) -> u64 {
        SPIN_NS
    }
    fn tick_ns(&self) -> u64 {
        TICK_NS
    }
    fn beat(&self) {
        beat(self.w);
    }
    fn pause(&self) {
        crate::sys::process::sched_yield();
    }
    fn tick(&mut self) {
        // The death words marked since the last tick (bit `i` for
        // `deaths[i]`): the holders that are dying now.
        let spent = self.spent.get();
        let new = spent & !self.told;
        self.told = spent;
        (self.tick)(new);
        self.stop.restart();
    }
    fn noted(&self) -> bool {
        self.stop.seen.get() || self.mark.is_some_and(|m| m.interrupted())
    }
    fn watch(&mut self, word: &AtomicU32) {
        if let Some(m) = self.mark {
            self.prev = m.watch(word);
        }
    }
    fn unwatch(&mut self) {
        if let Some(m) = self.mark {
            m.unwatch(self.prev);
        }
    }
}

/// A sleeper's futex wait on its state `word` alone.
fn wait_on(word: &AtomicU32, expected: u32, slice: u64) -> park::Wake {
    match lock::futex_wait(word, expected, slice) {
        Woke::Woken => park::Wake::Woken,
        Woke::TimedOut => park::Wake::TimedOut,
        Woke::Interrupted => park::Wake::Interrupted,
    }
}

/// A sleeper's futex wait on its state `word` and on `deaths`, the death
/// words of processes whose death may complete it (`undo::holder_deaths`
/// set FUTEX_WAITERS in them, under the locks that keep them theirs): a
/// word marked before or during the wait (the kernel then wakes one of
/// its waiters) ends it as a timeout does, once, so the sleeper's tick
/// runs and finishes the dead. The words are only read here: a word whose
/// page was freed and reused meanwhile can cost a spurious wake-up, never
/// a store. Without `futex_waitv` (before Linux 5.16) only `word` is
/// waited on.
fn wait_or_death(
    word: &AtomicU32,
    expected: u32,
    deaths: &[&AtomicU32],
    spent: &core::cell::Cell<u128>,
    slice: u64,
) -> park::Wake {
    use crate::sys::futex::WAITV_MAX;
    use crate::sys::robust::{OWNER_DIED, WAITERS};
    let mut list: [(&AtomicU32, u32); WAITV_MAX] = [(word, expected); WAITV_MAX];
    let mut n = 1;
    for (i, &d) in deaths.iter().enumerate().take(WAITV_MAX - 1) {
        if spent.get() & (1 << i) != 0 {
            continue;
        }
        let v = d.load(Relaxed);
        if v & OWNER_DIED != 0 {
            spent.set(spent.get() | 1 << i);
            return park::Wake::TimedOut;
        }
        // Without FUTEX_WAITERS the kernel wakes nobody when it marks it.
        if v & WAITERS != 0 {
            list[n] = (d, v);
            n += 1;
        }
    }
    let r = if n > 1 {
        crate::sys::futex::wait_any(&list[..n], slice)
    } else {
        Err(crate::errno::Errno::ENOSYS)
    };
    match r {
        Ok(0) => park::Wake::Woken,
        Ok(_) => park::Wake::TimedOut,
        Err(e) if e.0 == libc::ETIMEDOUT => park::Wake::TimedOut,
        Err(crate::errno::Errno::EINTR) => park::Wake::Interrupted,
        Err(crate::errno::Errno::ENOSYS) => wait_on(word, expected, slice),
        // A word held another value: the loop looks again.
        Err(_) => park::Wake::Woken,
    }
}

/// Ends a record's wait with `status` and wakes its sleeper, leaving it
/// linked (a message queue's handover: its sleeper collects it). Object
/// lock held.
pub fn finish_linked(w: &Waiter, status: i32) {
    as_waker(w, |p| park::complete(&w.state, &w.status, status, p));
}

/// Runs `f` with the real system as a waker of record `w` sees it (a
/// waker only wakes: no tick, no mark, no spin).
fn as_waker<R>(w: &Waiter, f: impl FnOnce(&RealPark<'_, '_>) -> R) -> R {
    f(&RealPark {
        w,
        tick: &mut |_| {},
        deaths: &[],
        spent: core::cell::Cell::new(0),
        told: 0,
        mark: None,
        prev: 0,
        spin: 0,
        stop: StopWatch::new(OnStop::Restart),
    })
}

/// Waits until the record is DONE, `deadline` passes (monotonic ns), or a
/// signal handler runs on this thread (one noted since `mark`, the start
/// of the call: `intr.rs`), calling `tick` every 100 ms of sleep
/// ([`park::sleep`]), and at once when one of `deaths` is marked (see
/// [`wait_or_death`]), with the bits of the words marked since its last
/// call (bit `i` for `deaths[i]`), or, with [`OnStop::Eintr`], the process
/// is stopped and continued ([`StopWatch`]; ends as a handler's note).
/// No lock held. The record is the caller's.
///
/// It spins first ([`SPIN_NS`]) only if `first`: the record was among the
/// first [`SPINNERS`] of its queue when it was queued (`among_first`),
/// those a waker completes next. The others' turns are further away, and
/// their spinning took the cpus from the very processes they wait for.
pub fn sleep<'w>(
    w: &'w Waiter,
    deadline: Option<u64>,
    mark: Mark,
    first: bool,
    tick: &mut dyn FnMut(u128),
    deaths: &[&'w AtomicU32],
    on_stop: OnStop,
) -> Slept {
    let mut p = RealPark {
        w,
        tick,
        deaths,
        spent: core::cell::Cell::new(0),
        told: 0,
        mark: Some(mark),
        prev: 0,
        spin: if first { SPIN_NS } else { 0 },
        stop: StopWatch::new(on_stop),
    };
    park::sleep(&w.state, &w.status, deadline, &mut p)
}

/// After a sleep that ended without DONE, object lock held: the result of
/// a waker that completed the record meanwhile, else None (still queued:
/// the caller unlinks it). See [`park::finished`].
pub fn finished(w: &Waiter) -> Option<i32> {
    park::finished(&w.state, &w.status)
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    crate::sys::time::monotonic_ns()
}

/// A new ticket (never 0).
pub fn ticket() -> u32 {
    use core::sync::atomic::AtomicU32;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let salt = (crate::sys::process::getpid() as u32).rotate_left(16);
    let n = NEXT.fetch_add(1, Relaxed).wrapping_add(1) ^ salt;
    n.max(1)
}

/// The forks of this process, for [`StopWatch`] (only it asks).
mod forks {
    #![allow(unsafe_code)]
    use core::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::Once;

    /// Forks of this process begun (prepare handler) and ended (parent
    /// handler), counted once [`count_forks`] was called: a fork holds the
    /// memory map's lock while it copies it, and a thread that faults
    /// meanwhile (or whose futex call needs the lock) sleeps for it, a
    /// voluntary context switch that `wait::StopWatch` must not take for a
    /// stop.
    static FORKS_BEGUN: AtomicU64 = AtomicU64::new(0);
    static FORKS_ENDED: AtomicU64 = AtomicU64::new(0);
    static COUNTING: Once = Once::new();

    extern "C" fn fork_begins() {
        FORKS_BEGUN.fetch_add(1, SeqCst);
    }

    extern "C" fn fork_ended() {
        FORKS_ENDED.fetch_add(1, SeqCst);
    }

    extern "C" fn fork_child() {
        // The other threads' forks in progress are not the child's.
        FORKS_ENDED.store(FORKS_BEGUN.load(SeqCst), SeqCst);
    }

    /// Starts counting this process's forks (once; later calls cost a load).
    pub(super) fn count_forks() {
        COUNTING.call_once(|| {
            // SAFETY: the handlers touch only atomics (async-signal-safe, as
            // a child handler must be).
            unsafe { libc::pthread_atfork(Some(fork_begins), Some(fork_ended), Some(fork_child)) };
        });
    }

    /// `(begun, ended)`: the forks counted so far. A fork was in progress at
    /// some moment between a reading `(_, e)` and a later `(b, _)` iff `b !=
    /// e`.
    pub(super) fn forks() -> (u64, u64) {
        let e = FORKS_ENDED.load(SeqCst);
        (FORKS_BEGUN.load(SeqCst), e)
    }
}
