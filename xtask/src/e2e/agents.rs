//! What each real agent needs in a sandbox besides memloop's own files: what a user would have
//! done once (onboarding, trusting the folder, a model provider), set up the way e2e-findings.md
//! found to work.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::json;

use super::sandbox::Sandbox;
use super::tools::Tools;

/// Claude Code: onboarding done and the repo trusted (as after the first interactive start).
/// `approve_project_servers` also approves `.mcp.json`'s `memory` in the user's settings, which
/// `claude mcp list` needs when its output is piped (a repo cannot approve its own servers).
pub fn claude(sb: &Sandbox, approve_project_servers: bool) -> Result<()> {
    let state = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "bypassPermissionsModeAccepted": true,
        "projects": {sb.repo.to_string_lossy(): {"hasTrustDialogAccepted": true}},
    });
    std::fs::write(sb.claude_config.join(".claude.json"), state.to_string())?;
    if approve_project_servers {
        std::fs::write(
            sb.claude_config.join("settings.json"),
            json!({"enabledMcpjsonServers": ["memory"]}).to_string(),
        )?;
    }
    Ok(())
}

/// OpenCode: the `@opencode-ai/plugin` install it runs into every writable config dir once a
/// plugin exists, pre-done from the cache (node_modules linked, the two small files copied so
/// OpenCode never writes into the cache), plus an optional fake provider in the user config.
pub fn opencode(sb: &Sandbox, tools: &Tools, fake_base_url: Option<&str>) -> Result<()> {
    let global = sb.xdg_config.join("opencode");
    for dir in [global.clone(), sb.repo.join(".opencode")] {
        std::fs::create_dir_all(&dir)?;
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(tools.opencode_plugin_deps.join(file), dir.join(file))
                .with_context(|| format!("copying {file} into {}", dir.display()))?;
        }
        let nm = dir.join("node_modules");
        if !nm.exists() {
            std::os::unix::fs::symlink(tools.opencode_plugin_deps.join("node_modules"), &nm)?;
        }
    }
    if let Some(base) = fake_base_url {
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "fake/fake-model",
            "small_model": "fake/fake-model",
            "autoupdate": false,
            "share": "disabled",
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-e2e"},
                "models": {"fake-model": {"name": "Fake Model", "tool_call": true}},
            }},
        });
        std::fs::write(
            global.join("opencode.json"),
            serde_json::to_string_pretty(&config)?,
        )?;
    }
    Ok(())
}

/// Kimi Code: the repo pre-trusted (kimi.md section 2), so `-p` loads the project `mcp.json`.
pub fn kimi_trust(sb: &Sandbox) -> Result<()> {
    let dir = sb.kimi_home.join("workspace-trust");
    std::fs::create_dir_all(&dir)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    std::fs::write(
        dir.join(memloop::agents::kimi::trust_key(&sb.repo)),
        json!({"root": sb.repo.to_string_lossy(), "trustedAt": now}).to_string(),
    )?;
    Ok(())
}

/// Environment for Kimi's model from a fake OpenAI-compatible server.
pub fn kimi_model_env(sb: &mut Sandbox, base_url: &str) {
    sb.set_env("KIMI_MODEL_NAME", "fake-model");
    sb.set_env("KIMI_MODEL_API_KEY", "sk-e2e");
    sb.set_env("KIMI_MODEL_PROVIDER_TYPE", "openai");
    sb.set_env("KIMI_MODEL_BASE_URL", format!("{base_url}/v1"));
}
