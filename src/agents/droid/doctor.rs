//! Droid's whole files, as Droid 0.215.0 reads them (xtask/src/e2e/droid_facts.md):
//! - `.factory/settings.json` and `.factory/mcp.json`: JSON with comments, no trailing commas; a
//!   file that does not parse is dropped without a word (its hooks, its servers).
//! - `.factory/hooks.json` (else the legacy `.factory/hooks/hooks.json`): its hooks replace those
//!   of `settings.json` event by event, so a `Stop` list there hides memloop's gate.
//! - `hooks.hooksDisabled: true` in the project's or the user's `settings.json` turns every hook
//!   off; `settings.local.json` holds no hooks Droid runs.
//! - `"disabled": true` on memloop's server entry keeps it from starting.
//! - Rules: every one of `CLAUDE.md` and `AGENTS.md` is read, once per real file.

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
    if let Some(mcp) = load(d, &root.join(MCP_FILE), MCP_FILE, "servers") {
        server_disabled(d, &mcp);
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
