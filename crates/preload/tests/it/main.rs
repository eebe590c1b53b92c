//! libipcns.so end to end, as C programs see it.
//!
//! Small C programs (`tests/c`, built with gcc) print every System V call
//! they make, its result and errno's name. Each runs twice: on the kernel
//! in a fresh IPC namespace (`unshare --ipc`, which needs root), and with
//! `LD_PRELOAD=libipcns.so` on a throwaway namespace, itself inside a
//! fresh IPC namespace whose /proc/sysvipc files must stay empty (nothing
//! reached the kernel's System V IPC). The two outputs must be the same,
//! line for line. Without root the kernel runs are skipped with a printed
//! reason (a failure with `IPCNS_REQUIRE_KERNEL=1`), and the library runs
//! must still succeed.
//!
//! The library is built by the test itself (`cargo build -p
//! ipcns-preload`, same profile and target directory), since cargo builds
//! a `cdylib` for nobody's tests.

mod compare;
mod lifetime;
mod namespace;
mod procfs;
mod support;
