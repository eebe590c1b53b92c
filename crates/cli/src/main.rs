//! The `ipcns` command: argument parsing and error reporting only; the work is
//! done by the libraries and the modules below.

mod bench;
mod idmap;
mod ipctools;
mod ns;
mod procfs;
mod sysctl;

use std::io::{self, Write};
use std::process::ExitCode;

const USAGE: &str = "\
usage: ipcns COMMAND [ARGS]

commands:
  idmap show PID                      both id maps of a process, with how Linux looks them up
  idmap check FILE|- [--parent FILE]  validate a map as the kernel's map_write would
  idmap split FILE|- --parent FILE    cut extents at the parent map's boundaries so it can be written
  idmap map PID --uid N | --gid N     translate an id both ways through a process's map
  idmap except --count N --host-base H [--first F] [--keep ID,ID,...]
                                      print an \"everything except\" map, ready to write
  idmap write PID [--uid-map FILE] [--gid-map FILE] [--setgroups auto|deny|leave]
                                      write maps to a process in a new user namespace
  bench idmap|rseq|semget [--json]    benchmarks: ipcns beside its baselines, in one run

IPC namespace commands (each takes --ns NAME; default $IPCNS, else \"default\"):
  ipcs [-m|-q|-s|-a] [-t|-p|-c|-l|-u] [--human|-b] [-i ID]
                                      util-linux's ipcs on the namespace
  ipcmk [-M SIZE] [-Q] [-S NSEMS] [-p PERMS]
                                      util-linux's ipcmk
  ipcrm [-m|-q|-s ID] [-M|-Q|-S KEY] [-a[=shm|msg|sem]] [-v]; ipcrm shm|msg|sem ID...
                                      util-linux's ipcrm
  sysctl [-n] [NAME[=VALUE]]...       the namespace's kernel.* limits and *_next_id
  proc sem|msg|shm                    the namespace's /proc/sysvipc text
  ns create NAME [--extend] [--mode OCTAL]
  ns list | ns info [NAME] | ns remove NAME
                                      namespaces (arena files in $IPCNS_DIR or /dev/shm/ipcns-UID)
";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // Called as ipcs, ipcmk or ipcrm (a link to this binary): that tool.
    let argv0 = std::env::args().next().unwrap_or_default();
    let base = argv0.rsplit('/').next().unwrap_or_default();
    if ipctools::Which::from_name(base).is_some() {
        args.insert(0, base.to_string());
    }
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let _ = writeln!(io::stderr(), "ipcns: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<ExitCode> {
    // `ipcns --ns NAME COMMAND ...` is `ipcns COMMAND --ns NAME ...`.
    let global = match args.first().map(String::as_str) {
        Some("--ns") if args.len() >= 3 => Some((&args[..2], &args[2..])),
        Some(a) if a.starts_with("--ns=") && args.len() >= 2 => Some((&args[..1], &args[1..])),
        _ => None,
    };
    if let Some((opt, rest)) = global {
        let mut moved = vec![rest[0].clone()];
        moved.extend_from_slice(opt);
        moved.extend_from_slice(&rest[1..]);
        return run(&moved);
    }
    match args.first().map(String::as_str) {
        Some("idmap") => idmap::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some(cmd @ ("ipcs" | "ipcmk" | "ipcrm" | "sysctl" | "proc" | "ns")) => {
            let (name, rest) = ns::take_ns_option(&args[1..])?;
            if cmd == "ns" {
                return ns::run(&name, &rest);
            }
            let ns = ns::attach(&name)?;
            match ipctools::Which::from_name(cmd) {
                Some(which) => ipctools::run(which, &ns, &rest),
                None if cmd == "sysctl" => sysctl::run(&ns, &rest),
                None => procfs::run(&ns, &rest),
            }
        }
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => anyhow::bail!("unknown command {other:?}\n{USAGE}"),
        None => anyhow::bail!("no command given\n{USAGE}"),
    }
}

/// Writes `text` to standard output (a broken pipe surfaces as an error
/// that `main` treats as success).
fn print_out(text: &str) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
