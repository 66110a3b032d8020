//! The installer's commands: init, sync, diff and uninstall are views of one plan.

pub mod diff;
pub mod doctor;
pub mod init;
pub mod sync;
pub mod uninstall;
pub mod upgrade;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use crate::agents;
use crate::engine::{self, Change, Mode, PlanError};
use crate::repo::Repo;
use crate::report;
use crate::target::Wanted;

/// Exit codes of the contract: 0 ok, 1 drift or problems, 2 usage error or refused input.
pub const EXIT_DRIFT: u8 = 1;
pub const EXIT_REFUSED: u8 = 2;

impl Repo {
    /// The changes `mode` would make, or the files it refuses to touch.
    pub fn plan(&self, mode: Mode, user_scope: bool) -> Result<(Vec<Change>, Wanted), PlanError> {
        let ctx = self.context(user_scope)?;
        let wanted = agents::wanted(&ctx)?;
        let originals = |path: &Path| self.state.original(path);
        let changes = engine::plan(&self.root, &wanted.targets, mode, &originals)?;
        Ok((changes, wanted))
    }
}

/// Turns a planning failure into the contract's exit code, printing every refusal.
pub fn refused(err: PlanError) -> anyhow::Result<ExitCode> {
    match err {
        PlanError::Refused(refusals) => {
            for refusal in &refusals {
                eprintln!("memloop: refused {refusal}");
            }
            eprintln!("memloop: nothing was written");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
        PlanError::Other(err) => Err(err),
    }
}

/// Whether a person can answer questions: both stdin and stderr are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Colours only on a terminal, and never when `NO_COLOR` is set.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
