//! Signal handlers' news for blocked calls: how a handler that ran on a
//! thread ends that thread's System V IPC wait. signal(7): semop,
//! semtimedop, msgsnd and msgrcv interrupted by a signal handler fail with
//! EINTR, never restarted, even under SA_RESTART.
//!
//! A sleeper in user space cannot rely on its futex wait returning EINTR:
//! a handler that runs while it spins, between its CAS to SLEEPING and the
//! FUTEX_WAIT, or between two slices, runs outside the system call. So a
//! handler says it ran: [`note_signal`], which the C ABI calls first thing
//! in its wrapper of every handler the program installs (a Rust program
//! calls it from its own handlers).
//!
//! # Protocol
//! Each thread has a counter of the handlers noted on it and the address
//! of the waiter state word it is about to sleep on, if any. Only the
//! thread itself and the handlers that interrupt it touch them (by thread
//! pointer, below), so what must hold is the program order of one thread
//! as a handler interrupting it sees it: compiler fences
//! (`atomic_signal_fence`) keep it, no hardware fence is needed.
//!
//! - A call takes a [`Mark`] (the counter) as it starts, before it looks
//!   at the object: a handler that ran before the call does not end it.
//! - The sleeper (`park::sleep`) asks [`Mark::interrupted`] while it spins,
//!   right after it says it sleeps (CAS QUEUED -> SLEEPING) and after
//!   every futex return, and gives up (EINTR) once the counter moved.
//! - Before that CAS it registers its state word (`Mark::watch`). A
//!   handler that finds a word registered CASes it SLEEPING -> QUEUED, so
//!   that a FUTEX_WAIT about to start (it expects SLEEPING) returns at
//!   once with EAGAIN, and the sleeper's next look sees the counter. The
//!   handler runs on the sleeper's own thread, so the sleeper is never
//!   inside FUTEX_WAIT when the word changes (a wait in progress was ended
//!   by the signal itself). The waker loses nothing: it swaps the word to
//!   DONE and wakes only if it saw SLEEPING; after the handler's CAS it
//!   sees QUEUED and wakes nobody, and nobody sleeps (the sleeper's
//!   FUTEX_WAIT on SLEEPING fails at once, its next CAS finds DONE). A
//!   handler's CAS after the waker's swap fails and leaves DONE.
//! - The registration ends with the sleep, before the record can be freed
//!   (a handler that comes later finds nothing registered).
//!
//! # Per-thread storage
//! A table of entries keyed by thread pointer (as `lock/os.rs` finds a
//! thread's identity): in a shared object a thread-local costs a
//! `__tls_get_addr` call, and every semop, msgsnd and msgrcv takes a
//! [`Mark`]. A thread claims a free entry at its first call (reading its
//! counter first: a handler that runs while the claim registers the exit
//! hook counts) and frees it at exit (a thread-local destructor); a
//! thread whose entry is taken uses a thread-local instead. A thread that died without its destructor
//! (a raw exit) leaves its entry to the next thread with its thread
//! pointer: the counter only ever moves forward, so inheriting it is
//! harmless, and a registered word is believed only by the thread whose
//! id registered it. A handler never claims an entry (no allocation, no
//! destructor registration): it uses the entry keyed by its thread
//! pointer, else the thread-local.
//!
//! # Safety
//! A registered address is that of a waiter's state word in the mapped
//! arena, stored by the sleeping thread before it sleeps and cleared
//! before its sleep returns (`park::sleep`, through `wait.rs`: `watch`
//! and `unwatch` are the crate's own): the caller borrows the word (and
//! so the namespace that maps it) for that whole time. Only that thread's
//! handlers, on that thread, while the sleep is in progress, turn the
//! address back into a reference.
#![allow(unsafe_code)]

use crate::park::{QUEUED, SLEEPING};
use crate::sys;
use core::cell::Cell;
use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, compiler_fence};

/// One thread's counter and registration.
///
/// # Layout
/// 32 bytes: `key` @0, `count` @8, `word` @16, `tid` @24.
#[repr(C, align(32))]
struct Slot {
    /// The owner's thread pointer, 0 when free. Written by a claiming
    /// thread (CAS from 0) and by the owner's exit (CAS back to 0).
    key: AtomicUsize,
    /// Handlers noted on the owner. Written by the owner's handlers only.
    count: AtomicU64,
    /// The address of the state word the owner is about to sleep on, or
    /// 0. Written by the owner only.
    word: AtomicUsize,
    /// The thread that registered `word`.
    tid: AtomicU32,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Slot>() == 32);
    assert!(offset_of!(Slot, count) == 8);
    assert!(offset_of!(Slot, word) == 16);
    assert!(offset_of!(Slot, tid) == 24);
};

impl Slot {
    const fn new() -> Slot {
        Slot {
            key: AtomicUsize::new(0),
            count: AtomicU64::new(0),
            word: AtomicUsize::new(0),
            tid: AtomicU32::new(0),
        }
    }

    /// What a handler does (on the owner's thread).
    fn note(&self) {
        // Only this thread and its handlers write the counter; a fetch_add
        // is whole with respect to a handler that interrupts it.
        self.count.fetch_add(1, Relaxed);
        // The owner's registration, as of the instruction we interrupted.
        compiler_fence(SeqCst);
        let w = self.word.load(Relaxed);
        if w == 0 || self.tid.load(Relaxed) != sys::process::gettid() as u32 {
            return;
        }
        // SAFETY: a non-zero `word` registered by this very thread (same
        // id) is the state word of its sleep in progress, which the
        // interrupted sleep borrows until it clears the registration
        // (module `# Safety`).
        let word = unsafe { &*(w as *const AtomicU32) };
        // Relaxed: the sleeper reads the counter, not this word, to learn
        // why it woke; the word only has to stop reading SLEEPING.
        let _ = word.compare_exchange(SLEEPING, QUEUED, Relaxed, Relaxed);
    }
}

const N: usize = 256;
static TABLE: [Slot; N] = [const { Slot::new() }; N];
/// Some thread uses the thread-local: handlers must look there too.
static LOCAL_USED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The storage of a thread whose table entry is taken. No destructor
    /// (a handler may touch it at any time).
    static LOCAL: Slot = const { Slot::new() };
    /// Frees the thread's table entry at its exit.
    static EXIT: Exit = const { Exit(Cell::new(0)) };
}

struct Exit(Cell<usize>);

impl Drop for Exit {
    fn drop(&mut self) {
        let tp = self.0.get();
        let e = entry(tp);
        if tp != 0 && e.key.load(Relaxed) == tp {
            // No sleep of this thread is left (a registration could only
            // outlive one that a handler left by longjmp). The counter
            // stays for the next owner: it only moves forward.
            e.word.store(0, Relaxed);
            let _ = e.key.compare_exchange(tp, 0, Relaxed, Relaxed);
        }
    }
}

#[inline(always)]
fn entry(tp: usize) -> &'static Slot {
    &TABLE[(tp.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) % N]
}

/// A thread's first mark: claims its table entry if it is free, else
/// falls back to the thread-local (not from a handler). The counter is
/// read before the storage is made findable, so that a handler that runs
/// while we claim (registering the exit hook allocates: that takes a
/// while on a new thread) counts as one that ran during the call.
#[cold]
#[inline(never)]
fn claim(tp: usize, e: &'static Slot) -> Mark {
    // Nobody writes a free entry's counter.
    let count = e.count.load(Relaxed);
    compiler_fence(SeqCst);
    if tp != 0 && e.key.compare_exchange(0, tp, Relaxed, Relaxed).is_ok() {
        compiler_fence(SeqCst);
        if EXIT.try_with(|x| x.0.set(tp)).is_ok() {
            return Mark {
                slot: Some(e),
                count,
            };
        }
        // Exiting (the thread-locals are gone): no hook would free it.
        let _ = e.key.compare_exchange(tp, 0, Relaxed, Relaxed);
    }
    LOCAL_USED.store(true, Relaxed);
    Mark {
        slot: None,
        count: Mark::read(None),
    }
}

/// Runs `f` on the calling thread's storage as a handler finds it.
#[inline]
fn with_found(f: impl FnOnce(&Slot)) {
    let tp = sys::process::thread_pointer();
    let e = entry(tp);
    if e.key.load(Relaxed) == tp {
        f(e);
    } else if LOCAL_USED.load(Relaxed) {
        let _ = LOCAL.try_with(f);
    }
}

/// Says that a signal handler is running on the calling thread: a System
/// V IPC call this thread is blocked in (or about to block in) fails with
/// EINTR, as the kernel's would. Async-signal-safe: atomics, and one
/// `gettid` when the thread is about to sleep. Call it from every handler
/// of a program that uses ipcns (libipcns.so does so for C programs).
#[doc(hidden)]
pub fn note_signal() {
    with_found(Slot::note);
}

/// Set once the process says that every signal handler it has calls
/// [`note_signal`] first.
static HANDLERS_NOTE: AtomicBool = AtomicBool::new(false);

/// Says that every signal handler of this process calls [`note_signal`]
/// first (the C ABI wraps the program's handlers so; a Rust program whose
/// own handlers do may say so too). A sleeper may then also wait for the
/// deaths that could complete it (`futex_waitv` on the death words of its
/// set's SEM_UNDO holders: `wait.rs`), a wait that a handler under
/// SA_RESTART does not end by itself, as it ends a FUTEX_WAIT with a
/// timeout (EINTR): only the handler's note ends it.
pub fn handlers_note_signals() {
    HANDLERS_NOTE.store(true, Relaxed);
}

/// Whether [`handlers_note_signals`] was said.
pub fn handlers_noted() -> bool {
    HANDLERS_NOTE.load(Relaxed)
}

/// The calling thread's counter as a call starts.
#[derive(Clone, Copy)]
pub struct Mark {
    /// The thread's table entry, or None for the thread-local.
    slot: Option<&'static Slot>,
    count: u64,
}

impl Mark {
    /// Takes the mark (at the start of a call that may block).
    #[inline]
    pub fn now() -> Mark {
        let tp = sys::process::thread_pointer();
        let e = entry(tp);
        if e.key.load(Relaxed) == tp {
            return Mark {
                slot: Some(e),
                count: Mark::read(Some(e)),
            };
        }
        claim(tp, e)
    }

    #[inline]
    fn on<R: Default>(slot: Option<&'static Slot>, f: impl FnOnce(&Slot) -> R) -> R {
        match slot {
            Some(s) => f(s),
            None => LOCAL.try_with(f).unwrap_or_default(),
        }
    }

    #[inline]
    fn read(slot: Option<&'static Slot>) -> u64 {
        // A handler's note is in program order with what we did before
        // (our registration, our CAS): not read earlier.
        compiler_fence(SeqCst);
        Mark::on(slot, |s| s.count.load(Relaxed))
    }

    /// Whether a handler was noted on this thread since the mark.
    #[inline]
    pub fn interrupted(&self) -> bool {
        Mark::read(self.slot) != self.count
    }

    /// Registers `word` as the state word this thread is about to sleep
    /// on (before it CASes it to SLEEPING); returns the registration it
    /// replaces, for [`Mark::unwatch`].
    pub(crate) fn watch(&self, word: &AtomicU32) -> usize {
        let tid = sys::process::gettid() as u32;
        let prev = Mark::on(self.slot, |s| {
            // The old word goes first, so that a handler never pairs it
            // with our tid; then our tid, then our word.
            let old = s.word.swap(0, Relaxed);
            compiler_fence(SeqCst);
            let ours = s.tid.swap(tid, Relaxed) == tid;
            compiler_fence(SeqCst);
            s.word.store(word.as_ptr() as usize, Relaxed);
            // A registration another thread left (a fork child's copy of
            // its parent's table, found through a reused thread pointer)
            // is not put back by `unwatch`: a handler on this thread would
            // then reset that thread's word, in the inherited arena.
            if ours { old } else { 0 }
        });
        // Registered before anything that follows (the CAS to SLEEPING).
        compiler_fence(SeqCst);
        prev
    }

    /// Ends a registration, putting back `prev` (a handler's own blocking
    /// call ends its registration; the one it interrupted stays).
    pub(crate) fn unwatch(&self, prev: usize) {
        // The sleep is over before the registration goes.
        compiler_fence(SeqCst);
        Mark::on(self.slot, |s| s.word.store(prev, Relaxed));
        compiler_fence(SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_moves_the_mark() {
        let m = Mark::now();
        assert!(!m.interrupted());
        note_signal();
        assert!(m.interrupted());
        assert!(!Mark::now().interrupted());
    }

    #[test]
    fn a_note_resets_a_watched_sleeping_word() {
        let word = AtomicU32::new(SLEEPING);
        let m = Mark::now();
        let prev = m.watch(&word);
        note_signal();
        assert_eq!(word.load(Relaxed), QUEUED);
        m.unwatch(prev);
        word.store(SLEEPING, Relaxed);
        note_signal();
        assert_eq!(word.load(Relaxed), SLEEPING, "unwatched: left alone");
    }

    #[test]
    fn a_note_leaves_done_alone() {
        let word = AtomicU32::new(crate::park::DONE);
        let m = Mark::now();
        let prev = m.watch(&word);
        note_signal();
        assert_eq!(word.load(Relaxed), crate::park::DONE);
        m.unwatch(prev);
    }

    #[test]
    fn threads_have_their_own_counters() {
        let m = Mark::now();
        std::thread::spawn(note_signal).join().unwrap();
        assert!(!m.interrupted());
    }
}
