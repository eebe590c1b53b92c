//! The namespace's files: the arena file, the directory it lives in, and the
//! directory of its shared memory segments.
//!
//! The arena file's permissions are the namespace's security boundary, so
//! whoever opens or makes one must know whose file it is:
//!
//! - An arena is opened with `O_NOFOLLOW` (a symbolic link is refused),
//!   `O_NONBLOCK` (a FIFO planted under its name cannot hang the opener) and
//!   `O_CLOEXEC`, and the open descriptor must be a regular file (`fstat`).
//! - A caller attaches to an arena it owns (`st_uid == geteuid()`). Another
//!   user's arena only when both agree: its creator asked for a mode with
//!   group or other bits, which marks it [`FLAG_SHARED`] for good, and the
//!   caller asks for [`Access::Shared`] (`IPCNS_SHARED=1`). Without this, a
//!   file another user planted under the name would silently become the
//!   caller's namespace.
//! - A new arena has exactly the mode asked for, whatever the umask
//!   (`fchmod` on the new descriptor before it is published), and is
//!   published by `link`, which never replaces or follows anything.
//! - The default directory is private to its user, `/dev/shm/ipcns-UID`,
//!   mode 0700, made on first use and refused unless it is a real directory
//!   of the caller's that nobody else can write in.
//! - Segment files are `<arena>.d/shm.<serial>`. The directory belongs to the
//!   arena's owner and has the arena's mode plus `x` wherever `r` is set, so
//!   every participant can make and unlink segment files in it and nobody
//!   else can; each file has the arena's mode without `x`. A shared arena
//!   gets its directory when it is made (so that another user's first
//!   `shmget` does not make it, as that user's); a private one at its first
//!   `shmget`.
//!
//! # Safety
//! `geteuid` takes no argument and cannot fail.
#![allow(unsafe_code)]

use super::ArenaError;
use super::header::FLAG_SHARED;
use std::ffi::OsString;
use std::fs::{DirBuilder, File, Metadata, OpenOptions, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Whether a caller accepts a namespace owned by another user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Only an arena whose file the caller owns.
    #[default]
    Own,
    /// Also another user's arena, if it was created shared (its creation
    /// mode gave group or other any permission).
    Shared,
}

impl Access {
    /// [`Access::Shared`] if `IPCNS_SHARED=1`, else [`Access::Own`].
    pub fn from_env() -> Access {
        if std::env::var_os("IPCNS_SHARED").is_some_and(|v| v == "1") {
            Access::Shared
        } else {
            Access::Own
        }
    }
}

/// `geteuid()`: who the files must belong to.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() }
}

/// The header flag a new arena of `mode` gets: [`FLAG_SHARED`] if the mode
/// grants group or other anything.
pub(super) fn shared_flag(mode: u32) -> u32 {
    if mode & 0o077 != 0 { FLAG_SHARED } else { 0 }
}

/// What kind of file this is, for error messages.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a regular file"
    }
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ArenaError + '_ {
    move |source| ArenaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// [`ArenaError::NotFound`] for `path`, or [`ArenaError::NoDir`] when the
/// directory it would be in is missing.
pub(crate) fn not_found(path: &Path) -> ArenaError {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) if std::fs::metadata(d).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) => {
            ArenaError::NoDir {
                dir: d.to_path_buf(),
            }
        }
        _ => ArenaError::NotFound {
            path: path.to_path_buf(),
        },
    }
}

/// The error of a failed open of `path`: a missing file or directory, a
/// file of the wrong kind (a symbolic link gives `ELOOP` under
/// `O_NOFOLLOW`, a directory `EISDIR`), or the system's word.
fn open_error(path: &Path, e: io::Error) -> ArenaError {
    if e.kind() == io::ErrorKind::NotFound {
        return not_found(path);
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => ArenaError::NotRegular {
            path: path.to_path_buf(),
            kind: kind(&m),
        },
        _ => io_at(path)(e),
    }
}

/// `open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)` and
/// `fstat`: an existing arena's file, which must be a regular file.
/// (`O_NONBLOCK` means nothing to a regular file's reads and writes.)
pub(super) fn open_arena(path: &Path) -> Result<(File, Metadata), ArenaError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    let meta = file.metadata().map_err(io_at(path))?;
    if !meta.file_type().is_file() {
        return Err(ArenaError::NotRegular {
            path: path.to_path_buf(),
            kind: kind(&meta),
        });
    }
    Ok((file, meta))
}

/// Whether the caller may attach to the arena at `path`, whose open file
/// has `meta` and whose header has `flags`: its own, or one created shared
/// when it asks for shared use.
pub(super) fn admit(
    path: &Path,
    meta: &Metadata,
    flags: u32,
    access: Access,
) -> Result<(), ArenaError> {
    let me = euid();
    if meta.uid() == me || (access == Access::Shared && flags & FLAG_SHARED != 0) {
        return Ok(());
    }
    Err(ArenaError::NotOwner {
        path: path.to_path_buf(),
        owner: meta.uid(),
        euid: me,
        asked_shared: access == Access::Shared,
    })
}

/// Whether `path` is a regular file that starts with an arena's magic
/// number; never follows a link nor waits on a FIFO.
pub(crate) fn is_arena(path: &Path) -> bool {
    let Ok(mut f) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let mut magic = [0u8; 8];
    f.metadata().is_ok_and(|m| m.file_type().is_file())
        && f.read_exact(&mut magic).is_ok()
        && u64::from_le_bytes(magic) == super::header::MAGIC
}

/// A new file for the arena that will be `path`, under the temporary name
/// `<path>.tmp.PID.NANOS` (no namespace name contains `.tmp.`), with
/// exactly `mode`.
pub(super) fn create_temporary(path: &Path, mode: u32) -> Result<(PathBuf, File), ArenaError> {
    let mut tmp = OsString::from(path.as_os_str());
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    let tmp = PathBuf::from(tmp);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                not_found(&tmp)
            } else {
                io_at(&tmp)(e)
            }
        })?;
    // The umask took bits away from `mode`: give them back.
    if let Err(e) = file.set_permissions(Permissions::from_mode(mode & 0o7777)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_at(&tmp)(e));
    }
    Ok((tmp, file))
}

/// Gives the finished arena `file`, now named `tmp`, its name `path`: first
/// the segment directory of a shared arena, then `link(tmp, path)`, which
/// fails if the name is taken, so two creators cannot both win. Checks that
/// the name now leads to `file` (nobody swapped `tmp` meanwhile).
pub(super) fn publish(tmp: &Path, path: &Path, file: &File, mode: u32) -> Result<(), ArenaError> {
    let exists = || ArenaError::Exists {
        path: path.to_path_buf(),
    };
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(exists());
    }
    let made_dir = if shared_flag(mode) != 0 {
        segment_dir(path, euid(), mode)?.1
    } else {
        false
    };
    if let Err(e) = std::fs::hard_link(tmp, path) {
        if made_dir {
            let _ = std::fs::remove_dir(segment_dir_of(path));
        }
        return Err(if e.kind() == io::ErrorKind::AlreadyExists {
            exists()
        } else {
            open_error(path, e)
        });
    }
    let ours = file.metadata().map_err(io_at(path))?;
    match std::fs::symlink_metadata(path) {
        Ok(m) if (m.dev(), m.ino()) == (ours.dev(), ours.ino()) => Ok(()),
        _ => Err(io_at(path)(io::Error::other(
            "the new arena was replaced before it was published",
        ))),
    }
}

/// `lstat(dir)`: a real directory (not a link to one), or why not.
fn stat_dir(dir: &Path) -> Result<Metadata, ArenaError> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            not_found(dir)
        } else {
            io_at(dir)(e)
        }
    })?;
    if !m.is_dir() {
        return Err(ArenaError::BadDir {
            dir: dir.to_path_buf(),
            why: format!("{}, not a directory", kind(&m)),
        });
    }
    Ok(m)
}

/// Sets the mode of the directory `stat_dir` found (`lstat` gave `seen`)
/// to exactly `mode`, whatever the umask took away at `mkdir`:
/// `open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW)` (which needs no
/// permission on the directory itself, which the umask may have left
/// without any), `fstat` to be sure it is the same one, and `chmod` through
/// the descriptor's `/proc/self/fd` link, which names that very inode.
fn chmod_dir(dir: &Path, seen: &Metadata, mode: u32) -> Result<(), ArenaError> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(io_at(dir))?;
    let m = f.metadata().map_err(io_at(dir))?;
    if (m.dev(), m.ino()) != (seen.dev(), seen.ino()) {
        return Err(ArenaError::BadDir {
            dir: dir.to_path_buf(),
            why: "it was replaced while being made".to_string(),
        });
    }
    std::fs::set_permissions(
        format!("/proc/self/fd/{}", f.as_raw_fd()),
        Permissions::from_mode(mode),
    )
    .map_err(io_at(dir))
}

/// `mkdir(dir, 0700)`; whether it made it (false: it was there).
fn make_dir(dir: &Path) -> Result<bool, ArenaError> {
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(not_found(dir)),
        Err(e) => Err(io_at(dir)(e)),
    }
}

/// The caller's private directory `base/ipcns-UID`, made with mode 0700 if
/// missing, and accepted only as a real directory owned by `uid` with no
/// group or other write bit.
pub(crate) fn private_dir(base: &Path, uid: u32) -> Result<PathBuf, ArenaError> {
    let dir = base.join(format!("ipcns-{uid}"));
    let made = make_dir(&dir)?;
    let m = stat_dir(&dir)?;
    let why = if m.uid() != uid {
        Some(format!("owned by uid {}, not by you (uid {uid})", m.uid()))
    } else if m.mode() & 0o022 != 0 {
        Some(format!(
            "mode {:04o} lets others than you write in it",
            m.mode() & 0o7777
        ))
    } else {
        None
    };
    if let Some(why) = why {
        return Err(ArenaError::BadDir { dir, why });
    }
    if made {
        chmod_dir(&dir, &m, 0o700)?;
    }
    Ok(dir)
}

/// `<arena>.d`: the directory of the arena's segment files.
pub fn segment_dir_of(arena: &Path) -> PathBuf {
    let mut d = OsString::from(arena.as_os_str());
    d.push(".d");
    PathBuf::from(d)
}

/// The segment directory's mode for an arena of mode `mode`: the same, plus
/// `x` wherever `r` is set (0600 -> 0700, 0666 -> 0777), never sticky.
fn dir_mode(mode: u32) -> u32 {
    (mode & 0o777) | ((mode & 0o444) >> 2)
}

/// The segment directory of the arena at `arena` owned by `owner` with
/// mode `mode`, made if missing; accepted only as a real directory owned by
/// `owner`. Also whether it was made here.
fn segment_dir(arena: &Path, owner: u32, mode: u32) -> Result<(PathBuf, bool), ArenaError> {
    let dir = segment_dir_of(arena);
    let made = make_dir(&dir)?;
    let m = stat_dir(&dir).inspect_err(|_| {
        if made {
            let _ = std::fs::remove_dir(&dir);
        }
    })?;
    if m.uid() != owner {
        if made {
            let _ = std::fs::remove_dir(&dir);
        }
        return Err(ArenaError::BadDir {
            dir,
            why: format!(
                "owned by uid {}, not by the namespace's owner (uid {owner})",
                m.uid()
            ),
        });
    }
    if made {
        chmod_dir(&dir, &m, dir_mode(mode))?;
    }
    Ok((dir, made))
}

/// Makes the segment file `<arena>.d/shm.<serial>` of `size` bytes
/// (sparse), with the arena's mode without `x`, making the directory first
/// if it is missing; returns its path.
pub(crate) fn create_segment(
    arena: &Path,
    arena_file: &File,
    serial: u64,
    size: u64,
) -> Result<PathBuf, ArenaError> {
    let am = arena_file.metadata().map_err(io_at(arena))?;
    let (dir, _) = segment_dir(arena, am.uid(), am.mode())?;
    let path = dir.join(format!("shm.{serial}"));
    let mode = am.mode() & 0o666;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io_at(&path))?;
    if let Err(e) = f
        .set_permissions(Permissions::from_mode(mode))
        .and_then(|()| f.set_len(size))
    {
        let _ = std::fs::remove_file(&path);
        return Err(io_at(&path)(e));
    }
    Ok(path)
}

/// Removes the segment directory of the arena that was at `arena`, owned by
/// `owner`: its `shm.N` files and the directory itself if that leaves it
/// empty. Anything else, or a directory of someone else's, stays.
pub(crate) fn remove_segments(arena: &Path, owner: u32) {
    let dir = segment_dir_of(arena);
    let Ok(m) = stat_dir(&dir) else {
        return;
    };
    if m.uid() != owner {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.filter_map(Result::ok) {
            let n = e.file_name();
            let is_segment = n
                .to_str()
                .and_then(|n| n.strip_prefix("shm."))
                .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
            if is_segment {
                let _ = std::fs::remove_file(dir.join(n));
            }
        }
    }
    let _ = std::fs::remove_dir(&dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(dir_mode(0o600), 0o700);
        assert_eq!(dir_mode(0o666), 0o777);
        assert_eq!(dir_mode(0o640), 0o750);
        assert_eq!(dir_mode(0o1622), 0o722);
        assert_eq!(shared_flag(0o600), 0);
        assert_eq!(shared_flag(0o604), FLAG_SHARED);
        assert_eq!(shared_flag(0o620), FLAG_SHARED);
    }
}
