//! `stat`, `lstat` and `fstat` as `statx(2)` (Linux 4.11), one layout on
//! every architecture; `newfstatat` where a seccomp filter or an old
//! kernel refuses statx (ENOSYS, EPERM), on x86_64 and aarch64, whose
//! `struct stat` libc's matches.
//!
//! # Safety
//! Each call passes a NUL-terminated path (or "" with `AT_EMPTY_PATH`) and
//! a pointer to a buffer of the structure's exact size, which we own.
#![allow(unsafe_code)]

use super::raw::syscall4;
use super::raw::syscall5;
use crate::errno::Errno;
use core::ffi::CStr;

/// What the core needs of a file's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The device (major, minor) the inode lives on.
    pub dev: (u32, u32),
    pub ino: u64,
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
}

impl Stat {
    fn file_type(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    pub fn is_file(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }

    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }

    /// What kind of file this is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self.file_type() {
            libc::S_IFLNK => "a symbolic link",
            libc::S_IFDIR => "a directory",
            libc::S_IFIFO => "a FIFO",
            libc::S_IFSOCK => "a socket",
            libc::S_IFCHR => "a character device",
            libc::S_IFBLK => "a block device",
            _ => "a regular file",
        }
    }

    /// Whether both name the same inode.
    pub fn same_file(&self, other: &Stat) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// `struct statx` (include/uapi/linux/stat.h).
///
/// # Layout
/// 256 bytes; the offsets the kernel writes are pinned below.
#[repr(C)]
#[derive(Default)]
struct Statx {
    mask: u32,
    blksize: u32,
    attributes: u64,
    nlink: u32,
    uid: u32,
    gid: u32,
    mode: u16,
    _spare0: u16,
    ino: u64,
    size: u64,
    blocks: u64,
    attributes_mask: u64,
    /// atime, btime, ctime, mtime (`struct statx_timestamp`, 16 bytes).
    _times: [u64; 8],
    rdev_major: u32,
    rdev_minor: u32,
    dev_major: u32,
    dev_minor: u32,
    _spare: [u64; 14],
}

const _: () = {
    assert!(core::mem::size_of::<Statx>() == 256);
    assert!(core::mem::offset_of!(Statx, uid) == 20);
    assert!(core::mem::offset_of!(Statx, mode) == 28);
    assert!(core::mem::offset_of!(Statx, ino) == 32);
    assert!(core::mem::offset_of!(Statx, size) == 40);
    assert!(core::mem::offset_of!(Statx, blocks) == 48);
    assert!(core::mem::offset_of!(Statx, dev_major) == 136);
    assert!(core::mem::offset_of!(Statx, dev_minor) == 140);
};

/// `STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID | STATX_INO |
/// STATX_SIZE | STATX_BLOCKS` (and the rest of the basic stats).
const STATX_BASIC_STATS: u32 = 0x7ff;

/// `statx(dirfd, path, flags, STATX_BASIC_STATS)`, or `newfstatat` where
/// statx is refused.
fn statx_at(dirfd: i32, path: &CStr, flags: i32) -> Result<Stat, Errno> {
    let mut x = Statx::default();
    // SAFETY: a NUL-terminated path and a buffer of struct statx's size.
    let r = unsafe {
        syscall5(
            libc::SYS_statx,
            dirfd as usize,
            path.as_ptr() as usize,
            flags as usize,
            STATX_BASIC_STATS as usize,
            &mut x as *mut Statx as usize,
        )
    };
    match r {
        Ok(_) => Ok(Stat {
            dev: (x.dev_major, x.dev_minor),
            ino: x.ino,
            mode: u32::from(x.mode),
            uid: x.uid,
            gid: x.gid,
            size: x.size,
            blocks: x.blocks,
        }),
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        Err(Errno::ENOSYS | Errno::EPERM) => fstatat(dirfd, path, flags),
        Err(e) => Err(e),
    }
}

/// `newfstatat(dirfd, path, &st, flags)`, the system call under glibc's
/// `fstatat` on x86_64 and aarch64.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn fstatat(dirfd: i32, path: &CStr, flags: i32) -> Result<Stat, Errno> {
    let mut st = core::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: a NUL-terminated path and a buffer of struct stat's size
    // (libc's is the kernel's on these two architectures).
    unsafe {
        syscall4(
            libc::SYS_newfstatat,
            dirfd as usize,
            path.as_ptr() as usize,
            st.as_mut_ptr() as usize,
            flags as usize,
        )
    }?;
    // SAFETY: zeroed, then filled by the kernel; every bit pattern is a
    // valid `struct stat` (integers only).
    let st = unsafe { st.assume_init() };
    Ok(Stat {
        dev: (libc::major(st.st_dev), libc::minor(st.st_dev)),
        ino: st.st_ino,
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
    })
}

/// `fstat(fd)`.
pub(super) fn statx_fd(fd: i32) -> Result<Stat, Errno> {
    statx_at(fd, c"", libc::AT_EMPTY_PATH)
}

/// `stat(path)` (follows a final symbolic link) or `lstat(path)` (does not).
pub(super) fn statx_path(path: &CStr, follow: bool) -> Result<Stat, Errno> {
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    statx_at(libc::AT_FDCWD, path, flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statx_agrees_with_std_and_newfstatat() {
        use std::os::unix::fs::MetadataExt;
        for (p, follow) in [
            (c"/proc/self/ns/user", true),
            (c"/proc/self", false),
            (c"/dev/null", true),
            (c"/", true),
        ] {
            let s = statx_path(p, follow).expect("statx");
            let path = std::path::Path::new(p.to_str().unwrap());
            let m = if follow {
                std::fs::metadata(path)
            } else {
                std::fs::symlink_metadata(path)
            }
            .expect("std");
            assert_eq!(
                (s.ino, s.mode, s.uid, s.gid),
                (m.ino(), m.mode(), m.uid(), m.gid()),
                "{p:?}"
            );
            assert_eq!((libc::makedev(s.dev.0, s.dev.1)), m.dev(), "{p:?}");
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            {
                let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
                assert_eq!(fstatat(libc::AT_FDCWD, p, flags), Ok(s), "{p:?}");
            }
        }
        assert_eq!(
            statx_path(c"/proc/self", false).map(|s| s.kind()),
            Ok("a symbolic link")
        );
        assert_eq!(statx_path(c"/nonexistent/x", true), Err(Errno::ENOENT));
    }
}
