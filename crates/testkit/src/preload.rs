//! `libipcns.so` for the tests that preload it: built by cargo, in the
//! profile and target directory of the binaries under test, so that it is
//! never stale and never a second full build.

use std::path::{Path, PathBuf};

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
/// --target-dir TARGET` ([`crate::build::artifact`]), where `PROFILE_DIR`
/// is `TARGET/debug` (profile `dev`) or `TARGET/PROFILE` (`release`,
/// ...). Pass the directory of the binary under test for its own profile,
/// or `TARGET/release` for a release build.
///
/// Errors are the reason no library came, for a test to report or fail
/// with; a second call gets the first's answer.
pub fn build(profile_dir: &Path) -> Result<&'static Path, String> {
    crate::build::artifact(profile_dir, "ipcns-preload", LIBRARY)
}
