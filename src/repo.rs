//! One repository as every command sees it: `memloop.toml`, what this machine remembers about
//! it, and the view the agents' adapters decide their targets from.

use std::path::{Path, PathBuf};

use std::ops::Not as _;

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

/// Whether git's `HEAD` in `root` holds `rel` (a file or a link). False where git cannot say:
/// no git on PATH, not a repository, no commit yet.
pub fn tracked_in_head(root: &Path, rel: &Path) -> bool {
    let Some(rel) = rel.to_str() else {
        return false;
    };
    std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["cat-file", "-e"])
        .arg(format!("HEAD:{rel}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The repository as git held it right before `memloop.toml` was first committed: what the
/// files were before memloop came, where this machine has no record of the install.
pub struct BeforeMemloop {
    root: PathBuf,
    /// The commit before the one that added memloop.toml; `None` when that was the first.
    parent: Option<String>,
}

impl BeforeMemloop {
    /// `None` where git cannot say (no git, not a repository, memloop.toml never committed).
    pub fn find(root: &Path) -> Option<BeforeMemloop> {
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(root)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|out| out.status.success())
                .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        };
        let added = git(&[
            "log",
            "--diff-filter=A",
            "--format=%H",
            "--",
            crate::config::FILE_NAME,
        ])?;
        let first = added.lines().last()?.trim().to_owned();
        let parent = git(&["rev-parse", "--verify", "--quiet", &format!("{first}^")])
            .map(|out| out.trim().to_owned());
        Some(BeforeMemloop {
            root: root.to_path_buf(),
            parent,
        })
    }

    /// What `rel` held before memloop: its text, or missing. `None` when git cannot say (a
    /// file that is not UTF-8, a symlink).
    pub fn content(&self, rel: &Path) -> Option<crate::engine::Content> {
        use crate::engine::Content;
        let Some(parent) = &self.parent else {
            return Some(Content::Missing);
        };
        let spec = format!("{parent}:{}", rel.to_str()?);
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(["cat-file", "-p", &spec])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return tracked_in(&self.root, parent, rel)
                .not()
                .then_some(Content::Missing);
        }
        let mode = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(["ls-tree", parent, "--"])
            .arg(rel)
            .output()
            .ok()?;
        if String::from_utf8_lossy(&mode.stdout).starts_with("120000") {
            return None;
        }
        String::from_utf8(out.stdout)
            .ok()
            .map(|text| Content::File { text })
    }
}

/// Whether commit `rev` holds `rel`.
fn tracked_in(root: &Path, rev: &str, rel: &Path) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-tree", "--name-only", rev, "--"])
        .arg(rel)
        .output()
        .is_ok_and(|out| out.status.success() && !out.stdout.is_empty())
}
