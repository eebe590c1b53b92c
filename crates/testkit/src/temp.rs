//! [`TempDir`]: a private directory under `std::env::temp_dir()`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Tells apart the directories of one process.
static SERIAL: AtomicU32 = AtomicU32::new(0);

/// A private, empty directory `$TMPDIR/NAME.PID.SERIAL`, removed with
/// everything in it when dropped (also as a failing test unwinds).
///
/// NAME says whose it is (`ipcns-cli-TAG`, `ipcns-preload-TAG`...); the
/// process id and a per-process serial number make it unique, so tests
/// running in parallel never share one.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory, with the mode the umask gives (0755 under the
    /// usual 022). What a process that had the same id left under the name
    /// is removed first.
    pub fn new(name: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), name)
    }

    /// [`TempDir::new`] in `base` (`/dev/shm` for a test that needs tmpfs).
    pub fn new_in(base: &Path, name: &str) -> TempDir {
        let dir = base.join(format!(
            "{name}.{}.{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("create the directory {}: {e}", dir.display()));
        TempDir(dir)
    }

    /// [`TempDir::new`], then `chmod MODE` (which the umask does not cut:
    /// 0o1777 for a directory anyone can make files in, 0o700 for one
    /// only its owner searches).
    pub fn with_mode(name: &str, mode: u32) -> TempDir {
        let d = TempDir::new(name);
        std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", d.0.display()));
        d
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `path/p`.
    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::TempDir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_private_and_removed_on_drop() {
        let a = TempDir::new("ipcns-testkit");
        let b = TempDir::with_mode("ipcns-testkit", 0o1777);
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir());
        let mode = std::fs::metadata(b.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o1777);
        std::fs::write(a.join("f"), b"x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }
}
