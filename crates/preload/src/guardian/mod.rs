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
//!    `ipcns-guardian`. It lives in the pid namespace of the process that
//!    unshared, never in a new one (`unshare(CLONE_NEWPID | CLONE_NEWIPC)`
//!    makes it before the kernel makes the pid namespace): [`possible`]
//!    says when none is made (see there).
//! 3. `read` on the pipe gives EOF when every member has exited, been
//!    killed, or closed the descriptor. Then it removes nothing while any
//!    other process may still be in the namespace (`scan.rs`: one that
//!    maps the arena, one whose environment names it, one of the owner's
//!    uid it may not inspect), or while `/proc` cannot tell; it waits for
//!    those processes to end (their pidfds), scanning again after 1 s,
//!    then 2, 4, ... up to 60 s between scans.
//! 4. When none is left, it removes the namespace as `Namespace::remove_at`
//!    does (the arena file if it is still the one it guards, then the
//!    `pool` and `shm.N` files of its segment directories of the arena's
//!    owner, and the directories) and exits.
//!
//! Everything the guardian needs (paths, the arena's identity) is made
//! before the clone ([`Plan`]): after it, in a copy of a process whose
//! other threads may have held the allocator's locks, it only makes raw
//! system calls on memory it already has (`sys.rs`, `maps.rs`,
//! `scan.rs`), with no panic site (no indexing, no unwrap, no debug
//! assertion on its path). It can never return into the program: the
//! child's side is an `extern "C"` function (a panic could not unwind out
//! of it) that ends in `exit_group`, and a guard whose drop calls
//! `exit_group` too stands on its stack.
//!
//! Not covered (the namespace then stays until `ipcns ns prune`, or goes
//! early): a process killed with SIGKILL of the guardian (files stay);
//! a process of the namespace with its descriptor closed, the arena not
//! mapped, and an environment that no longer names it (exec'd with a
//! cleared environment: it may find the namespace gone); a process of
//! another uid that cannot be inspected; the end of a pid namespace's init
//! when the guardian is in that pid namespace (it is killed with the
//! others: files stay).
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
mod scan;
mod sys;

use core::sync::atomic::{AtomicU64, Ordering};
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
    /// Its device (major, minor) and inode, as `stat` gives them.
    dev: (u32, u32),
    ino: u64,
    /// Its device as `/proc/PID/maps` shows it, if that is the `stat`
    /// one (else the scan matches the inode alone).
    maps_dev: Option<(u32, u32)>,
    /// Its owner.
    uid: u32,
    /// The namespace's name.
    name: Vec<u8>,
    /// The process that unshared.
    creator: u32,
    /// The segment directories (`Namespace::segment_dirs_at`).
    dirs: Vec<CString>,
}

/// The last guardian this process started, for a later unshare to reap
/// it if it ended already (a guardian that ends while its parent lives
/// stays a zombie, seen by no ordinary wait): the pid of the process that
/// started it in the high half, its own in the low half. A fork child
/// inherits the value, not the child: the starter's pid tells.
static LAST: AtomicU64 = AtomicU64::new(0);

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

/// Whether a guardian made now would outlive the namespace's processes
/// where they live: not when this process is the init of its pid
/// namespace (a clone with `CLONE_NEWPID | CLONE_NEWIPC` makes the child
/// one; the guardian would be killed with the others at its end, before
/// it removed anything), and not when the process's children go to
/// another pid namespace than its own (`/proc/self/ns/pid_for_children`
/// after an `unshare(CLONE_NEWPID)`: the guardian would be that
/// namespace's init). Then the namespace is made without one, and stays
/// until `ipcns ns prune`.
pub fn possible() -> bool {
    use std::os::unix::fs::MetadataExt;
    if ipcns_sys::process::getpid() == 1 {
        return false;
    }
    let children = "/proc/self/ns/pid_for_children";
    match (
        std::fs::metadata("/proc/self/ns/pid"),
        std::fs::metadata(children),
    ) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        // A new pid namespace with no process yet: the link is there but
        // leads nowhere (ENOENT) until its init is made.
        (Ok(_), Err(_)) if std::fs::symlink_metadata(children).is_ok() => false,
        // Before Linux 4.12 there is no pid_for_children; without /proc
        // the guardian never removes anything (`scan.rs`).
        _ => true,
    }
}

/// Starts the guardian of the namespace `name` whose arena is at `arena`
/// (just created and mapped by this process): the membership descriptor
/// (the pipe's write end, inherited across exec), which the caller keeps
/// open.
pub fn start(arena: &Path, name: &str) -> Result<Fd, Errno> {
    let arena = std::path::absolute(arena).map_err(|_| Errno::ENOMEM)?;
    let id = ipcns_sys::fs::lstat(&arena)?;
    let dirs = ipcns_core::Namespace::segment_dirs_at(&arena)?
        .iter()
        .map(|d| c(d))
        .collect::<Result<Vec<_>, _>>()?;
    // The device the maps show for the arena this process maps now: the
    // stat one, or another (btrfs subvolumes, overlayfs), then not trusted.
    let mut shown = None;
    let _ = maps::each(c"/proc/self/maps", |m| {
        if m.ino == id.ino {
            shown = Some(m.dev == id.dev);
        }
        shown != Some(true)
    });
    let plan = Plan {
        arena: c(&arena)?,
        dev: id.dev,
        ino: id.ino,
        maps_dev: (shown == Some(true)).then_some(id.dev),
        uid: id.uid,
        name: name.as_bytes().to_vec(),
        creator: ipcns_sys::process::getpid() as u32,
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
    let me = ipcns_sys::process::getpid() as u32;
    let last = LAST.load(Ordering::Relaxed);
    let (starter, previous) = ((last >> 32) as u32, last as u32 as i32);
    // Only if that pid is still a guardian's (the program may have reaped
    // it itself, with __WALL, and the number gone to a child of its own).
    let named = || {
        let mut p = scan::ProcPath::new(b"/proc/");
        p.num(previous as u32);
        scan::is_guardian(&p)
    };
    if starter == me && previous > 0 && named() && sys::reap(previous) {
        LAST.store(0, Ordering::Relaxed);
    }
    // No signal may run a handler of the program in the copy: all are
    // blocked across the clone, and stay so in the guardian.
    let all = u64::MAX;
    let mut old = 0u64;
    ipcns_sys::signal::sigprocmask(libc::SIG_SETMASK, Some(&all), Some(&mut old))?;
    let pid = sys::clone_quiet();
    if pid == Ok(0) {
        child(&plan, r.into_raw());
    }
    let _ = ipcns_sys::signal::sigprocmask(libc::SIG_SETMASK, Some(&old), None);
    drop(r);
    let pid = pid?;
    LAST.store(
        u64::from(me) << 32 | u64::from(pid as u32),
        Ordering::Relaxed,
    );
    Ok(w)
}

/// Ends the guardian with `exit_group` if anything unwinds past it.
struct ExitOnDrop;

impl Drop for ExitOnDrop {
    fn drop(&mut self) {
        sys::exit(1);
    }
}

/// The clone child's side. `extern "C"`: a panic cannot unwind out of it
/// (it aborts the guardian), so nothing returns into the program's code.
extern "C" fn child(plan: &Plan, r: i32) -> ! {
    let _end = ExitOnDrop;
    guard(plan, r)
}

/// The guardian: see the module doc. Never returns.
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
    sys::close_range(r.saturating_add(1), u32::MAX);
    unmap_shared();
    // EOF: the last member is gone (nobody writes; a byte someone did
    // write is read and ignored).
    Fd::with_raw(r as i32, |fd| {
        let mut b = [0u8; 64];
        while fd.read(&mut b).is_ok_and(|n| n > 0) {}
    });
    sys::close(r as i32);
    let me = ipcns_sys::process::getpid() as u32;
    let target = scan::Target {
        ino: plan.ino,
        dev: plan.maps_dev,
        name: &plan.name,
        uid: plan.uid,
        creator: plan.creator,
        since: scan::start_time(&scan::ProcPath::new(b"/proc/self")).unwrap_or(0),
    };
    let mut delay = FIRST_DELAY_NS;
    // The last scan found no member: one more, a moment later, before
    // removing (a process in the middle of an exec shows neither the
    // old image's maps nor the new one's environment for that moment;
    // the EOF comes just then when it closed its descriptors to exec).
    let mut quiet = false;
    loop {
        if !still_there(plan) {
            sys::exit(0);
        }
        let mut pids = [0u32; WATCHED];
        let found = scan::members(&target, me, &mut pids);
        quiet = match found {
            Some(0) if quiet => {
                remove(plan);
                sys::exit(0);
            }
            Some(0) => {
                wait_for(&[], CONFIRM_NS);
                true
            }
            _ => false,
        };
        let woken = match found {
            Some(0) => continue,
            Some(n) => wait_for(pids.get(..n).unwrap_or(&pids), delay),
            // /proc cannot tell: wait and look again.
            None => wait_for(&[], delay),
        };
        if !woken {
            delay = delay.saturating_mul(2).min(LAST_DELAY_NS);
        }
    }
}

/// The scan's first wait, and its longest (the waits double between).
const FIRST_DELAY_NS: u64 = 1_000_000_000;
const LAST_DELAY_NS: u64 = 60_000_000_000;
/// The wait between the scan that found no member and the one that
/// confirms it.
const CONFIRM_NS: u64 = 200_000_000;
/// How many of the processes seen the guardian waits for by their pidfd.
const WATCHED: usize = 16;

/// Unmaps every shared mapping of this process (the guardian's code,
/// stack and data are private), a pass per 32 of them.
fn unmap_shared() {
    for _ in 0..1024 {
        let mut found = [(0usize, 0usize); 32];
        let mut n = 0usize;
        let _ = maps::each(c"/proc/self/maps", |m| {
            if m.shared && m.hi > m.lo {
                if let Some(slot) = found.get_mut(n) {
                    *slot = (m.lo, m.hi - m.lo);
                }
                n = n.saturating_add(1);
            }
            n < found.len()
        });
        for &(lo, len) in found.get(..n).unwrap_or(&found) {
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

/// Sleeps until one of `pids` (the first [`WATCHED`]) ends or
/// `timeout_ns` passed: whether one ended.
fn wait_for(pids: &[u32], timeout_ns: u64) -> bool {
    let mut fds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; WATCHED];
    let mut open: [Option<Fd>; WATCHED] = Default::default();
    for ((&p, slot), fd) in pids.iter().zip(fds.iter_mut()).zip(open.iter_mut()) {
        if let Ok(pidfd) = ipcns_sys::process::pidfd_open(p as i32, 0) {
            slot.fd = pidfd.raw();
            *fd = Some(pidfd);
        }
    }
    let n = pids.len().min(WATCHED);
    sys::ppoll(fds.get_mut(..n).unwrap_or(&mut []), timeout_ns)
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
    let mut buf = [0u8; 2048];
    // Names are removed as they are read; passes from the start again
    // until one removes nothing catch any a removal moved past.
    for _ in 0..4 {
        sys::rewind(&dir);
        let mut removed = false;
        maps::each_name(&dir, &mut buf, |name| {
            if ipcns_core::is_segment_file(name.to_bytes())
                && sys::unlinkat(Some(&dir), name, 0).is_ok()
            {
                removed = true;
            }
            true
        });
        if !removed {
            break;
        }
    }
    drop(dir);
    let _ = sys::unlinkat(None, path, libc::AT_REMOVEDIR);
}

/// At the load of an image in a namespace that an unshare made (its
/// `IPCNS` an `unshare-*` name, or `IPCNS_FD` open on such an arena): one
/// page of the arena mapped `PROT_NONE` for the image's life, so that the
/// guardian's scan sees the process as a member by its maps from its first
/// instruction on, whatever it does before its first IPC call: close its
/// descriptors, overwrite its environment area with a process title
/// (PostgreSQL, nginx, setproctitle), or reach the namespace only through
/// `IPCNS_FD` with `IPCNS` naming another. Costs an open and an mmap, only
/// in such namespaces; a file that cannot be opened is left alone (the
/// first call says why).
pub fn hold_at_load() {
    // The environment as of the exec, from /proc/self/environ: getenv
    // here would be another preloaded library's (one that makes IPC calls
    // from it, as tests/c/hook.c does, would then make them at our load).
    let Ok(env) = ipcns_sys::fs::open_c(c"/proc/self/environ", libc::O_RDONLY | libc::O_CLOEXEC, 0)
    else {
        return;
    };
    let (mut name, mut dir, mut fdnum) = (Value::new(), Value::new(), Value::new());
    maps::each_record(&env, 0, |r, whole| {
        for (key, v) in [
            (b"IPCNS=".as_slice(), &mut name),
            (b"IPCNS_DIR=", &mut dir),
            (b"IPCNS_FD=", &mut fdnum),
        ] {
            if let Some(val) = r.strip_prefix(key) {
                v.first(val, whole);
            }
        }
        true
    });
    drop(env);
    let mut buf = [0u8; 512];
    if let Some(n) = fdnum
        .get()
        .and_then(maps::dec)
        .and_then(|n| u32::try_from(n).ok())
    {
        let mut p = scan::ProcPath::new(b"/proc/self/fd/");
        p.num(n);
        let named = ipcns_sys::fs::readlink(p.c(), &mut buf).is_ok_and(|t| {
            let base = t.rsplit(|&b| b == b'/').next().unwrap_or(t);
            base.starts_with(b"ipcns.unshare-") && !t.ends_with(b" (deleted)")
        });
        if named && let Ok(fd) = ipcns_sys::fs::open_c(p.c(), libc::O_RDONLY | libc::O_CLOEXEC, 0) {
            sys::hold_page(&fd);
        }
    }
    let Some(name) = name.get().filter(|n| n.starts_with(b"unshare-")) else {
        return;
    };
    let mut path = match dir.get().filter(|d| !d.is_empty()) {
        Some(d) => d.to_vec(),
        None => format!("/dev/shm/ipcns-{}", ipcns_sys::cred::geteuid()).into_bytes(),
    };
    path.extend_from_slice(b"/ipcns.");
    path.extend_from_slice(name);
    let Ok(path) = CString::new(path) else {
        return;
    };
    if let Ok(fd) = ipcns_sys::fs::open_c(&path, libc::O_RDONLY | libc::O_CLOEXEC, 0) {
        sys::hold_page(&fd);
    }
}

/// The first value of a variable in the environment, if whole and short.
struct Value {
    buf: [u8; 512],
    len: Option<usize>,
    seen: bool,
}

impl Value {
    fn new() -> Value {
        Value {
            buf: [0; 512],
            len: None,
            seen: false,
        }
    }

    fn first(&mut self, v: &[u8], whole: bool) {
        if core::mem::replace(&mut self.seen, true) {
            return;
        }
        if let (true, Some(dst)) = (whole, self.buf.get_mut(..v.len())) {
            dst.copy_from_slice(v);
            self.len = Some(v.len());
        }
    }

    fn get(&self) -> Option<&[u8]> {
        self.buf.get(..self.len?)
    }
}
