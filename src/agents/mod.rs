//! The agents memloop knows, one folder each (`claude/`, `opencode/`, `kimi/`, `codex/`, `gemini/`, `qwen/`,
//! `copilot/`, `kilo/`, `droid/`, `pi/`): where its files are and what memloop owns in them, its doctor checks, its gate reader
//! and its migrations, behind the `Agent` trait (`agent.rs`). Everything else reaches an agent through `of`, so a
//! new agent is a new folder, a variant of `AgentId` and one line in `of`.
//!
//! What the agents share sits below them: `crate::instructions` (the rules files `CLAUDE.md` and
//! `AGENTS.md`), `crate::detect` (which programs are installed) and `crate::version` (their
//! version lines and the ranges migrations apply to).

mod agent;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod droid;
pub mod gemini;
pub mod kilo;
pub mod kimi;
pub mod opencode;
pub mod pi;
pub mod qwen;

#[cfg(test)]
mod tests;

pub use agent::Agent;

use crate::config::AgentId;
use crate::repo::Context;
use crate::target::{Target, Wanted};
use crate::upgrade::{self, Migration};

/// The two tools of memloop's own server (the embedded one) a session may run without asking,
/// in each agent that can be told so for single tools (`[memory] approve_tools`): a read of the
/// notes and a write under `.memloop/memory/`. Never more, never another server's tools.
pub const APPROVED_TOOLS: [&str; 2] = ["context_query", "memory_store"];

/// One owned entry per tool of [`APPROVED_TOOLS`] in the JSON array at `path`, each the tool's
/// name as the agent spells an MCP tool (`name(server, tool)`), never a pattern; retired (taken
/// back by sync) with `[memory] approve_tools = false` or a server that is not memloop's own.
pub fn tool_approvals(
    ctx: &Context,
    path: [&str; 2],
    name: impl Fn(&str, &str) -> String,
) -> Vec<crate::target::Fragment> {
    let wanted = ctx.config.memory.approve_tools && ctx.server.is_embedded();
    APPROVED_TOOLS
        .iter()
        .map(|tool| {
            crate::target::Fragment::JsonArrayItem {
                path: path.iter().map(|key| (*key).to_owned()).collect(),
                value: serde_json::json!(name(&ctx.server.name, tool)),
                memloops: true,
            }
            .wanted_if(wanted)
        })
        .collect()
}

/// The agent behind `id`.
pub fn of(id: AgentId) -> &'static dyn Agent {
    match id {
        AgentId::Claude => &claude::Claude,
        AgentId::Opencode => &opencode::Opencode,
        AgentId::Kimi => &kimi::Kimi,
        AgentId::Codex => &codex::Codex,
        AgentId::Gemini => &gemini::Gemini,
        AgentId::Qwen => &qwen::Qwen,
        AgentId::Copilot => &copilot::Copilot,
        AgentId::Kilo => &kilo::Kilo,
        AgentId::Droid => &droid::Droid,
        AgentId::Pi => &pi::Pi,
    }
}

/// Whether agent `id` can carry the server `transport` into its files (`config::ServerCheck`).
pub fn check_server(id: AgentId, transport: &crate::config::Transport) -> anyhow::Result<()> {
    of(id).check_server(transport)
}

/// The agents `memloop.toml` enables, in `AgentId::ALL` order.
pub fn enabled<'a>(ctx: &'a Context) -> impl Iterator<Item = &'static dyn Agent> + 'a {
    AgentId::ALL
        .into_iter()
        .filter(|id| ctx.enabled(*id))
        .map(of)
}

/// Every migration, in the order they run: memloop's own, then each agent's.
pub fn migrations() -> Vec<&'static Migration> {
    upgrade::MEMLOOP
        .iter()
        .chain(AgentId::ALL.into_iter().flat_map(|id| of(id).migrations()))
        .collect()
}

/// Every file memloop owns something in, for the enabled agents.
pub fn wanted(ctx: &Context) -> anyhow::Result<Wanted> {
    let mut targets = crate::instructions::plan(ctx.root, ctx.config.layout, &ctx.config.agents)?;
    let mut skipped = Vec::new();
    for agent in enabled(ctx) {
        for target in agent.targets(ctx, &mut skipped)? {
            merge(&mut targets, target)?;
        }
    }
    if ctx.trusted {
        targets.extend(trust(ctx)?);
    }
    Ok(Wanted {
        targets,
        skipped,
        removed: Vec::new(),
    })
}

/// The per-machine trust entries of the enabled agents (`memloop trust`), in `AgentId::ALL` order.
pub fn trust(ctx: &Context) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for agent in enabled(ctx) {
        targets.extend(agent.trust(ctx)?);
    }
    Ok(targets)
}

/// Adds `target`, or its readers to an earlier target wanting the same there (Claude Code and
/// Copilot share `.mcp.json`'s entry): one path is planned once.
fn merge(targets: &mut Vec<Target>, target: Target) -> anyhow::Result<()> {
    match targets.iter_mut().find(|t| t.path == target.path) {
        None => targets.push(target),
        Some(earlier) if earlier.desired == target.desired => {
            for agent in target.agents {
                if !earlier.agents.contains(&agent) {
                    earlier.agents.push(agent);
                }
            }
        }
        Some(earlier) => anyhow::bail!(
            "{} would hold different memloop entries for {} and {}; this is a memloop bug, please report it",
            target.display,
            earlier
                .agents
                .iter()
                .map(|a| a.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            target
                .agents
                .iter()
                .map(|a| a.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    Ok(())
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
        let found = of(*agent).targets(ctx, &mut Vec::new());
        targets.extend(found.unwrap_or_default());
        if ctx.trusted {
            targets.extend(of(*agent).trust(ctx).unwrap_or_default());
        }
    }
    // Claude Code reads CLAUDE.md; every other agent reads AGENTS.md.
    if ctx.config.agents.iter().all(|a| *a == AgentId::Claude) {
        // An AGENTS.md memloop could not plan for (a link leaving the repository, say) is
        // not memloop's to take back.
        let every = crate::instructions::plan(ctx.root, ctx.config.layout, &AgentId::ALL)
            .unwrap_or_default();
        targets.extend(
            every
                .into_iter()
                .filter(|target| target.display == "AGENTS.md"),
        );
    }
    targets.retain(|target| !wanted.iter().any(|w| w.path == target.path));
    Ok(targets)
}

#[cfg(test)]
mod table {
    use super::*;

    #[test]
    fn each_agent_answers_to_its_own_id() {
        for id in AgentId::ALL {
            assert_eq!(of(id).id(), id);
        }
    }

    #[test]
    fn migration_ids_are_unique_and_named_after_their_agent() {
        let all = migrations();
        let mut ids: Vec<&str> = all.iter().map(|m| m.id).collect();
        for m in &all {
            let prefix = m.agent.map_or("memloop", AgentId::as_str);
            assert!(
                m.id.starts_with(prefix),
                "{} should start with {prefix}",
                m.id
            );
        }
        for id in AgentId::ALL {
            assert!(
                of(id).migrations().iter().all(|m| m.agent == Some(id)),
                "{id}'s migrations are all its own"
            );
        }
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), before, "duplicate migration ids");
    }
}
