//! The program's signal handlers, wrapped: the kernel runs one of our two
//! wrappers (`ffi/signals.rs`), which first tells the core that a handler
//! ran on this thread (`ipcns_core::note_signal`: a semop, semtimedop,
//! msgsnd or msgrcv the thread is blocked in then fails with EINTR, as
//! the kernel's does, signal(7)), then calls the program's handler.
//!
//! # Protocol
//! - Two wrappers, one per way in. `sigaction` (and the raw
//!   `rt_sigaction`) install the SA_SIGINFO wrapper, always with
//!   SA_SIGINFO: it reads the signal's [`Words::main`], the program's
//!   handler with two bits: [`INFO`], it asked for SA_SIGINFO (called
//!   with the kernel's three arguments, else with one); [`ADDED`], it did
//!   not (so SA_SIGINFO is taken off again in what it reads back).
//!   `signal()` and its kin install the plain wrapper with the C library's
//!   flags (never SA_SIGINFO): it reads [`Words::plain`], a one-argument
//!   handler. Each wrapper reads its word whole and nothing else: a
//!   handler and its kind are never torn apart, and a wrapper never calls
//!   a handler with arguments the kernel did not give it (a delivery
//!   under way while the other way in replaces the action runs the
//!   handler it was meant for). No lock, no allocation.
//! - Every change of a signal's action through us runs under one lock,
//!   with the program's signals blocked on the holding thread (so that
//!   none of its handlers, which may call sigaction, can run there): read
//!   the words, write the new one, install (a wrapper or not) through the
//!   next definition, read the kernel's old action back, translate it
//!   with the words as they were, and put them back if the call failed.
//!   A word is written before the kernel can run its wrapper for the new
//!   handler.
//! - What the program reads back is the kernel's answer, translated: a
//!   wrapper becomes the handler its word held, SA_SIGINFO is taken off
//!   if we added it, and after SA_RESETHAND fired (the kernel shows
//!   SIG_DFL with the flags we installed) SA_SIGINFO is taken off too.
//!   Anything else (SIG_DFL, SIG_IGN, a handler installed by a raw system
//!   call we did not see) is passed through as the kernel says it.
//! - SIG_DFL, SIG_IGN and the plain wrapper leave the main word's handler
//!   (a delivery already under way still finds it); only ADDED goes, as
//!   the kernel's action no longer carries our SA_SIGINFO.
//!
//! The lock word names its holder's thread; a holder that is no longer a
//! thread of this process (it died, or the word came through a fork from
//! another thread of the parent) is taken over.

use core::ffi::c_int;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use ipcns_core::Errno;
use ipcns_sys::process;

use crate::next;

/// The main word's bit: the program asked for SA_SIGINFO.
const INFO: u64 = 1 << 63;
/// The main word's bit: the SA_SIGINFO wrapper was installed with an
/// SA_SIGINFO the program did not ask for.
const ADDED: u64 = 1 << 62;
/// The handler's address (user space addresses on x86-64 and aarch64 are
/// far below 2^62; a handler above is installed unwrapped).
const ADDR: u64 = ADDED - 1;

/// Signals 1 to 64 (index 0 unused). Written under the lock; read by the
/// wrappers at any time.
static MAIN: [AtomicU64; 65] = [const { AtomicU64::new(0) }; 65];
static PLAIN: [AtomicUsize; 65] = [const { AtomicUsize::new(0) }; 65];

/// The lock's holder (its tid), 0 when free.
static HOLDER: AtomicU32 = AtomicU32::new(0);

const SA_SIGINFO: u64 = libc::SA_SIGINFO as u32 as u64;
const SA_RESETHAND: u64 = libc::SA_RESETHAND as u32 as u64;

/// Signal `sig`'s index, if it has one.
fn at(sig: c_int) -> Option<usize> {
    usize::try_from(sig).ok().filter(|s| (1..=64).contains(s))
}

/// The program's handler behind the SA_SIGINFO wrapper for `sig`, and
/// whether it takes three arguments. Lock-free.
pub fn main_handler(sig: c_int) -> Option<(usize, bool)> {
    // Acquire: pairs with the Release that published the handler (before
    // the kernel could run the wrapper for it).
    let w = MAIN[at(sig)?].load(Acquire);
    let h = (w & ADDR) as usize;
    (h > 1).then_some((h, w & INFO != 0))
}

/// The program's handler behind the plain wrapper for `sig`. Lock-free.
pub fn plain_handler(sig: c_int) -> Option<usize> {
    // Acquire: as in `main_handler`.
    let h = PLAIN[at(sig)?].load(Acquire);
    (h > 1).then_some(h)
}

/// A signal's words as they were before a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    /// The handler behind the SA_SIGINFO wrapper, with [`INFO`] and
    /// [`ADDED`].
    pub main: u64,
    /// The handler behind the plain wrapper.
    pub plain: usize,
}

/// Our two wrappers' addresses, as the kernel reports them.
#[derive(Clone, Copy)]
pub struct Wrappers {
    pub info: usize,
    pub plain: usize,
}

/// The lock, held: changes of actions through us are one at a time.
pub struct Held {
    mask: u64,
}

/// Takes the lock, with the program's signals blocked on this thread
/// until it is dropped.
pub fn lock() -> Held {
    let mask = next::block_signals();
    let me = process::gettid() as u32;
    loop {
        // Acquire: pairs with the Release of the previous holder.
        match HOLDER.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => return Held { mask },
            Err(h)
                if h == me
                    || process::tgkill(process::getpid(), h as i32, 0) == Err(Errno::ESRCH) =>
            {
                // Not a thread of ours (or ourselves, from a fork of a
                // parent's thread with our tid): its change is over.
                let _ = HOLDER.compare_exchange(h, 0, Relaxed, Relaxed);
            }
            Err(_) => process::sched_yield(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Release: the words written under the lock, for the next holder.
        HOLDER.store(0, Release);
        next::set_signal_mask(self.mask);
    }
}

impl Held {
    /// The words of `sig` now (zero for a signal out of range).
    pub fn current(&self, sig: c_int) -> Words {
        at(sig).map_or(Words { main: 0, plain: 0 }, |i| Words {
            main: MAIN[i].load(Relaxed),
            plain: PLAIN[i].load(Relaxed),
        })
    }

    /// `sigaction` installs `handler` for `sig`, `info` if it asked for
    /// SA_SIGINFO. Returns whether to install the SA_SIGINFO wrapper (with
    /// SA_SIGINFO) in its place.
    pub fn install_info(&self, sig: c_int, handler: usize, info: bool) -> bool {
        let Some(i) = at(sig) else {
            return false;
        };
        let h = handler as u64;
        if handler <= 1 || h & !ADDR != 0 {
            // SIG_DFL, SIG_IGN (or a handler we cannot pack): installed as
            // it is, which carries no SA_SIGINFO of ours.
            self.not_added(i);
            return false;
        }
        // Release: pairs with the wrapper's Acquire.
        MAIN[i].store(h | if info { INFO } else { ADDED }, Release);
        true
    }

    /// `signal()` or its kin installs `handler` for `sig`. Returns whether
    /// to install the plain wrapper in its place.
    pub fn install_plain(&self, sig: c_int, handler: usize) -> bool {
        let Some(i) = at(sig) else {
            return false;
        };
        self.not_added(i);
        if handler <= 1 {
            return false;
        }
        // Release: pairs with the wrapper's Acquire.
        PLAIN[i].store(handler, Release);
        true
    }

    fn not_added(&self, i: usize) {
        MAIN[i].store(MAIN[i].load(Relaxed) & !ADDED, Release);
    }

    /// Puts back the words `prev` of `sig` (the call failed: the kernel's
    /// action did not change).
    pub fn undo(&self, sig: c_int, prev: Words) {
        if let Some(i) = at(sig) {
            MAIN[i].store(prev.main, Release);
            PLAIN[i].store(prev.plain, Release);
        }
    }
}

/// The action the kernel reports (`handler`, `flags` as unsigned bits),
/// as the program sees it; `prev`: the signal's words before the call.
pub fn translate(prev: Words, handler: usize, flags: u64, w: Wrappers) -> (usize, u64) {
    let added = prev.main & ADDED != 0;
    if handler == w.info {
        let flags = if added { flags & !SA_SIGINFO } else { flags };
        return ((prev.main & ADDR) as usize, flags);
    }
    if handler == w.plain {
        return (prev.plain, flags);
    }
    // After SA_RESETHAND fired the kernel shows SIG_DFL with the flags of
    // the action it reset (get_signal: "if (ka->sa.sa_flags & SA_ONESHOT)
    // ka->sa.sa_handler = SIG_DFL;"): ours.
    if handler == libc::SIG_DFL && added && flags & SA_RESETHAND != 0 {
        return (handler, flags & !SA_SIGINFO);
    }
    (handler, flags)
}

/// SIGBUS's and SIGSEGV's slots in [`FAULT`].
fn fault_at(sig: c_int) -> Option<usize> {
    match sig {
        libc::SIGBUS => Some(0),
        libc::SIGSEGV => Some(1),
        _ => None,
    }
}

/// An action as the kernel shows it (`struct k_sigaction` for x86-64:
/// handler, flags, restorer, the 64-bit mask).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

/// The flags the kernel keeps (include/linux/signal_types.h,
/// `UAPI_SA_FLAGS`, with x86's SA_RESTORER): do_sigaction "Clear unknown
/// flag bits".
const UAPI_SA_FLAGS: u64 =
    0x1 | 0x2 | 0x4 | 0x0800_0000 | 0x1000_0000 | 0x4000_0000 | 0x8000_0000 | 0x800 | 0x0400_0000;

impl Action {
    /// The action as `do_sigaction` stores it: unknown flags cleared,
    /// SIGKILL and SIGSTOP never masked ("sigdelsetmask(&act->sa.sa_mask,
    /// sigmask(SIGKILL) | sigmask(SIGSTOP))").
    pub fn stored(handler: usize, flags: u64, restorer: usize, mask: u64) -> Action {
        let never = (1u64 << (libc::SIGKILL - 1)) | (1u64 << (libc::SIGSTOP - 1));
        Action {
            handler,
            flags: flags & UAPI_SA_FLAGS,
            restorer,
            mask: mask & !never,
        }
    }
}

/// The program's action for a fault signal the library holds (the kernel
/// runs our fault handler): a seqlock, written under the lock (and by the
/// fault handler when SA_RESETHAND fires), read by the fault handler.
struct Shadow {
    seq: AtomicU64,
    handler: AtomicUsize,
    flags: AtomicU64,
    restorer: AtomicUsize,
    mask: AtomicU64,
}

static FAULT: [Shadow; 2] = [const {
    Shadow {
        seq: AtomicU64::new(0),
        handler: AtomicUsize::new(0),
        flags: AtomicU64::new(0),
        restorer: AtomicUsize::new(0),
        mask: AtomicU64::new(0),
    }
}; 2];

/// Whether the library holds SIGSEGV and SIGBUS: written under the lock.
static HOLDS: AtomicBool = AtomicBool::new(false);

impl Shadow {
    /// Takes the write side (the sequence made odd); its even value.
    fn begin(&self) -> u64 {
        loop {
            let s = self.seq.load(Relaxed);
            // Acquire: the previous writer's stores are behind us.
            if s & 1 == 0
                && self
                    .seq
                    .compare_exchange(s, s + 1, Acquire, Relaxed)
                    .is_ok()
            {
                core::sync::atomic::fence(Release);
                return s;
            }
            core::hint::spin_loop();
        }
    }

    fn end(&self, s: u64) {
        // Release: the fields before the even sequence.
        self.seq.store(s + 2, Release);
    }

    fn read(&self) -> Action {
        let mut a = Action::default();
        // A writer finishes in a few stores (on another thread: this one
        // holds no write side while a fault handler runs on it).
        for _ in 0..100_000 {
            let s = self.seq.load(Acquire);
            a = Action {
                handler: self.handler.load(Relaxed),
                flags: self.flags.load(Relaxed),
                restorer: self.restorer.load(Relaxed),
                mask: self.mask.load(Relaxed),
            };
            core::sync::atomic::fence(Acquire);
            if s & 1 == 0 && self.seq.load(Relaxed) == s {
                break;
            }
            core::hint::spin_loop();
        }
        a
    }
}

/// Whether the library holds `sig` (SIGSEGV or SIGBUS, taken over).
pub fn holds(sig: c_int) -> bool {
    fault_at(sig).is_some() && HOLDS.load(Acquire)
}

/// The program's action for a held fault signal. Lock-free.
pub fn fault_action(sig: c_int) -> Action {
    fault_at(sig).map_or(Action::default(), |i| FAULT[i].read())
}

/// SA_RESETHAND fired for a held fault signal whose handler is `h`: the
/// program's action becomes SIG_DFL (flags kept, as get_signal keeps
/// them). From the fault handler: lock-free.
pub fn fault_reset(sig: c_int, h: usize) {
    if let Some(i) = fault_at(sig) {
        let f = &FAULT[i];
        let s = f.begin();
        if f.handler.load(Relaxed) == h {
            f.handler.store(libc::SIG_DFL, Relaxed);
        }
        f.end(s);
    }
}

impl Held {
    /// Records the program's action for a fault signal.
    pub fn set_fault_action(&self, sig: c_int, a: Action) {
        if let Some(i) = fault_at(sig) {
            let f = &FAULT[i];
            let s = f.begin();
            f.handler.store(a.handler, Relaxed);
            f.flags.store(a.flags, Relaxed);
            f.restorer.store(a.restorer, Relaxed);
            f.mask.store(a.mask, Relaxed);
            f.end(s);
        }
    }

    /// From now on (or no longer) the library holds SIGSEGV and SIGBUS.
    pub fn set_holds(&self, holds: bool) {
        HOLDS.store(holds, Release);
    }

    /// Whether the library holds `sig` (as [`holds`], under the lock).
    pub fn holds(&self, sig: c_int) -> bool {
        holds(sig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Wrappers = Wrappers {
        info: 0x5000,
        plain: 0x6000,
    };
    const H: usize = 0x7000;
    const G: usize = 0x8000;
    const RESTORER: u64 = 0x0400_0000;

    #[test]
    fn the_wrappers_read_back_as_the_program_set_them() {
        let held = lock();
        assert!(held.install_info(10, H, false));
        let prev = held.current(10);
        assert_eq!(main_handler(10), Some((H, false)));
        // The kernel holds the wrapper with SA_SIGINFO and SA_RESTORER.
        let k = SA_SIGINFO | RESTORER | 0x1000_0000;
        assert_eq!(translate(prev, W.info, k, W), (H, RESTORER | 0x1000_0000));
        // After SA_RESETHAND fired: SIG_DFL, our flags, less SA_SIGINFO.
        let k = k | SA_RESETHAND;
        assert_eq!(translate(prev, 0, k, W), (0, k & !SA_SIGINFO));
        // A handler that asked for SA_SIGINFO keeps it.
        assert!(held.install_info(10, H, true));
        let prev = held.current(10);
        assert_eq!(main_handler(10), Some((H, true)));
        assert_eq!(translate(prev, W.info, k, W), (H, k));
        assert_eq!(translate(prev, 0, k, W), (0, k));
        // SIG_DFL keeps the handler for deliveries under way, drops ADDED.
        assert!(held.install_info(10, H, false));
        assert!(!held.install_info(10, 0, false));
        let prev = held.current(10);
        assert_eq!(main_handler(10), Some((H, false)));
        assert_eq!(translate(prev, 0, k, W), (0, k));
        // signal(): the plain wrapper, its own word; the main one stays.
        assert!(held.install_info(10, H, false));
        assert!(held.install_plain(10, G));
        let prev = held.current(10);
        assert_eq!(plain_handler(10), Some(G));
        assert_eq!(main_handler(10), Some((H, false)));
        assert_eq!(translate(prev, W.plain, RESTORER, W), (G, RESTORER));
        assert_eq!(translate(prev, W.info, k, W), (H, k));
        held.undo(10, Words { main: 0, plain: 0 });
        assert_eq!(main_handler(10), None);
        assert_eq!(plain_handler(10), None);
        assert!(!held.install_info(0, H, false));
        assert!(!held.install_plain(65, H));
    }
}
