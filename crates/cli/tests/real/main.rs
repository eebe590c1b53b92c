//! Real programs, unmodified, on System V IPC: each scenario is written
//! once and run twice, in a fresh kernel IPC namespace of its own
//! (`unshare(CLONE_NEWIPC)` on the thread that starts the programs):
//!
//! - `kernel`: the programs as they are, on the kernel's SysV IPC. This
//!   proves the scenario and its checks right.
//! - `ipcns`: every program under `ipcns run --strict --ns NAME` (a fresh
//!   namespace in a temporary `IPCNS_DIR`). Programs on glibc run with
//!   `--no-supervisor`, so the kernel's twelve SysV system calls fail with
//!   ENOSYS and everything goes through `libipcns.so`; programs the
//!   library cannot reach (Go's `syscall` package, PHP's extensions) run
//!   with the supervisor, which serves those calls. Afterwards the
//!   namespace must pass `ipcns ns check` and the kernel namespace must
//!   still be empty: nothing leaked.
//!
//! Results are checked, not exit codes alone: faked owners in a tar
//! listing, transactions counted and balances summed in PostgreSQL, pages
//! served by Apache after a mutex holder is killed, objects listed by
//! ipcs and lsipc, a public test suite's cases side by side, counters and
//! messages of Go goroutines and PHP processes.
//!
//! A program that is not installed, or a missing root, is reported as
//! `SKIPPED test: why` on stderr; with `IPCNS_REQUIRE_REAL=1` (CI) a skip
//! fails. Each mode prints one `real:` line with its time and figures.

mod apache;
mod fakeroot;
mod golang;
mod harness;
mod ipcs;
mod php;
mod postgres;
mod pypi;
mod utillinux;

#[test]
fn fakeroot_sysv() {
    fakeroot::test();
}

#[test]
fn postgresql() {
    postgres::test();
}

#[test]
fn apache_prefork() {
    apache::test();
}

#[test]
fn util_linux() {
    utillinux::test();
}

#[test]
fn pypi_sysv_ipc() {
    pypi::test();
}

#[test]
fn go_syscall() {
    golang::test();
}

#[test]
fn php_sysv() {
    php::test();
}
