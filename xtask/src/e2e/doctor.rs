//! Scenario "doctor-live": `memloop doctor --live` asks the real agents what they load and
//! probes the embedded server (Codex and Gemini included); every live verdict must be ok on a correctly installed repo,
//! Codex's hooks/list trust of memloop's three hooks among them.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::sandbox::Sandbox;
use super::{Ctx, agents, memloop};

pub fn live(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    // Codex, Gemini CLI, Qwen Code and Copilot too, with the user configs `memloop trust` adds
    // their trust entries, approval and folder trust to (Copilot's config.json memloop creates).
    super::codex::set_up_harness(sb, None)?;
    super::qwen::set_up_user(sb, None, false)?;
    super::gemini_memloop::set_up_harness(sb, None)?;
    let config = sb.repo.join("memloop.toml");
    let text = std::fs::read_to_string(&config)?;
    let with_codex = text.replace(
        "\"kimi\"]",
        "\"kimi\", \"codex\", \"gemini\", \"qwen\", \"copilot\"]",
    );
    // Copilot offline: `copilot mcp list` and `instruction list` need no network.
    sb.set_env("COPILOT_OFFLINE", "true");
    if with_codex == text {
        bail!("memloop.toml names no agents list to add codex to:\n{text}");
    }
    std::fs::write(&config, with_codex)?;
    let out = sb.run("memloop", &["sync", "--user-scope"], ctx.timeout)?;
    if !out.success() {
        bail!(
            "`memloop sync --user-scope` with codex, gemini and qwen failed\n{}",
            out.report()
        );
    }
    let out = sb.run("memloop", &["trust", "--yes"], ctx.timeout)?;
    if !out.success() {
        bail!(
            "`memloop trust --yes` with codex, gemini and qwen failed\n{}",
            out.report()
        );
    }
    // What a user does once: approve the project server in Claude Code, trust the folder in Kimi.
    agents::claude(sb, true)?;
    agents::opencode(sb, &ctx.tools, None)?;
    agents::kimi_trust(sb)?;
    let out = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        ctx.timeout * 3,
    )?;
    let report: Value = serde_json::from_str(&out.stdout).with_context(|| {
        format!(
            "`memloop doctor --live --format json` printed no JSON\n{}",
            out.report()
        )
    })?;
    let findings = report["findings"]
        .as_array()
        .context("the report has no findings")?;
    let live: Vec<&Value> = findings
        .iter()
        .filter(|f| matches!(f["id"].as_str(), Some(id) if id.ends_with(".live") || id == "codex.live-hooks" || id == "codex.live-hooks-trust" || id == "copilot.live-instructions" || id == "memloop.server-probe"))
        .collect();
    let failed: Vec<String> = live
        .iter()
        .filter(|f| f["severity"] != "ok")
        .map(|f| format!("{} {}: {}", f["severity"], f["id"], f["message"]))
        .collect();
    if !failed.is_empty() {
        bail!(
            "live checks that are not ok on a correct install:\n{}\n{}",
            failed.join("\n"),
            out.report()
        );
    }
    let seen: BTreeSet<&str> = live.iter().filter_map(|f| f["id"].as_str()).collect();
    for id in [
        "claude.live",
        "opencode.live",
        "kimi.live",
        "codex.live",
        "codex.live-hooks-trust",
        "qwen.live",
        "gemini.live",
        "copilot.live",
        "copilot.live-instructions",
        "memloop.server-probe",
    ] {
        if !seen.contains(id) {
            bail!(
                "`memloop doctor --live` reported no `{id}` verdict\n{}",
                out.report()
            );
        }
    }
    // Codex's hooks/list, through `codex app-server`, is the only place that shows whether Codex
    // trusts memloop's hooks; all three are installed here.
    let trusted = live
        .iter()
        .find(|f| f["id"] == "codex.live-hooks-trust")
        .and_then(|f| f["message"].as_str())
        .unwrap_or_default();
    if !trusted.ends_with("Stop, SessionStart, UserPromptSubmit hooks") {
        bail!("codex.live-hooks-trust does not name memloop's three hooks: {trusted}");
    }
    if !out.success() {
        bail!(
            "`memloop doctor --live` found errors on a correct install\n{}",
            out.report()
        );
    }
    codex_hook_modified(ctx, sb)
}

/// A changed timeout on memloop's Codex Stop handler changes its hash: the real Codex reports
/// the hook `modified` (and would skip it without a word), and doctor says so.
fn codex_hook_modified(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let hooks_json = sb.repo.join(".codex/hooks.json");
    let mut hooks: Value = serde_json::from_str(&std::fs::read_to_string(&hooks_json)?)?;
    let handler = hooks
        .pointer_mut("/hooks/Stop/0/hooks/0")
        .context(".codex/hooks.json has no Stop handler")?;
    handler["timeout"] = Value::from(handler["timeout"].as_u64().unwrap_or(30) + 1);
    std::fs::write(&hooks_json, serde_json::to_string_pretty(&hooks)? + "\n")?;
    let out = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        ctx.timeout * 3,
    )?;
    let report: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("doctor printed no JSON\n{}", out.report()))?;
    let modified = report["findings"].as_array().is_some_and(|all| {
        all.iter().any(|f| {
            f["id"] == "codex.live-hooks-trust"
                && f["severity"] == "error"
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Stop hook modified"))
        })
    });
    if !modified {
        bail!(
            "after memloop's Stop handler's timeout changed, doctor --live did not report the hook modified\n{}",
            out.report()
        );
    }
    println!(
        "   doctor --live: Codex reports memloop's Stop hook modified after its timeout changed"
    );
    Ok(())
}
