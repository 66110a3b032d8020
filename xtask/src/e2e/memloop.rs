//! The memloop under test: built from this tree (or given with `--memloop`), probed for what
//! exists yet (`init`, `serve`, `hook stop`), and installed into a sandbox.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::Missing;
use super::proc::{self, Proc};
use super::sandbox::Sandbox;

/// Build the memloop binary into the same target dir cargo uses for this xtask.
pub fn build() -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("e2e: building memloop (cargo build -p memloop --bin memloop)");
    let status = Command::new(&cargo)
        .args(["build", "--quiet", "-p", "memloop", "--bin", "memloop"])
        .current_dir(&workspace)
        .status()
        .context("running cargo build for memloop")?;
    if !status.success() {
        bail!(
            "`cargo build -p memloop` failed ({status}); the e2e run needs a memloop binary (or pass --memloop <path>)"
        );
    }
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace.join("target"),
    };
    let bin = target.join("debug/memloop");
    if !bin.is_file() {
        bail!("cargo build succeeded but {} does not exist", bin.display());
    }
    Ok(bin.canonicalize()?)
}

/// What the memloop binary can do right now; each `Err` says why not.
#[derive(Debug, Clone)]
pub struct Caps {
    pub init: Result<(), String>,
    pub serve: Result<Vec<String>, String>,
    pub hook: Result<(), String>,
}

impl Caps {
    pub fn need_init(&self) -> Result<()> {
        self.init
            .clone()
            .map_err(|why| Missing(format!("`memloop init` is not usable: {why}")).into())
    }

    pub fn need_serve(&self) -> Result<()> {
        match &self.serve {
            Ok(tools) if tools.iter().any(|t| t == "memory_store") => Ok(()),
            Ok(tools) => Err(Missing(format!(
                "`memloop serve` answers MCP but lists no memory_store tool (tools: {})",
                tools.join(", ")
            ))
            .into()),
            Err(why) => Err(Missing(format!("`memloop serve` is not usable: {why}")).into()),
        }
    }

    pub fn need_hook(&self) -> Result<()> {
        self.hook
            .clone()
            .map_err(|why| Missing(format!("`memloop hook stop` is not usable: {why}")).into())
    }

    pub fn summary(&self) -> String {
        let show = |r: Result<String, String>| match r {
            Ok(s) => format!("yes{s}"),
            Err(e) => format!("no ({})", first_line(&e)),
        };
        format!(
            "memloop init: {}\n     memloop serve: {}\n     memloop hook stop: {}",
            show(self.init.clone().map(|()| String::new())),
            show(
                self.serve
                    .clone()
                    .map(|t| format!(" (tools: {})", t.join(", ")))
            ),
            show(self.hook.clone().map(|()| String::new())),
        )
    }
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s).trim()
}

/// Probe the three commands in a scratch sandbox.
pub fn probe(sb: &Sandbox) -> Caps {
    let init = match sb.run("memloop", &["init", "--help"], Duration::from_secs(30)) {
        Ok(out) if out.success() => {
            let text = out.stdout.clone();
            let missing: Vec<_> = ["--yes", "--agents", "--user-scope", "--url"]
                .into_iter()
                .filter(|flag| !text.contains(flag))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "`memloop init --help` lists no {}",
                    missing.join(", ")
                ))
            }
        }
        Ok(out) => Err(
            format!("`memloop init --help` failed: {}", out.status_text())
                + "\n"
                + out.stderr.trim(),
        ),
        Err(err) => Err(format!("{err:#}")),
    };
    let serve = probe_serve(sb).map_err(|e| format!("{e:#}"));
    let hook = probe_hook(sb).map_err(|e| format!("{e:#}"));
    Caps { init, serve, hook }
}

/// Speak MCP over stdio: initialize, then tools/list; returns the tool names.
fn probe_serve(sb: &Sandbox) -> Result<Vec<String>> {
    let mut cmd = sb.command("memloop");
    cmd.arg("serve");
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut p = Proc::spawn(cmd)?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "memloop-e2e", "version": "0"}}});
    p.write_stdin(&format!("{init}\n"))?;
    let reply = p.wait_line(deadline, |l| {
        l.contains("\"id\":1") || l.contains("\"id\": 1")
    });
    let Some(reply) = reply else {
        let out = p.stop();
        bail!("no answer to MCP initialize within 15 s\n{}", out.report());
    };
    let reply: Value = serde_json::from_str(reply.trim())
        .with_context(|| format!("initialize answer is not JSON: {reply}"))?;
    if reply.get("result").is_none() {
        bail!("initialize answered without a result: {reply}");
    }
    p.write_stdin(&format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ))?;
    p.write_stdin(&format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    ))?;
    let Some(list) = p.wait_line(deadline, |l| {
        l.contains("\"id\":2") || l.contains("\"id\": 2")
    }) else {
        let out = p.stop();
        bail!("no answer to tools/list\n{}", out.report());
    };
    let _ = p.stop();
    let list: Value = serde_json::from_str(list.trim())?;
    Ok(list
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from))
        .collect())
}

/// `memloop hook stop` must allow a stop that is already a continuation.
fn probe_hook(sb: &Sandbox) -> Result<()> {
    let transcript = sb.root.join("probe-transcript.jsonl");
    std::fs::write(&transcript, "")?;
    let input = json!({"session_id": "e2e-probe", "transcript_path": transcript,
        "cwd": sb.repo, "hook_event_name": "Stop", "stop_hook_active": true});
    let mut cmd = sb.command("memloop");
    cmd.args(["hook", "stop", "--agent", "claude"]);
    let out = proc::run(cmd, Duration::from_secs(15), Some(&input.to_string()))?;
    if !out.success() {
        bail!(
            "`memloop hook stop --agent claude` with stop_hook_active=true should allow (exit 0), got {}: {}",
            out.status_text(),
            out.stderr.trim()
        );
    }
    Ok(())
}

pub const AGENTS: &str = "claude,opencode,kimi";

/// Install memloop into the sandbox: `memloop init` when it exists, or (with `--hand-written`)
/// files written here to the documented shapes.
pub fn install(sb: &Sandbox, caps: &Caps, hand_written: bool, url: Option<&str>) -> Result<()> {
    if caps.init.is_ok() {
        let mut args = vec!["init", "--yes", "--agents", AGENTS, "--user-scope"];
        if let Some(url) = url {
            args.extend(["--url", url]);
        }
        let out = sb.run("memloop", &args, Duration::from_secs(60))?;
        if !out.success() {
            bail!(
                "memloop init failed in {}\n{}",
                sb.repo.display(),
                out.report()
            );
        }
        return Ok(());
    }
    if !hand_written {
        return caps.need_init();
    }
    write_by_hand(sb, url)
}

/// The documented shapes (DESIGN.md matrix, research notes), for checking the harness and the
/// agents' acceptance before `memloop init` exists.
fn write_by_hand(sb: &Sandbox, url: Option<&str>) -> Result<()> {
    let repo = &sb.repo;
    let rules = "<!-- memloop:begin -->\nBefore exploring or working on anything you don't already know, query the memory store first. Known answers and chat skip the lookup.\nAfter every action, store what you learned and why, with a type, an honest importance and two to five tags. To replace a note, store the new one, then forget the old one.\n<!-- memloop:end -->\n";
    std::fs::write(repo.join("CLAUDE.md"), rules)?;
    std::os::unix::fs::symlink("CLAUDE.md", repo.join("AGENTS.md"))?;
    let (claude, opencode, kimi) = match url {
        None => (
            json!({"type": "stdio", "command": "memloop", "args": ["serve"]}),
            json!({"type": "local", "command": ["memloop", "serve"]}),
            json!({"transport": "stdio", "command": "memloop", "args": ["serve"]}),
        ),
        Some(url) => (
            json!({"type": "http", "url": url}),
            json!({"type": "remote", "url": url}),
            json!({"transport": "http", "url": url}),
        ),
    };
    let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap() + "\n";
    std::fs::write(
        repo.join(".mcp.json"),
        pretty(json!({"mcpServers": {"memory": claude}})),
    )?;
    std::fs::create_dir_all(repo.join(".claude"))?;
    std::fs::write(
        repo.join(".claude/settings.json"),
        pretty(
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "memloop hook stop --agent claude", "timeout": 30}]}]}}),
        ),
    )?;
    std::fs::write(
        repo.join("opencode.json"),
        pretty(json!({"$schema": "https://opencode.ai/config.json", "mcp": {"memory": opencode}})),
    )?;
    std::fs::create_dir_all(repo.join(".kimi-code"))?;
    std::fs::write(
        repo.join(".kimi-code/mcp.json"),
        pretty(json!({"mcpServers": {"memory": kimi}})),
    )?;
    std::fs::write(
        sb.kimi_home.join("config.toml"),
        "[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 30\n",
    )?;
    Ok(())
}
