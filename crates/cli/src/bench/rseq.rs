//! `ipcns bench rseq`: arrives with issue 3.

pub fn run(_json: bool) -> anyhow::Result<()> {
    anyhow::bail!("bench rseq is not built yet (issue 3)")
}
