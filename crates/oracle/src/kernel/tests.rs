//! [`Host`]'s `*ctl` arguments: a wrong kind is EFAULT without a system
//! call, and GETALL/SETALL never let the kernel past the caller's slice.
//!
//! The kernel part runs in a forked child that enters a fresh IPC
//! namespace (root needed), so the host's objects are never touched; it
//! prints SKIPPED when it cannot (a failure with IPCNS_REQUIRE_KERNEL=1).
//!
//! # Safety
//! `fork` of the multi-threaded test process: the child runs only its
//! closure (which uses no lock another thread of this binary can hold: the
//! other test never reaches the scratch) and `_exit`s; `waitpid` waits for
//! that child with a valid status pointer.

use super::*;

/// `IPC_PRIVATE` (include/uapi/linux/ipc.h).
const IPC_PRIVATE: i32 = 0;

/// A value followed by bytes that no call may change.
#[repr(C)]
struct Fenced<T> {
    val: T,
    fence: [u8; 256],
}

impl<T> Fenced<T> {
    fn new(val: T) -> Self {
        Fenced {
            val,
            fence: [0xA5; 256],
        }
    }

    fn intact(&self) -> bool {
        self.fence.iter().all(|&b| b == 0xA5)
    }
}

/// With a negative id the kernel would answer EINVAL before anything else
/// (`ksys_semctl`: "if (semid < 0) return -EINVAL", and likewise for msg
/// and shm); EFAULT shows the kernel was never asked. Safe anywhere.
#[test]
fn wrong_kind_is_efault_without_a_system_call() {
    let h = Host;
    let mut info = Fenced::new(seminfo::default());
    assert_eq!(
        h.semctl(-1, 0, IPC_STAT, SemArg::Info(&mut info.val)),
        Err(Errno::EFAULT)
    );
    assert!(info.intact());
    let mut ds = semid64_ds::default();
    assert_eq!(
        h.semctl(-1, 0, SEM_INFO, SemArg::Ds(&mut ds)),
        Err(Errno::EFAULT)
    );
    assert_eq!(h.semctl(-1, 0, GETALL, SemArg::None), Err(Errno::EFAULT));
    assert_eq!(h.semctl(-1, 0, SETALL, SemArg::Val(1)), Err(Errno::EFAULT));
    assert_eq!(
        h.semctl(-1, 0, SETVAL, SemArg::Ds(&mut ds)),
        Err(Errno::EFAULT)
    );
    let mut mi = Fenced::new(msginfo::default());
    assert_eq!(
        h.msgctl(-1, IPC_STAT, MsgArg::Info(&mut mi.val)),
        Err(Errno::EFAULT)
    );
    assert!(mi.intact());
    let mut si = Fenced::new(shminfo64::default());
    assert_eq!(
        h.shmctl(-1, SHM_INFO, ShmArg::Info(&mut si.val)),
        Err(Errno::EFAULT)
    );
    assert!(si.intact());
    // Commands that read no argument still reach the kernel.
    assert_eq!(h.semctl(-1, 0, IPC_RMID, SemArg::None), Err(Errno::EINVAL));
    assert_eq!(h.shmctl(-1, IPC_RMID, ShmArg::None), Err(Errno::EINVAL));
}

/// Runs `f` in a forked child; its exit code (101 if it panicked, `-sig`
/// if killed).
fn fork_run(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: see the module doc.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: ends the child at once, without unwinding into the harness.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    }
}

const SKIP: i32 = 77;

/// In a fresh kernel IPC namespace: wrong kinds against live objects (the
/// kernel would write 104 bytes into a 40-byte `seminfo`), and GETALL and
/// SETALL with slices shorter and longer than the set.
#[test]
fn kernel_never_copies_past_the_argument() {
    let code = fork_run(|| {
        if unshare_ipc().is_err() {
            return SKIP;
        }
        let h = Host;
        let id = h.semget(IPC_PRIVATE, 3, 0o600).unwrap();

        // IPC_STAT copies a semid64_ds (104 bytes): not into a seminfo.
        let mut info = Fenced::new(seminfo::default());
        assert_eq!(
            h.semctl(id, 0, IPC_STAT, SemArg::Info(&mut info.val)),
            Err(Errno::EFAULT)
        );
        assert!(info.intact());
        assert_eq!(
            h.semctl(id, 0, IPC_SET, SemArg::Array(&mut [0; 64])),
            Err(Errno::EFAULT)
        );

        // GETALL of 3 values into 1: EFAULT, and nothing written.
        let mut one = Fenced::new([7u16; 1]);
        assert_eq!(
            h.semctl(id, 0, GETALL, SemArg::Array(&mut one.val)),
            Err(Errno::EFAULT)
        );
        assert_eq!(one.val, [7]);
        assert!(one.intact());
        assert_eq!(
            h.semctl(id, 0, GETALL, SemArg::Array(&mut [])),
            Err(Errno::EFAULT)
        );

        // SETALL of 3 values from 2: EFAULT, and the set unchanged.
        let mut two = [5u16, 6];
        assert_eq!(
            h.semctl(id, 0, SETALL, SemArg::Array(&mut two)),
            Err(Errno::EFAULT)
        );
        let mut three = [9u16; 3];
        assert_eq!(h.semctl(id, 0, GETALL, SemArg::Array(&mut three)), Ok(0));
        assert_eq!(three, [0, 0, 0]);

        // Exact and longer slices: SETALL uses the first nsems values,
        // GETALL leaves the rest as it was.
        assert_eq!(
            h.semctl(id, 0, SETALL, SemArg::Array(&mut [1, 2, 3, 4])),
            Ok(0)
        );
        let mut five = [9u16; 5];
        assert_eq!(h.semctl(id, 0, GETALL, SemArg::Array(&mut five)), Ok(0));
        assert_eq!(five, [1, 2, 3, 9, 9]);
        assert_eq!(h.semctl(id, 2, GETVAL, SemArg::None), Ok(3));
        assert_eq!(h.semctl(id, 0, IPC_RMID, SemArg::None), Ok(0));

        // A set past the kernel's on-stack buffer (SEMMSL_FAST, 256).
        let big = h.semget(IPC_PRIVATE, 300, 0o600).unwrap();
        let mut vals: Vec<u16> = (0..300).collect();
        assert_eq!(
            h.semctl(big, 0, SETALL, SemArg::Array(&mut &mut vals[..299])),
            Err(Errno::EFAULT)
        );
        assert_eq!(h.semctl(big, 0, SETALL, SemArg::Array(&mut vals)), Ok(0));
        let mut got = vec![0u16; 299];
        assert_eq!(
            h.semctl(big, 0, GETALL, SemArg::Array(&mut got)),
            Err(Errno::EFAULT)
        );
        assert!(got.iter().all(|&v| v == 0));
        let mut got = vec![0u16; 300];
        assert_eq!(h.semctl(big, 0, GETALL, SemArg::Array(&mut got)), Ok(0));
        assert_eq!(got, vals);

        // Queues and segments: the structure of another command.
        let q = h.msgget(IPC_PRIVATE, 0o600).unwrap();
        let mut mi = Fenced::new(msginfo::default());
        assert_eq!(
            h.msgctl(q, IPC_STAT, MsgArg::Info(&mut mi.val)),
            Err(Errno::EFAULT)
        );
        assert!(mi.intact());
        let m = h.shmget(IPC_PRIVATE, 4096, 0o600).unwrap();
        let mut si = Fenced::new(shm_info::default());
        assert_eq!(
            h.shmctl(m, IPC_INFO, ShmArg::ShmInfo(&mut si.val)),
            Err(Errno::EFAULT)
        );
        assert!(si.intact());
        let mut s64 = Fenced::new(shminfo64::default());
        assert_eq!(
            h.shmctl(m, SHM_INFO, ShmArg::Info(&mut s64.val)),
            Err(Errno::EFAULT)
        );
        assert!(s64.intact());
        let mut sds = Fenced::new(shmid64_ds::default());
        assert_eq!(h.shmctl(m, IPC_STAT, ShmArg::Ds(&mut sds.val)), Ok(0));
        assert_eq!(sds.val.shm_segsz, 4096);
        assert!(sds.intact());
        0
    });
    if code == SKIP {
        let why = "unshare(CLONE_NEWIPC) failed: this test needs root";
        if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("IPCNS_REQUIRE_KERNEL=1 but {why}");
        }
        eprintln!("SKIPPED kernel_never_copies_past_the_argument: {why}");
        return;
    }
    assert_eq!(code, 0, "the kernel child failed");
}

/// `semtimedop` through [`Host`], in a fresh kernel IPC namespace: the
/// kernel reads exactly the slice (a sub-slice's length is `nsops`), a
/// timeout or none, and the errnos of the early checks.
#[test]
fn semtimedop_reads_the_slice_and_the_timeout() {
    let code = fork_run(|| {
        if unshare_ipc().is_err() {
            return SKIP;
        }
        let h = Host;
        let id = h.semget(IPC_PRIVATE, 2, 0o600).unwrap();
        let op = |n, v, f: i32| sembuf {
            sem_num: n,
            sem_op: v,
            sem_flg: f as i16,
        };
        // Only the first two entries are the call's: the third would fail
        // with EFBIG.
        let sops = [op(0, 2, 0), op(1, 1, 0), op(7, 1, 0)];
        assert_eq!(h.semop(id, &sops[..2]), Ok(0));
        assert_eq!(h.semctl(id, 0, GETVAL, SemArg::None), Ok(2));
        assert_eq!(h.semop(id, &sops), Err(Errno::EFBIG));
        assert_eq!(h.semop(id, &[]), Err(Errno::EINVAL));
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        assert_eq!(
            h.semtimedop(id, &[op(1, -2, 0)], Some(&zero)),
            Err(Errno::EAGAIN)
        );
        let bad = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000_000,
        };
        assert_eq!(
            h.semtimedop(id, &[op(1, -1, 0)], Some(&bad)),
            Err(Errno::EINVAL)
        );
        assert_eq!(h.semtimedop(id, &[op(1, -1, 0)], Some(&zero)), Ok(0));
        assert_eq!(
            h.semop(id, &[op(0, -1, IPC_NOWAIT), op(1, -1, IPC_NOWAIT)]),
            Err(Errno::EAGAIN)
        );
        assert_eq!(h.semctl(id, 0, GETVAL, SemArg::None), Ok(2));
        0
    });
    if code == SKIP {
        let why = "unshare(CLONE_NEWIPC) failed: this test needs root";
        if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
            panic!("IPCNS_REQUIRE_KERNEL=1 but {why}");
        }
        eprintln!("SKIPPED semtimedop_reads_the_slice_and_the_timeout: {why}");
        return;
    }
    assert_eq!(code, 0, "the kernel child failed");
}
