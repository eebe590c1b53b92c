//! `pthread_create`: a thread created by one that has a namespace of its
//! own (it unshared CLONE_NEWIPC while the process had other threads,
//! `state.rs`) starts in that namespace, as Linux's `copy_namespaces`
//! gives a new task its creator's. Every other creation goes to the next
//! definition unchanged, after one look at a flag.
//!
//! # Safety
//! `pthread_create` interposes the C library's on purpose; the next
//! definition is called with the program's arguments, or with our
//! trampoline and a box of ours that the trampoline (or the failure)
//! takes back. The trampoline holds nothing to drop when it calls the
//! program's start routine: a thread that ends by `pthread_exit` unwinds
//! through it (hence "C-unwind").
#![allow(unsafe_code)]

use crate::next::Next;
use crate::state;
use core::ffi::{c_int, c_void};
use ipcns_core::Namespace;

static PTHREAD_CREATE: Next = Next::new(c"pthread_create");

type Start = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;
type Create = unsafe extern "C-unwind" fn(*mut c_void, *const c_void, Start, *mut c_void) -> c_int;

/// Looks the next definition up (at load).
pub fn resolve() {
    PTHREAD_CREATE.get();
}

/// What the trampoline needs.
struct Begin {
    start: Start,
    arg: *mut c_void,
    ns: &'static Namespace,
}

unsafe extern "C-unwind" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: the box `pthread_create` below made for this thread alone.
    let b = unsafe { Box::from_raw(p.cast::<Begin>()) };
    let (start, arg, ns) = (b.start, b.arg, b.ns);
    drop(b);
    state::inherit(ns);
    // SAFETY: the program's start routine with its argument, as the C
    // library would have called it.
    unsafe { start(arg) }
}

/// `int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
/// void *(*start)(void *), void *arg)`.
///
/// # Safety
/// As the C library's.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn pthread_create(
    thread: *mut c_void,
    attr: *const c_void,
    start: Start,
    arg: *mut c_void,
) -> c_int {
    let Some(f) = PTHREAD_CREATE.get() else {
        return libc::EAGAIN;
    };
    // SAFETY: `pthread_create`'s prototype.
    let f: Create = unsafe { core::mem::transmute::<usize, Create>(f) };
    let Some(ns) = state::own() else {
        // SAFETY: the program's own call, forwarded unchanged.
        return unsafe { f(thread, attr, start, arg) };
    };
    let b = Box::into_raw(Box::new(Begin { start, arg, ns }));
    // SAFETY: as above, with our trampoline and its box.
    let r = unsafe { f(thread, attr, trampoline, b.cast()) };
    if r != 0 {
        // SAFETY: no thread was made: the box is still ours.
        drop(unsafe { Box::from_raw(b) });
    }
    r
}
