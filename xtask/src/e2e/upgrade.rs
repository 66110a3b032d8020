//! Scenario "upgrade": a repository and home holding what older memloops and older agents left
//! (legacy shapes for all five agents), `memloop upgrade --user-scope`, then the pinned real
//! agents load the result: `claude mcp get memory`, `opencode debug config`, `kimi doctor config`
//! `codex features list` (hooks on under its current name), `gemini mcp list` (one hook switch left), and a `kimi -p` run that must offer memloop's MCP tool (Kimi Code drops every file-declared
//! server while one entry says `streamable-http`; the user's own hook carried from
//! `~/.kimi/config.toml` runs in it). Afterwards `memloop diff` finds nothing left
//! for sync to do and a second upgrade finds nothing.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::config::{expect, kimi_has_stop_hook, read_json};
use super::sandbox::Sandbox;
use super::{Ctx, Missing, agents};

const RULES: &str = include_str!("../../../assets/rules.md");
const PLUGIN: &str = include_str!("../../../assets/opencode-plugin.js");

/// The migrations the legacy world below must trigger.
const EXPECTED: &[&str] = &[
    "memloop-block-marker",
    "claude-hook-shape",
    "opencode-plugin-dir",
    "opencode-config-twins",
    "kimi-legacy-to-code",
    "kimi-legacy-hooks",
    "kimi-streamable-http",
    "kimi-tool-names",
    "codex-hooks-feature",
    "gemini-hooks-switch",
    "gemini-session-start",
];

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn pretty(value: Value) -> String {
    serde_json::to_string_pretty(&value).expect("serializes") + "\n"
}

/// What an older memloop (and older agents) left behind.
fn legacy_world(sb: &Sandbox) -> Result<()> {
    let repo = &sb.repo;
    write(
        &repo.join("memloop.toml"),
        "version = 1\nagents = [\"claude\", \"opencode\", \"kimi\", \"codex\", \"gemini\"]\n",
    )?;
    write(
        &repo.join("CLAUDE.md"),
        &format!("# e2e\n\n<!-- memloop:begin -->\n{RULES}<!-- memloop:end -->\n"),
    )?;
    std::os::unix::fs::symlink("CLAUDE.md", repo.join("AGENTS.md"))?;
    write(
        &repo.join(".mcp.json"),
        &pretty(
            json!({"mcpServers": {"memory": {"type": "stdio", "command": "memloop", "args": ["serve"]}}}),
        ),
    )?;
    // A flat handler list: Claude Code rejects the whole file.
    write(
        &repo.join(".claude/settings.json"),
        &pretty(
            json!({"hooks": {"Stop": [{"type": "command", "command": "memloop hook stop --agent claude"}]}}),
        ),
    )?;
    write(
        &repo.join("opencode.json"),
        &pretty(json!({"$schema": "https://opencode.ai/config.json",
            "mcp": {"memory": {"type": "local", "command": ["memloop", "serve"], "enabled": true}}})),
    )?;
    write(
        &repo.join("opencode.jsonc"),
        "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  // the team's settings\n  \"instructions\": [\"README.md\"],\n}\n",
    )?;
    write(&repo.join(".opencode/plugin/memloop.js"), PLUGIN)?;
    let legacy = sb.home.join(".kimi");
    write(
        &legacy.join("config.toml"),
        &format!(
            "# kimi-cli\ndefault_model = \"k\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n\n\
             # the user's own, which Kimi Code never runs from here\n\
             [[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"WriteFile\"\ncommand = \"exit 0\"\n\n\
             [[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"echo carried > {}\"\n",
            carried_marker(sb).display()
        ),
    )?;
    write(
        &legacy.join("mcp.json"),
        &pretty(
            json!({"mcpServers": {"memory": {"transport": "stdio", "command": "memloop", "args": ["serve"]}}}),
        ),
    )?;
    // What `kimi migrate` leaves: hook matchers copied verbatim, no memloop hook.
    write(
        &sb.kimi_home.join("config.toml"),
        "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Shell\"\ncommand = \"true\"\n",
    )?;
    write(
        &sb.kimi_home.join("mcp.json"),
        &pretty(
            json!({"mcpServers": {"docs": {"transport": "streamable-http", "url": "http://127.0.0.1:9/docs"}}}),
        ),
    )?;
    Ok(())
}

/// Written by the user's legacy UserPromptSubmit hook once Kimi Code runs it.
fn carried_marker(sb: &Sandbox) -> std::path::PathBuf {
    sb.root.join("carried-kimi-hook-ran")
}

pub fn legacy(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let help = sb.run("memloop", &["upgrade", "--help"], Duration::from_secs(30))?;
    if !help.success() || !help.stdout.contains("--dry-run") {
        return Err(Missing(format!(
            "`memloop upgrade --help` does not offer --dry-run: {}",
            help.stderr.trim()
        ))
        .into());
    }
    ctx.caps.need_serve()?;
    legacy_world(sb)?;
    super::codex::legacy_world(sb)?;
    super::gemini_memloop::legacy_world(sb)?;

    let dry = sb.run(
        "memloop",
        &["upgrade", "--dry-run", "--user-scope"],
        ctx.timeout,
    )?;
    expect(dry.success(), "`memloop upgrade --dry-run` failed", &dry)?;
    for id in EXPECTED {
        expect(
            dry.stdout.contains(id),
            &format!("`memloop upgrade --dry-run` does not list {id}"),
            &dry,
        )?;
    }
    expect(
        std::fs::read_to_string(sb.home.join(".kimi/config.toml"))?.contains("memloop hook stop"),
        "`memloop upgrade --dry-run` wrote ~/.kimi/config.toml",
        &dry,
    )?;
    let up = sb.run("memloop", &["upgrade", "--user-scope"], ctx.timeout)?;
    expect(up.success(), "`memloop upgrade --user-scope` failed", &up)?;
    println!("      upgraded: {}", EXPECTED.join(", "));

    claude(ctx, sb)?;
    opencode(ctx, sb)?;
    kimi(ctx, sb)?;
    super::codex::after_upgrade(ctx, sb)?;
    super::gemini_memloop::after_upgrade(ctx, sb)?;

    let diff = sb.run("memloop", &["diff"], ctx.timeout)?;
    expect(
        diff.success(),
        "`memloop diff` after the upgrade still finds drift: upgrade and sync disagree",
        &diff,
    )?;
    let again = sb.run("memloop", &["upgrade", "--user-scope"], ctx.timeout)?;
    expect(
        again.success() && again.stdout.contains("nothing to upgrade"),
        "a second `memloop upgrade` still found something",
        &again,
    )
}

fn claude(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    agents::claude(sb, false)?;
    let out = sb.run(
        ctx.tools.bin.join("claude"),
        &["mcp", "get", "memory"],
        ctx.timeout,
    )?;
    expect(out.success(), "`claude mcp get memory` failed", &out)?;
    let text = format!("{}{}", out.stdout, out.stderr);
    expect(
        text.contains("Project config") && text.contains("memloop") && text.contains("stdio"),
        "`claude mcp get memory` does not show memloop's stdio server from .mcp.json",
        &out,
    )?;
    let settings = read_json(&sb.repo.join(".claude/settings.json"))?;
    let groups = settings
        .pointer("/hooks/Stop")
        .and_then(Value::as_array)
        .context(".claude/settings.json has no hooks.Stop array after the upgrade")?;
    let valid = groups.iter().all(|g| {
        g.get("matcher").is_none_or(Value::is_string)
            && g.get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|hs| hs.iter().all(|h| h.get("type").is_some()))
    });
    let ours = groups.iter().any(|g| {
        g.pointer("/hooks/0/command").and_then(Value::as_str)
            == Some("memloop hook stop --agent claude")
    });
    if !valid || !ours {
        bail!("hooks.Stop is not the nested shape holding memloop's gate: {settings}");
    }
    Ok(())
}

fn opencode(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    agents::opencode(sb, &ctx.tools, None)?;
    if sb.repo.join(".opencode/plugin/memloop.js").exists()
        || !sb.repo.join(".opencode/plugins/memloop.js").exists()
    {
        bail!("the gate plugin was not moved from .opencode/plugin/ to .opencode/plugins/");
    }
    let before = std::fs::read(sb.repo.join("opencode.jsonc"))?;
    let entry = super::config::resolved_memory_entry(ctx, sb, "the upgraded config")?;
    if entry.get("type") != Some(&json!("local"))
        || entry.get("command") != Some(&json!(["memloop", "serve"]))
    {
        bail!("opencode resolved mcp.memory to {entry}, expected local [memloop, serve]");
    }
    let json = read_json(&sb.repo.join("opencode.json"))?;
    if json.pointer("/mcp/memory").is_some() {
        bail!("opencode.json still holds mcp.memory next to opencode.jsonc: {json}");
    }
    if std::fs::read(sb.repo.join("opencode.jsonc"))? != before {
        bail!("OpenCode rewrote opencode.jsonc on load (it does so when `$schema` is missing)");
    }
    Ok(())
}

fn kimi(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let out = sb.run(
        ctx.tools.bin.join("kimi"),
        &["doctor", "config"],
        ctx.timeout,
    )?;
    expect(
        out.success(),
        "`kimi doctor config` reported a problem",
        &out,
    )?;
    expect(
        !format!("{}{}", out.stdout, out.stderr).contains("Ignored invalid config section"),
        "Kimi ignores a config section after the upgrade",
        &out,
    )?;
    let config = std::fs::read_to_string(sb.kimi_home.join("config.toml"))?;
    if !kimi_has_stop_hook(&config) || !config.contains("matcher = \"Bash\"") {
        bail!(
            "$KIMI_CODE_HOME/config.toml lacks memloop's Stop hook or the renamed matcher:\n{config}"
        );
    }
    if !config.contains("matcher = \"Write\"\ncommand = \"exit 0\"")
        || !config.contains("echo carried")
    {
        bail!(
            "$KIMI_CODE_HOME/config.toml lacks the user's hooks carried from ~/.kimi/config.toml (kimi-legacy-hooks):\n{config}"
        );
    }
    let legacy = std::fs::read_to_string(sb.home.join(".kimi/config.toml"))?;
    if legacy.contains("memloop hook stop")
        || !legacy.contains("default_model = \"k\"")
        || !legacy.contains("matcher = \"WriteFile\"")
    {
        bail!(
            "~/.kimi/config.toml should keep the user's settings and lose memloop's hook:\n{legacy}"
        );
    }
    // doctor does not read mcp.json: one prompt shows which MCP tools Kimi really loaded.
    let super::connected::KimiRun {
        offered, report, ..
    } = super::connected::kimi_offers_memory(ctx, sb)?;
    if !offered {
        bail!("after the upgrade Kimi offered no mcp__memory__memory_store\n{report}");
    }
    if !carried_marker(sb).exists() {
        bail!(
            "Kimi Code did not run the UserPromptSubmit hook carried from ~/.kimi/config.toml\n{report}"
        );
    }
    // Control: with the `streamable-http` entry put back, Kimi Code drops every file-declared
    // server, memloop's included (research/kimi.md section 2), which is why it is migrated.
    let user_mcp = sb.kimi_home.join("mcp.json");
    let upgraded = std::fs::read_to_string(&user_mcp)?;
    write(
        &user_mcp,
        &upgraded.replace("\"http\"", "\"streamable-http\""),
    )?;
    let super::connected::KimiRun {
        offered, report, ..
    } = super::connected::kimi_offers_memory(ctx, sb)?;
    write(&user_mcp, &upgraded)?;
    if offered {
        bail!(
            "control failed: Kimi offered memloop's tool although ~/.kimi-code/mcp.json holds a \
             streamable-http entry; kimi-streamable-http may no longer be needed for this Kimi\n{report}"
        );
    }
    Ok(())
}
