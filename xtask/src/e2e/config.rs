//! Scenario "config accepted": after `memloop init`, each real agent loads what memloop wrote
//! (`claude mcp get`, `opencode debug config`, `kimi doctor config`), with the embedded server
//! or a remote URL.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::proc::Output;
use super::sandbox::Sandbox;
use super::{Ctx, agents, memloop};

pub const REMOTE_URL: &str = "http://127.0.0.1:9/mcp";

pub fn claude(ctx: &Ctx, sb: &mut Sandbox, url: Option<&str>) -> Result<()> {
    memloop::install(sb, &ctx.caps, ctx.hand_written, url)?;
    agents::claude(sb, false)?;
    let out = sb.run(
        ctx.tools.bin.join("claude"),
        &["mcp", "get", "memory"],
        ctx.timeout,
    )?;
    expect(out.success(), "`claude mcp get memory` failed", &out)?;
    let text = format!("{}{}", out.stdout, out.stderr);
    expect(
        text.contains("Project config"),
        "`claude mcp get memory` does not show the server in project scope (.mcp.json)",
        &out,
    )?;
    let wanted = match url {
        Some(url) => url.to_string(),
        None => "memloop".into(),
    };
    expect(
        text.contains(&wanted),
        &format!("`claude mcp get memory` does not show {wanted:?}"),
        &out,
    )?;
    if url.is_some() {
        expect(
            text.contains("http"),
            "`claude mcp get memory` does not show the remote server as type http",
            &out,
        )?;
    } else {
        expect(
            text.contains("stdio"),
            "`claude mcp get memory` does not show a stdio server",
            &out,
        )?;
    }
    // The Stop gate: Claude Code has no offline validator for settings; the gate scenario
    // checks that it really runs. Here: the file is strict JSON and names the gate.
    let settings = read_json(&sb.repo.join(".claude/settings.json"))?;
    let groups = settings
        .pointer("/hooks/Stop")
        .and_then(Value::as_array)
        .context(".claude/settings.json has no hooks.Stop array")?;
    let found = groups.iter().any(|g| {
        g.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
            hs.iter().any(|h| {
                h.get("type").and_then(Value::as_str) == Some("command")
                    && h.to_string().contains("hook")
                    && h.to_string().contains("stop")
            })
        })
    });
    if !found {
        bail!(
            ".claude/settings.json hooks.Stop has no command hook running `memloop hook stop`: {settings}"
        );
    }
    Ok(())
}

pub fn opencode(ctx: &Ctx, sb: &mut Sandbox, url: Option<&str>) -> Result<()> {
    memloop::install(sb, &ctx.caps, ctx.hand_written, url)?;
    agents::opencode(sb, &ctx.tools, None)?;
    let file = ["opencode.jsonc", "opencode.json"]
        .into_iter()
        .map(|f| sb.repo.join(f))
        .find(|p| p.exists())
        .context("memloop wrote neither opencode.jsonc nor opencode.json in the repo")?;
    let before = std::fs::read(&file)?;
    let entry = resolved_memory_entry(ctx, sb, "the config")?;
    match url {
        None => {
            let ok = entry.get("type") == Some(&Value::from("local"))
                && entry.get("command") == Some(&serde_json::json!(["memloop", "serve"]));
            if !ok {
                bail!(
                    "opencode resolved mcp.memory to {entry}, expected type local with command [\"memloop\",\"serve\"]"
                );
            }
        }
        Some(url) => {
            let ok = entry.get("type") == Some(&Value::from("remote"))
                && entry.get("url") == Some(&Value::from(url));
            if !ok {
                bail!(
                    "opencode resolved mcp.memory to {entry}, expected type remote with url {url}"
                );
            }
        }
    }
    if entry.get("enabled") == Some(&Value::Bool(false)) {
        bail!("opencode resolved mcp.memory as disabled: {entry}");
    }
    let after = std::fs::read(&file)?;
    if before != after {
        bail!(
            "OpenCode rewrote {} on load (it does so when `$schema` is missing)\n--- memloop wrote ---\n{}\n--- after opencode ---\n{}",
            file.display(),
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        );
    }
    Ok(())
}

pub fn kimi(ctx: &Ctx, sb: &mut Sandbox, url: Option<&str>) -> Result<()> {
    memloop::install(sb, &ctx.caps, ctx.hand_written, url)?;
    let config_path = sb.kimi_home.join("config.toml");
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
    let text = format!("{}{}", out.stdout, out.stderr);
    expect(
        !text.contains("Ignored invalid config section"),
        "Kimi ignores a config section memloop wrote",
        &out,
    )?;
    expect(
        !text.contains("File does not exist"),
        "`kimi doctor config` found no config.toml: memloop init --user-scope did not write $KIMI_CODE_HOME/config.toml",
        &out,
    )?;
    let toml = std::fs::read_to_string(&config_path)
        .with_context(|| format!("reading {}", config_path.display()))?;
    if !kimi_has_stop_hook(&toml) {
        bail!(
            "{} has no [[hooks]] entry with event = \"Stop\" running `memloop hook stop`:\n{toml}",
            config_path.display()
        );
    }
    let mcp_path = sb.repo.join(".kimi-code/mcp.json");
    let mcp = read_json(&mcp_path)?;
    let entry = mcp
        .pointer("/mcpServers/memory")
        .with_context(|| format!("{} has no mcpServers.memory: {mcp}", mcp_path.display()))?;
    let transport = entry.get("transport").and_then(Value::as_str);
    let ok = match url {
        None => {
            transport == Some("stdio")
                && entry
                    .get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.ends_with("memloop"))
                && entry.get("args") == Some(&serde_json::json!(["serve"]))
        }
        Some(url) => transport == Some("http") && entry.get("url") == Some(&Value::from(url)),
    };
    if !ok {
        bail!(
            "{} mcpServers.memory is {entry}; expected transport {} (always written: Kimi reads a \
             Claude-style `type` as http) with {}",
            mcp_path.display(),
            if url.is_some() { "http" } else { "stdio" },
            url.map_or(
                "command memloop, args [\"serve\"]".to_string(),
                |u| format!("url {u}")
            )
        );
    }
    Ok(())
}

/// A `[[hooks]]` table with `event = "Stop"` whose command runs `memloop hook stop`.
pub fn kimi_has_stop_hook(toml: &str) -> bool {
    toml.split("[[hooks]]").skip(1).any(|table| {
        let table = table.split("\n[").next().unwrap_or(table);
        let has_event = table.lines().any(|l| {
            let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            l == "event=\"Stop\"" || l == "event='Stop'"
        });
        has_event && table.contains("hook stop") && table.contains("memloop")
    })
}

pub fn expect(cond: bool, what: &str, out: &Output) -> Result<()> {
    if cond {
        Ok(())
    } else {
        bail!("{what}\n{}", out.report())
    }
}

pub fn read_json(path: &std::path::Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not strict JSON", path.display()))
}

/// The JSON document in a command's stdout (skipping any log lines before it).
/// `mcp.memory` as `opencode debug config` resolves it.
pub fn resolved_memory_entry(ctx: &Ctx, sb: &Sandbox, what: &str) -> Result<Value> {
    let out = sb.run(
        ctx.tools.bin.join("opencode"),
        &["debug", "config"],
        ctx.timeout,
    )?;
    expect(
        out.success(),
        &format!("`opencode debug config` rejected {what}"),
        &out,
    )?;
    let config = parse_json_output(&out.stdout)
        .with_context(|| format!("`opencode debug config` printed no JSON\n{}", out.report()))?;
    let entry = config.pointer("/mcp/memory").cloned().with_context(|| {
        format!(
            "`opencode debug config` has no mcp.memory\n{}",
            out.report()
        )
    })?;
    Ok(entry)
}

pub fn parse_json_output(stdout: &str) -> Result<Value> {
    let start = stdout.find('{').context("no '{' in the output")?;
    let mut de = serde_json::Deserializer::from_str(&stdout[start..]).into_iter::<Value>();
    Ok(de.next().context("no JSON value")??)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_stop_hook_among_other_tables() {
        let toml = "default_model = \"x\"\n[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"memloop hook stop\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\n[models.x]\nprovider = \"p\"\n";
        assert!(kimi_has_stop_hook(toml));
        assert!(!kimi_has_stop_hook(
            "[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"memloop hook stop\"\n"
        ));
        assert!(!kimi_has_stop_hook(
            "[[hooks]]\nevent = \"Stop\"\ncommand = \"other\"\n"
        ));
    }
}
