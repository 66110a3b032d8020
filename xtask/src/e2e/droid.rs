//! The real Factory Droid (`droid exec`) against what `memloop init --agents droid` writes, its
//! model a scripted OpenAI-compatible fake on 127.0.0.1 (`fake_model.rs`), configured as a BYOK
//! custom model in `~/.factory/settings.json`, so no Factory login is needed. Airgap Mode keeps it
//! from calling Factory's API at all (also on a shared network). Facts: `droid_facts.md`.
//!
//! - `config-droid`: Droid lists memloop's server from `.factory/mcp.json`, runs the SessionStart
//!   hook from `.factory/settings.json` (its own transcript records the run), leaves both files as
//!   memloop wrote them; `memloop uninstall` takes them back and Droid lists no server.
//! - `connected-droid`: `droid mcp list` shows `memory` connected, once; in a run the model finds
//!   `memory___memory_store` (loaded through ToolSearch), the rules reach it, and the call reaches
//!   `memloop serve`.
//! - `gate-droid`: Droid writes three files with `Create` and stops; memloop's gate reads the
//!   transcript and sends it back (`decision: block`); it looks up and stores over MCP; the next
//!   stop passes.
//! - `session-start-droid`: a stored note is in the first model request (SessionStart
//!   `additionalContext`).
//! - `recall-droid`: three prompts of one JSON-RPC session get the matching note once
//!   (UserPromptSubmit `additionalContext`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::Ctx;
use super::config::expect;
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, Script};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::session_start::{self, NOTE_MARK};

const SERVER: &str = "memory";
const STORE: &str = "memory___memory_store";
const LOOKUP: &str = "memory___context_query";
/// The model as `droid exec -m` names a custom model: `custom:<displayName>-<index>`.
const MODEL: &str = "custom:Fake-0";
const RULE: &str = "query the memory store first";

fn droid(ctx: &Ctx) -> PathBuf {
    ctx.tools.bin.join("droid")
}

fn memloop(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, Duration::from_secs(60))?;
    expect(
        out.success(),
        &format!(
            "`memloop {}` failed in {}",
            args.join(" "),
            sb.repo.display()
        ),
        &out,
    )
}

/// What a user of Droid with their own model has once: the fake as a custom model in
/// `~/.factory/settings.json`, no auto-update, Airgap Mode (BYOK models only, no Factory API).
fn set_up_user(sb: &mut Sandbox, base_url: &str) -> Result<()> {
    let settings = json!({
        "customModels": [{
            "model": "fake-model",
            "displayName": "Fake",
            "baseUrl": format!("{base_url}/v1"),
            "apiKey": "sk-e2e",
            "provider": "generic-chat-completion-api",
            "maxOutputTokens": 4096
        }]
    });
    std::fs::create_dir_all(sb.home.join(".factory"))?;
    std::fs::write(
        sb.home.join(".factory/settings.json"),
        serde_json::to_string_pretty(&settings)? + "\n",
    )?;
    sb.set_env("FACTORY_DROID_AUTO_UPDATE_ENABLED", "false");
    sb.set_env("FACTORY_AIRGAP_ENABLED", "1");
    sb.set_env("FACTORY_DISABLE_KEYRING", "1");
    Ok(())
}

fn script(ctx: &Ctx, sb: &Sandbox, writes: usize) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes,
        write_tool: "Create".into(),
        store_tool: STORE.into(),
        lookup_tool: Some(LOOKUP.into()),
        latency: ctx.model_latency,
    }
}

fn install(ctx: &Ctx, sb: &mut Sandbox, fake: &FakeModel) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_user(sb, &fake.base_url())?;
    memloop(sb, &["init", "--yes", "--agents", "droid"])
}

/// `droid exec -m custom:Fake-0 --auto high <prompt>` in the repository, the fake's requests
/// kept beside the sandbox.
fn exec(ctx: &Ctx, sb: &Sandbox, fake: &FakeModel, prompt: &str) -> Result<Output> {
    let out = sb.run(
        droid(ctx),
        &["exec", "-m", MODEL, "--auto", "high", prompt],
        ctx.gate_timeout,
    )?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    Ok(out)
}

/// memloop's line in `droid mcp list`, and how many lines name the server.
fn listed(ctx: &Ctx, sb: &Sandbox) -> Result<(Option<String>, usize)> {
    let out = sb.run(droid(ctx), &["mcp", "list"], ctx.timeout)?;
    expect(out.success(), "`droid mcp list` failed", &out)?;
    let lines: Vec<String> = out
        .stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(&format!("{SERVER} ")))
        .map(str::to_owned)
        .collect();
    Ok((lines.first().cloned(), lines.len()))
}

/// The rows of the session transcripts Droid wrote under the sandbox's HOME.
fn transcript_rows(sb: &Sandbox) -> Vec<Value> {
    let mut rows = Vec::new();
    let sessions = sb.home.join(".factory/sessions");
    for dir in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                rows.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
            }
        }
    }
    rows
}

pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_hook()?;
    ctx.caps.need_serve()?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, 0))?;
    install(ctx, sb, &fake)?;
    let settings = sb.repo.join(".factory/settings.json");
    let mcp = sb.repo.join(".factory/mcp.json");
    let before = (std::fs::read(&settings)?, std::fs::read(&mcp)?);

    let (line, count) = listed(ctx, sb)?;
    if !line.as_deref().is_some_and(|l| l.contains("[project]")) || count != 1 {
        bail!(
            "`droid mcp list` should list {SERVER} once, from the project; it shows {line:?} ({count} lines)"
        );
    }
    println!("   droid mcp list: {}", line.unwrap_or_default());
    doctor_live(ctx, sb)?;

    let out = exec(ctx, sb, &fake, "Say hello.")?;
    expect(out.success(), "droid exec failed", &out)?;
    let ran = transcript_rows(sb).into_iter().find(|row| {
        row["message"]["hookEventName"] == "SessionStart"
            && row["message"]["hookCommands"][0]["command"]
                == "memloop hook session-start --agent droid"
    });
    let Some(ran) = ran else {
        bail!(
            "Droid's transcript records no run of memloop's SessionStart hook from .factory/settings.json\n{}",
            out.report()
        );
    };
    if ran["message"]["hookStatus"] != "completed" {
        bail!("memloop's SessionStart hook did not complete in Droid: {ran}");
    }
    if (std::fs::read(&settings)?, std::fs::read(&mcp)?) != before {
        bail!("Droid rewrote .factory/settings.json or .factory/mcp.json on load");
    }
    println!(
        "   droid exec ran memloop's SessionStart hook (completed); both files as memloop wrote them"
    );

    memloop(sb, &["uninstall", "--yes"])?;
    for path in [&settings, &mcp] {
        if path.exists() {
            bail!(
                "memloop uninstall left {} (memloop created it):\n{}",
                path.display(),
                std::fs::read_to_string(path).unwrap_or_default()
            );
        }
    }
    if let (Some(line), _) = listed(ctx, sb)? {
        bail!("Droid still lists {SERVER} after memloop uninstall: {line}");
    }
    println!("   uninstall: .factory/settings.json and mcp.json gone, no server listed");
    Ok(())
}

/// `memloop doctor --live`: its `droid.live` verdict (from `droid mcp list`) is ok, and the
/// doctor finds nothing wrong on this install.
fn doctor_live(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    let out = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        ctx.timeout * 2,
    )?;
    let report: Value = serde_json::from_str(&out.stdout).map_err(|err| {
        anyhow::anyhow!(
            "`memloop doctor --live` printed no JSON ({err})\n{}",
            out.report()
        )
    })?;
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    let live = findings.iter().find(|f| f["id"] == "droid.live");
    let Some(live) = live.filter(|f| f["severity"] == "ok") else {
        bail!(
            "`memloop doctor --live` gave no ok `droid.live`: {live:?}\n{}",
            out.report()
        );
    };
    let bad: Vec<String> = findings
        .iter()
        .filter(|f| f["severity"] == "error" || f["severity"] == "warning")
        .map(|f| format!("{} {}: {}", f["severity"], f["id"], f["message"]))
        .collect();
    if !bad.is_empty() || !out.success() {
        bail!(
            "`memloop doctor --live` on a correct install:\n{}\n{}",
            bad.join("\n"),
            out.report()
        );
    }
    println!(
        "   doctor --live: {}",
        live["message"].as_str().unwrap_or_default()
    );
    Ok(())
}

pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, 0))?;
    install(ctx, sb, &fake)?;
    let (line, count) = listed(ctx, sb)?;
    if !line.as_deref().is_some_and(|l| l.contains(" connected ")) || count != 1 {
        bail!(
            "`droid mcp list` should show {SERVER} connected, once; it shows {line:?} ({count} lines)"
        );
    }
    println!("   droid mcp list: {}", line.unwrap_or_default());
    // The fake answers the gate's marker with a lookup and a store: asked for directly here.
    let out = exec(
        ctx,
        sb,
        &fake,
        &format!("{GATE_MARKER}: store what you know about this repository."),
    )?;
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    expect(out.success(), "droid exec failed", &out)?;
    let calls = fake.model_calls();
    let Some(first) = calls.first() else {
        return fail("Droid sent no model request".into());
    };
    if !first.body.to_string().contains(RULE) {
        return fail(format!(
            "the rules ({RULE:?}, CLAUDE.md and AGENTS.md) did not reach the model"
        ));
    }
    let last = calls
        .last()
        .expect("checked above")
        .conversation(Dialect::OpenAi);
    let Some(result) = last.result_of(STORE) else {
        return fail(format!("no result of {STORE} came back to the model"));
    };
    if result.is_error || result.text.to_ascii_lowercase().contains("not found") {
        return fail(format!("{STORE} failed: {:?}", result.text));
    }
    println!(
        "   {STORE} loaded and called; the rules reached the model; memloop serve answered {:?}",
        proc::tail(&result.text, 160)
    );
    Ok(())
}

pub fn gate(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, super::gate::WRITES))?;
    install(ctx, sb, &fake)?;
    let out = exec(ctx, sb, &fake, super::gate::PROMPT)?;
    let with_log = |msg: &str| format!("{msg}\nmodel requests:\n{}", fake.transcript());
    expect(out.success(), &with_log("droid exec failed"), &out)?;
    super::gate::check_loop(&fake, STORE, &sb.repo, &out)?;
    let blocks = transcript_rows(sb)
        .into_iter()
        .filter(|row| {
            row["message"]["hookEventName"] == "Stop"
                && row["message"]["hookResults"][0]["stdout"]
                    .as_str()
                    .is_some_and(|s| s.contains("\"decision\":\"block\""))
        })
        .count();
    if blocks != 1 {
        bail!("Droid's transcript shows {blocks} blocking Stop hook runs, expected exactly 1");
    }
    println!("   one Stop block (decision: block, hook run completed), then the stop passed");
    Ok(())
}

pub fn session_start(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    session_start::needs(ctx)?;
    let mut script = session_start::quiet_script(ctx, sb);
    script.write_tool = "Create".into();
    script.store_tool = STORE.into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    install(ctx, sb, &fake)?;
    session_start::seed(sb)?;
    let out = exec(ctx, sb, &fake, "Say hello.")?;
    expect(out.success(), "droid exec failed", &out)?;
    let calls = session_start::conversation_calls(&fake);
    let Some(first) = calls.first() else {
        bail!(
            "no conversation request reached the fake model\n{}",
            out.report()
        );
    };
    let text = session_start::all_text(&first.body["messages"]);
    expect(
        text.contains(NOTE_MARK),
        &format!(
            "Droid's first request (#{}) lacks the memory index:\n{}",
            first.seq,
            proc::tail(&text, 3000)
        ),
        &out,
    )?;
    expect(
        text.matches(NOTE_MARK).count() == 1,
        "the index is in the first request more than once",
        &out,
    )?;
    println!("   first request (#{}) holds the index once", first.seq);
    Ok(())
}

/// Droid in one process over its JSON-RPC protocol (`droid exec --input-format stream-jsonrpc`):
/// `droid.initialize_session`, then one `droid.add_user_message` per prompt, each awaited until
/// the turn completes. That is Droid's session path with UserPromptSubmit (a plain `droid exec`
/// never runs it); the hook's `additionalContext` is a user message before the prompt.
pub fn recall(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    session_start::needs(ctx)?;
    let mut script = session_start::quiet_script(ctx, sb);
    script.write_tool = "Create".into();
    script.store_tool = STORE.into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    install(ctx, sb, &fake)?;
    session_start::seed(sb)?;
    let mut cmd = sb.command(droid(ctx));
    cmd.args([
        "exec",
        "--input-format",
        "stream-jsonrpc",
        "--output-format",
        "stream-jsonrpc",
        "-m",
        MODEL,
    ]);
    let request = |id: usize, method: &str, params: Value| {
        let line = json!({"jsonrpc": "2.0", "type": "request", "factoryApiVersion": "1.0.0",
            "id": id.to_string(), "method": method, "params": params});
        format!("{line}\n")
    };
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    p.write_stdin(&request(
        1,
        "droid.initialize_session",
        json!({"sessionId": "00000000-0000-4000-8000-00000000e2e0", "machineId": "e2e",
            "cwd": sb.repo, "modelId": MODEL, "autonomyLevel": "high"}),
    ))?;
    let started = p.wait_line(deadline, |l| l.contains("\"id\":\"1\""));
    let mut firsts = Vec::new();
    if started.as_deref().is_some_and(|l| l.contains("\"result\"")) {
        for (i, text) in super::recall::PROMPTS.iter().enumerate() {
            let before = session_start::conversation_calls(&fake).len();
            p.write_stdin(&request(
                10 + i,
                "droid.add_user_message",
                json!({"messageId": format!("00000000-0000-4000-8000-00000000e2e{}", i + 1), "text": text}),
            ))?;
            if p.wait_line(deadline, |l| l.contains("\"agent_turn_completed\""))
                .is_none()
            {
                break;
            }
            if let Some(first) = session_start::conversation_calls(&fake)
                .into_iter()
                .nth(before)
            {
                firsts.push((first.seq, first.body));
            }
        }
    }
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    if firsts.len() < super::recall::PROMPTS.len() {
        bail!(
            "Droid answered {} of {} prompts within {:.0?} (session started: {started:?})\nmodel requests:\n{}{}",
            firsts.len(),
            super::recall::PROMPTS.len(),
            ctx.gate_timeout,
            fake.transcript(),
            out.report()
        );
    }
    super::recall::check_requests(&firsts, &out)
}
