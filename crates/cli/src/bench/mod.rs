//! `ipcns bench WHAT [--json]`: benchmark programs. Each prints ipcns beside a
//! baseline measured in the same run, with the ratios, in the shape of the
//! seed's table. Medians of several rounds: the machine is shared and noisy.

pub mod capi;
pub mod idmap;
pub mod lock;
pub mod msg;
pub mod preload;
pub mod rseq;
pub mod semget;
pub mod semop;
pub mod shm;
pub mod stats;
mod sys;

use anyhow::{Context, bail};
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns bench idmap|lock|msg|preload|rseq|semget|semop|shm [--json]
  idmap   id map lookups: ipcns, a linear scan, the kernel's binary search,
          and the host kernel's own cost (root only)
  lock    the arena's lock beside glibc's robust process-shared mutex:
          uncontended, and 2 threads and 2 processes contending
  msg     msgsnd and msgrcv: ipcns beside the kernel, in one process, as
          ping-pong between two, and two pairs on two cpus
  preload System V IPC through libipcns.so (dlopen'ed, as a C program
          calls it) beside the core called directly and the kernel: no-op
          semop, msgsnd+msgrcv, semget lookups, a semaphore ping-pong
  rseq    per-cpu increments and cpu number reads: rseq beside atomics
  semget  semget creation and lookup: ipcns beside the kernel
  semop   no-op semop on two ids at seed 000's indexes, and a two-process
          ping-pong: ipcns beside the kernel; arena bytes per undo entry
  shm     shmat + shmdt pairs of 4 KiB, 64 KiB and 16 MiB segments, with and
          without a write per page, and shm_nattch across a fork: ipcns
          beside the kernel
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
    if what == preload::KERNEL_CHILD {
        return preload::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == semget::KERNEL_CHILD {
        return semget::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == semop::KERNEL_CHILD {
        return semop::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
    }
    if what == shm::KERNEL_CHILD {
        return shm::kernel_child(&args[1..]).map(|()| ExitCode::SUCCESS);
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
        "preload" => preload::run(json).context("bench preload"),
        "rseq" => rseq::run(json).context("bench rseq"),
        "semget" => semget::run(json).context("bench semget"),
        "semop" => semop::run(json).context("bench semop"),
        "shm" => shm::run(json).context("bench shm"),
        other => bail!(
            "bench: unknown benchmark {other:?} (expected idmap, lock, msg, preload, rseq, semget, semop or shm)"
        ),
    }?;
    Ok(ExitCode::SUCCESS)
}

/// A throwaway namespace where namespaces live (the per-user directory on
/// /dev/shm, tmpfs), as a user's would; removed with its segment files on
/// drop. Every benchmark measures ipcns in one of these.
pub struct TempNs {
    pub ns: ipcns::Namespace,
    path: std::path::PathBuf,
}

impl TempNs {
    /// `ipcns-bench-TAG-PID-NANOS`, with a heap of `heap_size` bytes,
    /// extend mode if asked.
    pub fn new(tag: &str, heap_size: u64, extend: bool) -> anyhow::Result<TempNs> {
        let path = ipcns::namespace::dir()?.join(format!(
            "ipcns-bench-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        ));
        let ns = ipcns::Namespace::create_at(
            &path,
            ipcns::CreateOptions {
                extend,
                heap_size,
                ..ipcns::CreateOptions::default()
            },
        )?;
        Ok(TempNs { ns, path })
    }

    /// The caller's credentials in the namespace.
    pub fn cred(&self) -> anyhow::Result<ipcns::Cred> {
        Ok((*self.ns.cred()?).clone())
    }
}

impl Drop for TempNs {
    fn drop(&mut self) {
        let _ = ipcns::Namespace::remove_at(&self.path);
    }
}
