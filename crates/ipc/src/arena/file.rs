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
//!   every participant can make segment files in it and nobody else can;
//!   each file has the arena's mode without `x`. A shared arena's directory
//!   is sticky as well: a participant renames or unlinks only the files it
//!   made (its own segments' files; another's are truncated when it
//!   removes them, see shm/mod.rs), so none can put a file of its own
//!   under another's name. A shared arena
//!   gets its directory when it is made (so that another user's first
//!   `shmget` does not make it, as that user's); a private one at its first
//!   `shmget`.
//!
//! Every call here is a raw system call (`crate::sys`), never a libc
//! symbol another preload may interpose.

use super::ArenaError;
use super::header::FLAG_SHARED;
use crate::errno::Errno;
use crate::sys::{self, Fd, Stat, fs};
use std::ffi::OsString;
use std::io;
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
    sys::cred::geteuid()
}

/// The header flag a new arena of `mode` gets: [`FLAG_SHARED`] if the mode
/// grants group or other anything.
pub(super) fn shared_flag(mode: u32) -> u32 {
    if mode & 0o077 != 0 { FLAG_SHARED } else { 0 }
}

/// What kind of file this is, for error messages.
fn kind(meta: &Stat) -> &'static str {
    meta.kind()
}

fn io_at(path: &Path) -> impl FnOnce(Errno) -> ArenaError + '_ {
    move |e| ArenaError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// [`ArenaError::NotFound`] for `path`, or [`ArenaError::NoDir`] when the
/// directory it would be in is missing.
pub(crate) fn not_found(path: &Path) -> ArenaError {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) if fs::stat(d) == Err(Errno::ENOENT) => ArenaError::NoDir {
            dir: d.to_path_buf(),
        },
        _ => ArenaError::NotFound {
            path: path.to_path_buf(),
        },
    }
}

/// The error of a failed open of `path`: a missing file or directory, a
/// file of the wrong kind (a symbolic link gives `ELOOP` under
/// `O_NOFOLLOW`, a directory `EISDIR`), or the system's word.
fn open_error(path: &Path, e: Errno) -> ArenaError {
    if e == Errno::ENOENT {
        return not_found(path);
    }
    match fs::lstat(path) {
        Ok(m) if !m.is_file() => ArenaError::NotRegular {
            path: path.to_path_buf(),
            kind: kind(&m),
        },
        _ => io_at(path)(e),
    }
}

/// `open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)` and
/// `fstat`: an existing arena's file, which must be a regular file.
/// (`O_NONBLOCK` means nothing to a regular file's reads and writes.)
pub(super) fn open_arena(path: &Path) -> Result<(Fd, Stat), ArenaError> {
    let file = fs::open(
        path,
        libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    )
    .map_err(|e| open_error(path, e))?;
    let meta = file.stat().map_err(io_at(path))?;
    if !meta.is_file() {
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
    meta: &Stat,
    flags: u32,
    access: Access,
) -> Result<(), ArenaError> {
    let me = euid();
    if meta.uid == me || (access == Access::Shared && flags & FLAG_SHARED != 0) {
        return Ok(());
    }
    Err(ArenaError::NotOwner {
        path: path.to_path_buf(),
        owner: meta.uid,
        euid: me,
        asked_shared: access == Access::Shared,
    })
}

/// Whether `path` is a regular file that starts with an arena's magic
/// number; never follows a link nor waits on a FIFO.
pub(crate) fn is_arena(path: &Path) -> bool {
    let Ok(f) = fs::open(
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    ) else {
        return false;
    };
    let mut magic = [0u8; 8];
    f.stat().is_ok_and(|m| m.is_file())
        && f.read_full(&mut magic) == Ok(8)
        && u64::from_le_bytes(magic) == super::header::MAGIC
}

/// A new file for the arena that will be `path`, under the temporary name
/// `<path>.tmp.PID.NANOS` (no namespace name contains `.tmp.`), with
/// exactly `mode`.
pub(super) fn create_temporary(path: &Path, mode: u32) -> Result<(PathBuf, Fd), ArenaError> {
    let mut tmp = OsString::from(path.as_os_str());
    tmp.push(format!(
        ".tmp.{}.{}",
        sys::process::getpid(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    let tmp = PathBuf::from(tmp);
    let file = fs::open(
        &tmp,
        libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        mode & 0o777,
    )
    .map_err(|e| {
        if e == Errno::ENOENT {
            not_found(&tmp)
        } else {
            io_at(&tmp)(e)
        }
    })?;
    // The umask took bits away from `mode`: give them back.
    if let Err(e) = file.chmod(mode & 0o7777) {
        let _ = fs::unlink(&tmp);
        return Err(io_at(&tmp)(e));
    }
    Ok((tmp, file))
}

/// Gives the finished arena `file`, now named `tmp`, its name `path`: first
/// the segment directory of a shared arena, then `link(tmp, path)`, which
/// fails if the name is taken, so two creators cannot both win. Checks that
/// the name now leads to `file` (nobody swapped `tmp` meanwhile).
pub(super) fn publish(tmp: &Path, path: &Path, file: &Fd, mode: u32) -> Result<(), ArenaError> {
    let exists = || ArenaError::Exists {
        path: path.to_path_buf(),
    };
    if fs::lstat(path).is_ok() {
        return Err(exists());
    }
    let made_dir = if shared_flag(mode) != 0 {
        segment_dir(path, euid(), mode)?.1
    } else {
        false
    };
    if let Err(e) = fs::link(tmp, path) {
        if made_dir {
            let _ = fs::rmdir(&segment_dir_of(path));
        }
        return Err(if e == Errno::EEXIST {
            exists()
        } else {
            open_error(path, e)
        });
    }
    let ours = file.stat().map_err(io_at(path))?;
    if made_dir {
        // A shared arena's pool is made with its directory, by its owner,
        // so that every participant's segments can live in it; where the
        // file system cannot hold one, segments get files of their own.
        let _ = open_pool(path, &ours, true);
    }
    match fs::lstat(path) {
        Ok(m) if m.same_file(&ours) => Ok(()),
        _ => Err(ArenaError::Io {
            path: path.to_path_buf(),
            source: io::Error::other("the new arena was replaced before it was published"),
        }),
    }
}

/// `lstat(dir)`: a real directory (not a link to one), or why not.
fn stat_dir(dir: &Path) -> Result<Stat, ArenaError> {
    let m = fs::lstat(dir).map_err(|e| {
        if e == Errno::ENOENT {
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
fn chmod_dir(dir: &Path, seen: &Stat, mode: u32) -> Result<(), ArenaError> {
    let f = match fs::open(dir, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0) {
        Ok(f) => f,
        // No descriptor to spare (RLIMIT_NOFILE): by path, if it is still
        // the directory `seen` (a directory just made, in a directory of
        // the namespace's owner).
        Err(Errno(libc::EMFILE | libc::ENFILE)) => {
            return match fs::lstat(dir) {
                Ok(m) if m.same_file(seen) && m.is_dir() => {
                    fs::chmod(dir, mode).map_err(io_at(dir))
                }
                _ => Err(ArenaError::BadDir {
                    dir: dir.to_path_buf(),
                    why: "it was replaced while being made".to_string(),
                }),
            };
        }
        Err(e) => return Err(io_at(dir)(e)),
    };
    let m = f.stat().map_err(io_at(dir))?;
    if !m.same_file(seen) {
        return Err(ArenaError::BadDir {
            dir: dir.to_path_buf(),
            why: "it was replaced while being made".to_string(),
        });
    }
    fs::chmod(Path::new(&format!("/proc/self/fd/{}", f.raw())), mode).map_err(io_at(dir))
}

/// `mkdir(dir, 0700)`; whether it made it (false: it was there).
fn make_dir(dir: &Path) -> Result<bool, ArenaError> {
    match fs::mkdir(dir, 0o700) {
        Ok(()) => Ok(true),
        Err(Errno::EEXIST) => Ok(false),
        Err(Errno::ENOENT) => Err(not_found(dir)),
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
    let why = if m.uid != uid {
        Some(format!("owned by uid {}, not by you (uid {uid})", m.uid))
    } else if m.mode & 0o022 != 0 {
        Some(format!(
            "mode {:04o} lets others than you write in it",
            m.mode & 0o7777
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
/// `x` wherever `r` is set (0600 -> 0700), plus the sticky bit when the
/// arena is shared (0666 -> 01777, 0660 -> 01770): in a directory that
/// others may write in, only a file's owner (or the directory's, or root)
/// may rename or unlink it (`may_delete` -> `check_sticky`), so no
/// participant can move another's segment file aside and put one of its
/// own under its name.
fn dir_mode(mode: u32) -> u32 {
    let sticky = if shared_flag(mode) != 0 { 0o1000 } else { 0 };
    (mode & 0o777) | ((mode & 0o444) >> 2) | sticky
}

/// The segment directory of the arena at `arena` owned by `owner` with
/// mode `mode`, made if missing; accepted only as a real directory owned by
/// `owner`. Also whether it was made here.
fn segment_dir(arena: &Path, owner: u32, mode: u32) -> Result<(PathBuf, bool), ArenaError> {
    owned_dir(segment_dir_of(arena), owner, mode)
}

/// The directory `dir` owned by `owner` with the segment directory's mode
/// for an arena of mode `mode`, made if missing; accepted only as a real
/// directory owned by `owner`. Also whether it was made here.
fn owned_dir(dir: PathBuf, owner: u32, mode: u32) -> Result<(PathBuf, bool), ArenaError> {
    let made = make_dir(&dir)?;
    let m = stat_dir(&dir).inspect_err(|_| {
        if made {
            let _ = fs::rmdir(&dir);
        }
    })?;
    if m.uid != owner {
        if made {
            let _ = fs::rmdir(&dir);
        }
        return Err(ArenaError::BadDir {
            dir,
            why: format!(
                "owned by uid {}, not by the namespace's owner (uid {owner})",
                m.uid
            ),
        });
    }
    if made {
        chmod_dir(&dir, &m, dir_mode(mode))?;
    } else if dir_mode(mode) & 0o1000 != 0 && m.mode & 0o1000 == 0 && owner == euid() {
        // A shared namespace's directory made by an earlier build, which
        // did not make it sticky: its owner makes it so (best effort; the
        // inode recorded at shmget guards the files regardless).
        let _ = chmod_dir(&dir, &m, (m.mode & 0o7777) | 0o1000);
    }
    Ok((dir, made))
}

/// Makes the segment file `<arena>.d/shm.<serial>` of `size` bytes, with
/// the arena's mode without `x`, making the directory first if it is
/// missing; returns its path and its file's device and inode. With
/// `reserve`, the file's pages are allocated now ([`segment_file`]), so
/// that no later touch of an attachment can fault.
pub(crate) fn create_segment(
    arena: &Path,
    am: &Stat,
    serial: u64,
    size: u64,
    reserve: bool,
) -> Result<(PathBuf, Stat), ArenaError> {
    let (dir, _) = segment_dir(arena, am.uid, am.mode)?;
    let (path, f) = match segment_file(&dir, am, serial, size, reserve) {
        Err(e) if !reserve && no_descriptor(&e) => return segment_by_path(&dir, am, serial, size),
        r => r?,
    };
    match f.stat() {
        Ok(m) => Ok((path, m)),
        Err(e) => {
            let _ = fs::unlink(&path);
            Err(io_at(&path)(e))
        }
    }
}

/// Whether `e` says that no descriptor could be had (EMFILE: RLIMIT_NOFILE
/// reached; ENFILE: the system's table full).
fn no_descriptor(e: &ArenaError) -> bool {
    matches!(e, ArenaError::Io { source, .. }
        if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)))
}

/// [`segment_file`] without a descriptor, for a process that has none to
/// spare, and without a reservation (which needs one): `mknod` of a
/// regular file, `chmod` and `truncate` by path (which follow a link: the
/// name is in a directory where nobody else may replace it, private or
/// sticky), then `lstat`, which must find the regular file made. Its path
/// and identity.
fn segment_by_path(
    dir: &Path,
    am: &Stat,
    serial: u64,
    size: u64,
) -> Result<(PathBuf, Stat), ArenaError> {
    let path = dir.join(format!("shm.{serial}"));
    let mode = am.mode & 0o666;
    fs::mknod_file(&path, mode).map_err(io_at(&path))?;
    let made = fs::lstat(&path).and_then(|m| {
        if !m.is_file() {
            return Err(Errno::EEXIST);
        }
        fs::chmod(&path, mode)?;
        fs::truncate(&path, size)?;
        match fs::lstat(&path)? {
            now if now.same_file(&m) && now.is_file() => Ok(now),
            _ => Err(Errno::EEXIST),
        }
    });
    match made {
        Ok(m) => Ok((path, m)),
        Err(e) => {
            let _ = fs::unlink(&path);
            Err(io_at(&path)(e))
        }
    }
}

/// Makes the file `dir/shm.<serial>` of `size` bytes with the arena's mode
/// without `x`: its path and the open descriptor (read-write).
///
/// The file is sparse unless `reserve`: then its pages are allocated
/// (`fallocate(fd, 0, 0, size)`), as shmem accounts a segment's memory at
/// shmget, so that a full file system (a small tmpfs) is an error here
/// and never SIGBUS at a later touch. A file system that cannot allocate
/// ahead (EOPNOTSUPP) keeps the sparse file: a touch may then fault when
/// it is full, as on Linux with MAP_NORESERVE.
fn segment_file(
    dir: &Path,
    am: &Stat,
    serial: u64,
    size: u64,
    reserve: bool,
) -> Result<(PathBuf, Fd), ArenaError> {
    let path = dir.join(format!("shm.{serial}"));
    let mode = am.mode & 0o666;
    let f = fs::open(
        &path,
        libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        mode,
    )
    .map_err(io_at(&path))?;
    let allocate = |f: &Fd| match f.fallocate(0, 0, size) {
        Err(Errno(libc::EOPNOTSUPP)) => Ok(()),
        r => r,
    };
    let made = f.chmod(mode).and_then(|()| f.set_len(size)).and_then(|()| {
        if reserve && size > 0 {
            allocate(&f)
        } else {
            Ok(())
        }
    });
    if let Err(e) = made {
        let _ = fs::unlink(&path);
        return Err(io_at(&path)(e));
    }
    Ok((path, f))
}

/// The name of the segment pool in the segment directory (shm/pool.rs).
const POOL_NAME: &str = "shm.pool";

/// The segment pool's length: the largest multiple of the page size a
/// file may have (`MAX_LFS_FILESIZE`, rounded down). Sparse.
pub(crate) const POOL_SIZE: u64 = (1 << 63) - 4096;

/// Opens the segment pool `<arena>.d/shm.pool` of the arena `am` (at
/// `arena`): read-write if `write`, else read-only, never following a
/// link nor blocking on a FIFO. A pool must be a regular file of the
/// arena's owner with the arena's mode without `x`, [`POOL_SIZE`] bytes
/// long. Made when missing, by the arena's owner (or root, who gives
/// it to the owner) opening it read-write; a half-made one (length 0: its
/// maker died, or is at it now) is finished by the same. EIDRM for a file
/// under the name that is no pool; the system call's errno otherwise
/// (EFBIG or EINVAL: the file system cannot hold a file of that length).
pub(crate) fn open_pool(arena: &Path, am: &Stat, write: bool) -> Result<(Fd, Stat), Errno> {
    let path = segment_dir_of(arena).join(POOL_NAME);
    let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
    let flags = access | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
    let me = euid();
    let may_make = write && (me == am.uid || me == 0);
    let mode = am.mode & 0o666;
    let f = match fs::open(&path, flags, 0) {
        Ok(f) => f,
        Err(Errno::ENOENT) if may_make => {
            // The directory as for a segment file: the owner's, made if
            // missing.
            segment_dir(arena, am.uid, am.mode).map_err(|_| Errno::ENOENT)?;
            match fs::open(&path, flags | libc::O_CREAT | libc::O_EXCL, mode) {
                Ok(f) => {
                    if me != am.uid
                        && let Err(e) = f.chown(am.uid, am.gid)
                    {
                        let _ = fs::unlink(&path);
                        return Err(e);
                    }
                    f
                }
                Err(Errno::EEXIST) => fs::open(&path, flags, 0)?,
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let m = f.stat()?;
    if !m.is_file() || m.uid != am.uid {
        return Err(Errno::EIDRM);
    }
    if m.size == POOL_SIZE && m.mode & 0o7777 == mode {
        return Ok((f, m));
    }
    if !may_make || (m.size != 0 && m.size != POOL_SIZE) {
        return Err(Errno::EIDRM);
    }
    f.chmod(mode)?;
    if m.size != POOL_SIZE
        && let Err(e) = f.set_len(POOL_SIZE)
    {
        // A file system that cannot hold it: no pool here, and none left
        // half made for the next caller to try again.
        let _ = fs::unlink(&path);
        return Err(e);
    }
    let m = f.stat()?;
    Ok((f, m))
}

/// Makes the huge page segment file `dir/shm.<serial>` of `size` bytes (a
/// multiple of the huge page size) in `dir`, a directory on a hugetlbfs
/// mount that follows the segment directory's rules (the arena's owner,
/// its mode plus `x`), made if missing. Its path and descriptor.
pub(crate) fn create_huge_segment(
    dir: PathBuf,
    am: &Stat,
    serial: u64,
    size: u64,
) -> Result<(PathBuf, Fd), ArenaError> {
    let (dir, _) = owned_dir(dir, am.uid, am.mode)?;
    // A file already under this serial is no live segment of this arena
    // (serials are never reused): one left by an earlier arena that had
    // this device and inode and was deleted without `ipcns ns remove`.
    // Its pages go back to the pool unless still mapped.
    let _ = fs::unlink(&dir.join(format!("shm.{serial}")));
    // Its pages are reserved by the caller, as a mapping does
    // (`reserve_huge`).
    segment_file(&dir, am, serial, size, false)
}

/// Whether `name` is one a segment directory's files take: the pool
/// (`shm.pool`) or a segment's own file (`shm.N`). Removing a namespace
/// removes these and nothing else.
pub fn is_segment_file(name: &[u8]) -> bool {
    name == POOL_NAME.as_bytes()
        || name
            .strip_prefix(b"shm.")
            .is_some_and(|s| !s.is_empty() && s.iter().all(u8::is_ascii_digit))
}

/// Removes the `shm.N` files of `dir` and `dir` itself if that leaves it
/// empty, when it is a real directory owned by `owner`.
pub(crate) fn remove_segment_dir(dir: &Path, owner: u32) {
    let Ok(m) = stat_dir(dir) else {
        return;
    };
    if m.uid != owner {
        return;
    }
    if let Ok(names) = fs::dir_names(dir) {
        for n in names {
            if is_segment_file(n.as_encoded_bytes()) {
                let _ = fs::unlink(&dir.join(n));
            }
        }
    }
    let _ = fs::rmdir(dir);
}

/// Removes the segment directory of the arena that was at `arena`, owned by
/// `owner`: its `shm.N` files and the directory itself if that leaves it
/// empty. Anything else, or a directory of someone else's, stays.
pub(crate) fn remove_segments(arena: &Path, owner: u32) {
    remove_segment_dir(&segment_dir_of(arena), owner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(dir_mode(0o600), 0o700);
        assert_eq!(dir_mode(0o666), 0o1777);
        assert_eq!(dir_mode(0o640), 0o1750);
        assert_eq!(dir_mode(0o1622), 0o1722);
        assert_eq!(shared_flag(0o600), 0);
        assert_eq!(shared_flag(0o604), FLAG_SHARED);
        assert_eq!(shared_flag(0o620), FLAG_SHARED);
    }
}
