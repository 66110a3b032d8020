//! The real Gemini CLI against what `memloop init --agents gemini` writes, and a scripted fake
//! Gemini API on 127.0.0.1 (facts: gemini_facts.md).
//!
//! - `config-gemini`: without `memloop trust` the folder is untrusted and `gemini mcp list` shows
//!   memloop's server disabled; after `memloop trust --yes` it connects to `memloop serve`; and
//!   `memloop uninstall` leaves no trust entry and no settings behind.
//! - `connected-gemini`: `gemini -p` offers the model `mcp_memory_memory_store`, the model's
//!   context holds memloop's rule lines (AGENTS.md through `context.fileName`), and the call
//!   reaches `memloop serve`.
//! - `gate-gemini`: Gemini writes files, memloop's AfterAgent gate sends it back, it looks up and
//!   stores over MCP, and the next stop passes.

use anyhow::{Result, bail};
use serde_json::json;

use super::Ctx;
use super::codex::check_stored;
use super::config::expect;
use super::fake_gemini::{FakeGemini, SCRIPT_EXHAUSTED, Script, Step};
use super::fake_model::GATE_MARKER;
use super::proc::{self, Output};
use super::sandbox::Sandbox;

pub const SERVER: &str = "memory";
const STORE_TOOL: &str = "mcp_memory_memory_store";
/// A piece of memloop's first rule line, as the model must see it.
const RULE_PIECE: &str =
    "Before exploring or working on anything you don't already know, query the memory store first.";

fn memloop(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, std::time::Duration::from_secs(60))?;
    if !out.success() {
        bail!("`memloop {}` failed\n{}", args.join(" "), out.report());
    }
    Ok(())
}

/// The user settings a headless test needs: API-key auth (else "Invalid auth method selected"),
/// a fixed model (no routing requests), and no telemetry, usage statistics or update checks.
pub fn set_up_harness(sb: &mut Sandbox, base_url: Option<&str>) -> Result<()> {
    let dir = sb.home.join(".gemini");
    std::fs::create_dir_all(&dir)?;
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-2.5-flash"},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}
    });
    std::fs::write(
        dir.join("settings.json"),
        serde_json::to_string_pretty(&settings)?,
    )?;
    sb.set_env("GEMINI_API_KEY", "e2e-key");
    sb.set_env(
        "GOOGLE_GEMINI_BASE_URL",
        base_url.unwrap_or("http://127.0.0.1:9"),
    );
    Ok(())
}

fn mcp_list(ctx: &Ctx, sb: &Sandbox) -> Result<String> {
    let out = sb.run("gemini", &["mcp", "list"], ctx.timeout)?;
    expect(out.success(), "`gemini mcp list` failed", &out)?;
    Ok(format!("{}\n{}", out.stdout, out.stderr))
}

fn server_line(listing: &str) -> Option<&str> {
    listing
        .lines()
        .find(|l| l.contains(&format!(" {SERVER}: ")))
}

pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_harness(sb, None)?;
    let trusted = sb.home.join(".gemini/trustedFolders.json");
    memloop(sb, &["init", "--yes", "--agents", "gemini"])?;
    if trusted.exists() {
        bail!("memloop init without --trust wrote {}", trusted.display());
    }
    let listing = mcp_list(ctx, sb)?;
    match server_line(&listing) {
        Some(line) if line.trim_end().ends_with("Disabled") && listing.contains("untrusted") => {}
        other => bail!(
            "in an untrusted folder Gemini should list `{SERVER}` disabled; got {other:?}:\n{listing}"
        ),
    }
    println!("   without trust: untrusted, `{SERVER}` disabled");

    memloop(sb, &["trust", "--yes"])?;
    let listing = mcp_list(ctx, sb)?;
    match server_line(&listing) {
        Some(line) if line.contains("memloop serve") && line.trim_end().ends_with("Connected") => {
            println!("   after trust --yes: {}", line.trim());
        }
        other => bail!(
            "after `memloop trust --yes` Gemini should connect to `{SERVER}` (memloop serve); got {other:?}:\n{listing}"
        ),
    }
    let out = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        ctx.timeout * 2,
    )?;
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    let severity = |id: &str| {
        report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["id"] == id)
            .map(|f| f["severity"].clone())
    };
    for id in [
        "gemini.live",
        "gemini.trust",
        "gemini.hooks",
        "gemini.instructions",
    ] {
        expect(
            severity(id) == Some(json!("ok")),
            &format!("`memloop doctor --live` reports {id} as {:?}", severity(id)),
            &out,
        )?;
    }
    println!("   doctor --live: gemini.live, trust, hooks and instructions ok");

    memloop(sb, &["uninstall", "--yes"])?;
    if trusted.exists() {
        bail!(
            "memloop uninstall left {}:\n{}",
            trusted.display(),
            std::fs::read_to_string(&trusted)?
        );
    }
    if sb.repo.join(".gemini/settings.json").exists() {
        bail!("memloop uninstall left .gemini/settings.json");
    }
    println!("   uninstall: no trust entry and no settings left");
    Ok(())
}

fn run_prompt(ctx: &Ctx, sb: &Sandbox, fake: &FakeGemini, prompt: &str) -> Result<Output> {
    run_prompt_in(ctx, sb, fake, prompt, "yolo")
}

/// `gemini -p` in `--approval-mode` `mode` (`yolo` runs every tool; `auto_edit` runs file edits
/// and refuses, in `-p`, any other tool no rule allows).
fn run_prompt_in(
    ctx: &Ctx,
    sb: &Sandbox,
    fake: &FakeGemini,
    prompt: &str,
    mode: &str,
) -> Result<Output> {
    let args = [
        "-p",
        prompt,
        "--approval-mode",
        mode,
        "--output-format",
        "stream-json",
    ];
    let out = sb.run("gemini", &args, ctx.gate_timeout)?;
    let _ = std::fs::write(sb.root.join("gemini-stream.jsonl"), &out.stdout);
    expect(
        out.success(),
        &format!("`gemini -p` failed\nmodel requests:\n{}", fake.transcript()),
        &out,
    )?;
    Ok(out)
}

pub(super) fn install(ctx: &Ctx, sb: &mut Sandbox, fake: &FakeGemini) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_harness(sb, Some(&fake.base_url()))?;
    memloop(sb, &["init", "--yes", "--agents", "gemini", "--trust"])
}

pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeGemini::start(Script {
        steps: vec![
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Stored it.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake)?;
    let out = run_prompt(ctx, sb, &fake, "Store what you know about this repository.")?;
    let calls = fake.model_calls();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    let Some(first) = calls.first() else {
        return fail("Gemini sent no request to the fake Gemini API".into());
    };
    let request = first.request();
    if request.tool(STORE_TOOL).is_none() {
        let names: Vec<&str> = request.tools.iter().map(|(n, _)| n.as_str()).collect();
        return fail(format!(
            "Gemini offered no {STORE_TOOL} (offered: {})",
            names.join(", ")
        ));
    }
    if !first.body.to_string().contains(RULE_PIECE) {
        return fail(format!(
            "the model's context lacks memloop's rules ({RULE_PIECE:?}): Gemini did not load AGENTS.md"
        ));
    }
    let last = calls.last().expect("checked above").request();
    let Some(result) = last.result_of(STORE_TOOL) else {
        return fail(format!("no result of {STORE_TOOL} came back to the model"));
    };
    check_stored(&sb.repo, &result).or_else(|e| fail(format!("{e:#}")))?;
    println!(
        "   offered {STORE_TOOL}, rules in the context; memloop serve answered {:?}",
        proc::tail(&result, 160)
    );
    Ok(())
}

pub fn gate(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gate_in(ctx, sb, "yolo")
}

/// As `gate` in `--approval-mode auto_edit`: the lookup and the store run only through the
/// `tools.allowed` entries memloop wrote for its own two tools.
pub fn gate_approved_tools(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gate_in(ctx, sb, "auto_edit")
}

fn gate_in(ctx: &Ctx, sb: &mut Sandbox, mode: &str) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let files = ["e2e-note-1.txt", "e2e-note-2.txt", "e2e-note-3.txt"];
    let write = |path: &str| Step::Write {
        path: path.into(),
        content: format!("{path}\n"),
    };
    let fake = FakeGemini::start(Script {
        steps: vec![
            write(files[0]),
            write(files[1]),
            write(files[2]),
            Step::Say("The files are written.".into()),
            Step::Mcp {
                server: SERVER.into(),
                tool: "context_query".into(),
            },
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Looked up and stored what I learned; done.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake)?;
    let out = run_prompt_in(ctx, sb, &fake, "Write three notes, then stop.", mode)?;
    let calls: Vec<_> = fake.model_calls().iter().map(|c| c.request()).collect();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    for file in files {
        if !sb.repo.join(file).is_file() {
            return fail(format!("write_file did not create {file}"));
        }
    }
    let Some(sent_back) = calls
        .iter()
        .position(|c| c.user_texts.last().is_some_and(|t| t.contains(GATE_MARKER)))
    else {
        return fail(format!(
            "memloop's gate never sent Gemini back ({GATE_MARKER:?} never reached the model)"
        ));
    };
    let reason = calls[sent_back]
        .user_texts
        .last()
        .cloned()
        .unwrap_or_default();
    let Some(result) = calls.last().and_then(|c| c.result_of(STORE_TOOL)) else {
        return fail(format!("no result of {STORE_TOOL} came back to the model"));
    };
    check_stored(&sb.repo, &result).or_else(|e| fail(format!("{e:#}")))?;
    if calls.len() != 7 || out.stdout.contains(SCRIPT_EXHAUSTED) {
        return fail(format!(
            "expected 7 model requests (3 writes, stop, lookup, store, stop) and the second stop \
             to pass; got {}",
            calls.len()
        ));
    }
    if stderr_blocks(&out) != 1 {
        return fail(format!(
            "the gate should block exactly once; Gemini reported {} blocks",
            stderr_blocks(&out)
        ));
    }
    // The block is a continuation to Gemini, not a failed hook.
    if [&out.stdout, &out.stderr]
        .iter()
        .any(|text| text.contains("failed for event AfterAgent"))
    {
        return fail("Gemini reports memloop's AfterAgent hook as failed".into());
    }
    println!(
        "   3 write_file calls; the gate sent Gemini back in request {} ({}); looked up and \
         stored over MCP; the next stop passed",
        sent_back + 1,
        proc::tail(&reason, 120)
    );
    Ok(())
}

/// How many times Gemini's stream reports an AfterAgent block.
fn stderr_blocks(out: &Output) -> usize {
    out.stdout.matches("Agent execution blocked").count()
}

/// What a memloop written for Gemini 0.24 left: its settings with both old hook switches, and
/// the folder's trust.
pub fn legacy_world(sb: &mut Sandbox) -> Result<()> {
    set_up_harness(sb, None)?;
    let repo = sb.repo.canonicalize()?;
    let settings = json!({
        "tools": {"enableHooks": true},
        "context": {"fileName": ["GEMINI.md", "AGENTS.md"]},
        "mcpServers": {SERVER: {"command": "memloop", "args": ["serve"]}},
        "hooks": {
            "enabled": true,
            "AfterAgent": [{"hooks": [{"name": "memloop", "type": "command",
                "command": "memloop hook stop --agent gemini", "timeout": 30000}]}]
        }
    });
    std::fs::create_dir_all(sb.repo.join(".gemini"))?;
    std::fs::write(
        sb.repo.join(".gemini/settings.json"),
        serde_json::to_string_pretty(&settings)? + "\n",
    )?;
    std::fs::write(
        sb.home.join(".gemini/trustedFolders.json"),
        serde_json::to_string_pretty(&json!({repo.display().to_string(): "TRUST_FOLDER"}))?,
    )?;
    Ok(())
}

/// After `memloop upgrade`: one switch, `hooksConfig.enabled`, and Gemini still connects.
pub fn after_upgrade(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    let text = std::fs::read_to_string(sb.repo.join(".gemini/settings.json"))?;
    let settings: serde_json::Value = serde_json::from_str(&text)?;
    if settings.pointer("/tools/enableHooks").is_some()
        || settings.pointer("/hooks/enabled").is_some()
        || settings.pointer("/hooksConfig/enabled") != Some(&json!(true))
    {
        bail!(
            "after the upgrade .gemini/settings.json should hold only hooksConfig.enabled = true:\n{text}"
        );
    }
    let session_start = settings
        .pointer("/hooks/SessionStart/0/hooks/0/command")
        .and_then(serde_json::Value::as_str);
    if session_start != Some("memloop hook session-start --agent gemini") {
        bail!("after the upgrade .gemini/settings.json lacks memloop's SessionStart hook:\n{text}");
    }
    let listing = mcp_list(ctx, sb)?;
    match server_line(&listing) {
        Some(line) if line.trim_end().ends_with("Connected") => {}
        other => bail!(
            "after the upgrade `gemini mcp list` does not connect to {SERVER}: {other:?}\n{listing}"
        ),
    }
    println!("      gemini: hooksConfig.enabled = true, the old switches gone, mcp list connects");
    Ok(())
}

/// Session start: a note stored before the session is in the first request `gemini -p` sends,
/// by memloop's SessionStart hook (`additionalContext`, which Gemini puts before the prompt in
/// `<hook_context>`). No compaction is asked for: in 0.61.0 no hook runs after one, and
/// PreCompress output is discarded (session_start_facts.md).
pub fn session_start(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let fake = FakeGemini::start(Script {
        steps: vec![Step::Say("Hello.".into())],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake)?;
    super::session_start::seed(sb)?;
    let out = run_prompt(ctx, sb, &fake, "Say hello.")?;
    let Some(first) = fake.model_calls().into_iter().next() else {
        bail!(
            "Gemini sent no request to the fake Gemini API\n{}",
            out.report()
        );
    };
    let request = first.request();
    let opening = request
        .user_texts
        .iter()
        .find(|t| t.contains("<hook_context>"))
        .cloned()
        .unwrap_or_else(|| request.user_texts.join("\n"));
    if !opening.contains("<hook_context>")
        || !opening.contains(super::session_start::NOTE_MARK)
        || !opening.contains("context_query")
    {
        bail!(
            "the first user text of the Gemini session lacks the memory index in <hook_context>\
             \nmodel requests:\n{}\n{}\n{}",
            fake.transcript(),
            proc::tail(&opening, 3000),
            out.report()
        );
    }
    println!(
        "   first request holds the index line {:?} in <hook_context>",
        super::session_start::NOTE_MARK
    );
    Ok(())
}
