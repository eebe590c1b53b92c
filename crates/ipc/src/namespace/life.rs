//! The end of a process and of a program image, at the instant the kernel
//! makes them: `exit` with other threads still inside IPC calls, and an
//! `execve` made by a thread that is not the thread group's leader.
//!
//! The kernel stops every other thread of the process between two of its
//! system calls before `exit_sem` and `exit_shm` run, and an execve kills
//! the other threads (the leader included, whose thread id the execing
//! thread then takes) the same way. In ipcns the other threads run the
//! library's code in user space, so the thread that ends the process or
//! the image first freezes the process at the lock gate (`lock/gate.rs`):
//! no other thread holds an arena lock or takes one again, which is what a
//! process killed between two operations looks like. Then:
//!
//! - exit: the process's undo entries are applied and its attachments
//!   dropped (`proc::finish`); the sleepers whose operation would change
//!   an applied entry are ended first (`sem/undo.rs`), so nothing changes
//!   on the process's behalf afterwards. The others stay frozen until the
//!   process is gone.
//! - execve by a thread other than the leader: the leader's record, if it
//!   sleeps in semop, msgsnd or msgrcv, is taken off its queue
//!   (`wait::cancel`): after the execve the new image's main thread has the
//!   leader's thread id and start time, so the record would look alive
//!   forever and be handed tokens and messages nobody collects. If the
//!   execve fails, the process is thawed and the leader's call starts over.
//!
//! A process that cannot be frozen (no `membarrier`, or the other threads
//! keep a lock past the limit) is not finished at exit: the reapers finish
//! it once it is gone, which is always exact, only later.

use crate::errno::Errno;
use crate::ids::Bitmap;
use crate::lock::{TID_MASK, gate};
use crate::msg::MsgKind;
use crate::namespace::Namespace;
use crate::registry::{Kind, lock_object, used_slot};
use crate::sem::SemKind;
use crate::session::Session;
use core::sync::atomic::Ordering::Relaxed;

/// How long an exit waits for the arena's locks, in all.
const EXIT_LOCKS: core::time::Duration = core::time::Duration::from_secs(2);

/// How long a freezer waits for the other threads to leave their locks.
const FREEZE_NS: u64 = 1_000_000_000;

/// The process is quiet for an exit: frozen by the caller, or it has no
/// other thread. False when neither can be made sure of.
fn quiet() -> bool {
    match gate::freeze(FREEZE_NS) {
        Ok(()) => true,
        Err(_) => gate::frozen_by_me() || crate::lock::thread_count() == Some(1),
    }
}

impl Namespace {
    /// What the kernel's exit path does for a process that is ending (the
    /// C ABI runs it from a destructor, after the program's `atexit`
    /// handlers): the other threads stopped at the lock gate, then
    /// [`Namespace::exit_process`] and its shm attachments dropped from
    /// `shm_nattch` at once, as the kernel's `exit_mm` would drop them.
    /// The mappings stay until the process is gone: code that runs after
    /// this may still touch them. If the other threads cannot be stopped,
    /// nothing is done here: the process is finished once it is gone.
    #[doc(hidden)]
    pub fn exit_ending(&self) -> crate::errno::SysResult<()> {
        // A process with no record (a fork child that made no IPC call)
        // has nothing to finish: it stores nothing and stops nobody.
        if !crate::process::may_have_record(self.arena()) {
            return Ok(());
        }
        if !quiet() {
            return Ok(());
        }
        // The exit never waits long on a lock (a stopped participant's):
        // what is left is finished once the process is gone.
        crate::lock::with_limit(EXIT_LOCKS, || crate::process::exit_ending(self.arena()))
    }
}

/// An execve is about to be made by the calling thread: the process
/// frozen (best effort: an execve is never refused), and if the caller is
/// not the leader, the leader's sleep in `ns` (if any) cancelled. Returns
/// whether the process was frozen here (then [`exec_failed`] must thaw it
/// if the execve returns). Nothing is done in a child that shares its
/// parent's memory (vfork): its freezing would stop the parent's threads.
pub fn before_exec(ns: Option<&Namespace>) -> bool {
    if !gate::owns_memory() {
        return false;
    }
    let frozen = !gate::frozen_by_me() && gate::freeze(FREEZE_NS).is_ok();
    let pid = crate::sys::process::getpid();
    if crate::sys::process::gettid() != pid
        && let Some(ns) = ns
    {
        let _ = cancel_sleeps_of(ns.arena(), pid);
    }
    frozen
}

/// Whether the calling process has a record in `ns` (undo entries or
/// attachments a new program image must take over at once: the exec
/// family marks the new image's environment so that it does, see the C
/// ABI's `ffi/exec.rs`). False in a child that shares its parent's memory
/// (vfork): it has no record of its own before its exec.
pub fn holds_record(ns: &Namespace) -> bool {
    if !gate::owns_memory() {
        return false;
    }
    let pid = crate::sys::process::getpid();
    let start = crate::lock::own_start();
    crate::lock::with_limit(EXIT_LOCKS, || crate::proc::find(ns.arena(), pid, start))
        .is_ok_and(|r| r.is_some())
}

/// Whether the calling thread runs in its own process's memory (not a
/// vfork child's, borrowed from its parent): only then may it finish the
/// process's record at an `_exit`.
pub fn owns_memory() -> bool {
    gate::owns_memory()
}

/// The execve announced by [`before_exec`] failed: the process goes on.
pub fn exec_failed(frozen: bool) {
    if frozen {
        gate::thaw();
    }
}

/// Takes every queued wait record of thread `tid` of this process off its
/// queue (semaphore sets and message queues), as [`wait::cancel`] does.
fn cancel_sleeps_of(a: &Session, tid: i32) -> Result<(), Errno> {
    let pid = crate::sys::process::getpid();
    let mine = |w: &crate::wait::Waiter| {
        w.pid.load(Relaxed) == pid && (w.who.load(Relaxed) & TID_MASK) as i32 == tid
    };
    for idx in Bitmap::of(a, SemKind::MECH).iter() {
        let Ok(s) = used_slot::<SemKind>(a, idx) else {
            continue;
        };
        let _g = locked!(lock_object::<SemKind>(a, s));
        for off in crate::wait::snapshot(a, &s.queue) {
            if crate::wait::at(a, off).is_ok_and(mine) {
                crate::wait::cancel(a, &s.queue, off)?;
            }
        }
    }
    for idx in Bitmap::of(a, MsgKind::MECH).iter() {
        let Ok(s) = used_slot::<MsgKind>(a, idx) else {
            continue;
        };
        let _g = locked!(lock_object::<MsgKind>(a, s));
        for off in crate::wait::snapshot(a, &s.waiters) {
            if crate::wait::at(a, off).is_ok_and(mine) {
                crate::wait::cancel(a, &s.waiters, off)?;
            }
        }
    }
    Ok(())
}
