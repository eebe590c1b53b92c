//! [`Published`]: a value made once and kept for the rest of the process,
//! readable with one load and set without ever waiting; [`Current`]: a
//! pointer to one of those values, which may move to another.
//!
//! `std::sync::OnceLock` makes latecomers wait for the thread that is
//! setting it; in a fork child whose parent had another thread in the
//! middle of that, the wait would never end. Here a value is published by
//! one compare-and-swap of a pointer: a thread either sees it or does not,
//! and a loser of the race frees its own copy and takes the winner's.
//!
//! # Safety
//! A non-null pointer in a `Published` comes from `Box::into_raw` and is
//! never freed once stored (by the compare-and-swap, or by `replace`,
//! which stores another leaked box and leaves the old one alive), so it is
//! valid, immutable and shared for the rest of the process: handing out `&'static T` is sound (`T: Sync`
//! for the sharing between threads). A box that lost the race was never
//! seen by anyone else and is freed by its maker. A `Current` only ever
//! holds null or a `&'static T` (its `set` takes nothing else), so it too
//! hands out `&'static T` soundly.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicPtr, Ordering};

/// A `T` published at most once, never freed.
pub struct Published<T>(AtomicPtr<T>);

impl<T: Sync> Published<T> {
    pub const fn new() -> Published<T> {
        Published(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// The value, if published.
    #[inline(always)]
    pub fn get(&self) -> Option<&'static T> {
        // Acquire: pairs with the publishing compare-and-swap, so the
        // value's contents are seen.
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: null or published for good (module doc).
        unsafe { p.as_ref() }
    }

    /// Publishes `v` unless a value is there already; the value in force
    /// either way.
    pub fn publish(&self, v: T) -> &'static T {
        let p = Box::into_raw(Box::new(v));
        // Release: publishes the contents (pairs with `get`).
        match self.0.compare_exchange(
            core::ptr::null_mut(),
            p,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            // SAFETY: just published for good (module doc).
            Ok(_) => unsafe { &*p },
            Err(other) => {
                // SAFETY: `p` lost the race and was never shared: ours to
                // free.
                drop(unsafe { Box::from_raw(p) });
                // SAFETY: the winner's pointer, published for good
                // (non-null: the exchange failed on it).
                unsafe { &*other }
            }
        }
    }
}

impl<T: Sync> Published<T> {
    /// Publishes `v` in place of the value there (which stays alive for
    /// good: references to it remain valid). For the rare switch of the
    /// process's namespace (`unshare`).
    pub fn replace(&self, v: T) -> &'static T {
        let p = Box::into_raw(Box::new(v));
        // Release: publishes the contents (pairs with `get`).
        self.0.store(p, Ordering::Release);
        // SAFETY: just stored, never freed (module doc).
        unsafe { &*p }
    }
}

/// A pointer to a value published for good (by a [`Published`]), which may
/// be made to point at another such value: readers always find a live
/// value or none.
pub struct Current<T>(AtomicPtr<T>);

impl<T: Sync> Current<T> {
    pub const fn new() -> Current<T> {
        Current(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// The value pointed at, if any.
    #[inline(always)]
    pub fn get(&self) -> Option<&'static T> {
        // Acquire: pairs with `set`'s Release, so the value is seen as it
        // was published.
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: null, or a value published for good (only `&'static T`
        // are ever stored, see `set`).
        unsafe { p.as_ref() }
    }

    /// Points at `v` from now on.
    pub fn set(&self, v: &'static T) {
        // Release: pairs with `get`.
        self.0.store(v as *const T as *mut T, Ordering::Release);
    }
}
