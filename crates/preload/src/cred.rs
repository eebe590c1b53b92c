//! Who is calling: the process's credentials, cached so that a call costs
//! two loads and no system call.
//!
//! The core reads them from /proc (`Namespace::cred`). Here every distinct
//! set of credentials the process has had is kept for the process's life
//! in one of [`SLOTS`] (filled once each, by compare-and-swap: no lock, so
//! a fork in the middle of a fill leaves the child nothing to wait for),
//! and [`CURRENT`] names the slot in force with the generation it was
//! found in. The set*id wrappers and the fork child handler bump
//! [`GENERATION`]; the next call sees a stale generation, reads the
//! credentials again, and finds them in a slot (a process that toggles its
//! euid keeps using the same two) or fills a new one. Nothing is ever
//! freed, so a reference handed out cannot dangle whatever other threads
//! do; memory grows only with the number of distinct credential sets (a
//! new process, by its pid, has its own). Past [`MAX_SLOTS`] of them,
//! calls use the core's reference-counted copy (slower, still exact).

use crate::once::Published;
use core::sync::atomic::{AtomicU64, Ordering};
use ipcns_core::{Cred, Errno, Namespace, SysResult};

/// Distinct credential sets kept.
const MAX_SLOTS: usize = 256;

static SLOTS: [Published<Cred>; MAX_SLOTS] = [const { Published::new() }; MAX_SLOTS];
/// Bumped when credentials may have changed (set*id, capset, fork).
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// `generation << 8 | slot` of the credentials in force; 0 none yet.
static CURRENT: AtomicU64 = AtomicU64::new(0);

/// The credentials in slot `i`, if it is filled.
#[inline(always)]
fn slot(i: usize) -> Option<&'static Cred> {
    SLOTS.get(i)?.get()
}

/// Runs `f` with the caller's credentials as of now.
#[inline(always)]
pub fn with_caller<R>(ns: &Namespace, f: impl FnOnce(&Cred) -> SysResult<R>) -> SysResult<R> {
    // Acquire: pairs with the Release of `changed` / `forked` and of the
    // store in `fresh`.
    let cur = CURRENT.load(Ordering::Acquire);
    if cur >> 8 == GENERATION.load(Ordering::Acquire)
        && let Some(c) = slot((cur & 0xff) as usize)
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
    let generation = GENERATION.load(Ordering::Acquire);
    // Without /proc the caller's rights cannot be known: refused.
    let arc = ns.cred().map_err(|_| Errno::EACCES)?;
    match slot_of(&arc) {
        Some((i, c)) => {
            CURRENT.store(generation << 8 | i as u64, Ordering::Release);
            f(c)
        }
        None => f(&arc),
    }
}

/// The slot holding credentials equal to `c`, filled if none does; `None`
/// when every slot holds others.
fn slot_of(c: &Cred) -> Option<(usize, &'static Cred)> {
    for (i, s) in SLOTS.iter().enumerate() {
        let x = match s.get() {
            Some(x) => x,
            None => s.publish(c.clone()),
        };
        if x == c {
            return Some((i, x));
        }
    }
    None
}

/// Credentials may have changed (a set*id call succeeded, capset): the
/// next call reads them again.
pub fn changed() {
    ipcns_core::creds::refresh();
    GENERATION.fetch_add(1, Ordering::Release);
}

/// In a fork child: its pid differs. Only an atomic (a fork handler).
pub fn forked() {
    GENERATION.fetch_add(1, Ordering::Release);
}
