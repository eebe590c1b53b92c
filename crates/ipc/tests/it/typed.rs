//! The typed handles (`ipcns::SemSet`, `MsgQueue`, `ShmSegment`) and the
//! one error type: values after operations, a message's round trip, a
//! segment's bytes through two attachments, and the kernel's errnos
//! (EEXIST, ENOENT, EINVAL, EIDRM, EAGAIN, ENOMSG, E2BIG) through
//! `Error::errno`.

use crate::support::{self, TestNs};
use ipcns::abi::{IPC_CREAT, SHM_DEST};
use ipcns::{
    Errno, Error, MsgFlags, MsgQueue, MsgType, Namespace, SemFlags, SemOp, SemSet, ShmSegment,
};
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The errno of a result that must be an error.
fn errno<T: std::fmt::Debug>(r: ipcns::Result<T>) -> Option<Errno> {
    r.expect_err("an error").errno()
}

/// Polls `f` until it holds (a sleeper seen asleep), for at most 10 s.
fn until(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_set_holds_the_values_its_operations_leave() {
    let t = TestNs::new("typed-sem");
    let set = SemSet::create(&t.ns, 0x5e7, 3, 0o640).unwrap();
    assert_eq!(set.values().unwrap(), [0, 0, 0]);
    set.ops(&[SemOp::new(0, 5), SemOp::post(1), SemOp::new(2, 7)])
        .unwrap();
    set.op(SemOp::wait(0)).unwrap();
    assert_eq!(set.values().unwrap(), [4, 1, 7]);
    // All or nothing: the second operation cannot proceed, so neither is
    // done.
    let both = [SemOp::new(0, -1), SemOp::new(1, -2).nowait()];
    assert_eq!(errno(set.ops(&both)), Some(Errno::EAGAIN));
    assert_eq!(set.values().unwrap(), [4, 1, 7]);
    set.set(1, 9).unwrap();
    assert_eq!(set.get(1).unwrap(), 9);
    set.set_values(&[1, 2, 3]).unwrap();
    assert_eq!(set.values().unwrap(), [1, 2, 3]);
    // A zero-waiter on a zero value proceeds at once.
    set.set(2, 0).unwrap();
    set.op(SemOp::zero(2)).unwrap();
    assert_eq!(set.last_pid(2).unwrap(), std::process::id() as i32);

    let st = set.stat().unwrap();
    assert_eq!((st.perm.key, st.perm.mode, st.nsems), (0x5e7, 0o640, 3));
    assert!(st.otime > 0 && st.ctime > 0);
    assert_eq!(SemSet::open(&t.ns, 0x5e7).unwrap().id(), set.id());
    assert_eq!(
        SemSet::open_or_create(&t.ns, 0x5e7, 2, 0o600).unwrap().id(),
        set.id()
    );
    // More semaphores than the set has: "nsems is greater than the
    // number of semaphores in the set" (semget(2)).
    assert_eq!(
        errno(SemSet::open_or_create(&t.ns, 0x5e7, 4, 0o600)),
        Some(Errno::EINVAL)
    );
    assert_eq!(errno(set.get(3)), Some(Errno::EINVAL));
    assert_eq!(errno(set.op(SemOp::post(3))), Some(Errno::EFBIG));
    assert_eq!(errno(set.set(0, 32768)), Some(Errno::ERANGE));
}

#[test]
fn sets_are_made_once_found_by_key_and_gone_when_removed() {
    let t = TestNs::new("typed-sem-keys");
    let set = SemSet::create(&t.ns, 0x5e8, 1, 0o600).unwrap();
    let e = SemSet::create(&t.ns, 0x5e8, 1, 0o600).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EEXIST));
    assert!(e.to_string().starts_with("EEXIST"), "{e}");
    assert_eq!(errno(SemSet::open(&t.ns, 0x5e9)), Some(Errno::ENOENT));
    // Private sets are never found by key, and are distinct.
    let p = SemSet::private(&t.ns, 1, 0o600).unwrap();
    assert_ne!(p.id(), SemSet::private(&t.ns, 1, 0o600).unwrap().id());
    assert_eq!(p.stat().unwrap().perm.key, 0);

    let other = SemSet::from_id(&t.ns, set.id());
    set.remove().unwrap();
    // The id is gone (EINVAL, ipc_obtain_object_check); the key free.
    assert_eq!(errno(other.get(0)), Some(Errno::EINVAL));
    assert_eq!(errno(other.op(SemOp::post(0))), Some(Errno::EINVAL));
    assert_eq!(errno(SemSet::open(&t.ns, 0x5e8)), Some(Errno::ENOENT));
    assert_eq!(errno(other.remove()), Some(Errno::EINVAL));
}

#[test]
fn waiters_wake_with_the_operation_done_or_eidrm() {
    let t = TestNs::new("typed-sem-wait");
    let set = SemSet::private(&t.ns, 1, 0o600).unwrap();
    std::thread::scope(|sc| {
        let w = sc.spawn(|| set.op(SemOp::wait(0)));
        until("a waiter", || set.waiting_for_increase(0).unwrap() == 1);
        set.op(SemOp::new(0, 3)).unwrap();
        w.join().unwrap().unwrap();
        assert_eq!(set.get(0).unwrap(), 2);

        let z = sc.spawn(|| set.op(SemOp::zero(0)));
        until("a zero-waiter", || set.waiting_for_zero(0).unwrap() == 1);
        set.set(0, 0).unwrap();
        z.join().unwrap().unwrap();

        // Removal ends a wait with EIDRM.
        let w = sc.spawn(|| set.op(SemOp::wait(0)).map_err(|e| e.errno()));
        until("a waiter", || set.waiting_for_increase(0).unwrap() == 1);
        set.remove().unwrap();
        assert_eq!(w.join().unwrap(), Err(Some(Errno::EIDRM)));
    });
}

#[test]
fn a_timed_wait_ends_with_eagain() {
    let t = TestNs::new("typed-sem-timeout");
    let set = SemSet::private(&t.ns, 1, 0o600).unwrap();
    let start = Instant::now();
    let r = set.ops_timeout(&[SemOp::wait(0)], Duration::from_millis(50));
    assert_eq!(errno(r), Some(Errno::EAGAIN));
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert_eq!(set.waiting_for_increase(0).unwrap(), 0);
    // One that can proceed does, timeout or not.
    set.op(SemOp::post(0)).unwrap();
    set.ops_timeout(&[SemOp::wait(0)], Duration::ZERO).unwrap();
    assert_eq!(set.get(0).unwrap(), 0);
    // More operations than fit inline.
    let many: Vec<SemOp> = (0..20).map(|_| SemOp::post(0)).collect();
    set.ops_timeout(&many, Duration::from_secs(1)).unwrap();
    assert_eq!(set.get(0).unwrap(), 20);
}

#[test]
fn undo_is_applied_when_the_process_leaves() {
    let t = TestNs::new("typed-sem-undo");
    let set = SemSet::private(&t.ns, 2, 0o600).unwrap();
    let (path, id) = (t.path().to_path_buf(), set.id());
    let code = support::fork_run(move || {
        let Ok(ns) = Namespace::open_at(&path) else {
            return 2;
        };
        let set = SemSet::from_id(&ns, id);
        let ops = [
            SemOp::new(0, 2).with(SemFlags::UNDO),
            SemOp::new(1, 4).with(SemFlags::NONE),
        ];
        if set.ops(&ops).is_err() {
            return 3;
        }
        // The credentials are this process's, not its parent's.
        if set.last_pid(0).ok() != Some(std::process::id() as i32) {
            return 4;
        }
        if set.values().ok() != Some(vec![2, 4]) {
            return 5;
        }
        0
        // `ns` dropped: the process's exit from it undoes the +2.
    });
    assert_eq!(code, 0);
    assert_eq!(set.values().unwrap(), [0, 4]);
    assert!(SemFlags::UNDO.contains(SemFlags::UNDO));
    assert!(!SemFlags::UNDO.contains(SemFlags::UNDO | SemFlags::NOWAIT));
}

#[test]
fn a_message_goes_round_by_type() {
    let t = TestNs::new("typed-msg");
    let q = MsgQueue::create(&t.ns, 0x3e5, 0o600).unwrap();
    q.send(3, b"three", MsgFlags::NONE).unwrap();
    q.send(1, b"one", MsgFlags::NONE).unwrap();
    q.send(2, b"", MsgFlags::NOWAIT).unwrap();
    q.send(1, &[7u8; 300], MsgFlags::NONE).unwrap();
    let st = q.stat().unwrap();
    assert_eq!((st.qnum, st.cbytes), (4, 5 + 3 + 300));
    assert_eq!(st.lspid, std::process::id() as i32);
    assert_eq!(st.perm.key, 0x3e5);

    let m = q.receive(MsgType::Exactly(2), MsgFlags::NONE).unwrap();
    assert_eq!((m.mtype, m.text), (2, vec![]));
    let m = q.receive(MsgType::Except(1), MsgFlags::NONE).unwrap();
    assert_eq!((m.mtype, &m.text[..]), (3, &b"three"[..]));
    // Too long for the buffer: E2BIG and the message stays; cut with
    // MSG_NOERROR.
    let mut small = [0u8; 2];
    assert_eq!(
        errno(q.receive_into(MsgType::Any, &mut small, MsgFlags::NONE)),
        Some(Errno::E2BIG)
    );
    let got = q.receive_into(MsgType::Any, &mut small, MsgFlags::NOERROR);
    assert_eq!(got.unwrap(), (1, 2));
    assert_eq!(&small, b"on");
    let m = q.receive(MsgType::AtMost(1), MsgFlags::NOWAIT).unwrap();
    assert_eq!((m.mtype, m.text), (1, vec![7u8; 300]));
    // Empty: ENOMSG without waiting (msgop(2): "IPC_NOWAIT was specified
    // in msgflg and no message of the requested type existed").
    assert_eq!(
        errno(q.receive(MsgType::Any, MsgFlags::NOWAIT)),
        Some(Errno::ENOMSG)
    );
    let st = q.stat().unwrap();
    assert_eq!((st.qnum, st.cbytes), (0, 0));
    assert_eq!(st.lrpid, std::process::id() as i32);

    // Types below 1 select nothing: EINVAL, as msgsnd's for such a type.
    assert_eq!(
        errno(q.receive(MsgType::Exactly(0), MsgFlags::NOWAIT)),
        Some(Errno::EINVAL)
    );
    assert_eq!(
        errno(q.receive(MsgType::AtMost(-1), MsgFlags::NOWAIT)),
        Some(Errno::EINVAL)
    );
    assert_eq!(errno(q.send(0, b"x", MsgFlags::NONE)), Some(Errno::EINVAL));
    assert_eq!(
        errno(MsgQueue::create(&t.ns, 0x3e5, 0o600)),
        Some(Errno::EEXIST)
    );
    assert_eq!(errno(MsgQueue::open(&t.ns, 0x3e6)), Some(Errno::ENOENT));
    assert_eq!(MsgQueue::open(&t.ns, 0x3e5).unwrap().id(), q.id());
}

#[test]
fn a_full_queue_refuses_a_send_that_may_not_wait() {
    let t = TestNs::new("typed-msg-full");
    let q = MsgQueue::private(&t.ns, 0o600).unwrap();
    let qbytes = q.stat().unwrap().qbytes;
    assert_eq!(qbytes, 16384);
    // MSGMAX (8192) a message: two fill MSGMNB.
    let big = vec![1u8; 8192];
    q.send(1, &big, MsgFlags::NOWAIT).unwrap();
    q.send(1, &big, MsgFlags::NOWAIT).unwrap();
    assert_eq!(
        errno(q.send(1, b"x", MsgFlags::NOWAIT)),
        Some(Errno::EAGAIN)
    );
    // A sender that may wait does, until a receive makes room.
    std::thread::scope(|sc| {
        let s = asleep(sc, || q.send(2, b"late", MsgFlags::NONE));
        assert_eq!(q.stat().unwrap().qnum, 2);
        assert_eq!(q.receive(MsgType::Any, MsgFlags::NONE).unwrap().text, big);
        s.join().unwrap().unwrap();
    });
    let m = q.receive(MsgType::Exactly(2), MsgFlags::NOWAIT).unwrap();
    assert_eq!(m.text, b"late");
}

/// Runs `f` on a thread of the scope and returns once that thread sleeps
/// on a futex (its wait channel in /proc), as a blocked call does.
fn asleep<'s, T: Send + 's>(
    sc: &'s std::thread::Scope<'s, '_>,
    f: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, T> {
    let tid = std::sync::Arc::new(AtomicI32::new(0));
    let mine = tid.clone();
    let h = sc.spawn(move || {
        mine.store(ipcns::sys::process::gettid(), Relaxed);
        f()
    });
    until("a sleeper", || {
        let t = tid.load(Relaxed);
        t != 0
            && std::fs::read_to_string(format!("/proc/self/task/{t}/wchan"))
                .is_ok_and(|w| w.contains("futex"))
    });
    h
}

#[test]
fn a_waiting_receiver_gets_the_message_or_eidrm() {
    let t = TestNs::new("typed-msg-wait");
    let q = MsgQueue::private(&t.ns, 0o600).unwrap();
    std::thread::scope(|sc| {
        let r = asleep(sc, || q.receive(MsgType::Exactly(5), MsgFlags::NONE));
        q.send(4, b"not this", MsgFlags::NONE).unwrap();
        q.send(5, b"this", MsgFlags::NONE).unwrap();
        let m = r.join().unwrap().unwrap();
        assert_eq!((m.mtype, m.text), (5, b"this".to_vec()));
        assert_eq!(q.stat().unwrap().qnum, 1);

        let r = asleep(sc, || q.receive(MsgType::Exactly(5), MsgFlags::NONE));
        q.remove().unwrap();
        assert_eq!(r.join().unwrap().unwrap_err().errno(), Some(Errno::EIDRM));
    });
}

/// The segment's nattch once it is `want`, or what it is after 5 s: a
/// child another test of this process forks meanwhile inherits this
/// process's attachments, and counts them (as the kernel counts a fork's
/// copies) until it is gone and reaped.
fn settled_nattch(seg: &ShmSegment<'_>, want: u64) -> u64 {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = seg.stat().unwrap().nattch;
        if n == want || std::time::Instant::now() > until {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_segments_bytes_are_seen_through_every_attachment() {
    let t = TestNs::new("typed-shm");
    let seg = ShmSegment::create(&t.ns, 0x5a, 10_000, 0o600).unwrap();
    let a = seg.attach().unwrap();
    let b = seg.attach().unwrap();
    assert_ne!(a.as_ptr(), b.as_ptr());
    assert_eq!((a.len(), b.len()), (10_000, 10_000));
    assert_eq!(settled_nattch(&seg, 2), 2);

    a.write(9_990, b"0123456789").unwrap();
    let mut seen = [0u8; 10];
    b.read(9_990, &mut seen).unwrap();
    assert_eq!(&seen, b"0123456789");
    // Through the atomics, both ways.
    let (ab, bb) = (a.bytes().unwrap(), b.bytes().unwrap());
    bb[0].store(42, Relaxed);
    assert_eq!(ab[0].load(Relaxed), 42);
    // Past the end: EFAULT, nothing written.
    assert_eq!(errno(a.write(9_995, b"0123456789")), Some(Errno::EFAULT));
    assert_eq!(errno(a.read(usize::MAX, &mut seen)), Some(Errno::EFAULT));

    // Read-only: no atomics to store through, writes refused, reads see
    // the bytes.
    let r = seg.attach_read_only().unwrap();
    assert!(r.bytes().is_none() && !r.is_writable());
    assert_eq!(errno(r.write(0, b"x")), Some(Errno::EACCES));
    let mut first = [0u8; 1];
    r.read(0, &mut first).unwrap();
    assert_eq!(first, [42]);
    assert_eq!(settled_nattch(&seg, 3), 3);
    drop(r);
    b.detach().unwrap();
    let st = seg.stat().unwrap();
    assert_eq!((st.nattch, st.size, st.perm.key), (1, 10_000, 0x5a));
    assert_eq!(st.lpid, std::process::id() as i32);
    assert_eq!(st.cpid, std::process::id() as i32);
}

#[test]
fn a_removed_segment_lives_until_its_last_detach() {
    let t = TestNs::new("typed-shm-rm");
    let seg = ShmSegment::create(&t.ns, 0x5b, 4096, 0o600).unwrap();
    assert_eq!(
        errno(ShmSegment::create(&t.ns, 0x5b, 4096, 0o600)),
        Some(Errno::EEXIST)
    );
    assert_eq!(errno(ShmSegment::open(&t.ns, 0x5c)), Some(Errno::ENOENT));
    assert_eq!(ShmSegment::open(&t.ns, 0x5b).unwrap().id(), seg.id());
    // Bigger than the segment found (shmget(2): "a segment for the given
    // key exists, but size is greater than the size of that segment").
    assert_eq!(
        errno(ShmSegment::open_or_create(&t.ns, 0x5b, 8192, 0o600)),
        Some(Errno::EINVAL)
    );
    let a = seg.attach().unwrap();
    a.write(0, b"kept").unwrap();
    let same = ShmSegment::from_id(&t.ns, seg.id());
    seg.remove().unwrap();
    // The key is free at once; the id lives while attached, marked.
    assert_eq!(errno(ShmSegment::open(&t.ns, 0x5b)), Some(Errno::ENOENT));
    let st = same.stat().unwrap();
    assert_eq!((st.nattch, st.perm.mode & SHM_DEST), (1, SHM_DEST));
    let mut seen = [0u8; 4];
    a.read(0, &mut seen).unwrap();
    assert_eq!(&seen, b"kept");
    drop(a);
    // The last detach destroyed it.
    assert_eq!(errno(same.stat()), Some(Errno::EINVAL));
    assert_eq!(errno(same.attach()), Some(Errno::EINVAL));
}

/// The handles check the process as it is now: after a drop to another
/// user (and `creds::refresh`), a set of root's with mode 0600 is EACCES
/// to read and EPERM to remove; a queue with mode 0622 takes its
/// messages.
#[test]
fn handles_check_the_caller_as_it_is_now() {
    if !support::kernel_or_skip("handles_check_the_caller_as_it_is_now") {
        return;
    }
    let t = TestNs::new("typed-perm");
    let set = SemSet::create(&t.ns, 0x9e7, 1, 0o600).unwrap();
    let q = MsgQueue::private(&t.ns, 0o622).unwrap();
    let code = support::fork_run(|| {
        if support::drop_to(1000, 1000).is_err() {
            return 1;
        }
        ipcns::creds::refresh();
        // semget with no permission asked finds it (ipcperms of 0).
        let Ok(found) = SemSet::open(&t.ns, 0x9e7) else {
            return 2;
        };
        if errno(found.get(0)) != Some(Errno::EACCES)
            || errno(found.op(SemOp::post(0))) != Some(Errno::EACCES)
            || errno(found.remove()) != Some(Errno::EPERM)
        {
            return 3;
        }
        // Write permission is enough to send, not to look.
        if q.send(1, b"from 1000", MsgFlags::NOWAIT).is_err() {
            return 4;
        }
        if errno(q.stat()) != Some(Errno::EACCES) {
            return 5;
        }
        0
    });
    assert_eq!(code, 0);
    assert_eq!(set.get(0).unwrap(), 0);
    let m = q.receive(MsgType::Any, MsgFlags::NOWAIT).unwrap();
    assert_eq!(m.text, b"from 1000");
}

/// `?` mixes the arena's errors, the C-shaped calls' errnos and the
/// handles' in one function returning `ipcns::Result`, or a boxed error.
#[test]
fn one_error_type_for_every_call() {
    fn mixed(t: &TestNs) -> ipcns::Result<i32> {
        let me = t.ns.cred()?;
        let id = t.ns.semget(&me, 0x77, 1, IPC_CREAT | 0o600)?;
        let set = SemSet::from_id(&t.ns, id);
        set.op(SemOp::new(0, 3))?;
        let again = Namespace::create_at(t.path(), Default::default());
        Ok(i32::from(set.get(0)?) + i32::from(again.is_err()))
    }
    fn boxed(t: &TestNs) -> Result<(), Box<dyn std::error::Error>> {
        Namespace::create_at(t.path(), Default::default())?;
        Ok(())
    }
    let t = TestNs::new("typed-error");
    assert_eq!(mixed(&t).unwrap(), 4);
    let e = boxed(&t).unwrap_err();
    assert!(e.to_string().contains("exists"), "{e}");
    let Err(e) = Namespace::create_at(t.path(), Default::default()) else {
        panic!("a namespace made twice");
    };
    let e = Error::from(e);
    assert_eq!(e.errno(), Some(Errno::EEXIST));
    let e: Error = Errno::EIDRM.into();
    assert_eq!(format!("{e:?}"), "Errno(EIDRM(43))");
}

/// The C-shaped `shmdt` cannot detach a guard's mapping from under it
/// (its bytes may be borrowed): EINVAL while the guard lives, and the
/// guard's own detach then works.
#[test]
fn a_guarded_attachment_is_detached_only_by_its_guard() {
    let t = TestNs::new("typed-held");
    let me = t.ns.cred().unwrap();
    let seg = ShmSegment::create(&t.ns, 0, 4096, 0o600).unwrap();
    let a = seg.attach().unwrap();
    let addr = a.as_ptr() as usize;
    let bytes = a.bytes().expect("writable");
    assert_eq!(t.ns.shmdt(&me, addr), Err(Errno::EINVAL));
    bytes[0].store(7, Relaxed);
    assert_eq!(bytes[0].load(Relaxed), 7);
    assert_eq!(settled_nattch(&seg, 1), 1);
    a.detach().unwrap();
    assert_eq!(settled_nattch(&seg, 0), 0);
    // Not held any more: an attachment made the C way at the same place
    // is the caller's to detach.
    let c = t.ns.shmat(&me, seg.id(), 0, 0).unwrap();
    assert_eq!(t.ns.shmdt(&me, c), Ok(0));
}
