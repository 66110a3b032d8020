//! Kilo Code CLI (`kilo`, an OpenCode fork), driven like OpenCode: `kilo debug config` and
//! `kilo mcp list` for the config, `kilo serve` over HTTP and one-shot `kilo run` for the gate,
//! the first model request of `kilo run` for the session start, and a repository with both
//! OpenCode and Kilo enabled run in both programs. Facts: kilo_facts.md.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::config::expect;
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, Script};
use super::gate::{self, PROMPT, check_loop};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::session_start::{self, NOTE_MARK};
use super::{Ctx, agents};

pub(super) const STORE: &str = "memory_memory_store";

/// `memloop init --yes --agents <agents>` (Kilo's files are all in the repository).
pub(super) fn init(sb: &Sandbox, agents: &str) -> Result<()> {
    let out = sb.run(
        "memloop",
        &["init", "--yes", "--agents", agents],
        std::time::Duration::from_secs(60),
    )?;
    expect(out.success(), "memloop init failed", &out)
}

/// What a user of Kilo has once: the fake provider as the default model in the user config
/// (`~/.config/kilo/kilo.json`), no update checks, no model-list fetch, and snapshots off: on a
/// loaded machine Kilo 7.7.7 stops a run before its first model request to ask "Snapshot is
/// slow ... disable Snapshots for this repository?", which a one-shot run never answers.
pub(super) fn set_up(sb: &mut Sandbox, fake_base_url: Option<&str>) -> Result<()> {
    sb.set_env("KILO_DISABLE_MODELS_FETCH", "1");
    sb.set_env("KILO_DISABLE_SHARE", "1");
    sb.set_env("KILO_DISABLE_SESSION_INGEST", "1");
    let dir = sb.xdg_config.join("kilo");
    std::fs::create_dir_all(&dir)?;
    let mut config = json!({
        "$schema": "https://app.kilo.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "snapshot": false,
    });
    if let Some(base) = fake_base_url {
        config["model"] = json!("fake/fake-model");
        config["small_model"] = json!("fake/fake-model");
        config["provider"] = json!({"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-e2e"},
            "models": {"fake-model": {"name": "Fake Model", "tool_call": true}},
        }});
    }
    std::fs::write(
        dir.join("kilo.json"),
        serde_json::to_string_pretty(&config)?,
    )?;
    Ok(())
}

fn needs(ctx: &Ctx) -> Result<()> {
    ctx.caps.need_init()?;
    ctx.caps.need_hook()?;
    ctx.caps.need_serve()
}

fn script(ctx: &Ctx, sb: &Sandbox) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes: gate::WRITES,
        write_tool: "write".into(),
        store_tool: STORE.into(),
        lookup_tool: Some("memory_context_query".into()),
        latency: ctx.model_latency,
    }
}

/// memloop's entry as `kilo debug config` resolves it.
fn resolved_entry(ctx: &Ctx, sb: &Sandbox) -> Result<Value> {
    let out = sb.run(
        ctx.tools.bin.join("kilo"),
        &["debug", "config"],
        ctx.timeout,
    )?;
    expect(out.success(), "`kilo debug config` failed", &out)?;
    let config: Value = serde_json::from_str(out.stdout.trim())
        .with_context(|| format!("`kilo debug config` printed no JSON\n{}", out.report()))?;
    config
        .pointer("/mcp/memory")
        .cloned()
        .with_context(|| format!("Kilo's resolved config has no mcp.memory\n{}", out.report()))
}

/// `memloop init --agents kilo`: Kilo resolves the server from kilo.json as memloop wrote it and
/// leaves the file alone on load; the plugin is in `.kilo/plugins/`.
pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    init(sb, "kilo")?;
    set_up(sb, None)?;
    let file = sb.repo.join("kilo.json");
    let before = std::fs::read(&file).context("memloop init wrote no kilo.json")?;
    if !sb.repo.join(".kilo/plugins/memloop.js").is_file() {
        bail!("memloop init wrote no .kilo/plugins/memloop.js");
    }
    let entry = resolved_entry(ctx, sb)?;
    if entry != json!({"type": "local", "command": ["memloop", "serve"], "enabled": true}) {
        bail!("Kilo resolved mcp.memory to {entry}, expected local [memloop, serve], enabled");
    }
    let after = std::fs::read(&file)?;
    if before != after {
        bail!(
            "Kilo rewrote kilo.json on load\n--- memloop wrote ---\n{}\n--- after kilo ---\n{}",
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        );
    }
    println!("   kilo debug config: mcp.memory = {entry}");
    Ok(())
}

/// The lines of `<program> mcp list` naming the server `memory`, and whether each is connected.
fn listed(ctx: &Ctx, sb: &Sandbox, program: &str) -> Result<(Vec<String>, Output)> {
    let out = sb.run(ctx.tools.bin.join(program), &["mcp", "list"], ctx.timeout)?;
    expect(out.success(), &format!("`{program} mcp list` failed"), &out)?;
    let text = ::memloop::doctor::live::strip_ansi(&out.stdout);
    let lines = text
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "memory"))
        .map(str::to_owned)
        .collect();
    Ok((lines, out))
}

fn listed_once_connected(ctx: &Ctx, sb: &Sandbox, program: &str) -> Result<()> {
    let (lines, out) = listed(ctx, sb, program)?;
    expect(
        lines.len() == 1,
        &format!(
            "`{program} mcp list` names `memory` {} times: {lines:?}",
            lines.len()
        ),
        &out,
    )?;
    expect(
        lines[0].contains("connected") && !lines[0].contains("failed"),
        &format!(
            "`{program} mcp list` does not show `memory` connected: {:?}",
            lines[0]
        ),
        &out,
    )?;
    println!("   {program} mcp list: {}", lines[0].trim());
    Ok(())
}

/// `kilo mcp list` shows memloop's server connected.
pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb, "kilo")?;
    set_up(sb, None)?;
    listed_once_connected(ctx, sb, "kilo")
}

/// `kilo serve`, a session over HTTP: lookup, three writes, the plugin sends it back on idle or
/// when the answer completes, it stores over MCP, then rests.
pub fn gate_serve(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb, "kilo")?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb))?;
    set_up(sb, Some(&fake.base_url()))?;
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port();
    let mut cmd = sb.command(ctx.tools.bin.join("kilo"));
    cmd.args([
        "serve",
        "--port",
        &port.to_string(),
        "--hostname",
        "127.0.0.1",
        "--print-logs",
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let outcome = gate::drive_opencode(&mut p, port, &fake, STORE, deadline);
    let out = p.stop();
    session_start::save(sb, &fake);
    let _ = std::fs::write(
        sb.root.join("kilo-serve.log"),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    if let Err(err) = outcome {
        bail!(
            "{err:#}\nmodel requests:\n{}\n{}",
            fake.transcript(),
            log_lines(&out)
        );
    }
    check_loop(&fake, STORE, &sb.repo, &out)
}

/// One-shot `kilo run "<prompt>"` in the repository; its output.
fn run_once(
    ctx: &Ctx,
    sb: &Sandbox,
    program: &str,
    prompt: &str,
    fake: &FakeModel,
) -> Result<Output> {
    let out = sb.run(
        ctx.tools.bin.join(program),
        &["run", "--print-logs", prompt],
        ctx.gate_timeout,
    )?;
    session_start::save(sb, fake);
    let _ = std::fs::write(
        sb.root.join(format!("{program}-run.log")),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    println!(
        "   `{program} run`: {}, {} model requests",
        out.status_text(),
        fake.model_calls().len()
    );
    if !out.success() {
        bail!(
            "`{program} run` failed\nmodel requests:\n{}\n{}",
            fake.transcript(),
            log_lines(&out)
        );
    }
    Ok(out)
}

/// One-shot `kilo run`: the plugin sends the agent back inside the prompt loop before the run
/// exits, it stores over MCP.
pub fn gate_run(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb, "kilo")?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb))?;
    set_up(sb, Some(&fake.base_url()))?;
    let out = run_once(ctx, sb, "kilo", PROMPT, &fake)?;
    check_loop(&fake, STORE, &sb.repo, &out)
}

/// A stored note is in the system prompt of the first model request of `kilo run` (memloop's
/// plugin, `experimental.chat.system.transform`).
pub fn session_start(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb, "kilo")?;
    session_start::seed(sb)?;
    let mut script = session_start::quiet_script(ctx, sb);
    script.write_tool = "write".into();
    script.store_tool = STORE.into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    set_up(sb, Some(&fake.base_url()))?;
    let out = run_once(ctx, sb, "kilo", "Say hello.", &fake)?;
    let calls = session_start::conversation_calls(&fake);
    let Some(first) = calls.first() else {
        bail!(
            "no conversation request reached the fake model\n{}",
            out.report()
        );
    };
    let system: Vec<Value> = first.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .cloned()
        .collect();
    let system = session_start::all_text(&Value::Array(system));
    expect(
        system.contains(NOTE_MARK),
        &format!(
            "the system prompt of Kilo's first request (#{}) lacks the memory index:\n{}",
            first.seq,
            proc::tail(&system, 3000)
        ),
        &out,
    )?;
    expect(
        system.matches(NOTE_MARK).count() == 1,
        "the index is in the first request's system prompt more than once",
        &out,
    )?;
    println!(
        "   first request (#{}) holds the index once in its system prompt",
        first.seq
    );
    Ok(())
}

/// OpenCode and Kilo both enabled: memloop writes the server once, into the root opencode.json
/// both read (no kilo.json); each program lists `memory` once, connected; each loads only its own
/// plugin, so a one-shot run of each is sent back exactly once and stores.
pub fn with_opencode(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb, "opencode,kilo")?;
    if sb.repo.join("kilo.json").exists() {
        bail!("memloop wrote a kilo.json beside the opencode.json both programs read");
    }
    for plugin in [".opencode/plugins/memloop.js", ".kilo/plugins/memloop.js"] {
        if !sb.repo.join(plugin).is_file() {
            bail!("memloop init wrote no {plugin}");
        }
    }
    agents::opencode(sb, &ctx.tools, None)?;
    set_up(sb, None)?;
    listed_once_connected(ctx, sb, "kilo")?;
    listed_once_connected(ctx, sb, "opencode")?;
    for program in ["kilo", "opencode"] {
        for n in 1..=gate::WRITES {
            let _ = std::fs::remove_file(sb.repo.join(format!("e2e-note-{n}.txt")));
        }
        let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb))?;
        match program {
            "kilo" => set_up(sb, Some(&fake.base_url()))?,
            _ => agents::opencode(sb, &ctx.tools, Some(&fake.base_url()))?,
        }
        let out = run_once(ctx, sb, program, PROMPT, &fake)?;
        check_loop(&fake, STORE, &sb.repo, &out)?;
        let convs: Vec<_> = fake
            .model_calls()
            .iter()
            .map(|c| c.conversation(Dialect::OpenAi))
            .collect();
        let sent_back = convs
            .last()
            .map_or(0, |c| c.text.matches(GATE_MARKER).count());
        expect(
            sent_back == 1,
            &format!(
                "`{program} run` was sent back {sent_back} times in one turn (two plugins loaded?)\n{}",
                fake.transcript()
            ),
            &out,
        )?;
        println!("   {program}: sent back once, stored");
    }
    Ok(())
}

fn log_lines(out: &Output) -> String {
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("plugin") || l.contains("memloop") || l.contains("ERROR"))
        .collect();
    format!(
        "kilo log (plugin/memloop/ERROR lines):\n{}",
        proc::tail(&lines.join("\n"), 6000)
    )
}
