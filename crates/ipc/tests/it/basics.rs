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

#[test]
fn extend_mode_ids() {
    let t = TestNs::with(
        "extend",
        ipcns::CreateOptions {
            extend: true,
            heap_size: 64 << 20,
            ..Default::default()
        },
    );
    let root = Cred::root(1);
    let ids: Vec<i32> = (0..4100)
        .map(|_| t.ns.semget(&root, 0, 1, 0o600).unwrap())
        .collect();
    assert_eq!(ids[4099], 4099);
    for id in &ids {
        t.ns.semctl(&root, *id, 0, IPC_RMID, SemArg::None).unwrap();
    }
    // The cursor (4100) is past the 4096-index window: wrap to 0, seq 1.
    assert_eq!(t.ns.semget(&root, 0, 1, 0o600), Ok(1 << 24));
    // The sequence number has 7 bits: SEM_STAT of index 0 returns the full id.
    let mut ds = semid64_ds::default();
    assert_eq!(
        t.ns.semctl(&root, 0, 0, SEM_STAT, SemArg::Ds(&mut ds)),
        Ok(1 << 24)
    );
}

#[test]
fn callers_in_a_child_user_namespace_see_translated_ids() {
    use ipcns_idmap::IdMap;
    let t = TestNs::new("userns");
    let root = Cred::root(1);
    // The arena's namespace stores owner 100000 (a container's root).
    let mut host = Cred::user(2, 100_000, 100_000, vec![]);
    host.cap_sys_admin = true;
    let s = t.ns.semget(&host, 0x42, 1, IPC_CREAT | 0o640).unwrap();
    // A caller inside a user namespace mapping 0..65536 onto 100000..
    let maps = std::sync::Arc::new((
        IdMap::parse("0 100000 65536").unwrap(),
        IdMap::parse("0 100000 65536").unwrap(),
    ));
    let inside = Cred {
        maps: Some(maps),
        ..Cred::user(3, 100_000, 100_000, vec![])
    };
    let mut ds = semid64_ds::default();
    t.ns.semctl(&inside, s, 0, IPC_STAT, SemArg::Ds(&mut ds))
        .unwrap();
    assert_eq!(
        (ds.sem_perm.uid, ds.sem_perm.cuid, ds.sem_perm.gid),
        (0, 0, 0)
    );
    // An id outside its map reads as 65534.
    let other = t.ns.semget(&root, 0x43, 1, IPC_CREAT | 0o644).unwrap();
    t.ns.semctl(&inside, other, 0, IPC_STAT, SemArg::Ds(&mut ds))
        .unwrap();
    assert_eq!((ds.sem_perm.uid, ds.sem_perm.gid), (65534, 65534));
    // IPC_SET maps the new owner down; an unmappable one is EINVAL.
    ds = semid64_ds::default();
    ds.sem_perm.uid = 1000;
    ds.sem_perm.gid = 1000;
    ds.sem_perm.mode = 0o600;
    assert_eq!(
        t.ns.semctl(&inside, s, 0, IPC_SET, SemArg::Ds(&mut ds)),
        Ok(0)
    );
    t.ns.semctl(&root, s, 0, IPC_STAT, SemArg::Ds(&mut ds))
        .unwrap();
    assert_eq!((ds.sem_perm.uid, ds.sem_perm.gid), (101_000, 101_000));
    // The inside caller is still the creator (cuid 100000), so it may try:
    // uid 70000 has no mapping in its namespace.
    ds.sem_perm.uid = 70_000;
    assert_eq!(
        t.ns.semctl(&inside, s, 0, IPC_SET, SemArg::Ds(&mut ds)),
        Err(Errno::EINVAL)
    );
    // Someone else inside, neither owner nor creator: EPERM.
    let stranger = Cred {
        euid: 100_005,
        ..inside.clone()
    };
    assert_eq!(
        t.ns.semctl(&stranger, s, 0, IPC_SET, SemArg::Ds(&mut ds)),
        Err(Errno::EPERM)
    );
}

#[test]
fn attaching_to_something_else_fails_clearly() {
    use ipcns::{ArenaError, Namespace};
    let dir = std::env::temp_dir().join(format!("ipcns-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Not an arena at all.
    let junk = dir.join("junk");
    std::fs::write(&junk, vec![0x5a; 100_000]).unwrap();
    let e = Namespace::open_at(&junk).err().expect("junk is refused");
    assert!(matches!(e, ArenaError::NotAnArena { .. }), "{e}");
    assert!(e.to_string().contains("not an ipcns arena"), "{e}");
    // Too short.
    let short = dir.join("short");
    std::fs::write(&short, b"IPCNSARN").unwrap();
    assert!(matches!(
        Namespace::open_at(&short),
        Err(ArenaError::NotAnArena { .. })
    ));
    // Another layout version.
    let t = TestNs::with(
        "version",
        ipcns::CreateOptions {
            heap_size: 1 << 20,
            ..Default::default()
        },
    );
    let mut bytes = std::fs::read(t.path()).unwrap();
    bytes[8] = 99;
    let other = dir.join("other-version");
    std::fs::write(&other, &bytes).unwrap();
    let e = Namespace::open_at(&other)
        .err()
        .expect("another version is refused");
    assert!(matches!(e, ArenaError::Version { found: 99, .. }), "{e}");
    assert!(e.to_string().contains("layout version 99"), "{e}");
    // Another architecture or lock kind (header words at 48 and 52), or
    // per-cpu data updated another way (120): refused, saying which.
    for (at, what) in [
        (48, "architecture"),
        (52, "lock kind"),
        (120, "per-cpu data"),
    ] {
        let mut b = std::fs::read(t.path()).unwrap();
        b[at] ^= 0x33;
        let other = dir.join(format!("other-{at}"));
        std::fs::write(&other, &b).unwrap();
        let e = Namespace::open_at(&other).err().expect("refused");
        assert!(matches!(e, ArenaError::NotAnArena { .. }), "{e}");
        assert!(e.to_string().contains(what), "{at}: {e}");
    }
    // Missing.
    assert!(matches!(
        Namespace::open_at(&dir.join("none")),
        Err(ArenaError::NotFound { .. })
    ));
    // Creating over an existing one refuses.
    assert!(matches!(
        Namespace::create_at(t.path(), ipcns::CreateOptions::default()),
        Err(ArenaError::Exists { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn named_namespaces_are_files_of_mode_0600() {
    use ipcns::Namespace;
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ipcns-named-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ipcns.alpha");
    let ns = Namespace::create_at(&path, ipcns::CreateOptions::default()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(ns);
    // (check_name: path_of of a valid name would make the caller's
    // directory in /dev/shm.)
    assert!(ipcns::namespace::check_name("../etc").is_err());
    assert!(ipcns::namespace::check_name(".hidden").is_err());
    assert!(ipcns::namespace::check_name("ok-name_1.2").is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Credentials are read once and cached (no system call per operation);
/// `creds::refresh` (what the C ABI's set*id wrappers call) makes the next
/// call see the process's new ids; a fork child sees its own pid.
#[test]
fn credentials_are_cached_and_refreshed() {
    if !crate::support::kernel_or_skip("credentials_are_cached_and_refreshed") {
        return;
    }
    let t = TestNs::new("creds");
    let ns = &t.ns;
    let code = crate::support::fork_run(|| {
        let before = ns.cred().unwrap();
        if before.euid != 0 || before.pid != std::process::id() as i32 {
            return 1;
        }
        if crate::support::drop_to(1000, 1000).is_err() {
            return 2;
        }
        // Cached: still root until refreshed.
        if ns.cred().unwrap().euid != 0 {
            return 3;
        }
        ipcns::creds::refresh();
        let after = ns.cred().unwrap();
        if after.euid != 1000 || after.egid != 1000 || after.cap_ipc_owner {
            return 4;
        }
        // A fork child of this process: its own pid, the same ids.
        crate::support::fork_run(|| {
            let c = ns.cred().unwrap();
            if c.pid == std::process::id() as i32 && c.euid == 1000 {
                0
            } else {
                5
            }
        })
    });
    assert_eq!(code, 0);
}
