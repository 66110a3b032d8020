//! One repository as every command sees it: `memloop.toml`, what this machine remembers about
//! it, and the view the agents' adapters decide their targets from.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::config::{self, AgentId, Config, Server};
use crate::engine::apply::Lock;
use crate::engine::state::InstallState;

/// A repository with its desired state and what this machine remembers about it.
pub struct Repo {
    pub root: PathBuf,
    pub config: Config,
    pub state: InstallState,
}

impl Repo {
    /// Finds the repository from the current folder and reads `memloop.toml`, with the enabled
    /// agents' `check` of the server values they will carry.
    pub fn open(check: config::ServerCheck) -> anyhow::Result<Repo> {
        let cwd = std::env::current_dir().context("cannot read the current folder")?;
        let root = config::find_root(&cwd).with_context(|| {
            format!("{} is not inside a git repository and no memloop.toml is above it; run memloop in your repository", cwd.display())
        })?;
        let Some(config) = Config::load_checked(&root, check)? else {
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

    /// Takes the repository's lock and reads the install state again under it: a command that
    /// waited for another memloop works from what that one left, not from what was there before.
    pub fn lock(&mut self) -> anyhow::Result<Lock> {
        let lock = Lock::acquire(&self.root)?;
        self.state = InstallState::load(&self.root)?;
        Ok(lock)
    }

    pub fn context(&self, user_scope: bool) -> anyhow::Result<Context<'_>> {
        Ok(Context {
            root: &self.root,
            config: &self.config,
            server: self.config.server()?,
            home: crate::files::home_dir()?,
            user_scope: user_scope || self.state.user_scope,
            trusted: self.state.trusted,
        })
    }
}

/// Everything an adapter needs to decide its targets.
pub struct Context<'a> {
    pub root: &'a Path,
    pub config: &'a Config,
    pub server: Server,
    pub home: PathBuf,
    /// Whether files outside the repository (the user's agent config) may be written.
    pub user_scope: bool,
    /// Whether the user gave this repository the agents' per-machine trust (`memloop trust`):
    /// sync then keeps those entries current.
    pub trusted: bool,
}

impl Context<'_> {
    /// The same view with the agents' per-machine trust included (`memloop trust`, uninstall).
    pub fn trusting(mut self) -> Self {
        self.trusted = true;
        self
    }

    pub fn enabled(&self, agent: AgentId) -> bool {
        self.config.agents.contains(&agent)
    }

    /// `~/...` for paths under the home directory, the full path otherwise.
    pub fn display_user_path(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rel) => format!("~/{}", rel.display()),
            Err(_) => path.display().to_string(),
        }
    }

    pub fn project_target_display(&self, rel: &str) -> (PathBuf, String) {
        (self.root.join(rel), rel.to_owned())
    }
}
