//! Pi (`pi`, npm `@mariozechner/pi-coding-agent`): no hook files and no MCP client, so memloop's
//! whole part is its extension `.pi/extensions/memloop.js`. Driven one-shot (`pi -p`, print mode)
//! against the fake model as a custom provider in `~/.pi/agent/models.json` (the sandbox's HOME):
//! the extension's tools in the model's requests, the gate's send-back inside one `pi -p` and in a
//! Pi that keeps running (`pi --mode rpc`), the index in the first request's system prompt, and
//! recall over three prompts of one session (`-c` continues it). Facts: pi_facts.md.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::config::expect;
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, STORED_TEXT, Script};
use super::gate::{self, PROMPT, check_loop};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::session_start::{self, NOTE_MARK, all_text, conversation_calls, quiet_script, seed};
use super::{Ctx, recall};

/// memloop's tools as the extension registers them: under the server's own names.
const STORE: &str = "memory_store";
const LOOKUP: &str = "context_query";
/// Where memloop writes the extension.
const EXTENSION: &str = ".pi/extensions/memloop.js";
/// A line of memloop's rules (AGENTS.md), which Pi puts in its system prompt.
const RULE: &str = "query the memory store first";

fn needs(ctx: &Ctx) -> Result<()> {
    ctx.caps.need_init()?;
    ctx.caps.need_hook()?;
    ctx.caps.need_serve()
}

/// `memloop init --yes --agents pi`; the extension is in the repository.
fn init(sb: &Sandbox) -> Result<()> {
    let out = sb.run(
        "memloop",
        &["init", "--yes", "--agents", "pi"],
        std::time::Duration::from_secs(60),
    )?;
    expect(out.success(), "memloop init failed", &out)?;
    if !sb.repo.join(EXTENSION).is_file() {
        bail!("memloop init wrote no {EXTENSION}\n{}", out.report());
    }
    Ok(())
}

/// What a user of Pi has once: the fake model as a custom provider (`~/.pi/agent/models.json`,
/// OpenAI chat completions at the fake's base URL) chosen as the default in
/// `~/.pi/agent/settings.json`; no startup network, no telemetry.
fn set_up(sb: &mut Sandbox, fake: &FakeModel) -> Result<()> {
    sb.set_env("PI_OFFLINE", "1");
    sb.set_env("PI_TELEMETRY", "0");
    let dir = sb.home.join(".pi/agent");
    std::fs::create_dir_all(&dir)?;
    let models = json!({"providers": {"fake": {
        "baseUrl": format!("{}/v1", fake.base_url()),
        "api": "openai-completions",
        "apiKey": "sk-e2e",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": "fake-model", "name": "Fake Model", "reasoning": false}],
    }}});
    std::fs::write(
        dir.join("models.json"),
        serde_json::to_string_pretty(&models)?,
    )?;
    let settings = json!({"defaultProvider": "fake", "defaultModel": "fake-model"});
    std::fs::write(
        dir.join("settings.json"),
        serde_json::to_string_pretty(&settings)?,
    )?;
    Ok(())
}

fn script(ctx: &Ctx, sb: &Sandbox) -> Script {
    Script {
        repo: sb.repo.clone(),
        writes: gate::WRITES,
        write_tool: "write".into(),
        store_tool: STORE.into(),
        lookup_tool: Some(LOOKUP.into()),
        latency: ctx.model_latency,
    }
}

/// `pi -p [extra...] <prompt>` in the repository (print mode: one prompt, then exit).
fn run_once(
    ctx: &Ctx,
    sb: &Sandbox,
    extra: &[&str],
    prompt: &str,
    fake: &FakeModel,
    log: &str,
) -> Result<Output> {
    let mut args = vec!["-p"];
    args.extend_from_slice(extra);
    args.push(prompt);
    let out = sb.run(ctx.tools.bin.join("pi"), &args, ctx.gate_timeout)?;
    session_start::save(sb, fake);
    let _ = std::fs::write(sb.root.join(log), format!("{}\n{}", out.stdout, out.stderr));
    println!(
        "   `pi {}`: {}, {} model requests",
        args[..args.len() - 1].join(" "),
        out.status_text(),
        fake.model_calls().len()
    );
    if !out.success() {
        bail!(
            "`pi -p` failed\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        );
    }
    Ok(out)
}

/// The names of the tools a request offered.
fn offered(call: &super::fake_model::Exchange) -> Vec<String> {
    call.conversation(Dialect::OpenAi)
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

/// `memloop init --agents pi`: Pi loads the extension from `.pi/extensions/` (its tools are in the
/// model's request, beside Pi's own) and the rules from AGENTS.md; `memloop doctor --live` sees it
/// through Pi's RPC mode; `memloop uninstall` leaves the repository as it was before init.
pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    let before = tree(&sb.repo)?;
    init(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, quiet_script(ctx, sb))?;
    set_up(sb, &fake)?;
    let out = run_once(ctx, sb, &[], "Say hello.", &fake, "pi-config.log")?;
    let calls = conversation_calls(&fake);
    let Some(first) = calls.first() else {
        bail!(
            "no conversation request reached the fake model\n{}",
            out.report()
        );
    };
    let names = offered(first);
    for tool in [STORE, LOOKUP, "write", "bash"] {
        expect(
            names.iter().any(|n| n == tool),
            &format!(
                "Pi's request offers no {tool} (offered: {})",
                names.join(", ")
            ),
            &out,
        )?;
    }
    expect(
        all_text(&first.body).contains(RULE),
        &format!("the rules from AGENTS.md ({RULE:?}) did not reach the model"),
        &out,
    )?;
    println!(
        "   Pi offered {}; the rules reached the model",
        names.join(", ")
    );
    // doctor --live asks the real Pi (RPC get_commands) what it loaded.
    let doctor = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        std::time::Duration::from_secs(120),
    )?;
    let report: Value = serde_json::from_str(doctor.stdout.trim())
        .with_context(|| format!("memloop doctor printed no JSON\n{}", doctor.report()))?;
    let live = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["id"] == "pi.live")
        .cloned()
        .unwrap_or(Value::Null);
    let loaded = "Pi loads .pi/extensions/memloop.js: memloop: 7 memory tools";
    expect(
        live["severity"] == "ok"
            && live["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(loaded)),
        &format!("memloop doctor --live does not see Pi load the extension: {live}"),
        &doctor,
    )?;
    println!(
        "   doctor --live: {}",
        live["message"].as_str().unwrap_or_default()
    );
    let un = sb.run(
        "memloop",
        &["uninstall", "--yes"],
        std::time::Duration::from_secs(60),
    )?;
    expect(un.success(), "memloop uninstall failed", &un)?;
    // memloop.toml stays by design (uninstall says so): the settings, not memloop's entries.
    let after: Vec<String> = tree(&sb.repo)?
        .into_iter()
        .filter(|path| path != "memloop.toml")
        .collect();
    if after != before {
        bail!(
            "memloop uninstall did not leave the repository as before init\nbefore: {before:?}\nafter: {after:?}\n{}",
            un.report()
        );
    }
    println!("   memloop uninstall left the repository as before init (memloop.toml kept)");
    Ok(())
}

/// The repository's files and folders (without `.git/` and what Pi and memloop keep at run time:
/// `.memloop/`), sorted.
fn tree(root: &std::path::Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            let rel = path.strip_prefix(root)?.to_string_lossy().into_owned();
            if rel == ".git" || rel == ".memloop" {
                continue;
            }
            if path.is_dir() {
                found.push(format!("{rel}/"));
                stack.push(path);
            } else {
                found.push(rel);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `pi -p` offers the model memloop's `memory_store` (registered by the extension from
/// `memloop serve`'s tool list) and the call stores a note.
pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb)?;
    let mut script = script(ctx, sb);
    script.writes = 0;
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    set_up(sb, &fake)?;
    // The fake answers the gate's marker with a lookup and a store: asked for directly here.
    let out = run_once(
        ctx,
        sb,
        &[],
        &format!("{GATE_MARKER}: store what you know about this repository."),
        &fake,
        "pi-connected.log",
    )?;
    let calls = fake.model_calls();
    let Some(first) = calls.iter().find(|c| !offered(c).is_empty()) else {
        bail!("Pi sent no model request with tools\n{}", out.report());
    };
    expect(
        offered(first).iter().any(|n| n == STORE),
        &format!(
            "Pi offered no {STORE} (offered: {})",
            offered(first).join(", ")
        ),
        &out,
    )?;
    let last = calls
        .last()
        .expect("checked above")
        .conversation(Dialect::OpenAi);
    let Some(result) = last.result_of(STORE) else {
        bail!(
            "no result of {STORE} came back to the model\n{}{}",
            fake.transcript(),
            out.report()
        );
    };
    let answer: Value = serde_json::from_str(&result.text).unwrap_or(Value::Null);
    let Some(id) = answer["id"].as_str().filter(|_| !result.is_error) else {
        bail!("{STORE} failed: {:?}\n{}", result.text, out.report());
    };
    let note = sb.repo.join(answer["file"].as_str().unwrap_or_default());
    expect(
        note.is_file(),
        &format!(
            "{STORE} answered {id}, but {} does not exist",
            note.display()
        ),
        &out,
    )?;
    println!(
        "   offered {STORE}; memloop serve stored {id} ({})",
        proc::tail(&result.text, 120)
    );
    Ok(())
}

/// One `pi -p`: three writes, the extension's gate sends the agent back at `agent_end`, it looks
/// up and stores through the extension's tools, and the next stop passes, all before Pi exits.
pub fn gate(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb))?;
    set_up(sb, &fake)?;
    let out = run_once(ctx, sb, &[], PROMPT, &fake, "pi-gate.log")?;
    check_loop(&fake, STORE, &sb.repo, &out)?;
    // The fake's OpenAI dialect cannot tell a failed tool result: the note itself is the proof.
    let notes = sb.repo.join(".memloop/memory/notes");
    let stored = std::fs::read_dir(&notes)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| std::fs::read_to_string(entry.path()).is_ok_and(|t| t.contains(STORED_TEXT)));
    expect(
        stored,
        &format!(
            "no note under {} holds what the model stored ({STORED_TEXT:?})",
            notes.display()
        ),
        &out,
    )?;
    let sent_back = fake.model_calls().last().map_or(0, |c| {
        c.conversation(Dialect::OpenAi)
            .text
            .matches(GATE_MARKER)
            .count()
    });
    expect(
        sent_back == 1,
        &format!(
            "Pi was sent back {sent_back} times (want once)\n{}",
            fake.transcript()
        ),
        &out,
    )?;
    Ok(())
}

/// A stored note is in the system prompt of the first model request of `pi -p` (the extension's
/// `before_agent_start`), once.
pub fn session_start(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb)?;
    seed(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, quiet_script(ctx, sb))?;
    set_up(sb, &fake)?;
    let out = run_once(ctx, sb, &[], "Say hello.", &fake, "pi-session-start.log")?;
    let calls = conversation_calls(&fake);
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
    let system = all_text(&Value::Array(system));
    expect(
        system.matches(NOTE_MARK).count() == 1,
        &format!(
            "the system prompt of Pi's first request (#{}) holds the memory index {} time(s), want once:\n{}",
            first.seq,
            system.matches(NOTE_MARK).count(),
            proc::tail(&system, 3000)
        ),
        &out,
    )?;
    println!(
        "   first request (#{}) holds the index once in its system prompt",
        first.seq
    );
    Ok(())
}

/// Three prompts of one Pi session (`pi -p`, then `pi -p -c`): the extension gives no note for a
/// nonsense prompt, the note's full text with one that matches it, not again with a second one.
pub fn recall(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb)?;
    seed(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, quiet_script(ctx, sb))?;
    set_up(sb, &fake)?;
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, prompt) in recall::PROMPTS.iter().enumerate() {
        let before = conversation_calls(&fake).len();
        let extra: &[&str] = if i == 0 { &[] } else { &["-c"] };
        let out = run_once(
            ctx,
            sb,
            extra,
            prompt,
            &fake,
            &format!("pi-recall-{}.log", i + 1),
        )?;
        if let Some(first) = conversation_calls(&fake).into_iter().nth(before) {
            firsts.push((first.seq, first.body));
        }
        last = Some(out);
    }
    recall::check_requests(&firsts, &last.expect("three prompts ran"))
}

/// A Pi that keeps running (`pi --mode rpc`, as an editor or a TUI session is): one prompt over
/// stdin writes three files, the extension's gate sends the agent back at that run's
/// `agent_end`, the second run looks up and stores, and its `agent_end` lets the session rest (no
/// third run starts).
pub fn gate_rpc(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    init(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, script(ctx, sb))?;
    set_up(sb, &fake)?;
    let mut cmd = sb.command(ctx.tools.bin.join("pi"));
    cmd.args(["--mode", "rpc"]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let prompt = json!({"id": "e2e-1", "type": "prompt", "message": PROMPT});
    p.write_stdin(&format!("{prompt}\n"))?;
    // Pi prints `agent_end` after the extensions' handlers for it ran: the verdict is in by then.
    let is_end =
        |line: &str| serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == "agent_end");
    let mut ends = 0;
    while ends < 2 && p.wait_line(deadline, is_end).is_some() {
        ends += 1;
    }
    let rest = Instant::now() + std::time::Duration::from_secs(5);
    let third = p.wait_line(rest, |line| {
        serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == "agent_start")
    });
    p.close_stdin();
    let out = p.finish(Instant::now() + std::time::Duration::from_secs(30));
    session_start::save(sb, &fake);
    let _ = std::fs::write(
        sb.root.join("pi-rpc.log"),
        format!("{}\n{}", out.stdout, out.stderr),
    );
    println!(
        "   `pi --mode rpc`: {} runs ended, {} model requests",
        ends,
        fake.model_calls().len()
    );
    if ends < 2 {
        bail!(
            "Pi ended {ends} run(s); the gate's send-back should have started a second\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        );
    }
    if third.is_some() {
        bail!(
            "a third run started after the store: the stop after it should have passed\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        );
    }
    check_loop(&fake, STORE, &sb.repo, &out)
}
