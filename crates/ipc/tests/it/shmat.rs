//! shmat and shmdt: mappings that share bytes, the address rules, nattch
//! through attach, detach, fork, exit and SIGKILL, IPC_RMID while attached.
//!
//! Each test runs in a forked child: a fork inherits every attachment of
//! the process (as on Linux), so tests forking in parallel threads of one
//! process would count in each other's segments.

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::shm::ShmArg;
use ipcns::shm::attach::{SHM_RDONLY, SHM_REMAP, SHM_RND};
use ipcns::{Cred, Errno, Namespace};

fn stat(ns: &Namespace, c: &Cred, id: i32) -> shmid64_ds {
    let mut ds = shmid64_ds::default();
    ns.shmctl(c, id, IPC_STAT, ShmArg::Ds(&mut ds)).unwrap();
    ds
}

#[allow(unsafe_code)]
fn poke(addr: usize, at: usize, v: u8) {
    // SAFETY: `addr` is a live read-write attachment of at least `at + 1`
    // bytes (the tests attach 8192-byte segments).
    unsafe { *((addr + at) as *mut u8) = v };
}

#[allow(unsafe_code)]
fn peek(addr: usize, at: usize) -> u8 {
    // SAFETY: `addr` is a live attachment of at least `at + 1` bytes.
    unsafe { *((addr + at) as *const u8) }
}

#[test]
fn attach_share_detach() {
    assert_eq!(
        support::fork_run(|| {
            attach_share_detach_body();
            0
        }),
        0
    );
}

fn attach_share_detach_body() {
    let t = TestNs::new("shmat");
    let me = Cred::root(std::process::id() as i32);
    let id = t.ns.shmget(&me, 0x77, 8192, IPC_CREAT | 0o600).unwrap();
    assert_eq!(t.ns.shmat(&me, -1, 0, 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.shmat(&me, id + 1, 0, 0), Err(Errno::EINVAL));
    assert_eq!(t.ns.shmat(&me, id, 0, SHM_REMAP), Err(Errno::EINVAL));
    assert_eq!(t.ns.shmat(&me, id, 4097, 0), Err(Errno::EINVAL));
    let user = Cred::user(1, 1000, 1000, vec![]);
    assert_eq!(t.ns.shmat(&user, id, 0, 0), Err(Errno::EACCES));
    let a = t.ns.shmat(&me, id, 0, 0).unwrap();
    let b = t.ns.shmat(&me, id, 0, 0).unwrap();
    assert_ne!(a, b);
    poke(a, 100, 42);
    assert_eq!(peek(b, 100), 42);
    let ds = stat(&t.ns, &me, id);
    assert_eq!(ds.shm_nattch, 2);
    assert!(ds.shm_atime > 0);
    assert_eq!(ds.shm_lpid, me.pid);
    // Taken address without SHM_REMAP; with SHM_RND rounding down onto it.
    assert_eq!(t.ns.shmat(&me, id, a, 0), Err(Errno::EINVAL));
    // SHM_REMAP over our own attachment replaces it (still 2).
    let c = t.ns.shmat(&me, id, a + 5, SHM_RND | SHM_REMAP).unwrap();
    assert_eq!(c, a);
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 2);
    assert_eq!(t.ns.shmdt(&me, a + 1), Err(Errno::EINVAL));
    assert_eq!(t.ns.shmdt(&me, 4096), Err(Errno::EINVAL));
    assert_eq!(t.ns.shmdt(&me, b), Ok(0));
    assert_eq!(t.ns.shmdt(&me, b), Err(Errno::EINVAL));
    let ds = stat(&t.ns, &me, id);
    assert_eq!(ds.shm_nattch, 1);
    assert!(ds.shm_dtime > 0);
    // Removed while attached: SHM_DEST, key private, still attachable by
    // id; the last detach destroys it.
    t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None).unwrap();
    let ds = stat(&t.ns, &me, id);
    assert_eq!(ds.shm_perm.key, 0);
    assert_ne!(ds.shm_perm.mode & SHM_DEST, 0);
    assert_eq!(t.ns.shmget(&me, 0x77, 0, 0), Err(Errno::ENOENT));
    let d = t.ns.shmat(&me, id, 0, SHM_RDONLY).unwrap();
    assert_eq!(peek(d, 100), 42);
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 2);
    t.ns.shmdt(&me, d).unwrap();
    t.ns.shmdt(&me, a).unwrap();
    let mut ds = shmid64_ds::default();
    assert_eq!(
        t.ns.shmctl(&me, id, IPC_STAT, ShmArg::Ds(&mut ds)),
        Err(Errno::EINVAL)
    );
    t.ns.check().unwrap();
}

#[test]
fn read_only_attachments_fault_on_write() {
    assert_eq!(
        support::fork_run(|| {
            read_only_attachments_fault_on_write_body();
            0
        }),
        0
    );
}

fn read_only_attachments_fault_on_write_body() {
    let t = TestNs::new("shmat-ro");
    let me = Cred::root(std::process::id() as i32);
    let id = t.ns.shmget(&me, 0, 4096, IPC_CREAT | 0o600).unwrap();
    let ro = t.ns.shmat(&me, id, 0, SHM_RDONLY).unwrap();
    assert_eq!(
        support::fork_run(|| {
            poke(ro, 0, 1);
            0
        }),
        -libc::SIGSEGV
    );
    t.ns.shmdt(&me, ro).unwrap();
}

#[test]
fn nattch_follows_fork_exit_and_sigkill() {
    assert_eq!(
        support::fork_run(|| {
            nattch_follows_fork_exit_and_sigkill_body();
            0
        }),
        0
    );
}

fn nattch_follows_fork_exit_and_sigkill_body() {
    let t = TestNs::new("shmat-fork");
    let me = Cred::root(std::process::id() as i32);
    let id = t.ns.shmget(&me, 0, 8192, IPC_CREAT | 0o600).unwrap();
    let a = t.ns.shmat(&me, id, 0, 0).unwrap();
    // A child sees the segment at the same address and counts.
    let child = support::fork_child(|| {
        poke(a, 7, 9);
        std::thread::sleep(std::time::Duration::from_secs(30));
        0
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while stat(&t.ns, &me, id).shm_nattch != 2 || peek(a, 7) != 9 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child's attachment is not counted"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Killed: its attachment is dropped when next seen.
    support::kill(child);
    support::wait_child(child);
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 1);
    // A child that exits normally (dropping its namespace) detaches too.
    let path = t.path().to_path_buf();
    assert_eq!(
        support::fork_run(move || {
            let ns = Namespace::open_at(&path).unwrap();
            let c = Cred::root(std::process::id() as i32);
            match ns.shmat(&c, id, 0, 0) {
                Ok(_) => 0,
                Err(_) => 1,
            }
        }),
        0
    );
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 1);
    t.ns.shmdt(&me, a).unwrap();
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 0);
    t.ns.check().unwrap();
}

#[test]
fn nattch_counts_the_child_when_fork_returns() {
    assert_eq!(
        support::fork_run(|| {
            nattch_counts_the_child_when_fork_returns_body();
            0
        }),
        0
    );
}

/// Linux counts a fork child's attachments inside fork (`dup_mmap`), so
/// the parent sees them the moment fork returns, whatever the child does.
fn nattch_counts_the_child_when_fork_returns_body() {
    let t = TestNs::new("shmat-forkcount");
    let me = Cred::root(std::process::id() as i32);
    let id = t.ns.shmget(&me, 0, 4096, IPC_CREAT | 0o600).unwrap();
    let id2 = t.ns.shmget(&me, 0, 4096, IPC_CREAT | 0o600).unwrap();
    let a = t.ns.shmat(&me, id, 0, 0).unwrap();
    let b = t.ns.shmat(&me, id2, 0, SHM_RDONLY).unwrap();
    for round in 0..20 {
        let child = support::fork_child(|| {
            std::thread::sleep(std::time::Duration::from_secs(30));
            0
        });
        assert_eq!(stat(&t.ns, &me, id).shm_nattch, 2, "round {round}");
        assert_eq!(stat(&t.ns, &me, id2).shm_nattch, 2, "round {round}");
        assert_eq!(stat(&t.ns, &me, id).shm_lpid, std::process::id() as i32);
        support::kill(child);
        support::wait_child(child);
        assert_eq!(stat(&t.ns, &me, id).shm_nattch, 1, "round {round}");
    }
    // A child gone at once (`_exit`): counted once, uncounted by the reaper.
    let child = support::fork_child(|| 0);
    support::wait_child(child);
    t.ns.reap_exited().unwrap();
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 1);
    t.ns.shmdt(&me, a).unwrap();
    t.ns.shmdt(&me, b).unwrap();
    assert_eq!(stat(&t.ns, &me, id).shm_nattch, 0);
    assert_eq!(t.ns.problems().1, Vec::<String>::new());
}

#[test]
fn a_failed_fork_counts_nothing() {
    if !support::kernel_or_skip("shmat::a_failed_fork_counts_nothing (setuid and RLIMIT_NPROC)") {
        return;
    }
    // Made here, so that root removes it after the child dropped to nobody.
    let t = TestNs::new("shmat-forkfail");
    let path = t.path().to_path_buf();
    assert_eq!(
        support::fork_run(move || {
            let ns = Namespace::open_at(&path).unwrap();
            let me = Cred::root(std::process::id() as i32);
            let id = ns.shmget(&me, 0, 4096, IPC_CREAT | 0o666).unwrap();
            let a = ns.shmat(&me, id, 0, 0).unwrap();
            support::forbid_forks();
            support::drop_to(65534, 65534).unwrap();
            assert_eq!(support::failing_fork(), libc::EAGAIN);
            let me = Cred::user(std::process::id() as i32, 65534, 65534, vec![]);
            assert_eq!(stat(&ns, &me, id).shm_nattch, 1);
            ns.shmdt(&me, a).unwrap();
            assert_eq!(stat(&ns, &me, id).shm_nattch, 0);
            assert_eq!(ns.problems().1, Vec::<String>::new());
            0
        }),
        0
    );
    drop(t);
}

/// A segment's record whose size exceeds its file (a participant rewrote
/// `size` in the arena): shmat refuses it with EIDRM instead of mapping
/// pages past the file's end, whose first touch would be SIGBUS in the
/// attaching process; nor does it map anything but a regular file. With
/// the record and the file as shmget made them, the segment works again.
#[test]
fn a_record_larger_than_its_file_is_refused() {
    let code = support::fork_run(|| {
        use std::os::unix::fs::FileExt;
        let t = TestNs::on_disk("shm-oversize");
        let me = Cred::root(std::process::id() as i32);
        let id = t.ns.shmget(&me, 0, 8192, 0o600).unwrap();
        let slot =
            t.ns.regions()
                .into_iter()
                .find(|r| r.name.starts_with("shm.slot[") && r.name.ends_with(']'))
                .expect("the segment's slot");
        let arena = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        // `size` @96 (object.rs `ShmSlot`).
        let at = slot.off + 96;
        arena.write_all_at(&(1u64 << 20).to_ne_bytes(), at).unwrap();
        // IPC_STAT shows no more than the file holds.
        assert_eq!(stat(&t.ns, &me, id).shm_segsz, 8192);
        // Before the check, the victim died here touching the 3rd page.
        let victim = support::fork_run(|| match t.ns.shmat(&me, id, 0, 0) {
            Err(Errno::EIDRM) => 0,
            Err(e) => {
                eprintln!("shmat: {e:?}");
                1
            }
            Ok(a) => {
                let size = stat(&t.ns, &me, id).shm_segsz as usize;
                for at in (0..size).step_by(4096) {
                    poke(a, at, 1);
                }
                2
            }
        });
        assert_eq!(victim, 0, "shmat of an oversized record");
        // A size inside the file's last page maps: the page is backed.
        arena.write_all_at(&8000u64.to_ne_bytes(), at).unwrap();
        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        poke(a, 8191, 7);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        arena.write_all_at(&8192u64.to_ne_bytes(), at).unwrap();
        // The file replaced by a FIFO of the same name: not a segment.
        let file = ipcns::segment_dir_of(t.path()).join("shm.1");
        let saved = file.with_extension("saved");
        std::fs::rename(&file, &saved).unwrap();
        let c = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
        #[allow(unsafe_code)]
        // SAFETY: a NUL-terminated path that outlives the call.
        let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(r, 0);
        assert_eq!(t.ns.shmat(&me, id, 0, 0), Err(Errno::EIDRM));
        std::fs::remove_file(&file).unwrap();
        std::fs::rename(&saved, &file).unwrap();
        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        assert_eq!(peek(a, 8191), 7);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        0
    });
    assert_eq!(code, 0);
}
