//! GitHub Copilot CLI (npm `@github/copilot`, checked with 1.0.102): the MCP server in the
//! project's shared `.mcp.json` (the file Claude Code reads; Copilot takes its `type: "stdio"`
//! entry as a local server, so one entry serves both), the Stop gate as an `agentStop` hook in
//! `.github/hooks/memloop.json` (with a `sessionStart` hook giving the session the memory index, and a `preCompact` and a
//! `userPromptSubmitted` hook giving it again after a compaction (`start`), unless
//! `[memory] session_start = false`); the `trustedFolders` entry in the user's `$COPILOT_HOME/config.json`
//! (default `~/.copilot/config.json`), without which Copilot loads neither, is its per-machine
//! trust (`Agent::trust`, written only by `memloop trust`).
//! Rules: Copilot reads `AGENTS.md` and `CLAUDE.md` (one copy when both are the same text).
//! Facts: xtask/src/e2e/copilot_facts.md.

pub mod approvals;
pub mod doctor;
pub mod gate;
pub mod live;
pub mod start;
pub mod trust;
pub mod upgrade;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::AgentId;
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Copilot in the list of agents (`agents::of`).
pub struct Copilot;

pub const HOOK_COMMAND: &str = "memloop hook stop --agent copilot";
/// Seconds, as Copilot reads `timeoutSec` (its default is 30; a timeout lets the stop through).
pub const HOOK_TIMEOUT: u64 = 15;
/// `memloop hook session-start`: Copilot adds a `sessionStart` hook's `additionalContext` to
/// the session as its first user message.
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent copilot";
/// `userPromptSubmitted`: prints the index (appended to the prompt) only on the first prompt
/// after a compaction noted by [`PRE_COMPACT_COMMAND`], nothing otherwise (`start`).
pub const PROMPT_COMMAND: &str = "memloop hook session-start --agent copilot --after-compaction";
/// `preCompact`: leaves the session's compaction note for the next prompt.
pub const PRE_COMPACT_COMMAND: &str = "memloop hook pre-compact --agent copilot";
/// Seconds; reading the index costs milliseconds, the rest is margin for a loaded machine.
pub const SESSION_HOOK_TIMEOUT: u64 = 10;
/// memloop's own hooks file: Copilot loads every `.github/hooks/*.json`.
pub const HOOKS_JSON: &str = ".github/hooks/memloop.json";
/// The project MCP config Copilot shares with Claude Code.
pub const MCP_JSON: &str = ".mcp.json";
/// Copilot's other project MCP config; an entry there of the same name loses to `.mcp.json`.
pub const GITHUB_MCP_JSON: &str = ".github/mcp.json";

impl super::agent::Agent for Copilot {
    fn id(&self) -> AgentId {
        AgentId::Copilot
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(HOOKS_JSON).exists()
            || root.join(GITHUB_MCP_JSON).exists()
            || root.join(".github/copilot-instructions.md").exists()
    }

    fn targets(&self, ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        Ok(targets(ctx))
    }

    fn check_rules(&self, d: &mut Doctor) {
        doctor::rules(d);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn check_wiring(&self, d: &mut Doctor) {
        doctor::wiring(d);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        &[McpFile {
            agent: AgentId::Copilot,
            name: MCP_JSON,
            syntax: Syntax::Dollar,
            dialect: Dialect::Strict,
            servers: "mcpServers",
            maps: &["headers", "env"],
        }]
    }

    fn live(&self, d: &mut Doctor, program: &Path, found: &crate::doctor::Agent) {
        live::check(d, program, found);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &start::Dialect
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        &start::Dialect
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        upgrade::MIGRATIONS
    }

    fn trust(&self, ctx: &Context) -> anyhow::Result<Vec<Target>> {
        Ok(vec![trust::target(ctx), approvals::target(ctx)])
    }
}

/// Copilot's data root: `$COPILOT_HOME`, else `~/.copilot`.
pub fn copilot_home(home: &Path) -> PathBuf {
    std::env::var_os("COPILOT_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".copilot"), PathBuf::from)
}

pub fn targets(ctx: &Context) -> Vec<Target> {
    let (mcp_path, mcp_display) = ctx.project_target_display(MCP_JSON);
    let (hooks_path, hooks_display) = ctx.project_target_display(HOOKS_JSON);
    vec![
        // The same entry Claude Code's adapter wants: with both agents on, one target.
        Target {
            path: mcp_path,
            display: mcp_display,
            scope: Scope::Project,
            agents: vec![AgentId::Copilot],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![Fragment::JsonMember {
                    path: vec!["mcpServers".into(), ctx.server.name.clone()],
                    value: super::claude::server_entry(&ctx.server.transport),
                }],
            },
            note: None,
        },
        Target {
            path: hooks_path,
            display: hooks_display,
            scope: Scope::Project,
            agents: vec![AgentId::Copilot],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![
                    Fragment::JsonMember {
                        path: vec!["version".into()],
                        value: json!(1),
                    },
                    Fragment::JsonMember {
                        path: vec!["hooks".into(), "agentStop".into()],
                        value: json!([hook_entry()]),
                    },
                    Fragment::JsonMember {
                        path: vec!["hooks".into(), "sessionStart".into()],
                        value: json!([session_start_entry()]),
                    }
                    .wanted_if(ctx.config.memory.session_start),
                    Fragment::JsonMember {
                        path: vec!["hooks".into(), "preCompact".into()],
                        value: json!([pre_compact_entry()]),
                    }
                    .wanted_if(ctx.config.memory.session_start),
                    Fragment::JsonMember {
                        path: vec!["hooks".into(), "userPromptSubmitted".into()],
                        value: json!([prompt_entry()]),
                    }
                    // One hook, both jobs: the index after a compaction, the notes of each prompt.
                    .wanted_if(ctx.config.memory.session_start || ctx.config.memory.recall),
                ],
            },
            note: None,
        },
    ]
}

/// memloop's `sessionStart` handler: the memory index as the session's first message.
pub fn session_start_entry() -> Value {
    json!({"type": "command", "bash": SESSION_START_COMMAND, "timeoutSec": SESSION_HOOK_TIMEOUT})
}

/// memloop's `preCompact` handler: the note that brings the index back after the summary.
pub fn pre_compact_entry() -> Value {
    json!({"type": "command", "bash": PRE_COMPACT_COMMAND, "timeoutSec": SESSION_HOOK_TIMEOUT})
}

/// memloop's `userPromptSubmitted` handler: the index again on the first prompt after a
/// compaction, and the notes that match each prompt.
pub fn prompt_entry() -> Value {
    json!({"type": "command", "bash": PROMPT_COMMAND, "timeoutSec": SESSION_HOOK_TIMEOUT})
}

/// memloop's `agentStop` handler. Copilot blocks only on stdout JSON, which the gate prints.
pub fn hook_entry() -> Value {
    json!({"type": "command", "bash": HOOK_COMMAND, "timeoutSec": HOOK_TIMEOUT})
}
