//! Qwen Code (npm `@qwen-code/qwen-code`, checked with 0.24.4): the MCP server and the Stop gate
//! in the project's `.qwen/settings.json` (comments allowed, a trailing comma drops the whole
//! file), the rules from `AGENTS.md` (read by default next to `QWEN.md`), and in the user's
//! `~/.qwen/` the approval without which Qwen starts a project's MCP server only in YOLO mode
//! (`mcpApprovals.json`) and, where folder trust is on, the folder's trust
//! (`trustedFolders.json`). Facts: xtask/src/e2e/qwen_facts.md.

pub mod doctor;
pub mod gate;
pub mod live;
pub mod trust;
pub mod upgrade;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::config::{AgentId, Transport};
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Qwen Code in the list of agents (`agents::of`).
pub struct Qwen;

pub const HOOK_COMMAND: &str = "memloop hook stop --agent qwen";
/// `memloop hook session-start`: Qwen adds its `additionalContext` to the system instruction,
/// at startup, resume, clear and after a compaction (source `compact`).
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent qwen";
/// `memloop hook pre-compact`: its `additionalContext` joins the summary's system prompt.
pub const PRE_COMPACT_COMMAND: &str = "memloop hook pre-compact --agent qwen";
/// `memloop hook prompt`: the notes matching each prompt, as the UserPromptSubmit hook's
/// `additionalContext`.
pub const PROMPT_COMMAND: &str = "memloop hook prompt --agent qwen";
pub const PROJECT_SETTINGS: &str = ".qwen/settings.json";
/// Comments are stripped before `JSON.parse`; a trailing comma is not.
pub const DIALECT: Dialect = Dialect::Comments;

impl super::agent::Agent for Qwen {
    fn id(&self) -> AgentId {
        AgentId::Qwen
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".qwen").exists() || root.join("QWEN.md").exists()
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
            agent: AgentId::Qwen,
            name: PROJECT_SETTINGS,
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
        &crate::hook::Plain(crate::hook::Form::HookJson)
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

/// Qwen's user dir: `~/.qwen` (`QWEN_HOME` is not read by 0.24.4; the two files below have
/// their own overrides).
pub fn qwen_dir(home: &Path) -> PathBuf {
    home.join(".qwen")
}

/// `QWEN_CODE_MCP_APPROVALS_PATH`, else `~/.qwen/mcpApprovals.json`.
pub fn approvals_path(home: &Path) -> PathBuf {
    env_path("QWEN_CODE_MCP_APPROVALS_PATH")
        .unwrap_or_else(|| qwen_dir(home).join("mcpApprovals.json"))
}

/// `QWEN_CODE_TRUSTED_FOLDERS_PATH`, else `~/.qwen/trustedFolders.json`.
pub fn trusted_folders_path(home: &Path) -> PathBuf {
    env_path("QWEN_CODE_TRUSTED_FOLDERS_PATH")
        .unwrap_or_else(|| qwen_dir(home).join("trustedFolders.json"))
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The repository as Qwen keys its approvals and trust: the process's cwd, which the OS gives
/// symlink-free.
pub fn project_key(root: &Path) -> String {
    root.canonicalize()
        .unwrap_or_else(|_| root.to_path_buf())
        .display()
        .to_string()
}

pub fn targets(ctx: &Context) -> Vec<Target> {
    let (path, display) = ctx.project_target_display(PROJECT_SETTINGS);
    vec![Target {
        path,
        display,
        scope: Scope::Project,
        agents: vec![AgentId::Qwen],
        desired: Desired::Fragments {
            format: Format::Json(DIALECT),
            fragments: vec![
                Fragment::JsonMember {
                    path: vec!["mcpServers".into(), ctx.server.name.clone()],
                    value: server_entry(&ctx.server.transport),
                },
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "Stop".into()],
                    value: hook_group(),
                    command: HOOK_COMMAND.into(),
                },
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "UserPromptSubmit".into()],
                    value: command_group(PROMPT_COMMAND),
                    command: PROMPT_COMMAND.into(),
                }
                .wanted_if(ctx.config.memory.recall),
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "SessionStart".into()],
                    value: command_group(SESSION_START_COMMAND),
                    command: SESSION_START_COMMAND.into(),
                }
                .wanted_if(ctx.config.memory.session_start),
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "PreCompact".into()],
                    value: command_group(PRE_COMPACT_COMMAND),
                    command: PRE_COMPACT_COMMAND.into(),
                }
                .wanted_if(ctx.config.memory.session_start),
                // Qwen stamps its settings format into the file on every start.
                Fragment::AgentBookkeeping {
                    key: SETTINGS_VERSION_KEY.into(),
                },
            ]
            .into_iter()
            .chain(approvals(ctx))
            .collect(),
        },
        note: None,
    }]
}

/// `permissions.allow` entries for memloop's own two tools under the name Qwen registers an MCP
/// tool by (`mcp__<server>__<tool>`), exactly what Qwen Code 0.24.4 itself writes into this file
/// when the person answers "always allow" for the project (the tool's `permissionRules`): each
/// rule names one tool, where the server's `trust` would allow every tool of the server.
/// Retired with `[memory] approve_tools = false` or a server that is not memloop's own.
pub fn approvals(ctx: &Context) -> Vec<Fragment> {
    crate::agents::tool_approvals(ctx, ["permissions", "allow"], |server, tool| {
        format!("mcp__{server}__{tool}")
    })
}

/// The settings-format version Qwen Code 0.24.4 writes into every settings file it loads
/// (`"$version": 4`; `SETTINGS_VERSION_KEY` in its bundle).
pub const SETTINGS_VERSION_KEY: &str = "$version";

/// `mcpServers.<name>` as Qwen reads it (Gemini's keys: `command`/`args`/`env` for stdio,
/// `httpUrl` for streamable HTTP). `alwaysLoadTools` offers the tools to the model directly:
/// without it 0.24.4 hides them behind its `tool_search` step.
pub fn server_entry(transport: &Transport) -> Value {
    let mut entry = Map::new();
    match transport {
        Transport::Http { url, headers } => {
            entry.insert("httpUrl".into(), json!(url));
            if !headers.is_empty() {
                entry.insert("headers".into(), json!(headers));
            }
        }
        Transport::Stdio { command, args, env } => {
            entry.insert("command".into(), json!(command));
            entry.insert("args".into(), json!(args));
            if !env.is_empty() {
                entry.insert("env".into(), json!(env));
            }
        }
    }
    entry.insert("alwaysLoadTools".into(), json!(true));
    Value::Object(entry)
}

/// No `timeout`: 0.24.4 reads a value below 1000 as seconds and one of 1000 or more as
/// milliseconds (its older form), so any number is read two ways; the default (60 s) is far
/// above the gate's time budget.
pub fn hook_group() -> Value {
    command_group(HOOK_COMMAND)
}

/// A group running `command`, for every source and trigger (no `matcher`), without `timeout`
/// for the reason above.
pub fn command_group(command: &str) -> Value {
    json!({"hooks": [{"type": "command", "command": command}]})
}

/// Its prompt hook takes the prompt from the input's `prompt`.
impl crate::hook::PromptDialect for Qwen {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::HookJson("UserPromptSubmit")
    }
}
