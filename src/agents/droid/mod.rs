//! Factory Droid (npm `droid`, a native binary per platform in `@factory/cli-<os>-<arch>`): the
//! project MCP server in `.factory/mcp.json` and Claude-style hooks in `.factory/settings.json`
//! (Stop gate, SessionStart index, UserPromptSubmit recall). Droid parses both files as JSON with
//! comments and without trailing commas, and drops a file it cannot parse without a word.
//! Rules: Droid reads every one of `CLAUDE.md` and `AGENTS.md` (and their case variants) from
//! the working directory up to the git root, one copy per real file.
//! Facts (Droid 0.215.0's bundled code and `droid exec` runs): xtask/src/e2e/droid_facts.md.

pub mod doctor;
pub mod gate;
pub mod live;

use std::path::Path;

use serde_json::{Value, json};

use crate::config::AgentId;
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Droid in the list of agents (`agents::of`).
pub struct Droid;

pub const MCP_FILE: &str = ".factory/mcp.json";
pub const SETTINGS_FILE: &str = ".factory/settings.json";
/// How Droid 0.215.0 parses its settings and MCP files (jsonc-parser, default options).
pub const DIALECT: Dialect = Dialect::Comments;

pub const HOOK_COMMAND: &str = "memloop hook stop --agent droid";
/// Seconds (Droid's `timeout`, default 60); the gate reads only what was appended since its last
/// check, and waits at most 2 s for the transcript.
pub const HOOK_TIMEOUT: u64 = 15;
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent droid";
/// Droid's SessionStart sources, as Claude Code's.
pub const SESSION_START_MATCHER: &str = "startup|resume|clear|compact";
pub const PROMPT_COMMAND: &str = "memloop hook prompt --agent droid";
/// Seconds; reading the index costs milliseconds, the rest is margin for a loaded machine.
pub const SESSION_HOOK_TIMEOUT: u64 = 10;

impl super::agent::Agent for Droid {
    fn id(&self) -> AgentId {
        AgentId::Droid
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".factory").is_dir()
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

    fn mcp_files(&self) -> &'static [McpFile] {
        &[McpFile {
            agent: AgentId::Droid,
            name: MCP_FILE,
            syntax: Syntax::Dollar,
            dialect: DIALECT,
            servers: "mcpServers",
            maps: &["headers", "env"],
        }]
    }

    fn live(&self, d: &mut Doctor, program: &Path, _found: &crate::doctor::Agent) {
        live::check(d, program);
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
        &[]
    }
}

/// Its prompt hook takes the prompt from the input's `prompt` and reads
/// `hookSpecificOutput.additionalContext` (Droid 0.215.0 also takes plain stdout).
impl crate::hook::PromptDialect for Droid {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::HookJson("UserPromptSubmit")
    }
}

pub fn targets(ctx: &Context) -> Vec<Target> {
    let (mcp_path, mcp_display) = ctx.project_target_display(MCP_FILE);
    let (settings_path, settings_display) = ctx.project_target_display(SETTINGS_FILE);
    vec![
        Target {
            path: mcp_path,
            display: mcp_display,
            scope: Scope::Project,
            agents: vec![AgentId::Droid],
            desired: Desired::Fragments {
                format: Format::Json(DIALECT),
                fragments: vec![Fragment::JsonMember {
                    path: vec!["mcpServers".into(), ctx.server.name.clone()],
                    // Droid 0.215.0's server schema is Claude Code's: `type` stdio|http|sse.
                    value: super::claude::server_entry(&ctx.server.transport),
                }],
            },
            note: None,
        },
        Target {
            path: settings_path,
            display: settings_display,
            scope: Scope::Project,
            agents: vec![AgentId::Droid],
            desired: Desired::Fragments {
                format: Format::Json(DIALECT),
                fragments: settings_fragments(&ctx.config.memory),
            },
            note: None,
        },
    ]
}

/// The hook groups of `.factory/settings.json`: the Stop gate, the prompt hook unless
/// `[memory] recall = false` retires it, the session start unless `[memory] session_start =
/// false` does.
pub fn settings_fragments(memory: &crate::config::MemoryConfig) -> Vec<Fragment> {
    let hook = |event: &str, value: Value, command: &str| Fragment::JsonHookGroup {
        path: vec!["hooks".into(), event.into()],
        value,
        command: command.into(),
    };
    vec![
        hook("Stop", hook_group(), HOOK_COMMAND),
        hook("UserPromptSubmit", prompt_group(), PROMPT_COMMAND).wanted_if(memory.recall),
        hook("SessionStart", session_start_group(), SESSION_START_COMMAND)
            .wanted_if(memory.session_start),
    ]
}

pub fn hook_group() -> Value {
    json!({"hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT}]})
}

/// UserPromptSubmit takes no matcher.
pub fn prompt_group() -> Value {
    json!({"hooks": [{"type": "command", "command": PROMPT_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

pub fn session_start_group() -> Value {
    json!({"matcher": SESSION_START_MATCHER, "hooks": [{"type": "command", "command": SESSION_START_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}
