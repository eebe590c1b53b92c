//! `ipcns bench WHAT [--json]`: benchmark programs. Each prints ipcns beside a
//! baseline measured in the same run, with the ratios, in the shape of the
//! seed's table. Medians of several rounds: the machine is shared and noisy.

pub mod idmap;
pub mod lock;
pub mod msg;
pub mod rseq;
pub mod semget;
pub mod stats;
mod sys;

use anyhow::{Context, bail};
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns bench idmap|lock|msg|rseq|semget [--json]
  idmap   id map lookups: ipcns, a linear scan, the kernel's binary search,
          and the host kernel's own cost (root only)
  lock    the arena's lock beside glibc's robust process-shared mutex:
          uncontended, and 2 threads and 2 processes contending
  msg     msgsnd and msgrcv: ipcns beside the kernel, in one process, as
          ping-pong between two, and two pairs on two cpus
  rseq    per-cpu increments and cpu number reads: rseq beside atomics
  semget  semget creation and lookup: ipcns beside the kernel
--json prints the results as JSON.";

pub fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let Some(what) = args.first() else {
        bail!("{USAGE}");
    };
    // Hidden: the child half of the kernel measurement, run inside a fresh
    // user namespace by `bench idmap` itself.
    if what == idmap::KERNEL_CHILD {
        return idmap::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == msg::KERNEL_CHILD {
        return msg::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == semget::KERNEL_CHILD {
        return semget::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    let mut json = false;
    for a in &args[1..] {
        match a.as_str() {
            "--json" => json = true,
            other => bail!("bench: unknown option {other:?} (expected --json)"),
        }
    }
    match what.as_str() {
        "idmap" => idmap::run(json).context("bench idmap"),
        "lock" => lock::run(json).context("bench lock"),
        "msg" => msg::run(json).context("bench msg"),
        "rseq" => rseq::run(json).context("bench rseq"),
        "semget" => semget::run(json).context("bench semget"),
        other => {
            bail!("bench: unknown benchmark {other:?} (expected idmap, lock, msg, rseq or semget)")
        }
    }?;
    Ok(ExitCode::SUCCESS)
}
