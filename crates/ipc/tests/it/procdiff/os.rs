//! Process plumbing of the engine: pidfds (a logical process's end seen
//! by the driver, whoever its parent is), descriptors kept across exec,
//! bytes of shm attachments, what a process is doing (from /proc), and the
//! entry point of a re-executed server.
//!
//! # Safety
//! `PidFd::ended` polls the descriptor `pidfd_open` returned (owned since), `readable` a descriptor of the caller's. `keep_across_exec` clears
//! FD_CLOEXEC on a descriptor the caller owns. `datagram_from_fd` takes
//! ownership of a descriptor a re-executed server inherited and that
//! nothing else in its image owns (the spec in its environment names it).
//! `peek` and `poke` touch one byte of a live attachment: the driver hands
//! out addresses only inside attachments it recorded (and `poke` only
//! writable ones), which are detached only through the driver too.
//! `ignore_children`, `own_group`, `kill` and `exit_now` are plain system
//! calls. `AFTER_EXEC` is one function pointer in `.init_array`: it runs
//! before `main` in every image of the test binary, and returns at once
//! unless the image was started by a server's exec.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// A process, as a descriptor that becomes readable when it ends.
pub struct PidFd(OwnedFd);

impl PidFd {
    /// `pidfd_open(pid, 0)`.
    pub fn open(pid: i32) -> std::io::Result<PidFd> {
        Ok(PidFd(ipcns_sys::process::pidfd_open(pid, 0)?.into()))
    }

    /// Whether the process has ended (its exit handling, `exit_sem` and
    /// `exit_shm` included, is over), waiting at most `wait`.
    pub fn ended(&self, wait: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, borrowed for the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        r > 0 && p.revents & libc::POLLIN != 0
    }
}

/// Waits at most `wait` for `fd` to be readable; whether it is.
pub fn readable(fd: RawFd, wait: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd and a timespec, borrowed for the call; no
    // signal mask.
    let r = unsafe { libc::ppoll(&mut p, 1, &ts, core::ptr::null()) };
    r > 0 && p.revents & libc::POLLIN != 0
}

/// Clears FD_CLOEXEC on `fd`: it stays open across the next exec.
pub fn keep_across_exec(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: integers only; `fd` is one of the caller's descriptors.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The socket a re-executed server inherited as `fd`. For the server's
/// startup only, once per descriptor of its spec.
pub fn datagram_from_fd(fd: RawFd) -> UnixDatagram {
    // SAFETY: `fd` was kept open across exec for this image, and nothing
    // else in it owns the descriptor (module doc).
    unsafe { UnixDatagram::from_raw_fd(fd) }
}

/// The byte at `addr`, inside a live attachment.
pub fn peek(addr: usize) -> u8 {
    // SAFETY: the driver names only bytes inside attachments of this
    // process that it recorded and that are still mapped (module doc).
    unsafe { core::ptr::read_volatile(addr as *const u8) }
}

/// Stores `v` at `addr`, inside a live writable attachment.
pub fn poke(addr: usize, v: u8) {
    // SAFETY: as in `peek`, and the attachment is not read-only.
    unsafe { core::ptr::write_volatile(addr as *mut u8, v) }
}

/// Children of this process are reaped by the kernel as they end (no
/// zombies; their end is seen through pidfds).
pub fn ignore_children() {
    // SAFETY: a disposition change with a constant.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
}

/// Makes the calling process the leader of a new process group, which its
/// descendants join (`setpgid(0, 0)`).
pub fn own_group() {
    // SAFETY: integers only.
    unsafe { libc::setpgid(0, 0) };
}

/// `kill(pid, sig)` (a negative pid: the process group).
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: integers only.
    unsafe { libc::kill(pid, sig) };
}

/// Ends the process at once (`_exit`): no destructor, no atexit handler.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: ends the process.
    unsafe { libc::_exit(code) }
}

/// What the system call a process is blocked in says, from
/// /proc/PID/syscall: its number and first three arguments; None when it
/// runs (or is gone).
pub fn blocked_in(pid: i32) -> Option<(i64, [u64; 3])> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut it = s.split_whitespace();
    let nr: i64 = it.next()?.parse().ok()?;
    let mut args = [0u64; 3];
    for a in &mut args {
        *a = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
    }
    Some((nr, args))
}

/// The 8 bytes at `addr` in process `pid`'s memory (`/proc/PID/mem`).
pub fn read_u64(pid: i32, addr: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, addr).ok()?;
    Some(u64::from_ne_bytes(b))
}

/// The state letter of a process (`S` asleep, `R` running or waking...).
pub fn state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

extern "C" fn after_exec() {
    let Some(spec) = std::env::var_os(super::serve::EXEC_ENV) else {
        return;
    };
    // Never back into the test harness's main: this image serves, then ends.
    let code = std::panic::catch_unwind(|| super::serve::after_exec(&spec)).unwrap_or(101);
    exit_now(code)
}

#[used]
#[unsafe(link_section = ".init_array")]
static AFTER_EXEC: extern "C" fn() = after_exec;
