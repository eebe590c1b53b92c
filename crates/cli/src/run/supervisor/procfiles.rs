//! `/proc/sysvipc/{sem,msg,shm}` and the IPC sysctls
//! (`/proc/sys/kernel/{sem,msgmax,...}`) for programs the library cannot
//! reach (a static `ipcs`), under `ipcns run --serve-proc`: the filter
//! then sends every open of the run's processes to the supervisor, which
//! answers an open of one of these files (by its absolute path) with a
//! memfd holding the namespace's text, added to the caller's table as
//! the call's result (`SECCOMP_ADDFD_FLAG_SEND`), and lets every other
//! open through to the kernel. Read only: an open for writing is EACCES
//! (root's of a `/proc/sysvipc` file succeeds, as the kernel's, and its
//! writes go nowhere; root's of a sysctl is EACCES, where the kernel
//! would let root set it).
//!
//! # Safety
//! `memfd_create`, `write` and `lseek` on a descriptor of our own, and
//! the ADDFD ioctl with a local structure for the call.
#![allow(unsafe_code)]

use super::notify::Memory;
use ipcns::{Cred, Errno, Mech, Namespace};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// x86-64's open, openat and openat2.
pub const OPEN: i32 = 2;
pub const OPENAT: i32 = 257;
pub const OPENAT2: i32 = 437;

/// The longest path answered here: `/proc/sys/kernel/` and a sysctl name.
const LONGEST: usize = 64;

/// What an open is.
pub enum Open {
    /// One of ours: the text to open, or the error to answer; whether the
    /// caller asked for close-on-exec.
    Ours(Result<String, Errno>, bool),
    /// Anything else: the kernel's.
    Theirs,
}

/// Decides open call `nr` with `args` (the caller's memory `mem`).
pub fn classify(ns: &Namespace, cred: &Cred, mem: &Memory, nr: i32, args: &[u64; 6]) -> Open {
    let (path, flags) = match nr {
        OPEN => (args[0], args[1]),
        OPENAT => (args[1], args[2]),
        OPENAT2 => {
            // struct open_how { __u64 flags; __u64 mode; __u64 resolve; }
            let mut f = [0u8; 8];
            if mem.read(args[2], &mut f).is_err() {
                return Open::Theirs;
            }
            (args[1], u64::from_ne_bytes(f))
        }
        _ => return Open::Theirs,
    };
    let Some(path) = read_path(mem, path) else {
        return Open::Theirs;
    };
    let sysvipc = path.starts_with(b"/proc/sysvipc/");
    let text = if let Some(which) = path.strip_prefix(b"/proc/sysvipc/") {
        let m = match which {
            b"sem" => Mech::Sem,
            b"msg" => Mech::Msg,
            b"shm" => Mech::Shm,
            _ => return Open::Theirs,
        };
        ns.proc_text(cred, m)
    } else if let Some(name) = path.strip_prefix(b"/proc/sys/kernel/") {
        let Ok(name) = std::str::from_utf8(name) else {
            return Open::Theirs;
        };
        match ns.sysctl_read(name) {
            Err(Errno::ENOENT) => return Open::Theirs,
            r => r,
        }
    } else {
        return Open::Theirs;
    };
    let flags = flags as i32;
    // Mode 0444 (sysvipc) and 0644 (sysctls): root may open them for
    // writing. Writes to a sysvipc file go nowhere (the kernel's fail);
    // writes to the sysctls are not served here (EACCES, even for root).
    let writable = sysvipc && cred.euid == 0;
    let text = if flags & libc::O_ACCMODE != libc::O_RDONLY && !writable {
        Err(Errno::EACCES)
    } else {
        text
    };
    Open::Ours(text, flags & libc::O_CLOEXEC != 0)
}

/// The NUL-terminated path at `addr`, if it is at most [`LONGEST`] bytes
/// (anything longer is none of ours). Read up to the end of its page
/// first, so that a short path at the end of the caller's last page reads.
fn read_path(mem: &Memory, addr: u64) -> Option<Vec<u8>> {
    let first = (4096 - (addr % 4096) as usize).min(LONGEST + 1);
    let mut b = vec![0u8; LONGEST + 1];
    mem.read(addr, &mut b[..first]).ok()?;
    if !b[..first].contains(&0) && first <= LONGEST {
        mem.read(addr + first as u64, &mut b[first..]).ok()?;
    }
    let n = b.iter().position(|&c| c == 0)?;
    b.truncate(n);
    Some(b)
}

/// A memfd holding `text`, at offset 0.
pub fn memfd(text: &str) -> Result<OwnedFd, Errno> {
    // SAFETY: see the module's doc.
    let fd = unsafe { libc::memfd_create(c"sysvipc".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: a new descriptor nothing else owns.
    let f = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: see the module's doc.
        let n = unsafe { libc::write(f.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return Err(Errno::ENOMEM);
        }
        rest = &rest[n as usize..];
    }
    // SAFETY: see the module's doc.
    unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_SET) };
    Ok(f)
}

/// Answers notification `id` with a copy of `fd` added to the caller's
/// table (close-on-exec if `cloexec`): the open's result. Whether it took.
pub fn send_fd(listener: RawFd, id: u64, fd: &OwnedFd, cloexec: bool) -> bool {
    let mut a = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: see the module's doc.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut a) >= 0 }
}
