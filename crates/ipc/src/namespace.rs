//! Namespaces by name: one arena file each, `ipcns.NAME` in /dev/shm (or
//! `$IPCNS_DIR`).

use crate::arena::{Arena, ArenaError, CreateOptions};
use crate::creds::{self, Cred};
use std::path::PathBuf;
use std::sync::Arc;

/// File name prefix of arenas.
const PREFIX: &str = "ipcns.";

/// An attached IPC namespace.
pub struct Namespace {
    name: String,
    arena: Arena,
}

/// The directory holding the arenas: `$IPCNS_DIR`, else /dev/shm.
pub fn dir() -> PathBuf {
    std::env::var_os("IPCNS_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// The namespace named by `$IPCNS`, else `default`.
pub fn default_name() -> String {
    std::env::var("IPCNS")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// The arena path of namespace `name`; names are 1 to 200 of
/// `[A-Za-z0-9_.-]`, not starting with a dot.
pub fn path_of(name: &str) -> Result<PathBuf, ArenaError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !ok {
        return Err(ArenaError::NotAnArena {
            path: PathBuf::from(name),
            why: "a namespace name is 1 to 200 letters, digits, '_', '.' or '-', not starting with '.'".to_string(),
        });
    }
    Ok(dir().join(format!("{PREFIX}{name}")))
}

impl Namespace {
    /// Creates namespace `name`; fails if it exists.
    pub fn create(name: &str, opts: CreateOptions) -> Result<Namespace, ArenaError> {
        Ok(Namespace {
            name: name.to_string(),
            arena: Arena::create(&path_of(name)?, opts)?,
        })
    }

    /// Attaches to namespace `name`.
    pub fn open(name: &str) -> Result<Namespace, ArenaError> {
        Ok(Namespace {
            name: name.to_string(),
            arena: Arena::open(&path_of(name)?)?,
        })
    }

    /// Creates a namespace at an explicit arena path (tests, tools).
    pub fn create_at(path: &std::path::Path, opts: CreateOptions) -> Result<Namespace, ArenaError> {
        Ok(Namespace {
            name: path.display().to_string(),
            arena: Arena::create(path, opts)?,
        })
    }

    /// Attaches to the arena at an explicit path.
    pub fn open_at(path: &std::path::Path) -> Result<Namespace, ArenaError> {
        Ok(Namespace {
            name: path.display().to_string(),
            arena: Arena::open(path)?,
        })
    }

    /// Attaches to namespace `name`, creating it with default options if
    /// it does not exist (as every process has an IPC namespace).
    pub fn open_or_create(name: &str) -> Result<Namespace, ArenaError> {
        match Namespace::open(name) {
            Err(ArenaError::NotFound { .. }) => {
                match Namespace::create(name, CreateOptions::default()) {
                    Err(ArenaError::Exists { .. }) => Namespace::open(name),
                    r => r,
                }
            }
            r => r,
        }
    }

    /// Removes namespace `name`: its arena file and its segments' files.
    /// Attached processes keep their mappings until they exit.
    pub fn remove(name: &str) -> Result<(), ArenaError> {
        let p = path_of(name)?;
        std::fs::remove_file(&p).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ArenaError::NotFound { path: p.clone() }
            } else {
                ArenaError::Io {
                    path: p.clone(),
                    source,
                }
            }
        })?;
        let segments = format!("{PREFIX}{name}.shm.");
        if let Ok(entries) = std::fs::read_dir(dir()) {
            for e in entries.filter_map(|e| e.ok()) {
                let n = e.file_name();
                let n = n.to_string_lossy();
                if n.strip_prefix(&segments)
                    .is_some_and(|serial| serial.bytes().all(|b| b.is_ascii_digit()))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(())
    }

    /// The names of the namespaces in [`dir`]: files named `ipcns.NAME`
    /// that start with an arena's magic number (so neither shm segment
    /// files nor half-made arenas).
    pub fn list() -> std::io::Result<Vec<String>> {
        let is_arena = |p: &std::path::Path| {
            use std::io::Read;
            let mut magic = [0u8; 8];
            std::fs::File::open(p)
                .and_then(|mut f| f.read_exact(&mut magic))
                .is_ok()
                && u64::from_le_bytes(magic) == crate::arena::header::MAGIC
        };
        let mut v: Vec<String> = std::fs::read_dir(dir())?
            .filter_map(|e| e.ok())
            .filter(|e| is_arena(&e.path()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| n.strip_prefix(PREFIX).map(str::to_string))
            .filter(|n| path_of(n).is_ok())
            .collect();
        v.sort();
        Ok(v)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn arena(&self) -> &Arena {
        &self.arena
    }

    /// Heap bytes in use (sets' arrays, messages, key tables); slots are
    /// counted separately, one per object.
    pub fn heap_in_use(&self) -> u64 {
        crate::heap::in_use(&self.arena)
    }

    /// The calling process's credentials, cached (see [`crate::creds`]).
    pub fn cred(&self) -> std::io::Result<Arc<Cred>> {
        creds::current(
            self.arena
                .header()
                .userns
                .load(core::sync::atomic::Ordering::Relaxed),
        )
    }
}
