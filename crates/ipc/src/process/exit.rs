//! Finishing a record: one finisher at a time ([`claim`]), each undo
//! entry applied (`exit_sem`), then each attachment dropped (`exit_shm`),
//! the record freed once nothing is left on it.

use crate::errno::Errno;
use crate::lock;
use crate::proc::{LIVE, Proc, RELEASING, UNBORN, lock, record, release};
use crate::session::Session;
use core::sync::atomic::Ordering::Relaxed;

/// What [`finish`] does to a record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Finish {
    /// The process lives on (a `Namespace` dropped): undo entries applied,
    /// attachments kept while mapped; the record stays if it has any.
    Undo,
    /// A new program image of the process (execve): the attachments went
    /// with the old address space; undo entries and record stay.
    Exec,
    /// The process is ending (its last act in ipcns): undo entries
    /// applied, attachments dropped, the record freed.
    Exit,
    /// The process is gone: as `Exit`, by someone else.
    Gone,
}

/// Claims record `idx` for finishing when `ok` accepts it: no live thread
/// may be finishing it already (a finisher that died is replaced: each step
/// of a finish can be made again). The claim is the caller's identity in
/// `spare[2]`. Whether the caller has it. Procs lock taken and released.
fn claim(a: &Session, idx: u32, ok: &impl Fn(&Proc) -> bool) -> Result<bool, Errno> {
    let me = lock::my_identity();
    let _g = lock(a)?;
    let r = record(a, idx)?;
    if !ok(r) {
        return Ok(false);
    }
    let by = r.spare[2].load(Relaxed);
    if by != 0 && by != me && lock::identity_alive(by) {
        return Ok(false);
    }
    // A supervisor making calls for the process (other than the caller's
    // own call, if the caller is that supervisor's thread): left to it.
    if let Some((holder, n)) = crate::proc::busy(r) {
        let own = u64::from(crate::acting::marked() == Some(idx));
        if n > own && crate::sys::process::kill(holder, 0) != Err(Errno::ESRCH) {
            return Ok(false);
        }
    }
    r.spare[2].store(me, Relaxed);
    Ok(true)
}

/// How long a finisher of a dead process's record waits for the
/// supervisor's calls made for it to end (`proc::busy`): a call asleep
/// for a caller killed meanwhile ends as soon as the supervisor sees the
/// death (its pidfd), within microseconds; the kernel's own sleeper
/// leaves the queue as its task dies, before its parent can see it gone.
const UNBUSY_NS: u64 = 20_000_000;

/// Waits (up to [`UNBUSY_NS`]) until no supervisor's call is being made
/// for record `idx`'s process and no other thread is finishing it (its
/// process is dead: both end soon). Takes and releases the procs lock.
fn wait_unbusy(a: &Session, idx: u32) -> Result<(), Errno> {
    let until = crate::sys::time::monotonic_ns().saturating_add(UNBUSY_NS);
    loop {
        let (busy, by) = {
            let _g = lock(a)?;
            let r = record(a, idx)?;
            (crate::proc::busy(r), r.spare[2].load(Relaxed))
        };
        if crate::sys::time::monotonic_ns() >= until {
            return Ok(());
        }
        let own = u64::from(crate::acting::marked() == Some(idx));
        let serving = busy.is_some_and(|(holder, n)| {
            n > own && crate::sys::process::kill(holder, 0) != Err(Errno::ESRCH)
        });
        // Another finisher at it (the supervisor's, at the end of a call
        // whose caller died): what the reader reads next must see it done.
        let finishing = by != 0 && by != lock::my_identity() && lock::identity_alive(by);
        if !(serving || finishing) {
            return Ok(());
        }
        std::thread::sleep(core::time::Duration::from_micros(50));
    }
}

/// Record `idx` if the caller still has it claimed. Procs lock held.
fn claimed<'a>(a: &'a Session, idx: u32, ok: &impl Fn(&Proc) -> bool) -> Result<&'a Proc, Errno> {
    let r = record(a, idx)?;
    if ok(r) && r.spare[2].load(Relaxed) == lock::my_identity() {
        Ok(r)
    } else {
        // Taken over: the caller was thought dead.
        Err(Errno::EAGAIN)
    }
}

/// Finishes record `idx` of process `pid` (started at `start`, if given)
/// as `what` says: each undo entry applied (as `exit_sem`), then, unless
/// the process lives on with its mappings, each attachment dropped
/// (`exit_shm`); the record freed once nothing is left on it. Whether the
/// caller did it (false: the record is gone, another process's, or being
/// finished by another live thread).
///
/// One finisher at a time ([`claim`]). Entries are taken one at a time from
/// the head of their list under the procs lock, applied (idempotent: an
/// applied entry is marked so under its set's lock, through the set's
/// journal), then unlinked and freed, so no finisher ever follows an entry
/// freed meanwhile, and a finisher killed anywhere leaves a record the
/// next one finishes exactly (at worst an entry unlinked and not yet freed
/// leaks).
pub fn finish(
    a: &Session,
    idx: u32,
    pid: i32,
    start: Option<u64>,
    what: Finish,
) -> Result<bool, Errno> {
    let ok = move |r: &Proc| {
        r.state.load(Relaxed) == LIVE
            && r.pid.load(Relaxed) == pid
            && start.is_none_or(|s| r.start.load(Relaxed) == s)
    };
    if what == Finish::Gone {
        wait_unbusy(a, idx)?;
    }
    if !claim(a, idx, &ok)? {
        return Ok(false);
    }
    crate::fault::step();
    let mut done = Ok(());
    if what != Finish::Exec {
        done = apply_undos(a, idx, pid, &ok);
    }
    if done.is_ok() && what != Finish::Undo {
        done = drop_attachments(a, idx, pid, &ok);
    }
    // However it ended, the claim goes (an error leaves the rest to the
    // next finisher).
    let _g = lock(a)?;
    let Ok(r) = claimed(a, idx, &ok) else {
        return done.map(|()| true);
    };
    crate::fault::step();
    r.spare[2].store(0, Relaxed);
    if done.is_ok()
        && what != Finish::Exec
        && r.undos.load(Relaxed) == 0
        && r.attaches.load(Relaxed) == 0
        // Its death page goes with it only if no list of a live thread
        // holds the entry (`death.rs`): else the record stays, empty, for
        // the reapers to free once the process is gone.
        && (what == Finish::Gone || super::death::disarm(a, r))
    {
        super::death::free_page(a, r);
        release(a, r);
    }
    done.map(|()| true)
}

/// Applies and frees each undo entry of claimed record `idx`.
fn apply_undos(a: &Session, idx: u32, pid: i32, ok: &impl Fn(&Proc) -> bool) -> Result<(), Errno> {
    use crate::sem::undo;
    {
        let _g = lock(a)?;
        undo::cut_proc_cycle(a, claimed(a, idx, ok)?);
    }
    for _ in 0..crate::chain::MAX_LINKS {
        let first = {
            let _g = lock(a)?;
            claimed(a, idx, ok)?.undos.load(Relaxed)
        };
        if first == 0 {
            break;
        }
        match crate::sem::exit::apply_at_exit(a, first, pid) {
            // An entry that is no entry cannot be applied: dropped.
            Ok(()) | Err(Errno::EUCLEAN) => {}
            Err(e) => return Err(e),
        }
        crate::fault::step();
        let _g = lock(a)?;
        let r = claimed(a, idx, ok)?;
        if undo::head(a, first).is_err() {
            // The rest of the list cannot be followed (leaked).
            if r.undos.load(Relaxed) == first {
                r.undos.store(0, Relaxed);
            }
        } else if undo::unlink_from_proc(a, r, first) {
            crate::fault::step();
            undo::free(a, first);
        }
    }
    Ok(())
}

/// Drops each attachment of claimed record `idx` (`exit_shm`: the
/// mappings go with the address space).
fn drop_attachments(
    a: &Session,
    idx: u32,
    pid: i32,
    ok: &impl Fn(&Proc) -> bool,
) -> Result<(), Errno> {
    {
        let _g = lock(a)?;
        crate::shm::attach::cut_cycle(a, claimed(a, idx, ok)?);
    }
    for _ in 0..crate::chain::MAX_LINKS {
        {
            let _g = lock(a)?;
            claimed(a, idx, ok)?;
        }
        if !crate::shm::attach::drop_first(a, idx, pid)? {
            break;
        }
    }
    Ok(())
}

/// Drops unborn record `idx` made with `nonce` (the fork failed, or its
/// child never claimed it): its attachments uncounted, the record freed.
/// A dropper killed midway leaves it RELEASING for the next reaper; two
/// droppers never work on it at once ([`claim`]).
pub fn release_unborn(a: &Session, idx: u32, nonce: u64) -> Result<(), Errno> {
    let pid = {
        let _g = lock(a)?;
        let r = record(a, idx)?;
        let state = r.state.load(Relaxed);
        if r.spare[0].load(Relaxed) != nonce || !(state == UNBORN || state == RELEASING) {
            return Ok(());
        }
        r.state.store(RELEASING, Relaxed);
        r.pid.load(Relaxed)
    };
    let ok =
        move |r: &Proc| r.state.load(Relaxed) == RELEASING && r.spare[0].load(Relaxed) == nonce;
    if !claim(a, idx, &ok)? {
        return Ok(());
    }
    let done = drop_attachments(a, idx, pid, &ok);
    let _g = lock(a)?;
    if let Ok(r) = claimed(a, idx, &ok) {
        r.spare[2].store(0, Relaxed);
        if done.is_ok() && r.attaches.load(Relaxed) == 0 {
            release(a, r);
        }
    }
    done
}

/// A process killed at every step of the SEM_UNDO path in turn (take,
/// the undo entry made and changed, release, exit's application, the
/// record freed), and a reaper killed at every step of finishing a dead
/// process's record: each time, once whoever comes next has cleaned up,
/// the semaphore is exactly where the kernel would leave it, the
/// namespace checks clean, and at most one heap block (the one being
/// moved) is lost.
#[cfg(test)]
mod deaths {
    #![allow(unsafe_code)]

    use crate::abi::{GETVAL, IPC_CREAT, SEM_UNDO, SETVAL, sembuf};
    use crate::namespace::Namespace;
    use crate::sem::SemArg;
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

    fn op(v: i16) -> sembuf {
        sembuf {
            sem_num: 0,
            sem_op: v,
            sem_flg: SEM_UNDO,
        }
    }

    /// A word of memory shared with forked children.
    fn shared_word() -> &'static AtomicU64 {
        // SAFETY: a fresh anonymous shared mapping of one page, never
        // unmapped; an AtomicU64 at its start is aligned and valid.
        unsafe {
            let p = libc::mmap(
                core::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            &*(p as *const AtomicU64)
        }
    }

    /// Runs `f` in a forked child killed at its `die_at`-th step (0:
    /// never); the steps it made, whether it was killed.
    fn in_child(die_at: u64, f: impl FnOnce()) -> (u64, bool) {
        let steps = shared_word();
        steps.store(0, Relaxed);
        // SAFETY: the child runs `f` and `_exit`s; nothing of the parent's
        // other threads is used.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            crate::fault::die_at(die_at);
            f();
            steps.store(crate::fault::steps(), Relaxed);
            // SAFETY: ends the child without running the parent's exit
            // handlers.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our own child, a status word of ours.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        (steps.load(Relaxed), libc::WIFSIGNALED(status))
    }

    struct Scratch(std::path::PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = Namespace::remove_at(&self.0);
        }
    }

    fn fresh(tag: &str) -> (Scratch, Namespace, i32, u64) {
        let path = std::env::temp_dir().join(format!(
            "ipcns-deaths-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        let ns = Namespace::create_at(&path, Default::default()).unwrap();
        let me = ns.cred().unwrap();
        let id = ns.semget(&me, 0, 1, IPC_CREAT | 0o600).unwrap();
        ns.semctl(&me, id, 0, SETVAL, SemArg::Val(1)).unwrap();
        // The process table exists (this process's record), as it does
        // once anyone used it: the baseline of the heap.
        crate::process::me(ns.arena()).unwrap();
        let base = ns.heap_in_use();
        (Scratch(path), ns, id, base)
    }

    /// What is left after a death and the cleanup that follows it.
    fn verdict(ns: &Namespace, id: i32, base: u64, what: &str) {
        let me = ns.cred().unwrap();
        ns.reap_exited().unwrap();
        let val = ns.semctl(&me, id, 0, GETVAL, SemArg::None);
        assert_eq!(val, Ok(1), "{what}: the semaphore");
        let (_, problems) = ns.problems();
        assert!(problems.is_empty(), "{what}: {problems:?}");
        // At most one block lost (a death between its allocation and its
        // link): an undo entry, or the death page (`death.rs`).
        let leaked = ns.heap_in_use().saturating_sub(base);
        assert!(
            leaked <= 64 || leaked == 4096,
            "{what}: {leaked} heap bytes left"
        );
    }

    #[test]
    fn a_semundo_user_killed_at_every_step() {
        let user = |path: &std::path::Path, id: i32| {
            let ns = Namespace::open_at(path).unwrap();
            let me = ns.cred().unwrap();
            for v in [-1, 1, -1] {
                let _ = ns.semop(&me, id, &[op(v)]);
            }
            let _ = crate::process::exit_ending(ns.arena());
        };
        let (s, ns, id, base) = fresh("user");
        let (n, killed) = in_child(0, || user(&s.0, id));
        assert!(!killed && n > 10, "{n} steps");
        verdict(&ns, id, base, "no death");
        drop(ns);
        for k in 1..=n {
            let (s, ns, id, base) = fresh("user");
            let (_, killed) = in_child(k, || user(&s.0, id));
            assert!(killed, "step {k} of {n} was reached");
            verdict(&ns, id, base, &format!("killed at step {k} of {n}"));
        }
        println!("a SEM_UNDO user killed at each of its {n} steps: exact every time");
    }

    #[test]
    fn a_reaper_killed_at_every_step() {
        let holder = |path: &std::path::Path, id: i32| {
            let ns = Namespace::open_at(path).unwrap();
            let me = ns.cred().unwrap();
            let _ = ns.semop(&me, id, &[op(-1)]);
            // Gone without exiting through ipcns.
            let _ = crate::sys::process::kill(crate::sys::process::getpid(), libc::SIGKILL);
        };
        let reaper = |path: &std::path::Path| {
            let ns = Namespace::open_at(path).unwrap();
            let _ = ns.reap_exited();
            core::mem::forget(ns);
        };
        let (s, ns, id, base) = fresh("reaper");
        in_child(0, || holder(&s.0, id));
        let (n, killed) = in_child(0, || reaper(&s.0));
        assert!(!killed && n > 5, "{n} steps");
        verdict(&ns, id, base, "no death");
        drop(ns);
        for k in 1..=n {
            let (s, ns, id, base) = fresh("reaper");
            in_child(0, || holder(&s.0, id));
            let (_, killed) = in_child(k, || reaper(&s.0));
            assert!(killed, "step {k} of {n} was reached");
            verdict(&ns, id, base, &format!("reaper killed at step {k} of {n}"));
        }
        println!("a reaper killed at each of its {n} steps: exact every time");
    }
}
