//! The segment pool (`shm/pool.rs`): segments carved from one sparse file
//! of the namespace on a tmpfs, their pages given back at destruction,
//! records a participant rewrote, a descriptor the program closed or
//! replaced, and a shared namespace's pool used by another user.
//!
//! Each test runs in a forked child (attachments are per process, and the
//! pool's descriptor is cached per process).
#![allow(unsafe_code)]

use crate::support::{self, TestNs, drop_to, fork_run, kernel_or_skip};
use ipcns::abi::*;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Errno, Namespace};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `IPC_PRIVATE`.
const IPC_PRIVATE: i32 = 0;

fn stat(ns: &Namespace, c: &Cred, id: i32) -> shmid64_ds {
    let mut ds = shmid64_ds::default();
    ns.shmctl(c, id, IPC_STAT, ShmArg::Ds(&mut ds)).unwrap();
    ds
}

fn poke(addr: usize, at: usize, v: u8) {
    // SAFETY: `addr` is a live read-write attachment longer than `at`.
    unsafe { *((addr + at) as *mut u8) = v };
}

fn peek(addr: usize, at: usize) -> u8 {
    // SAFETY: `addr` is a live attachment longer than `at`.
    unsafe { *((addr + at) as *const u8) }
}

/// Bytes the pool file holds allocated.
fn pool_bytes(arena: &Path) -> u64 {
    std::fs::symlink_metadata(ipcns::segment_dir_of(arena).join("shm.pool"))
        .map_or(0, |m| m.blocks() * 512)
}

/// The names in the segment directory.
fn names(arena: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(ipcns::segment_dir_of(arena))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Whether /dev/shm is a tmpfs, where the pool lives (else the test says
/// so and is skipped).
fn tmpfs_or_skip(test: &str) -> bool {
    let c = c"/dev/shm";
    // SAFETY: plain data, all zeros valid.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the structure's size
    // for the call.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut s) };
    let ok = r == 0 && s.f_type == libc::TMPFS_MAGIC;
    if !ok {
        eprintln!("SKIPPED {test}: /dev/shm is not a tmpfs");
    }
    ok
}

/// The arena offset of the record of the only live segment.
fn slot_of(ns: &Namespace) -> u64 {
    ns.regions()
        .into_iter()
        .find(|r| r.name.starts_with("shm.slot[") && r.name.ends_with(']'))
        .expect("the segment's slot")
        .off
}

/// A segment's pages are the pool's: no file is made for it, its pages
/// are allocated at the first shmat (SHM_NORESERVE: not), shared by every
/// attachment, kept while attached after IPC_RMID, and given back at the
/// last detach. A segment too large for the pool gets a file of its own.
#[test]
fn segments_live_in_the_pool_and_give_their_pages_back() {
    const TEST: &str = "segments_live_in_the_pool_and_give_their_pages_back";
    if !tmpfs_or_skip(TEST) {
        return;
    }
    let code = fork_run(|| {
        let t = TestNs::with("pool-pages", CreateOptions::default());
        let me = Cred::root(std::process::id() as i32);
        let id = t.ns.shmget(&me, IPC_PRIVATE, 1 << 20, 0o600).unwrap();
        assert_eq!(names(t.path()), ["shm.pool"]);
        // The pages come with the first shmat, all of them.
        let made = pool_bytes(t.path());
        assert!(made < 1 << 20, "shmget allocated {made} bytes");
        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        let base = pool_bytes(t.path());
        assert!(
            base >= made + (1 << 20),
            "shmat allocated {base} - {made} bytes"
        );
        let b = t.ns.shmat(&me, id, 0, 0).unwrap();
        assert_eq!(pool_bytes(t.path()), base);
        poke(a, (1 << 20) - 1, 42);
        assert_eq!(peek(b, (1 << 20) - 1), 42);
        assert_eq!(stat(&t.ns, &me, id).shm_segsz, 1 << 20);
        assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        // Still attached once: the pages stay, and keep what was written.
        assert_eq!(peek(b, (1 << 20) - 1), 42);
        assert!(pool_bytes(t.path()) >= 1 << 20);
        assert_eq!(t.ns.shmdt(&me, b), Ok(0));
        let after = pool_bytes(t.path());
        assert!(
            after + (1 << 20) <= base,
            "the pages stayed: {base} then {after}"
        );
        // SHM_NORESERVE: nothing allocated until touched.
        let id =
            t.ns.shmget(&me, IPC_PRIVATE, 8 << 20, SHM_NORESERVE | 0o600)
                .unwrap();
        assert!(pool_bytes(t.path()) < after + (1 << 20));
        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        poke(a, 5 << 20, 1);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        // Larger than the pool holds (3.5 GiB): a sparse file of its own.
        let big =
            t.ns.shmget(&me, IPC_PRIVATE, 4 << 30, SHM_NORESERVE | 0o600)
                .unwrap();
        assert!(names(t.path()).iter().any(|n| n != "shm.pool"));
        let a = t.ns.shmat(&me, big, 0, 0).unwrap();
        poke(a, (4 << 30) - 1, 9);
        assert_eq!(peek(a, (4 << 30) - 1), 9);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        assert_eq!(t.ns.shmctl(&me, big, IPC_RMID, ShmArg::None), Ok(0));
        assert_eq!(names(t.path()), ["shm.pool"]);
        assert_eq!(t.ns.problems().1, Vec::<String>::new());
        0
    });
    assert_eq!(code, 0);
}

/// Rewritten records (a faulty or hostile participant): a size larger
/// than shmget gave shows and maps only the pool's own size, so a caller
/// sized by IPC_STAT never writes past its attachment; a range that is
/// another segment's, or none of the pool's, is EIDRM at shmat and never
/// that segment's bytes; a record that lost its mark names no file. Put
/// back, the segment works as before.
#[test]
fn rewritten_records_never_reach_past_the_segment() {
    const TEST: &str = "rewritten_records_never_reach_past_the_segment";
    if !tmpfs_or_skip(TEST) {
        return;
    }
    let code = fork_run(|| {
        let t = TestNs::with("pool-hostile", CreateOptions::default());
        let me = Cred::root(std::process::id() as i32);
        let id = t.ns.shmget(&me, IPC_PRIVATE, 8192, 0o600).unwrap();
        let at = slot_of(&t.ns);
        let arena = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        let read = |off: u64| {
            let mut b = [0u8; 8];
            arena.read_exact_at(&mut b, at + off).unwrap();
            u64::from_ne_bytes(b)
        };
        let write = |off: u64, v: u64| arena.write_all_at(&v.to_ne_bytes(), at + off).unwrap();
        // The head's spare words @80 and @88, the size @96 (object.rs).
        let (range, mark, size) = (read(80), read(88), read(96));
        assert_eq!(size, 8192);
        // A second segment, with bytes of its own.
        let other = t.ns.shmget(&me, 77, 4096, IPC_CREAT | 0o600).unwrap();
        let o = t.ns.shmat(&me, other, 0, 0).unwrap();
        poke(o, 0, 0x5a);

        write(96, 1 << 30);
        assert_eq!(stat(&t.ns, &me, id).shm_segsz, 8192);
        let victim = support::fork_run(|| match t.ns.shmat(&me, id, 0, 0) {
            Ok(a) => {
                let size = stat(&t.ns, &me, id).shm_segsz as usize;
                for p in (0..size).step_by(4096) {
                    poke(a, p, 1);
                }
                // Mapped as shmget made it: 8 KiB, not the record's 1 GiB.
                let mapped = mapping_len(a);
                if mapped != Some(8192) {
                    eprintln!("mapped {mapped:?}");
                    return 3;
                }
                i32::from(size != 8192)
            }
            Err(e) => {
                eprintln!("shmat: {e:?}");
                2
            }
        });
        assert_eq!(victim, 0, "a victim sized by IPC_STAT");
        write(96, size);

        // The other segment's range (ids 0 and 1 here: one range apart).
        for bad in [
            range + (1 << 32),
            range.wrapping_sub(1 << 32),
            range + 4096,
            0,
            u64::MAX,
        ] {
            write(80, bad);
            match t.ns.shmat(&me, id, 0, 0) {
                Err(Errno::EIDRM) => {}
                Ok(a) => panic!("range {bad:#x} mapped, byte 0 = {:#x}", peek(a, 0)),
                Err(e) => panic!("range {bad:#x}: {e:?}"),
            }
        }
        write(80, range);
        // The mark gone: a record naming a file that is not there.
        write(88, 0);
        assert_eq!(t.ns.shmat(&me, id, 0, 0), Err(Errno::EIDRM));
        write(88, mark);

        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        poke(a, 8191, 3);
        assert_eq!(peek(a, 8191), 3);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        assert_eq!(peek(o, 0), 0x5a);
        assert_eq!(t.ns.shmdt(&me, o), Ok(0));
        assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        assert_eq!(t.ns.shmctl(&me, other, IPC_RMID, ShmArg::None), Ok(0));
        0
    });
    assert_eq!(code, 0);
}

/// The length of the mapping that starts at `addr` (/proc/self/maps).
fn mapping_len(addr: usize) -> Option<usize> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let (range, _) = l.split_once(' ')?;
        let (from, to) = range.split_once('-')?;
        let from = usize::from_str_radix(from, 16).ok()?;
        (from == addr).then(|| Some(usize::from_str_radix(to, 16).ok()? - from))?
    })
}

/// The number of this process's descriptor on the pool of `arena`.
fn pool_fd(arena: &Path) -> Option<i32> {
    let pool = ipcns::segment_dir_of(arena).join("shm.pool");
    std::fs::read_dir("/proc/self/fd").ok()?.find_map(|e| {
        let e = e.ok()?;
        let to = std::fs::read_link(e.path()).ok()?;
        (to == pool).then(|| e.file_name().to_str()?.parse().ok())?
    })
}

/// The program closes the library's descriptor on the pool, then puts a
/// file of its own under the number: shmget, shmat, IPC_STAT and IPC_RMID
/// go on working through a descriptor opened again, and the program's
/// file is neither written nor closed.
#[test]
fn a_descriptor_the_program_took_over_is_left_alone() {
    const TEST: &str = "a_descriptor_the_program_took_over_is_left_alone";
    if !tmpfs_or_skip(TEST) {
        return;
    }
    let code = fork_run(|| {
        let t = TestNs::with("pool-fd", CreateOptions::default());
        let me = Cred::root(std::process::id() as i32);
        let cycle = |n: usize| {
            let id = t.ns.shmget(&me, IPC_PRIVATE, 4096, 0o600).unwrap();
            let a = t.ns.shmat(&me, id, 0, 0).unwrap();
            poke(a, 4095, n as u8);
            assert_eq!(stat(&t.ns, &me, id).shm_segsz, 4096);
            assert_eq!(t.ns.shmdt(&me, a), Ok(0));
            assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        };
        cycle(1);
        let fd = pool_fd(t.path()).expect("the pool is open");
        // Closed behind the library's back (closefrom).
        // SAFETY: closes a number; the library must cope.
        assert_eq!(unsafe { libc::close(fd) }, 0);
        cycle(2);
        // A file of the program's under the pool's old number.
        let fd = pool_fd(t.path()).expect("the pool is open again");
        let theirs = std::env::temp_dir().join(format!("ipcns-pool-fd-{}", std::process::id()));
        std::fs::write(&theirs, b"the program's").unwrap();
        let f = std::fs::File::open(&theirs).unwrap();
        let from = std::os::fd::AsRawFd::as_raw_fd(&f);
        // SAFETY: dup2 onto a number the program takes over, as a program
        // that does not know the library may.
        let r = unsafe { libc::dup2(from, fd) };
        assert_eq!(r, fd);
        for n in 3..6 {
            cycle(n);
        }
        let m = std::fs::metadata(&theirs).unwrap();
        let content = std::fs::read(&theirs).unwrap();
        let still = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        let _ = std::fs::remove_file(&theirs);
        assert_eq!((m.len(), content.as_slice()), (13, &b"the program's"[..]));
        assert_eq!(still, theirs, "the program's descriptor was closed");
        0
    });
    assert_eq!(code, 0);
}

/// A shared namespace made on a tmpfs has its pool from the start, the
/// owner's, with the arena's mode; another user's segments live in it
/// (no file of theirs), and the namespace's removal takes it.
#[test]
fn a_shared_namespaces_pool_serves_every_participant() {
    const TEST: &str = "a_shared_namespaces_pool_serves_every_participant";
    if !tmpfs_or_skip(TEST) || !kernel_or_skip(TEST) {
        return;
    }
    let dir = PathBuf::from(format!("/dev/shm/ipcns-pool-shared-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("ipcns.shared");
    let opts = CreateOptions {
        heap_size: 1 << 20,
        mode: 0o666,
        ..CreateOptions::default()
    };
    let ns = Namespace::create_at(&path, opts).unwrap();
    let pool = ipcns::segment_dir_of(&path).join("shm.pool");
    let m = std::fs::symlink_metadata(&pool).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o666));
    let code = fork_run(|| {
        drop_to(1000, 1000).expect("drop privileges");
        let ns = Namespace::open_at_as(&path, ipcns::namespace::Access::Shared).unwrap();
        let cred = ns.cred().unwrap();
        let Ok(id) = ns.shmget(&cred, IPC_PRIVATE, 64 << 10, 0o600) else {
            return 1;
        };
        if names(&path) != ["shm.pool"] {
            return 2;
        }
        let Ok(a) = ns.shmat(&cred, id, 0, 0) else {
            return 3;
        };
        poke(a, 1000, 7);
        if ns.shmdt(&cred, a) != Ok(0) || ns.shmctl(&cred, id, IPC_RMID, ShmArg::None) != Ok(0) {
            return 4;
        }
        0
    });
    assert_eq!(code, 0);
    drop(ns);
    Namespace::remove_at(&path).unwrap();
    assert!(!ipcns::segment_dir_of(&path).exists());
    std::fs::remove_dir(&dir).unwrap();
}
