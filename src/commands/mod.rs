//! The installer's commands: init, sync, diff and uninstall are views of one plan.

pub mod diff;
pub mod doctor;
pub mod init;
pub mod memory;
pub mod report;
pub mod sync;
pub mod uninstall;
pub mod upgrade;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use crate::agents::{self, Context, Wanted};
use crate::config::{self, Config};
use crate::engine::state::InstallState;
use crate::engine::{self, Change, Mode, PlanError};

/// Exit codes of the contract: 0 ok, 1 drift or problems, 2 usage error or refused input.
pub const EXIT_DRIFT: u8 = 1;
pub const EXIT_REFUSED: u8 = 2;

/// A repository with its desired state and what this machine remembers about it.
pub struct Repo {
    pub root: PathBuf,
    pub config: Config,
    pub state: InstallState,
}

impl Repo {
    /// Finds the repository from the current folder and reads `memloop.toml`.
    pub fn open() -> anyhow::Result<Repo> {
        let cwd = std::env::current_dir().context("cannot read the current folder")?;
        let root = config::find_root(&cwd).with_context(|| {
            format!("{} is not inside a git repository and no memloop.toml is above it; run memloop in your repository", cwd.display())
        })?;
        let Some(config) = Config::load(&root)? else {
            bail!(
                "{} has no memloop.toml; run `memloop init` first",
                root.display()
            );
        };
        let state = InstallState::load(&root)?;
        Ok(Repo {
            root,
            config,
            state,
        })
    }

    pub fn context(&self, user_scope: bool) -> anyhow::Result<Context<'_>> {
        Ok(Context {
            root: &self.root,
            config: &self.config,
            server: self.config.server()?,
            home: crate::files::home_dir()?,
            user_scope: user_scope || self.state.user_scope,
        })
    }

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
