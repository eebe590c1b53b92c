//! The namespace arena: one sparse file, mapped `MAP_SHARED` by every
//! participant (each maps the part in use, growing its mapping in place as
//! it needs more: `map.rs`), holding the header, the object tables and the
//! heap.
//!
//! Creating an arena writes it completely under a temporary name and then
//! links it to its final name, so that nobody ever attaches to a half-made
//! one; attaching checks the magic number, the layout version and the sizes
//! before anything else is read.

pub(crate) mod bytes;
pub(crate) mod death;
mod file;
pub mod header;
pub mod layout;
pub mod map;
pub(crate) mod pool;

use crate::lock::boot_id;
pub use file::{Access, is_segment_file, segment_dir_of};
pub(crate) use file::{
    POOL_SIZE, create_huge_segment, create_segment, euid, is_arena, not_found, open_pool,
    private_dir, remove_segment_dir, remove_segments,
};

use crate::errno::Errno;
use crate::sys::{Fd, fs};
use header::{ARCH, FLAG_EXTEND, FLAG_SHARED, Header, LAYOUT_VERSION, LOCK_KIND, MAGIC};
use layout::{HEADER_SIZE, Layout, SLOT_SIZE};
use map::{Mapping, Shared};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

/// Why an arena could not be created or attached.
#[derive(Debug, thiserror::Error)]
pub enum ArenaError {
    #[error("{path}: no such namespace")]
    NotFound { path: PathBuf },
    #[error("{path}: namespace exists already")]
    Exists { path: PathBuf },
    #[error("{path}: not an ipcns arena ({why})")]
    NotAnArena { path: PathBuf, why: String },
    #[error("{path}: arena layout version {found}, this ipcns reads version {expected}")]
    Version {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{dir}: no such directory")]
    NoDir { dir: PathBuf },
    #[error("{dir}: refusing to use this directory: {why}")]
    BadDir { dir: PathBuf, why: String },
    #[error("{path}: {kind}, not a regular file; refusing to attach")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path}: owned by uid {owner}, not by you (uid {euid}); refusing to attach ({})",
        not_owner_hint(.asked_shared)
    )]
    NotOwner {
        path: PathBuf,
        owner: u32,
        euid: u32,
        /// Whether the caller asked for [`Access::Shared`] (and the
        /// namespace was not created shared).
        asked_shared: bool,
    },
    #[error("{name:?}: invalid namespace name: {why}")]
    BadName { name: String, why: &'static str },
    #[error("{0}")]
    Errno(#[from] Errno),
}

fn not_owner_hint(asked_shared: &bool) -> &'static str {
    if *asked_shared {
        "it was not created shared: its creation mode gave no group or other permission"
    } else {
        "set IPCNS_SHARED=1 to use a namespace shared with you"
    }
}

/// How to make a new arena.
#[derive(Debug, Clone, Copy)]
pub struct CreateOptions {
    /// `ipcmni_extend`: 24-bit index, 7-bit sequence.
    pub extend: bool,
    /// Heap bytes (sparse: used pages only cost memory).
    pub heap_size: u64,
    /// File mode; the file's permissions are the security boundary.
    pub mode: u32,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            extend: false,
            heap_size: 4 << 30,
            mode: 0o600,
        }
    }
}

fn percpu_name(m: u32) -> &'static str {
    match m {
        header::PERCPU_RSEQ => "in restartable sequences",
        header::PERCPU_ATOMIC => "with atomic instructions (no rseq)",
        _ => "in an unknown way",
    }
}

/// A mapped arena.
///
/// The mapping is `MAP_SHARED` over a file any participant may truncate;
/// touching a page past the new end then raises SIGBUS in every process
/// that has it mapped. The size is checked against the header when a
/// process attaches, not afterwards: a participant that truncates the file
/// breaks the namespace, as one that scribbles over it does (see the
/// security section of docs/namespace.md).
pub struct Arena {
    path: PathBuf,
    /// The arena file as it was when attached (device, inode, owner,
    /// mode). No descriptor is kept: the one used to map it is closed at
    /// once (or left to the program, whose it was), since a program may close every descriptor it did not open
    /// itself (a daemon's `closefrom`) and reuse the number for a file of
    /// its own.
    id: crate::sys::Stat,
    map: Mapping,
    layout: Layout,
}

/// How much of an arena of layout `l` is mapped at first, beyond the
/// start of each part: the tables' first slots (all of them in normal
/// mode), the heap's first bytes. More is mapped as it is needed.
const MAP_AHEAD: u64 = 8 << 20;

/// Maps the arena file `file` of layout `l` in runs (`map.rs`): one in
/// normal mode, whose tables take some 20 MiB; in extend mode one per
/// slot table (3 GiB each), so that only the slots in use are mapped, and
/// one for the heap.
fn map_arena(file: &Fd, l: &Layout) -> Result<Mapping, Errno> {
    use map::RunSpec;
    let heap = RunSpec {
        limit: l.size,
        initial: l.heap_off.saturating_add(MAP_AHEAD),
    };
    let size = usize::try_from(l.size).map_err(|_| Errno::ENOMEM)?;
    if !l.extend {
        return Mapping::new(file, size, &[heap]);
    }
    let mut runs: Vec<RunSpec> = l
        .tables
        .iter()
        .map(|t| RunSpec {
            limit: t.bitmap,
            initial: t.slots.saturating_add(MAP_AHEAD),
        })
        .collect();
    runs.push(heap);
    Mapping::new(file, size, &runs)
}

fn io_err(path: &Path) -> impl FnOnce(Errno) -> ArenaError + '_ {
    move |e| {
        if e == Errno::ENOENT {
            ArenaError::NotFound {
                path: path.to_path_buf(),
            }
        } else {
            ArenaError::Io {
                path: path.to_path_buf(),
                source: io::Error::from(e),
            }
        }
    }
}

/// The inode of the caller's user namespace.
pub fn own_userns() -> u64 {
    fs::stat(Path::new("/proc/self/ns/user")).map_or(0, |m| m.ino)
}

impl Arena {
    /// Creates the arena at `path`, with room for the heap caches of
    /// `cache_cpus` cpus; EEXIST-like [`ArenaError::Exists`] if something
    /// is there already.
    pub fn create(path: &Path, opts: CreateOptions, cache_cpus: u32) -> Result<Arena, ArenaError> {
        let layout = Layout::new(opts.extend, opts.heap_size, cache_cpus);
        let (tmp, file) = file::create_temporary(path, opts.mode)?;
        let result = (|| {
            file.set_len(layout.size).map_err(io_err(&tmp))?;
            let map = map_arena(&file, &layout).map_err(io_err(&tmp))?;
            let id = file.stat().map_err(io_err(&tmp))?;
            let mut arena = Arena {
                path: path.to_path_buf(),
                id,
                map,
                layout,
            };
            arena.init(opts.mode & 0o077 != 0)?;
            file::publish(&tmp, path, &file, opts.mode)?;
            // The mode as published (fchmod after the umask).
            arena.id = file.stat().map_err(io_err(path))?;
            Ok(arena)
        })();
        let _ = fs::unlink(&tmp);
        result
    }

    /// Attaches to the arena at `path`: a regular file (not a link) of the
    /// caller's, or one created shared if `access` is [`Access::Shared`].
    pub fn open(path: &Path, access: Access) -> Result<Arena, ArenaError> {
        let (file, meta) = file::open_arena(path)?;
        Arena::attach(path, &file, &meta, Some(access))
    }

    /// Attaches to the arena open on `fd` (a descriptor handed down by
    /// `ipcns run`), taking the descriptor over; `path` is where its segment
    /// directory is looked for. The file must be a regular file open for
    /// reading and writing (mapping it read-write fails otherwise); there
    /// is no owner check: whoever handed the descriptor down let us in.
    pub fn open_fd(fd: std::os::fd::OwnedFd, path: &Path) -> Result<Arena, ArenaError> {
        Arena::attach_fd(&Fd::from(fd), path)
    }

    /// [`Arena::open_fd`] on descriptor number `fd`, which stays the
    /// caller's: used to map the arena and left open (for a process that
    /// cannot make a duplicate: RLIMIT_NOFILE reached). A number that is
    /// not open is an error (EBADF), nothing else.
    pub fn open_fd_in_place(fd: std::os::fd::RawFd, path: &Path) -> Result<Arena, ArenaError> {
        Fd::with_raw(fd, |file| Arena::attach_fd(file, path))
    }

    /// The checks of a descriptor handed down, then [`Arena::attach`].
    fn attach_fd(file: &Fd, path: &Path) -> Result<Arena, ArenaError> {
        let meta = file.stat().map_err(io_err(path))?;
        if !meta.is_file() {
            return Err(ArenaError::NotAnArena {
                path: path.to_path_buf(),
                why: "the descriptor is not open on a regular file".to_string(),
            });
        }
        Arena::attach(path, file, &meta, None)
    }

    /// The checks and the mapping of an arena whose file is open:
    /// `file::admit` with `access` (none for a descriptor handed down),
    /// then the header's magic, version, sizes and build. Reads the header
    /// with `pread`, so a descriptor shared with others keeps its offset.
    fn attach(
        path: &Path,
        file: &Fd,
        meta: &crate::sys::Stat,
        access: Option<Access>,
    ) -> Result<Arena, ArenaError> {
        let not = |why: String| ArenaError::NotAnArena {
            path: path.to_path_buf(),
            why,
        };
        let len = meta.size;
        let mut head = [0u8; 128];
        if len < HEADER_SIZE || file.pread_full(&mut head, 0) != Ok(head.len()) {
            return Err(not(format!("{len} bytes, too short")));
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&head[at..at + 8]);
            u64::from_le_bytes(w)
        };
        if word(0) != MAGIC {
            return Err(not("bad magic number".to_string()));
        }
        let version = word(8) as u32;
        if version != LAYOUT_VERSION {
            return Err(ArenaError::Version {
                path: path.to_path_buf(),
                found: version,
                expected: LAYOUT_VERSION,
            });
        }
        let flags = (word(8) >> 32) as u32;
        if let Some(access) = access {
            file::admit(path, meta, flags, access)?;
        }
        let size = word(16);
        let heap_off = word(24);
        // `cache_cpus` (header offset 124, pinned in header.rs).
        let cache_cpus = (word(120) >> 32) as u32;
        if cache_cpus > layout::MAX_CACHE_CPUS {
            return Err(not(format!("caches for {cache_cpus} cpus")));
        }
        let layout = Layout::new(
            flags & FLAG_EXTEND != 0,
            size.saturating_sub(heap_off),
            cache_cpus,
        );
        if size != len || layout.heap_off != heap_off || layout.size != size {
            return Err(not(format!(
                "sizes disagree: file {len}, header {size}, heap at {heap_off}"
            )));
        }
        // The descriptor is closed by the caller: the mapping is all we use.
        let map = map_arena(file, &layout).map_err(io_err(path))?;
        let arena = Arena {
            path: path.to_path_buf(),
            id: *meta,
            map,
            layout,
        };
        let h = arena.header();
        if h.slot_size.load(Relaxed) != SLOT_SIZE as u32
            || h.header_size.load(Relaxed) != HEADER_SIZE as u32
        {
            return Err(not("slot or header size differs".to_string()));
        }
        let (arch, kind) = (h.arch.load(Relaxed), h.lock_kind.load(Relaxed));
        if arch != ARCH || kind != LOCK_KIND {
            return Err(not(format!(
                "made for architecture {arch:#x} with lock kind {kind}; this ipcns is {ARCH:#x} with lock kind {LOCK_KIND}"
            )));
        }
        let percpu = h.percpu.load(Relaxed);
        if percpu != header::percpu_mode() {
            return Err(not(format!(
                "its per-cpu data is updated {}, this process would update it {}",
                percpu_name(percpu),
                percpu_name(header::percpu_mode())
            )));
        }
        Ok(arena)
    }

    /// Writes a fresh header (the file is new and private to us).
    fn init(&self, shared: bool) -> Result<(), ArenaError> {
        let h = self.header();
        let l = &self.layout;
        h.version.store(LAYOUT_VERSION, Relaxed);
        let mut flags = if l.extend { FLAG_EXTEND } else { 0 };
        if shared {
            flags |= FLAG_SHARED;
        }
        h.flags.store(flags, Relaxed);
        h.size.store(l.size, Relaxed);
        h.heap_off.store(l.heap_off, Relaxed);
        h.slot_size.store(SLOT_SIZE as u32, Relaxed);
        h.header_size.store(HEADER_SIZE as u32, Relaxed);
        h.userns.store(own_userns(), Relaxed);
        h.arch.store(ARCH, Relaxed);
        h.lock_kind.store(LOCK_KIND, Relaxed);
        h.boot.store(boot_id(), Relaxed);
        h.percpu.store(header::percpu_mode(), Relaxed);
        h.cache_cpus.store(l.cache_cpus, Relaxed);
        init_limits(&h.limits);
        for r in &h.registries {
            r.last_idx.store(-1, Relaxed);
            r.next_id.store(-1, Relaxed);
            r.max_idx.store(-1, Relaxed);
        }
        // The pages every call touches are reserved now: the bitmaps and
        // their summaries (the slots and the heap as they are handed out).
        for t in &l.tables {
            self.reserve(t.bitmap, t.end - t.bitmap)
                .map_err(ArenaError::Errno)?;
        }
        // The caches are written by every call that allocates or frees.
        self.reserve(l.caches, l.heap_off - l.caches)
            .map_err(ArenaError::Errno)?;
        h.heap.top.store(l.heap_off, Relaxed);
        h.heap.reserved.store(l.heap_off, Relaxed);
        h.heap.end.store(l.size, Relaxed);
        // The magic last: a reader of a torn file sees no magic.
        h.magic.store(MAGIC, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The mapping itself (for the heap caches' handle).
    pub(crate) fn mapping(&self) -> &Mapping {
        &self.map
    }

    pub fn header(&self) -> &Header {
        // Every Arena maps at least HEADER_SIZE bytes from the start
        // (checked in `open`, made so in `create`; the first run's initial
        // part covers the tables), so the view exists; this cannot panic.
        self.map.view(0).expect("the header is in every arena")
    }

    /// The `T` at `off`; EFAULT-like error for an offset outside the arena
    /// (a corrupted arena), never undefined behaviour; ENOMEM when the
    /// part of the file it is in cannot be mapped (`map.rs`).
    pub(crate) fn view<T: Shared>(&self, off: u64) -> Result<&T, Errno> {
        self.map.view(off)
    }

    pub(crate) fn view_slice<T: Shared>(&self, off: u64, n: usize) -> Result<&[T], Errno> {
        self.map.view_slice(off, n)
    }

    /// The arena file as attached: device, inode, owner and mode.
    pub(crate) fn id(&self) -> &crate::sys::Stat {
        &self.id
    }

    /// The arena file opened again (read-write, close-on-exec) by its
    /// path, if that is still the file this process mapped.
    pub(crate) fn reopen(&self) -> Result<Fd, Errno> {
        let f = fs::open(
            &self.path,
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            0,
        )?;
        let m = f.stat()?;
        if (m.dev, m.ino) != (self.id.dev, self.id.ino) {
            return Err(Errno(libc::ESTALE));
        }
        Ok(f)
    }

    /// Returns the pages of a range to the file system (they read as
    /// zeros); through the mapping, or on a kernel without MADV_REMOVE for
    /// tmpfs, through the file opened again.
    pub fn punch(&self, off: u64, len: u64) {
        if self.map.punch(off, len).is_err()
            && let Ok(f) = self.reopen()
        {
            let _ = f.fallocate(
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len,
            );
        }
    }

    /// Reserves the file's pages under a range before it is first touched;
    /// ENOMEM when the file system is full. Through the mapping
    /// (MADV_POPULATE_WRITE); on a kernel older than 5.14 (EINVAL), through
    /// the file opened again (`fallocate`).
    pub fn reserve(&self, off: u64, len: u64) -> Result<(), Errno> {
        match self.map.reserve(off, len) {
            Ok(()) => Ok(()),
            Err(Errno::EINVAL) => self
                .reopen()
                .and_then(|f| f.fallocate(libc::FALLOC_FL_KEEP_SIZE, off, len))
                .map_err(|_| Errno::ENOMEM),
            Err(_) => Err(Errno::ENOMEM),
        }
    }

    /// Whether `[off, off + len)` lies in the heap's handed-out part.
    #[inline]
    pub fn in_heap(&self, off: u64, len: u64) -> bool {
        let top = self.header().heap.top.load(Relaxed).min(self.layout.size);
        off >= self.layout.heap_off && off.checked_add(len).is_some_and(|end| end <= top)
    }
}

/// Linux's defaults for a new namespace's limits.
fn init_limits(l: &header::Limits) {
    l.semmsl.store(crate::limits::SEMMSL, Relaxed);
    l.semmns.store(crate::limits::SEMMNS, Relaxed);
    l.semopm.store(crate::limits::SEMOPM, Relaxed);
    l.semmni.store(crate::limits::SEMMNI, Relaxed);
    l.msgmni.store(crate::limits::MSGMNI, Relaxed);
    l.msgmax.store(crate::limits::MSGMAX, Relaxed);
    l.msgmnb.store(crate::limits::MSGMNB, Relaxed);
    l.shmmni.store(crate::limits::SHMMNI, Relaxed);
    l.shmmax.store(crate::limits::SHMMAX, Relaxed);
    l.shmall.store(crate::limits::SHMALL, Relaxed);
    l.shm_rmid_forced.store(0, Relaxed);
}
