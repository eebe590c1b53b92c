//! `ipcns idmap ...` (being written).
use std::process::ExitCode;
pub fn run(_args: &[String]) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet")
}
