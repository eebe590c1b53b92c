//! `ipcns bench idmap` (being written).
pub const KERNEL_CHILD: &str = "__idmap-kernel-child";
pub fn run(_json: bool) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
pub fn kernel_child(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
