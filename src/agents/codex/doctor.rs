//! Codex's whole files: the project `.codex/config.toml` (`[mcp_servers.*]`, whose
//! `default_tools_approval_mode` must be one of the four values Codex accepts, else every
//! command fails), `.codex/hooks.json`, the user config's project trust and the trust of each of
//! memloop's hooks, Stop, SessionStart and UserPromptSubmit (without them Codex silently ignores the project's
//! files or skips the hook), `[features] hooks` and its old name, and
//! the size of `AGENTS.md` (Codex reads 32768 bytes of it). Facts: xtask/src/e2e/codex_facts.md.

use std::path::Path;

use toml_edit::{DocumentMut, Item};

use super::{
    HOOKS_JSON, PROJECT_CONFIG, PROMPT_COMMAND, SESSION_START_COMMAND, codex_home, group_index,
    group_index_of, hook_hash, prompt_hash, session_start_hash, trusted_root,
};
use crate::config::AgentId;
use crate::doctor::{Doctor, Finding};

const AGENT: AgentId = AgentId::Codex;
/// Codex's `project_doc_max_bytes` default: the rest of AGENTS.md never reaches the model.
pub const AGENTS_MD_CAP: u64 = 32768;
/// What `default_tools_approval_mode` accepts in 0.171.0; anything else fails the whole load.
pub const APPROVAL_MODES: &[&str] = &["auto", "prompt", "writes", "approve"];
/// The first version that reads `[features] hooks` (before: `codex_hooks`).
pub const HOOKS_FEATURE_SINCE: &[u64] = &[0, 129];

pub fn agents_md_size(d: &mut Doctor) {
    let path = d.repo.root.join("AGENTS.md");
    if let Ok(meta) = std::fs::metadata(&path)
        && meta.len() > AGENTS_MD_CAP
    {
        d.push(
            Finding::warning(
                AGENT,
                "agents-md-size",
                format!(
                    "AGENTS.md is {} bytes; Codex reads only the first {AGENTS_MD_CAP} (project_doc_max_bytes) and drops the rest, where memloop's block may sit",
                    meta.len()
                ),
            )
            .file("AGENTS.md")
            .fix("shorten AGENTS.md below 32 KiB, or raise project_doc_max_bytes in ~/.codex/config.toml"),
        );
    }
}

pub fn check(d: &mut Doctor) {
    project_config(d);
    let agent = d.agent(AGENT).clone();
    if agent.installed() {
        let user = codex_home(d.home()).join("config.toml");
        user_config(d, &user, &agent);
    }
}

fn parse(text: &str) -> Option<DocumentMut> {
    text.parse().ok()
}

fn project_config(d: &mut Doctor) {
    let path = d.repo.root.join(PROJECT_CONFIG);
    // A file that is not there, not a regular file or leads out of the repository: the drift
    // check reports it, naming the file.
    let Ok(Some(text)) = crate::files::read_within(&path, &d.repo.root) else {
        return;
    };
    let Some(doc) = parse(&text) else {
        // The drift check reports the syntax error with its position.
        return;
    };
    let Some(servers) = doc.get("mcp_servers").and_then(Item::as_table_like) else {
        return;
    };
    for (name, server) in servers.iter() {
        let Some(server) = server.as_table_like() else {
            continue;
        };
        if let Some(mode) = server.get("default_tools_approval_mode") {
            let value = mode.as_str();
            if name == d.ctx.server.name && matches!(value, Some("prompt" | "writes")) {
                d.push(
                    Finding::warning(
                        AGENT,
                        "approval-mode",
                        format!(
                            "mcp_servers.{name}.default_tools_approval_mode is {}: under `codex exec` (approval policy never) Codex refuses memloop's memory_store",
                            mode.to_string().trim()
                        ),
                    )
                    .at(PROJECT_CONFIG, crate::doctor::locate::line_containing(&text, "default_tools_approval_mode"))
                    .by_sync("memloop sync"),
                );
            } else if value.is_some_and(|v| APPROVAL_MODES.contains(&v)) {
                d.push(
                    Finding::ok(
                        AGENT,
                        "approval-mode",
                        format!(
                            "mcp_servers.{name}.default_tools_approval_mode is {}",
                            mode.to_string().trim()
                        ),
                    )
                    .file(PROJECT_CONFIG),
                );
            } else {
                d.push(
                    Finding::error(
                        AGENT,
                        "approval-mode",
                        format!(
                            "mcp_servers.{name}.default_tools_approval_mode is {}: Codex accepts only {} and refuses to start with anything else",
                            mode.to_string().trim(),
                            APPROVAL_MODES.join(", ")
                        ),
                    )
                    .at(PROJECT_CONFIG, crate::doctor::locate::line_containing(&text, "default_tools_approval_mode"))
                    .fix("set it to \"approve\" (memloop sync does for its own server)"),
                );
            }
        }
        let bad_sources: Vec<String> = server
            .get("env_vars")
            .and_then(Item::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| {
                v.as_inline_table()?
                    .get("source")?
                    .as_str()
                    .map(str::to_owned)
            })
            .filter(|source| source != "local" && source != "remote")
            .collect();
        if let Some(source) = bad_sources.first() {
            d.push(
                Finding::error(
                    AGENT,
                    "env-vars",
                    format!("mcp_servers.{name}.env_vars has source {source:?}: Codex accepts only \"local\" or \"remote\" and refuses to start"),
                )
                .at(PROJECT_CONFIG, crate::doctor::locate::line_containing(&text, "env_vars"))
                .fix("use source = \"local\" (or name the variable alone: env_vars = [\"NAME\"])"),
            );
        }
        secrets(d, &text, name, server);
        if server.contains_key("command") && server.contains_key("url") {
            d.push(
                Finding::error(
                    AGENT,
                    "mcp-transport",
                    format!("mcp_servers.{name} has both command and url: Codex refuses the file (\"url is not supported for stdio\")"),
                )
                .file(PROJECT_CONFIG)
                .fix("keep one of them"),
            );
        }
    }
}

/// A literal credential in the committed `.codex/config.toml` lands in git history. Codex reads
/// every value as written, so a `${VAR}` there is sent as those characters: no leak, but no
/// credential either.
fn secrets(d: &mut Doctor, text: &str, name: &str, server: &dyn toml_edit::TableLike) {
    use crate::secrets::{Syntax, in_args, in_command, in_url, is_secret_name, looks_like_token};
    let at = |needle: &str| crate::doctor::locate::line_containing(text, needle);
    let mut found = 0;
    for (map, instead) in [
        (
            "http_headers",
            "take it from the environment: bearer_token_env_var = \"TOKEN_VAR\" for `Authorization: Bearer`, or env_http_headers = { HEADER = \"TOKEN_VAR\" }",
        ),
        (
            "env",
            "pass it from the environment instead: env_vars = [\"TOKEN_VAR\"]",
        ),
    ] {
        let Some(entries) = server.get(map).and_then(Item::as_table_like) else {
            continue;
        };
        for (key, value) in entries.iter() {
            let Some(value) = value.as_str().filter(|v| !v.is_empty()) else {
                continue;
            };
            if !(is_secret_name(key) || looks_like_token(value)) {
                continue;
            }
            found += 1;
            let path = format!("mcp_servers.{name}.{map}.{key}");
            let finding = if value.contains("${") {
                Finding::warning(
                    AGENT,
                    "secrets",
                    format!(
                        "{path} is {value:?}: Codex reads no variables and sends it as written"
                    ),
                )
                .fix(instead)
            } else {
                Finding::error(
                    AGENT,
                    "secrets",
                    format!("{path} holds a literal credential in a committed file"),
                )
                .fix(format!(
                    "{instead}; then rotate the credential, it is in git history"
                ))
            };
            d.push(finding.at(PROJECT_CONFIG, at(value)));
        }
    }
    let args: Vec<String> = server
        .get("args")
        .and_then(Item::as_array)
        .map(|items| {
            items
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let leaks = [
        server
            .get("url")
            .and_then(Item::as_str)
            .and_then(|url| Some(("url", url.to_owned(), in_url(url, Syntax::Verbatim)?))),
        server
            .get("command")
            .and_then(Item::as_str)
            .and_then(|c| Some(("command", c.to_owned(), in_command(c, Syntax::Verbatim)?))),
        in_args(&args, Syntax::Verbatim)
            .map(|(index, problem)| ("args", args[index].clone(), problem)),
    ];
    for (key, value, problem) in leaks.into_iter().flatten() {
        found += 1;
        d.push(
            Finding::error(
                AGENT,
                "secrets",
                format!("mcp_servers.{name}.{key} holds {problem} in a committed file"),
            )
            .at(PROJECT_CONFIG, at(&value))
            .fix("let the server read it from its environment (env_vars = [\"TOKEN_VAR\"]) or send it as a header through bearer_token_env_var; then rotate the credential, it is in git history"),
        );
    }
    if found == 0 {
        d.push(
            Finding::ok(
                AGENT,
                "secrets",
                format!("mcp_servers.{name}: no literal credentials"),
            )
            .file(PROJECT_CONFIG),
        );
    }
}

fn user_config(d: &mut Doctor, path: &Path, agent: &crate::doctor::Agent) {
    let shown = d.ctx.display_user_path(path);
    let place = path.parent().unwrap_or(path);
    let text = match crate::files::read_within(path, place) {
        Ok(text) => text.unwrap_or_default(),
        Err(err) => {
            return d.push(
                Finding::error(AGENT, "user-config", format!("cannot read {shown}: {err}"))
                    .file(shown.clone())
                    .fix("make it a regular file inside Codex's folder (or delete it)"),
            );
        }
    };
    let Some(doc) = parse(&text) else {
        d.push(
            Finding::error(
                AGENT,
                "user-config",
                format!("{shown} does not parse as TOML: Codex fails every command"),
            )
            .file(shown.clone())
            .fix("fix the TOML syntax (codex prints the line and column)"),
        );
        return;
    };
    let root = trusted_root(&d.repo.root);
    let project = root.display().to_string();
    let trusted = doc
        .get("projects")
        .and_then(|p| p.get(&project))
        .and_then(|p| p.get("trust_level"))
        .and_then(Item::as_str);
    if trusted == Some("trusted") {
        d.push(
            Finding::ok(AGENT, "trust", format!("{project} is trusted in {shown}"))
                .file(shown.clone()),
        );
    } else {
        let finding = Finding::error(
                AGENT,
                "trust",
                format!("{project} is not trusted in {shown}: Codex ignores .codex/config.toml and .codex/hooks.json, so neither the memory server nor the Stop gate loads"),
            )
            .file(shown.clone());
        d.push(d.by_trust(finding));
    }
    let hooks_json = d.repo.root.join(HOOKS_JSON);
    if hooks_json.exists() {
        hook_trust(d, path, &doc, &shown, &root);
    }
    let features = doc.get("features").and_then(Item::as_table_like);
    let flag = |name: &str| features.and_then(|f| f.get(name)).and_then(Item::as_bool);
    let new_name = agent.at_least(HOOKS_FEATURE_SINCE) != Some(false);
    let (read, other) = if new_name {
        ("hooks", "codex_hooks")
    } else {
        ("codex_hooks", "hooks")
    };
    if flag(read) == Some(false) || (!new_name && flag(read).is_none()) {
        d.push(
            Finding::error(
                AGENT,
                "hooks-feature",
                format!("[features] {read} is not on in {shown}: this Codex runs no hooks, so the gate never runs"),
            )
            .file(shown.clone())
            .fix(format!("set `{read} = true` under [features]")),
        );
    } else if !(new_name && flag(other).is_some()) {
        d.push(
            Finding::ok(
                AGENT,
                "hooks-feature",
                format!("this Codex runs hooks ([features] {read})"),
            )
            .file(shown.clone()),
        );
    } else {
        d.push(
            Finding::warning(
                AGENT,
                "hooks-feature",
                format!("[features] codex_hooks in {shown} is the old name; this Codex warns on every run and reads `hooks`"),
            )
            .file(shown)
            .fix("run `memloop upgrade --user-scope`, or rename it to `hooks` by hand"),
        );
    }
}

/// One of memloop's handlers in `.codex/hooks.json` as Codex trusts it.
struct Handler {
    /// As in the finding ("memloop's Stop hook").
    name: &'static str,
    /// The `[hooks.state]` key's event label.
    label: &'static str,
    group: usize,
    hash: String,
    /// What an untrusted one costs.
    skipped: &'static str,
}

/// Each handler memloop wants must be trusted under its current key by its current hash, and no
/// old key may still trust memloop's hash (a hook put there later would run trusted).
fn hook_trust(d: &mut Doctor, user_config: &Path, doc: &DocumentMut, shown: &str, root: &Path) {
    let hooks_json = &d.repo.root.join(HOOKS_JSON);
    let mut handlers = vec![Handler {
        name: "Stop",
        label: "stop",
        group: group_index(hooks_json),
        hash: hook_hash(),
        skipped: "the gate never runs",
    }];
    if d.ctx.config.memory.session_start {
        handlers.push(Handler {
            name: "SessionStart",
            label: "session_start",
            group: group_index_of(hooks_json, "SessionStart", SESSION_START_COMMAND),
            hash: session_start_hash(),
            skipped: "sessions start without the memory index",
        });
    }
    if d.ctx.config.memory.recall {
        handlers.push(Handler {
            name: "UserPromptSubmit",
            label: "user_prompt_submit",
            group: group_index_of(hooks_json, "UserPromptSubmit", PROMPT_COMMAND),
            hash: prompt_hash(),
            skipped: "prompts go to the model without the notes that match them",
        });
    }
    let states = doc
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(Item::as_table_like);
    let trusted_hash = |key: &str| {
        states
            .and_then(|s| s.get(key))
            .and_then(|s| s.get("trusted_hash"))
            .and_then(Item::as_str)
    };
    let current: Vec<(&str, usize, String)> = handlers
        .iter()
        .map(|h| (h.label, h.group, h.hash.clone()))
        .collect();
    let left = super::trust::left_behind(user_config, &root.join(HOOKS_JSON), &current);
    for handler in &handlers {
        let key =
            super::trust::hook_state_key(&root.join(HOOKS_JSON), handler.label, handler.group, 0);
        let name = handler.name;
        let problem = match trusted_hash(&key) {
            None => Some(format!("has no trusted_hash for memloop's {name} hook")),
            Some(hash) if hash != handler.hash => Some(format!(
                "holds a stale trusted_hash for memloop's {name} hook (Codex reports it as modified)"
            )),
            Some(_) => None,
        };
        if problem.is_none() {
            d.push(
                Finding::ok(
                    AGENT,
                    "hook-trust",
                    format!("{shown} trusts memloop's {name} hook by its current hash"),
                )
                .file(shown),
            );
        }
        let prefix = format!("{}:{}:", root.join(HOOKS_JSON).display(), handler.label);
        for (old, _) in left.iter().filter(|(k, _)| k.starts_with(&prefix)) {
            let finding = Finding::warning(
                    AGENT,
                    "hook-trust-left",
                    format!("{shown} still trusts memloop's {name} hook at [hooks.state.\"{old}\"], where it no longer is (its group moved in .codex/hooks.json): a hook put there later would run trusted"),
                )
                .file(shown);
            d.push(d.by_trust(finding));
        }
        if let Some(problem) = problem {
            let finding = Finding::error(
                    AGENT,
                    "hook-trust",
                    format!("{shown} {problem} ([hooks.state.\"{key}\"]): Codex skips the hook without a word, so {}", handler.skipped),
                )
                .file(shown);
            d.push(d.by_trust(finding));
        }
    }
}
