//! Scenario "gate loop": the real agent, driven by the scripted fake model, writes three files
//! and stops; memloop's Stop gate must send it back with `KNOWLEDGE CHECK`; the model then calls
//! the memory server's `memory_store` over MCP; the next stop must be allowed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::config::expect;
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, STORED_TEXT, Script};
use super::http;
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::{Ctx, agents, memloop};

pub const WRITES: usize = 3;
pub const PROMPT: &str = "Create the fixture files e2e-note-1.txt to e2e-note-3.txt, then stop.";

fn needs(ctx: &Ctx) -> Result<()> {
    ctx.caps.need_hook()?;
    ctx.caps.need_serve()
}

fn script(ctx: &Ctx, sb: &Sandbox, write_tool: &str, store_tool: &str) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes: WRITES,
        write_tool: write_tool.into(),
        store_tool: store_tool.into(),
        lookup_tool: Some(store_tool.replace("memory_store", "context_query")),
        latency: ctx.model_latency,
    }
}

pub fn claude(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    claude_with(ctx, sb, "bypassPermissions", |_| Ok(()))
}

/// As `claude`, in the mode that asks before a tool nothing approved (`acceptEdits`: the file
/// writes go through, an MCP call is refused in `-p` unless a rule allows it): the lookup and
/// the store run only through the `permissions.allow` entries memloop wrote for its own tools.
pub fn claude_approved_tools(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    claude_with(ctx, sb, "acceptEdits", |sb| {
        let settings = std::fs::read_to_string(sb.repo.join(".claude/settings.json"))?;
        let approved = ["mcp__memory__context_query", "mcp__memory__memory_store"];
        if approved.iter().any(|tool| !settings.contains(tool)) {
            bail!(
                "memloop wrote no approval of {approved:?} into .claude/settings.json:\n{settings}"
            );
        }
        Ok(())
    })
}

/// As `claude`, with keys Claude Code does not know added to memloop's Stop group and handler:
/// the gate still runs, so doctor may only warn about such keys, never say the file is dropped.
pub fn claude_unknown_keys(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    claude_with(ctx, sb, "bypassPermissions", |sb| {
        let path = sb.repo.join(".claude/settings.json");
        let mut settings: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path)?)?;
        let group = &mut settings["hooks"]["Stop"][0];
        group["note"] = json!("a key no group schema has");
        group["hooks"][0]["timout"] = json!(15);
        std::fs::write(&path, serde_json::to_string_pretty(&settings)?)?;
        Ok(())
    })
}

fn claude_with(
    ctx: &Ctx,
    sb: &mut Sandbox,
    permission_mode: &str,
    edit: impl FnOnce(&Sandbox) -> Result<()>,
) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    agents::claude(sb, false)?;
    edit(sb)?;
    let store = "mcp__memory__memory_store";
    let fake = FakeModel::start(Dialect::Anthropic, script(ctx, sb, "Write", store))?;
    sb.set_env("ANTHROPIC_BASE_URL", fake.base_url());
    sb.set_env("ANTHROPIC_AUTH_TOKEN", "sk-e2e");
    // MCP tools upfront instead of behind ToolSearch (e2e-findings.md).
    sb.set_env("ENABLE_TOOL_SEARCH", "false");
    let mut cmd = sb.command(ctx.tools.bin.join("claude"));
    cmd.args([
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        permission_mode,
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let prompt = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]}});
    p.write_stdin(&format!("{prompt}\n"))?;
    // Stdin stays open until the result line: a closed stdin can end the run before late hooks.
    let result = p.wait_line(deadline, |l| l.contains("\"type\":\"result\""));
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    if result.is_none() {
        bail!(
            "Claude Code printed no result line within {:.0?}\nmodel requests:\n{}{}",
            ctx.gate_timeout,
            fake.transcript(),
            out.report()
        );
    }
    expect(out.success(), "Claude Code exited with an error", &out)?;
    report_debug_log(sb);
    check_loop(&fake, store, &sb.repo, &out)?;
    if permission_mode == "bypassPermissions" {
        return Ok(());
    }
    check_ran_unasked(&fake, &[LOOKUP, store], &sb.repo)
}

const LOOKUP: &str = "mcp__memory__context_query";

/// The gate's debug log holds a line for every stop that had to wait for the transcript to
/// catch up with `last_assistant_message` (and for every stop where it never did); shown so a
/// repeat run says how often Claude Code's transcript lagged.
fn report_debug_log(sb: &Sandbox) {
    let log = sb.xdg_state.join("memloop/gate/debug.log");
    match std::fs::read_to_string(&log) {
        Ok(text) if !text.trim().is_empty() => {
            for line in text.lines() {
                println!("   gate debug log: {line}");
            }
        }
        _ => println!("   gate debug log: empty (no stop had to wait for the transcript)"),
    }
}

pub fn kimi(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    agents::kimi_trust(sb)?;
    let store = "mcp__memory__memory_store";
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, "Write", store))?;
    agents::kimi_model_env(sb, &fake.base_url());
    let out = sb.run(
        ctx.tools.bin.join("kimi"),
        &["-p", PROMPT, "--output-format", "stream-json"],
        ctx.gate_timeout,
    )?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let with_log = |msg: &str| format!("{msg}\nmodel requests:\n{}", fake.transcript());
    expect(out.success(), &with_log("Kimi Code failed"), &out)?;
    expect(
        !out.stderr.contains("Ignored invalid config section"),
        &with_log("Kimi ignored a config section (the hooks memloop wrote?)"),
        &out,
    )?;
    expect(
        !out.stderr.contains("not trusted"),
        &with_log("Kimi did not trust the workspace and skipped the project MCP servers"),
        &out,
    )?;
    check_loop(&fake, store, &sb.repo, &out)
}

pub fn opencode(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    ctx.caps.need_init()?; // the plugin is memloop's asset; --hand-written has none
    memloop::install(sb, &ctx.caps, false, None)?;
    let plugin = sb.repo.join(".opencode/plugins/memloop.js");
    if !plugin.is_file() {
        bail!("memloop init wrote no {}", plugin.display());
    }
    let store = "memory_memory_store";
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, "write", store))?;
    agents::opencode(sb, &ctx.tools, Some(&fake.base_url()))?;
    let port = free_port()?;
    let mut cmd = sb.command(ctx.tools.bin.join("opencode"));
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
    let outcome = drive_opencode(&mut p, port, &fake, store, deadline);
    let out = p.stop();
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let _ = std::fs::write(
        sb.root.join("opencode-serve.log"),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    if let Err(err) = outcome {
        bail!(
            "{err:#}\nmodel requests:\n{}\n{}",
            fake.transcript(),
            plugin_lines(&out)
        );
    }
    check_loop(&fake, store, &sb.repo, &out)
}

/// One-shot `opencode run "<prompt>"`, as a CI job runs it: the process exits after its answer,
/// so the plugin must send the agent back inside the still-running prompt loop.
pub fn opencode_run(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    ctx.caps.need_init()?;
    memloop::install(sb, &ctx.caps, false, None)?;
    let plugin = sb.repo.join(".opencode/plugins/memloop.js");
    if !plugin.is_file() {
        bail!("memloop init wrote no {}", plugin.display());
    }
    let store = "memory_memory_store";
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb, "write", store))?;
    agents::opencode(sb, &ctx.tools, Some(&fake.base_url()))?;
    // stdin is closed at once: `run` appends a non-terminal stdin to the prompt.
    let out = sb.run(
        ctx.tools.bin.join("opencode"),
        &["run", "--print-logs", PROMPT],
        ctx.gate_timeout,
    )?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let _ = std::fs::write(
        sb.root.join("opencode-run.log"),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    let calls = fake.model_calls();
    println!(
        "   `opencode run`: {}, {} model requests",
        out.status_text(),
        calls.len()
    );
    if !out.success() {
        bail!(
            "`opencode run` failed\nmodel requests:\n{}\n{}",
            fake.transcript(),
            plugin_lines(&out)
        );
    }
    check_loop(&fake, store, &sb.repo, &out).map_err(|err| {
        anyhow::anyhow!(
            "{err:#}\n{}\n(the plugin sends the agent back from experimental.text.complete, inside \
             the prompt loop `opencode run` waits on; a send-back from session.idle comes too late \
             in a one-shot run)",
            plugin_lines(&out)
        )
    })
}

/// Start a session over HTTP and wait until it has stored and stays idle (`opencode serve`, or
/// `kilo serve`, which kept its API).
pub(super) fn drive_opencode(
    p: &mut Proc,
    port: u16,
    fake: &FakeModel,
    store: &str,
    deadline: Instant,
) -> Result<()> {
    loop {
        if p.exited() {
            bail!("`opencode serve` exited before it answered on 127.0.0.1:{port}");
        }
        if http::call(port, "GET", "/session", None, Duration::from_secs(5))
            .is_ok_and(|r| r.status == 200)
        {
            break;
        }
        if Instant::now() > deadline {
            bail!("`opencode serve` did not answer on 127.0.0.1:{port}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let session = http::call_json(port, "POST", "/session", Some(&json!({})))?;
    let id = session
        .get("id")
        .and_then(|v| v.as_str())
        .with_context(|| format!("POST /session answered without an id: {session}"))?
        .to_string();
    http::call_json(
        port,
        "POST",
        &format!("/session/{id}/prompt_async"),
        Some(&json!({"parts": [{"type": "text", "text": PROMPT}]})),
    )?;
    // Done when the store result went back to the model, the session is idle, and no model
    // request came for a while (a gate that blocks again would prompt once more).
    let settle = Duration::from_secs(8);
    let mut last_count = 0;
    let mut last_change = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let calls = fake.model_calls();
        if calls.len() != last_count {
            last_count = calls.len();
            last_change = Instant::now();
        }
        let status = http::call_json(port, "GET", "/session/status", None).unwrap_or_default();
        let busy = status
            .get(&id)
            .and_then(|s| s.get("type"))
            .and_then(|t| t.as_str())
            .is_some_and(|t| t != "idle");
        let stored = calls
            .iter()
            .any(|c| c.conversation(Dialect::OpenAi).result_of(store).is_some());
        if !busy
            && last_change.elapsed() >= settle
            && (stored || last_change.elapsed() >= settle * 3)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the OpenCode session did not settle (stored: {stored}, busy: {busy}) before the deadline"
            );
        }
        if p.exited() {
            bail!("`opencode serve` exited during the session");
        }
    }
}

fn plugin_lines(out: &Output) -> String {
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("plugin") || l.contains("memloop") || l.contains("ERROR"))
        .collect();
    format!(
        "opencode log (plugin/memloop/ERROR lines):\n{}",
        proc::tail(&lines.join("\n"), 6000)
    )
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

/// The three claims of the loop, from the fake model's request log and the repo.
pub fn check_loop(fake: &FakeModel, store: &str, repo: &Path, out: &Output) -> Result<()> {
    let dialect = fake.dialect;
    let calls = fake.model_calls();
    let convs: Vec<_> = calls.iter().map(|c| c.conversation(dialect)).collect();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}\n{}",
            fake.transcript(),
            out.report()
        )
    };

    for n in 1..=WRITES {
        let file = repo.join(format!("e2e-note-{n}.txt"));
        if !file.is_file() {
            return fail(format!(
                "the agent's write tool did not create {} (the fake model asked for it)",
                file.display()
            ));
        }
    }

    // 1. The gate's message reached the model.
    let Some(gate_at) = convs.iter().position(|c| c.text.contains(GATE_MARKER)) else {
        return fail(format!(
            "the gate's {GATE_MARKER:?} never reached the model: after {WRITES} edits the agent stopped \
             and was not sent back ({} model requests)",
            calls.len()
        ));
    };
    let gate_text = convs[gate_at]
        .text
        .lines()
        .find(|l| l.contains(GATE_MARKER))
        .unwrap_or("")
        .to_string();
    println!(
        "   gate message reached the model in request #{}: {gate_text}",
        calls[gate_at].seq
    );

    // 2. memory_store was called over MCP and worked.
    let Some(stored_at) = convs.iter().position(|c| c.result_of(store).is_some()) else {
        return fail(format!(
            "after the gate's message no result of {store} came back to the model (was the tool offered? \
             did the agent run it?)"
        ));
    };
    let result = convs[stored_at].result_of(store).expect("checked above");
    let notes = files_under(&repo.join(".memloop/memory"));
    let looks_failed = result.is_error || {
        let t = result.text.to_ascii_lowercase();
        t.contains("error")
            || t.contains("no such tool")
            || t.contains("not found")
            || t.contains("invalid")
    };
    if notes.is_empty() && looks_failed {
        return fail(format!(
            "{store} was called but failed, and no note appeared under .memloop/memory/: {:?}",
            result.text
        ));
    }
    if !notes.is_empty()
        && !notes
            .iter()
            .any(|n| std::fs::read_to_string(n).is_ok_and(|t| t.contains(STORED_TEXT)))
    {
        return fail(format!(
            "notes appeared under .memloop/memory/ but none holds what the model stored ({STORED_TEXT:?}): {notes:?}"
        ));
    }
    println!(
        "   {store} answered {:?}; notes under .memloop/memory/: {}",
        proc::tail(&result.text, 200),
        notes.len()
    );

    let lookup = store.replace("memory_store", "context_query");
    if let Some(r) = convs[stored_at].result_of(&lookup) {
        println!("   {lookup} answered {:?}", proc::tail(&r.text, 160));
    }

    // 3. The next stop was allowed: nothing sent the agent back after the store.
    let gates_at_store = convs[stored_at].text.matches(GATE_MARKER).count();
    if let Some(later) = convs[stored_at..]
        .iter()
        .position(|c| c.text.matches(GATE_MARKER).count() > gates_at_store)
    {
        return fail(format!(
            "the gate blocked again after {store} succeeded (request #{}); the next stop should be allowed",
            calls[stored_at + later].seq
        ));
    }
    let after = convs[stored_at + 1..]
        .iter()
        .filter(|c| !c.tools.is_empty())
        .count();
    if after > 0 {
        return fail(format!(
            "the agent kept going after the store ({after} more model requests); expected it to stop"
        ));
    }
    println!(
        "   {} model requests; the last at +{:.1}s; the run ended after the store",
        calls.len(),
        calls.last().map_or(0.0, |c| c.at.as_secs_f64())
    );
    Ok(())
}

/// In a mode where the agent asks before a tool nothing approved: each of `tools` (the lookup and
/// the store) ran and memloop serve answered it (its answers are JSON objects; a refusal is the
/// agent's own text, such as Qwen's "requires permission ... declined"), and the store left a
/// note. `check_loop` alone would pass a refused store that left no note.
pub fn check_ran_unasked(fake: &FakeModel, tools: &[&str], repo: &Path) -> Result<()> {
    let convs: Vec<_> = fake
        .model_calls()
        .iter()
        .map(|c| c.conversation(fake.dialect))
        .collect();
    for tool in tools {
        let Some(result) = convs.iter().find_map(|c| c.result_of(tool)) else {
            bail!("no result of {tool} came back to the model");
        };
        let answered =
            serde_json::from_str::<serde_json::Value>(&result.text).is_ok_and(|v| v.is_object());
        if result.is_error || !answered {
            bail!(
                "{tool} did not run without a question; the agent answered {:?}",
                result.text
            );
        }
    }
    if files_under(&repo.join(".memloop/memory")).is_empty() {
        bail!("the store ran but no note appeared under .memloop/memory/");
    }
    println!(
        "   {} ran without a question, answered by memloop serve",
        tools.join(" and ")
    );
    Ok(())
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}
