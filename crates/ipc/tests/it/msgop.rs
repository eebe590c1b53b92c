//! msgsnd and msgrcv on ipcns: the checks and their order, the search
//! modes (0, > 0, < 0, MSG_EXCEPT, MSG_COPY), MSG_NOERROR and E2BIG, full
//! queues, the STAT fields and MSG_INFO totals, blocking across processes
//! (a receiver handed a message, a sender let in by a receiver), a
//! receiver with too small a buffer woken with E2BIG, IPC_SET waking
//! receivers to try again, EIDRM, EINTR under SA_RESTART, and sleepers
//! killed while queued.

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::{Cred, Errno, Namespace};
use std::time::{Duration, Instant};

fn me() -> Cred {
    Cred::root(std::process::id() as i32)
}

fn stat(ns: &Namespace, c: &Cred, id: i32) -> msqid64_ds {
    let mut ds = msqid64_ds::default();
    ns.msgctl(c, id, IPC_STAT, MsgArg::Ds(&mut ds)).unwrap();
    ds
}

fn info(ns: &Namespace, c: &Cred) -> msginfo {
    let mut i = msginfo::default();
    ns.msgctl(c, 0, MSG_INFO, MsgArg::Info(&mut i)).unwrap();
    i
}

/// Receives with IPC_NOWAIT into a buffer of `cap` bytes: (type, text).
fn recv(
    ns: &Namespace,
    c: &Cred,
    id: i32,
    cap: usize,
    typ: i64,
    flg: i32,
) -> Result<(i64, Vec<u8>), Errno> {
    let mut buf = vec![0u8; cap];
    let (t, n) = ns.msgrcv(c, id, &mut buf, typ, flg | IPC_NOWAIT)?;
    buf.truncate(n);
    Ok((t, buf))
}

/// Polls until `f` holds (at most 10 s).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The sleeping state of a process (its wait channel says futex).
fn sleeping(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("futex"))
}

#[test]
fn checks_in_linux_order() {
    let t = TestNs::new("msgop-checks");
    let root = me();
    let id = t.ns.msgget(&root, 0, IPC_CREAT | 0o600).unwrap();
    // do_msgsnd: size and msqid, then mtype, all before the lookup.
    assert_eq!(t.ns.msgsnd(&root, -1, 1, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgsnd(&root, 12345, 0, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgsnd(&root, id, 0, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgsnd(&root, id, -5, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgsnd(&root, id, 1, &[0; 8193], 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgsnd(&root, id + 1, 1, b"x", 0), Err(Errno::EINVAL));
    let user = Cred::user(1, 1000, 1000, vec![]);
    assert_eq!(t.ns.msgsnd(&user, id, 1, b"x", 0), Err(Errno::EACCES));
    // msgrcv: msqid, MSG_COPY's flags, then the lookup, then permission.
    let mut buf = [0u8; 16];
    assert_eq!(t.ns.msgrcv(&root, -1, &mut buf, 0, 0), Err(Errno::EINVAL));
    assert_eq!(
        t.ns.msgrcv(&root, 99999, &mut buf, 0, MSG_COPY),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        t.ns.msgrcv(&root, id, &mut buf, 0, MSG_COPY | MSG_EXCEPT | IPC_NOWAIT),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        t.ns.msgrcv(&root, id + 1, &mut buf, 0, IPC_NOWAIT),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        t.ns.msgrcv(&user, id, &mut buf, 0, IPC_NOWAIT),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.ns.msgrcv(&root, id, &mut buf, 0, IPC_NOWAIT),
        Err(Errno::ENOMSG)
    );
    // Write-only and read-only users.
    let wo = t.ns.msgget(&root, 0, IPC_CREAT | 0o602).unwrap();
    assert_eq!(t.ns.msgsnd(&user, wo, 1, b"x", 0), Ok(0));
    assert_eq!(
        t.ns.msgrcv(&user, wo, &mut buf, 0, IPC_NOWAIT),
        Err(Errno::EACCES)
    );
    let ro = t.ns.msgget(&root, 0, IPC_CREAT | 0o604).unwrap();
    assert_eq!(t.ns.msgsnd(&user, ro, 1, b"x", 0), Err(Errno::EACCES));
    assert_eq!(
        t.ns.msgrcv(&user, ro, &mut buf, 0, IPC_NOWAIT),
        Err(Errno::ENOMSG)
    );
    // A removed queue's id: EINVAL (not EIDRM).
    t.ns.msgctl(&root, id, IPC_RMID, MsgArg::None).unwrap();
    assert_eq!(t.ns.msgsnd(&root, id, 1, b"x", 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.msgrcv(&root, id, &mut buf, 0, 0), Err(Errno::EINVAL));
    t.ns.check().unwrap();
}

#[test]
fn types_copy_noerror_and_e2big() {
    let t = TestNs::new("msgop-types");
    let c = me();
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    for (ty, text) in [
        (5, "five"),
        (3, "three"),
        (7, "seven"),
        (3, "three again"),
        (1, "one"),
    ] {
        assert_eq!(t.ns.msgsnd(&c, id, ty, text.as_bytes(), 0), Ok(0));
    }
    let got = |r: Result<(i64, Vec<u8>), Errno>| r.map(|(t, b)| (t, String::from_utf8(b).unwrap()));
    // MSG_COPY: by position, nothing removed; past the end ENOMSG; a
    // negative position finds nothing.
    assert_eq!(
        got(recv(&t.ns, &c, id, 64, 2, MSG_COPY)),
        Ok((7, "seven".into()))
    );
    assert_eq!(
        got(recv(&t.ns, &c, id, 64, 0, MSG_COPY)),
        Ok((5, "five".into()))
    );
    assert_eq!(recv(&t.ns, &c, id, 64, 5, MSG_COPY), Err(Errno::ENOMSG));
    assert_eq!(recv(&t.ns, &c, id, 64, -1, MSG_COPY), Err(Errno::ENOMSG));
    // Too small: E2BIG; with MSG_NOERROR, MSG_COPY still refuses (copy_msg).
    assert_eq!(recv(&t.ns, &c, id, 3, 0, MSG_COPY), Err(Errno::E2BIG));
    assert_eq!(
        recv(&t.ns, &c, id, 3, 0, MSG_COPY | MSG_NOERROR),
        Err(Errno::EINVAL)
    );
    assert_eq!(stat(&t.ns, &c, id).msg_qnum, 5);
    assert_eq!(stat(&t.ns, &c, id).msg_rtime, 0);
    // Type > 0: the first of that type; MSG_EXCEPT: the first of another.
    assert_eq!(got(recv(&t.ns, &c, id, 64, 3, 0)), Ok((3, "three".into())));
    assert_eq!(
        got(recv(&t.ns, &c, id, 64, 5, MSG_EXCEPT)),
        Ok((7, "seven".into()))
    );
    assert_eq!(recv(&t.ns, &c, id, 64, 9, 0), Err(Errno::ENOMSG));
    // Type < 0: the first of the lowest type <= |msgtyp|.
    assert_eq!(got(recv(&t.ns, &c, id, 64, -4, 0)), Ok((1, "one".into())));
    assert_eq!(
        got(recv(&t.ns, &c, id, 64, -4, 0)),
        Ok((3, "three again".into()))
    );
    assert_eq!(recv(&t.ns, &c, id, 64, -4, 0), Err(Errno::ENOMSG));
    // Too long for the buffer: E2BIG, the message stays; MSG_NOERROR
    // truncates and takes it.
    assert_eq!(recv(&t.ns, &c, id, 2, 0, 0), Err(Errno::E2BIG));
    assert_eq!(
        got(recv(&t.ns, &c, id, 2, 0, MSG_NOERROR)),
        Ok((5, "fi".into()))
    );
    assert_eq!(stat(&t.ns, &c, id).msg_qnum, 0);
    // Zero-length messages, and i64::MIN as msgtyp (LONG_MIN -> LONG_MAX).
    assert_eq!(t.ns.msgsnd(&c, id, i64::MAX, b"", 0), Ok(0));
    assert_eq!(
        got(recv(&t.ns, &c, id, 0, i64::MIN, 0)),
        Ok((i64::MAX, String::new()))
    );
    t.ns.check().unwrap();
}

#[test]
fn full_queues_stat_fields_and_totals() {
    let t = TestNs::new("msgop-full");
    let c = me();
    let pid = std::process::id() as i32;
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    let ds = stat(&t.ns, &c, id);
    assert_eq!(
        (ds.msg_stime, ds.msg_rtime, ds.msg_lspid, ds.msg_lrpid),
        (0, 0, 0, 0)
    );
    // 16384 bytes: two 8192-byte messages fill it.
    assert_eq!(t.ns.msgsnd(&c, id, 1, &[7; 8192], 0), Ok(0));
    assert_eq!(t.ns.msgsnd(&c, id, 2, &[8; 8192], 0), Ok(0));
    assert_eq!(t.ns.msgsnd(&c, id, 3, b"x", IPC_NOWAIT), Err(Errno::EAGAIN));
    let ds = stat(&t.ns, &c, id);
    assert_eq!(
        (ds.msg_qnum, ds.msg_cbytes, ds.msg_lspid, ds.msg_lrpid),
        (2, 16384, pid, 0)
    );
    assert!(ds.msg_stime > 0 && ds.msg_rtime == 0);
    // The message count is limited by qbytes too.
    let small = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    let mut set = stat(&t.ns, &c, small);
    set.msg_qbytes = 3;
    t.ns.msgctl(&c, small, IPC_SET, MsgArg::Ds(&mut set))
        .unwrap();
    for _ in 0..3 {
        assert_eq!(t.ns.msgsnd(&c, small, 1, b"", 0), Ok(0));
    }
    assert_eq!(
        t.ns.msgsnd(&c, small, 1, b"", IPC_NOWAIT),
        Err(Errno::EAGAIN)
    );
    assert_eq!(
        t.ns.msgsnd(&c, small, 1, b"abcd", IPC_NOWAIT),
        Err(Errno::EAGAIN)
    );
    let i = info(&t.ns, &c);
    assert_eq!((i.msgpool, i.msgmap, i.msgtql), (2, 5, 16384));
    let (ty, text) = recv(&t.ns, &c, id, 8192, 0, 0).unwrap();
    assert_eq!((ty, text.len(), text[8191]), (1, 8192, 7));
    let ds = stat(&t.ns, &c, id);
    assert_eq!((ds.msg_qnum, ds.msg_cbytes, ds.msg_lrpid), (1, 8192, pid));
    assert!(ds.msg_rtime > 0);
    let i = info(&t.ns, &c);
    assert_eq!((i.msgmap, i.msgtql), (4, 8192));
    // Removal frees the messages; the totals follow.
    t.ns.msgctl(&c, id, IPC_RMID, MsgArg::None).unwrap();
    let i = info(&t.ns, &c);
    assert_eq!((i.msgpool, i.msgmap, i.msgtql), (1, 3, 0));
    t.ns.check().unwrap();
}

#[test]
fn blocking_across_processes() {
    let t = TestNs::new("msgop-block");
    let c = me();
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    // A receiver blocked for type 2; a sender sends 1 (queued) then 2
    // (handed over).
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let me = me();
        let mut buf = [0u8; 16];
        match ns.msgrcv(&me, id, &mut buf, 2, 0) {
            Ok((2, 5)) if &buf[..5] == b"hello" => 0,
            other => {
                eprintln!("msgrcv: {other:?}");
                1
            }
        }
    });
    until("the receiver to sleep", || sleeping(child));
    assert_eq!(t.ns.msgsnd(&c, id, 1, b"other", 0), Ok(0));
    assert_eq!(t.ns.msgsnd(&c, id, 2, b"hello", 0), Ok(0));
    assert_eq!(support::wait_child(child), 0);
    let ds = stat(&t.ns, &c, id);
    // Handed over: never queued; stime and rtime set, lrpid the receiver.
    assert_eq!((ds.msg_qnum, ds.msg_lrpid), (1, child));
    assert!(ds.msg_rtime > 0);
    assert_eq!(recv(&t.ns, &c, id, 16, 0, 0).unwrap().1, b"other");
    // A sender blocked on a full queue; a receiver makes room.
    assert_eq!(t.ns.msgsnd(&c, id, 1, &[1; 8192], 0), Ok(0));
    assert_eq!(t.ns.msgsnd(&c, id, 1, &[2; 8192], 0), Ok(0));
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        match ns.msgsnd(&me(), id, 9, &[3; 100], 0) {
            Ok(0) => 0,
            other => {
                eprintln!("msgsnd: {other:?}");
                1
            }
        }
    });
    until("the sender to sleep", || sleeping(child));
    assert_eq!(stat(&t.ns, &c, id).msg_qnum, 2);
    assert_eq!(recv(&t.ns, &c, id, 8192, 0, 0).unwrap().1[0], 1);
    assert_eq!(support::wait_child(child), 0);
    let ds = stat(&t.ns, &c, id);
    assert_eq!((ds.msg_qnum, ds.msg_cbytes, ds.msg_lspid), (2, 8292, child));
    assert_eq!(recv(&t.ns, &c, id, 8192, 9, 0).unwrap().1, vec![3; 100]);
    assert_eq!(recv(&t.ns, &c, id, 8192, 0, 0).unwrap().1, vec![2; 8192]);
    // Ping-pong, 2000 messages each way, types 1 and 2 on one queue.
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let me = me();
        let mut buf = [0u8; 8];
        for i in 0..2000u64 {
            match ns.msgrcv(&me, id, &mut buf, 1, 0) {
                Ok((1, 8)) if u64::from_ne_bytes(buf) == i => {}
                _ => return 1,
            }
            if ns.msgsnd(&me, id, 2, &(i + 1).to_ne_bytes(), 0).is_err() {
                return 2;
            }
        }
        0
    });
    let mut buf = [0u8; 8];
    for i in 0..2000u64 {
        assert_eq!(t.ns.msgsnd(&c, id, 1, &i.to_ne_bytes(), 0), Ok(0));
        assert_eq!(t.ns.msgrcv(&c, id, &mut buf, 2, 0), Ok((2, 8)));
        assert_eq!(u64::from_ne_bytes(buf), i + 1);
    }
    assert_eq!(support::wait_child(child), 0);
    let i = info(&t.ns, &c);
    assert_eq!((i.msgmap, i.msgtql), (0, 0));
    t.ns.check().unwrap();
}

#[test]
fn small_buffers_e2big_and_ipc_set() {
    let t = TestNs::new("msgop-e2big");
    let c = me();
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    // A sleeping receiver with 4 bytes, no MSG_NOERROR: woken with E2BIG
    // by a longer message, which stays queued.
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let mut buf = [0u8; 4];
        match ns.msgrcv(&me(), id, &mut buf, 0, 0) {
            Err(Errno::E2BIG) => 0,
            other => {
                eprintln!("msgrcv: {other:?}");
                1
            }
        }
    });
    until("the receiver to sleep", || sleeping(child));
    assert_eq!(t.ns.msgsnd(&c, id, 1, b"too long", 0), Ok(0));
    assert_eq!(support::wait_child(child), 0);
    assert_eq!(stat(&t.ns, &c, id).msg_qnum, 1);
    // With MSG_NOERROR it is handed over, truncated.
    assert_eq!(recv(&t.ns, &c, id, 8, 0, 0).unwrap().1, b"too long");
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let mut buf = [0u8; 4];
        match ns.msgrcv(&me(), id, &mut buf, 0, MSG_NOERROR) {
            Ok((1, 4)) if &buf == b"too " => 0,
            other => {
                eprintln!("msgrcv: {other:?}");
                1
            }
        }
    });
    until("the receiver to sleep", || sleeping(child));
    assert_eq!(t.ns.msgsnd(&c, id, 1, b"too long", 0), Ok(0));
    assert_eq!(support::wait_child(child), 0);
    assert_eq!(stat(&t.ns, &c, id).msg_qnum, 0);
    // IPC_SET wakes receivers to check again: one that lost read
    // permission fails with EACCES.
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let user = Cred::user(std::process::id() as i32, 0, 0, vec![]);
        let mut buf = [0u8; 4];
        match ns.msgrcv(&user, id, &mut buf, 0, 0) {
            Err(Errno::EACCES) => 0,
            other => {
                eprintln!("msgrcv: {other:?}");
                1
            }
        }
    });
    until("the receiver to sleep", || sleeping(child));
    let mut ds = stat(&t.ns, &c, id);
    ds.msg_perm.mode = 0o200;
    t.ns.msgctl(&c, id, IPC_SET, MsgArg::Ds(&mut ds)).unwrap();
    assert_eq!(support::wait_child(child), 0);
    t.ns.check().unwrap();
}

#[test]
fn removal_signals_and_dead_sleepers() {
    let t = TestNs::new("msgop-end");
    let c = me();
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    // Removal ends every sleeper with EIDRM: a receiver and a sender.
    assert_eq!(t.ns.msgsnd(&c, id, 1, &[0; 8192], 0), Ok(0));
    assert_eq!(t.ns.msgsnd(&c, id, 1, &[0; 8192], 0), Ok(0));
    let path = t.path().to_path_buf();
    let rcv = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let mut buf = [0u8; 4];
        i32::from(ns.msgrcv(&me(), id, &mut buf, 42, 0) != Err(Errno::EIDRM))
    });
    let path = t.path().to_path_buf();
    let snd = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        i32::from(ns.msgsnd(&me(), id, 1, b"x", 0) != Err(Errno::EIDRM))
    });
    until("both to sleep", || sleeping(rcv) && sleeping(snd));
    t.ns.msgctl(&c, id, IPC_RMID, MsgArg::None).unwrap();
    assert_eq!(support::wait_child(rcv), 0);
    assert_eq!(support::wait_child(snd), 0);
    // A signal with a handler, even SA_RESTART: EINTR, for both.
    let id = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    for sender in [false, true] {
        if sender {
            for _ in 0..2 {
                assert_eq!(t.ns.msgsnd(&c, id, 1, &[0; 8192], 0), Ok(0));
            }
        }
        let path = t.path().to_path_buf();
        let child = support::fork_child(move || {
            extern "C" fn on_usr1(_: libc::c_int) {}
            support::handle(libc::SIGUSR1, on_usr1, libc::SA_RESTART);
            let ns = Namespace::open_at(&path).unwrap();
            let r = if sender {
                ns.msgsnd(&me(), id, 1, b"x", 0)
            } else {
                ns.msgrcv(&me(), id, &mut [0u8; 4], 7, 0).map(|_| 0)
            };
            i32::from(r != Err(Errno::EINTR))
        });
        until("the sleeper to sleep", || sleeping(child));
        support::signal(child, libc::SIGUSR1);
        assert_eq!(support::wait_child(child), 0, "sender: {sender}");
    }
    while recv(&t.ns, &c, id, 8192, 0, 0).is_ok() {}
    // A receiver killed while waiting does not swallow the next message;
    // a sender killed while waiting sends nothing.
    let path = t.path().to_path_buf();
    let dead = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let _ = ns.msgrcv(&me(), id, &mut [0u8; 16], 0, 0);
        0
    });
    until("the receiver to sleep", || sleeping(dead));
    support::kill(dead);
    support::wait_child(dead);
    assert_eq!(t.ns.msgsnd(&c, id, 1, b"for the living", 0), Ok(0));
    assert_eq!(recv(&t.ns, &c, id, 16, 0, 0).unwrap().1, b"for the living");
    for _ in 0..2 {
        assert_eq!(t.ns.msgsnd(&c, id, 1, &[0; 8192], 0), Ok(0));
    }
    let path = t.path().to_path_buf();
    let dead = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let _ = ns.msgsnd(&me(), id, 5, b"never", 0);
        0
    });
    until("the sender to sleep", || sleeping(dead));
    support::kill(dead);
    support::wait_child(dead);
    while recv(&t.ns, &c, id, 8192, 0, 0).is_ok() {}
    assert_eq!(recv(&t.ns, &c, id, 16, 5, 0), Err(Errno::ENOMSG));
    // The dead sender's record was woken, then dropped when met again.
    for _ in 0..4 {
        assert_eq!(t.ns.msgsnd(&c, id, 1, b"x", 0), Ok(0));
        assert_eq!(recv(&t.ns, &c, id, 16, 0, 0).unwrap().1, b"x");
    }
    t.ns.check().unwrap();
}

#[test]
fn ping_pong_on_two_queues() {
    let t = TestNs::new("msgop-pingpong");
    let c = me();
    let (a, b) = (
        t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap(),
        t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap(),
    );
    let n = 20_000u64;
    let path = t.path().to_path_buf();
    let child = support::fork_child(move || {
        let ns = Namespace::open_at(&path).unwrap();
        let me = me();
        let mut buf = [0u8; 8];
        for i in 0..n {
            match ns.msgrcv(&me, a, &mut buf, 0, 0) {
                Ok((1, 8)) if u64::from_ne_bytes(buf) == i => {}
                other => {
                    let _ = std::fs::write("/tmp/pp-child", format!("{i}: {other:?} {buf:?}"));
                    return 1;
                }
            }
            if ns.msgsnd(&me, b, 1, &i.to_ne_bytes(), 0).is_err() {
                return 2;
            }
        }
        0
    });
    let mut buf = [0u8; 8];
    for i in 0..n {
        assert_eq!(t.ns.msgsnd(&c, a, 1, &i.to_ne_bytes(), 0), Ok(0));
        assert_eq!(
            t.ns.msgrcv(&c, b, &mut buf, 0, 0),
            Ok((1, 8)),
            "round trip {i}"
        );
        assert_eq!(u64::from_ne_bytes(buf), i);
    }
    assert_eq!(support::wait_child(child), 0);
    t.ns.check().unwrap();
}
