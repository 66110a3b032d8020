//! Placeholder until the gate work lands; replaced by its owner.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct HookArgs {}

pub fn run(_args: HookArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
