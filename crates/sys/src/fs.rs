//! Calls on paths: open, stat, mkdir, mknod, unlink, link, chmod, truncate,
//! readlink, and reading a directory or a small file. Every path is
//! relative to the working directory (`AT_FDCWD`), as the libc calls they
//! replace.
//!
//! # Safety
//! Each call passes NUL-terminated paths that live for the call, and
//! buffers we own with their true lengths.
#![allow(unsafe_code)]

use super::fd::Fd;
use super::raw::{syscall2, syscall3, syscall4, syscall5};
use super::stat::{Stat, statx_path};
use crate::errno::Errno;
use core::ffi::CStr;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// `path` as a C string; EINVAL if it holds a NUL byte (no file has such
/// a name).
fn c_path(path: &Path) -> Result<CString, Errno> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// `openat(AT_FDCWD, path, flags | O_CLOEXEC, mode)`: every descriptor the
/// core opens is its own, never inherited by a program it does not know
/// (no caller asks otherwise).
pub fn open_c(path: &CStr, flags: i32, mode: u32) -> Result<Fd, Errno> {
    loop {
        // SAFETY: a NUL-terminated path; flags and mode are numbers.
        let r = unsafe {
            syscall4(
                libc::SYS_openat,
                libc::AT_FDCWD as usize,
                path.as_ptr() as usize,
                (flags | libc::O_CLOEXEC) as usize,
                mode as usize,
            )
        };
        // open(2): EINTR "while blocked waiting to complete an open of a
        // slow device" (a FIFO): again, as std does.
        match r {
            Err(Errno::EINTR) => continue,
            r => return r.map(Fd::own),
        }
    }
}

/// [`open_c`] for a `Path`.
pub fn open(path: &Path, flags: i32, mode: u32) -> Result<Fd, Errno> {
    open_c(&c_path(path)?, flags, mode)
}

/// `stat(path)`: follows a final symbolic link.
pub fn stat(path: &Path) -> Result<Stat, Errno> {
    statx_path(&c_path(path)?, true)
}

/// `lstat(path)`: a final symbolic link is itself described.
pub fn lstat(path: &Path) -> Result<Stat, Errno> {
    statx_path(&c_path(path)?, false)
}

/// `mkdir(path, mode)` (`mkdirat`); the umask applies.
pub fn mkdir(path: &Path, mode: u32) -> Result<(), Errno> {
    let p = c_path(path)?;
    // SAFETY: a NUL-terminated path.
    unsafe {
        syscall3(
            libc::SYS_mkdirat,
            libc::AT_FDCWD as usize,
            p.as_ptr() as usize,
            mode as usize,
        )
    }
    .map(drop)
}

fn unlinkat(path: &Path, flags: i32) -> Result<(), Errno> {
    let p = c_path(path)?;
    // SAFETY: a NUL-terminated path.
    unsafe {
        syscall3(
            libc::SYS_unlinkat,
            libc::AT_FDCWD as usize,
            p.as_ptr() as usize,
            flags as usize,
        )
    }
    .map(drop)
}

/// `unlink(path)`.
pub fn unlink(path: &Path) -> Result<(), Errno> {
    unlinkat(path, 0)
}

/// `rmdir(path)`.
pub fn rmdir(path: &Path) -> Result<(), Errno> {
    unlinkat(path, libc::AT_REMOVEDIR)
}

/// `link(old, new)` (`linkat` without `AT_SYMLINK_FOLLOW`, as glibc's
/// link: a symbolic link `old` is linked itself).
pub fn link(old: &Path, new: &Path) -> Result<(), Errno> {
    let (o, n) = (c_path(old)?, c_path(new)?);
    // SAFETY: two NUL-terminated paths.
    unsafe {
        syscall5(
            libc::SYS_linkat,
            libc::AT_FDCWD as usize,
            o.as_ptr() as usize,
            libc::AT_FDCWD as usize,
            n.as_ptr() as usize,
            0,
        )
    }
    .map(drop)
}

/// `chmod(path, mode)` (`fchmodat`: follows symbolic links).
pub fn chmod(path: &Path, mode: u32) -> Result<(), Errno> {
    let p = c_path(path)?;
    // SAFETY: a NUL-terminated path.
    unsafe {
        syscall3(
            libc::SYS_fchmodat,
            libc::AT_FDCWD as usize,
            p.as_ptr() as usize,
            mode as usize,
        )
    }
    .map(drop)
}

/// `mknod(path, S_IFREG | mode, 0)` (`mknodat`): a new empty regular file,
/// made without a descriptor (EEXIST if the name is taken; the umask
/// applies).
pub fn mknod_file(path: &Path, mode: u32) -> Result<(), Errno> {
    let p = c_path(path)?;
    // SAFETY: a NUL-terminated path.
    unsafe {
        syscall4(
            libc::SYS_mknodat,
            libc::AT_FDCWD as usize,
            p.as_ptr() as usize,
            (libc::S_IFREG | (mode & 0o7777)) as usize,
            0,
        )
    }
    .map(drop)
}

/// `truncate(path, len)` (follows symbolic links).
pub fn truncate(path: &Path, len: u64) -> Result<(), Errno> {
    let p = c_path(path)?;
    // EINVAL as truncate gives for a negative length.
    let len = i64::try_from(len).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a NUL-terminated path; the length is a number.
    unsafe { syscall2(libc::SYS_truncate, p.as_ptr() as usize, len as usize) }.map(drop)
}

/// The most a whole-file read takes: /proc files the core reads are a few
/// kilobytes.
const READ_MAX: usize = 1 << 20;

/// The contents of the file at `path` (at most [`READ_MAX`] bytes).
pub fn read(path: &Path) -> Result<Vec<u8>, Errno> {
    let f = open(path, libc::O_RDONLY | libc::O_NOCTTY, 0)?;
    let mut v = vec![0u8; 4096];
    let mut n = 0;
    loop {
        let r = f.read(&mut v[n..])?;
        if r == 0 {
            break;
        }
        n += r.min(v.len() - n);
        if n == v.len() {
            if n >= READ_MAX {
                break;
            }
            v.resize((n * 2).min(READ_MAX), 0);
        }
    }
    v.truncate(n);
    Ok(v)
}

/// [`read`] as text (a /proc file); EINVAL if it is not UTF-8.
pub fn read_to_string(path: &Path) -> Result<String, Errno> {
    String::from_utf8(read(path)?).map_err(|_| Errno::EINVAL)
}

/// The start of the file at `path` into `buf`: the bytes read. No
/// allocation (the lock reads /proc/TID/stat with it).
pub fn read_into(path: &CStr, buf: &mut [u8]) -> Result<usize, Errno> {
    open_c(path, libc::O_RDONLY | libc::O_NOCTTY, 0)?.read_full(buf)
}

/// `readlinkat(AT_FDCWD, path, buf, len)`: the bytes of the link's
/// target written into `buf` (truncated to it). No allocation (the
/// preload's guardian reads links with it, where it may not allocate).
pub fn readlink<'a>(path: &CStr, buf: &'a mut [u8]) -> Result<&'a [u8], Errno> {
    // SAFETY: a NUL-terminated path; the kernel writes at most buf.len()
    // bytes into our buffer.
    let n = unsafe {
        syscall4(
            libc::SYS_readlinkat,
            libc::AT_FDCWD as usize,
            path.as_ptr() as usize,
            buf.as_mut_ptr() as usize,
            buf.len(),
        )
    }?;
    Ok(buf.get(..n).unwrap_or(buf))
}

/// `struct linux_dirent64`'s fixed part: `d_ino` (8), `d_off` (8),
/// `d_reclen` (2), `d_type` (1); the NUL-terminated name follows.
const DIRENT_NAME: usize = 19;

/// The names in directory `path` (`getdents64`), without `.` and `..`.
/// A record that does not fit in what the kernel returned ends the walk.
pub fn dir_names(path: &Path) -> Result<Vec<OsString>, Errno> {
    let dir = open(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let mut buf = vec![0u8; 8192];
    let mut names = Vec::new();
    loop {
        // SAFETY: the kernel writes at most buf.len() bytes of records
        // into a buffer we own.
        let n = match unsafe {
            syscall3(
                libc::SYS_getdents64,
                dir.raw() as usize,
                buf.as_mut_ptr() as usize,
                buf.len(),
            )
        } {
            Err(Errno::EINTR) => continue,
            r => r?,
        };
        if n == 0 {
            return Ok(names);
        }
        let got = &buf[..n.min(buf.len())];
        let mut at = 0;
        while let Some(rec) = got.get(at..) {
            if rec.len() < DIRENT_NAME {
                break;
            }
            let reclen = usize::from(u16::from_ne_bytes([rec[16], rec[17]]));
            let Some(name) = rec.get(DIRENT_NAME..reclen) else {
                break;
            };
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                names.push(OsString::from_vec(name.to_vec()));
            }
            at += reclen;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("ipcns-sys-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn files_and_directories() {
        let d = tmp("fs");
        mkdir(&d, 0o700).expect("mkdir");
        assert_eq!(mkdir(&d, 0o700), Err(Errno::EEXIST));
        let st = lstat(&d).expect("lstat");
        assert!(st.is_dir());
        assert_eq!(st.ino, std::fs::metadata(&d).unwrap().ino());
        let f = d.join("a");
        let fd = open(
            &f,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o600,
        )
        .expect("create");
        // O_CLOEXEC is always set.
        // SAFETY: F_GETFD on our own descriptor reads its flags.
        let fl = unsafe { libc::fcntl(fd.raw(), libc::F_GETFD) };
        assert_eq!(fl & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
        fd.set_cloexec(false).expect("F_SETFD");
        // SAFETY: as above.
        assert_eq!(unsafe { libc::fcntl(fd.raw(), libc::F_GETFD) }, 0);
        fd.set_cloexec(true).expect("F_SETFD");
        // SAFETY: as above.
        let fl = unsafe { libc::fcntl(fd.raw(), libc::F_GETFD) };
        assert_eq!(fl, libc::FD_CLOEXEC);
        fd.chmod(0o640).expect("fchmod");
        fd.set_len(10_000).expect("ftruncate");
        fd.fallocate(libc::FALLOC_FL_KEEP_SIZE, 0, 8192)
            .expect("fallocate");
        let s = fd.stat().expect("fstat");
        assert!(s.is_file());
        assert_eq!((s.mode & 0o7777, s.size), (0o640, 10_000));
        assert!(s.blocks >= 16);
        assert!(s.same_file(&stat(&f).unwrap()));
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(read(&f), Ok(b"hello".to_vec()));
        let mut small = [0u8; 3];
        let cf = CString::new(f.as_os_str().as_bytes()).unwrap();
        assert_eq!(read_into(&cf, &mut small), Ok(3));
        assert_eq!(&small, b"hel");
        let g = d.join("b");
        link(&f, &g).expect("link");
        assert_eq!(link(&f, &g), Err(Errno::EEXIST));
        chmod(&g, 0o604).expect("chmod");
        assert_eq!(lstat(&f).unwrap().mode & 0o777, 0o604);
        let mut names = dir_names(&d).expect("getdents64");
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(rmdir(&d), Err(Errno(libc::ENOTEMPTY)));
        unlink(&f).unwrap();
        unlink(&g).unwrap();
        assert_eq!(unlink(&g), Err(Errno::ENOENT));
        assert_eq!(dir_names(&d), Ok(vec![]));
        rmdir(&d).expect("rmdir");
        assert_eq!(lstat(&d), Err(Errno::ENOENT));
        assert_eq!(
            open(Path::new("a\0b"), libc::O_RDONLY, 0).err(),
            Some(Errno::EINVAL)
        );
    }

    #[test]
    fn large_directories_and_files() {
        let d = tmp("many");
        mkdir(&d, 0o700).unwrap();
        // More names than one getdents64 buffer holds.
        let want: Vec<String> = (0..600)
            .map(|i| format!("entry-with-a-longish-name-{i:04}"))
            .collect();
        for n in &want {
            std::fs::write(d.join(n), b"").unwrap();
        }
        let mut got: Vec<String> = dir_names(&d)
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, want);
        let big = d.join("big");
        let text: Vec<u8> = (0..20_000u32).map(|i| i as u8).collect();
        std::fs::write(&big, &text).unwrap();
        assert_eq!(read(&big), Ok(text));
        std::fs::remove_dir_all(&d).unwrap();
        // /proc files report size 0 and are read whole.
        assert!(
            read_to_string(Path::new("/proc/self/status"))
                .unwrap()
                .contains("\nUid:")
        );
    }
}
