//! The host kernel's own System V IPC, and the namespace calls around it
//! (`setns`, `unshare`): for the oracle of the differential tests and the
//! benchmarks' baseline, which ask the kernel what ipcns answers. The core
//! never calls these (it *is* System V IPC, in user space).
//!
//! Results are the kernel's: the value the system call returned (cast to
//! the C prototype's type) or its errno, with no retry.
//!
//! # Safety
//! `semget`, `msgget`, `shmget`, `setns` and `unshare_ipc` take integers
//! and a borrowed descriptor only. `semtimedop` passes a borrowed slice
//! with its own length (the kernel reads at most `nsops` entries, writes
//! none) and a borrowed timeout; `msgsnd` and `msgrcv` a [`MsgBuf`] whose
//! room the size given never exceeds (checked). Those are safe. The
//! `*ctl` calls take one word that the kernel reads as a pointer or as an
//! integer depending on the command, `shmat` may map over the caller's
//! memory (SHM_REMAP), `shmdt` unmaps, `unshare(CLONE_FILES)` splits the
//! descriptor table: those are `unsafe fn`, and their callers vouch.

#![allow(unsafe_code)]

use super::raw::{syscall1, syscall2, syscall3, syscall4, syscall5};
use crate::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `semget(key, nsems, semflg)`: semget(2); ipc/sem.c `ksys_semget`.
pub fn semget(key: i32, nsems: i32, semflg: i32) -> Result<i32, Errno> {
    // SAFETY: integers only.
    unsafe {
        syscall3(
            libc::SYS_semget,
            key as usize,
            nsems as usize,
            semflg as usize,
        )
    }
    .map(|r| r as i32)
}

/// `semctl(semid, semnum, cmd, arg)`: semctl(2); ipc/sem.c `ksys_semctl`.
///
/// # Safety
/// `arg` is what `cmd` reads it as: an integer for a command that reads
/// and writes no user memory (SETVAL's value, 0 for the rest), else the
/// address of the structure (`semid64_ds`, `seminfo`) or array of
/// `unsigned short` (GETALL, SETALL: one per semaphore of the set, which
/// the caller cannot know race-free) the command copies, writable for the
/// call where the command writes it.
pub unsafe fn semctl(semid: i32, semnum: i32, cmd: i32, arg: usize) -> Result<i32, Errno> {
    // SAFETY: the caller vouches for `arg` (above).
    unsafe {
        syscall4(
            libc::SYS_semctl,
            semid as usize,
            semnum as usize,
            cmd as usize,
            arg,
        )
    }
    .map(|r| r as i32)
}

/// `semtimedop(semid, sops, nsops, timeout)`: semop(2); ipc/sem.c
/// `ksys_semtimedop`, `do_semtimedop`. `nsops` is the slice's length,
/// truncated as the kernel's `unsigned int` takes it (never more entries
/// than the slice holds); `None` waits without a limit.
pub fn semtimedop(
    semid: i32,
    sops: &[libc::sembuf],
    timeout: Option<&libc::timespec>,
) -> Result<i32, Errno> {
    let nsops = sops.len().min(u32::MAX as usize);
    let ts = timeout.map_or(core::ptr::null(), core::ptr::from_ref);
    // SAFETY: `sops` is borrowed for the call and holds at least `nsops`
    // entries of the kernel's `struct sembuf` (libc's), which the kernel
    // only reads; `ts` is NULL or a borrowed timespec (the one this
    // system call takes on the target) it only reads.
    unsafe {
        syscall4(
            libc::SYS_semtimedop,
            semid as usize,
            sops.as_ptr() as usize,
            nsops,
            ts as usize,
        )
    }
    .map(|r| r as i32)
}

/// `msgget(key, msgflg)`: msgget(2); ipc/msg.c `ksys_msgget`.
pub fn msgget(key: i32, msgflg: i32) -> Result<i32, Errno> {
    // SAFETY: integers only.
    unsafe { syscall2(libc::SYS_msgget, key as usize, msgflg as usize) }.map(|r| r as i32)
}

/// A `struct msgbuf` (msgop(2)): `long mtype`, then room for the text, in
/// 8-byte words (so the `long` is aligned).
#[derive(Debug, Clone)]
pub struct MsgBuf {
    /// `mtype` in word 0, the text after it.
    words: Vec<i64>,
}

impl MsgBuf {
    /// An `mtype` of 0 and room for at least `cap` bytes of text, zeroed.
    pub fn new(cap: usize) -> MsgBuf {
        MsgBuf {
            words: vec![0; 1 + cap.div_ceil(8)],
        }
    }

    /// The room for text, in bytes (`cap` rounded up to 8).
    pub fn cap(&self) -> usize {
        (self.words.len() - 1) * 8
    }

    pub fn mtype(&self) -> i64 {
        self.words[0]
    }

    pub fn set_mtype(&mut self, mtype: i64) {
        self.words[0] = mtype;
    }

    /// The text's room.
    pub fn text(&self) -> &[u8] {
        let words = &self.words[1..];
        // SAFETY: the words are plain integers, initialised, borrowed for
        // the slice's life; any byte is a valid u8, which needs no
        // alignment.
        unsafe { core::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
    }

    /// The text's room, to fill.
    pub fn text_mut(&mut self) -> &mut [u8] {
        let words = &mut self.words[1..];
        // SAFETY: as in `text`, borrowed mutably: any bytes written make
        // valid integers.
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
    }
}

/// `msgsnd(msqid, msgp, msgsz, msgflg)`: msgop(2); ipc/msg.c
/// `ksys_msgsnd`. The kernel reads `mtype` and `msgsz` bytes after it; a
/// `msgsz` past the buffer's room fails with EFAULT before the kernel is
/// asked (as a buffer that short would, read past its end).
pub fn msgsnd(msqid: i32, msg: &MsgBuf, msgsz: usize, msgflg: i32) -> Result<(), Errno> {
    if msgsz > msg.cap() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: `msg` holds an mtype and at least `msgsz` bytes after it, all
    // the kernel reads; it is borrowed across the call.
    unsafe {
        syscall4(
            libc::SYS_msgsnd,
            msqid as usize,
            msg.words.as_ptr() as usize,
            msgsz,
            msgflg as usize,
        )
    }
    .map(drop)
}

/// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)`: msgop(2); ipc/msg.c
/// `ksys_msgrcv`: the text's length. The kernel writes `mtype` and at
/// most `msgsz` bytes after it (and with MSG_COPY first reads as many); a
/// `msgsz` past the buffer's room fails with EFAULT before the kernel is
/// asked.
pub fn msgrcv(
    msqid: i32,
    msg: &mut MsgBuf,
    msgsz: usize,
    msgtyp: i64,
    msgflg: i32,
) -> Result<usize, Errno> {
    if msgsz > msg.cap() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: `msg` holds an mtype and at least `msgsz` bytes after it, all
    // the kernel reads or writes; it is borrowed mutably across the call.
    unsafe {
        syscall5(
            libc::SYS_msgrcv,
            msqid as usize,
            msg.words.as_mut_ptr() as usize,
            msgsz,
            msgtyp as usize,
            msgflg as usize,
        )
    }
}

/// `msgctl(msqid, cmd, buf)`: msgctl(2); ipc/msg.c `ksys_msgctl`.
///
/// # Safety
/// `buf` is 0 for a command that reads and writes no user memory, else
/// the address of the structure the command copies (`msqid64_ds`,
/// `msginfo`), writable for the call where the command writes it.
pub unsafe fn msgctl(msqid: i32, cmd: i32, buf: usize) -> Result<i32, Errno> {
    // SAFETY: the caller vouches for `buf` (above).
    unsafe { syscall3(libc::SYS_msgctl, msqid as usize, cmd as usize, buf) }.map(|r| r as i32)
}

/// `shmget(key, size, shmflg)`: shmget(2); ipc/shm.c `ksys_shmget`.
pub fn shmget(key: i32, size: usize, shmflg: i32) -> Result<i32, Errno> {
    // SAFETY: integers only.
    unsafe { syscall3(libc::SYS_shmget, key as usize, size, shmflg as usize) }.map(|r| r as i32)
}

/// `shmat(shmid, shmaddr, shmflg)`: shmop(2); ipc/shm.c `do_shmat`: the
/// attachment's address.
///
/// # Safety
/// With a `shmaddr` (and SHM_REMAP), whatever was mapped there is
/// replaced: the caller must own that range and hold no reference into
/// it. With none (0) the kernel maps the segment where nothing is mapped
/// (SHM_REMAP without an address is EINVAL), and no memory changes.
pub unsafe fn shmat(shmid: i32, shmaddr: usize, shmflg: i32) -> Result<usize, Errno> {
    // SAFETY: the caller vouches for the address (above).
    unsafe { syscall3(libc::SYS_shmat, shmid as usize, shmaddr, shmflg as usize) }
}

/// `shmdt(shmaddr)`: shmop(2); ipc/shm.c `ksys_shmdt`. The kernel unmaps
/// only a System V attachment that starts at `shmaddr` (EINVAL when there
/// is none).
///
/// # Safety
/// No reference into that attachment outlives the call.
pub unsafe fn shmdt(shmaddr: usize) -> Result<i32, Errno> {
    // SAFETY: the caller vouches for the attachment (above).
    unsafe { syscall1(libc::SYS_shmdt, shmaddr) }.map(|r| r as i32)
}

/// `shmctl(shmid, cmd, buf)`: shmctl(2); ipc/shm.c `ksys_shmctl`.
///
/// # Safety
/// `buf` is 0 for a command that reads and writes no user memory, else
/// the address of the structure the command copies (`shmid64_ds`,
/// `shminfo64` for IPC_INFO, `shm_info` for SHM_INFO), writable for the
/// call where the command writes it.
pub unsafe fn shmctl(shmid: i32, cmd: i32, buf: usize) -> Result<i32, Errno> {
    // SAFETY: the caller vouches for `buf` (above).
    unsafe { syscall3(libc::SYS_shmctl, shmid as usize, cmd as usize, buf) }.map(|r| r as i32)
}

/// `setns(fd, nstype)`: setns(2); kernel/nsproxy.c. Moves the calling
/// thread into the namespace(s) `fd` names (a /proc/PID/ns file or a
/// pidfd).
pub fn setns(fd: BorrowedFd<'_>, nstype: i32) -> Result<(), Errno> {
    // SAFETY: a descriptor borrowed for the call, and flags.
    unsafe { syscall2(libc::SYS_setns, fd.as_raw_fd() as usize, nstype as usize) }.map(drop)
}

/// `unshare(flags)`: unshare(2); kernel/fork.c `ksys_unshare`.
///
/// # Safety
/// With CLONE_FILES the calling thread gets a descriptor table of its
/// own: the caller must see to it that no thread uses a descriptor made
/// in another's table.
pub unsafe fn unshare(flags: i32) -> Result<(), Errno> {
    // SAFETY: the caller vouches for CLONE_FILES (above); otherwise flags.
    unsafe { syscall1(libc::SYS_unshare, flags as usize) }.map(drop)
}

/// `unshare(CLONE_NEWIPC)`: a fresh IPC namespace for the calling thread
/// (the process's, when it has one thread). It implies CLONE_SYSVSEM: the
/// thread leaves its semaphore undo list (`ksys_unshare`).
pub fn unshare_ipc() -> Result<(), Errno> {
    // SAFETY: CLONE_NEWIPC alone: no descriptor table changes.
    unsafe { unshare(libc::CLONE_NEWIPC) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_back_as_the_kernel_gives_them() {
        // An id that cannot be: EINVAL from every lookup.
        assert_eq!(
            semtimedop(
                -1,
                &[libc::sembuf {
                    sem_num: 0,
                    sem_op: 1,
                    sem_flg: 0
                }],
                None
            ),
            Err(Errno::EINVAL)
        );
        let mut m = MsgBuf::new(3);
        assert_eq!(m.cap(), 8);
        m.set_mtype(1);
        m.text_mut()[..3].copy_from_slice(b"abc");
        assert_eq!((m.mtype(), &m.text()[..3]), (1, &b"abc"[..]));
        assert_eq!(msgsnd(-1, &m, 3, 0), Err(Errno::EINVAL));
        assert_eq!(msgsnd(-1, &m, 9, 0), Err(Errno::EFAULT));
        assert_eq!(msgrcv(-1, &mut m, 8, 0, 0), Err(Errno::EINVAL));
        // SAFETY: IPC_RMID reads no argument.
        assert_eq!(unsafe { msgctl(-1, libc::IPC_RMID, 0) }, Err(Errno::EINVAL));
        // SAFETY: as above.
        let r = unsafe { semctl(-1, 0, libc::IPC_RMID, 0) };
        assert_eq!(r, Err(Errno::EINVAL));
        // SAFETY: as above.
        assert_eq!(unsafe { shmctl(-1, libc::IPC_RMID, 0) }, Err(Errno::EINVAL));
        // SAFETY: no address: nothing of ours is replaced.
        assert_eq!(unsafe { shmat(-1, 0, 0) }, Err(Errno::EINVAL));
        // SAFETY: nothing is attached at this address.
        assert_eq!(unsafe { shmdt(4096) }, Err(Errno::EINVAL));
    }

    #[test]
    fn a_private_set_queue_and_segment() {
        // In an IPC namespace of the test's own, where it may (root).
        let ns =
            || crate::fs::stat(std::path::Path::new("/proc/thread-self/ns/ipc")).map(|s| s.ino);
        let before = ns().expect("stat ns/ipc");
        if unshare_ipc().is_ok() {
            assert_ne!(ns(), Ok(before));
        }
        let s = semget(libc::IPC_PRIVATE, 1, 0o600).expect("semget");
        let up = libc::sembuf {
            sem_num: 0,
            sem_op: 2,
            sem_flg: 0,
        };
        assert_eq!(semtimedop(s, &[up], None), Ok(0));
        // SAFETY: GETVAL reads no argument.
        assert_eq!(unsafe { semctl(s, 0, libc::GETVAL, 0) }, Ok(2));
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1,
        };
        let down = libc::sembuf { sem_op: -3, ..up };
        assert_eq!(semtimedop(s, &[down], Some(&zero)), Err(Errno::EAGAIN));
        // SAFETY: IPC_RMID reads no argument.
        assert_eq!(unsafe { semctl(s, 0, libc::IPC_RMID, 0) }, Ok(0));

        let q = msgget(libc::IPC_PRIVATE, 0o600).expect("msgget");
        let mut m = MsgBuf::new(5);
        m.set_mtype(7);
        m.text_mut()[..5].copy_from_slice(b"hello");
        assert_eq!(msgsnd(q, &m, 5, 0), Ok(()));
        let mut r = MsgBuf::new(16);
        assert_eq!(msgrcv(q, &mut r, 16, 0, libc::IPC_NOWAIT), Ok(5));
        assert_eq!((r.mtype(), &r.text()[..5]), (7, &b"hello"[..]));
        assert_eq!(
            msgrcv(q, &mut r, 16, 0, libc::IPC_NOWAIT),
            Err(Errno::ENOMSG)
        );
        // SAFETY: IPC_RMID reads no argument.
        assert_eq!(unsafe { msgctl(q, libc::IPC_RMID, 0) }, Ok(0));

        let m = shmget(libc::IPC_PRIVATE, 4096, 0o600).expect("shmget");
        // SAFETY: no address: the kernel maps where nothing is.
        let at = unsafe { shmat(m, 0, 0) }.expect("shmat");
        // SAFETY: a fresh attachment of 4096 bytes, ours alone.
        unsafe { (at as *mut u8).write(1) };
        // SAFETY: nothing refers into the attachment any more.
        assert_eq!(unsafe { shmdt(at) }, Ok(0));
        // SAFETY: IPC_RMID reads no argument.
        assert_eq!(unsafe { shmctl(m, libc::IPC_RMID, 0) }, Ok(0));
    }
}
