//! `ipcns proc sem|msg|shm`: the namespace's /proc/sysvipc text.

use anyhow::bail;
use ipcns::Mech;
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns proc sem|msg|shm
The namespace's /proc/sysvipc/sem, msg or shm text, column for column as Linux prints it.";

/// Runs `proc ARGS` on namespace `ns_name`, attached once the argument is
/// read.
pub fn run(ns_name: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let m = match args {
        [one] => match one.as_str() {
            "sem" => Mech::Sem,
            "msg" => Mech::Msg,
            "shm" => Mech::Shm,
            other => bail!("proc: {other:?} is not sem, msg or shm"),
        },
        _ => bail!("{USAGE}"),
    };
    let ns = crate::ns::existing(ns_name)?;
    let text = ns.proc_text(&*ns.cred()?, m)?;
    crate::print_out(&text)
}
