//! Test support: child processes in new user namespaces, raw map writes,
//! fork, and a small deterministic PRNG.
//!
//! # Safety
//! `fork_run` forks the (multi-threaded) test process; the child runs only
//! the given closure and then `_exit`s without unwinding or running
//! destructors. The closures used here make system calls and allocate;
//! glibc's fork resets the allocator's locks in the child, so allocation is
//! safe there. `setns_user`, `kill` and `waitpid` are plain system calls on
//! descriptors and pids this module owns.
#![allow(unsafe_code)]

use ipcns_idmap::proc::IdKind;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};

/// Whether kernel tests can run here; `Err` says why not. With
/// IPCNS_REQUIRE_KERNEL=1 a missing kernel fails the test instead.
pub fn kernel_or_skip(test: &str) -> bool {
    let why = if std::env::var_os("IPCNS_SKIP_KERNEL").is_some() {
        Some("IPCNS_SKIP_KERNEL is set".to_string())
    } else {
        match NsProc::spawn() {
            Err(e) => Some(format!("cannot create a user namespace: {e}")),
            Ok(p) => match write_text(p.pid(), IdKind::Uid, b"0 0 1\n") {
                Ok(()) => None,
                Err(e) => Some(format!(
                    "cannot write a child namespace's uid_map (errno {e}); these tests need root"
                )),
            },
        }
    };
    match why {
        None => true,
        Some(why) => {
            if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
                panic!("{test}: IPCNS_REQUIRE_KERNEL=1 but {why}");
            }
            // Written past the harness's capture so that the skip is seen.
            let _ = writeln!(io::stderr(), "SKIPPED {test}: {why}");
            false
        }
    }
}

/// A `sleep` in a new user namespace, killed on drop.
pub struct NsProc {
    child: Child,
}

impl NsProc {
    pub fn spawn() -> io::Result<NsProc> {
        Self::spawn_cmd(Command::new("sleep").arg("600"))
    }

    pub fn spawn_cmd(cmd: &mut Command) -> io::Result<NsProc> {
        let child = ipcns_idmap::userns::spawn_in_new_userns(cmd)?;
        Ok(NsProc { child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for NsProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `write(2)` of `text` to a process's map; the errno on failure.
pub fn write_text(pid: u32, kind: IdKind, text: &[u8]) -> Result<(), i32> {
    let path = format!("/proc/{pid}/{}_map", kind.name());
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| e.raw_os_error().unwrap_or(-1))?;
    match f.write(text) {
        Ok(n) if n == text.len() => Ok(()),
        Ok(_) => Err(-2),
        Err(e) => Err(e.raw_os_error().unwrap_or(-1)),
    }
}

pub fn read_text(pid: u32, kind: IdKind) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/{}_map", kind.name())).unwrap()
}

/// Runs `f` in a forked child and returns its exit code (`-signal` if it
/// was killed).
pub fn fork_run(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: see the module's Safety section; the child never returns from
    // this block.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: _exit ends the child without running the parent's
        // destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid, "waitpid: {}", io::Error::last_os_error());
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    }
}

/// Joins the user namespace of `pid` (call only in a forked, single-threaded
/// child). Returns the errno on failure.
pub fn setns_user(pid: u32) -> Result<(), i32> {
    let f =
        File::open(format!("/proc/{pid}/ns/user")).map_err(|e| e.raw_os_error().unwrap_or(-1))?;
    // SAFETY: `f` is an open namespace descriptor for the duration of the call.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWUSER) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1))
    }
}

/// `setresgid(g, g, g)` then `setresuid(u, u, u)`; the errno of the first
/// failure.
pub fn set_ids(u: u32, g: u32) -> Result<(), i32> {
    // SAFETY: plain system calls on integers.
    let r = unsafe { libc::setresgid(g, g, g) };
    if r != 0 {
        return Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    // SAFETY: as above.
    let r = unsafe { libc::setresuid(u, u, u) };
    if r != 0 {
        return Err(io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    Ok(())
}

/// Piped stdin/stdout for `Command`.
pub fn piped(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped())
}

/// xorshift64*: deterministic, seeded from IPCNS_TEST_SEED when set.
pub struct Rng(u64);

impl Rng {
    pub fn from_env(default: u64) -> Rng {
        let seed = std::env::var("IPCNS_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default);
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// `kill(pid, SIGKILL)`, ignoring a process already gone.
pub fn kill(pid: u32) {
    // SAFETY: a plain system call on a pid this test started.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}
