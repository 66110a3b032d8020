//! One adapter per agent: where its files are and which fragments memloop owns in them.
//! A new agent is a new file here.

pub mod claude;
pub mod detect;
pub mod instructions;
pub mod kimi;
pub mod opencode;
pub mod version;

use std::path::{Path, PathBuf};

use crate::config::{AgentId, Config, Server};
use crate::target::Target;

/// Everything an adapter needs to decide its targets.
pub struct Context<'a> {
    pub root: &'a Path,
    pub config: &'a Config,
    pub server: Server,
    pub home: PathBuf,
    /// Whether files outside the repository (the user's agent config) may be written.
    pub user_scope: bool,
}

impl Context<'_> {
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

/// What the adapters want: the targets, in a stable order, and what they left out (with why).
pub struct Wanted {
    pub targets: Vec<Target>,
    pub skipped: Vec<String>,
}

/// Every file memloop owns something in, for the enabled agents.
pub fn wanted(ctx: &Context) -> anyhow::Result<Wanted> {
    let mut targets = instructions::plan(ctx.root, ctx.config.layout, &ctx.config.agents)?;
    let mut skipped = Vec::new();
    for agent in AgentId::ALL {
        if !ctx.enabled(agent) {
            continue;
        }
        targets.extend(match agent {
            AgentId::Claude => claude::targets(ctx)?,
            AgentId::Opencode => opencode::targets(ctx)?,
            AgentId::Kimi => kimi::targets(ctx, detect::kimi_flavor(), &mut skipped)?,
        });
    }
    Ok(Wanted { targets, skipped })
}
