//! `memloop diff`: what sync would change, as unified diffs; exit 1 when there is drift.

use std::process::ExitCode;

use super::{EXIT_DRIFT, Repo, refused, report};
use crate::engine::Mode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Output format: unified diffs, or JSON with one diff per file.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Include the user-scope files (Kimi's hooks, Codex's trust entries, Qwen's server approval) as if consent were given.
    #[arg(long)]
    pub user_scope: bool,
}

pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let repo = Repo::open(&crate::agents::check_server)?;
    let (changes, _) = match repo.plan(Mode::Install, args.user_scope) {
        Ok(planned) => planned,
        Err(err) => return refused(err),
    };
    match args.format {
        DiffFormat::Text => print!("{}", report::diffs(&changes, super::use_color())),
        DiffFormat::Json => print!("{}", report::json(&changes)),
    }
    let drift = changes.iter().any(|change| !change.is_noop());
    Ok(if drift {
        ExitCode::from(EXIT_DRIFT)
    } else {
        ExitCode::SUCCESS
    })
}
