//! The raw file calls the /proc emulation makes (`procfs/`): a memfd
//! filled with a text, reopened with the access mode the caller asked
//! for, its inode, its offset, and the path a directory descriptor names.
//! All raw system calls (`ipcns_sys::raw`, and `ipcns_sys::fs` for the
//! link): none goes through an interposable symbol, ours included.
//! Errors are errno numbers.
//!
//! # Safety
//! Every call passes integers, or pointers to buffers owned by the
//! function for the duration of the call with their true lengths, or
//! NUL-terminated strings built here.
#![allow(unsafe_code)]

use ipcns_sys::raw::{syscall1, syscall2, syscall3, syscall4};

/// A raw call's result with its errno as a number.
fn errno<T>(r: Result<T, ipcns_sys::Errno>) -> Result<T, i32> {
    r.map_err(ipcns_sys::Errno::raw)
}

/// A new memfd (close-on-exec) holding `text`, its offset at 0.
pub fn memfd_with(text: &[u8]) -> Result<i32, i32> {
    let name = c"ipcns-proc";
    // SAFETY: a NUL-terminated name and integer flags.
    let fd = errno(unsafe {
        syscall2(
            libc::SYS_memfd_create,
            name.as_ptr() as usize,
            libc::MFD_CLOEXEC as usize,
        )
    })? as i32;
    let mut done = 0;
    while done < text.len() {
        let rest = &text[done..];
        // SAFETY: writes `rest.len()` bytes of a live buffer.
        match errno(unsafe {
            syscall3(
                libc::SYS_write,
                fd as usize,
                rest.as_ptr() as usize,
                rest.len(),
            )
        }) {
            Ok(n) if n > 0 => done += n,
            Ok(_) => {
                close(fd);
                return Err(libc::EIO);
            }
            Err(libc::EINTR) => {}
            Err(e) => {
                close(fd);
                return Err(e);
            }
        }
    }
    // SAFETY: integers only (SEEK_SET = 0).
    if let Err(e) = errno(unsafe { syscall3(libc::SYS_lseek, fd as usize, 0, 0) }) {
        close(fd);
        return Err(e);
    }
    Ok(fd)
}

/// A new open file description on `fd`'s file with `flags` (the access
/// mode the caller asked for): `open("/proc/self/fd/N", flags)`.
pub fn reopen(fd: i32, flags: i32) -> Result<i32, i32> {
    let path = format!("/proc/self/fd/{fd}\0");
    // SAFETY: a NUL-terminated path of ours and integer flags.
    errno(unsafe {
        syscall4(
            libc::SYS_openat,
            libc::AT_FDCWD as usize,
            path.as_ptr() as usize,
            flags as usize,
            0,
        )
    })
    .map(|r| r as i32)
}

/// `close(fd)`, its result ignored.
pub fn close(fd: i32) {
    // SAFETY: an integer only.
    let _ = unsafe { syscall1(libc::SYS_close, fd as usize) };
}

/// The inode number of the file open on `fd`.
pub fn ino(fd: i32) -> Option<u64> {
    let mut st = core::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes one `struct stat` into our buffer of that size.
    errno(unsafe { syscall2(libc::SYS_fstat, fd as usize, st.as_mut_ptr() as usize) }).ok()?;
    // SAFETY: zero-initialised, then filled by the kernel.
    Some(unsafe { st.assume_init() }.st_ino)
}

/// Up to `len` bytes of `fd` from offset 0.
pub fn pread(fd: i32, len: usize) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; len];
    // SAFETY: the kernel writes at most `len` bytes into our buffer of
    // that length.
    let n = errno(unsafe {
        syscall4(
            libc::SYS_pread64,
            fd as usize,
            buf.as_mut_ptr() as usize,
            len,
            0,
        )
    })?;
    buf.truncate(n);
    Ok(buf)
}

/// `fd`'s file offset.
pub fn offset(fd: i32) -> Result<i64, i32> {
    // SAFETY: integers only (SEEK_CUR = 1).
    errno(unsafe { syscall3(libc::SYS_lseek, fd as usize, 0, 1) }).map(|o| o as i64)
}

/// The path a directory descriptor names (`AT_FDCWD`: the working
/// directory), as `/proc/self/fd/N` or `getcwd` give it.
pub fn dir_path(dirfd: i32) -> Option<Vec<u8>> {
    let mut buf = [0u8; 256];
    let n = if dirfd == libc::AT_FDCWD {
        // SAFETY: getcwd writes at most `buf.len()` bytes into our buffer.
        let n = errno(unsafe { syscall2(libc::SYS_getcwd, buf.as_mut_ptr() as usize, buf.len()) })
            .ok()?;
        // getcwd's length counts the NUL.
        n.saturating_sub(1)
    } else {
        let link = std::ffi::CString::new(format!("/proc/self/fd/{dirfd}")).ok()?;
        ipcns_sys::fs::readlink(&link, &mut buf).ok()?.len()
    };
    (n < buf.len()).then(|| buf[..n].to_vec())
}
