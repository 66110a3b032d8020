//! One adapter per agent: where its files are and which fragments memloop owns in them.
//! A new agent is a new file here.

pub mod claude;
pub mod detect;
pub mod instructions;
pub mod kimi;
pub mod opencode;
pub mod version;

use crate::config::AgentId;
use crate::repo::Context;
use crate::target::Target;

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
