//! What the C ABI needs of the core: an arena handed down as a descriptor
//! (`Namespace::open_fd`), a receive buffer lent at the message's size
//! (`msgrcv_into`), the exit path of an ending process (`exit_ending`).

use crate::support::{TestNs, fork_run};
use ipcns::abi::{IPC_CREAT, IPC_NOWAIT, IPC_STAT, SEM_UNDO, sembuf, shmid64_ds};
use ipcns::msg::RecvBuf;
use ipcns::shm::ShmArg;
use ipcns::{Errno, Namespace, SysResult};
use std::io::{Seek, SeekFrom};

/// A namespace opened from a descriptor sees the objects of the one
/// opened by path, finds its segment directory beside the hint (or the
/// descriptor's own path), and leaves the descriptor's offset alone.
#[test]
fn open_fd_is_the_same_namespace() {
    let t = TestNs::new("handed");
    let c = t.ns.cred().unwrap();
    let id = t.ns.semget(&c, 0x4242, 1, IPC_CREAT | 0o600).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(t.path())
        .unwrap();
    f.seek(SeekFrom::Start(12345)).unwrap();
    for hint in [
        Some(t.path()),
        None,
        Some(std::path::Path::new("/nonexistent")),
    ] {
        let fd = std::os::fd::OwnedFd::from(f.try_clone().unwrap());
        let ns = Namespace::open_fd(fd, hint).unwrap();
        assert_eq!(ns.path(), t.path());
        assert_eq!(ns.semget(&c, 0x4242, 0, 0), Ok(id));
        // A segment made through the handed namespace lands in the
        // arena's segment directory: the other sees and attaches it.
        let shm = ns.shmget(&c, 0, 4096, IPC_CREAT | 0o600).unwrap();
        let a = t.ns.shmat(&c, shm, 0, 0).unwrap();
        assert_eq!(t.ns.shmdt(&c, a), Ok(0));
    }
    assert_eq!(f.stream_position().unwrap(), 12345);
    // Not an arena: refused.
    let null = std::fs::File::open("/dev/null").unwrap();
    assert!(Namespace::open_fd(null.into(), None).is_err());
}

/// A buffer that asks for room only once the message's size is known.
struct Exact {
    cap: usize,
    asked: Vec<usize>,
    text: Vec<u8>,
}

impl RecvBuf for Exact {
    fn cap(&self) -> usize {
        self.cap
    }
    fn room(&mut self, n: usize) -> SysResult<&mut [u8]> {
        self.asked.push(n);
        self.text = vec![0; n];
        Ok(&mut self.text)
    }
}

#[test]
fn msgrcv_into_lends_the_message_size() {
    let t = TestNs::new("recvbuf");
    let c = t.ns.cred().unwrap();
    let q = t.ns.msgget(&c, 0, IPC_CREAT | 0o600).unwrap();
    t.ns.msgsnd(&c, q, 3, b"hello", 0).unwrap();
    t.ns.msgsnd(&c, q, 4, b"a longer message", 0).unwrap();
    let mut b = Exact {
        cap: 1 << 30,
        asked: Vec::new(),
        text: Vec::new(),
    };
    assert_eq!(t.ns.msgrcv_into(&c, q, &mut b, 0, 0), Ok((3, 5)));
    assert_eq!(b.text, b"hello");
    // Too long without MSG_NOERROR: no room asked for, E2BIG.
    b.cap = 4;
    assert_eq!(
        t.ns.msgrcv_into(&c, q, &mut b, 0, IPC_NOWAIT),
        Err(Errno::E2BIG)
    );
    assert_eq!(b.asked, [5]);
    assert_eq!(
        t.ns.msgrcv_into(&c, q, &mut b, 0, ipcns::abi::MSG_NOERROR),
        Ok((4, 4))
    );
    assert_eq!(b.text, b"a lo");
}

/// `exit_ending`: a child's SEM_UNDO adjustment applied and its attachment
/// dropped from shm_nattch while it still runs.
#[test]
fn exit_ending_applies_undo_and_drops_attachments() {
    let t = TestNs::new("ending");
    let c = t.ns.cred().unwrap();
    let s = t.ns.semget(&c, 0, 1, IPC_CREAT | 0o600).unwrap();
    let h = t.ns.shmget(&c, 0, 4096, IPC_CREAT | 0o600).unwrap();
    let nattch = |ns: &Namespace| {
        let mut ds = shmid64_ds::default();
        ns.shmctl(&ns.cred().unwrap(), h, IPC_STAT, ShmArg::Ds(&mut ds))
            .map(|_| ds.shm_nattch)
    };
    let ns = &t.ns;
    let code = fork_run(|| {
        let c = ns.cred().unwrap();
        let up = [sembuf {
            sem_num: 0,
            sem_op: 2,
            sem_flg: SEM_UNDO,
        }];
        if ns.semop(&c, s, &up).is_err() || ns.shmat(&c, h, 0, 0).is_err() {
            return 1;
        }
        if nattch(ns) != Ok(1) {
            return 2;
        }
        if ns.exit_ending().is_err() {
            return 3;
        }
        // Still running, still mapped: already counted out.
        if nattch(ns) != Ok(0) {
            return 4;
        }
        0
    });
    assert_eq!(code, 0);
    assert_eq!(
        t.ns.semctl(&c, s, 0, ipcns::abi::GETVAL, ipcns::sem::SemArg::None),
        Ok(0)
    );
}
