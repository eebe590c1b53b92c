//! Carries `libipcns.so` inside the `ipcns` executable, so that `ipcns run`
//! works from an executable installed alone (`cargo install --path
//! crates/cli` installs executables only; the library beside it is then
//! missing). The library is built here by a nested `cargo build --release
//! -p ipcns-preload` into `<target>/embed` (its own build directory, so
//! the outer build's lock is not waited for), without debug information,
//! and copied to `OUT_DIR`, where `src/run/carried.rs` includes it.
//!
//! If it cannot be built (no C compiler, a registry out of reach, or
//! `IPCNS_NO_EMBED=1`), an empty file stands in and the executable carries
//! nothing: `ipcns run` then needs the library beside it or in
//! `$IPCNS_PRELOAD`, and says so.
//!
//! The musl build of the library (`libipcns-musl.so`, for programs whose
//! interpreter is musl's: `src/run/musl.rs`) is carried too when this
//! machine can make it: Rust's target `ARCH-unknown-linux-musl` installed
//! (`rustup target add`) and a musl C compiler (`$CC_ARCH_unknown_linux_musl`,
//! else `musl-gcc`, Debian's `musl-tools`). It is the same nested build
//! with `--target`, `-C target-feature=-crt-static` (a cdylib) and that
//! compiler as the linker (crates/preload/README.md, "musl"). Without
//! the target nothing is said and nothing is carried for musl; with the
//! target but no compiler, or a failed build, a warning says why.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dest = out.join("libipcns.so");
    let musl_dest = out.join("libipcns-musl.so");
    // None until built (below).
    carry_no_musl(&musl_dest, None);
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest.join("../..");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=IPCNS_NO_EMBED");
    for dir in [
        "crates/preload",
        "crates/ipc",
        "crates/sys",
        "crates/rseq",
        "crates/idmap",
    ] {
        let d = root.join(dir);
        if d.exists() {
            println!("cargo:rerun-if-changed={}", d.display());
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    if std::env::var_os("IPCNS_NO_EMBED").is_some_and(|v| v == "1") {
        return carry_nothing(&dest, "IPCNS_NO_EMBED=1");
    }
    if !root.join("crates/preload/Cargo.toml").is_file() {
        return carry_nothing(&dest, "crates/preload is not beside this crate");
    }
    // <target>/<profile>/build/ipcns-cli-HASH/out -> <target>/embed
    let embed = out
        .ancestors()
        .nth(4)
        .map_or_else(|| out.join("embed"), |t| t.join("embed"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.args([
        "build",
        "--release",
        "-p",
        "ipcns-preload",
        "--manifest-path",
    ])
    .arg(root.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&embed)
    // What cargo set for this build script and clippy for its run:
    // the nested build is an ordinary one.
    .env_remove("RUSTC_WORKSPACE_WRAPPER")
    .env_remove("CARGO_ENCODED_RUSTFLAGS")
    .env_remove("CARGO_TARGET_DIR")
    .env_remove("CARGO_BUILD_TARGET_DIR")
    .env_remove("CARGO_PRIMARY_PACKAGE")
    // A small library: no debug information.
    .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
    .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    if root.join("Cargo.lock").is_file() {
        c.arg("--locked");
    }
    match c.status() {
        Ok(s) if s.success() => {
            let built = embed.join("release/libipcns.so");
            if let Err(e) = std::fs::copy(&built, &dest) {
                carry_nothing(&dest, &format!("{}: {e}", built.display()));
            }
        }
        Ok(s) => carry_nothing(&dest, &format!("cargo build -p ipcns-preload: {s}")),
        Err(e) => carry_nothing(&dest, &format!("cannot run cargo: {e}")),
    }
    match musl(c, &embed) {
        Ok(built) => {
            if let Err(e) = std::fs::copy(&built, &musl_dest) {
                carry_no_musl(&musl_dest, Some(&format!("{}: {e}", built.display())));
            }
        }
        Err(why) => carry_no_musl(&musl_dest, why.as_deref()),
    }
}

/// The musl build of the library (the nested build `c`, for the musl
/// target); `Err(None)` if the target is not installed, `Err(Some(why))`
/// if it could not be made.
fn musl(mut c: Command, embed: &Path) -> Result<PathBuf, Option<String>> {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target = format!("{arch}-unknown-linux-musl");
    let var = format!("CC_{}", target.replace('-', "_"));
    println!("cargo:rerun-if-env-changed={var}");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let installed = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", &target])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|d| d.join("self-contained/libunwind.a").is_file());
    if !installed {
        return Err(None);
    }
    let cc = std::env::var_os(&var).unwrap_or_else(|| "musl-gcc".into());
    if !Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err(Some(format!(
            "no musl C compiler ({}: install musl-tools, or set {var})",
            cc.to_string_lossy()
        )));
    }
    // RUSTFLAGS, which wins over the target's own flags; with --target it
    // reaches the library alone, not build scripts.
    let flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    let upper = target.replace('-', "_").to_uppercase();
    c.args(["--target", &target])
        .env(format!("CARGO_TARGET_{upper}_LINKER"), &cc)
        .env(
            "RUSTFLAGS",
            format!("{flags} -C target-feature=-crt-static"),
        );
    match c.status() {
        Ok(s) if s.success() => Ok(embed.join(&target).join("release/libipcns.so")),
        Ok(s) => Err(Some(format!(
            "cargo build -p ipcns-preload --target {target}: {s}"
        ))),
        Err(e) => Err(Some(format!("cannot run cargo: {e}"))),
    }
}

/// An empty library: the executable carries none.
fn carry_nothing(dest: &Path, why: &str) {
    println!(
        "cargo:warning=ipcns carries no libipcns.so ({why}); ipcns run will need it beside the executable or in $IPCNS_PRELOAD"
    );
    std::fs::write(dest, b"").expect("write OUT_DIR/libipcns.so");
}

/// No musl library: an empty one, with a warning if the build was
/// possible (`why`).
fn carry_no_musl(dest: &Path, why: Option<&str>) {
    if let Some(why) = why {
        println!(
            "cargo:warning=ipcns carries no musl build of libipcns.so ({why}); ipcns run will need it in $IPCNS_PRELOAD_MUSL for musl programs"
        );
    }
    std::fs::write(dest, b"").expect("write OUT_DIR/libipcns-musl.so");
}
