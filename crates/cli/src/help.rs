//! `ipcns help [TOPIC]`: the command's usage, or a subcommand's help (the
//! text its `--help` prints).

use crate::{bench, idmap, ipctools, ns, procfs, run, sysctl, top};
use anyhow::{anyhow, bail};
use std::ffi::OsString;

pub const USAGE: &str = "\
ipcns: Linux System V IPC (semaphores, message queues, shared memory) in user space,
with the kernel's semantics: a private IPC namespace without privileges, for programs
run where the kernel's is missing, locked down or shared.

usage: ipcns COMMAND [ARGS]

  run [--ns NAME | --private [--keep]] [--shared | --mode OCTAL] [--strict] [--no-supervisor | --serve-proc] [--] PROGRAM [ARGS...]
                                      run PROGRAM with libipcns.so preloaded on the namespace, as its
                                      child subreaper; without PROGRAM, print what it would do

IPC namespace commands (each takes --ns NAME; default $IPCNS, else \"default\";
only ipcmk, ns create and run make one that does not exist):
  ipcs [-m|-q|-s|-a] [-t|-p|-c|-l|-u] [--human|-b] [-i ID]
                                      util-linux's ipcs on the namespace
  ipcmk [-M SIZE] [-Q] [-S NSEMS] [-p PERMS]
                                      util-linux's ipcmk
  ipcrm [-m|-q|-s ID] [-M|-Q|-S KEY] [-a[=shm|msg|sem]] [-v]; ipcrm shm|msg|sem ID...
                                      util-linux's ipcrm
  sysctl [-n] [NAME[=VALUE]]...       the namespace's kernel.* limits and *_next_id
  proc sem|msg|shm                    the namespace's /proc/sysvipc text
  top [NAME] [--once | -n COUNT] [-d SECONDS] [--sort KEY] [--json]
                                      a live view: each object's operations per second,
                                      blocked calls, messages, bytes, attachments, last pid
  ns create NAME [--extend] [--mode OCTAL]
  ns list | ns info [NAME] | ns check [NAME] | ns remove NAME... | ns prune [--dry-run]
                                      namespaces (arena files in $IPCNS_DIR or /dev/shm/ipcns-UID)

other commands:
  idmap show PID                      both id maps of a process, with how Linux looks them up
  idmap check FILE|- [--parent FILE]  validate a map as the kernel's map_write would
  idmap split FILE|- --parent FILE    cut extents at the parent map's boundaries so it can be written
  idmap map PID --uid N | --gid N     translate an id both ways through a process's map
  idmap except --count N --host-base H [--first F] [--keep ID,ID,...]
                                      print an \"everything except\" map, ready to write
  idmap write PID [--uid-map FILE] [--gid-map FILE] [--setgroups auto|deny|leave]
                                      write maps to a process in a new user namespace
  bench contend|fork|idmap|lock|msg|preload|rseq|semget|semop|shm|stress|supervisor [--json] [--goals] [--plot FILE.svg]
                                      benchmarks: ipcns beside its baselines, in one run
  help [TOPIC]                        this text, or a command's (as COMMAND --help prints it)
  man                                 the manual page ipcns(1), made from these texts (man -l -)
  completions bash|zsh|fish           the shell's completion script, made from these texts
  -V, --version                       ipcns's version

help topics: run ipcs ipcmk ipcrm sysctl proc top ns idmap bench
";

/// The help of a subcommand, or `None` when `topic` is none.
pub fn topic(topic: &str) -> Option<&'static str> {
    Some(match topic {
        "idmap" => idmap::USAGE,
        "bench" => bench::USAGE,
        "sysctl" => sysctl::USAGE,
        "proc" => procfs::USAGE,
        "top" => top::USAGE,
        "ns" => ns::USAGE,
        "run" => run::USAGE,
        tool => ipctools::Which::from_name(tool)?.usage(),
    })
}

/// What `ipcns help ARGS` prints.
pub fn text(args: &[OsString]) -> anyhow::Result<String> {
    let topics = "help topics: run ipcs ipcmk ipcrm sysctl proc top ns idmap bench";
    match args {
        [] => Ok(USAGE.to_string()),
        [t] => {
            let text = t
                .to_str()
                .and_then(topic)
                .ok_or_else(|| anyhow!("help: no topic {t:?}\n{topics}"))?;
            Ok(format!("{}\n", text.trim_end_matches('\n')))
        }
        [_, extra, ..] => bail!("help: unexpected argument {extra:?}\n{topics}"),
    }
}
