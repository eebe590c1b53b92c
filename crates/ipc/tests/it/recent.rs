//! `*get` of a key found before, answered without the registry lock
//! (`recent.rs` in the core): always the object the key names now, with
//! its permissions as they are now, never a mixture of two IPC_SETs.

use crate::support::TestNs;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Cred, Errno};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[test]
fn a_key_found_before_names_the_object_of_now() {
    let t = TestNs::new("recent-now");
    let root = Cred::root(1);
    let (ns, k) = (&t.ns, 0x5ec);
    let s1 = ns.semget(&root, k, 2, IPC_CREAT | 0o600).unwrap();
    let m1 = ns.msgget(&root, k, IPC_CREAT | 0o600).unwrap();
    let h1 = ns.shmget(&root, k, 4096, IPC_CREAT | 0o600).unwrap();
    for _ in 0..3 {
        assert_eq!(ns.semget(&root, k, 2, 0), Ok(s1));
        assert_eq!(ns.msgget(&root, k, 0), Ok(m1));
        assert_eq!(ns.shmget(&root, k, 4096, 0), Ok(h1));
    }
    // more_checks on the remembered path: too many semaphores, too large
    // a segment: EINVAL; IPC_CREAT|IPC_EXCL: EEXIST.
    assert_eq!(ns.semget(&root, k, 3, 0), Err(Errno::EINVAL));
    assert_eq!(ns.shmget(&root, k, 8192, 0), Err(Errno::EINVAL));
    assert_eq!(
        ns.semget(&root, k, 2, IPC_CREAT | IPC_EXCL),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        ns.msgget(&root, k, IPC_CREAT | IPC_EXCL),
        Err(Errno::EEXIST)
    );
    // Removed: gone at once; made again: the new id.
    ns.semctl(&root, s1, 0, IPC_RMID, SemArg::None).unwrap();
    ns.msgctl(&root, m1, IPC_RMID, MsgArg::None).unwrap();
    ns.shmctl(&root, h1, IPC_RMID, ShmArg::None).unwrap();
    assert_eq!(ns.semget(&root, k, 2, 0), Err(Errno::ENOENT));
    assert_eq!(ns.msgget(&root, k, 0), Err(Errno::ENOENT));
    assert_eq!(ns.shmget(&root, k, 4096, 0), Err(Errno::ENOENT));
    let s2 = ns.semget(&root, k, 2, IPC_CREAT | 0o600).unwrap();
    let m2 = ns.msgget(&root, k, IPC_CREAT | 0o600).unwrap();
    assert_ne!(s2, s1);
    assert_ne!(m2, m1);
    assert_eq!(ns.semget(&root, k, 2, 0), Ok(s2));
    assert_eq!(ns.msgget(&root, k, 0), Ok(m2));
    // A segment removed while attached keeps no key (SHM_DEST).
    let h2 = ns.shmget(&root, k, 4096, IPC_CREAT | 0o600).unwrap();
    assert_eq!(ns.shmget(&root, k, 4096, 0), Ok(h2));
    let at = ns.shmat(&root, h2, 0, 0).unwrap();
    ns.shmctl(&root, h2, IPC_RMID, ShmArg::None).unwrap();
    assert_eq!(ns.shmget(&root, k, 4096, 0), Err(Errno::ENOENT));
    ns.shmdt(&root, at).unwrap();
}

#[test]
fn a_key_found_before_is_checked_with_the_permissions_of_now() {
    let t = TestNs::new("recent-perm");
    let root = Cred::root(1);
    let user = Cred::user(2, 1000, 1000, vec![]);
    let ns = &t.ns;
    let id = ns.semget(&root, 0x77, 1, IPC_CREAT | 0o666).unwrap();
    assert_eq!(ns.semget(&user, 0x77, 1, 0o600), Ok(id));
    assert_eq!(ns.semget(&user, 0x77, 1, 0o600), Ok(id));
    let set = |mode: u32| {
        let mut ds = semid64_ds::default();
        ds.sem_perm.mode = mode;
        ns.semctl(&root, id, 0, IPC_SET, SemArg::Ds(&mut ds))
            .unwrap();
    };
    set(0o600);
    assert_eq!(ns.semget(&user, 0x77, 1, 0o600), Err(Errno::EACCES));
    assert_eq!(ns.semget(&user, 0x77, 1, 0), Ok(id));
    set(0o666);
    assert_eq!(ns.semget(&user, 0x77, 1, 0o600), Ok(id));
}

#[test]
fn a_lookup_racing_ipc_set_never_mixes_two_settings() {
    // Two settings that both refuse user 1000 read-write access: owned by
    // it with mode 0060, and owned by root with mode 0600. An owner from
    // the first read with the mode of the second would grant it.
    let t = TestNs::new("recent-race");
    let root = Cred::root(1);
    let user = Cred::user(2, 1000, 1000, vec![]);
    let ns = &t.ns;
    let id = ns.semget(&root, 0x99, 1, IPC_CREAT | 0o600).unwrap();
    assert_eq!(ns.semget(&user, 0x99, 1, 0o600), Err(Errno::EACCES));
    let stop = AtomicBool::new(false);
    let (granted, refused) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut ds = semid64_ds::default();
            for i in 0..200_000u32 {
                (ds.sem_perm.uid, ds.sem_perm.mode) = if i % 2 == 0 {
                    (1000, 0o060)
                } else {
                    (0, 0o600)
                };
                ds.sem_perm.gid = 0;
                ns.semctl(&root, id, 0, IPC_SET, SemArg::Ds(&mut ds))
                    .unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match ns.semget(&user, 0x99, 1, 0o600) {
                    Ok(_) => granted.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        assert_eq!(e, Errno::EACCES);
                        refused.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        });
    });
    let (g, r) = (granted.into_inner(), refused.into_inner());
    eprintln!("recent: {r} lookups refused, {g} granted, racing 200000 IPC_SETs");
    assert_eq!(g, 0, "a lookup combined two settings");
    assert!(r > 0);
}
