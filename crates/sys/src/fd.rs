//! An owned file descriptor and the calls made on one: read, write, stat,
//! chmod, chown, truncate, allocate, seek, statfs.
//!
//! # Safety
//! Every call passes the descriptor this `Fd` owns (open until its drop)
//! and buffers borrowed from the caller for the duration of the call, with
//! their true lengths.
#![allow(unsafe_code)]

use super::raw::{syscall1, syscall2, syscall3, syscall4, syscall5};
use super::stat::{Stat, statx_fd};
use crate::errno::Errno;

/// An open file descriptor, closed (raw `close`) when dropped.
#[derive(Debug)]
pub struct Fd(i32);

impl Fd {
    /// Takes ownership of `fd`, which the caller just received from the
    /// kernel and owns alone.
    pub(super) fn own(fd: usize) -> Fd {
        Fd(fd as i32)
    }

    /// Runs `f` with descriptor `raw` as an `Fd`, which is never closed
    /// here (not even if `f` panics): a descriptor of the program's that
    /// we may use but not own (an inherited `IPCNS_FD` when no duplicate
    /// can be made).
    pub fn with_raw<R>(raw: i32, f: impl FnOnce(&Fd) -> R) -> R {
        let fd = core::mem::ManuallyDrop::new(Fd(raw));
        f(&fd)
    }

    /// Gives the descriptor up without closing it: its number, which the
    /// caller now owns (and may take back with [`Fd::from_raw`]).
    pub fn into_raw(self) -> i32 {
        let fd = self.0;
        core::mem::forget(self);
        fd
    }

    /// Takes descriptor number `fd` back as an `Fd` (closed when dropped).
    ///
    /// # Safety
    /// `fd` is open and the caller's alone (given up by [`Fd::into_raw`]),
    /// and nothing uses the number once this `Fd` is dropped.
    pub unsafe fn from_raw(fd: i32) -> Fd {
        Fd(fd)
    }

    /// The number, for system calls.
    pub fn raw(&self) -> i32 {
        self.0
    }

    /// A new descriptor (close-on-exec) on the same open file as `fd`,
    /// which need not be ours: `fcntl(fd, F_DUPFD_CLOEXEC, 0)`.
    pub fn dup_of(fd: i32) -> Result<Fd, Errno> {
        // SAFETY: fcntl takes integers only; a bad number is EBADF.
        let r = unsafe {
            syscall3(
                libc::SYS_fcntl,
                fd as usize,
                libc::F_DUPFD_CLOEXEC as usize,
                0,
            )
        }?;
        Ok(Fd::own(r))
    }

    /// A duplicate of this descriptor (close-on-exec).
    pub fn try_clone(&self) -> Result<Fd, Errno> {
        Fd::dup_of(self.0)
    }

    /// `read(fd, buf, len)`, retried on EINTR.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        loop {
            // SAFETY: writes at most buf.len() bytes into a buffer we
            // borrow mutably.
            let r = unsafe {
                syscall3(
                    libc::SYS_read,
                    self.0 as usize,
                    buf.as_mut_ptr() as usize,
                    buf.len(),
                )
            };
            if r != Err(Errno::EINTR) {
                return r;
            }
        }
    }

    /// `pread(fd, buf, len, off)` until `buf` is full or the file ends,
    /// retried on EINTR; the bytes read. The descriptor's offset (which
    /// may be shared with other processes) is left alone.
    pub fn pread_full(&self, buf: &mut [u8], off: u64) -> Result<usize, Errno> {
        let mut n = 0;
        while n < buf.len() {
            let rest = &mut buf[n..];
            // SAFETY: writes at most rest.len() bytes into a buffer we
            // borrow mutably.
            let r = unsafe {
                syscall4(
                    libc::SYS_pread64,
                    self.0 as usize,
                    rest.as_mut_ptr() as usize,
                    rest.len(),
                    (off + n as u64) as usize,
                )
            };
            match r {
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
                Ok(0) => break,
                Ok(r) => n += r.min(rest.len()),
            }
        }
        Ok(n)
    }

    /// `pwrite(fd, buf, len, off)` until all of `buf` is written, retried
    /// on EINTR. The descriptor's offset is left alone.
    pub fn pwrite_full(&self, buf: &[u8], off: u64) -> Result<(), Errno> {
        let mut n = 0;
        while n < buf.len() {
            let rest = &buf[n..];
            // SAFETY: reads at most rest.len() bytes from a buffer we borrow.
            let r = unsafe {
                syscall4(
                    libc::SYS_pwrite64,
                    self.0 as usize,
                    rest.as_ptr() as usize,
                    rest.len(),
                    (off + n as u64) as usize,
                )
            };
            match r {
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
                // A regular file never writes nothing but at its limit.
                Ok(0) => return Err(Errno::EFBIG),
                Ok(r) => n += r.min(rest.len()),
            }
        }
        Ok(())
    }

    /// Reads until `buf` is full or the file ends; the bytes read.
    pub fn read_full(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut n = 0;
        while n < buf.len() {
            match self.read(&mut buf[n..])? {
                0 => break,
                r => n += r.min(buf.len() - n),
            }
        }
        Ok(n)
    }

    /// Whether the descriptor is readable now (`ppoll` for POLLIN with a
    /// zero timeout: no wait): for a pidfd, whether its process has
    /// exited (pidfd_open(2)).
    pub fn readable_now(&self) -> Result<bool, Errno> {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: one pollfd of ours, which the kernel writes `revents`
        // of, and a zero timeout it reads; no signal mask (NULL).
        let n = unsafe {
            syscall5(
                libc::SYS_ppoll,
                &raw mut p as usize,
                1,
                &raw const zero as usize,
                0,
                0,
            )
        }?;
        Ok(n > 0 && p.revents & libc::POLLIN != 0)
    }

    /// `fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0)`: whether the descriptor
    /// is closed at exec (its only flag).
    pub fn set_cloexec(&self, on: bool) -> Result<(), Errno> {
        let flags = if on { libc::FD_CLOEXEC } else { 0 };
        // SAFETY: fcntl takes integers only here.
        unsafe {
            syscall3(
                libc::SYS_fcntl,
                self.0 as usize,
                libc::F_SETFD as usize,
                flags as usize,
            )
        }
        .map(drop)
    }

    /// `fcntl(fd, F_GETFL) & O_ACCMODE`: O_RDONLY, O_WRONLY or O_RDWR.
    pub fn access_mode(&self) -> Result<i32, Errno> {
        // SAFETY: fcntl takes integers only here.
        unsafe { syscall3(libc::SYS_fcntl, self.0 as usize, libc::F_GETFL as usize, 0) }
            .map(|f| f as i32 & libc::O_ACCMODE)
    }

    /// `fstat(fd)` (statx with `AT_EMPTY_PATH`).
    pub fn stat(&self) -> Result<Stat, Errno> {
        statx_fd(self.0)
    }

    /// `fstatfs(fd)`.
    fn statfs_raw(&self) -> Result<libc::statfs, Errno> {
        // SAFETY: `libc::statfs` is plain data: all zeroes is a valid value.
        let mut buf: libc::statfs = unsafe { core::mem::zeroed() };
        // SAFETY: a pointer to a buffer of the structure's exact size,
        // which we own, for the call.
        unsafe { syscall2(libc::SYS_fstatfs, self.0 as usize, (&raw mut buf) as usize) }?;
        Ok(buf)
    }

    /// `fstatfs(fd)`: the file system's type (`f_type`) and block size
    /// (`f_bsize`, the huge page size on hugetlbfs).
    // (The casts: `long` in glibc's structure, `unsigned long` in musl's.)
    #[allow(clippy::unnecessary_cast)]
    pub fn statfs(&self) -> Result<(u64, u64), Errno> {
        let buf = self.statfs_raw()?;
        Ok((buf.f_type as u64, buf.f_bsize as u64))
    }

    /// Bytes an unprivileged writer may still allocate on the file's file
    /// system (`fstatfs`: `f_bavail * f_bsize`).
    #[allow(clippy::unnecessary_cast)]
    pub fn free_bytes(&self) -> Result<u64, Errno> {
        let buf = self.statfs_raw()?;
        Ok(buf.f_bavail.saturating_mul(buf.f_bsize as u64))
    }

    /// `fchmod(fd, mode)`.
    pub fn chmod(&self, mode: u32) -> Result<(), Errno> {
        // SAFETY: no pointer.
        unsafe { syscall2(libc::SYS_fchmod, self.0 as usize, mode as usize) }.map(drop)
    }

    /// `fchown(fd, uid, gid)`.
    pub fn chown(&self, uid: u32, gid: u32) -> Result<(), Errno> {
        // SAFETY: no pointer.
        unsafe {
            syscall3(
                libc::SYS_fchown,
                self.0 as usize,
                uid as usize,
                gid as usize,
            )
        }
        .map(drop)
    }

    /// `ftruncate(fd, len)`.
    pub fn set_len(&self, len: u64) -> Result<(), Errno> {
        // EINVAL as ftruncate gives for a negative length.
        let len = i64::try_from(len).map_err(|_| Errno::EINVAL)?;
        // SAFETY: no pointer.
        unsafe { syscall2(libc::SYS_ftruncate, self.0 as usize, len as usize) }.map(drop)
    }

    /// `lseek(fd, off, whence)` for SEEK_DATA and SEEK_HOLE: where the next
    /// data (or hole) at or after `off` starts; `None` past the last data
    /// (ENXIO), or on a file system that cannot say.
    pub fn seek(&self, off: u64, whence: i32) -> Option<u64> {
        debug_assert!(whence == libc::SEEK_DATA || whence == libc::SEEK_HOLE);
        let off = i64::try_from(off).ok()?;
        // SAFETY: no pointer.
        let r = unsafe {
            syscall3(
                libc::SYS_lseek,
                self.0 as usize,
                off as usize,
                whence as usize,
            )
        };
        r.ok().map(|p| p as u64)
    }

    /// `fallocate(fd, mode, off, len)`.
    pub fn fallocate(&self, mode: i32, off: u64, len: u64) -> Result<(), Errno> {
        // EINVAL/EFBIG as fallocate(2) gives for offsets past off_t.
        let off = i64::try_from(off).map_err(|_| Errno::EINVAL)?;
        let len = i64::try_from(len).map_err(|_| Errno::EFBIG)?;
        // SAFETY: no pointer.
        unsafe {
            syscall4(
                libc::SYS_fallocate,
                self.0 as usize,
                mode as usize,
                off as usize,
                len as usize,
            )
        }
        .map(drop)
    }
}

impl From<Fd> for std::os::fd::OwnedFd {
    fn from(f: Fd) -> std::os::fd::OwnedFd {
        use std::os::fd::FromRawFd;
        let fd = f.0;
        core::mem::forget(f);
        // SAFETY: the descriptor was owned by `f` alone, which is forgotten
        // without closing it: ownership moves to the OwnedFd.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
    }
}

impl From<std::os::fd::OwnedFd> for Fd {
    fn from(f: std::os::fd::OwnedFd) -> Fd {
        use std::os::fd::IntoRawFd;
        Fd(f.into_raw_fd())
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // close(2): "retrying the close() after a failure return is the
        // wrong thing to do", even after EINTR.
        // SAFETY: closes the descriptor this Fd owns, used no more.
        let _ = unsafe { syscall1(libc::SYS_close, self.0 as usize) };
    }
}
