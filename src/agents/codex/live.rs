//! `doctor --live` for Codex: `codex mcp list --json` must list memloop's server (an untrusted
//! project gives `[]`), and `codex features list` must show `hooks` on.

use std::path::Path;

use serde_json::Value;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, exit_text, run};
use crate::doctor::{Agent, Doctor, Finding};

const AGENT: AgentId = AgentId::Codex;

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    mcp_list(d, program);
    features(d, program);
}

fn mcp_list(d: &mut Doctor, program: &Path) {
    let out = match run(
        program,
        &["mcp", "list", "--json"],
        &d.repo.root,
        d.options.timeout,
    ) {
        Ok(out) => out,
        Err(why) => {
            return d.push(Finding::error(AGENT, "live", why).fix("run it by hand to see why"));
        }
    };
    if out.code != Some(0) {
        return d.push(
            Finding::error(
                AGENT,
                "live",
                format!(
                    "`codex mcp list --json` failed ({}): {}",
                    exit_text(out.code),
                    excerpt(&format!("{}\n{}", out.stdout, out.stderr), 12)
                ),
            )
            .fix("run `codex mcp list` and fix what it names"),
        );
    }
    let name = d.ctx.server.name.clone();
    let listed: Option<Value> = serde_json::from_str(out.stdout.trim()).ok();
    let server = listed
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|s| s["name"] == name.as_str()));
    let finding = match server {
        Some(server) if server["enabled"] == Value::Bool(false) => Finding::error(
            AGENT,
            "live",
            format!("`codex mcp list --json` shows `{name}` disabled: {}", server["disabled_reason"]),
        )
        .fix("remove `enabled = false` from its table"),
        Some(server) => Finding::ok(
            AGENT,
            "live",
            format!("`codex mcp list --json` loads `{name}` ({})", server["transport"]["type"]),
        ),
        None => Finding::error(
            AGENT,
            "live",
            format!("`codex mcp list --json` does not list `{name}`: the project is not trusted in your Codex user config, or .codex/config.toml lacks it"),
        )
        .by_sync(d.sync_command(true)),
    };
    d.push(finding);
}

fn features(d: &mut Doctor, program: &Path) {
    let Ok(out) = run(
        program,
        &["features", "list"],
        &d.repo.root,
        d.options.timeout,
    ) else {
        return;
    };
    let line = out
        .stdout
        .lines()
        .find(|l| matches!(l.split_whitespace().next(), Some("hooks" | "codex_hooks")));
    let finding = match line.and_then(|l| l.split_whitespace().last()) {
        Some("true") => Finding::ok(AGENT, "live-hooks", "`codex features list` shows hooks on"),
        Some(_) => Finding::error(
            AGENT,
            "live-hooks",
            format!("`codex features list` shows hooks off ({}): the Stop gate never runs", line.unwrap_or("").trim()),
        )
        .fix("set `hooks = true` under [features] in ~/.codex/config.toml"),
        None => Finding::warning(
            AGENT,
            "live-hooks",
            "`codex features list` names no hooks feature: this Codex may be too old for hooks (Stop arrived in 0.114.0)",
        )
        .fix("update Codex (npm i -g @openai/codex)"),
    };
    d.push(finding);
}
