//! Links the library so that its own calls to `syscall` (the core's futexes
//! and file work, Rust's standard library) reach `__wrap_syscall`, the raw
//! system call, and never the `syscall` it exports to programs (or another
//! preloaded library's). See src/next.rs.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--wrap=syscall");
    println!("cargo:rerun-if-changed=build.rs");
}
