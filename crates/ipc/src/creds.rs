//! Who is calling: effective ids, supplementary groups and the three
//! capabilities SysV IPC consults, as the arena's user namespace sees them.
//!
//! Read once per process from the kernel and cached; refreshed by
//! [`refresh`] (the C ABI calls it from its set*id wrappers) and after fork.
//! A caller in a child user namespace of the arena's has its ids translated
//! down through its own maps (unmapped ids become 65534, as
//! `from_kuid_munged` would show them) and holds no capability in the
//! arena's namespace.
//!
//! Everything is asked of the kernel through raw system calls
//! (`getresuid`, `getresgid`, `getgroups`, `capget`, `prlimit64`, and
//! reads of /proc): a preload that fakes `getuid` and friends (fakeroot)
//! is not consulted, as the kernel's own checks would not consult it.

use crate::arena::own_userns;
use crate::sys;
use ipcns_idmap::IdMap;
use ipcns_idmap::proc::{IdKind, Pid, map_path};
use std::path::Path;
use std::sync::{Arc, RwLock};

/// CAP_IPC_OWNER, CAP_SYS_ADMIN, CAP_SYS_RESOURCE (linux/capability.h).
const CAP_IPC_LOCK: u32 = 14;
const CAP_IPC_OWNER: u32 = 15;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_RESOURCE: u32 = 24;

/// The caller's credentials for one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    /// Thread group id (what Linux records in sempid, lspid, shm_cprid...).
    pub pid: i32,
    pub euid: u32,
    pub egid: u32,
    pub groups: Vec<u32>,
    pub cap_ipc_owner: bool,
    pub cap_sys_admin: bool,
    pub cap_sys_resource: bool,
    pub cap_ipc_lock: bool,
    /// RLIMIT_MEMLOCK's soft limit in bytes (`u64::MAX` for unlimited).
    pub memlock_limit: u64,
    /// Start time of the process (field 22 of /proc/PID/stat; 0 unknown):
    /// with `pid`, names the process even after its pid is reused.
    pub start_time: u64,
    /// The caller's user namespace inode, and its maps when it is not the
    /// arena's (for translating ids shown back to it).
    pub userns: u64,
    pub maps: Option<Arc<(IdMap, IdMap)>>,
}

impl Cred {
    /// A credential for tests and tools: these ids, no capability.
    pub fn user(pid: i32, euid: u32, egid: u32, groups: Vec<u32>) -> Cred {
        Cred {
            pid,
            euid,
            egid,
            groups,
            cap_ipc_owner: false,
            cap_sys_admin: false,
            cap_sys_resource: false,
            cap_ipc_lock: false,
            memlock_limit: 8 << 20,
            start_time: 0,
            userns: own_userns(),
            maps: None,
        }
    }

    /// Root with every capability.
    pub fn root(pid: i32) -> Cred {
        Cred {
            cap_ipc_owner: true,
            cap_sys_admin: true,
            cap_sys_resource: true,
            cap_ipc_lock: true,
            ..Cred::user(pid, 0, 0, Vec::new())
        }
    }

    /// `in_group_p(gid)`: the effective gid or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.egid == gid || self.groups.contains(&gid)
    }

    /// An id stored in the arena as the caller sees it (`from_kuid_munged`).
    pub fn show_uid(&self, uid: u32) -> u32 {
        match &self.maps {
            None => uid,
            Some(m) => m.0.map_up_or_overflow(uid),
        }
    }

    pub fn show_gid(&self, gid: u32) -> u32 {
        match &self.maps {
            None => gid,
            Some(m) => m.1.map_up_or_overflow(gid),
        }
    }

    /// Reads the calling process's credentials, for an arena created in
    /// user namespace `arena_ns`.
    pub fn read_current(arena_ns: u64) -> std::io::Result<Cred> {
        let pid = sys::process::getpid();
        let euid = sys::cred::getresuid()?[1];
        let egid = sys::cred::getresgid()?[1];
        let groups = sys::cred::getgroups()?;
        let caps = sys::cred::effective_caps()?;
        let userns = own_userns();
        let mut cred = Cred {
            pid,
            euid,
            egid,
            groups,
            cap_ipc_owner: caps & (1 << CAP_IPC_OWNER) != 0,
            cap_sys_admin: caps & (1 << CAP_SYS_ADMIN) != 0,
            cap_sys_resource: caps & (1 << CAP_SYS_RESOURCE) != 0,
            cap_ipc_lock: caps & (1 << CAP_IPC_LOCK) != 0,
            memlock_limit: memlock_limit(),
            start_time: start_time(pid as u32).unwrap_or(0),
            userns,
            maps: None,
        };
        if arena_ns != 0 && userns != arena_ns {
            // A child namespace: our maps lead to the arena's namespace.
            let um = read_map(IdKind::Uid)?;
            let gm = read_map(IdKind::Gid)?;
            cred.translate(um, gm);
        }
        Ok(cred)
    }
}

impl Cred {
    /// For a caller in a child user namespace of the arena's: its ids
    /// mapped down through its maps `um` and `gm` (unmapped ones become
    /// the overflow id), no capability in the arena's namespace, and the
    /// maps kept for showing ids back to it.
    fn translate(&mut self, um: IdMap, gm: IdMap) {
        self.euid = um.map_down_or_overflow(self.euid);
        self.egid = gm.map_down_or_overflow(self.egid);
        self.groups = self
            .groups
            .iter()
            .map(|&g| gm.map_down_or_overflow(g))
            .collect();
        self.cap_ipc_owner = false;
        self.cap_sys_admin = false;
        self.cap_sys_resource = false;
        self.cap_ipc_lock = false;
        self.maps = Some(Arc::new((um, gm)));
    }

    /// The credentials of thread `tid` of another process, as they are
    /// now (`/proc/TID/status`: effective ids, groups, effective
    /// capabilities; `/proc/TID/limits`; its user namespace and maps),
    /// for an arena created in user namespace `arena_ns`: what a
    /// supervisor serving that thread's call checks it with. `pid` is the
    /// thread group's id (0: its `Tgid:` read with the rest) and
    /// `start_time` its start, as the caller knows them.
    pub fn read_of(tid: i32, pid: i32, start_time: u64, arena_ns: u64) -> std::io::Result<Cred> {
        let bad = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("/proc/{tid}/status: no {what}"),
            )
        };
        let status = sys::fs::read_to_string(Path::new(&format!("/proc/{tid}/status")))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        // "Uid:\treal\teffective\tsaved\tfs"
        let second = |name: &str| -> std::io::Result<u32> {
            field(name)
                .and_then(|v| v.split_ascii_whitespace().nth(1)?.parse().ok())
                .ok_or_else(|| bad(name))
        };
        let pid = match pid {
            0 => field("Tgid")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad("Tgid"))?,
            p => p,
        };
        let euid = second("Uid")?;
        let egid = second("Gid")?;
        let groups = field("Groups")
            .ok_or_else(|| bad("Groups"))?
            .split_ascii_whitespace()
            .map(|g| g.parse().map_err(|_| bad("Groups")))
            .collect::<std::io::Result<Vec<u32>>>()?;
        let caps = field("CapEff")
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .ok_or_else(|| bad("CapEff"))?;
        let userns = sys::fs::stat(Path::new(&format!("/proc/{tid}/ns/user"))).map_or(0, |m| m.ino);
        let mut cred = Cred {
            pid,
            euid,
            egid,
            groups,
            cap_ipc_owner: caps & (1 << CAP_IPC_OWNER) != 0,
            cap_sys_admin: caps & (1 << CAP_SYS_ADMIN) != 0,
            cap_sys_resource: caps & (1 << CAP_SYS_RESOURCE) != 0,
            cap_ipc_lock: caps & (1 << CAP_IPC_LOCK) != 0,
            memlock_limit: memlock_limit_of(tid),
            start_time,
            userns,
            maps: None,
        };
        if arena_ns != 0 && userns != 0 && userns != arena_ns {
            // Its maps as this (the arena's) namespace reads them.
            let um = ipcns_idmap::proc::read_map(Pid::Id(tid as u32), IdKind::Uid)?;
            let gm = ipcns_idmap::proc::read_map(Pid::Id(tid as u32), IdKind::Gid)?;
            cred.translate(um, gm);
        }
        Ok(cred)
    }
}

/// RLIMIT_MEMLOCK's soft limit of thread `tid`'s process, from
/// `/proc/TID/limits` ("Max locked memory  SOFT  HARD  bytes"), or
/// unlimited if it cannot be read.
fn memlock_limit_of(tid: i32) -> u64 {
    sys::fs::read_to_string(Path::new(&format!("/proc/{tid}/limits")))
        .ok()
        .and_then(|t| {
            let l = t.lines().find(|l| l.starts_with("Max locked memory"))?;
            let soft = l["Max locked memory".len()..]
                .split_ascii_whitespace()
                .next()?;
            soft.parse().ok()
        })
        .unwrap_or(u64::MAX)
}

/// The caller's own uid or gid map as its namespace sees it
/// (`ipcns_idmap::proc::read_map`, read through raw system calls). A map
/// not yet written reads as the empty map.
fn read_map(kind: IdKind) -> std::io::Result<IdMap> {
    let path = map_path(Pid::SelfProcess, kind);
    let text = sys::fs::read(&path)?;
    if text.is_empty() {
        return Ok(IdMap::empty());
    }
    // The kernel prints 4294967295 for lower ids the reader cannot see;
    // such a map has no meaning from here.
    IdMap::parse(&text).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: {e} (ids not visible from this namespace?)",
                path.display()
            ),
        )
    })
}

/// The start time of process `pid` (clock ticks after boot, field 22 of
/// /proc/PID/stat), or `None` when there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = sys::fs::read_to_string(Path::new(&format!("/proc/{pid}/stat"))).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count
    // fields after its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` started at `start` (0: any start) still lives.
pub fn alive(pid: i32, start: u64) -> bool {
    pid > 0 && start_time(pid as u32).is_some_and(|s| start == 0 || s == start)
}

/// RLIMIT_MEMLOCK's soft limit (`prlimit64`; RLIM_INFINITY is
/// `u64::MAX`), or unlimited if it cannot be read.
fn memlock_limit() -> u64 {
    sys::cred::soft_limit(libc::RLIMIT_MEMLOCK as usize).unwrap_or(u64::MAX)
}

/// The cache: (arena namespace, generation, refreshes, credentials).
type Cached = Option<(u64, u64, u64, Arc<Cred>)>;
static CACHE: RwLock<Cached> = RwLock::new(None);

/// The calling process's credentials, cached; read from /proc the first
/// time, after [`refresh`], and in a child after fork (no system call on
/// the cached path).
pub fn current(arena_ns: u64) -> std::io::Result<Arc<Cred>> {
    let generation = fork::generation();
    // The cache is never waited for: in a child forked while another
    // thread held its lock, the lock is never released (each call then
    // reads /proc); elsewhere a busy lock costs one read.
    let refreshes = fork::refreshes();
    if let Some((ns, g, _, c)) = CACHE.try_read().ok().and_then(|g| g.clone())
        && ns == arena_ns
        && g == generation
    {
        return Ok(c);
    }
    // A fork child has its parent's credentials, but its own pid and start
    // time: no need to read them all again.
    let inherited = CACHE
        .try_read()
        .ok()
        .and_then(|g| g.clone())
        .and_then(|(ns, _, r, c)| {
            (ns == arena_ns && r == refreshes).then(|| Cred {
                pid: sys::process::getpid(),
                start_time: crate::lock::own_start(),
                ..(*c).clone()
            })
        });
    let c = Arc::new(match inherited {
        Some(c) => c,
        None => Cred::read_current(arena_ns)?,
    });
    if let Ok(mut g) = CACHE.try_write() {
        *g = Some((arena_ns, generation, refreshes, c.clone()));
    }
    Ok(c)
}

/// The forks of this process's line, counted by the core's one fork
/// handler: a cache of something a fork changes (the pid in the
/// credentials) keeps the figure it was made under (`fork_generation`,
/// which registers the handler) and compares it with `forks_now`;
/// `clear_in_fork_child` has the same handler clear a flag of the C ABI
/// (whose own handler's code a child would fault in).
#[doc(hidden)]
pub use crate::lock::{clear_in_fork_child, fork_generation, forks_now};

/// Forgets the cached credentials (after setuid, setgid, setgroups, capset).
pub fn refresh() {
    fork::bump();
}

mod fork {
    //! A generation number that changes in the child at every fork and on
    //! every `refresh`.
    use core::sync::atomic::{AtomicU64, Ordering};

    static GENERATION: AtomicU64 = AtomicU64::new(0);

    /// The refreshes plus the forks of this process's line (the lock's fork
    /// counter, whose child handler is the only write a fork makes: one
    /// handler writing its own page here too copied one more page in every
    /// child).
    pub(super) fn generation() -> u64 {
        GENERATION
            .load(Ordering::Relaxed)
            .wrapping_add(crate::lock::fork_generation())
    }

    pub(super) fn bump() {
        REFRESHES.fetch_add(1, Ordering::Relaxed);
        GENERATION.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the credentials were said to change (`refresh`):
    /// a cache made since the last is good for a fork child too, whose
    /// credentials are its parent's.
    pub(super) fn refreshes() -> u64 {
        REFRESHES.load(Ordering::Relaxed)
    }

    static REFRESHES: AtomicU64 = AtomicU64::new(0);
}
