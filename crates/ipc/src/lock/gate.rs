//! The process's gate to the arena's locks: how a thread that ends the
//! process (exit) or replaces its image (execve) stops the others at a
//! point where they hold no lock, as the kernel stops every other thread
//! of the process between two system calls.
//!
//! # Protocol
//! Each thread counts the arena locks it holds (`depth`, in its entry of
//! the identity table, `os.rs`; a thread without an entry counts in a
//! thread-local and in the process-wide [`UNTRACKED`]). Taking a lock with
//! none held passes the gate: the depth is raised first, then [`FROZEN`]
//! is read; if another thread has frozen the process, the depth goes back
//! and the thread waits (a private futex on `FROZEN`) until it is thawed,
//! which for an exit never happens: the process ends around it.
//!
//! A freezer stores its thread pointer in `FROZEN`, then issues
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, then waits until no
//! other thread's depth is above 0. The pair is Dekker's: a thread's
//! depth store and its `FROZEN` load are ordered by the barrier the
//! membarrier runs on its cpu (the thread's own side needs only a
//! compiler fence, so the hot path pays no fence instruction), and the
//! freezer's store and its depth loads by the system call. So either the
//! thread sees `FROZEN` and waits, or the freezer sees its depth and waits
//! for it to leave. A thread with locks held passes on (it would otherwise
//! wait for itself): it leaves its locks soon and then meets the gate.
//! Threads counted in `UNTRACKED` use sequentially consistent atomics and
//! need no barrier.
//!
//! A frozen process is one in which no other thread will ever take an
//! arena lock again (exit), or not before it is thawed (a failed execve).
//! The freezer itself passes freely. A fork child starts thawed.
//!
//! # Safety
//! `membarrier` takes numbers only (through `sys::process`); the fork
//! child handler registered with `pthread_atfork` touches only atomics and
//! a thread-local cell.
#![allow(unsafe_code)]

use super::os::{self, ids::Entry};
use super::{NOWAIT_LOCK_NS, NOWAIT_MARK};
use crate::errno::Errno;
use crate::sys;
use core::cell::Cell;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{AtomicU32, AtomicUsize, compiler_fence};

/// The thread pointer of the thread that froze the process; 0 = thawed.
static FROZEN: AtomicUsize = AtomicUsize::new(0);
/// The futex word the frozen wait on (bumped at every thaw).
static THAWS: AtomicU32 = AtomicU32::new(0);
/// Threads without an entry that hold a lock.
static UNTRACKED: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The depth of a thread without an entry.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// A thread inside the gate: its identity, where its depth is kept, and
/// the deadline of the call it makes (0: none).
#[derive(Clone, Copy)]
pub struct Inside {
    pub who: u64,
    entry: Option<&'static Entry>,
}

thread_local! {
    /// The call deadline of a thread without an entry.
    static DEADLINE: Cell<u64> = const { Cell::new(0) };
    /// The lock limit of a thread without an entry.
    static LIMIT: Cell<u64> = const { Cell::new(0) };
}

/// A limit (CLOCK_MONOTONIC ns) for every arena lock the calling thread
/// waits on until the returned guard goes, the locks taken inside an
/// operation too (for tools and cleanups that must end: `ns check`, a
/// reaper, an exit; `with_lock_limit`). An earlier limit in force stays.
pub fn lock_limit(limit: u64) -> LockLimit {
    let (_, entry) = os::me_entry();
    let prev = match entry {
        Some(e) => e.limit.load(Relaxed),
        None => LIMIT.try_with(Cell::get).unwrap_or(0),
    };
    let l = if prev == 0 { limit } else { prev.min(limit) };
    match entry {
        Some(e) => e.limit.store(l, Relaxed),
        None => {
            let _ = LIMIT.try_with(|c| c.set(l));
        }
    }
    LockLimit { entry, prev }
}

/// Restores the limit in force before [`lock_limit`].
pub struct LockLimit {
    entry: Option<&'static Entry>,
    prev: u64,
}

impl Drop for LockLimit {
    fn drop(&mut self) {
        match self.entry {
            Some(e) => e.limit.store(self.prev, Relaxed),
            None => {
                let _ = LIMIT.try_with(|c| c.set(self.prev));
            }
        }
    }
}

/// The deadline (CLOCK_MONOTONIC ns) of the call the calling thread makes,
/// for every arena lock it waits on until the returned guard goes: a
/// semtimedop's timeout, or a bound for a call with IPC_NOWAIT, so that a
/// lock kept by a stopped participant (or a word a hostile one wrote)
/// never holds such a call past it. An earlier deadline already in force
/// stays.
pub fn call_deadline(deadline: u64) -> CallDeadline {
    let (_, entry) = os::me_entry();
    let prev = match entry {
        Some(e) => e.deadline.load(Relaxed),
        None => DEADLINE.try_with(Cell::get).unwrap_or(0),
    };
    let d = match (prev, deadline) {
        (0, d) | (d, 0) => d,
        // NOWAIT_MARK is no instant ("NOWAIT_LOCK_NS after the wait
        // starts") and the smallest number: beside a real deadline it is
        // taken as the instant it stands for from now, or it would replace
        // a stricter limit in force (with_lock_limit around an IPC_NOWAIT
        // call waited 1 s, not the limit).
        (NOWAIT_MARK, d) | (d, NOWAIT_MARK) if d != NOWAIT_MARK => {
            d.min(crate::sys::time::monotonic_ns().saturating_add(NOWAIT_LOCK_NS))
        }
        (p, d) => p.min(d),
    };
    match entry {
        Some(e) => e.deadline.store(d, Relaxed),
        None => {
            let _ = DEADLINE.try_with(|c| c.set(d));
        }
    }
    CallDeadline { entry, prev }
}

/// Restores the deadline in force before [`call_deadline`].
pub struct CallDeadline {
    entry: Option<&'static Entry>,
    prev: u64,
}

impl Drop for CallDeadline {
    fn drop(&mut self) {
        match self.entry {
            Some(e) => e.deadline.store(self.prev, Relaxed),
            None => {
                let _ = DEADLINE.try_with(|c| c.set(self.prev));
            }
        }
    }
}

/// Before taking a lock: the calling thread's identity (and the deadline
/// the lock is waited for with: 0 for none), its depth raised,
/// waiting first while the process is frozen by another thread (if it
/// holds no lock). Only the outermost lock of a call carries the call's
/// deadline: a lock taken inside one is part of an operation under way,
/// which must not fail half done (it was decided under the outer lock).
/// A limit ([`lock_limit`]: tools and cleanups) bounds every lock.
#[inline]
pub fn enter() -> (Inside, u64) {
    loop {
        let (who, entry) = os::me_entry();
        let deadline = match entry {
            Some(e) => {
                let d = e.depth.load(Relaxed);
                e.depth.store(d + 1, Relaxed);
                if d != 0 {
                    e.limit.load(Relaxed)
                } else {
                    // Orders the depth store before the FROZEN load here;
                    // the freezer's membarrier orders it on the cpu.
                    compiler_fence(SeqCst);
                    if FROZEN.load(Relaxed) != 0 && frozen_for_me() {
                        e.depth.store(0, Release);
                        wait_thawed();
                        continue;
                    }
                    earliest(e.deadline.load(Relaxed), e.limit.load(Relaxed))
                }
            }
            None => match enter_untracked() {
                Some(d) => {
                    let limit = LIMIT.try_with(Cell::get).unwrap_or(0);
                    let call = DEADLINE.try_with(Cell::get).unwrap_or(0);
                    if d == 0 { earliest(call, limit) } else { limit }
                }
                None => continue,
            },
        };
        return (Inside { who, entry }, deadline);
    }
}

/// The bound of the call the calling thread makes, at any depth: the
/// earlier of its deadline ([`call_deadline`]) and its limit
/// ([`lock_limit`]); 0 for none. For a leaf lock (`Lock::lock_leaf`).
pub fn call_bound() -> u64 {
    match os::me_entry().1 {
        Some(e) => earliest(e.deadline.load(Relaxed), e.limit.load(Relaxed)),
        None => earliest(
            DEADLINE.try_with(Cell::get).unwrap_or(0),
            LIMIT.try_with(Cell::get).unwrap_or(0),
        ),
    }
}

/// The earlier of two deadlines, 0 being none. A call's IPC_NOWAIT mark
/// (no instant yet) beside a limit is taken as the instant it stands for.
#[inline]
fn earliest(call: u64, limit: u64) -> u64 {
    match (call, limit) {
        (0, x) | (x, 0) => x,
        (NOWAIT_MARK, l) => l.min(crate::sys::time::monotonic_ns().saturating_add(NOWAIT_LOCK_NS)),
        (c, l) => c.min(l),
    }
}

/// [`enter`] for a thread without an entry: its depth before, or None
/// when it waited for a thaw (and must start again).
#[cold]
fn enter_untracked() -> Option<u32> {
    let d = DEPTH.try_with(Cell::get).unwrap_or(0);
    let _ = DEPTH.try_with(|c| c.set(d + 1));
    if d == 0 {
        watch_forks();
        UNTRACKED.fetch_add(1, SeqCst);
        if frozen_for_me() {
            let _ = DEPTH.try_with(|c| c.set(0));
            UNTRACKED.fetch_sub(1, SeqCst);
            wait_thawed();
            return None;
        }
    }
    Some(d)
}

/// After releasing a lock taken with `inside`.
#[inline]
pub fn leave(inside: &Inside) {
    match inside.entry {
        // Release: what the thread wrote under its locks is visible to a
        // freezer that sees the depth back at 0.
        Some(e) => e
            .depth
            .store(e.depth.load(Relaxed).saturating_sub(1), Release),
        None => {
            let d = DEPTH.try_with(Cell::get).unwrap_or(1);
            let _ = DEPTH.try_with(|c| c.set(d.saturating_sub(1)));
            if d == 1 {
                UNTRACKED.fetch_sub(1, SeqCst);
            }
        }
    }
}

#[inline(always)]
fn frozen_for_me() -> bool {
    let f = FROZEN.load(SeqCst);
    f != 0 && f != sys::process::thread_pointer()
}

#[cold]
fn wait_thawed() {
    loop {
        let t = THAWS.load(Acquire);
        if FROZEN.load(SeqCst) == 0 {
            return;
        }
        // A private futex (process-local memory): no timeout needed, a
        // thaw always bumps THAWS and wakes.
        let _ = sys::futex::wait_private(&THAWS, t, 1_000_000_000);
    }
}

/// Freezes the process for the calling thread (which must hold no arena
/// lock): from now on no other thread takes an arena lock, and when this
/// returns `Ok` none holds one. Waits at most `limit_ns` for the others to
/// leave their locks; on a timeout, or when the process cannot be frozen
/// (no `membarrier`, another thread froze it first: EBUSY), it is left as
/// it was and the error returned.
pub fn freeze(limit_ns: u64) -> Result<(), Errno> {
    watch_forks();
    let me = sys::process::thread_pointer();
    if FROZEN.load(SeqCst) == me {
        return Ok(());
    }
    if FROZEN.compare_exchange(0, me, SeqCst, SeqCst).is_err() {
        return Err(Errno(libc::EBUSY));
    }
    if let Err(e) = barrier() {
        thaw();
        return Err(e);
    }
    let generation = os::generation();
    let start = crate::sys::time::monotonic_ns();
    let mut pause = 20_000u64;
    loop {
        let mine = DEPTH.try_with(Cell::get).unwrap_or(0).min(1);
        if !os::others_inside(generation, me) && UNTRACKED.load(SeqCst) <= mine {
            return Ok(());
        }
        if crate::sys::time::monotonic_ns().saturating_sub(start) >= limit_ns {
            thaw();
            return Err(Errno(libc::ETIMEDOUT));
        }
        sys::time::sleep_ns(pause);
        pause = (pause * 2).min(2_000_000);
    }
}

/// Lets the threads stopped by [`freeze`] go on (a failed execve).
pub fn thaw() {
    FROZEN.store(0, SeqCst);
    THAWS.fetch_add(1, Release);
    sys::futex::wake_private(&THAWS, i32::MAX);
}

/// Whether the calling thread runs in its own process's memory (not a
/// vfork child's borrowed one), so that freezing would stop its own
/// threads.
pub fn owns_memory() -> bool {
    os::owns_memory()
}

/// Whether the calling thread froze the process.
pub fn frozen_by_me() -> bool {
    FROZEN.load(SeqCst) == sys::process::thread_pointer()
}

/// Registers [`forked`] as a fork child handler, once: before anything
/// sets [`FROZEN`] or counts in [`UNTRACKED`] (what a child must not
/// inherit).
fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a child handler that touches only atomics and
        // this thread's thread-local cell (async-signal-safe).
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
    });
}

/// In a fork child: one thread, nothing frozen (the parent's freezer, if
/// it forked, is not this thread's business any more). Atomics only.
extern "C" fn forked() {
    // Stored only when not already so: a store to a page the child shares
    // with its parent copies the page (a fault, some µs), and a child that
    // never calls System V IPC should cost no more than without ipcns.
    if FROZEN.load(Relaxed) != 0 {
        FROZEN.store(0, Relaxed);
    }
    if UNTRACKED.load(Relaxed) != 0 {
        UNTRACKED.store(0, Relaxed);
    }
    let _ = DEPTH.try_with(|c| {
        if c.get() != 0 {
            c.set(0);
        }
    });
}

/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, the process registered
/// for it first (once).
fn barrier() -> Result<(), Errno> {
    static REGISTERED: AtomicU32 = AtomicU32::new(0);
    if REGISTERED.load(Acquire) == 0 {
        sys::process::membarrier(sys::process::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)?;
        REGISTERED.store(1, Release);
    }
    sys::process::membarrier(sys::process::MEMBARRIER_CMD_PRIVATE_EXPEDITED)
}
