//! `ipcns sysctl [NAME[=VALUE]]...`: the namespace's /proc/sys/kernel
//! values, printed and written as `sysctl(8)` does, with Linux's rules
//! (ipc/ipc_sysctl.c) applied by the library.

use anyhow::bail;
use ipcns::{Errno, SYSCTLS};
use std::io::Write;
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns sysctl [-n] [-a] [NAME[=VALUE]]...
NAME is kernel.X or X, X one of: auto_msgmni msg_next_id msgmax msgmnb msgmni
sem sem_next_id shm_next_id shm_rmid_forced shmall shmmax shmmni";

/// `kernel.msgmni`, `kernel/msgmni` and `msgmni` all name `msgmni`.
fn short_name(name: &str) -> &str {
    name.strip_prefix("kernel.")
        .or_else(|| name.strip_prefix("kernel/"))
        .unwrap_or(name)
}

/// `EINVAL: Invalid argument`.
fn errno_text(e: Errno) -> String {
    format!("{}: {}", e.name(), crate::ipctools::strerror(e.raw()))
}

/// Runs `sysctl ARGS` on namespace `ns_name`, attached only once the
/// options are read.
pub fn run(ns_name: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    let mut values_only = false;
    let mut items = Vec::new();
    for a in args {
        match a.as_str() {
            "-n" | "--values" => values_only = true,
            "-a" | "--all" | "-w" | "--write" => {}
            "-h" | "--help" => return crate::print_out(&format!("{USAGE}\n")),
            s if s.starts_with('-') && s.len() > 1 && !s.contains('=') => {
                bail!(
                    "sysctl: unknown option {s:?}\nTry 'ipcns sysctl --help' for more information."
                )
            }
            s => items.push(s.to_string()),
        }
    }
    if items.is_empty() {
        items = SYSCTLS.iter().map(|n| format!("kernel.{n}")).collect();
    }
    let ns = crate::ns::existing(ns_name)?;
    let cred = ns.cred()?;
    let mut out = String::new();
    let mut failed = false;
    let show = |out: &mut String, name: &str, value: &str| {
        let value = value.strip_suffix('\n').unwrap_or(value);
        if values_only {
            out.push_str(&format!("{value}\n"));
        } else {
            out.push_str(&format!("kernel.{name} = {value}\n"));
        }
    };
    for item in &items {
        let (given, value) = match item.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (item.as_str(), None),
        };
        let name = short_name(given);
        let r = match value {
            None => ns.sysctl_read(name).map(|v| show(&mut out, name, &v)),
            Some(v) => ns
                .sysctl_write(&cred, name, v)
                .map(|()| show(&mut out, name, v)),
        };
        if let Err(e) = r {
            failed = true;
            // Keep the order of output and messages.
            std::io::stdout().write_all(out.as_bytes())?;
            out.clear();
            eprintln!("ipcns: {given}: {}", errno_text(e));
        }
    }
    crate::print_out(&out)?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
