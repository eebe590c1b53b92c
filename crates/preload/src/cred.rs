//! Who is calling: the process's credentials, cached so that a call costs
//! two loads and no system call.
//!
//! The core reads them from /proc (`Namespace::cred`). Here every distinct
//! set of credentials the process has had is kept for the process's life
//! in one of [`SLOTS`] (filled once each, by compare-and-swap: no lock, so
//! a fork in the middle of a fill leaves the child nothing to wait for),
//! and `HOT.cred` points at the one in force, `HOT.cred_gen` saying which
//! generation it was read in: `HOT.generation`, which the set*id wrappers
//! bump, plus the forks of the process's line (a fork child's pid differs;
//! counted by the core's one fork handler, so that a child that never
//! calls costs no store here). The next call sees a stale one, reads the
//! credentials again, and finds them in a slot (a process that toggles its
//! euid keeps using the same two) or fills a new one. Nothing is ever
//! freed, so a reference handed out cannot dangle whatever other threads
//! do; memory grows only with the number of distinct credential sets (a
//! new process, by its pid, has its own). Past [`MAX_SLOTS`] of them,
//! calls use the core's reference-counted copy (slower, still exact).

use crate::hot::HOT;
use crate::once::Published;
use core::sync::atomic::Ordering;
use ipcns_core::{Cred, Errno, Namespace, SysResult};

/// Distinct credential sets kept.
const MAX_SLOTS: usize = 256;

static SLOTS: [Published<Cred>; MAX_SLOTS] = [const { Published::new() }; MAX_SLOTS];

/// Runs `f` with the caller's credentials as of now.
#[inline(always)]
pub fn with_caller<R>(ns: &Namespace, f: impl FnOnce(&Cred) -> SysResult<R>) -> SysResult<R> {
    // Acquire: pairs with the Release of `changed` / `forked`, and of the
    // stores in `fresh` (the generation's after the pointer's, so a
    // matching generation means the pointer is at least that recent).
    let h = &HOT;
    if h.cred_gen.load(Ordering::Acquire)
        == h.generation
            .load(Ordering::Acquire)
            .wrapping_add(ipcns_core::creds::forks_now())
        && let Some(c) = h.cred.get()
    {
        return f(c);
    }
    fresh(ns, f)
}

#[cold]
#[inline(never)]
fn fresh<R>(ns: &Namespace, f: impl FnOnce(&Cred) -> SysResult<R>) -> SysResult<R> {
    // The generation is read before the credentials: a change after this
    // read bumps it again, and the next call reads once more.
    // With the forks of this process's line: a fork child's pid differs,
    // and no handler needs to write in the child (a store there copies a
    // page its parent shares, some µs for a child that may never call).
    let generation = HOT
        .generation
        .load(Ordering::Acquire)
        .wrapping_add(ipcns_core::creds::fork_generation());
    // Without /proc the caller's rights cannot be known: refused.
    let arc = ns.cred().map_err(|_| Errno::EACCES)?;
    match slot_of(&arc) {
        Some(c) => {
            HOT.cred.set(c);
            HOT.cred_gen.store(generation, Ordering::Release);
            f(c)
        }
        None => f(&arc),
    }
}

/// The slot holding credentials equal to `c`, filled if none does; `None`
/// when every slot holds others.
fn slot_of(c: &Cred) -> Option<&'static Cred> {
    for s in &SLOTS {
        let x = match s.get() {
            Some(x) => x,
            None => s.publish(c.clone()),
        };
        if x == c {
            return Some(x);
        }
    }
    None
}

/// Credentials may have changed (a set*id call succeeded, capset): the
/// next call reads them again.
pub fn changed() {
    ipcns_core::creds::refresh();
    HOT.generation.fetch_add(1, Ordering::Release);
}
