//! The listener's way up: the child installs the filter between fork and
//! exec and sends its listener through a socket pair made before the
//! fork (SCM_RIGHTS), then closes its own copy, so that nothing in the
//! program can answer its own calls.
//!
//! # Safety
//! [`send`] runs in the child between fork and exec: system calls only,
//! on buffers of its own stack. [`receive`] hands a descriptor the kernel
//! just made ours to an `OwnedFd`. Each `msghdr` points at local buffers
//! that live across its call.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The pair: (the parent's end, the child's end), both close-on-exec.
pub fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Space for one descriptor's control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; 24]);

/// Sends descriptor `fd` through socket `sock`. Async-signal-safe.
pub fn send(sock: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 24]);
    // SAFETY: all-zero is a valid msghdr; the pointers set below are
    // local buffers that outlive the call; CMSG_* stay inside `control`,
    // which is CMSG_SPACE(sizeof(int)) bytes (24 on 64-bit Linux).
    unsafe {
        let mut m: libc::msghdr = core::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = control.0.as_mut_ptr().cast();
        m.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let c = libc::CMSG_FIRSTHDR(&m);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        core::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        if libc::sendmsg(sock, &m, libc::MSG_NOSIGNAL) != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives the descriptor sent through `sock`; None if the other end
/// closed without sending one (the child failed before, or never
/// installed the filter).
pub fn receive(sock: &OwnedFd) -> Option<OwnedFd> {
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = Control([0; 24]);
    // SAFETY: as in `send`; the descriptor read from the control message
    // is one the kernel installed for us (MSG_CMSG_CLOEXEC).
    unsafe {
        let mut m: libc::msghdr = core::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = control.0.as_mut_ptr().cast();
        m.msg_controllen = control.0.len();
        let n = loop {
            let n = libc::recvmsg(sock.as_raw_fd(), &mut m, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n <= 0 {
            return None;
        }
        let c = libc::CMSG_FIRSTHDR(&m);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = core::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}
