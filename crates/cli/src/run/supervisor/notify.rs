//! The listener's side of seccomp user notification (seccomp_unotify(2)):
//! receiving a notification, answering it, asking whether it is still
//! pending, and the caller's memory, read and written while it waits.
//!
//! # Safety
//! Each ioctl passes a pointer to a local structure of the size the
//! request number encodes (libc's constants are built from these very
//! structures), valid for the call; the kernel writes only into the
//! RECV structure. `process_vm_readv`/`writev` name local buffers that
//! live across the call; the remote addresses are the caller's, which the
//! kernel checks (EFAULT), never ours.
#![allow(unsafe_code)]

use ipcns::Errno;
use std::io;
use std::os::fd::RawFd;

/// A notification: the calling thread and its system call.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub id: u64,
    /// The calling thread's id in our pid namespace.
    pub tid: i32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// Receives the next notification (blocks). Errors as the ioctl gives
/// them: ENOENT when the caller went away before it could be read,
/// EINTR, and others when the filter's users are all gone.
pub fn recv(listener: RawFd) -> io::Result<Call> {
    // SAFETY: all-zero is a valid seccomp_notif (plain integers), and
    // RECV wants it zeroed.
    let mut n: libc::seccomp_notif = unsafe { core::mem::zeroed() };
    // SAFETY: see the module's doc.
    let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Call {
        id: n.id,
        tid: n.pid as i32,
        nr: n.data.nr,
        args: n.data.args,
    })
}

/// Answers notification `id`: the call returns `result` (an errno as its
/// failure). Whether the answer was taken (false: the caller is no longer
/// waiting for it: a signal, or its death).
pub fn reply(listener: RawFd, id: u64, result: Result<i64, Errno>) -> bool {
    let (val, error) = match result {
        Ok(v) => (v, 0),
        Err(e) => (0, -e.0),
    };
    send(listener, id, val, error, 0)
}

/// Lets the caller's call go on to the kernel (the exit_group the
/// supervisor only hears of).
pub fn proceed(listener: RawFd, id: u64) -> bool {
    send(
        listener,
        id,
        0,
        0,
        libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    )
}

fn send(listener: RawFd, id: u64, val: i64, error: i32, flags: u32) -> bool {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: see the module's doc.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) == 0 }
}

/// Whether notification `id` still waits for its answer: its caller is
/// alive and was not interrupted. A thread id read after a check that
/// says so still names the caller.
pub fn valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: see the module's doc.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

/// Asks the kernel to wake the caller on the answering cpu
/// (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6): a served call costs
/// about a tenth (docs/supervisor-plan.md). Whether it took.
pub fn sync_wake_up(listener: RawFd) -> bool {
    // The flags are the ioctl's argument itself, not a pointer to them
    // (kernel/seccomp.c: `seccomp_notify_set_flags(filter, arg)`).
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    // SAFETY: plain values; the kernel reads no memory for this request.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        ) == 0
    }
}

/// The memory of a waiting caller. Every access is followed (reads) or
/// preceded (writes) by a check that the notification is still pending,
/// so that bytes are never taken from, or given to, another process that
/// got the thread's id meanwhile.
pub struct Memory {
    pub listener: RawFd,
    pub id: u64,
    pub tid: i32,
}

impl Memory {
    /// Reads `buf.len()` bytes at `addr`: EFAULT if any cannot be read.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: see the module's doc.
        let n = unsafe { libc::process_vm_readv(self.tid, &local, 1, &remote, 1, 0) };
        if !valid(self.listener, self.id) {
            return Err(Errno::ESRCH);
        }
        if n != buf.len() as isize {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    /// Reads `len` bytes at `addr` into a new vector (ENOMEM if that
    /// much cannot be had).
    pub fn read_vec(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
        v.resize(len, 0);
        self.read(addr, &mut v)?;
        Ok(v)
    }

    /// Writes `bytes` at `addr`: EFAULT if any cannot be written.
    pub fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        if bytes.is_empty() {
            return Ok(());
        }
        if !valid(self.listener, self.id) {
            return Err(Errno::ESRCH);
        }
        let local = libc::iovec {
            iov_base: bytes.as_ptr().cast_mut().cast(),
            iov_len: bytes.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: see the module's doc.
        let n = unsafe { libc::process_vm_writev(self.tid, &local, 1, &remote, 1, 0) };
        if n != bytes.len() as isize {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }
}

impl ipcns::usercopy::UserMem for Memory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        Memory::read(self, addr, buf)
    }
    fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), Errno> {
        Memory::write(self, addr, bytes)
    }
}
