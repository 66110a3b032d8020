//! Gemini's whole files: which context files it loads (`context.fileName` of the project's
//! settings, else the user's, else `GEMINI.md`) and whether one holds the rules; whether this
//! Gemini runs hooks at all (the switch moved three times between 0.13 and 0.27); a `_` in the
//! server name (Gemini 0.34+ names tools `mcp_<server>_<tool>`); and, once Gemini is installed,
//! the folder's trust in `~/.gemini/trustedFolders.json`, without which Gemini ignores the
//! project's settings. Facts: xtask/src/e2e/gemini_facts.md.

use std::path::Path;

use serde_json::Value;

use super::trust::{self, trusted_folders_path, trusted_root};
use super::{
    DEFAULT_CONTEXT_FILE, DIALECT, HOOK_COMMAND, HOOK_NAME, RULES_FILE, SESSION_START_COMMAND,
    SESSION_START_NAME, SETTINGS, gemini_dir,
};
use crate::config::AgentId;
use crate::doctor::locate::line_containing;
use crate::doctor::{Doctor, Finding};
use crate::edit::json::JsonDoc;

const AGENT: AgentId = AgentId::Gemini;
const PROGRAM: &str = "Gemini CLI";
/// The first version with hooks (the `AfterAgent` contract), behind `tools.enableHooks`.
pub const HOOKS_SINCE: &[u64] = &[0, 13];
/// From here the switch is `hooks.enabled` (default off), with `tools.enableHooks` on by default.
pub const HOOKS_ENABLED_SINCE: &[u64] = &[0, 24];
/// From here `hooks` holds only events; the switch is `hooksConfig.enabled` (still off).
pub const HOOKS_CONFIG_SINCE: &[u64] = &[0, 26];
/// From here hooks are on unless `hooksConfig.enabled` is false.
pub const HOOKS_DEFAULT_ON_SINCE: &[u64] = &[0, 27];
/// From here MCP tools are `mcp_<server>_<tool>` (before: `<server>__<tool>`).
pub const MCP_PREFIX_SINCE: &[u64] = &[0, 34];

/// A settings file's value, or `None` when it is missing or does not parse (the drift check
/// reports a syntax error with its position).
pub fn settings_value(path: &Path) -> Option<Value> {
    let text = crate::files::read_optional(path).ok()??;
    JsonDoc::parse(&text, DIALECT, "")
        .ok()
        .map(|doc| doc.value())
}

fn pointer<'v>(project: &'v Option<Value>, user: &'v Option<Value>, at: &str) -> Option<&'v Value> {
    project
        .as_ref()
        .and_then(|v| v.pointer(at))
        .or_else(|| user.as_ref().and_then(|v| v.pointer(at)))
}

/// The names Gemini loads as context files: the project's `context.fileName` replaces the user's.
pub fn context_files(project: &Option<Value>, user: &Option<Value>) -> Vec<String> {
    match pointer(project, user, "/context/fileName") {
        Some(Value::String(name)) if !name.trim().is_empty() => vec![name.trim().to_owned()],
        Some(Value::Array(names)) => {
            let names: Vec<String> = names
                .iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect();
            if names.is_empty() {
                vec![DEFAULT_CONTEXT_FILE.into()]
            } else {
                names
            }
        }
        _ => vec![DEFAULT_CONTEXT_FILE.into()],
    }
}

fn user_settings(d: &Doctor) -> Option<Value> {
    settings_value(&gemini_dir(d.home()).join("settings.json"))
}

pub fn rules(d: &mut Doctor) {
    let project = settings_value(&d.repo.root.join(SETTINGS));
    let user = user_settings(d);
    let names = context_files(&project, &user);
    let reached = crate::doctor::instructions::any_of(d, AGENT, PROGRAM, &names);
    if !reached && !names.iter().any(|n| n == RULES_FILE) {
        d.push(
            Finding::error(
                AGENT,
                "context-file",
                format!(
                    "Gemini loads {} as its context, not AGENTS.md, where memloop's rules are: context.fileName in {SETTINGS} lacks AGENTS.md",
                    names.join(", ")
                ),
            )
            .file(SETTINGS)
            .by_sync(d.sync_command(false)),
        );
    }
}

pub fn check(d: &mut Doctor) {
    server_name(d);
    let agent = d.agent(AGENT).clone();
    let project = settings_value(&d.repo.root.join(SETTINGS));
    let user = user_settings(d);
    hooks(d, &agent, &project, &user);
    if agent.installed() {
        trust_check(d, &user);
    }
}

fn server_name(d: &mut Doctor) {
    let name = d.ctx.server.name.clone();
    if name.contains('_') {
        d.push(
            Finding::warning(
                AGENT,
                "server-name",
                format!("the server name `{name}` holds `_`: Gemini names its tools `mcp_{name}_<tool>`, and cannot tell where the server name ends (its docs warn against it)"),
            )
            .file(crate::config::FILE_NAME)
            .fix("rename the server in memloop.toml ([server] name, e.g. with `-` instead of `_`), then run `memloop sync`"),
        );
    }
}

fn hooks(
    d: &mut Doctor,
    agent: &crate::doctor::Agent,
    project: &Option<Value>,
    user: &Option<Value>,
) {
    let at_least = |min: &[u64]| agent.at_least(min).unwrap_or(true);
    let flag = |at: &str| pointer(project, user, at).and_then(Value::as_bool);
    let version = agent.version.clone().unwrap_or_default();
    let problem = if !at_least(HOOKS_SINCE) {
        Some((
            format!("this Gemini CLI ({version}) predates hooks (0.13): the Stop gate never runs"),
            "update Gemini CLI (npm i -g @google/gemini-cli)".to_owned(),
        ))
    } else if !at_least(HOOKS_ENABLED_SINCE) {
        (flag("/tools/enableHooks") != Some(true)).then(|| {
            (
                format!("this Gemini CLI ({version}) runs hooks only with `tools.enableHooks: true`, which is not set: the Stop gate never runs"),
                "set \"tools\": {\"enableHooks\": true} in .gemini/settings.json, or update Gemini CLI".to_owned(),
            )
        })
    } else if !at_least(HOOKS_CONFIG_SINCE) {
        (flag("/tools/enableHooks") == Some(false) || flag("/hooks/enabled") != Some(true)).then(|| {
            (
                format!("this Gemini CLI ({version}) runs hooks only with `hooks.enabled: true` (and `tools.enableHooks` not false): the Stop gate never runs"),
                "set \"hooks\": {\"enabled\": true} in .gemini/settings.json, or update Gemini CLI".to_owned(),
            )
        })
    } else if !at_least(HOOKS_DEFAULT_ON_SINCE) {
        (flag("/hooksConfig/enabled") != Some(true)).then(|| {
            (
                format!("this Gemini CLI ({version}) runs hooks only with `hooksConfig.enabled: true`: the Stop gate never runs"),
                "set \"hooksConfig\": {\"enabled\": true} in .gemini/settings.json, or update Gemini CLI".to_owned(),
            )
        })
    } else {
        (flag("/hooksConfig/enabled") == Some(false)).then(|| {
            (
                "`hooksConfig.enabled` is false: Gemini runs no hooks, so the Stop gate never runs".to_owned(),
                "remove `hooksConfig.enabled: false` (from .gemini/settings.json or ~/.gemini/settings.json)".to_owned(),
            )
        })
    };
    let disabled = pointer(project, user, "/hooksConfig/disabled")
        .and_then(Value::as_array)
        .is_some_and(|names| {
            names
                .iter()
                .any(|n| matches!(n.as_str(), Some(HOOK_NAME | HOOK_COMMAND)))
        });
    let text = crate::files::read_within(&d.repo.root.join(SETTINGS), &d.repo.root)
        .ok()
        .flatten()
        .unwrap_or_default();
    let hooks_run = problem.is_none() && !disabled;
    match problem {
        Some((message, fix)) => d.push(
            Finding::error(AGENT, "hooks", message)
                .at(SETTINGS, line_containing(&text, "Hooks"))
                .fix(fix),
        ),
        None if disabled => d.push(
            Finding::error(
                AGENT,
                "hooks",
                "`hooksConfig.disabled` names memloop's hook: Gemini skips it, so the Stop gate never runs",
            )
            .at(SETTINGS, line_containing(&text, "disabled"))
            .fix("remove \"memloop\" from hooksConfig.disabled"),
        ),
        None => d.push(Finding::ok(AGENT, "hooks", "this Gemini CLI runs the AfterAgent hook").file(SETTINGS)),
    }
    let start_disabled = pointer(project, user, "/hooksConfig/disabled")
        .and_then(Value::as_array)
        .is_some_and(|names| {
            names
                .iter()
                .any(|n| matches!(n.as_str(), Some(SESSION_START_NAME | SESSION_START_COMMAND)))
        });
    if !d.ctx.config.memory.session_start {
        return;
    }
    if start_disabled {
        d.push(
            Finding::warning(
                AGENT,
                "session-start",
                "`hooksConfig.disabled` names memloop's SessionStart hook: sessions start without the memory index",
            )
            .at(SETTINGS, line_containing(&text, "disabled"))
            .fix("remove \"memloop-session-start\" from hooksConfig.disabled, or set [memory] session_start = false in memloop.toml"),
        );
    } else if hooks_run {
        d.push(
            Finding::ok(
                AGENT,
                "session-start",
                "memloop's SessionStart hook runs: sessions start with the memory index",
            )
            .file(SETTINGS),
        );
    }
}

fn trust_check(d: &mut Doctor, user: &Option<Value>) {
    let folders = trusted_folders_path(d.home());
    let shown = d.ctx.display_user_path(&folders);
    let root = trusted_root(&d.repo.root);
    let enabled = user
        .as_ref()
        .and_then(|v| v.pointer("/security/folderTrust/enabled"))
        .and_then(Value::as_bool)
        != Some(false);
    if !enabled {
        return d.push(Finding::ok(
            AGENT,
            "trust",
            "folder trust is off in ~/.gemini/settings.json: Gemini loads the project's settings everywhere",
        ));
    }
    let place = folders.parent().unwrap_or(&folders);
    let config = match crate::files::read_within(&folders, place) {
        Ok(None) => Value::Object(Default::default()),
        Err(err) => {
            return d.push(
                Finding::error(AGENT, "trust", format!("cannot read {shown}: {err}"))
                    .file(shown)
                    .fix("make it a regular file inside Gemini's folder (or delete it)"),
            );
        }
        Ok(Some(text)) => match JsonDoc::parse(&text, DIALECT, &shown) {
            Ok(doc) => doc.value(),
            Err(refusal) => {
                return d.push(
                    Finding::error(
                        AGENT,
                        "trust",
                        format!("{refusal}: Gemini refuses to start until it parses"),
                    )
                    .file(shown)
                    .fix("fix the JSON by hand (comments are allowed, trailing commas are not)"),
                );
            }
        },
    };
    if let Some((path, level)) = trust::invalid_level(&config) {
        return d.push(
            Finding::error(
                AGENT,
                "trust",
                format!("{shown} gives {path:?} the value {level}, which is no trust level: Gemini refuses to start"),
            )
            .file(shown)
            .fix("use TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST"),
        );
    }
    let project = root.display().to_string();
    let finding = match trust::verdict(&config, &root) {
        Some(true) => Finding::ok(AGENT, "trust", format!("{project} is trusted in {shown}")).file(shown),
        Some(false) => Finding::error(
            AGENT,
            "trust",
            format!("{project} is marked DO_NOT_TRUST in {shown}: Gemini ignores .gemini/settings.json, so neither the memory server, the Stop gate nor AGENTS.md as rules loads"),
        )
        .file(shown)
        .fix("trust the folder in Gemini (/permissions), or remove that rule and run `memloop trust`"),
        None => d.by_trust(Finding::error(
            AGENT,
            "trust",
            format!("{project} is not trusted in {shown}: Gemini ignores .gemini/settings.json (the memory server, the Stop gate and AGENTS.md as rules), and `gemini -p` exits at once"),
        )
        .file(shown)),
    };
    d.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_project_list_replaces_the_users_and_a_string_counts() {
        let none = None;
        assert_eq!(context_files(&none, &none), ["GEMINI.md"]);
        let user = Some(json!({"context": {"fileName": "TEAM.md"}}));
        assert_eq!(context_files(&none, &user), ["TEAM.md"]);
        let project = Some(json!({"context": {"fileName": ["GEMINI.md", "AGENTS.md"]}}));
        assert_eq!(context_files(&project, &user), ["GEMINI.md", "AGENTS.md"]);
        let empty = Some(json!({"context": {"fileName": []}}));
        assert_eq!(context_files(&empty, &none), ["GEMINI.md"]);
    }
}
