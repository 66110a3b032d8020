//! `doctor --live` for Copilot: `copilot mcp list --json` must list memloop's server from the
//! workspace, enabled (an untrusted folder lists no workspace server), and
//! `copilot instruction list --json` must show the memory rules in exactly one source.

use std::path::Path;

use serde_json::Value;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, exit_text, run};
use crate::doctor::{Agent, Doctor, Finding};

const AGENT: AgentId = AgentId::Copilot;

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    if let Some(listed) = ask(d, program, &["mcp", "list", "--json"]) {
        mcp(d, &listed);
    }
    if let Some(listed) = ask(d, program, &["instruction", "list", "--json"]) {
        instructions(d, &listed);
    }
}

/// The JSON `copilot <args>` prints, or a finding saying why there is none.
fn ask(d: &mut Doctor, program: &Path, args: &[&str]) -> Option<Value> {
    let shown = format!("copilot {}", args.join(" "));
    let out = match run(program, args, &d.repo.root, d.options.timeout) {
        Ok(out) => out,
        Err(why) => {
            d.push(Finding::error(AGENT, "live", why).fix("run it by hand to see why"));
            return None;
        }
    };
    let parsed = serde_json::from_str::<Value>(out.stdout.trim()).ok();
    match parsed {
        Some(value) if out.code == Some(0) => Some(value),
        _ => {
            d.push(
                Finding::error(
                    AGENT,
                    "live",
                    format!(
                        "`{shown}` failed ({}): {}",
                        exit_text(out.code),
                        excerpt(&format!("{}\n{}", out.stdout, out.stderr), 12)
                    ),
                )
                .fix(format!("run `{shown}` and fix what it names")),
            );
            None
        }
    }
}

fn mcp(d: &mut Doctor, listed: &Value) {
    let name = d.ctx.server.name.clone();
    let shown = "copilot mcp list --json";
    let server = listed.get("mcpServers").and_then(|all| all.get(&name));
    let finding = match server {
        Some(server) if server["enabled"] == Value::Bool(false) => Finding::error(
            AGENT,
            "live",
            format!("`{shown}` shows `{name}` disabled"),
        )
        .fix(format!("run `copilot mcp enable {name}`, or remove it from disabledMcpServers in ~/.copilot/config.json")),
        Some(server) if server["source"] != "workspace" => Finding::warning(
            AGENT,
            "live",
            format!(
                "`{shown}` loads `{name}` from {} ({}), not from the repository's .mcp.json: that entry shadows memloop's",
                server["source"], server["sourcePath"]
            ),
        )
        .fix(format!("remove `{name}` there, or rename memloop's server ([server] name in memloop.toml)")),
        Some(server) => Finding::ok(
            AGENT,
            "live",
            format!("`{shown}` loads `{name}` from {}", server["sourcePath"].as_str().unwrap_or(".mcp.json")),
        ),
        None => d.by_trust(Finding::error(
            AGENT,
            "live",
            format!("`{shown}` does not list `{name}`: the folder is not trusted in ~/.copilot/config.json (trustedFolders), or .mcp.json lacks the entry"),
        )),
    };
    d.push(finding);
}

/// Each source Copilot lists names one file or several it merged (`AGENTS.md + CLAUDE.md`).
fn instructions(d: &mut Doctor, listed: &Value) {
    let shown = "copilot instruction list --json";
    let root = d.repo.root.clone();
    let holding: Vec<String> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|source| source["location"] == "repository")
        .filter_map(|source| source["sourcePath"].as_str())
        .filter(|label| {
            label.split(" + ").any(|file| {
                crate::files::read_text(&root.join(file.trim()))
                    .is_ok_and(|text| crate::instructions::RULES.lines().all(|l| text.contains(l)))
            })
        })
        .map(str::to_owned)
        .collect();
    let finding = match holding.as_slice() {
        [] => Finding::error(
            AGENT,
            "live-instructions",
            format!("`{shown}` shows no repository source holding the memory rules"),
        )
        .by_sync(d.sync_command(false)),
        [one] => Finding::ok(
            AGENT,
            "live-instructions",
            format!("`{shown}` reads the memory rules once, from {one}"),
        ),
        many => Finding::warning(
            AGENT,
            "live-instructions",
            format!("`{shown}` reads the memory rules {} times: {}", many.len(), many.join(", ")),
        )
        .fix("keep the rules in one file: make AGENTS.md a symlink to CLAUDE.md (layout = \"symlink\")"),
    };
    d.push(finding);
}
