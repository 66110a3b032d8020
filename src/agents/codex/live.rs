//! `doctor --live` for Codex: `codex mcp list --json` must list memloop's server (an untrusted
//! project gives `[]`), `codex features list` must show `hooks` on, and `codex app-server`'s
//! `hooks/list` must report memloop's hooks trusted: Codex skips an untrusted or modified hook
//! without a word, and no other command shows it.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{trust, trusted_root};
use crate::config::AgentId;
use crate::doctor::live::{Conversation, excerpt, exit_text, run};
use crate::doctor::{Agent, Doctor, Finding};

const AGENT: AgentId = AgentId::Codex;

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    mcp_list(d, program);
    features(d, program);
    hooks_trusted(d, program);
}

fn hooks_trusted(d: &mut Doctor, program: &Path) {
    let root = trusted_root(d.ctx.root);
    let listed = match hooks_list(program, &root, d.options.timeout) {
        Ok(listed) => listed,
        Err(why) => {
            return d.push(
                Finding::warning(
                    AGENT,
                    "live-hooks-trust",
                    format!("could not ask Codex which hooks it trusts: {why}"),
                )
                .fix("update Codex (npm i -g @openai/codex); 0.171.0 answers `hooks/list`"),
            );
        }
    };
    let mut trusted = Vec::new();
    for handler in trust::handlers(&d.ctx) {
        if !handler.wanted {
            continue;
        }
        let key = handler.key(&root);
        let hook = listed.iter().find(|hook| hook["key"] == key.as_str());
        let status = hook.and_then(|hook| hook["trustStatus"].as_str());
        let hash = hook.and_then(|hook| hook["currentHash"].as_str());
        let problem = match (status, hash) {
            (Some("trusted"), Some(hash)) if hash == handler.hash => {
                trusted.push(handler.event);
                continue;
            }
            (Some("trusted"), _) => format!(
                "trusts memloop's {} hook by another hash than memloop's: the hooks file was edited",
                handler.event
            ),
            (Some(status), _) => format!(
                "shows memloop's {} hook {status}: Codex skips it without a word",
                handler.event
            ),
            (None, _) => format!(
                "does not list memloop's {} hook under {key}: .codex/hooks.json lacks it, or the project is not trusted",
                handler.event
            ),
        };
        d.push(d.by_trust(Finding::error(
            AGENT,
            "live-hooks-trust",
            format!("`codex app-server` hooks/list {problem}"),
        )));
    }
    if !trusted.is_empty() {
        d.push(Finding::ok(
            AGENT,
            "live-hooks-trust",
            format!(
                "`codex app-server` hooks/list trusts memloop's {} hook{}",
                trusted.join(", "),
                if trusted.len() == 1 { "" } else { "s" }
            ),
        ));
    }
}

/// The hooks Codex finds for `root`, as `codex app-server` reports them: `initialize`, the
/// `initialized` notice, then `hooks/list` (Codex 0.171.0).
fn hooks_list(program: &Path, root: &Path, timeout: Duration) -> Result<Vec<Value>, String> {
    let mut server = Conversation::start(program, &["app-server"], root, timeout)?;
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "memloop-doctor", "version": env!("CARGO_PKG_VERSION")}}}))?;
    server.answer(1)?;
    server.send(&json!({"jsonrpc": "2.0", "method": "initialized"}))?;
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
        "params": {"cwds": [root]}}))?;
    let answer = server.answer(2)?;
    if let Some(error) = answer.get("error") {
        return Err(format!("hooks/list answered an error: {error}"));
    }
    let entry = answer
        .pointer("/result/data/0")
        .ok_or_else(|| format!("hooks/list answered without data: {answer}"))?;
    Ok(entry["hooks"].as_array().cloned().unwrap_or_default())
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
