//! Calls made for another process. `ipcns run`'s supervisor serves the
//! System V IPC system calls of programs the library cannot reach (static
//! binaries, Go, musl without its library): the kernel hands it each call
//! (seccomp user notification), and one of its threads makes it here for
//! the caller. For the length of [`for_process`], that thread's calls are
//! the caller's:
//!
//! - its record in the process table (undo entries, attachments) is the
//!   record of the caller's pid and start time, its program image the one
//!   the supervisor names (`process::me`, `proc::image`): an exec of the
//!   caller, seen as a new image number, drops the attachments the old
//!   image had, as the kernel drops them at the exec;
//! - a segment's mapping (`arena::map`) is made and unmade in the caller
//!   by the [`Mapper`] given, and the attach path leaves the thread's own
//!   table of mappings (`shm/mapped.rs`) alone.
//!
//! Everything else stays the thread's own: locks are held and sleeps slept
//! by it (a supervisor killed holding a lock is recovered from as any
//! process is), the heap's caches and the keys it found are its process's.
//! The caller's death is the supervisor's to report (`Namespace::reap_pid`
//! when its pidfd says it ended): no death page is armed for it.
//!
//! A process that never acts for another pays one relaxed load of
//! `EVER` where it asks.

use crate::errno::Errno;
use core::cell::RefCell;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::rc::Rc;

/// Maps and unmaps segments in the process acted for.
pub trait Mapper {
    /// Maps `len` bytes of descriptor `fd` (the caller's own, open for as
    /// long as the call lasts) from `off`, shared, with `prot`, at `addr`
    /// (0: where the kernel chooses; else fixed, replacing what is there
    /// only if `replace`). The address, or the errno of `mmap` in the
    /// caller (EEXIST for an occupied range without `replace`).
    fn map(
        &self,
        fd: i32,
        off: u64,
        len: usize,
        addr: usize,
        prot: i32,
        replace: bool,
    ) -> Result<usize, Errno>;

    /// Unmaps `[addr, addr + len)` in the caller.
    fn unmap(&self, addr: usize, len: usize) -> Result<(), Errno>;

    /// The caller's `/proc/PID/maps` text (what shmdt reads to unmap only
    /// the pieces of an attachment that still map its segment), if it can
    /// be read.
    fn maps(&self) -> Option<String>;
}

/// The process acted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process {
    /// Its thread group id.
    pub pid: i32,
    /// Its start time (field 22 of /proc/PID/stat): with `pid`, names it.
    pub start: u64,
    /// A number for its current program image, never 0, different after
    /// each exec (the supervisor draws it from what the kernel placed
    /// differently at the exec).
    pub image: u64,
    /// The calling thread (what a message received while it slept shows
    /// as `msg_lrpid`, as the kernel's `task_pid(msr->r_tsk)`); 0 unknown.
    pub tid: i32,
}

/// Whether any thread of this process ever acted for another.
static EVER: AtomicBool = AtomicBool::new(false);

/// What a thread acts for: the process, its mapper, and the record the
/// call marked busy (`process::me_for`), if it did.
type Acting = Option<(Process, Option<Rc<dyn Mapper>>, Option<u32>)>;

std::thread_local! {
    static ACTING: RefCell<Acting> = const { RefCell::new(None) };
}

/// Runs `f` as a call of process `p`, mapping through `mapper` (shmat and
/// shmdt without one fail with ENOSYS: nothing to map with). Nested calls
/// restore what was before, also when `f` unwinds. Also returns the record
/// the call marked busy, if any, which the caller must unmark
/// (`Namespace::act` does both).
pub fn for_process<R>(
    p: Process,
    mapper: Option<Rc<dyn Mapper>>,
    f: impl FnOnce() -> R,
) -> (R, Option<u32>) {
    struct Restore(Acting);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            let _ = ACTING.try_with(|a| *a.borrow_mut() = before);
        }
    }
    EVER.store(true, Relaxed);
    let before = ACTING.with(|a| a.borrow_mut().replace((p, mapper, None)));
    let _restore = Restore(before);
    let r = f();
    let marked = ACTING
        .try_with(|a| a.borrow().as_ref().and_then(|(_, _, m)| *m))
        .ok()
        .flatten();
    (r, marked)
}

/// The record this thread's call marked busy, if any.
pub(crate) fn marked() -> Option<u32> {
    if !EVER.load(Relaxed) {
        return None;
    }
    ACTING
        .try_with(|a| a.borrow().as_ref().and_then(|(_, _, m)| *m))
        .ok()
        .flatten()
}

/// Notes that this thread's call marked record `idx` busy.
pub(crate) fn set_marked(idx: u32) {
    let _ = ACTING.try_with(|a| {
        if let Some((_, _, m)) = a.borrow_mut().as_mut() {
            *m = Some(idx);
        }
    });
}

/// The process this thread is acting for, if any.
#[inline]
pub(crate) fn current() -> Option<Process> {
    if !EVER.load(Relaxed) {
        return None;
    }
    ACTING
        .try_with(|a| a.borrow().as_ref().map(|(p, _, _)| *p))
        .ok()
        .flatten()
}

/// Calls `f` with the mapper of the process acted for: `None` when this
/// thread acts for nobody (map in this process), `Some(None)` when it acts
/// for a process without a mapper.
pub(crate) fn with_mapper<R>(f: impl FnOnce(Option<Option<&dyn Mapper>>) -> R) -> R {
    if !EVER.load(Relaxed) {
        return f(None);
    }
    let m = ACTING
        .try_with(|a| a.borrow().as_ref().map(|(_, m, _)| m.clone()))
        .ok()
        .flatten();
    match m {
        None => f(None),
        Some(m) => f(Some(m.as_deref())),
    }
}
