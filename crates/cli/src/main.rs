//! The `ipcns` command: argument parsing and error reporting only; the work is
//! done by the libraries and the modules below.

mod bench;
mod idmap;

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
  bench idmap|rseq [--json]           benchmarks: ipcns beside its baselines, in one run
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    match args.first().map(String::as_str) {
        Some("idmap") => idmap::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => anyhow::bail!("unknown command {other:?}\n{USAGE}"),
        None => anyhow::bail!("no command given\n{USAGE}"),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
