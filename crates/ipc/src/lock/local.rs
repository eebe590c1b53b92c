//! A process-local spin word for rare, short sections (a mapping's growth,
//! the table of mapped arenas): it names its holder (`pid << 32 | tid`),
//! so that a fork's copy of a word a parent thread held (the child has no
//! such thread) is taken over instead of waited for forever, and a signal
//! handler that interrupts its own thread's section is told so instead
//! of waiting for itself.

use crate::sys;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The holder's guard: releases the word when dropped.
pub struct Held<'a>(&'a AtomicU64);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire of the next taker.
        self.0.store(0, Release);
    }
}

/// Takes `word`, yielding while another thread of this process holds it;
/// `None` when the calling thread holds it already (a signal handler that
/// interrupted the section).
pub fn take(word: &AtomicU64) -> Option<Held<'_>> {
    let pid = sys::process::getpid() as u32;
    let me = (u64::from(pid) << 32) | u64::from(sys::process::gettid() as u32);
    loop {
        // Acquire: pairs with the Release of the guard's drop.
        match word.compare_exchange(0, me, Acquire, Relaxed) {
            Ok(_) => return Some(Held(word)),
            Err(cur) if cur == me => return None,
            // Another process's thread: a fork's copy.
            Err(cur) if (cur >> 32) as u32 != pid => {
                if word.compare_exchange(cur, me, Acquire, Relaxed).is_ok() {
                    return Some(Held(word));
                }
            }
            Err(_) => sys::process::sched_yield(),
        }
    }
}
