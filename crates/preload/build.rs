//! Links the library so that its own calls to `syscall` (the core's futexes
//! and file work, Rust's standard library) reach `__wrap_syscall`, the raw
//! system call, and never the `syscall` it exports to programs (or another
//! preloaded library's). See src/next.rs.
//!
//! Also compiles `c/exec.c`, the exec family (variadic `execl` and its
//! kin cannot be written in Rust), with the C compiler Rust already links
//! with (`$CC`, else `cc`; for a musl target `$CC_<target>`, else
//! `musl-gcc`), and links its object into the library.
//!
//! For musl (`x86_64-unknown-linux-musl` with `-C
//! target-feature=-crt-static` and `musl-gcc` as the linker: see
//! crates/preload/README.md, "musl"), the unwinder is the LLVM
//! `libunwind.a` that Rust's standard library for musl carries already;
//! the `-lgcc_s` Rust adds without `crt-static` is met by an empty
//! archive, so that the library needs no `libgcc_s.so.1`, which a musl
//! system may not have (and a glibc system has only glibc's).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--wrap=syscall");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c/exec.c");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("exec.o");
    let musl = std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "musl");
    let cc = if musl {
        let target = std::env::var("TARGET").expect("cargo sets TARGET");
        let var = format!("CC_{}", target.replace('-', "_"));
        println!("cargo:rerun-if-env-changed={var}");
        std::env::var_os(var).unwrap_or_else(|| "musl-gcc".into())
    } else {
        std::env::var_os("CC").unwrap_or_else(|| "cc".into())
    };
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
    if musl {
        musl_unwinder(&out);
    } else {
        static_unwinder(&cc);
    }
}

/// The unwinder for musl: Rust's `unwind` asks for `-lgcc_s` when not
/// `crt-static`, and bundles its own `libunwind.a` (LLVM's, shipped with
/// the standard library for musl in `self-contained/`) only with it. So
/// a copy of that archive is linked whole here, ahead of the standard
/// library, and an empty `libgcc_s.a` beside it meets the `-lgcc_s` with
/// nothing: the library needs no `libgcc_s.so.1`, which a musl system
/// may not have (a glibc system has only glibc's). (Not the whole
/// `self-contained/` directory in the search path: its `libc.a` would
/// answer `-lc`. Nor gcc's `libgcc_eh.a`: it is built for glibc and
/// calls `_dl_find_object`, which musl has not.)
fn musl_unwinder(out: &Path) {
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let unwind = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", &target])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .expect("rustc --print target-libdir")
        .join("self-contained/libunwind.a");
    let dir = out.join("musl-link");
    std::fs::create_dir_all(&dir).expect("create OUT_DIR/musl-link");
    std::fs::copy(&unwind, dir.join("libunwind.a"))
        .unwrap_or_else(|e| panic!("{}: {e} (rustup target add {target})", unwind.display()));
    std::fs::write(dir.join("libgcc_s.a"), b"!<arch>\n").expect("write an empty archive");
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static:+whole-archive=unwind");
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
