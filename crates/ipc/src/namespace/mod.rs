//! Namespaces by name: one arena file each, `ipcns.NAME` in the caller's
//! private directory `/dev/shm/ipcns-UID` (or `$IPCNS_DIR`), its segment
//! files in the directory `ipcns.NAME.d` beside it.
//!
//! Who may attach to which file, and how files are made, is arena/file.rs's
//! business; this module turns names into paths.

pub mod activity;
pub(crate) mod check;
mod info;
#[doc(hidden)]
pub mod life;
mod msg;
mod procfs;
/// The arena's regions, for the corruption tests (feature `testing`).
#[cfg(feature = "testing")]
pub mod regions;
mod sem;
pub(crate) mod shm;
pub(crate) mod sysctl;

pub use crate::arena::Access;
use crate::arena::{self, Arena, ArenaError, CreateOptions};
use crate::creds::{self, Cred};
use crate::session::Session;
use crate::sys::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File name prefix of arenas.
const PREFIX: &str = "ipcns.";

/// An attached IPC namespace.
pub struct Namespace {
    name: String,
    /// Boxed: its address is registered for the fork handler (`fork.rs`)
    /// while the namespace has attachments.
    session: Box<Session>,
}

/// Where the per-user directories of arenas are made.
const DEFAULT_BASE: &str = "/dev/shm";

/// The directory holding the arenas: `$IPCNS_DIR` as given when set and
/// not empty; else the caller's own `/dev/shm/ipcns-UID` (UID the
/// effective uid), made with mode 0700 if missing and refused
/// ([`ArenaError::BadDir`]) unless it is a real directory of the caller's
/// that nobody else can write in. So a plain `ipcns ipcmk` never lands in a
/// file someone else chose; in a directory given explicitly, the owner check
/// at attach protects the caller.
pub fn dir() -> Result<PathBuf, ArenaError> {
    match std::env::var_os("IPCNS_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => arena::private_dir(Path::new(DEFAULT_BASE), arena::euid()),
    }
}

/// The namespace named by `$IPCNS`, else `default`.
pub fn default_name() -> String {
    std::env::var("IPCNS")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// Checks a namespace name: 1 to 200 of `[A-Za-z0-9_.-]`, not starting
/// with '.' or '-', not ending in `.d` (a namespace's segment directory)
/// and not containing `.tmp.` (an arena being made), so that no name's
/// files can be another name's.
pub fn check_name(name: &str) -> Result<(), ArenaError> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() > 200 {
        "it is longer than 200 bytes"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    {
        "only letters, digits, '_', '.' and '-' are allowed"
    } else if name.starts_with('.') || name.starts_with('-') {
        "it starts with '.' or '-'"
    } else if name.ends_with(".d") {
        "it ends in '.d' (the suffix of a namespace's segment directory)"
    } else if name.contains(".tmp.") {
        "it contains '.tmp.' (the infix of an arena being made)"
    } else {
        return Ok(());
    };
    Err(ArenaError::BadName {
        name: name.to_string(),
        why,
    })
}

/// Whether `name` is one that `unshare(CLONE_NEWIPC)` under
/// `libipcns.so` gives its namespaces (`unshare-PID-RANDOM`): removed with
/// their last process, never made again by name
/// ([`Namespace::open_or_create`]).
pub fn is_unshared(name: &str) -> bool {
    name.starts_with("unshare-")
}

/// The arena path of namespace `name` (see [`check_name`]) in [`dir`].
pub fn path_of(name: &str) -> Result<PathBuf, ArenaError> {
    check_name(name)?;
    Ok(dir()?.join(format!("{PREFIX}{name}")))
}

impl Namespace {
    /// A mapped arena as a namespace; its file noted as one this process
    /// maps (what tells a participant from a stranger in a lock word).
    fn of(name: String, arena: Arena) -> Namespace {
        let id = arena.id();
        crate::lock::note_arena(id.dev, id.ino);
        Namespace {
            name,
            session: Box::new(Session::new(arena, &crate::process::UPCALLS)),
        }
    }

    /// Creates namespace `name`; fails if it exists.
    pub fn create(name: &str, opts: CreateOptions) -> Result<Namespace, ArenaError> {
        Ok(Namespace::of(
            name.to_string(),
            Arena::create(&path_of(name)?, opts, crate::heap::cache_cpus())?,
        ))
    }

    /// Attaches to namespace `name`: the caller's own, or one shared with
    /// it if `IPCNS_SHARED=1` ([`Access::from_env`]).
    pub fn open(name: &str) -> Result<Namespace, ArenaError> {
        Namespace::open_as(name, Access::from_env())
    }

    /// Attaches to namespace `name` with `access`: [`Access::Own`] refuses a
    /// file another user owns, [`Access::Shared`] accepts it if it was
    /// created shared.
    pub fn open_as(name: &str, access: Access) -> Result<Namespace, ArenaError> {
        Ok(Namespace::attached(
            name.to_string(),
            Arena::open(&path_of(name)?, access)?,
        ))
    }

    /// Creates a namespace at an explicit arena path (tests, tools).
    pub fn create_at(path: &std::path::Path, opts: CreateOptions) -> Result<Namespace, ArenaError> {
        Ok(Namespace::of(
            path.display().to_string(),
            Arena::create(path, opts, crate::heap::cache_cpus())?,
        ))
    }

    /// Attaches to the arena at an explicit path, as [`Namespace::open`].
    pub fn open_at(path: &std::path::Path) -> Result<Namespace, ArenaError> {
        Namespace::open_at_as(path, Access::from_env())
    }

    /// Attaches to the arena at an explicit path, as [`Namespace::open_as`].
    pub fn open_at_as(path: &std::path::Path, access: Access) -> Result<Namespace, ArenaError> {
        Ok(Namespace::attached(
            path.display().to_string(),
            Arena::open(path, access)?,
        ))
    }

    /// An opened arena as a namespace. A process that had it mapped
    /// before an execve finds its record now: the attachments of the old
    /// image went with its address space (Linux drops them in execve
    /// itself), the undo entries stay. On an error the first call that
    /// needs the record tries again.
    fn attached(name: String, arena: Arena) -> Namespace {
        let ns = Namespace::of(name, arena);
        let _ = crate::process::adopt(&ns.session);
        ns
    }

    /// Attaches to the arena open on `fd`, a descriptor handed down (as
    /// `ipcns run` hands its namespace to the programs it starts, so that
    /// one that changes uid or clears its environment stays in it). Takes
    /// the descriptor over (pass a duplicate to keep one open). Its segment
    /// directory is found beside `hint` when that names the same file
    /// (device and inode), else beside the path the descriptor was opened
    /// with (`/proc/self/fd/N`). No owner check: the descriptor is the
    /// permission.
    pub fn open_fd(fd: std::os::fd::OwnedFd, hint: Option<&Path>) -> Result<Namespace, ArenaError> {
        use std::os::fd::AsRawFd;
        let path = Namespace::path_of_fd(fd.as_raw_fd(), hint)?;
        Ok(Namespace::of(
            path.display().to_string(),
            Arena::open_fd(fd, &path)?,
        ))
    }

    /// [`Namespace::open_fd`] on descriptor number `fd`, which stays the
    /// caller's (mapped from, never closed; a number not open is EBADF):
    /// for a process that cannot make a duplicate of the one handed down
    /// (RLIMIT_NOFILE reached). The mapping needs no descriptor afterwards.
    pub fn open_fd_in_place(
        fd: std::os::fd::RawFd,
        hint: Option<&Path>,
    ) -> Result<Namespace, ArenaError> {
        let path = Namespace::path_of_fd(fd, hint)?;
        Ok(Namespace::of(
            path.display().to_string(),
            Arena::open_fd_in_place(fd, &path)?,
        ))
    }

    /// Where the arena open on `fd` is: `hint` if it names the same file,
    /// else the path the descriptor was opened with.
    fn path_of_fd(fd: std::os::fd::RawFd, hint: Option<&Path>) -> Result<PathBuf, ArenaError> {
        use std::os::unix::fs::MetadataExt;
        let link = PathBuf::from(format!("/proc/self/fd/{fd}"));
        let same = |p: &Path| {
            let (Ok(a), Ok(b)) = (std::fs::metadata(p), std::fs::metadata(&link)) else {
                return false;
            };
            (a.dev(), a.ino()) == (b.dev(), b.ino())
        };
        let path = match hint {
            Some(h) if same(h) => h.to_path_buf(),
            _ => std::fs::read_link(&link).map_err(|source| ArenaError::Io {
                path: link.clone(),
                source,
            })?,
        };
        // A removed arena (`ipcns ns remove`, an unshared namespace's
        // guardian): its link ends in " (deleted)", and a segment
        // directory named after that would be made beside it, never to be
        // removed. Gone, as its name is.
        if let Some(was) = path.to_str().and_then(|p| p.strip_suffix(" (deleted)"))
            && !same(Path::new(was))
        {
            return Err(ArenaError::NotFound {
                path: PathBuf::from(was),
            });
        }
        Ok(path)
    }

    /// Attaches to namespace `name`, creating it with default options if
    /// it does not exist (as every process has an IPC namespace); honours
    /// `IPCNS_SHARED` as [`Namespace::open`] does. A name that
    /// `unshare(CLONE_NEWIPC)` gives (`unshare-...`, [`is_unshared`]) is
    /// never made here: such a namespace is gone with its last process
    /// (`libipcns.so`'s guardian removed it), and one made again under its
    /// name would split its users and outlive them all; NotFound then.
    pub fn open_or_create(name: &str) -> Result<Namespace, ArenaError> {
        match Namespace::open(name) {
            Err(e @ ArenaError::NotFound { .. }) if is_unshared(name) => Err(e),
            Err(ArenaError::NotFound { .. }) => {
                match Namespace::create(name, CreateOptions::default()) {
                    Err(ArenaError::Exists { .. }) => Namespace::open(name),
                    r => r,
                }
            }
            r => r,
        }
    }

    /// Removes namespace `name`: its arena file, and its segment directory
    /// with the `shm.N` files in it. Attached processes keep their mappings
    /// until they exit.
    pub fn remove(name: &str) -> Result<(), ArenaError> {
        Namespace::remove_at(&path_of(name)?)
    }

    /// Removes the namespace at an explicit arena path, as
    /// [`Namespace::remove`]. The segment directory goes only if it is a
    /// real directory of the arena's owner, and only its `shm.N` files.
    pub fn remove_at(path: &Path) -> Result<(), ArenaError> {
        let io = |e: crate::errno::Errno| {
            if e == crate::errno::Errno::ENOENT {
                arena::not_found(path)
            } else {
                ArenaError::Io {
                    path: path.to_path_buf(),
                    source: e.into(),
                }
            }
        };
        let id = fs::lstat(path).map_err(io)?;
        let owner = id.uid;
        fs::unlink(path).map_err(io)?;
        arena::remove_segments(path, owner);
        crate::shm::remove_huge_dirs(&id, owner);
        Ok(())
    }

    /// The directories [`Namespace::remove_at`] clears for the arena at
    /// `path`: its segment directory `<arena>.d` and, for each hugetlbfs
    /// mount found now, the one its huge page segments would use. For a
    /// remover that must not allocate when it removes (the unshare
    /// guardian of `libipcns.so`); it removes there only the names
    /// [`crate::is_segment_file`] accepts, in a directory of the arena's
    /// owner.
    #[doc(hidden)]
    pub fn segment_dirs_at(path: &Path) -> Result<Vec<PathBuf>, crate::errno::Errno> {
        let id = fs::lstat(path)?;
        let mut dirs = vec![arena::segment_dir_of(path)];
        dirs.extend(crate::shm::huge_dirs(&id));
        Ok(dirs)
    }

    /// The names of the namespaces in [`dir`]: regular files named
    /// `ipcns.NAME`, for a valid NAME, that start with an arena's magic
    /// number (so no half-made arenas). Never follows a link or waits on a
    /// FIFO.
    pub fn list() -> Result<Vec<String>, ArenaError> {
        let d = dir()?;
        let entries = fs::dir_names(&d).map_err(|e| {
            if e == crate::errno::Errno::ENOENT {
                ArenaError::NoDir { dir: d.clone() }
            } else {
                ArenaError::Io {
                    path: d.clone(),
                    source: e.into(),
                }
            }
        })?;
        let mut v: Vec<String> = entries
            .into_iter()
            .filter_map(|n| Some((d.join(&n), n.into_string().ok()?)))
            .filter_map(|(p, n)| Some((p, n.strip_prefix(PREFIX)?.to_string())))
            .filter(|(p, n)| check_name(n).is_ok() && arena::is_arena(p))
            .map(|(_, n)| n)
            .collect();
        v.sort();
        Ok(v)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// This process's session with the arena.
    pub(crate) fn arena(&self) -> &Session {
        &self.session
    }

    /// Heap bytes in use (sets' arrays, messages, key tables); slots are
    /// counted separately, one per object.
    pub fn heap_in_use(&self) -> u64 {
        crate::heap::in_use(&self.session)
    }

    /// The heap's figures (bytes in use, handed out, free on the lists and
    /// in the per-cpu caches), as `check` finds them.
    pub fn heap_stats(&self) -> crate::heap::HeapStats {
        crate::heap::audit(&self.session).0
    }

    /// The heap's allocator, for tests that drive it directly: a block of
    /// `size` bytes (zeroed), as the objects' code gets one.
    #[cfg(feature = "testing")]
    pub fn heap_alloc(&self, size: u64) -> crate::errno::SysResult<u64> {
        self.session.alloc(size)
    }

    /// Frees a block from [`Namespace::heap_alloc`] (for tests).
    #[cfg(feature = "testing")]
    pub fn heap_free(&self, off: u64, size: u64) -> crate::errno::SysResult<()> {
        self.session.free(off, size)
    }

    /// The word at `off` of the arena, if inside it and aligned (for
    /// tests that mark the blocks they hold).
    #[cfg(feature = "testing")]
    pub fn arena_word(&self, off: u64) -> Option<&core::sync::atomic::AtomicU64> {
        self.session.view(off).ok()
    }

    /// The calling process's credentials, cached (see [`crate::creds`]).
    pub fn cred(&self) -> std::io::Result<Arc<Cred>> {
        creds::current(
            self.session
                .header()
                .userns
                .load(core::sync::atomic::Ordering::Relaxed),
        )
    }
}

impl Namespace {
    /// The credentials of thread `tid` of process (`pid`, `start`) as
    /// they are now, for this namespace ([`Cred::read_of`]): what a
    /// supervisor serving that thread's call checks it with.
    #[doc(hidden)]
    pub fn cred_of(&self, tid: i32, pid: i32, start: u64) -> std::io::Result<Cred> {
        let ns = self
            .session
            .header()
            .userns
            .load(core::sync::atomic::Ordering::Relaxed);
        Cred::read_of(tid, pid, start, ns)
    }

    /// Runs `f` as a call of process `p` (`ipcns::acting::for_process`),
    /// mapping through `mapper`; the process's record, if the call made
    /// or used it, is left to finishers again at the end.
    #[doc(hidden)]
    pub fn act<R>(
        &self,
        p: crate::acting::Process,
        mapper: Option<std::rc::Rc<dyn crate::acting::Mapper>>,
        f: impl FnOnce() -> R,
    ) -> R {
        let (r, marked) = crate::acting::for_process(p, mapper, f);
        if let Some(idx) = marked {
            let _ = crate::process::unbusy(&self.session, idx, p);
        }
        r
    }

    /// The process this thread acts for (`ipcns::acting`) is exiting
    /// (its `exit_group`): its undo entries applied and its attachments
    /// dropped now, as the kernel's exit does before its parent can see
    /// it gone.
    #[doc(hidden)]
    pub fn exit_acting(&self) -> crate::errno::SysResult<()> {
        crate::process::exit_acting(&self.session)
    }

    /// The process this thread acts for, at its first call: the
    /// attachments of its parent (pid, start) that it maps too (`mapped`)
    /// counted as its own, a fork's copies. Whether any were.
    #[doc(hidden)]
    pub fn inherit_acting(
        &self,
        parent: (i32, u64),
        mapped: &dyn Fn(u64) -> bool,
    ) -> crate::errno::SysResult<bool> {
        crate::process::inherit_acting(&self.session, parent, mapped)
    }

    /// The process this thread acts for: attachments of an image it
    /// replaced by an exec dropped. Whether it still has attachments.
    #[doc(hidden)]
    pub fn observe_acting(&self) -> crate::errno::SysResult<bool> {
        crate::process::observe_acting(&self.session)
    }
}

/// Leaving a namespace is the process's exit from it (`process::exit`):
/// its undo entries applied; its attachments stay counted while mapped.
impl Drop for Namespace {
    fn drop(&mut self) {
        let id = self.arena().id();
        crate::lock::forget_arena(id.dev, id.ino);
        crate::process::fork::unregister(self.arena());
        // Errors cannot be reported from a drop; the next reaper retries.
        let _ = crate::process::exit(self.arena());
    }
}
