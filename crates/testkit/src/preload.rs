//! `libipcns.so` for the tests that preload it: built by cargo, in the
//! profile and target directory of the binaries under test, so that it is
//! never stale and never a second full build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// The library's file name.
pub const LIBRARY: &str = "libipcns.so";

/// `$IPCNS_PRELOAD`, when set and not empty: a library named by whoever
/// runs the tests, used instead of building one.
pub fn from_env() -> Option<PathBuf> {
    std::env::var_os("IPCNS_PRELOAD")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// `PROFILE_DIR/libipcns.so`, built once per test process by
/// `cargo build --locked -q -p ipcns-preload --profile PROFILE
/// --target-dir TARGET`, where `PROFILE_DIR` is `TARGET/debug` (profile
/// `dev`) or `TARGET/PROFILE` (`release`, ...). Pass the directory of the
/// binary under test for its own profile, or `TARGET/release` for a
/// release build.
///
/// Errors are the reason no library came, for a test to report or fail
/// with; a second call gets the first's answer.
pub fn build(profile_dir: &Path) -> Result<&'static Path, String> {
    static BUILT: Mutex<Vec<(PathBuf, Result<&'static Path, String>)>> = Mutex::new(Vec::new());
    // Held through the build: the callers of the same process wait for it.
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, r)) = built.iter().find(|(d, _)| d == profile_dir) {
        return r.clone();
    }
    let r = cargo_build(profile_dir).map(|lib| &*Box::leak(lib.into_boxed_path()));
    built.push((profile_dir.to_path_buf(), r.clone()));
    r
}

fn cargo_build(profile_dir: &Path) -> Result<PathBuf, String> {
    let target = profile_dir
        .parent()
        .ok_or_else(|| format!("no target directory above {}", profile_dir.display()))?;
    // The dev profile's directory is `debug`; every other is its name.
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(other) => other,
        None => return Err(format!("no profile directory in {}", profile_dir.display())),
    };
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--locked",
            "-q",
            "-p",
            "ipcns-preload",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cargo build -p ipcns-preload: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p ipcns-preload --profile {profile} failed:\n{}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let lib = profile_dir.join(LIBRARY);
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!("{} was not built", lib.display()))
    }
}
