//! Google Gemini CLI (npm `@google/gemini-cli`, checked with 0.61.0): everything in the project's
//! `.gemini/settings.json` (JSON with comments): the MCP server (`mcpServers.<name>`), the Stop
//! gate (an `AfterAgent` hook group) and `AGENTS.md` in `context.fileName`, so Gemini reads the
//! rules from the same file as the other agents; and, in the user's `~/.gemini/trustedFolders.json`,
//! the folder's trust, without which Gemini ignores that settings file. Facts:
//! xtask/src/e2e/gemini_facts.md.

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

/// Gemini in the list of agents (`agents::of`).
pub struct Gemini;

/// Stable across memloop versions: Gemini warns when a project hook's command changes.
pub const HOOK_COMMAND: &str = "memloop hook stop --agent gemini";
/// The handler's `name`, which Gemini shows and `hooksConfig.disabled` lists.
pub const HOOK_NAME: &str = "memloop";
/// Milliseconds, as Gemini reads `timeout` (its default is 60000).
pub const HOOK_TIMEOUT_MS: u64 = 30_000;
/// `memloop hook session-start`: Gemini reads its SessionStart JSON's `additionalContext`.
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent gemini";
/// `memloop hook prompt`: the notes matching each prompt, as the BeforeAgent hook's
/// `hookSpecificOutput.additionalContext` (the earliest event of a prompt whose output reaches
/// the model).
pub const PROMPT_COMMAND: &str = "memloop hook prompt --agent gemini";
const PROMPT_NAME: &str = "memloop-recall";
/// Its own name, so `hooksConfig.disabled` can turn it off without the gate.
pub const SESSION_START_NAME: &str = "memloop-session-start";
/// Milliseconds: the index is read in a few, the process starts in well under one second.
pub const SESSION_START_TIMEOUT_MS: u64 = 10_000;
pub const SETTINGS: &str = ".gemini/settings.json";
/// How Gemini reads its settings files: comments stripped, then `JSON.parse`.
pub const DIALECT: Dialect = Dialect::Comments;
/// What Gemini loads when `context.fileName` is not set.
pub const DEFAULT_CONTEXT_FILE: &str = "GEMINI.md";
pub const RULES_FILE: &str = "AGENTS.md";

impl super::agent::Agent for Gemini {
    fn id(&self) -> AgentId {
        AgentId::Gemini
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".gemini").exists() || root.join(DEFAULT_CONTEXT_FILE).exists()
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
            agent: AgentId::Gemini,
            name: SETTINGS,
            syntax: Syntax::Dollar,
            dialect: DIALECT,
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
        &crate::hook::Plain(crate::hook::Form::ClaudeJson)
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        self
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        upgrade::MIGRATIONS
    }

    fn trust(&self, ctx: &Context) -> anyhow::Result<Vec<Target>> {
        Ok(vec![trust::target(ctx)])
    }
}

/// Gemini's home: `$GEMINI_CLI_HOME`, else the user's home; its files are in `<that>/.gemini`.
pub fn gemini_dir(home: &Path) -> PathBuf {
    std::env::var_os("GEMINI_CLI_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.to_path_buf(), PathBuf::from)
        .join(".gemini")
}

pub fn targets(ctx: &Context) -> Vec<Target> {
    let (path, display) = ctx.project_target_display(SETTINGS);
    vec![Target {
        path,
        display,
        scope: Scope::Project,
        agents: vec![AgentId::Gemini],
        desired: Desired::Fragments {
            format: Format::Json(DIALECT),
            fragments: vec![
                Fragment::JsonListItem {
                    path: vec!["context".into(), "fileName".into()],
                    item: RULES_FILE.into(),
                    default: vec![DEFAULT_CONTEXT_FILE.into()],
                },
                Fragment::JsonMember {
                    path: vec!["mcpServers".into(), ctx.server.name.clone()],
                    value: server_entry(&ctx.server.transport),
                },
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "AfterAgent".into()],
                    value: hook_group(),
                    command: HOOK_COMMAND.into(),
                },
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "BeforeAgent".into()],
                    value: prompt_group(),
                    command: PROMPT_COMMAND.into(),
                }
                .wanted_if(ctx.config.memory.recall),
                Fragment::JsonHookGroup {
                    path: vec!["hooks".into(), "SessionStart".into()],
                    value: session_start_group(),
                    command: SESSION_START_COMMAND.into(),
                }
                .wanted_if(ctx.config.memory.session_start),
            ]
            .into_iter()
            .chain(approvals(ctx))
            .collect(),
        },
        note: None,
    }]
}

/// `tools.allowed` entries for memloop's own two tools under Gemini's name of an MCP tool
/// (`mcp_<server>_<tool>`, 0.34 on): Gemini's policy (0.61.0, `policy/config.ts`) allows each
/// exactly, where the server's `trust` would allow every tool of the server. Retired with
/// `[memory] approve_tools = false` or a server that is not memloop's own.
pub fn approvals(ctx: &Context) -> Vec<Fragment> {
    crate::agents::tool_approvals(ctx, ["tools", "allowed"], |server, tool| {
        format!("mcp_{server}_{tool}")
    })
}

/// `mcpServers.<name>`: `command`/`args`/`env` for stdio, `httpUrl` for streamable HTTP (`url`
/// would be SSE). Gemini expands `$VAR` and `${VAR}` in every settings value, so headers and env
/// keep memloop.toml's `${VAR}` references as they are.
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
    Value::Object(entry)
}

pub fn hook_group() -> Value {
    json!({"hooks": [{"name": HOOK_NAME, "type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT_MS}]})
}

/// No `matcher`: Gemini matches a SessionStart source by equality, and every source it has
/// (`startup`, `resume`, `clear`) opens a context without the index.
pub fn session_start_group() -> Value {
    json!({"hooks": [{
        "name": SESSION_START_NAME,
        "type": "command",
        "command": SESSION_START_COMMAND,
        "timeout": SESSION_START_TIMEOUT_MS,
    }]})
}

pub fn prompt_group() -> Value {
    json!({"hooks": [{
        "name": PROMPT_NAME,
        "type": "command",
        "command": PROMPT_COMMAND,
        "timeout": SESSION_START_TIMEOUT_MS,
    }]})
}

/// Its prompt hook takes the prompt from the input's `prompt`, without what Gemini CLI 0.61.0
/// puts before it there: the session-start text in `<hook_context>...</hook_context>` (every
/// prompt of the session carries it, and its words would drown the person's).
impl crate::hook::PromptDialect for Gemini {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::HookJson("BeforeAgent")
    }

    fn prompt(&self, input: &serde_json::Value) -> Option<String> {
        let mut text = crate::hook::prompt_text(input.get("prompt")?)?;
        while let Some(rest) = text.trim_start().strip_prefix("<hook_context>") {
            let Some(end) = rest.find("</hook_context>") else {
                break;
            };
            text = rest[end + "</hook_context>".len()..].to_owned();
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn http_servers_use_http_url_and_keep_variables() {
        let headers = BTreeMap::from([("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned())]);
        let entry = server_entry(&Transport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers,
        });
        assert_eq!(
            entry,
            json!({"httpUrl": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}})
        );
        let stdio = server_entry(&Transport::Stdio {
            command: "memloop".into(),
            args: vec!["serve".into()],
            env: BTreeMap::new(),
        });
        assert_eq!(stdio, json!({"command": "memloop", "args": ["serve"]}));
    }

    #[test]
    fn the_hook_runs_the_stable_command_with_a_timeout_in_milliseconds() {
        let group = hook_group();
        assert_eq!(group["hooks"][0]["command"], HOOK_COMMAND);
        assert_eq!(group["hooks"][0]["timeout"], 30_000);
        assert!(crate::target::is_hook_group_for(&group, HOOK_COMMAND));
    }
}
