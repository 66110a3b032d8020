//! Claude Code: the project MCP server in `.mcp.json` and the Stop hook in
//! `.claude/settings.json` (both strict JSON). Facts: research/claude-code.md.

pub mod doctor;
pub mod gate;
pub mod live;
pub mod trust;
pub mod upgrade;

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::config::{AgentId, Transport};
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Claude in the list of agents (`agents::of`).
pub struct Claude;

impl super::agent::Agent for Claude {
    fn id(&self) -> AgentId {
        AgentId::Claude
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".claude").exists() || root.join(".mcp.json").exists()
    }

    fn targets(&self, ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        targets(ctx)
    }

    fn live(&self, d: &mut Doctor, program: &Path, _found: &crate::doctor::Agent) {
        live::check(d, program);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        &[McpFile {
            agent: AgentId::Claude,
            name: ".mcp.json",
            syntax: Syntax::Dollar,
            dialect: Dialect::Strict,
            servers: "mcpServers",
            maps: &["headers", "env"],
        }]
    }

    fn check_rules(&self, d: &mut Doctor) {
        crate::doctor::instructions::claude_md(d);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        upgrade::MIGRATIONS
    }

    fn trust(&self, ctx: &Context) -> anyhow::Result<Vec<Target>> {
        Ok(trust::targets(ctx))
    }
}

pub const HOOK_COMMAND: &str = "memloop hook stop --agent claude";
/// Seconds; the gate reads only what was appended since its last check.
pub const HOOK_TIMEOUT: u64 = 15;

pub fn targets(ctx: &Context) -> anyhow::Result<Vec<Target>> {
    let server = &ctx.server;
    let (mcp_path, mcp_display) = ctx.project_target_display(".mcp.json");
    let (settings_path, settings_display) = ctx.project_target_display(".claude/settings.json");
    Ok(vec![
        Target {
            path: mcp_path,
            display: mcp_display,
            scope: Scope::Project,
            agents: vec![AgentId::Claude],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![Fragment::JsonMember {
                    path: vec!["mcpServers".into(), server.name.clone()],
                    value: server_entry(&server.transport),
                }],
            },
            note: None,
        },
        Target {
            path: settings_path,
            display: settings_display,
            scope: Scope::Project,
            agents: vec![AgentId::Claude],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "Stop".into()],
                    value: hook_group(),
                    command: HOOK_COMMAND.into(),
                }],
            },
            note: None,
        },
    ])
}

/// `mcpServers.<name>` with `type` always set: an entry without it is taken for stdio.
pub fn server_entry(transport: &Transport) -> Value {
    match transport {
        Transport::Http { url, headers } => {
            let mut entry = Map::new();
            entry.insert("type".into(), json!("http"));
            entry.insert("url".into(), json!(url));
            if !headers.is_empty() {
                entry.insert("headers".into(), json!(headers));
            }
            Value::Object(entry)
        }
        Transport::Stdio { command, args, env } => {
            let mut entry = Map::new();
            entry.insert("type".into(), json!("stdio"));
            entry.insert("command".into(), json!(command));
            entry.insert("args".into(), json!(args));
            if !env.is_empty() {
                entry.insert("env".into(), json!(env));
            }
            Value::Object(entry)
        }
    }
}

pub fn hook_group() -> Value {
    json!({"hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT}]})
}
