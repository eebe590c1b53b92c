//! The program's signal handlers, wrapped: the kernel runs our wrapper
//! (`ffi/signals.rs`), which first tells the core that a handler ran on
//! this thread (`ipcns_core::note_signal`: a semop, semtimedop, msgsnd or
//! msgrcv the thread is blocked in then fails with EINTR, as the
//! kernel's does, signal(7)), then calls the program's handler.
//!
//! # Protocol
//! - One word per signal holds the program's handler for it, with two
//!   bits: [`INFO`], it asked for SA_SIGINFO (the wrapper calls it with
//!   three arguments, else one); [`ADDED`], we installed the wrapper with
//!   an SA_SIGINFO the program did not ask for (taken off again in what it
//!   reads back). The wrapper reads the word whole (a handler and its
//!   kind never torn apart) and nothing else: no lock, no allocation.
//! - Every change of a signal's action through us runs under one lock,
//!   with the program's signals blocked on the holding thread (so that
//!   none of its handlers, which may call sigaction, can run there): read
//!   the word, write the new one, install (wrapper or not) through the next
//!   definition, read the kernel's old action back, translate it with the
//!   word as it was, and put the word back if the call failed. The word is
//!   written before the kernel can run the wrapper for the new handler.
//! - What the program reads back is the kernel's answer, translated: the
//!   wrapper becomes the handler the word held, SA_SIGINFO is taken off
//!   if we added it, and after SA_RESETHAND fired (the kernel shows
//!   SIG_DFL with the flags we installed) SA_SIGINFO is taken off too.
//!   Anything else (SIG_DFL, SIG_IGN, a handler installed by a raw system
//!   call we did not see) is passed through as the kernel says it.
//! - SIG_DFL and SIG_IGN are installed as they are and leave the handler
//!   in the word (a delivery already under way when they replace the
//!   wrapper still finds the handler it was meant for); only ADDED goes.
//!
//! The lock word names its holder's thread; a holder that is no longer a
//! thread of this process (it died, or the word came through a fork from
//! another thread of the parent) is taken over.

use core::ffi::c_int;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU32, AtomicU64};
use ipcns_core::Errno;
use ipcns_core::sys::process;

use crate::next;

/// The word's bit: the program asked for SA_SIGINFO.
const INFO: u64 = 1 << 63;
/// The word's bit: the wrapper was installed with an SA_SIGINFO the
/// program did not ask for.
const ADDED: u64 = 1 << 62;
/// The handler's address (user space addresses on x86-64 and aarch64 are
/// far below 2^62; a handler above is installed unwrapped).
const ADDR: u64 = ADDED - 1;

/// Signals 1 to 64 (index 0 unused).
static WORDS: [AtomicU64; 65] = [const { AtomicU64::new(0) }; 65];

/// The lock's holder (its tid), 0 when free.
static HOLDER: AtomicU32 = AtomicU32::new(0);

const SA_SIGINFO: u64 = libc::SA_SIGINFO as u32 as u64;
const SA_RESETHAND: u64 = libc::SA_RESETHAND as u32 as u64;

fn word(sig: c_int) -> Option<&'static AtomicU64> {
    WORDS.get(usize::try_from(sig).ok().filter(|&s| s >= 1)?)
}

/// The program's handler for `sig` and whether it takes three arguments,
/// for the wrapper. Lock-free.
pub fn handler_of(sig: c_int) -> Option<(usize, bool)> {
    // Acquire: pairs with the Release that published the handler (before
    // the kernel could run the wrapper for it).
    let w = word(sig)?.load(Acquire);
    let h = (w & ADDR) as usize;
    (h > 1).then_some((h, w & INFO != 0))
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
        HOLDER.store(0, Release);
        next::set_signal_mask(self.mask);
    }
}

impl Held {
    /// The word of `sig` now (0 for a signal out of range).
    pub fn current(&self, sig: c_int) -> u64 {
        word(sig).map_or(0, |w| w.load(Relaxed))
    }

    /// The program installs `handler` with `flags` for `sig` (through
    /// sigaction: `info` it asked for SA_SIGINFO, so the wrapper goes in
    /// with SA_SIGINFO in any case; through signal() and its kin: never,
    /// and the wrapper goes in with the flags the C library chooses).
    /// Returns whether to install the wrapper in its place.
    pub fn install(&self, sig: c_int, handler: usize, info: bool, via_sigaction: bool) -> bool {
        let Some(w) = word(sig) else {
            return false;
        };
        let h = handler as u64;
        if handler <= 1 {
            // SIG_DFL, SIG_IGN: the handler stays for late deliveries.
            w.store(w.load(Relaxed) & !ADDED, Release);
            return false;
        }
        if h & !ADDR != 0 {
            return false;
        }
        let bits = if info {
            INFO
        } else if via_sigaction {
            ADDED
        } else {
            0
        };
        // Release: pairs with the wrapper's Acquire.
        w.store(h | bits, Release);
        true
    }

    /// Puts back the word `prev` of `sig` (the call failed: the kernel's
    /// action did not change).
    pub fn undo(&self, sig: c_int, prev: u64) {
        if let Some(w) = word(sig) {
            w.store(prev, Release);
        }
    }
}

/// The action the kernel reports (`handler`, `flags`, as unsigned bits),
/// as the program sees it: `prev` is the signal's word as it was before
/// the call, `wrapper` our wrapper's address.
pub fn translate(prev: u64, handler: usize, flags: u64, wrapper: usize) -> (usize, u64) {
    let added = prev & ADDED != 0;
    if handler == wrapper {
        let flags = if added { flags & !SA_SIGINFO } else { flags };
        return ((prev & ADDR) as usize, flags);
    }
    // After SA_RESETHAND fired the kernel shows SIG_DFL with the flags of
    // the action it reset (get_signal: "if (ka->sa.sa_flags & SA_ONESHOT)
    // ka->sa.sa_handler = SIG_DFL;"): ours.
    if handler == libc::SIG_DFL && added && flags & SA_RESETHAND != 0 {
        return (handler, flags & !SA_SIGINFO);
    }
    (handler, flags)
}

/// What signal() and its kin return: `old` (the kernel's old handler)
/// translated.
pub fn translate_handler(prev: u64, old: usize, wrapper: usize) -> usize {
    if old == wrapper {
        (prev & ADDR) as usize
    } else {
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: usize = 0x5000;
    const H: usize = 0x7000;

    #[test]
    fn the_wrapper_reads_back_as_the_program_set_it() {
        let held = lock();
        assert!(held.install(10, H, false, true));
        let prev = held.current(10);
        assert_eq!(handler_of(10), Some((H, false)));
        // The kernel holds the wrapper with SA_SIGINFO and SA_RESTORER.
        let k = SA_SIGINFO | 0x0400_0000 | 0x1000_0000;
        assert_eq!(translate(prev, W, k, W), (H, 0x0400_0000 | 0x1000_0000));
        // After SA_RESETHAND fired: SIG_DFL, our flags, less SA_SIGINFO.
        let k = k | SA_RESETHAND;
        assert_eq!(translate(prev, 0, k, W), (0, k & !SA_SIGINFO));
        // A handler that asked for SA_SIGINFO keeps it.
        assert!(held.install(10, H, true, true));
        let prev = held.current(10);
        assert_eq!(handler_of(10), Some((H, true)));
        assert_eq!(translate(prev, W, k, W), (H, k));
        assert_eq!(translate(prev, 0, k, W), (0, k));
        // SIG_DFL keeps the handler for late deliveries, drops ADDED.
        assert!(held.install(10, H, false, true));
        assert!(!held.install(10, 0, false, true));
        let prev = held.current(10);
        assert_eq!(handler_of(10), Some((H, false)));
        assert_eq!(translate(prev, 0, k, W), (0, k));
        assert_eq!(translate_handler(prev, W, W), H);
        assert_eq!(translate_handler(prev, 1, W), 1);
        held.undo(10, 0);
        assert!(!held.install(0, H, false, true));
        assert!(!held.install(65, H, false, true));
    }
}
