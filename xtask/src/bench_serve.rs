//! Placeholder until its owner lands this task.

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
