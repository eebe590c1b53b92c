//! The `libipcns.so` this executable carries (`build.rs`), written out
//! where `LD_PRELOAD` can name it, for an `ipcns` installed without the
//! library beside it (`cargo install` installs executables only); and
//! likewise its musl build, if it carries one (`musl.rs`).
//!
//! The file is `libipcns-VERSION-HASH.so` (`libipcns-musl-VERSION-HASH.so`)
//! in `$XDG_CACHE_HOME/ipcns`, else
//! `$HOME/.cache/ipcns`, else `/tmp/ipcns-cache-UID`: a directory of this
//! user's that nobody else may write to (checked), made mode 0755 so that
//! descendants running as other users can load the library if the
//! directories above let them. A file found there is used only if it is
//! this user's, a regular file nobody else may write, and holds exactly
//! the carried bytes; otherwise it is written again (to a temporary name,
//! then renamed into place).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The library, or nothing if the build could not make it.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libipcns.so"));
/// Its musl build, or nothing.
static MUSL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libipcns-musl.so"));

/// Whether this executable carries a library.
pub fn carries() -> bool {
    !LIBRARY.is_empty()
}

/// Whether this executable carries the musl build.
pub fn carries_musl() -> bool {
    !MUSL.is_empty()
}

/// The carried library's path, written out if needed; None if this
/// executable carries none, or no directory would take it (the reason).
pub fn path() -> Result<PathBuf, String> {
    if !carries() {
        return Err("this ipcns executable carries no library".to_string());
    }
    write_out("libipcns", LIBRARY)
}

/// The carried musl build's path, as [`path`].
pub fn musl_path() -> Result<PathBuf, String> {
    if !carries_musl() {
        return Err("this ipcns executable carries no musl build of the library".to_string());
    }
    write_out("libipcns-musl", MUSL)
}

fn write_out(stem: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let name = format!(
        "{stem}-{}-{:016x}.so",
        env!("CARGO_PKG_VERSION"),
        fnv64(bytes)
    );
    let mut why = Vec::new();
    for dir in dirs() {
        match place(&dir, &name, bytes) {
            Ok(p) => return Ok(p),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(why.join("; "))
}

/// Where the library may be written, in order.
pub fn dirs() -> Vec<PathBuf> {
    let uid = ipcns_sys::cred::geteuid();
    let mut v = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        v.push(PathBuf::from(x).join("ipcns"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        v.push(PathBuf::from(h).join(".cache/ipcns"));
    }
    v.push(PathBuf::from(format!("/tmp/ipcns-cache-{uid}")));
    v.into_iter().filter(|d| d.is_absolute()).collect()
}

/// Whether `m` is this user's and nobody else may write it.
pub fn ours(m: &std::fs::Metadata) -> bool {
    m.uid() == ipcns_sys::cred::geteuid() && m.mode() & 0o022 == 0
}

/// Makes `dir` (mode 0755) if missing; an error unless it is a directory
/// of this user's that only it may write.
pub fn own_dir(dir: &Path) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| e.to_string())?;
    let m = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !m.is_dir() || !ours(&m) {
        return Err("not a directory of this user's that only it may write".to_string());
    }
    Ok(())
}

fn place(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    own_dir(dir)?;
    let path = dir.join(name);
    if let Ok(m) = std::fs::symlink_metadata(&path)
        && m.is_file()
        && ours(&m)
        && m.len() == bytes.len() as u64
        && std::fs::read(&path).is_ok_and(|b| b == bytes)
    {
        return Ok(path);
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.to_string());
    }
    Ok(path)
}

/// FNV-1a, 64 bits: names the library's bytes (a new build, a new file).
pub fn fnv64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}
