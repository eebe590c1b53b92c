//! The guardian of an unshared namespace: removes it once its last
//! process is gone, as the kernel frees an IPC namespace when the last
//! task holding it has exited or been killed (ipc/namespace.c `put_ipc_ns`,
//! then `free_ipc`, asynchronously).
//!
//! # Protocol
//! 1. Membership is a descriptor. At unshare the library makes a pipe; the
//!    write end stays open in the process, **not** close-on-exec, at the
//!    lowest free number from [`MEMBER_FD_MIN`], so every process forked
//!    or exec'd from it holds it, as every task of a kernel namespace
//!    holds its nsproxy.
//! 2. The guardian holds the read end. It is a copy of the process made by
//!    a raw `clone` whose exit signal is none (`sys::clone_quiet`): the
//!    program's `wait(-1)` and SIGCHLD never see it. All signals are
//!    blocked before the clone (none can run a handler of the program in
//!    it) and stay blocked; it takes a session of its own, works from `/`,
//!    closes every other descriptor (it is no member) and unmaps every
//!    shared mapping it inherited (arenas, segments: no maps scan counts
//!    it, its own or `ipcns ns prune`'s), and names itself
//!    `ipcns-guardian`.
//! 3. `read` on the pipe gives EOF when every member has exited, been
//!    killed, or closed the descriptor. Then, while some other process
//!    maps the arena (`/proc/*/maps`: its device and inode; a member that
//!    closed the descriptor keeps the namespace while it maps it), it
//!    waits for those processes to end (their pidfds, and a fresh scan at
//!    least every second).
//! 4. When none does, it removes the namespace as `Namespace::remove_at`
//!    does (the arena file if it is still the one it guards, then the
//!    `pool` and `shm.N` files of its segment directories of the arena's
//!    owner, and the directories) and exits.
//!
//! Everything the guardian needs (paths, the arena's identity) is made
//! before the clone ([`Plan`]): after it, in a copy of a process whose
//! other threads may have held the allocator's locks, it only makes raw
//! system calls on memory it already has (`sys.rs`, `maps.rs`).
//!
//! Cost: one process per unshared namespace, asleep in `read`, its pages
//! shared copy-on-write with the process it was cloned from (the shared
//! mappings unmapped), which it keeps while it lives (the process's
//! private memory as of the unshare is not freed at its exit until the
//! guardian ends). The clone is a fork of the process: about 0.2 ms for a
//! small one, plus some 26 ms per GiB of private memory it has touched
//! (4 KiB pages: its page tables are copied). A guardian that exec'd a
//! small helper image from a `CLONE_VM | CLONE_VFORK` child would cost
//! neither; not done.

mod maps;
mod sys;

use core::sync::atomic::{AtomicI32, Ordering};
use ipcns_sys::{Errno, Fd};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The write end goes at the lowest free number from here (lower only
/// if RLIMIT_NOFILE is), out of the way of programs that expect their
/// next descriptor to be 3.
pub const MEMBER_FD_MIN: i32 = 100;

/// What the guardian needs, made before the clone.
struct Plan {
    /// The arena's absolute path.
    arena: CString,
    /// Its device (major, minor) and inode.
    dev: (u32, u32),
    ino: u64,
    /// The segment directories (`Namespace::segment_dirs_at`).
    dirs: Vec<CString>,
}

/// The pid of the last guardian this process started, for a later
/// unshare to reap it if it ended already (a guardian that ends while
/// its parent lives stays a zombie, seen by no ordinary wait).
static LAST: AtomicI32 = AtomicI32::new(0);

fn c(path: &Path) -> Result<CString, Errno> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// The environment variable that names the process's membership
/// descriptor, `N:INODE` (the pipe's inode, so that a number the program
/// closed and reused is never taken for it), for a later unshare of the
/// whole process, in this image or one it execs, to leave the namespace.
const MEMBER_ENV: &str = "IPCNS_MEMBER_FD";

/// `IPCNS_MEMBER_FD`'s value for `member`.
pub fn member_env(member: &Fd) -> String {
    let ino = member.stat().map_or(0, |s| s.ino);
    format!("{}:{ino}", member.raw())
}

/// Makes `member` the process's membership descriptor: kept open for
/// good (it is inherited by what the process forks and execs) and named
/// in the environment.
pub fn join(member: Fd) {
    crate::next::set_env(MEMBER_ENV, member_env(&member).as_bytes());
    let _ = member.into_raw();
}

/// The process leaves the unshared namespace it was in (it unshares
/// again, whole): closes the membership descriptor the environment names,
/// if that number is still the write end of that pipe.
pub fn leave() {
    let Some((n, ino)) = std::env::var(MEMBER_ENV).ok().and_then(|v| {
        let (n, ino) = v.split_once(':')?;
        Some((n.parse::<i32>().ok()?, ino.parse::<u64>().ok()?))
    }) else {
        return;
    };
    if n < 0 {
        return;
    }
    let ours = Fd::with_raw(n, |fd| {
        fd.stat()
            .is_ok_and(|s| s.mode & libc::S_IFMT == libc::S_IFIFO && s.ino == ino)
            && fd.access_mode() == Ok(libc::O_WRONLY)
    });
    if ours {
        sys::close(n);
    }
    crate::next::unset_env(MEMBER_ENV);
}

/// Starts the guardian of the namespace whose arena is at `arena` (just
/// created by this process): the membership descriptor (the pipe's write
/// end, inherited across exec), which the caller keeps open.
pub fn start(arena: &Path) -> Result<Fd, Errno> {
    let arena = std::path::absolute(arena).map_err(|_| Errno::ENOMEM)?;
    let id = ipcns_sys::fs::lstat(&arena)?;
    let dirs = ipcns_core::Namespace::segment_dirs_at(&arena)?
        .iter()
        .map(|d| c(d))
        .collect::<Result<Vec<_>, _>>()?;
    let plan = Plan {
        arena: c(&arena)?,
        dev: id.dev,
        ino: id.ino,
        dirs,
    };
    let (r, w) = sys::pipe()?;
    // Out of the program's way if it can be; else where pipe2 put it.
    let w = match sys::dup_from(&w, MEMBER_FD_MIN) {
        Ok(high) => high,
        Err(_) => {
            w.set_cloexec(false)?;
            w
        }
    };
    let previous = LAST.load(Ordering::Relaxed);
    if previous > 0 && sys::reap(previous) {
        LAST.store(0, Ordering::Relaxed);
    }
    // No signal may run a handler of the program in the copy: all are
    // blocked across the clone, and stay so in the guardian.
    let all = u64::MAX;
    let mut old = 0u64;
    ipcns_sys::signal::sigprocmask(libc::SIG_SETMASK, Some(&all), Some(&mut old))?;
    let pid = sys::clone_quiet();
    if pid == Ok(0) {
        guard(&plan, r.into_raw());
    }
    let _ = ipcns_sys::signal::sigprocmask(libc::SIG_SETMASK, Some(&old), None);
    drop(r);
    let pid = pid?;
    LAST.store(pid, Ordering::Relaxed);
    Ok(w)
}

/// The guardian, in the clone child: see the module doc. Never returns.
fn guard(plan: &Plan, r: i32) -> ! {
    sys::set_name(c"ipcns-guardian");
    sys::setsid();
    sys::chdir(c"/");
    // Only the read end: the write ends (this namespace's and any
    // other's) would make it a member, other files would stay open.
    let r = r as u32;
    if r > 0 {
        sys::close_range(0, r - 1);
    }
    sys::close_range(r + 1, u32::MAX);
    unmap_shared();
    // EOF: the last member is gone (nobody writes; a byte someone did
    // write is read and ignored).
    Fd::with_raw(r as i32, |fd| {
        let mut b = [0u8; 64];
        while fd.read(&mut b).is_ok_and(|n| n > 0) {}
    });
    sys::close(r as i32);
    let me = ipcns_sys::process::getpid() as u32;
    loop {
        if !still_there(plan) {
            sys::exit(0);
        }
        let mut pids = [0u32; 8];
        let n = maps::mappers(plan.dev, plan.ino, me, &mut pids);
        if n == 0 {
            remove(plan);
            sys::exit(0);
        }
        wait_for(&pids[..n.min(pids.len())]);
    }
}

/// Unmaps every shared mapping of this process (the guardian's code,
/// stack and data are private), a pass per 32 of them.
fn unmap_shared() {
    for _ in 0..1024 {
        let mut found = [(0usize, 0usize); 32];
        let mut n = 0;
        maps::each(c"/proc/self/maps", |m| {
            if m.shared && m.hi > m.lo {
                found[n] = (m.lo, m.hi - m.lo);
                n += 1;
            }
            n < found.len()
        });
        for &(lo, len) in &found[..n] {
            sys::unmap(lo, len);
        }
        if n < found.len() {
            return;
        }
    }
}

/// Whether the arena file is still the one guarded (not removed, or
/// replaced, by hand).
fn still_there(plan: &Plan) -> bool {
    ipcns_sys::fs::open_c(&plan.arena, libc::O_PATH | libc::O_NOFOLLOW, 0)
        .and_then(|f| f.stat())
        .is_ok_and(|s| s.dev == plan.dev && s.ino == plan.ino)
}

/// Sleeps until one of `pids` ends or a second passed.
fn wait_for(pids: &[u32]) {
    let mut fds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 8];
    let mut open: [Option<Fd>; 8] = Default::default();
    for (i, &p) in pids.iter().enumerate().take(fds.len()) {
        if let Ok(fd) = ipcns_sys::process::pidfd_open(p as i32, 0) {
            fds[i].fd = fd.raw();
            open[i] = Some(fd);
        }
    }
    sys::ppoll(&mut fds[..pids.len().min(8)], 1_000_000_000);
}

/// Removes the namespace: the arena file, then the segment files of its
/// directories and the directories (`Namespace::remove_at`).
fn remove(plan: &Plan) {
    let Ok(id) = ipcns_sys::fs::open_c(&plan.arena, libc::O_PATH | libc::O_NOFOLLOW, 0)
        .and_then(|f| f.stat())
    else {
        return;
    };
    if (id.dev, id.ino) != (plan.dev, plan.ino) {
        return;
    }
    let _ = sys::unlinkat(None, &plan.arena, 0);
    for d in &plan.dirs {
        remove_dir(d, id.uid);
    }
}

/// `remove_segment_dir` without allocating: the segment files of `path`,
/// a real directory of `owner`, then the directory if that emptied it.
fn remove_dir(path: &CString, owner: u32) {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let Ok(dir) = ipcns_sys::fs::open_c(path, flags, 0) else {
        return;
    };
    if !dir.stat().is_ok_and(|s| s.is_dir() && s.uid == owner) {
        return;
    }
    let mut buf = [0u8; 4096];
    // Names are removed as they are read; passes from the start again
    // until one removes nothing catch any a removal moved past.
    for _ in 0..4 {
        let _ = dir.seek(0, libc::SEEK_SET);
        let mut removed = 0;
        loop {
            let n = match sys::getdents(&dir, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n.min(buf.len()),
            };
            let mut at = 0;
            while at + 19 <= n {
                let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
                if reclen < 19 || at + reclen > n {
                    break;
                }
                let name = &buf[at + 19..at + reclen];
                at += reclen;
                let Ok(name) = core::ffi::CStr::from_bytes_until_nul(name) else {
                    continue;
                };
                if ipcns_core::is_segment_file(name.to_bytes())
                    && sys::unlinkat(Some(&dir), name, 0).is_ok()
                {
                    removed += 1;
                }
            }
        }
        if removed == 0 {
            break;
        }
    }
    drop(dir);
    let _ = sys::unlinkat(None, path, libc::AT_REMOVEDIR);
}
