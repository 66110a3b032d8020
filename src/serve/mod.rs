//! Placeholder until the serve work lands; replaced by its owner.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
