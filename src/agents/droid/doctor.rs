//! Droid's whole files, as Droid 0.215.0 reads them (xtask/src/e2e/droid_facts.md):
//! - `.factory/settings.json` and `.factory/mcp.json`: JSON with comments, no trailing commas; a
//!   file that does not parse is dropped without a word (its hooks, its servers).
//! - `.factory/hooks.json` (else the legacy `.factory/hooks/hooks.json`): its hooks replace those
//!   of `settings.json` event by event, so a `Stop` list there hides memloop's gate.
//! - `hooks.hooksDisabled: true` in the project's or the user's `settings.json` turns every hook
//!   off; `settings.local.json` holds no hooks Droid runs.
//! - `"disabled": true` on memloop's server entry keeps it from starting.
//! - Rules: every one of `CLAUDE.md` and `AGENTS.md` is read, once per real file.
//! - Every level's `Stop` list runs: memloop's gate also in `~/.factory/settings.json` judges
//!   each stop twice.
//! - The TUI runs no project hook in a folder missing from `trustedFolders` (it asks first).

use serde_json::Value;

use super::{MCP_FILE, SETTINGS_FILE};
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Doctor, Finding};

const AGENT: AgentId = AgentId::Droid;
const PROGRAM: &str = "Droid";
/// The hook events memloop installs in `.factory/settings.json`.
const EVENTS: [&str; 3] = ["Stop", "UserPromptSubmit", "SessionStart"];
/// The rule files Droid 0.215.0 loads in each folder (its `CLAUDE.md`/`AGENTS.md` list; the case
/// variants `Claude.md`, `Agents.md`, `agents.md` are the same files on a case-insensitive disk).
const RULES_FILES: &[&str] = &["CLAUDE.md", "AGENTS.md"];

pub fn rules(d: &mut Doctor) {
    crate::doctor::instructions::each_real_file(d, AGENT, PROGRAM, RULES_FILES);
}

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let settings = load(d, &root.join(SETTINGS_FILE), SETTINGS_FILE, "hooks");
    let user_path = d.home().join(".factory/settings.json");
    let user = load(d, &user_path, "~/.factory/settings.json", "hooks");
    hooks_disabled(d, [settings.as_ref(), user.as_ref()]);
    hooks_json(d);
    if let Some(user) = &user {
        second_gate(d, user);
    }
    if d.agent(AGENT).installed() {
        trusted_folder(d, user.as_ref());
    }
    if let Some(mcp) = load(d, &root.join(MCP_FILE), MCP_FILE, "servers") {
        server_disabled(d, &mcp);
        variables_in_args(d, &mcp);
    }
}

/// A file Droid reads, or a finding saying that Droid skips it.
fn load(d: &mut Doctor, path: &std::path::Path, display: &str, what: &str) -> Option<JsonFile> {
    match JsonFile::load(path, display, super::DIALECT) {
        Ok(file) => file,
        Err(refusal) => {
            d.refused(
                AGENT,
                "config-json",
                &crate::edit::Refusal {
                    problem: format!(
                        "{}: Droid drops the whole file without a word, and its {what} with it",
                        refusal.problem
                    ),
                    ..refusal
                },
            );
            None
        }
    }
}

/// `hooks.hooksDisabled: true` turns every hook off, the gate with them.
fn hooks_disabled(d: &mut Doctor, files: [Option<&JsonFile>; 2]) {
    for file in files.into_iter().flatten() {
        if file.get(&["hooks", "hooksDisabled"]) == Some(&Value::Bool(true)) {
            d.push(
                Finding::error(
                    AGENT,
                    "hooks-disabled",
                    format!(
                        "{} sets `hooks.hooksDisabled: true`: Droid runs no hook, so the gate, the session start and recall are off",
                        file.display
                    ),
                )
                .at(
                    &file.display,
                    file.line(&[Step::Key("hooks"), Step::Key("hooksDisabled")]),
                )
                .fix("remove `hooksDisabled` (or set it to false), or turn hooks back on in Droid's /hooks"),
            );
            return;
        }
    }
    d.push(Finding::ok(
        AGENT,
        "hooks-disabled",
        "hooks are on (no `hooksDisabled`)",
    ));
}

/// `.factory/hooks.json` replaces `settings.json`'s hooks event by event: a list there for an
/// event memloop uses hides memloop's.
fn hooks_json(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let name = [".factory/hooks.json", ".factory/hooks/hooks.json"]
        .into_iter()
        .find(|name| root.join(name).is_file());
    let Some(name) = name else { return };
    let Some(file) = load(d, &root.join(name), name, "hooks") else {
        return;
    };
    for event in EVENTS {
        let Some(list) = file.get(&[event]).and_then(Value::as_array) else {
            continue;
        };
        if list.is_empty() {
            continue;
        }
        let command = match event {
            "Stop" => super::HOOK_COMMAND,
            "UserPromptSubmit" => super::PROMPT_COMMAND,
            _ => super::SESSION_START_COMMAND,
        };
        let has_ours = list.iter().any(|group| {
            group
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|hooks| {
                    hooks
                        .iter()
                        .any(|h| h.get("command").and_then(Value::as_str) == Some(command))
                })
        });
        if has_ours {
            continue;
        }
        d.push(
            Finding::error(
                AGENT,
                "hooks-json",
                format!(
                    "{name} has its own `{event}` list, which replaces the one in {SETTINGS_FILE}: Droid never runs `{command}`"
                ),
            )
            .at(name, file.line(&[Step::Key(event)]))
            .fix(format!(
                "move the `{event}` hooks of {name} into {SETTINGS_FILE} (or add memloop's `{command}` to {name}'s list)"
            )),
        );
    }
}

fn server_disabled(d: &mut Doctor, mcp: &JsonFile) {
    let name = d.ctx.server.name.clone();
    if mcp.get(&["mcpServers", &name, "disabled"]) == Some(&Value::Bool(true)) {
        d.push(
            Finding::error(
                AGENT,
                "server-disabled",
                format!("{MCP_FILE} turns `{name}` off (`\"disabled\": true`): Droid never starts memloop's server"),
            )
            .at(
                MCP_FILE,
                mcp.line(&[
                    Step::Key("mcpServers"),
                    Step::Key(&name),
                    Step::Key("disabled"),
                ]),
            )
            .fix(format!("remove `disabled` from `{name}`")),
        );
    }
}

/// Droid 0.215.0 expands `${VAR}` in a server's `env` and `headers` values, but passes `args` as
/// written (xtask/src/e2e/droid_facts.md, "MCP"): the server would get the literal `${VAR}`.
fn variables_in_args(d: &mut Doctor, mcp: &JsonFile) {
    let Some(servers) = mcp.get(&["mcpServers"]).and_then(Value::as_object) else {
        return;
    };
    let mut found = Vec::new();
    for (name, server) in servers {
        let Some(args) = server.get("args").and_then(Value::as_array) else {
            continue;
        };
        for (i, arg) in args.iter().enumerate() {
            if arg.as_str().is_some_and(|arg| arg.contains("${")) {
                found.push((name.clone(), i));
            }
        }
    }
    for (name, i) in found {
        let line = mcp.line(&[
            Step::Key("mcpServers"),
            Step::Key(&name),
            Step::Key("args"),
            Step::Index(i),
        ]);
        d.push(
            Finding::warning(
                AGENT,
                "args-variables",
                format!("`{name}`'s args[{i}] holds `${{...}}`, which Droid passes to the server as written: it expands variables only in `env` and `headers`"),
            )
            .at(MCP_FILE, line)
            .fix("pass the value through the server's environment (\"env\": { \"NAME\": \"${NAME}\" }) and let the server read it there"),
        );
    }
}

/// memloop's gate in the user's `~/.factory/settings.json` too: Droid runs the Stop lists of
/// every level, so each stop would be judged twice.
fn second_gate(d: &mut Doctor, user: &JsonFile) {
    let Some(groups) = user.get(&["hooks", "Stop"]).and_then(Value::as_array) else {
        return;
    };
    for (i, group) in groups.iter().enumerate() {
        let hooks = group.get("hooks").and_then(Value::as_array);
        let Some(j) = hooks.and_then(|hooks| {
            hooks.iter().position(|h| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.contains("memloop hook stop"))
            })
        }) else {
            continue;
        };
        d.push(
            Finding::warning(
                AGENT,
                "second-gate",
                format!(
                    "{} also runs `memloop hook stop`: Droid runs the Stop hooks of every level, so the gate would judge each stop twice",
                    user.display
                ),
            )
            .at(
                &user.display,
                user.line(&[
                    Step::Key("hooks"),
                    Step::Key("Stop"),
                    Step::Index(i),
                    Step::Key("hooks"),
                    Step::Index(j),
                ]),
            )
            .fix(format!("remove that hook; memloop's is in {SETTINGS_FILE}")),
        );
        return;
    }
}

/// Droid's TUI runs no project hook in a folder the user has not trusted (`trustedFolders` in
/// `~/.factory/settings.json`, keyed by the folder or a parent); it asks on its first start
/// there. `droid exec` runs them in any folder. memloop writes no trust of its own.
fn trusted_folder(d: &mut Doctor, user: Option<&JsonFile>) {
    let root = std::fs::canonicalize(&d.repo.root).unwrap_or_else(|_| d.repo.root.clone());
    let trusted = user
        .and_then(|user| user.get(&["trustedFolders"]))
        .and_then(Value::as_object)
        .is_some_and(|folders| {
            folders
                .keys()
                .any(|folder| root.starts_with(std::path::Path::new(folder)))
        });
    let finding = match trusted {
        true => Finding::ok(AGENT, "trust", "this folder is trusted in Droid's TUI"),
        false => Finding::info(
            AGENT,
            "trust",
            "this folder is not trusted in Droid's TUI yet: Droid asks on its first start here and runs no project hook (the gate, the index, recall) until you say yes; `droid exec` runs them regardless",
        ),
    };
    d.push(finding);
}
