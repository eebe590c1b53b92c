//! Who is still in an unshared namespace once its last membership
//! descriptor closed, from `/proc`, without allocating and without a
//! panic site (see `maps.rs`).
//!
//! The rule is conservative: better to keep a namespace too long than to
//! remove one in use. A process counts if
//! - it **maps the arena** (`/proc/PID/maps`: the inode, and the device
//!   where it can be trusted, see [`Target::dev`]); a process whose maps
//!   are empty (its thread group leader exited while other threads live)
//!   by the maps of each of its tasks (`/proc/PID/task/TID/maps`);
//! - or its **environment** as of its exec names the namespace
//!   (`/proc/PID/environ`, or its tasks' likewise: the first `IPCNS=` is
//!   `IPCNS=NAME`, whatever `IPCNS_DIR` says, since a directory has many
//!   spellings and the name is this namespace's alone), or is not written
//!   yet (memory but no environment: the middle of an exec, counted as
//!   unreadable, below): a
//!   member that exec'd with its descriptors closed (Python's
//!   `close_fds`, sudo, `closefrom` daemons) and has made no IPC call yet
//!   (the library maps the arena at the first). Guardians (named
//!   `ipcns-guardian`) are not counted by their environment: they are
//!   copies of a process that may have been exec'd in this namespace;
//! - or it **may be** a member: its maps or environment cannot be read
//!   (EACCES, EPERM: not dumpable, or under a stricter ptrace policy),
//!   one of its uids (`/proc/PID/status`: real, effective, saved, file
//!   system) is the arena's owner, and it is the process that unshared
//!   or started no earlier than the guardian (`/proc/PID/stat`'s start
//!   time: a process is in the namespace only by descent from the one
//!   that unshared, after the unshare; the init of a container, unreadable
//!   even to its root, is not). Unreadable processes of other uids do not
//!   count: they cannot open the arena (mode 0600).
//!
//! If `/proc` cannot be listed, or is not the guardian's pid namespace's
//! (`/proc/self` is not its pid), the answer is "unknown": nothing is
//! removed then.

use super::maps::{self, dec};
use core::ffi::CStr;
use ipcns_sys::{Errno, Fd};

/// The namespace the scan looks for, made before the clone.
pub struct Target<'a> {
    /// The arena's inode.
    pub ino: u64,
    /// Its device as the maps show it, if they show the `stat` one (they
    /// may not: btrfs subvolumes, overlayfs); else the inode alone.
    pub dev: Option<(u32, u32)>,
    /// The namespace's name (`IPCNS`).
    pub name: &'a [u8],
    /// The arena's owner.
    pub uid: u32,
    /// The process that unshared, and the guardian's start time (clock
    /// ticks since boot): an unreadable process may be a member only if
    /// it is the one or started no earlier.
    pub creator: u32,
    pub since: u64,
}

/// A `/proc` path built in place: at most 63 bytes, NUL-terminated.
#[derive(Clone, Copy)]
pub struct ProcPath {
    buf: [u8; 64],
    len: usize,
}

impl ProcPath {
    pub fn new(start: &[u8]) -> ProcPath {
        let mut p = ProcPath {
            buf: [0; 64],
            len: 0,
        };
        p.push(start);
        p
    }

    /// Appends `b` (what does not fit is dropped: the path then names
    /// nothing that exists, and a failed open counts for no process).
    pub fn push(&mut self, b: &[u8]) -> &mut ProcPath {
        for &c in b {
            // The last byte stays the NUL.
            if self.len.saturating_add(1) >= self.buf.len() {
                break;
            }
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = c;
                self.len = self.len.saturating_add(1);
            }
        }
        self
    }

    /// Appends `v` in decimal.
    pub fn num(&mut self, mut v: u32) -> &mut ProcPath {
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        loop {
            at = at.saturating_sub(1);
            if let Some(d) = digits.get_mut(at) {
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || at == 0 {
                break;
            }
        }
        self.push(digits.get(at..).unwrap_or_default())
    }

    /// With `tail` appended, as a C string.
    pub fn with(&self, tail: &[u8]) -> ProcPath {
        let mut p = *self;
        p.push(tail);
        p
    }

    pub fn c(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.buf).unwrap_or_default()
    }
}

/// What one task's files say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Member,
    /// Its files may not be read: a member if it is of the owner's uid.
    Unreadable,
    /// Its maps and environment are empty: a process whose leader
    /// exited (its other tasks tell), or a kernel thread.
    Empty,
    /// Its files could not be read for another reason (ENOMEM, ENFILE,
    /// EINTR, ...): counted, so that nothing is removed on a guess.
    Unknown,
    No,
}

/// Whether `/proc` is the guardian's pid namespace's: `/proc/self` names
/// the guardian by its own pid.
pub fn proc_is_ours(me: u32) -> bool {
    let mut buf = [0u8; 16];
    ipcns_sys::fs::readlink(c"/proc/self", &mut buf)
        .ok()
        .and_then(dec)
        .is_some_and(|p| p == u64::from(me))
}

/// Whether `/proc` is mounted with `hidepid=invisible` (2) or
/// `ptraceable` (4) (`/proc/self/mountinfo`): it then does not list the
/// processes the guardian may not read, which may be members. Also when
/// the mount table cannot be read.
pub fn proc_hides_processes() -> bool {
    let Ok(fd) = ipcns_sys::fs::open_c(c"/proc/self/mountinfo", libc::O_RDONLY, 0) else {
        return true;
    };
    let mut hides = false;
    maps::each_record(&fd, b'\n', |r, _| {
        hides = mount_hides(r);
        !hides
    });
    hides
}

/// Whether mountinfo line `r` is a `/proc` mount that hides processes.
pub fn mount_hides(r: &[u8]) -> bool {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - TYPE SOURCE SUPEROPTS"
    let mut f = r.split(|&b| b == b' ');
    if f.nth(4) != Some(b"/proc".as_slice()) {
        return false;
    }
    let mut after = r.split(|&b| b == b' ').skip_while(|w| *w != b"-");
    if after.nth(1) != Some(b"proc".as_slice()) {
        return false;
    }
    after.nth(1).is_some_and(|opts| {
        opts.split(|&b| b == b',').any(|o| {
            matches!(
                o,
                b"hidepid=2" | b"hidepid=invisible" | b"hidepid=4" | b"hidepid=ptraceable"
            )
        })
    })
}

/// The processes besides `me` that count as members of `t` (see the
/// module doc): how many, the first `pids.len()` of them in `pids`;
/// `None` if `/proc` cannot tell.
pub fn members(t: &Target, me: u32, pids: &mut [u32]) -> Option<usize> {
    if !proc_is_ours(ipcns_sys::process::getpid() as u32) || proc_hides_processes() {
        return None;
    }
    let proc = ipcns_sys::fs::open_c(c"/proc", libc::O_RDONLY | libc::O_DIRECTORY, 0).ok()?;
    let mut found = 0usize;
    let mut buf = [0u8; 2048];
    let listed = maps::each_name(&proc, &mut buf, |name| {
        let Some(pid) = dec(name.to_bytes()).and_then(|p| u32::try_from(p).ok()) else {
            return true;
        };
        if pid != me && counts(t, pid) {
            if let Some(slot) = pids.get_mut(found) {
                *slot = pid;
            }
            found = found.saturating_add(1);
        }
        true
    });
    listed.then_some(found)
}

/// Whether process `pid` counts as a member of `t`.
fn counts(t: &Target, pid: u32) -> bool {
    let mut base = ProcPath::new(b"/proc/");
    base.num(pid);
    let seen = match task(t, &base) {
        Seen::Empty => tasks(t, &base),
        s => s,
    };
    match seen {
        Seen::Member => true,
        Seen::Unreadable => {
            of_uid(&base, t.uid)
                && (pid == t.creator || start_time(&base).is_none_or(|s| s >= t.since))
        }
        Seen::Unknown => true,
        Seen::Empty | Seen::No => false,
    }
}

/// What the tasks of process `base` say: the first that is a member or
/// unreadable.
fn tasks(t: &Target, base: &ProcPath) -> Seen {
    let dir = match ipcns_sys::fs::open_c(
        base.with(b"/task").c(),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    ) {
        Ok(d) => d,
        // Gone since the listing.
        Err(Errno::ENOENT | Errno::ESRCH) => return Seen::No,
        Err(_) => return Seen::Unknown,
    };
    let mut buf = [0u8; 1024];
    let mut seen = Seen::No;
    maps::each_name(&dir, &mut buf, |name| {
        let Some(tid) = dec(name.to_bytes()).and_then(|p| u32::try_from(p).ok()) else {
            return true;
        };
        let mut p = base.with(b"/task/");
        p.num(tid);
        match task(t, &p) {
            s @ (Seen::Member | Seen::Unreadable | Seen::Unknown) => {
                seen = s;
                false
            }
            Seen::Empty | Seen::No => true,
        }
    });
    seen
}

/// What the maps and environment of `base` (a process's or a task's
/// directory) say.
fn task(t: &Target, base: &ProcPath) -> Seen {
    let mut hit = false;
    let lines = match maps::each(base.with(b"/maps").c(), |m| {
        hit = m.ino == t.ino && t.dev.is_none_or(|d| d == m.dev);
        !hit
    }) {
        Ok(n) => n,
        Err(Errno::EACCES | Errno::EPERM) => return Seen::Unreadable,
        // A task without memory (some kernels): as an empty map.
        Err(Errno::ESRCH) => 0,
        // Gone since the listing.
        Err(Errno::ENOENT) => return Seen::No,
        Err(_) => return Seen::Unknown,
    };
    if hit {
        return Seen::Member;
    }
    let env = match ipcns_sys::fs::open_c(base.with(b"/environ").c(), libc::O_RDONLY, 0) {
        Ok(fd) => fd,
        Err(Errno::EACCES | Errno::EPERM) => return Seen::Unreadable,
        // ESRCH: a leader that exited (a zombie: no memory) while other
        // threads live; its maps were empty.
        Err(Errno::ESRCH | Errno::ENOENT) if lines == 0 => return Seen::Empty,
        Err(Errno::ESRCH | Errno::ENOENT) => return Seen::No,
        Err(_) => return Seen::Unknown,
    };
    let (named, empty) = names(t, &env);
    if named && !is_guardian(base) {
        Seen::Member
    } else if lines == 0 && empty {
        Seen::Empty
    } else if empty {
        // Memory but no environment yet: the middle of an exec, whose new
        // image has not written its start-up data. Maybe a member.
        Seen::Unreadable
    } else {
        Seen::No
    }
}

/// Whether the environment `env` names `t` (see the module doc), and
/// whether it is empty. As the library reads it (`getenv`: the first
/// `IPCNS=`), and whatever `IPCNS_DIR` says: a directory can be spelt many
/// ways (`dir/.`, a symbolic link) that all lead the library to this arena,
/// and the name (`unshare-PID-` and 32 random bits) is this namespace's
/// alone, so a process whose first `IPCNS=` is it counts.
fn names(t: &Target, env: &Fd) -> (bool, bool) {
    let mut name: Option<bool> = None;
    let mut empty = true;
    maps::each_record(env, 0, |r, whole| {
        empty = false;
        if let Some(v) = r.strip_prefix(b"IPCNS=") {
            name = Some(whole && v == t.name);
        }
        name.is_none()
    });
    (name == Some(true), empty)
}

/// Whether `base` is a guardian (its name, `/proc/PID/comm`).
pub fn is_guardian(base: &ProcPath) -> bool {
    let Ok(fd) = ipcns_sys::fs::open_c(base.with(b"/comm").c(), libc::O_RDONLY, 0) else {
        return false;
    };
    let mut yes = false;
    maps::each_record(&fd, b'\n', |r, _| {
        yes = r == b"ipcns-guardian";
        false
    });
    yes
}

/// The start time of process `base` (`/proc/PID/stat`, field 22, clock
/// ticks since boot); `None` if it cannot be read.
pub fn start_time(base: &ProcPath) -> Option<u64> {
    let fd = ipcns_sys::fs::open_c(base.with(b"/stat").c(), libc::O_RDONLY, 0).ok()?;
    let mut t = None;
    maps::each_record(&fd, b'\n', |l, _| {
        // "pid (comm) state ppid ...": comm may hold spaces and ")".
        let tail = l
            .iter()
            .rposition(|&b| b == b')')
            .and_then(|at| l.get(at.saturating_add(2)..));
        t = tail
            .and_then(|f| f.split(|&b| b == b' ').nth(19))
            .and_then(dec);
        false
    });
    t
}

/// Whether one of the uids of process `base` (`/proc/PID/status`, line
/// `Uid:`: real, effective, saved, file system) is `uid`; true if that
/// cannot be read but the process is there (it may be).
fn of_uid(base: &ProcPath, uid: u32) -> bool {
    let fd = match ipcns_sys::fs::open_c(base.with(b"/status").c(), libc::O_RDONLY, 0) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ESRCH) => return false,
        Err(_) => return true,
    };
    let mut found = None;
    maps::each_record(&fd, b'\n', |l, _| {
        let Some(ids) = l.strip_prefix(b"Uid:") else {
            return true;
        };
        found = Some(
            ids.split(|&b| b == b'\t' || b == b' ')
                .filter_map(dec)
                .any(|u| u == u64::from(uid)),
        );
        false
    });
    found.unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn builds_paths() {
        let mut p = ProcPath::new(b"/proc/");
        p.num(4194304);
        assert_eq!(p.with(b"/maps").c(), c"/proc/4194304/maps");
        p = ProcPath::new(b"/proc/");
        p.num(0).push(b"/task/").num(u32::MAX);
        assert_eq!(p.c(), c"/proc/0/task/4294967295");
        let mut long = ProcPath::new(&[b'x'; 100]);
        long.push(b"y");
        assert_eq!(long.c().to_bytes().len(), 63);
    }

    #[test]
    fn a_proc_that_hides_processes_is_seen() {
        assert!(mount_hides(
            b"25 30 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:14 - proc proc rw,hidepid=invisible"
        ));
        assert!(mount_hides(
            b"25 30 0:23 / /proc rw - proc proc rw,hidepid=2,gid=5"
        ));
        assert!(!mount_hides(
            b"25 30 0:23 / /proc rw shared:14 - proc proc rw"
        ));
        assert!(!mount_hides(
            b"25 30 0:23 / /proc rw - proc proc rw,hidepid=1"
        ));
        assert!(!mount_hides(
            b"26 30 0:24 / /tmp/proc rw - proc proc rw,hidepid=2"
        ));
        assert!(!mount_hides(
            b"27 30 0:25 / /proc rw - tmpfs tmpfs rw,hidepid=2"
        ));
        assert!(!mount_hides(b""));
        // This machine's /proc lists every process.
        assert!(!proc_hides_processes());
    }

    #[test]
    fn finds_processes_by_their_mapping_and_by_their_environment() {
        let me = std::process::id();
        assert!(proc_is_ours(me));
        assert!(!proc_is_ours(me.wrapping_add(1)));
        // Some process (this one) maps the file that holds this binary.
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        let t = Target {
            ino: exe.ino(),
            dev: Some((libc::major(exe.dev()), libc::minor(exe.dev()))),
            name: b"unshare-1-scantest",
            uid: ipcns_sys::cred::geteuid(),
            creator: 0,
            since: u64::MAX,
        };
        let found = |t: &Target| {
            let mut pids = [0u32; 256];
            let n = members(t, 0, &mut pids).unwrap();
            pids[..n.min(256)].to_vec()
        };
        assert!(found(&t).contains(&me));
        // Not the scanning process itself.
        let mut pids = [0u32; 256];
        let n = members(&t, me, &mut pids).unwrap();
        assert!(!pids[..n.min(256)].contains(&me));
        // By the environment as of the exec.
        let t = Target { ino: u64::MAX, ..t };
        let sleeper = |env: &[(&str, &str)]| {
            let mut c = std::process::Command::new("sleep");
            c.arg("5").env_clear();
            for (k, v) in env {
                c.env(k, v);
            }
            c.spawn().unwrap()
        };
        let mut kids = Vec::new();
        // Whatever IPCNS_DIR says (`dir/.` is the same directory); only
        // the first IPCNS counts, as getenv reads it.
        for (env, counted) in [
            (
                &[
                    ("IPCNS", "unshare-1-scantest"),
                    ("IPCNS_DIR", "/tmp/scantest/."),
                ][..],
                true,
            ),
            (
                &[("IPCNS", "unshare-1-scantest"), ("IPCNS_DIR", "/tmp/other")],
                true,
            ),
            (&[("IPCNS", "unshare-1-scantest")], true),
            (&[("IPCNS", "unshare-1-other")], false),
            (&[("PATH", "/bin")], false),
        ] {
            let mut k = sleeper(env);
            // The exec'd environment is there once environ reads as it
            // (comm is sleep's before the new image has written it).
            let pid = k.id();
            for _ in 0..500 {
                if std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|e| e.starts_with(env[0].0.as_bytes()))
                {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            assert_eq!(found(&t).contains(&pid), counted, "{env:?}");
            let _ = k.kill();
            kids.push(k);
        }
        for mut k in kids {
            let _ = k.wait();
        }
        let base = ProcPath::new(b"/proc/self");
        assert!(of_uid(&base, ipcns_sys::cred::geteuid()));
        let init = start_time(&ProcPath::new(b"/proc/1")).unwrap();
        assert!(start_time(&base).unwrap() >= init);
        assert!(!of_uid(&ProcPath::new(b"/proc/nonexistent"), 0));
    }
}
