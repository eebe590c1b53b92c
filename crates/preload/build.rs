//! Links the library so that its own calls to `syscall` (the core's futexes
//! and file work, Rust's standard library) reach `__wrap_syscall`, the raw
//! system call, and never the `syscall` it exports to programs (or another
//! preloaded library's). See src/next.rs.
//!
//! Also compiles `c/exec.c`, the exec family (variadic `execl` and its
//! kin cannot be written in Rust), with the C compiler Rust already links
//! with (`$CC`, else `cc`), and links its object into the library.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--wrap=syscall");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c/exec.c");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("exec.o");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let status = Command::new(&cc)
        .args(["-c", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&obj)
        .arg("c/exec.c")
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(status.success(), "c/exec.c did not compile ({status})");
    // Every linked target: the library, and its unit tests, which hold
    // the same exports.
    println!("cargo:rustc-link-arg={}", obj.display());
    static_unwinder(&cc);
}

/// Links the C compiler's static unwinder (`libgcc_eh.a`, as `gcc
/// -static-libgcc` does) into the library whole, ahead of Rust's standard
/// library, so that `-lgcc_s`, which comes after it, satisfies nothing and
/// is dropped (`--as-needed`): every program the library is preloaded into
/// would otherwise load `libgcc_s.so.1` too, whose constructor runs
/// `cpuid` several times (each a trap to the hypervisor on a virtual
/// machine: about 75 µs of every exec measured here), and map and copy
/// five more areas at every fork. Where the archive is not found, the
/// shared unwinder stays.
fn static_unwinder(cc: &std::ffi::OsStr) {
    let found = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(a) = found.filter(|p| p.is_absolute() && p.is_file())
        && let Some(dir) = a.parent()
    {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
    }
}
