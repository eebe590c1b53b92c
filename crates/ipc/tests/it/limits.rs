//! Resource limits the kernel's System V IPC does not feel and ipcns must
//! not either: an address space limit (RLIMIT_AS) smaller than the arena
//! file, which ipcns therefore maps only in part, growing the mapping in
//! place as offsets beyond it are needed (arena/map.rs); and the growth
//! failing (the room after the mapping taken), which is ENOMEM at the call
//! that needs it, never a fault.
//!
//! Each runs in a forked child (limits are per process), reporting over a
//! socket.
//!
//! # Safety
//! `limit_as` and `block_after` make plain system calls (setrlimit, mmap)
//! in forked children.
#![allow(unsafe_code)]

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Errno, Namespace};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

const GIB: u64 = 1 << 30;

/// `setrlimit(RLIMIT_AS, bytes)`.
fn limit_as(bytes: u64) {
    let r = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: a pointer to a live rlimit for the call; affects this
    // (forked) process only.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &r) }, 0);
}

/// The address ranges of this process mapping `path` (/proc/self/maps),
/// in order.
fn maps_of(path: &Path) -> Vec<(usize, usize)> {
    let name = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.ends_with(name))
        .map(|l| {
            let (a, b) = l.split(' ').next().unwrap().split_once('-').unwrap();
            (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            )
        })
        .collect()
}

/// Bytes of `path` this process has mapped.
fn mapped(path: &Path) -> u64 {
    maps_of(path).iter().map(|(a, b)| (b - a) as u64).sum()
}

fn op(v: i16) -> sembuf {
    sembuf {
        sem_num: 0,
        sem_op: v,
        sem_flg: 0,
    }
}

/// A set, a queue and a segment made and used, in namespace `ns`.
fn use_everything(ns: &Namespace, me: &Cred) -> Result<(), String> {
    let e = |what: &'static str| move |e: Errno| format!("{what}: {e:?}");
    let s = ns
        .semget(me, 0, 4, IPC_CREAT | 0o600)
        .map_err(e("semget"))?;
    ns.semop(me, s, &[op(2)]).map_err(e("semop"))?;
    ns.semop(me, s, &[op(-1)]).map_err(e("semop"))?;
    let v = ns
        .semctl(me, s, 0, GETVAL, SemArg::None)
        .map_err(e("GETVAL"))?;
    let q = ns.msgget(me, 0, IPC_CREAT | 0o600).map_err(e("msgget"))?;
    ns.msgsnd(me, q, 7, b"under the limit", 0)
        .map_err(e("msgsnd"))?;
    let mut buf = [0u8; 64];
    let (t, n) = ns.msgrcv(me, q, &mut buf, 0, 0).map_err(e("msgrcv"))?;
    let m = ns
        .shmget(me, 0, 4 << 20, IPC_CREAT | 0o600)
        .map_err(e("shmget"))?;
    let a = ns.shmat(me, m, 0, 0).map_err(e("shmat"))?;
    for at in (0..4 << 20).step_by(4096) {
        // SAFETY: a live read-write attachment of 4 MiB.
        unsafe { *((a + at) as *mut u8) = 1 };
    }
    ns.shmdt(me, a).map_err(e("shmdt"))?;
    for (id, r) in [
        (s, ns.semctl(me, s, 0, IPC_RMID, SemArg::None)),
        (q, ns.msgctl(me, q, IPC_RMID, ipcns::msg::MsgArg::None)),
        (m, ns.shmctl(me, m, IPC_RMID, ShmArg::None)),
    ] {
        r.map_err(|e| format!("IPC_RMID {id}: {e:?}"))?;
    }
    if (v, t, &buf[..n]) != (1, 7, &b"under the limit"[..]) {
        return Err(format!("read back {v}, {t}, {:?}", &buf[..n]));
    }
    Ok(())
}

/// Runs `body(report)` in a forked child, which must exit 0.
fn child(test: &str, body: impl FnOnce(&UnixStream) -> i32) {
    let (mut mine, theirs) = UnixStream::pair().unwrap();
    let pid = support::fork_child(move || body(&theirs));
    let status = support::wait_child_deadline(pid, std::time::Duration::from_secs(120));
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    let _ = writeln!(std::io::stderr(), "{test}: {status:?}\n{report}");
    assert_eq!(status, Ok(0), "{test}:\n{report}");
}

/// Under RLIMIT_AS of 1 GiB, set before the namespace is opened, a
/// process opens a namespace of the default size (a 4.3 GB file; 9 GB of
/// tables more in extend mode) and makes and uses a set, a queue and a
/// segment, as Linux serves it; it maps some tens of MiB of the arena.
/// (Before, the whole file was mapped: every call failed.)
#[test]
fn an_address_space_limit_of_1_gib_is_served() {
    for extend in [false, true] {
        let opts = CreateOptions {
            extend,
            ..CreateOptions::default()
        };
        let t = TestNs::in_dir(Path::new("/dev/shm"), "rlimit-as", opts);
        let path = t.path().to_path_buf();
        child("an_address_space_limit_of_1_gib_is_served", |out| {
            limit_as(GIB);
            let ns = match Namespace::open_at(&path) {
                Ok(ns) => ns,
                Err(e) => {
                    let _ = writeln!(&*out, "open: {e}");
                    return 1;
                }
            };
            let me = Cred::root(std::process::id() as i32);
            let r = use_everything(&ns, &me);
            let file = std::fs::metadata(&path).unwrap().len();
            let _ = writeln!(
                &*out,
                "extend {extend}: file {file} bytes, {} mapped: {r:?}",
                mapped(&path)
            );
            i32::from(r.is_err())
        });
    }
}

/// A process maps the arena and sleeps; another fills the heap far past
/// what the first has mapped (sets of 32000 semaphores, 250 KiB each);
/// the first reads the last set: its mapping grows in place to reach it,
/// under RLIMIT_AS of 1 GiB. Then the room after its mapping is taken (a
/// page mapped there): reading a set further still is ENOMEM, not a
/// fault, and the sets it has mapped still read.
#[test]
fn the_mapping_grows_in_place_when_the_heap_does() {
    let t = TestNs::in_dir(
        Path::new("/dev/shm"),
        "rlimit-grow",
        CreateOptions::default(),
    );
    let path = t.path().to_path_buf();
    let root = Cred::root(std::process::id() as i32);
    t.ns.sysctl_write(&root, "sem", "32000 1024000000 500 32000")
        .unwrap();
    let (mut go, go_child) = UnixStream::pair().unwrap();
    let (mut mine, theirs) = UnixStream::pair().unwrap();
    let p = path.clone();
    let pid = support::fork_child(move || {
        let say = |s: String| {
            let _ = writeln!(&theirs, "{s}");
        };
        limit_as(GIB);
        let ns = Namespace::open_at(&p).unwrap();
        let me = Cred::root(std::process::id() as i32);
        let first = ns.semget(&me, 0, 1, 0o600).unwrap();
        let before = mapped(&p);
        say(format!("mapped at first: {before}"));
        let mut go = go_child;
        let mut ids = [0u8; 8];
        // The other process's sets: the id of one past 80 MiB of heap, and
        // of the last, past 500 MiB.
        go.write_all(b"x").unwrap();
        go.read_exact(&mut ids).unwrap();
        let far = i32::from_ne_bytes(ids[..4].try_into().unwrap());
        let farther = i32::from_ne_bytes(ids[4..].try_into().unwrap());
        let mut vals = vec![0u16; 32000];
        let r = ns.semctl(&me, far, 0, GETALL, SemArg::Array(&mut &mut vals[..]));
        let after = mapped(&p);
        say(format!(
            "GETALL far: {r:?}, value {}, mapped {after}",
            vals[31999]
        ));
        if r != Ok(0) || vals[31999] != 3 || after <= before + (32 << 20) {
            return 1;
        }
        // Block the room after the mapping's end.
        let end = maps_of(&p).last().unwrap().1;
        // SAFETY: a new private page at a free address (NOREPLACE fails
        // rather than replace anything).
        let q = unsafe {
            libc::mmap(
                end as *mut libc::c_void,
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if q as usize != end {
            say(format!("cannot block the room after {end:#x}: {q:?}"));
            return 2;
        }
        let r = ns.semctl(&me, farther, 0, GETALL, SemArg::Array(&mut &mut vals[..]));
        say(format!("GETALL farther, room taken: {r:?}"));
        if r != Err(Errno::ENOMEM) {
            return 3;
        }
        let r = ns.semctl(&me, far, 0, GETALL, SemArg::Array(&mut &mut vals[..]));
        let r0 = ns.semctl(&me, first, 0, GETVAL, SemArg::None);
        say(format!("GETALL far again: {r:?}, first set {r0:?}"));
        i32::from(r != Ok(0) || r0 != Ok(0)) * 4
    });
    let mut byte = [0u8; 1];
    go.read_exact(&mut byte).unwrap();
    let ids: Vec<i32> = (0..(512 << 20) / (32000 * 8))
        .map(|_| t.ns.semget(&root, 0, 32000, 0o600).unwrap())
        .collect();
    let (far, farther) = (ids[(80 << 20) / (32000 * 8)], *ids.last().unwrap());
    let mut vals = vec![3u16; 32000];
    t.ns.semctl(&root, far, 0, SETALL, SemArg::Array(&mut &mut vals[..]))
        .unwrap();
    go.write_all(&[far.to_ne_bytes(), farther.to_ne_bytes()].concat())
        .unwrap();
    let status = support::wait_child_deadline(pid, std::time::Duration::from_secs(120));
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    let _ = writeln!(std::io::stderr(), "growth: {status:?}\n{report}");
    assert_eq!(status, Ok(0), "{report}");
}
