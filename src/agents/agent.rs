//! What every agent's folder implements: everything memloop does that differs from one agent
//! to the next.

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::wiring::McpFile;
use crate::doctor::{self, Doctor};
use crate::gate;
use crate::repo::Context;
use crate::target::Target;
use crate::upgrade::Migration;

/// Everything memloop does that differs from one agent to the next.
pub trait Agent: Sync {
    fn id(&self) -> AgentId;

    /// Whether the repository already holds this agent's files (`memloop init` preselects it).
    fn configured_in(&self, root: &Path) -> bool;

    /// What `memloop init` asks before writing this agent's files outside the repository, for an
    /// agent that reads some of memloop's entries only from the user's config.
    fn user_scope_question(&self) -> Option<&'static str> {
        None
    }

    /// The files this agent reads that memloop owns something in, in a stable order; what is
    /// left out (and why) goes to `skipped`.
    fn targets(&self, ctx: &Context, skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>>;

    /// The doctor's check of the rules file this agent reads (`doctor::instructions`).
    fn check_rules(&self, d: &mut Doctor);

    /// The doctor's checks of the whole files this agent reads.
    fn check(&self, d: &mut Doctor);

    /// The doctor's checks of how this agent runs the gate, beyond its files (a second copy of the
    /// gate elsewhere, say).
    fn check_wiring(&self, _d: &mut Doctor) {}

    /// The committed MCP configs it reads, for the doctor's secrets check.
    fn mcp_files(&self) -> &'static [McpFile];

    /// `doctor --live`: ask the installed program what it loads.
    fn live(&self, d: &mut Doctor, program: &Path, found: &doctor::Agent);

    /// How the Stop gate reads this agent's tool calls.
    fn gate(&self) -> &dyn gate::Reader;

    /// Refuses a `[server]` value this agent cannot carry into its files, before anything is
    /// planned (`config::ServerCheck`).
    fn check_server(&self, _transport: &crate::config::Transport) -> anyhow::Result<()> {
        Ok(())
    }

    /// How this agent takes the session-start text from `memloop hook session-start`.
    fn session_start(&self) -> &dyn crate::hook::StartDialect;

    /// How this agent's prompt hook (`memloop hook prompt`) reads the prompt and hands the
    /// matching notes to the model.
    fn prompt(&self) -> &dyn crate::hook::PromptDialect;

    /// What `memloop upgrade` migrates in this agent's files, in the order it runs.
    fn migrations(&self) -> &'static [Migration];

    /// The per-machine approvals this agent needs before it loads the repository's entries
    /// (project trust, folder trust, server approval): files outside the repository
    /// (`Scope::User`), written only by `memloop trust` (or `init --trust`) and kept current by
    /// sync once given. Each agent builds them in its own `trust.rs`; none needed: empty.
    fn trust(&self, _ctx: &Context) -> anyhow::Result<Vec<Target>> {
        Ok(Vec::new())
    }
}
