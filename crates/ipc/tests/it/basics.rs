//! First checks of the namespace against the kernel's documented numbers.

use crate::support::TestNs;
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::{Cred, Errno};

#[test]
fn ids_cycle_like_the_kernel() {
    let t = TestNs::new("ids");
    let root = Cred::root(1);
    let ids: Vec<i32> = (0..70)
        .map(|_| t.ns.semget(&root, 0, 1, 0o600).unwrap())
        .collect();
    assert_eq!(ids, (0..70).collect::<Vec<_>>());
    for id in &ids {
        assert_eq!(t.ns.semctl(&root, *id, 0, IPC_RMID, SemArg::None), Ok(0));
    }
    let next: Vec<i32> = (0..3)
        .map(|_| t.ns.semget(&root, 0, 1, 0o600).unwrap())
        .collect();
    assert_eq!(next, [32768, 32769, 32770]);
}

#[test]
fn keys_flags_and_errnos() {
    let t = TestNs::new("keys");
    let root = Cred::root(7);
    assert_eq!(t.ns.semget(&root, 0x10, 1, 0o600), Err(Errno::ENOENT));
    assert_eq!(
        t.ns.semget(&root, 0x10, 0, IPC_CREAT | 0o600),
        Err(Errno::EINVAL)
    );
    let s = t.ns.semget(&root, 0x10, 3, IPC_CREAT | 0o640).unwrap();
    assert_eq!(
        t.ns.semget(&root, 0x10, 3, IPC_CREAT | IPC_EXCL),
        Err(Errno::EEXIST)
    );
    assert_eq!(t.ns.semget(&root, 0x10, 4, 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.semget(&root, 0x10, 0, 0), Ok(s));
    let user = Cred::user(8, 1000, 1000, vec![]);
    assert_eq!(t.ns.semget(&user, 0x10, 1, 0o400), Err(Errno::EACCES));
    assert_eq!(
        t.ns.semctl(&root, s, 0, SETVAL, SemArg::Val(32768)),
        Err(Errno::ERANGE)
    );
    assert_eq!(
        t.ns.semctl(&root, s, 3, SETVAL, SemArg::Val(1)),
        Err(Errno::EINVAL)
    );
    assert_eq!(t.ns.semctl(&root, s, 1, SETVAL, SemArg::Val(32767)), Ok(0));
    assert_eq!(t.ns.semctl(&root, s, 1, GETVAL, SemArg::None), Ok(32767));
    assert_eq!(t.ns.semctl(&root, s, 1, GETPID, SemArg::None), Ok(7));
    let mut all = [0u16; 3];
    assert_eq!(
        t.ns.semctl(&root, s, 0, GETALL, SemArg::Array(&mut all)),
        Ok(0)
    );
    assert_eq!(all, [0, 32767, 0]);
    let mut vals = [5u16, 6, 7];
    assert_eq!(
        t.ns.semctl(&root, s, 0, SETALL, SemArg::Array(&mut vals)),
        Ok(0)
    );
    assert_eq!(t.ns.semctl(&root, s, 2, GETVAL, SemArg::None), Ok(7));
    let mut ds = semid64_ds::default();
    assert_eq!(
        t.ns.semctl(&root, s, 0, IPC_STAT, SemArg::Ds(&mut ds)),
        Ok(0)
    );
    assert_eq!(
        (ds.sem_perm.key, ds.sem_perm.mode, ds.sem_nsems),
        (0x10, 0o640, 3)
    );
    assert_eq!(
        t.ns.semctl(&root, s & 32767, 0, SEM_STAT, SemArg::Ds(&mut ds)),
        Ok(s)
    );
    assert_eq!(
        t.ns.semctl(&user, s, 0, IPC_RMID, SemArg::None),
        Err(Errno::EPERM)
    );
    let mut info = seminfo::default();
    assert_eq!(
        t.ns.semctl(&root, 0, 0, SEM_INFO, SemArg::Info(&mut info)),
        Ok(0)
    );
    assert_eq!((info.semusz, info.semaem), (1, 3));
    assert_eq!(t.ns.semctl(&root, s, 0, IPC_RMID, SemArg::None), Ok(0));
    assert_eq!(
        t.ns.semctl(&root, s, 0, GETVAL, SemArg::None),
        Err(Errno::EINVAL)
    );
    // The key is free at once.
    assert_eq!(t.ns.semget(&root, 0x10, 1, 0), Err(Errno::ENOENT));
    // A big set lives in the heap.
    let big = t.ns.semget(&root, 0x11, 1000, IPC_CREAT | 0o600).unwrap();
    assert_eq!(t.ns.semctl(&root, big, 999, SETVAL, SemArg::Val(9)), Ok(0));
    assert_eq!(t.ns.semctl(&root, big, 999, GETVAL, SemArg::None), Ok(9));
}

#[test]
fn reattach_sees_the_same_objects() {
    let t = TestNs::new("reattach");
    let root = Cred::root(1);
    let s = t.ns.semget(&root, 0x99, 2, IPC_CREAT | 0o600).unwrap();
    let again = ipcns::Namespace::open_at(t.path()).unwrap();
    assert_eq!(again.semget(&root, 0x99, 0, 0), Ok(s));
}
