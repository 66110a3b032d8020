//! The real Qwen Code against what `memloop init --agents qwen` writes, its model a scripted
//! OpenAI-compatible fake on 127.0.0.1 (`fake_model.rs`, the one Kimi and OpenCode use).
//! Facts it rests on: `qwen_facts.md`.
//!
//! - `config-qwen`: without `memloop trust` `qwen mcp list` shows memloop's server pending
//!   approval; after `memloop trust --yes` it connects (the approval's hash is the one Qwen
//!   computes); with folder trust turned on later the folder is untrusted and the server is gone
//!   until `memloop sync` (trust was given) trusts it; `memloop uninstall` gives the user's files
//!   back.
//! - `connected-qwen`: `qwen -p` offers `mcp__memory__memory_store` directly, the rules reach the
//!   model from `AGENTS.md`, and the call reaches `memloop serve`.
//! - `gate-qwen`: Qwen writes three files with `write_file` and stops; memloop's gate reads the
//!   chat recording and sends it back (`{"decision": "block"}`, which Qwen's debug log does not
//!   record as a failed hook); it stores over MCP; the next stop passes.

use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::json;

use super::Ctx;
use super::config::expect;
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, Script};
use super::proc::{self, Output};
use super::sandbox::Sandbox;

const SERVER: &str = "memory";
const STORE: &str = "mcp__memory__memory_store";
const LOOKUP: &str = "mcp__memory__context_query";
const RULE: &str = "query the memory store first";

fn memloop(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, Duration::from_secs(60))?;
    if !out.success() {
        bail!(
            "`memloop {}` failed in {}\n{}",
            args.join(" "),
            sb.repo.display(),
            out.report()
        );
    }
    Ok(())
}

fn user_settings_path(sb: &Sandbox) -> std::path::PathBuf {
    sb.home.join(".qwen/settings.json")
}

/// What a user would have set once: the OpenAI-compatible provider (the fake, when given), and
/// everything that would leave loopback off (update checks, usage statistics, telemetry), plus
/// Qwen's own background memory, which makes an extra model call after every turn.
pub fn set_up_user(sb: &mut Sandbox, base_url: Option<&str>, folder_trust: bool) -> Result<()> {
    let mut settings = json!({
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "fake-model"},
        "general": {"enableAutoUpdate": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
    });
    if folder_trust {
        settings["security"]["folderTrust"] = json!({"enabled": true});
    }
    std::fs::create_dir_all(sb.home.join(".qwen"))?;
    std::fs::write(
        user_settings_path(sb),
        serde_json::to_string_pretty(&settings)? + "\n",
    )?;
    if let Some(base) = base_url {
        sb.set_env("OPENAI_BASE_URL", format!("{base}/v1"));
    }
    sb.set_env("OPENAI_API_KEY", "sk-e2e");
    sb.set_env("OPENAI_MODEL", "fake-model");
    sb.set_env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
    Ok(())
}

fn qwen(ctx: &Ctx) -> std::path::PathBuf {
    ctx.tools.bin.join("qwen")
}

/// memloop's line in `qwen mcp list` (colours stripped), if it lists the server.
fn listed(ctx: &Ctx, sb: &Sandbox) -> Result<Option<String>> {
    let out = sb.run(qwen(ctx), &["mcp", "list"], ctx.timeout)?;
    expect(out.success(), "`qwen mcp list` failed", &out)?;
    let text = strip_ansi(&out.stdout);
    Ok(text
        .lines()
        .find(|l| l.contains(&format!(" {SERVER}: ")))
        .map(|l| l.trim().to_owned()))
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn read(path: &std::path::Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_user(sb, None, false)?;
    let approvals = sb.home.join(".qwen/mcpApprovals.json");
    let folders = sb.home.join(".qwen/trustedFolders.json");

    memloop(sb, &["init", "--yes", "--agents", "qwen"])?;
    if read(&approvals).is_some() {
        bail!("memloop init without --trust wrote {}", approvals.display());
    }
    let line = listed(ctx, sb)?;
    if !line
        .as_deref()
        .is_some_and(|l| l.ends_with("Pending approval"))
    {
        bail!("without the approval Qwen should list {SERVER} as pending; it shows {line:?}");
    }
    println!("   without trust: {}", line.unwrap_or_default());

    memloop(sb, &["trust", "--yes"])?;
    let line = listed(ctx, sb)?;
    if !line.as_deref().is_some_and(|l| l.ends_with("- Connected")) {
        bail!(
            "after `memloop trust --yes` Qwen should connect to {SERVER} (the approval's hash is Qwen's); it shows {line:?}\n{}",
            std::fs::read_to_string(&approvals).unwrap_or_default()
        );
    }
    println!("   after trust --yes: {}", line.unwrap_or_default());

    // Folder trust turned on later: the folder is untrusted until sync, keeping the trust given
    // current, adds the folder's entry.
    set_up_user(sb, None, true)?;
    let line = listed(ctx, sb)?;
    if line.is_some() {
        bail!("with folder trust on and no trust entry, Qwen still lists {SERVER}: {line:?}");
    }
    memloop(sb, &["sync"])?;
    let line = listed(ctx, sb)?;
    if !line.as_deref().is_some_and(|l| l.ends_with("- Connected")) {
        bail!(
            "after `memloop sync` wrote {} Qwen should trust the folder and connect; it shows {line:?}",
            folders.display()
        );
    }
    println!(
        "   folder trust on: untrusted, no server; after sync: {}",
        line.unwrap_or_default()
    );

    // Qwen itself adds `"$version": 4` to the user settings on its first start: compare with
    // what it holds now.
    let settings_before = read(&user_settings_path(sb));
    // The project's settings file is memloop's creation; Qwen stamps its `$version` into it too,
    // which must not keep it alive after uninstall.
    let project_settings = sb.repo.join(".qwen/settings.json");
    let stamped =
        std::fs::read_to_string(&project_settings).is_ok_and(|t| t.contains("\"$version\""));
    memloop(sb, &["uninstall", "--yes"])?;
    if project_settings.exists() {
        bail!(
            "memloop uninstall left {} (memloop created it; Qwen added $version: {stamped}):\n{}",
            project_settings.display(),
            std::fs::read_to_string(&project_settings).unwrap_or_default()
        );
    }
    for (path, before) in [
        (&approvals, None),
        (&folders, None),
        (&user_settings_path(sb), settings_before),
    ] {
        if read(path) != before {
            bail!(
                "memloop uninstall left {} different from before",
                path.display()
            );
        }
    }
    if let Some(line) = listed(ctx, sb)? {
        bail!("Qwen still lists {SERVER} after memloop uninstall: {line}");
    }
    println!(
        "   uninstall: approvals and trust files gone, user settings untouched, the project's settings file gone (Qwen had stamped $version into it: {stamped}), no server"
    );
    Ok(())
}

/// `qwen -p <prompt> --yolo` in the sandbox, its output kept beside the fake's requests.
fn prompt(ctx: &Ctx, sb: &Sandbox, fake: &FakeModel, text: &str) -> Result<Output> {
    prompt_in(ctx, sb, fake, text, "yolo")
}

/// `qwen -p <prompt> --approval-mode <mode>` (`yolo` runs every tool; `auto-edit` runs file
/// edits, and in `-p` refuses any other tool that would ask and no rule allows).
fn prompt_in(ctx: &Ctx, sb: &Sandbox, fake: &FakeModel, text: &str, mode: &str) -> Result<Output> {
    let out = sb.run(
        qwen(ctx),
        &[
            "-p",
            text,
            "--approval-mode",
            mode,
            "--output-format",
            "stream-json",
        ],
        ctx.gate_timeout,
    )?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    Ok(out)
}

pub(super) fn install(ctx: &Ctx, sb: &mut Sandbox, fake: &FakeModel) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_user(sb, Some(&fake.base_url()), false)?;
    memloop(sb, &["init", "--yes", "--agents", "qwen", "--trust"])
}

pub(super) fn script(ctx: &Ctx, sb: &Sandbox, writes: usize) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes,
        write_tool: "write_file".into(),
        store_tool: STORE.into(),
        lookup_tool: Some(STORE.replace("memory_store", "context_query")),
        latency: ctx.model_latency,
    }
}

pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, 0))?;
    install(ctx, sb, &fake)?;
    // The fake answers the gate's marker with a lookup and a store: asked for directly here.
    let out = prompt(
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
    expect(out.success(), "qwen -p failed", &out)?;
    let calls = fake.model_calls();
    let Some(first) = calls
        .iter()
        .find(|c| !c.conversation(Dialect::OpenAi).tools.is_empty())
    else {
        return fail("Qwen sent no model request with tools".into());
    };
    let conv = first.conversation(Dialect::OpenAi);
    if !conv.tools.iter().any(|t| t.name == STORE) {
        let names: Vec<&str> = conv.tools.iter().map(|t| t.name.as_str()).collect();
        return fail(format!(
            "Qwen offered no {STORE} (offered: {})",
            names.join(", ")
        ));
    }
    if !first.body.to_string().contains(RULE) {
        return fail(format!(
            "the rules from AGENTS.md ({RULE:?}) did not reach the model"
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
        "   offered {STORE} directly; the rules reached the model; memloop serve answered {:?}",
        proc::tail(&result.text, 160)
    );
    Ok(())
}

pub fn gate(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gate_in(ctx, sb, "yolo")
}

/// As `gate` in `--approval-mode auto-edit`: the lookup and the store run only through the
/// `permissions.allow` entries memloop wrote for its own two tools.
pub fn gate_approved_tools(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gate_in(ctx, sb, "auto-edit")
}

fn gate_in(ctx: &Ctx, sb: &mut Sandbox, mode: &str) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, super::gate::WRITES))?;
    install(ctx, sb, &fake)?;
    sb.set_env("QWEN_DEBUG_LOG_FILE", "1");
    let out = prompt_in(ctx, sb, &fake, super::gate::PROMPT, mode)?;
    let with_log = |msg: &str| format!("{msg}\nmodel requests:\n{}", fake.transcript());
    expect(out.success(), &with_log("qwen -p failed"), &out)?;
    super::gate::check_loop(&fake, STORE, &sb.repo, &out)?;
    check_stop_hooks_ran(sb)?;
    if mode == "yolo" {
        return Ok(());
    }
    super::gate::check_ran_unasked(&fake, &[LOOKUP, STORE], &sb.repo)
}

/// Qwen's debug log (`QWEN_DEBUG_LOG_FILE=1`, `~/.qwen/debug/<session>.txt`) records each Stop
/// hook run as executed, none as failed: the gate's block is a hook that ran, not a failed one
/// (an exit 2 is logged "Hook(s) [...] failed for event Stop").
fn check_stop_hooks_ran(sb: &Sandbox) -> Result<()> {
    let dir = sb.home.join(".qwen/debug");
    let mut log = String::new();
    for entry in std::fs::read_dir(&dir)
        .map_err(|err| anyhow::anyhow!("reading Qwen's debug log folder {}: {err}", dir.display()))?
        .flatten()
    {
        if entry.path().extension().is_some_and(|ext| ext == "txt") {
            log.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    let lines =
        |needle: &str| -> Vec<&str> { log.lines().filter(|l| l.contains(needle)).collect() };
    let failed = lines("failed for event Stop");
    if !failed.is_empty() {
        bail!(
            "Qwen's debug log records memloop's Stop hook as failed:\n{}",
            failed.join("\n")
        );
    }
    let ran = lines("Hook execution for Stop:");
    if ran.is_empty() {
        bail!(
            "Qwen's debug log in {} records no Stop hook run; is QWEN_DEBUG_LOG_FILE still read?",
            dir.display()
        );
    }
    println!(
        "   Qwen's debug log: {} Stop hook runs, none failed",
        ran.len()
    );
    Ok(())
}
