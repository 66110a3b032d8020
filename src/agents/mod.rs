//! One adapter per agent: where its files are and which fragments memloop owns in them.
//! A new agent is a new file here.

pub mod claude;
pub mod detect;
pub mod instructions;
pub mod kimi;
pub mod opencode;

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
    /// Where installing takes memloop's part back (agents memloop.toml no longer names).
    pub removed: Vec<PathBuf>,
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
    Ok(Wanted {
        targets,
        skipped,
        removed: Vec::new(),
    })
}

/// The files of agents memloop.toml no longer names, whose fragments sync takes back: each
/// removed agent's own files, and the shared `AGENTS.md` when no named agent reads it. Paths
/// the named agents want are left to them. An agent whose targets cannot be made for this
/// server (Kimi and a header it cannot carry) cannot hold memloop's entry: it is passed over.
pub fn unwanted(ctx: &Context, wanted: &[Target]) -> anyhow::Result<Vec<Target>> {
    let removed: Vec<AgentId> = AgentId::ALL
        .into_iter()
        .filter(|agent| !ctx.enabled(*agent))
        .collect();
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let mut targets = Vec::new();
    for agent in &removed {
        let found = match agent {
            AgentId::Claude => claude::targets(ctx),
            AgentId::Opencode => opencode::targets(ctx),
            AgentId::Kimi => kimi::targets(ctx, detect::kimi_flavor(), &mut Vec::new()),
        };
        targets.extend(found.unwrap_or_default());
    }
    let reads_agents_md = |agents: &[AgentId]| {
        agents
            .iter()
            .any(|a| matches!(a, AgentId::Opencode | AgentId::Kimi))
    };
    if !reads_agents_md(&ctx.config.agents) {
        // An AGENTS.md memloop could not plan for (a link leaving the repository, say) is
        // not memloop's to take back.
        let every =
            instructions::plan(ctx.root, ctx.config.layout, &AgentId::ALL).unwrap_or_default();
        targets.extend(
            every
                .into_iter()
                .filter(|target| target.display == "AGENTS.md"),
        );
    }
    targets.retain(|target| !wanted.iter().any(|w| w.path == target.path));
    Ok(targets)
}
