//! Scenario "session start": a note is in the repository's memory before the session; the real
//! agent, run against the fake model, must carry memloop's session-start text (the index holding
//! that note) in its FIRST model request of a new session, and again after a compaction where
//! the agent can be made to compact in a test. Facts per agent: session_start_facts.md.
//!
//! Each agent is one function here; adding an agent adds one function and one scenario line.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::config::expect;
use super::fake_model::{Dialect, Exchange, FakeModel, SNAPSHOT, Script};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::{Ctx, agents, http, memloop};

/// The note stored before the session; its first clause is its line in the index.
pub const NOTE: &str = "Release builds need the vendored OpenSSL: the system one lacks the legacy provider the signing step loads.";
/// What of the note the index shows (its title), looked for in the model's requests.
pub const NOTE_MARK: &str = "Release builds need the vendored OpenSSL";
/// The start of memloop's pre-compact reminder (`memloop hook pre-compact`).
pub const PRE_COMPACT_MARK: &str = "older turns are about to be summarised";
/// How Claude Code 2.1.328 opens the conversation after a compaction.
const COMPACTED_MARK: &str = "This session is being continued from a previous conversation";

pub(super) fn needs(ctx: &Ctx) -> Result<()> {
    ctx.caps.need_init()?;
    ctx.caps.need_hook()?;
    ctx.caps.need_serve()
}

/// Stores [`NOTE`] through `memloop serve` over stdio, as an agent would.
pub fn seed(sb: &Sandbox) -> Result<()> {
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_store", "arguments": {
            "content": NOTE, "category": "gotchas", "importance": 8, "tags": ["release", "openssl"]}}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut cmd = sb.command("memloop");
    cmd.arg("serve");
    let out = proc::run(cmd, Duration::from_secs(30), Some(&input))?;
    let stored = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v["id"] == 2 && v.get("result").is_some_and(|r| r["isError"] != true));
    if !out.success() || !stored {
        bail!(
            "memloop serve did not store the seed note\n{}",
            out.report()
        );
    }
    let index = sb.run("memloop", &["memory", "index"], Duration::from_secs(30))?;
    expect(
        index.success() && index.stdout.contains(NOTE_MARK),
        "`memloop memory index` does not show the seed note",
        &index,
    )
}

/// Every text of a request body (system prompt, messages, tool results), flattened.
pub(super) fn all_text(body: &Value) -> String {
    let mut out = String::new();
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => {
                for (key, value) in map {
                    // Tool definitions describe the memory tools; they are not the session's text.
                    if key != "tools" {
                        walk(value, out);
                    }
                }
            }
            _ => {}
        }
    }
    walk(body, &mut out);
    out
}

/// The conversation requests (those offering tools: not title or quota calls), in order.
pub(super) fn conversation_calls(fake: &FakeModel) -> Vec<Exchange> {
    fake.model_calls()
        .into_iter()
        .filter(|ex| !ex.conversation(fake.dialect).tools.is_empty())
        .collect()
}

pub(super) fn save(sb: &Sandbox, fake: &FakeModel) {
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
}

/// The first conversation request must hold the index line of the seed note.
fn first_holds_index(fake: &FakeModel, out: &Output) -> Result<usize> {
    let calls = conversation_calls(fake);
    let Some(first) = calls.first() else {
        bail!(
            "no conversation request reached the fake model\n{}{}",
            fake.transcript(),
            out.report()
        );
    };
    let text = all_text(&first.body);
    expect(
        text.contains(NOTE_MARK) && text.contains("context_query"),
        &format!(
            "the first model request of the session lacks the memory index (request #{}):\n{}",
            first.seq,
            proc::tail(&text, 3000)
        ),
        out,
    )?;
    println!(
        "   first request #{} holds the index line {NOTE_MARK:?}",
        first.seq
    );
    Ok(calls.len())
}

fn claude_env(sb: &mut Sandbox, fake: &FakeModel) {
    sb.set_env("ANTHROPIC_BASE_URL", fake.base_url());
    sb.set_env("ANTHROPIC_AUTH_TOKEN", "sk-e2e");
    sb.set_env("ENABLE_TOOL_SEARCH", "false");
}

/// Claude Code in one process (stream-json), so the compaction happens inside the session:
/// the SessionStart hook's `additionalContext` is in the first request; `/compact` sends
/// memloop's PreCompact text as the summary's instructions, and the next request holds the
/// index again (SessionStart with source `compact`, not a resume).
pub fn claude(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    agents::claude(sb, true)?;
    let fake = FakeModel::start(Dialect::Anthropic, quiet_script(ctx, sb))?;
    claude_env(sb, &fake);
    let mut cmd = sb.command(ctx.tools.bin.join("claude"));
    cmd.args([
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let mut results = 0;
    for prompt in ["Say hello.", "/compact", "Say hello again."] {
        let line = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}});
        p.write_stdin(&format!("{line}\n"))?;
        if p.wait_line(deadline, |l| l.contains("\"type\":\"result\""))
            .is_none()
        {
            break;
        }
        results += 1;
    }
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    save(sb, &fake);
    if results < 3 {
        bail!(
            "Claude Code answered {results} of 3 prompts within {:.0?}\nmodel requests:\n{}{}",
            ctx.gate_timeout,
            fake.transcript(),
            out.report()
        );
    }
    first_holds_index(&fake, &out)?;
    let summary = fake
        .model_calls()
        .into_iter()
        .find(|ex| all_text(&ex.body).contains(PRE_COMPACT_MARK));
    let Some(summary) = summary else {
        bail!(
            "no request carried memloop's PreCompact reminder to the summary\n{}{}",
            fake.transcript(),
            out.report()
        );
    };
    println!(
        "   compaction request #{} carries the PreCompact reminder as the summary's instructions",
        summary.seq
    );
    let calls = conversation_calls(&fake);
    let next = calls
        .iter()
        .find(|ex| all_text(&ex.body["messages"]).contains(COMPACTED_MARK));
    let Some(next) = next else {
        bail!(
            "no conversation request after the compaction\n{}",
            fake.transcript()
        );
    };
    // What follows the summary was given after the compaction, not carried over from before it.
    let messages = next.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let summary_at = messages
        .iter()
        .position(|m| all_text(m).contains(COMPACTED_MARK))
        .unwrap_or(0);
    let given = all_text(&Value::Array(messages[summary_at + 1..].to_vec()));
    expect(
        given.contains(NOTE_MARK),
        &format!(
            "the first request after the compaction (#{}) lacks the index after the summary:\n{}",
            next.seq,
            proc::tail(&given, 3000)
        ),
        &out,
    )?;
    println!(
        "   first request after the compaction (#{}) holds the index again",
        next.seq
    );
    Ok(())
}

/// A model that only chats: no files written, no store (the gate lets such a session stop).
pub(super) fn quiet_script(ctx: &Ctx, sb: &Sandbox) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes: 0,
        write_tool: "Write".into(),
        store_tool: "mcp__memory__memory_store".into(),
        lookup_tool: None,
        latency: ctx.model_latency,
    }
}

/// OpenCode (`opencode serve`, driven over HTTP): memloop's plugin adds the session-start text
/// to the system prompt of the session's first model call (`experimental.chat.system.transform`);
/// `POST /session/:id/summarize` compacts, the plugin adds the pre-compact reminder to the
/// summary's prompt (`experimental.session.compacting`), and the turn OpenCode continues with
/// after the compaction carries the index again (read afresh after `session.compacted`).
pub fn opencode(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    let mut script = quiet_script(ctx, sb);
    script.write_tool = "write".into();
    script.store_tool = "memory_memory_store".into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    agents::opencode(sb, &ctx.tools, Some(&fake.base_url()))?;
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port();
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
    let outcome = drive_opencode(&mut p, port, &fake, deadline);
    let out = p.stop();
    save(sb, &fake);
    let _ = std::fs::write(
        sb.root.join("opencode-serve.log"),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    let before = match outcome {
        Ok(before) => before,
        Err(err) => bail!("{err:#}\nmodel requests:\n{}", fake.transcript()),
    };
    first_holds_index(&fake, &out)?;
    let calls = fake.model_calls();
    let Some(summary) = calls
        .iter()
        .skip(before)
        .find(|ex| all_text(&ex.body).contains(PRE_COMPACT_MARK))
    else {
        bail!(
            "no request after the first turn carried memloop's pre-compact reminder\n{}",
            fake.transcript()
        );
    };
    println!(
        "   compaction request #{} carries the pre-compact reminder",
        summary.seq
    );
    let Some(next) = conversation_calls(&fake)
        .into_iter()
        .find(|ex| ex.seq > summary.seq)
    else {
        bail!(
            "no conversation request after the compaction\n{}",
            fake.transcript()
        );
    };
    let system: Vec<Value> = next.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .cloned()
        .collect();
    let system = all_text(&Value::Array(system));
    expect(
        system.contains(NOTE_MARK),
        &format!(
            "the first request after the compaction (#{}) lacks the index in its system prompt:\n{}",
            next.seq,
            proc::tail(&system, 3000)
        ),
        &out,
    )?;
    println!(
        "   first request after the compaction (#{}) holds the index again",
        next.seq
    );
    Ok(())
}

/// One turn, a compaction, and what follows it; the number of model requests of the first turn.
fn drive_opencode(p: &mut Proc, port: u16, fake: &FakeModel, deadline: Instant) -> Result<usize> {
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
    let id = session["id"]
        .as_str()
        .with_context(|| format!("POST /session answered without an id: {session}"))?
        .to_string();
    http::call_json(
        port,
        "POST",
        &format!("/session/{id}/message"),
        Some(&json!({"parts": [{"type": "text", "text": "Say hello."}]})),
    )?;
    settle(port, &id, fake, deadline)?;
    let before = fake.model_calls().len();
    http::call_json(
        port,
        "POST",
        &format!("/session/{id}/summarize"),
        Some(&json!({"providerID": "fake", "modelID": "fake-model", "auto": false})),
    )?;
    settle(port, &id, fake, deadline)?;
    if fake.model_calls().len() == before {
        bail!("`POST /session/{id}/summarize` sent no request to the model");
    }
    // A compaction asked for by hand ends without a new turn: one more prompt shows what the
    // session carries after it.
    http::call_json(
        port,
        "POST",
        &format!("/session/{id}/message"),
        Some(&json!({"parts": [{"type": "text", "text": "Say hello again."}]})),
    )?;
    settle(port, &id, fake, deadline)?;
    Ok(before)
}

/// Waits until the session is idle and no model request came for a few seconds.
fn settle(port: u16, id: &str, fake: &FakeModel, deadline: Instant) -> Result<()> {
    let quiet = Duration::from_secs(3);
    let (mut count, mut changed) = (fake.model_calls().len(), Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = fake.model_calls().len();
        if now != count {
            (count, changed) = (now, Instant::now());
        }
        let status = http::call_json(port, "GET", "/session/status", None).unwrap_or_default();
        let busy = status[id]["type"].as_str().is_some_and(|t| t != "idle");
        if !busy && changed.elapsed() >= quiet {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the OpenCode session did not settle before the deadline");
        }
    }
}

/// Qwen Code in one process (stream-json input, three prompts): memloop's SessionStart hook's
/// `additionalContext` is in the system instruction of the first request; `/compress` sends
/// memloop's PreCompact text (as `additionalContext`) to the summary's instructions, Qwen awaits
/// SessionStart again with source `compact`, and the next request, which carries the summary,
/// holds the index again.
pub fn qwen(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    let mut script = quiet_script(ctx, sb);
    script.write_tool = "write_file".into();
    script.store_tool = "mcp__memory__memory_store".into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    super::qwen::set_up_user(sb, Some(&fake.base_url()), false)?;
    // A user hook of the harness records each SessionStart input: the sources Qwen ran the
    // event for (memloop's group has no matcher, so it runs for the same ones).
    let sources = sb.root.join("qwen-session-start-inputs.jsonl");
    let user = sb.home.join(".qwen/settings.json");
    let mut settings: Value = serde_json::from_str(&std::fs::read_to_string(&user)?)?;
    let probe = format!(
        "cat >> '{}'; echo >> '{}'",
        sources.display(),
        sources.display()
    );
    settings["hooks"] =
        json!({"SessionStart": [{"hooks": [{"type": "command", "command": probe}]}]});
    std::fs::write(&user, serde_json::to_string_pretty(&settings)? + "\n")?;
    let init = sb.run(
        "memloop",
        &["init", "--yes", "--agents", "qwen", "--trust"],
        Duration::from_secs(60),
    )?;
    expect(
        init.success(),
        "memloop init --agents qwen --trust failed",
        &init,
    )?;
    seed(sb)?;

    let mut cmd = sb.command(ctx.tools.bin.join("qwen"));
    cmd.args([
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--yolo",
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let mut results = 0;
    for prompt in ["Say hello.", "/compress", "Say hello again."] {
        let line = json!({"type": "user", "message": {"role": "user", "content": prompt}});
        p.write_stdin(&format!("{line}\n"))?;
        if p.wait_line(deadline, |l| l.contains("\"type\":\"result\""))
            .is_none()
        {
            break;
        }
        results += 1;
    }
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    save(sb, &fake);
    let ran: Vec<String> = std::fs::read_to_string(&sources)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["source"].as_str().map(str::to_owned))
        .collect();
    if results < 3 {
        bail!(
            "Qwen answered {results} of 3 prompts within {:.0?} (SessionStart ran for {ran:?})\nmodel requests:\n{}{}",
            ctx.gate_timeout,
            fake.transcript(),
            out.report()
        );
    }
    let system_of = |ex: &Exchange| {
        let system: Vec<Value> = ex.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "system")
            .cloned()
            .collect();
        all_text(&Value::Array(system))
    };
    let calls = conversation_calls(&fake);
    let Some(first) = calls.first() else {
        bail!(
            "no conversation request reached the fake model\n{}{}",
            fake.transcript(),
            out.report()
        );
    };
    let system = system_of(first);
    expect(
        system.contains(NOTE_MARK),
        &format!(
            "the system instruction of Qwen's first request (#{}) lacks the memory index:\n{}",
            first.seq,
            proc::tail(&system, 3000)
        ),
        &out,
    )?;
    println!(
        "   first request #{} holds the index line {NOTE_MARK:?} in its system instruction",
        first.seq
    );
    let Some(summary) = fake
        .model_calls()
        .into_iter()
        .find(|ex| all_text(&ex.body).contains(PRE_COMPACT_MARK))
    else {
        bail!(
            "no request carried memloop's PreCompact reminder to the summary\n{}{}",
            fake.transcript(),
            out.report()
        );
    };
    println!(
        "   /compress: summary request #{} carries the PreCompact reminder",
        summary.seq
    );
    expect(
        ran.first().map(String::as_str) == Some("startup") && ran.iter().any(|s| s == "compact"),
        &format!("Qwen ran SessionStart for {ran:?}, not `startup` and then `compact`"),
        &out,
    )?;
    println!("   SessionStart ran for {ran:?}");
    let Some(next) = calls
        .iter()
        .find(|ex| all_text(&ex.body["messages"]).contains(SNAPSHOT))
    else {
        bail!(
            "no conversation request carries the summary: /compress did not compact\n{}",
            fake.transcript()
        );
    };
    let system = system_of(next);
    expect(
        system.contains(NOTE_MARK),
        &format!(
            "the first request after the compaction (#{}) lacks the index in its system instruction:\n{}",
            next.seq,
            proc::tail(&system, 3000)
        ),
        &out,
    )?;
    println!(
        "   first request after the compaction (#{}, with the summary) holds the index again",
        next.seq
    );
    Ok(())
}
