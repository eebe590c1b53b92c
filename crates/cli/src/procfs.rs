//! `ipcns proc sem|msg|shm`: the namespace's /proc/sysvipc text.

use anyhow::bail;
use ipcns::Mech;
use ipcns::Namespace;
use std::process::ExitCode;

pub fn run(ns: &Namespace, args: &[String]) -> anyhow::Result<ExitCode> {
    let m = match args {
        [one] => match one.as_str() {
            "sem" => Mech::Sem,
            "msg" => Mech::Msg,
            "shm" => Mech::Shm,
            other => bail!("proc: {other:?} is not sem, msg or shm"),
        },
        _ => bail!("usage: ipcns proc sem|msg|shm"),
    };
    let text = ns.proc_text(&*ns.cred()?, m)?;
    crate::print_out(&text)
}
