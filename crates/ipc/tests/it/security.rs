//! The namespace's files as a security boundary: whose arena a caller
//! attaches to, what it refuses to open, the modes of what it makes, the
//! per-user default directory, segment files shared by the participants,
//! and names that cannot reach another namespace's files.
//!
//! The parts that need a second user run as root and drop to uid 1000 in
//! forked children (skipped, with a SKIPPED line, when not root; a failure
//! under IPCNS_REQUIRE_KERNEL=1). Environment variables are process-wide, so
//! IPCNS_DIR and IPCNS_SHARED are only ever set in forked children.
//!
//! # Safety
//! `child_env`, `umask` and `mkfifo` make plain libc calls; the first two
//! only in forked children, which have one thread.
#![allow(unsafe_code)]

use crate::support::{drop_to, fork_child, fork_run, kernel_or_skip, kill, wait_child};
use ipcns::abi::IPC_RMID;
use ipcns::namespace::{Access, check_name, path_of};
use ipcns::shm::ShmArg;
use ipcns::{ArenaError, CreateOptions, Errno, Namespace};
use ipcns_testkit::TempDir;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `IPC_PRIVATE`.
const IPC_PRIVATE: i32 = 0;

/// Sets (`Some`) or removes (`None`) an environment variable: in a forked
/// child only.
fn child_env(key: &str, value: Option<&std::ffi::OsStr>) {
    // SAFETY: only called in a forked child, which has a single thread, so
    // nothing reads the environment meanwhile.
    unsafe {
        match value {
            Some(v) => std::env::set_var(key, v),
            None => std::env::remove_var(key),
        }
    }
}

/// `umask(mask)`: in a forked child only.
fn umask(mask: u32) {
    // SAFETY: a plain system call on this (single-threaded, forked) process.
    unsafe { libc::umask(mask as libc::mode_t) };
}

/// Runs `f` as `uid`:`uid` in a forked child; its exit code.
fn as_user(uid: u32, f: impl FnOnce() -> i32) -> i32 {
    fork_run(|| {
        drop_to(uid, uid).expect("drop privileges");
        f()
    })
}

/// Runs `f` in a forked child that must end within `secs` seconds.
fn within(secs: u64, f: impl FnOnce() -> i32) -> i32 {
    let pid = fork_child(f);
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut status = 0;
        // SAFETY: polls our own child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -libc::WTERMSIG(status)
            };
        }
        if Instant::now() > end {
            kill(pid);
            let _ = wait_child(pid);
            panic!("the child hung for {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn small(mode: u32) -> CreateOptions {
    CreateOptions {
        heap_size: 1 << 20,
        mode,
        ..CreateOptions::default()
    }
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn another_users_file_under_the_name_is_refused() {
    const TEST: &str = "another_users_file_under_the_name_is_refused";
    if !kernel_or_skip(TEST) {
        return;
    }
    // A shared temporary directory, where anyone can make files.
    let d = TempDir::with_mode("ipcns-sec-squat", 0o1777);
    let shared = d.join("ipcns.sq");
    let private = d.join("ipcns.priv");
    let opened_up = d.join("ipcns.later");
    let code = as_user(1000, || {
        Namespace::create_at(&shared, small(0o666)).unwrap();
        Namespace::create_at(&private, small(0o600)).unwrap();
        Namespace::create_at(&opened_up, small(0o600)).unwrap();
        std::fs::set_permissions(&opened_up, std::fs::Permissions::from_mode(0o666)).unwrap();
        0
    });
    assert_eq!(code, 0);
    assert_eq!(std::fs::metadata(&shared).unwrap().uid(), 1000);

    // Root asked for nothing: refused, with the reason and the way out.
    let e = Namespace::open_at_as(&shared, Access::Own)
        .err()
        .expect("a squatted file is refused");
    assert!(
        matches!(
            e,
            ArenaError::NotOwner {
                owner: 1000,
                euid: 0,
                asked_shared: false,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{}: owned by uid 1000, not by you (uid 0); refusing to attach \
             (set IPCNS_SHARED=1 to use a namespace shared with you)",
            shared.display()
        )
    );
    // Asked for shared use, and it was created shared (mode 0666): in.
    let ns = Namespace::open_at_as(&shared, Access::Shared).expect("created shared");
    let root = (*ns.cred().unwrap()).clone();
    assert!(ns.semget(&root, IPC_PRIVATE, 1, 0o600).is_ok());
    drop(ns);
    // Created 0600: never shared, even when asked, even once made 0666.
    for p in [&private, &opened_up] {
        let e = Namespace::open_at_as(p, Access::Shared)
            .err()
            .expect("a file not created shared is refused");
        assert!(
            matches!(
                e,
                ArenaError::NotOwner {
                    owner: 1000,
                    asked_shared: true,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("not created shared"), "{e}");
    }

    // The same through the environment, as the command uses it: by name in
    // IPCNS_DIR, honouring IPCNS_SHARED.
    let code = fork_run(|| {
        child_env("IPCNS_DIR", Some(d.path().as_os_str()));
        child_env("IPCNS_SHARED", None);
        if !matches!(
            Namespace::open_or_create("sq"),
            Err(ArenaError::NotOwner { .. })
        ) {
            return 1;
        }
        child_env("IPCNS_SHARED", Some("1".as_ref()));
        if Namespace::open_or_create("sq").is_err() || Namespace::open("sq").is_err() {
            return 2;
        }
        if !matches!(
            Namespace::open_or_create("priv"),
            Err(ArenaError::NotOwner { .. })
        ) {
            return 3;
        }
        0
    });
    assert_eq!(code, 0);
}

#[test]
fn links_fifos_and_directories_are_not_arenas() {
    let d = TempDir::with_mode("ipcns-sec-kinds", 0o700);
    let real = d.join("ipcns.real");
    drop(Namespace::create_at(&real, small(0o600)).unwrap());
    let link = d.join("ipcns.link");
    std::os::unix::fs::symlink("ipcns.real", &link).unwrap();
    let fifo = d.join("ipcns.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let dir = d.join("ipcns.dir");
    std::fs::create_dir(&dir).unwrap();
    for (p, kind) in [
        (&link, "a symbolic link"),
        (&fifo, "a FIFO"),
        (&dir, "a directory"),
    ] {
        // A child, so that a FIFO that blocks the opener fails the test
        // instead of hanging it.
        let code = within(10, || match Namespace::open_at_as(p, Access::Own) {
            Err(ArenaError::NotRegular { kind: k, .. }) if k == kind => 0,
            Err(e) => {
                eprintln!("{}: {e}", p.display());
                1
            }
            Ok(_) => 2,
        });
        assert_eq!(code, 0, "{}", p.display());
    }
    let e = Namespace::open_at(&link).err().unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a symbolic link, not a regular file; refusing to attach",
            link.display()
        )
    );
    // Nothing is made through a link, dangling or not.
    let dangling = d.join("ipcns.dangling");
    std::os::unix::fs::symlink(d.join("target"), &dangling).unwrap();
    assert!(matches!(
        Namespace::create_at(&dangling, small(0o600)),
        Err(ArenaError::Exists { .. })
    ));
    assert!(!d.join("target").exists());
    // Listing neither follows the link nor waits on the FIFO.
    let code = within(10, || {
        child_env("IPCNS_DIR", Some(d.path().as_os_str()));
        match Namespace::list() {
            Ok(v) if v == ["real"] => 0,
            other => {
                eprintln!("{other:?}");
                1
            }
        }
    });
    assert_eq!(code, 0);
}

#[test]
fn new_files_have_exactly_the_requested_modes() {
    let d = TempDir::with_mode("ipcns-sec-modes", 0o700);
    let code = fork_run(|| {
        let root = ipcns::Cred::root(std::process::id() as i32);
        for (mask, mode, dir_mode) in [
            (0o077, 0o640, Some(0o1750)),
            (0o000, 0o600, None),
            (0o022, 0o666, Some(0o1777)),
            (0o777, 0o604, Some(0o1705)),
        ] {
            umask(mask);
            let p = d.join(format!("ipcns.m{mask:o}"));
            let ns = Namespace::create_at(&p, small(mode)).unwrap();
            assert_eq!(mode_of(&p), mode, "umask {mask:04o}");
            // A shared namespace has its segment directory from the start.
            let seg = ipcns::segment_dir_of(&p);
            assert_eq!(seg.exists(), dir_mode.is_some(), "umask {mask:04o}");
            let id = ns.shmget(&root, IPC_PRIVATE, 100, 0o600).unwrap();
            // Made at the first shmget otherwise: the arena's mode plus x
            // where r is set (and sticky when shared, as made above);
            // segment files the arena's mode without x.
            let want_dir = dir_mode.unwrap_or(((mode & 0o444) >> 2) | mode);
            assert_eq!(mode_of(&seg), want_dir, "umask {mask:04o}");
            assert_eq!(
                mode_of(&seg.join("shm.1")),
                mode & 0o666,
                "umask {mask:04o}"
            );
            assert_eq!(ns.shmctl(&root, id, IPC_RMID, ShmArg::None), Ok(0));
            assert!(!seg.join("shm.1").exists());
            Namespace::remove_at(&p).unwrap();
            assert!(!seg.exists());
        }
        0
    });
    assert_eq!(code, 0);
}

#[test]
fn the_default_directory_is_private_to_its_user() {
    const TEST: &str = "the_default_directory_is_private_to_its_user";
    if !kernel_or_skip(TEST) {
        return;
    }
    // A uid nobody uses, so that no real user's directory is touched.
    let uid = 3_000_000 + std::process::id() % 1_000_000;
    let mine = PathBuf::from(format!("/dev/shm/ipcns-{uid}"));
    struct Cleanup<'a>(&'a Path);
    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
            let _ = std::fs::remove_dir_all(self.0);
        }
    }
    let _cleanup = Cleanup(&mine);
    let _ = std::fs::remove_dir_all(&mine);
    // `dir()` as `uid`, IPCNS_DIR unset, under `mask`.
    let dir_as = |mask: u32, expect: &dyn Fn(Result<PathBuf, ArenaError>) -> bool| {
        as_user(uid, || {
            child_env("IPCNS_DIR", None);
            umask(mask);
            i32::from(!expect(ipcns::namespace::dir()))
        })
    };
    let refused = |why: &'static str| {
        let mine = mine.clone();
        move |r: Result<PathBuf, ArenaError>| match r {
            Err(e @ ArenaError::BadDir { .. }) => {
                let s = e.to_string();
                let ok = s.starts_with(&format!(
                    "{}: refusing to use this directory",
                    mine.display()
                )) && s.contains(why);
                if !ok {
                    eprintln!("{s}");
                }
                ok
            }
            other => {
                eprintln!("{other:?}");
                false
            }
        }
    };
    // Planted by another user (root here).
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(dir_as(0o022, &refused("owned by uid 0, not by you")), 0);
    // The user's own, but others may write in it.
    std::os::unix::fs::chown(&mine, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o770)).unwrap();
    assert_eq!(dir_as(0o022, &refused("mode 0770 lets others")), 0);
    // A link to a directory of the user's.
    std::fs::remove_dir(&mine).unwrap();
    let elsewhere = TempDir::with_mode("ipcns-sec-elsewhere", 0o700);
    std::os::unix::fs::chown(elsewhere.path(), Some(uid), Some(uid)).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &mine).unwrap();
    assert_eq!(
        dir_as(0o022, &refused("a symbolic link, not a directory")),
        0
    );
    std::fs::remove_file(&mine).unwrap();
    // Missing: made, 0700 whatever the umask, and used by name.
    let made = mine.clone();
    let code = as_user(uid, || {
        child_env("IPCNS_DIR", None);
        umask(0o277);
        if ipcns::namespace::dir().ok().as_ref() != Some(&made) {
            return 1;
        }
        let ns = Namespace::create("x", CreateOptions::default()).unwrap();
        if ns.path() != made.join("ipcns.x") {
            return 2;
        }
        Namespace::remove("x").unwrap();
        0
    });
    assert_eq!(code, 0);
    let m = std::fs::symlink_metadata(&mine).unwrap();
    assert!(m.is_dir());
    assert_eq!((m.uid(), m.mode() & 0o7777), (uid, 0o700));
    // Found again as it is.
    assert_eq!(dir_as(0o022, &|r| r.is_ok_and(|p| p == mine)), 0);
}

#[test]
fn participants_share_the_segment_files() {
    const TEST: &str = "participants_share_the_segment_files";
    if !kernel_or_skip(TEST) {
        return;
    }
    let d = TempDir::with_mode("ipcns-sec-segments", 0o755);
    let path = d.join("ipcns.seg");
    let ns = Namespace::create_at(&path, small(0o666)).unwrap();
    let seg = ipcns::segment_dir_of(&path);
    let m = std::fs::symlink_metadata(&seg).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o1777));
    ns.sysctl_write(&ipcns::Cred::root(1), "shm_rmid_forced", "1")
        .unwrap();
    // Root's orphan: made by a process that then exits, never attached.
    let code = fork_run(|| {
        let ns = Namespace::open_at_as(&path, Access::Own).unwrap();
        let cred = ns.cred().unwrap();
        i32::from(ns.shmget(&cred, IPC_PRIVATE, 8192, 0o600).is_err())
    });
    assert_eq!(code, 0);
    let m = std::fs::symlink_metadata(seg.join("shm.1")).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o666));
    // Uid 1000's shmget reaps root's orphan first (shm_rmid_forced): root's
    // file, which the sticky directory keeps uid 1000 from unlinking, is
    // emptied; then uid 1000 makes its own segment, and removes it.
    let code = as_user(1000, || {
        let ns = Namespace::open_at_as(&path, Access::Shared).unwrap();
        let cred = ns.cred().unwrap();
        let Ok(id) = ns.shmget(&cred, IPC_PRIVATE, 4096, 0o600) else {
            return 1;
        };
        match std::fs::symlink_metadata(seg.join("shm.1")) {
            Ok(m) if (m.uid(), m.len(), m.blocks()) == (0, 0, 0) => {}
            _ => return 2,
        }
        match std::fs::symlink_metadata(seg.join("shm.2")) {
            Ok(m) if (m.uid(), m.mode() & 0o7777) == (1000, 0o666) => {}
            _ => return 3,
        }
        if ns.shmctl(&cred, id, IPC_RMID, ShmArg::None) != Ok(0) {
            return 4;
        }
        i32::from(seg.join("shm.2").exists()) * 5
    });
    assert_eq!(code, 0);
    // Root's emptied file alone is left, for the namespace's removal.
    let left: Vec<_> = std::fs::read_dir(&seg)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["shm.1"], "a leaked file");
    drop(ns);
    Namespace::remove_at(&path).unwrap();
    assert!(!seg.exists());

    // A segment directory someone else made is not the namespace's.
    let d = TempDir::with_mode("ipcns-sec-planted", 0o1777);
    let path = d.join("ipcns.p");
    let ns = Namespace::create_at(&path, small(0o600)).unwrap();
    let seg = ipcns::segment_dir_of(&path);
    let code = as_user(1000, || {
        std::fs::create_dir(&seg).unwrap();
        std::fs::set_permissions(&seg, std::fs::Permissions::from_mode(0o777)).unwrap();
        0
    });
    assert_eq!(code, 0);
    let root = ipcns::Cred::root(std::process::id() as i32);
    assert_eq!(
        ns.shmget(&root, IPC_PRIVATE, 4096, 0o600),
        Err(Errno::ENOMEM)
    );
    assert_eq!(std::fs::read_dir(&seg).unwrap().count(), 0);
    // Nor is it removed with the namespace.
    Namespace::remove_at(&path).unwrap();
    assert!(seg.exists());
}

#[test]
fn removing_takes_only_the_namespaces_files() {
    let d = TempDir::with_mode("ipcns-sec-remove", 0o700);
    let path = d.join("ipcns.r");
    let ns = Namespace::create_at(&path, small(0o600)).unwrap();
    let root = ipcns::Cred::root(std::process::id() as i32);
    ns.shmget(&root, IPC_PRIVATE, 4096, 0o600).unwrap();
    let seg = ipcns::segment_dir_of(&path);
    std::fs::write(seg.join("notes"), b"not a segment").unwrap();
    drop(ns);
    Namespace::remove_at(&path).unwrap();
    assert!(!path.exists() && !seg.join("shm.1").exists());
    assert!(seg.join("notes").exists());
    std::fs::remove_dir_all(&seg).unwrap();
    // A segment directory that is a link is not followed.
    let elsewhere = TempDir::with_mode("ipcns-sec-remove-target", 0o700);
    std::fs::write(elsewhere.join("shm.1"), b"keep").unwrap();
    drop(Namespace::create_at(&path, small(0o600)).unwrap());
    std::os::unix::fs::symlink(elsewhere.path(), &seg).unwrap();
    Namespace::remove_at(&path).unwrap();
    assert!(elsewhere.join("shm.1").exists());
    assert!(matches!(
        Namespace::remove_at(&path),
        Err(ArenaError::NotFound { .. })
    ));
}

#[test]
fn names_cannot_reach_other_namespaces_files() {
    let long = "n".repeat(200);
    for ok in ["default", "x.shm.1", "a-b_c.9", "x.dd", "tmp.1", &long] {
        assert!(check_name(ok).is_ok(), "{ok:?}");
    }
    let too_long = "n".repeat(201);
    for (bad, why) in [
        ("", "empty"),
        ("-x", "starts with '.' or '-'"),
        (".x", "starts with '.' or '-'"),
        ("x.d", "ends in '.d'"),
        ("a.tmp.b", "'.tmp.'"),
        ("a/b", "only letters"),
        ("../etc", "only letters"),
        ("x y", "only letters"),
        (&too_long, "longer than 200"),
    ] {
        // The name is checked before any directory is looked at.
        let e = path_of(bad).expect_err(bad);
        assert!(matches!(e, ArenaError::BadName { .. }), "{bad:?}: {e}");
        let s = e.to_string();
        assert!(
            s.starts_with(&format!("{bad:?}: invalid namespace name: ")) && s.contains(why),
            "{s}"
        );
        assert!(matches!(
            Namespace::create(bad, CreateOptions::default()),
            Err(ArenaError::BadName { .. })
        ));
    }
}

#[test]
fn a_missing_directory_is_named() {
    let d = TempDir::with_mode("ipcns-sec-missing", 0o700);
    let nowhere = d.join("nowhere");
    let p = nowhere.join("ipcns.x");
    for e in [
        Namespace::create_at(&p, small(0o600)).err().unwrap(),
        Namespace::open_at(&p).err().unwrap(),
    ] {
        assert!(
            matches!(&e, ArenaError::NoDir { dir } if *dir == nowhere),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            format!("{}: no such directory", nowhere.display())
        );
    }
    // Present directory, absent namespace.
    assert!(matches!(
        Namespace::open_at(&d.join("ipcns.x")),
        Err(ArenaError::NotFound { .. })
    ));
    let code = fork_run(|| {
        child_env("IPCNS_DIR", Some(nowhere.as_os_str()));
        let first = matches!(
            Namespace::open_or_create("x"),
            Err(ArenaError::NoDir { .. })
        );
        let list = matches!(Namespace::list(), Err(ArenaError::NoDir { .. }));
        i32::from(!first) + 2 * i32::from(!list)
    });
    assert_eq!(code, 0);
    assert!(!nowhere.exists());
}

/// A daemon closes every descriptor it did not open (faked-sysv does) and
/// opens files of its own, which take the lowest numbers free. The
/// namespace must go on working without a descriptor, and never touch the
/// program's file through a number that once was the arena's.
#[test]
fn descriptors_closed_by_the_program_are_not_ours() {
    let t = crate::support::TestNs::new("closefrom");
    let path = t.path().to_path_buf();
    let dir = std::env::temp_dir().join(format!("ipcns-closefrom-{}", std::process::id()));
    let file = dir.clone();
    assert_eq!(
        fork_run(move || {
            let ns = Namespace::open_at(&path).unwrap();
            let me = ipcns::Cred::root(std::process::id() as i32);
            let q = ns.msgget(&me, 0, 0o600).unwrap();
            crate::support::keep_only_fds(&[]);
            // The program's own file takes the lowest number free.
            let data = vec![b'A'; 8 << 20];
            std::fs::write(&file, &data).unwrap();
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&file)
                .unwrap();
            // Work that grows the heap (reserves pages) and frees big runs
            // (punches them), then a segment (the arena's owner and mode).
            for _ in 0..4 {
                let ids: Vec<i32> = (0..8)
                    .map(|_| ns.semget(&me, 0, 32000, 0o600).unwrap())
                    .collect();
                for id in ids {
                    ns.semctl(&me, id, 0, IPC_RMID, ipcns::sem::SemArg::None)
                        .unwrap();
                }
            }
            ns.msgsnd(&me, q, 1, &[7u8; 4000], 0).unwrap();
            let s = ns.shmget(&me, 0, 4096, 0o600).unwrap();
            ns.shmctl(&me, s, IPC_RMID, ShmArg::None).unwrap();
            drop(ns);
            drop(f);
            let after = std::fs::read(&file).unwrap();
            let _ = std::fs::remove_file(&file);
            i32::from(after != data)
        }),
        0,
        "the program's file was changed, or an operation failed"
    );
    let _ = std::fs::remove_file(&dir);
}

/// A shared namespace's segment directory is sticky: a participant cannot
/// move another's segment file aside, nor unlink it, to put a file of its
/// own under its name. A file put there all the same (in a directory an
/// earlier build made without the sticky bit) is refused by shmat (EIDRM):
/// shmget recorded the file's device and inode. A record with none
/// recorded (zeros, as an earlier build's) maps the file as before. The
/// owner's next shmget makes such a directory sticky. A user who removes
/// another's segment cannot unlink its file there: the file is emptied
/// (its pages freed) and its name left for the namespace's removal.
#[test]
fn segment_files_cannot_be_swapped() {
    const TEST: &str = "segment_files_cannot_be_swapped";
    use std::os::unix::fs::FileExt;
    if !kernel_or_skip(TEST) {
        return;
    }
    let d = TempDir::with_mode("ipcns-sec-swap", 0o755);
    let path = d.join("ipcns.sw");
    let ns = Namespace::create_at(&path, small(0o666)).unwrap();
    let seg = ipcns::segment_dir_of(&path);
    assert_eq!(mode_of(&seg), 0o1777);
    let root = ipcns::Cred::root(std::process::id() as i32);
    let id = ns.shmget(&root, IPC_PRIVATE, 8192, 0o666).unwrap();
    let file = seg.join("shm.1");
    let aside = seg.join("aside");
    let eperm = |r: std::io::Result<()>| r.is_err_and(|e| e.raw_os_error() == Some(libc::EPERM));
    let code = as_user(1000, || {
        i32::from(!eperm(std::fs::rename(&file, &aside)))
            + 2 * i32::from(!eperm(std::fs::remove_file(&file)))
    });
    assert_eq!(code, 0, "uid 1000 moved or removed root's segment file");
    // The directory as an earlier build made it: not sticky.
    std::fs::set_permissions(&seg, std::fs::Permissions::from_mode(0o777)).unwrap();
    let code = as_user(1000, || {
        std::fs::rename(&file, &aside).unwrap();
        let f = std::fs::File::create(&file).unwrap();
        f.write_all_at(b"uid 1000's", 0).unwrap();
        f.set_len(8192).unwrap();
        0
    });
    assert_eq!(code, 0);
    assert_eq!(ns.shmat(&root, id, 0, 0), Err(Errno::EIDRM));
    // A record without the file's identity (zeros): mapped unchecked.
    let words = ns
        .regions()
        .into_iter()
        .find(|r| r.name.starts_with("shm.slot[") && r.name.ends_with(".file"))
        .expect("the segment's file record");
    let arena = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut orig = [0u8; 16];
    arena.read_exact_at(&mut orig, words.off).unwrap();
    assert_ne!(orig, [0; 16]);
    arena.write_all_at(&[0; 16], words.off).unwrap();
    let a = ns.shmat(&root, id, 0, 0).unwrap();
    ns.shmdt(&root, a).unwrap();
    arena.write_all_at(&orig, words.off).unwrap();
    // Root's own file back under its name: mapped again.
    std::fs::rename(&aside, &file).unwrap();
    let a = ns.shmat(&root, id, 0, 0).unwrap();
    ns.shmdt(&root, a).unwrap();
    // The owner's next shmget makes the directory sticky again.
    let other = ns.shmget(&root, IPC_PRIVATE, 4096, 0o666).unwrap();
    assert_eq!(mode_of(&seg), 0o1777);
    // Root gives the segment to uid 1000 (IPC_SET), which removes it.
    let mut ds = ipcns::abi::shmid64_ds::default();
    ns.shmctl(&root, id, ipcns::abi::IPC_STAT, ShmArg::Ds(&mut ds))
        .unwrap();
    ds.shm_perm.uid = 1000;
    ns.shmctl(&root, id, ipcns::abi::IPC_SET, ShmArg::Ds(&mut ds))
        .unwrap();
    let code = as_user(1000, || {
        let ns = Namespace::open_at_as(&path, Access::Shared).unwrap();
        let cred = ns.cred().unwrap();
        i32::from(ns.shmctl(&cred, id, IPC_RMID, ShmArg::None) != Ok(0))
    });
    assert_eq!(code, 0);
    let m = std::fs::symlink_metadata(&file).expect("the file's name stays");
    assert_eq!((m.uid(), m.len(), m.blocks()), (0, 0, 0), "emptied");
    ns.shmctl(&root, other, IPC_RMID, ShmArg::None).unwrap();
    assert!(!seg.join("shm.2").exists());
    drop(ns);
    Namespace::remove_at(&path).unwrap();
    assert!(!seg.exists());
}
