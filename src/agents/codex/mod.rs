//! OpenAI Codex CLI (npm `@openai/codex`, checked with 0.171.0): the MCP server in the project's
//! `.codex/config.toml` (`[mcp_servers.<name>]`), the Stop gate in `.codex/hooks.json`
//! (Claude-like groups), and in the user's `$CODEX_HOME/config.toml` (default
//! `~/.codex/config.toml`) the two entries without which Codex loads neither: the project's
//! trust and each hook's `trusted_hash`. Facts: xtask/src/e2e/codex_facts.md; the prompt hook's
//! (recall): xtask/src/e2e/recall_facts.md.

pub mod doctor;
pub mod gate;
pub mod live;
pub mod trust;
pub mod upgrade;

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Value, json};

use crate::config::{AgentId, Piece, Transport, env_pieces};
use crate::doctor::Doctor;
use crate::doctor::wiring::McpFile;
use crate::edit::json::{Dialect, JsonDoc};
use crate::edit::toml::EntryValue;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target, is_hook_group_for};

/// Codex in the list of agents (`agents::of`).
pub struct Codex;

pub const HOOK_COMMAND: &str = "memloop hook stop --agent codex";
/// Seconds, as Codex reads `timeout` (its default is 600).
pub const HOOK_TIMEOUT: u64 = 30;
/// `memloop hook session-start`: Codex reads its SessionStart JSON's `additionalContext`.
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent codex";
/// Codex's SessionStart sources but `fork` (a fork carries its parent's context).
pub const SESSION_START_MATCHER: &str = "startup|resume|clear|compact";
/// Seconds; reading the index costs milliseconds.
pub const SESSION_HOOK_TIMEOUT: u64 = 10;
/// `memloop hook prompt`: the notes matching each prompt, as the UserPromptSubmit hook's
/// `hookSpecificOutput.additionalContext` (Codex 0.171.0 gives the model each context as a
/// developer message of the prompt's turn). Its timeout is [`SESSION_HOOK_TIMEOUT`].
pub const PROMPT_COMMAND: &str = "memloop hook prompt --agent codex";
pub const PROJECT_CONFIG: &str = ".codex/config.toml";
pub const HOOKS_JSON: &str = ".codex/hooks.json";
/// `codex exec` runs with approval policy `never`, which refuses every MCP call needing
/// approval; `approve` lets memloop's tools (and a remote server's) run.
pub const APPROVAL_MODE: &str = "approve";

impl super::agent::Agent for Codex {
    fn id(&self) -> AgentId {
        AgentId::Codex
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".codex").exists()
    }

    fn targets(&self, ctx: &Context, skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        targets(ctx, skipped)
    }

    fn check_rules(&self, d: &mut Doctor) {
        doctor::agents_md_size(d);
        crate::doctor::instructions::first_of(d, AgentId::Codex, "Codex", &["AGENTS.md"]);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        &[]
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

/// Codex's data root: `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".codex"), PathBuf::from)
}

/// The repository as Codex's trust must spell it: absolute, symlink-free, no trailing slash.
pub fn trusted_root(root: &Path) -> PathBuf {
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

pub fn targets(ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
    let (config_path, config_display) = ctx.project_target_display(PROJECT_CONFIG);
    let (hooks_path, hooks_display) = ctx.project_target_display(HOOKS_JSON);
    let session_start = ctx.config.memory.session_start;
    let out = vec![
        Target {
            path: config_path,
            display: config_display,
            scope: Scope::Project,
            agents: vec![AgentId::Codex],
            desired: Desired::Fragments {
                format: Format::Toml,
                fragments: vec![Fragment::TomlTable {
                    path: vec!["mcp_servers".into(), ctx.server.name.clone()],
                    fields: server_fields(&ctx.server.transport)?,
                    whole: true,
                }],
            },
            note: None,
        },
        Target {
            path: hooks_path,
            display: hooks_display,
            scope: Scope::Project,
            agents: vec![AgentId::Codex],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![
                    Fragment::JsonHookGroup {
                        path: vec!["hooks".into(), "Stop".into()],
                        value: hook_group(),
                        command: HOOK_COMMAND.into(),
                    },
                    Fragment::JsonHookGroup {
                        path: vec!["hooks".into(), "SessionStart".into()],
                        value: session_start_group(),
                        command: SESSION_START_COMMAND.into(),
                    }
                    .wanted_if(session_start),
                    Fragment::JsonHookGroup {
                        path: vec!["hooks".into(), "UserPromptSubmit".into()],
                        value: prompt_group(),
                        command: PROMPT_COMMAND.into(),
                    }
                    .wanted_if(ctx.config.memory.recall),
                ],
            },
            note: None,
        },
    ];
    Ok(out)
}

/// The `trusted_hash` of memloop's Stop handler as `hook_group` writes it.
pub fn hook_hash() -> String {
    trust::command_hook_trusted_hash("stop", HOOK_COMMAND, Some(HOOK_TIMEOUT), None)
}

/// The user config's `trusted_hash` of memloop's SessionStart handler, group `group`.
pub fn session_start_trust(root: &Path, group: usize) -> Fragment {
    handler_trust(root, "session_start", group, session_start_hash())
}

/// The user config's `trusted_hash` of memloop's UserPromptSubmit handler, group `group`.
pub fn prompt_trust(root: &Path, group: usize) -> Fragment {
    handler_trust(root, "user_prompt_submit", group, prompt_hash())
}

/// `[hooks.state."<root>/.codex/hooks.json:<label>:<group>:0"] trusted_hash = <hash>`.
fn handler_trust(root: &Path, label: &str, group: usize, hash: String) -> Fragment {
    Fragment::TomlTable {
        path: vec![
            "hooks".into(),
            "state".into(),
            trust::hook_state_key(&root.join(HOOKS_JSON), label, group, 0),
        ],
        fields: vec![("trusted_hash".into(), EntryValue::String(hash))],
        whole: false,
    }
}

/// Codex 0.171.0 ignores a UserPromptSubmit group's `matcher`, and so does its hash.
pub fn prompt_hash() -> String {
    trust::command_hook_trusted_hash(
        "user_prompt_submit",
        PROMPT_COMMAND,
        Some(SESSION_HOOK_TIMEOUT),
        None,
    )
}

pub fn prompt_group() -> Value {
    json!({"hooks": [{"type": "command", "command": PROMPT_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

/// A SessionStart group's `matcher` is part of its identity (Codex hashes the matcher of the
/// events that use one).
pub fn session_start_hash() -> String {
    trust::command_hook_trusted_hash_matching(
        "session_start",
        Some(SESSION_START_MATCHER),
        SESSION_START_COMMAND,
        Some(SESSION_HOOK_TIMEOUT),
        None,
    )
}

pub fn session_start_group() -> Value {
    json!({"matcher": SESSION_START_MATCHER, "hooks": [{"type": "command", "command": SESSION_START_COMMAND, "timeout": SESSION_HOOK_TIMEOUT}]})
}

pub fn hook_group() -> Value {
    json!({"hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT}]})
}

/// Where memloop's group is (or will be, once sync has run) in the `Stop` array of `hooks_json`:
/// the first group running only memloop's command keeps its place; otherwise it is appended.
/// Codex's trust key counts groups from 0.
pub fn group_index(hooks_json: &Path) -> usize {
    group_index_of(hooks_json, "Stop", HOOK_COMMAND)
}

/// As [`group_index`], for the group running `command` in the `event` array.
pub fn group_index_of(hooks_json: &Path, event: &str, command: &str) -> usize {
    let Ok(Some(text)) = crate::files::read_optional(hooks_json) else {
        return 0;
    };
    let Ok(doc) = JsonDoc::parse(&text, Dialect::Strict, "") else {
        return 0;
    };
    let value = doc.value();
    let groups = value
        .get("hooks")
        .and_then(|hooks| hooks.get(event))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    groups
        .iter()
        .position(|g| is_hook_group_for(g, command))
        .unwrap_or(groups.len())
}

/// `[mcp_servers.<name>]`. Codex reads every value literally (no `${VAR}`): a bearer token comes
/// from `bearer_token_env_var`, other header variables from `env_http_headers`, and a stdio
/// server's inherited variables are named in `env_vars`.
pub fn server_fields(transport: &Transport) -> anyhow::Result<Vec<(String, EntryValue)>> {
    let mut fields = Vec::new();
    match transport {
        Transport::Http { url, headers } => {
            fields.push(("url".into(), EntryValue::String(url.clone())));
            let (mut literal, mut from_env) = (Vec::new(), Vec::new());
            for (name, value) in headers {
                let pieces = env_pieces(value).unwrap_or_default();
                match pieces.as_slice() {
                    [Piece::Literal(scheme), Piece::Var(var)]
                        if name.eq_ignore_ascii_case("authorization")
                            && scheme.trim().eq_ignore_ascii_case("bearer") =>
                    {
                        fields.push((
                            "bearer_token_env_var".into(),
                            EntryValue::String((*var).into()),
                        ));
                    }
                    [Piece::Var(var)] => from_env.push((name.clone(), (*var).to_owned())),
                    [Piece::Literal(text)] => literal.push((name.clone(), (*text).to_owned())),
                    [] if value.is_empty() => literal.push((name.clone(), String::new())),
                    _ => bail!(
                        "server.headers.{name} = {value:?}: Codex reads no variables in a header; it can take \
                         `Authorization = \"Bearer ${{VAR}}\"` (as bearer_token_env_var), a header that is \
                         exactly `${{VAR}}` (as env_http_headers) or a literal. Change the header or drop codex from agents"
                    ),
                }
            }
            if !literal.is_empty() {
                fields.push(("http_headers".into(), EntryValue::Map(literal)));
            }
            if !from_env.is_empty() {
                fields.push(("env_http_headers".into(), EntryValue::Map(from_env)));
            }
        }
        Transport::Stdio { command, args, env } => {
            fields.push(("command".into(), EntryValue::String(command.clone())));
            fields.push(("args".into(), EntryValue::Strings(args.clone())));
            let (mut literal, mut inherited) = (Vec::new(), Vec::new());
            for (name, value) in env {
                match env_pieces(value).as_deref() {
                    Some([Piece::Var(var)]) if var == name => inherited.push(name.clone()),
                    Some([Piece::Literal(text)]) => {
                        literal.push((name.clone(), (*text).to_owned()))
                    }
                    Some([]) if value.is_empty() => literal.push((name.clone(), String::new())),
                    _ => bail!(
                        "server.env.{name} = {value:?}: Codex reads no variables in an MCP server's env; \
                         it can pass on `{name} = \"${{{name}}}\"` (as env_vars) or a literal value. \
                         Change the value or drop codex from agents"
                    ),
                }
            }
            if !literal.is_empty() {
                fields.push(("env".into(), EntryValue::Map(literal)));
            }
            if !inherited.is_empty() {
                fields.push(("env_vars".into(), EntryValue::Strings(inherited)));
            }
        }
    }
    fields.push((
        "default_tools_approval_mode".into(),
        EntryValue::String(APPROVAL_MODE.into()),
    ));
    Ok(fields)
}

/// Its prompt hook takes the prompt from the input's `prompt`.
impl crate::hook::PromptDialect for Codex {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::HookJson("UserPromptSubmit")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn headers_become_the_keys_codex_reads() {
        let headers = BTreeMap::from([
            ("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned()),
            ("X-Team".to_owned(), "${TEAM}".to_owned()),
            ("X-Plain".to_owned(), "yes".to_owned()),
        ]);
        let fields = server_fields(&Transport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers,
        })
        .unwrap();
        let get = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("bearer_token_env_var"),
            Some(EntryValue::String("TOKEN".into()))
        );
        assert_eq!(
            get("env_http_headers"),
            Some(EntryValue::Map(vec![("X-Team".into(), "TEAM".into())]))
        );
        assert_eq!(
            get("http_headers"),
            Some(EntryValue::Map(vec![("X-Plain".into(), "yes".into())]))
        );
        assert_eq!(
            get("default_tools_approval_mode"),
            Some(EntryValue::String("approve".into()))
        );
    }

    #[test]
    fn a_variable_inside_a_header_is_refused() {
        let headers = BTreeMap::from([("X-Key".to_owned(), "k-${KEY}".to_owned())]);
        let err = server_fields(&Transport::Http {
            url: "http://h/mcp".into(),
            headers,
        })
        .unwrap_err();
        assert!(err.to_string().contains("server.headers.X-Key"), "{err}");
    }

    #[test]
    fn stdio_env_passes_on_inherited_variables_by_name() {
        let env = BTreeMap::from([
            ("HOME".to_owned(), "${HOME}".to_owned()),
            ("LOG".to_owned(), "debug".to_owned()),
        ]);
        let fields = server_fields(&Transport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "srv".into()],
            env,
        })
        .unwrap();
        assert!(fields.contains(&("env_vars".into(), EntryValue::Strings(vec!["HOME".into()]))));
        assert!(fields.contains(&(
            "env".into(),
            EntryValue::Map(vec![("LOG".into(), "debug".into())])
        )));
        let renamed = BTreeMap::from([("A".to_owned(), "${B}".to_owned())]);
        assert!(
            server_fields(&Transport::Stdio {
                command: "x".into(),
                args: vec![],
                env: renamed
            })
            .is_err()
        );
    }

    #[test]
    fn the_group_index_follows_foreign_stop_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks.json");
        assert_eq!(group_index(&path), 0);
        std::fs::write(
            &path,
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}}"#,
        )
        .unwrap();
        assert_eq!(group_index(&path), 1);
        std::fs::write(
            &path,
            format!(r#"{{"hooks": {{"Stop": [{{"hooks": [{{"type": "command", "command": "mine"}}]}}, {}]}}}}"#, hook_group()),
        )
        .unwrap();
        assert_eq!(group_index(&path), 1);
    }
}
