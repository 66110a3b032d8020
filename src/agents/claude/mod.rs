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

    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &crate::hook::Plain(crate::hook::Form::ClaudeJson)
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
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
                fragments: settings_fragments(&ctx.config.memory)
                    .into_iter()
                    .chain(approvals(ctx))
                    .collect(),
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

/// `memloop hook session-start`: its SessionStart JSON puts the index in the model's context.
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent claude";
/// Every way a session begins with an empty or a summarised context.
pub const SESSION_START_MATCHER: &str = "startup|resume|clear|compact";
/// `memloop hook pre-compact`: Claude Code gives its output to the summary as instructions.
pub const PRE_COMPACT_COMMAND: &str = "memloop hook pre-compact --agent claude";
/// Seconds; reading the index costs milliseconds, the rest is margin for a loaded machine.
pub const SESSION_HOOK_TIMEOUT: u64 = 10;

/// `memloop hook prompt`: the notes matching each prompt, as `additionalContext` of the
/// UserPromptSubmit hook (the earliest output of a prompt that reaches the model).
pub const PROMPT_COMMAND: &str = "memloop hook prompt --agent claude";

/// The hook groups of `.claude/settings.json`: the Stop gate, the session-start and pre-compact
/// pieces unless `[memory] session_start = false` retires them, and the prompt hook unless
/// `[memory] recall = false` does.
pub fn settings_fragments(memory: &crate::config::MemoryConfig) -> Vec<Fragment> {
    let session_start = memory.session_start;
    let hook = |event: &str, value: Value, command: &str| Fragment::JsonHookGroup {
        path: vec!["hooks".into(), event.into()],
        value,
        command: command.into(),
    };
    vec![
        hook("Stop", hook_group(), HOOK_COMMAND),
        // Before the session-start pieces, so switching those off and on again gives the same bytes.
        hook("UserPromptSubmit", prompt_group(), PROMPT_COMMAND).wanted_if(memory.recall),
        hook("SessionStart", session_start_group(), SESSION_START_COMMAND).wanted_if(session_start),
        hook("PreCompact", pre_compact_group(), PRE_COMPACT_COMMAND).wanted_if(session_start),
    ]
}

/// `permissions.allow` entries (`mcp__<server>__<tool>`, Claude Code's name of an MCP tool) for
/// `agents::APPROVED_TOOLS`, never a pattern (`mcp__memory__.*` would also approve
/// `memory_forget`); retired (taken back by sync) with `[memory] approve_tools = false` or a
/// server that is not memloop's own.
pub fn approvals(ctx: &Context) -> Vec<Fragment> {
    crate::agents::tool_approvals(ctx, ["permissions", "allow"], |server, tool| {
        format!("mcp__{server}__{tool}")
    })
}

/// UserPromptSubmit takes no matcher.
pub fn prompt_group() -> Value {
    json!({"hooks": [{"type": "command", "command": PROMPT_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

pub fn session_start_group() -> Value {
    json!({"matcher": SESSION_START_MATCHER, "hooks": [{"type": "command", "command": SESSION_START_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

pub fn pre_compact_group() -> Value {
    json!({"hooks": [{"type": "command", "command": PRE_COMPACT_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

pub fn hook_group() -> Value {
    json!({"hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT}]})
}

/// Its prompt hook takes the prompt from the input's `prompt`.
impl crate::hook::PromptDialect for Claude {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::HookJson("UserPromptSubmit")
    }
}
