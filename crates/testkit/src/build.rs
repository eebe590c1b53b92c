//! A workspace package's file (a library, an executable) built by cargo in
//! the profile and target directory of the binaries under test, so that
//! it is never stale and never a second full build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// `PROFILE_DIR/FILE`, built once per test process (and package) by
/// `cargo build --locked -q -p PACKAGE --profile PROFILE --target-dir
/// TARGET`, where `PROFILE_DIR` is `TARGET/debug` (profile `dev`) or
/// `TARGET/PROFILE` (`release`, ...). Pass the directory of the binary
/// under test for its own profile, or `TARGET/release` for a release
/// build.
///
/// Errors are the reason no file came, for a test to report or fail
/// with; a second call gets the first's answer.
pub fn artifact(profile_dir: &Path, package: &str, file: &str) -> Result<&'static Path, String> {
    type Built = Vec<((PathBuf, String), Result<&'static Path, String>)>;
    static BUILT: Mutex<Built> = Mutex::new(Vec::new());
    // Held through the build: the callers of the same process wait for it.
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    let key = (profile_dir.to_path_buf(), package.to_string());
    if let Some((_, r)) = built.iter().find(|(k, _)| *k == key) {
        return r.clone();
    }
    let r = cargo_build(profile_dir, package, file).map(|p| &*Box::leak(p.into_boxed_path()));
    built.push((key, r.clone()));
    r
}

fn cargo_build(profile_dir: &Path, package: &str, file: &str) -> Result<PathBuf, String> {
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
            package,
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cargo build -p {package}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p {package} --profile {profile} failed:\n{}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let path = profile_dir.join(file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} was not built", path.display()))
    }
}
