//! Reading `/proc/PID/{uid,gid}_map` and writing maps into a process in a
//! new user namespace (like newuidmap / newgidmap, without the setuid part:
//! the caller needs the privileges the kernel asks for).

use crate::error::{Errno, MapError, Problem};
use crate::map::IdMap;
use std::fmt;
use std::io::{self, Write};
use std::path::PathBuf;

/// Which of a process's maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    Uid,
    Gid,
}

impl IdKind {
    /// `"uid"` or `"gid"`.
    pub fn name(self) -> &'static str {
        match self {
            IdKind::Uid => "uid",
            IdKind::Gid => "gid",
        }
    }
}

/// A process: a pid, or the caller itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    Id(u32),
    SelfProcess,
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pid::Id(p) => write!(f, "{p}"),
            Pid::SelfProcess => f.write_str("self"),
        }
    }
}

/// `/proc/PID/uid_map` or `/proc/PID/gid_map`.
pub fn map_path(pid: Pid, kind: IdKind) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{}_map", kind.name()))
}

/// Reads a process's map as the caller's namespace sees it. A map not yet
/// written reads as the empty map.
pub fn read_map(pid: Pid, kind: IdKind) -> io::Result<IdMap> {
    let path = map_path(pid, kind);
    let text = std::fs::read(&path)?;
    if text.is_empty() {
        return Ok(IdMap::empty());
    }
    // The kernel prints 4294967295 for lower ids the reader cannot see;
    // such a map has no meaning from here.
    IdMap::parse(&text).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {e} (ids not visible from this namespace?)",
                path.display()
            ),
        )
    })
}

/// A failed write of a map or of `setgroups`: the file, the kernel's errno
/// and what it means here.
#[derive(Debug)]
pub struct WriteError {
    pub path: PathBuf,
    pub errno: Option<Errno>,
    pub explanation: String,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errno {
            Some(e) => write!(f, "{}: {e}: {}", self.path.display(), self.explanation),
            None => write!(f, "{}: {}", self.path.display(), self.explanation),
        }
    }
}

impl std::error::Error for WriteError {}

/// Writes `text` in one `write(2)` at offset 0, as the kernel requires.
fn write_once(path: &PathBuf, text: &[u8]) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    let n = f.write(text)?;
    if n != text.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
    }
    Ok(())
}

/// Whether the caller has capability number `cap` in its effective set
/// (`CapEff` of /proc/self/status).
pub fn has_effective_cap(cap: u32) -> io::Result<bool> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no CapEff in /proc/self/status")
        })?;
    let bits = u64::from_str_radix(hex.trim(), 16)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(cap < 64 && bits & (1 << cap) != 0)
}

const CAP_SETGID: u32 = 6;

/// What to do with `/proc/PID/setgroups` before writing a gid map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Setgroups {
    /// Write `deny` when the caller lacks CAP_SETGID, which is exactly when
    /// the kernel requires it (an unprivileged gid map of one's own gid).
    #[default]
    Auto,
    /// Always write `deny` first.
    Deny,
    /// Never touch it.
    Leave,
}

/// Writes `allow` or `deny` to `/proc/PID/setgroups`.
pub fn write_setgroups(pid: Pid, allow: bool) -> Result<(), WriteError> {
    let path = PathBuf::from(format!("/proc/{pid}/setgroups"));
    let text: &[u8] = if allow { b"allow" } else { b"deny" };
    write_once(&path, text).map_err(|e| {
        let errno = e.raw_os_error().map(Errno);
        let explanation = match errno {
            Some(Errno::EPERM) => {
                "setgroups cannot change after the gid map is written, nor go back to allow"
                    .to_string()
            }
            _ => e.to_string(),
        };
        WriteError {
            path,
            errno,
            explanation,
        }
    })
}

/// Writes `map` to a process's uid or gid map (a process in a user
/// namespace whose map is not yet written, which is a child of the caller's
/// namespace or the caller's own).
///
/// The text is the compact `first lower count` form; a map whose text would
/// reach 4096 bytes is refused with EINVAL before anything is written, as
/// the kernel would refuse it. On failure the kernel's errno comes with what
/// it means, diagnosed from the process's current map and the caller's own.
pub fn write_map(pid: Pid, kind: IdKind, map: &IdMap) -> Result<(), WriteError> {
    let path = map_path(pid, kind);
    let text = map.to_compact_text();
    if text.len() > crate::parse::MAX_WRITE || map.is_empty() {
        let problem = if map.is_empty() {
            Problem::Empty
        } else {
            Problem::TooLong { len: text.len() }
        };
        let e = MapError::einval(None, problem);
        return Err(WriteError {
            path,
            errno: Some(e.errno),
            explanation: e.to_string(),
        });
    }
    let Err(e) = write_once(&path, text.as_bytes()) else {
        return Ok(());
    };
    let errno = e.raw_os_error().map(Errno);
    let explanation = match errno {
        Some(Errno::EPERM) => explain_eperm(pid, kind, map),
        Some(Errno::EINVAL) => match IdMap::parse(&text) {
            Err(me) => me.to_string(),
            Ok(_) => "the kernel refused the map text".to_string(),
        },
        _ if e.kind() == io::ErrorKind::NotFound => format!("no process {pid}"),
        _ => e.to_string(),
    };
    Err(WriteError {
        path,
        errno,
        explanation,
    })
}

/// Why the kernel said EPERM (map_write steps 1, 3, 4, 8, 9).
fn explain_eperm(pid: Pid, kind: IdKind, map: &IdMap) -> String {
    if read_map(pid, kind).is_ok_and(|m| !m.is_empty()) {
        return "the map is already written; a map can be written only once".to_string();
    }
    if let Ok(parent) = read_map(Pid::SelfProcess, kind)
        && let Err(me) = map.compose(&parent)
    {
        return format!("{me}, as seen from the writer's namespace");
    }
    let cap = match kind {
        IdKind::Uid => "CAP_SETUID",
        IdKind::Gid => "CAP_SETGID",
    };
    format!(
        "not permitted: the writer needs {cap} in the parent namespace and CAP_SYS_ADMIN over the target \
         (unprivileged, only one id may be mapped, the writer's own{}), and mapping id 0 needs CAP_SETFCAP; \
         the process must be in a child namespace of the writer's, or the writer's own",
        if kind == IdKind::Gid {
            ", after writing deny to setgroups"
        } else {
            ""
        }
    )
}

/// Writes a uid map and a gid map (either may be absent), handling
/// `setgroups` for the gid map as `setgroups` says.
pub fn write_maps(
    pid: Pid,
    uid: Option<&IdMap>,
    gid: Option<&IdMap>,
    setgroups: Setgroups,
) -> Result<(), WriteError> {
    if let Some(m) = uid {
        write_map(pid, IdKind::Uid, m)?;
    }
    if let Some(m) = gid {
        let deny = match setgroups {
            Setgroups::Deny => true,
            Setgroups::Leave => false,
            Setgroups::Auto => !has_effective_cap(CAP_SETGID).unwrap_or(false),
        };
        if deny {
            write_setgroups(pid, false)?;
        }
        write_map(pid, IdKind::Gid, m)?;
    }
    Ok(())
}

impl IdMap {
    /// The shortest text that writes this map: `first lower count\n` per
    /// extent, in written order.
    pub fn to_compact_text(&self) -> String {
        let mut s = String::new();
        for e in self.extents_written() {
            s.push_str(&format!("{} {} {}\n", e.first, e.lower_first, e.count));
        }
        s
    }
}
