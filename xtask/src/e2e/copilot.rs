//! The real Copilot CLI (`@github/copilot`, pinned) against what `memloop init --agents copilot`
//! writes, offline (`COPILOT_OFFLINE=true`: no GitHub auth, telemetry or update check) against the
//! scripted fake Responses API on 127.0.0.1. Facts: `copilot_facts.md` beside this file.
//!
//! - `config-copilot`: without consent the folder is untrusted and `copilot mcp list --json`
//!   lists no workspace server; after `memloop trust --yes` it lists memloop's from
//!   `.mcp.json`, `copilot instruction list --json` shows the rules once (`AGENTS.md +
//!   CLAUDE.md`), `memloop doctor --live` agrees, and uninstall gives the user config back.
//! - `connected-copilot`: `copilot -p` offers `memory-memory_store` and the call reaches
//!   `memloop serve`.
//! - `gate-copilot`: Copilot writes files with `create` and runs `bash`; memloop's `agentStop`
//!   gate blocks once on stdout, Copilot goes on with the reason, stores, and the next stop passes.
//! - `gate-copilot-claude-hook`: a repository for Claude Code and Copilot without Copilot's own
//!   hook: Copilot runs Claude's `.claude/settings.json` Stop hook with its own payload, and the
//!   gate judges it as Copilot's, answering Copilot's way.
//! - `gate-copilot-both-hooks`: both hooks installed: exactly one verdict per stop.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::Ctx;
use super::config::expect;
use super::fake_model::GATE_MARKER;
use super::fake_responses::{FakeResponses, SCRIPT_EXHAUSTED, Script, Step, tool_label};
use super::proc::{self, Output};
use super::sandbox::Sandbox;

pub const SERVER: &str = "memory";
/// How Copilot offers memloop's `memory_store` to the model.
pub const STORE_TOOL: &str = "memory-memory_store";

pub(super) fn copilot(ctx: &Ctx) -> std::path::PathBuf {
    ctx.tools.bin.join("copilot")
}

pub(super) fn memloop_ok(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, std::time::Duration::from_secs(60))?;
    if !out.success() {
        bail!("`memloop {}` failed\n{}", args.join(" "), out.report());
    }
    Ok(())
}

/// Offline, the model from the fake, and in `-p` mode the repository's hooks and MCP servers on.
pub(super) fn offline_env(sb: &mut Sandbox, base_url: Option<&str>) {
    sb.set_env("COPILOT_OFFLINE", "true");
    sb.set_env("COPILOT_HOME", sb.home.join(".copilot").to_string_lossy());
    if let Some(base) = base_url {
        sb.set_env("COPILOT_PROVIDER_BASE_URL", base);
        sb.set_env("COPILOT_PROVIDER_WIRE_API", "responses");
        sb.set_env("COPILOT_MODEL", "gpt-5");
    }
    sb.set_env("GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS", "true");
    sb.set_env("GITHUB_COPILOT_PROMPT_MODE_WORKSPACE_MCP", "true");
}

pub(super) fn json_out(ctx: &Ctx, sb: &Sandbox, args: &[&str]) -> Result<Value> {
    let out = sb.run(copilot(ctx), args, ctx.timeout)?;
    expect(
        out.success(),
        &format!("`copilot {}` failed", args.join(" ")),
        &out,
    )?;
    serde_json::from_str(out.stdout.trim()).with_context(|| {
        format!(
            "`copilot {}` printed no JSON\n{}",
            args.join(" "),
            out.report()
        )
    })
}

pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    offline_env(sb, None);
    let user_config = sb.home.join(".copilot/config.json");
    memloop_ok(sb, &["init", "--yes", "--agents", "copilot"])?;
    if user_config.exists() {
        bail!(
            "memloop init without --trust wrote {}",
            user_config.display()
        );
    }
    let listed = json_out(ctx, sb, &["mcp", "list", "--json"])?;
    if listed["mcpServers"].get(SERVER).is_some() {
        bail!("Copilot loaded the server of an untrusted folder: {listed}");
    }
    println!("   without consent: untrusted, `copilot mcp list` shows no {SERVER}");

    memloop_ok(sb, &["trust", "--yes"])?;
    let listed = json_out(ctx, sb, &["mcp", "list", "--json"])?;
    let server = &listed["mcpServers"][SERVER];
    if server["source"] != "workspace"
        || server["enabled"] != json!(true)
        || server["command"] != "memloop"
        || server["args"] != json!(["serve"])
    {
        bail!("after memloop trust Copilot does not load memloop serve from .mcp.json: {listed}");
    }
    println!(
        "   after memloop trust: {SERVER} from {}",
        server["sourcePath"]
    );
    let sources = json_out(ctx, sb, &["instruction", "list", "--json"])?;
    let labels: Vec<&str> = sources
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["location"] == "repository")
        .filter_map(|s| s["sourcePath"].as_str())
        .collect();
    if labels != ["AGENTS.md + CLAUDE.md"] {
        bail!(
            "Copilot should read the rules once, from the linked AGENTS.md + CLAUDE.md: {sources}"
        );
    }
    println!("   instruction list: {labels:?}");

    let out = sb.run(
        "memloop",
        &["doctor", "--live", "--format", "json"],
        ctx.timeout * 3,
    )?;
    let report: Value = serde_json::from_str(&out.stdout)
        .with_context(|| format!("doctor printed no JSON\n{}", out.report()))?;
    for id in [
        "copilot.live",
        "copilot.live-instructions",
        "copilot.trust",
        "copilot.instructions",
    ] {
        let found = report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["id"] == id);
        if found.is_none_or(|f| f["severity"] != "ok") {
            bail!("doctor --live: {id} is not ok: {found:?}\n{}", out.report());
        }
    }
    println!("   doctor --live: copilot.live, live-instructions, trust, instructions ok");

    memloop_ok(sb, &["uninstall", "--yes"])?;
    if user_config.exists() {
        bail!(
            "memloop uninstall left {} (memloop created it):\n{}",
            user_config.display(),
            std::fs::read_to_string(&user_config)?
        );
    }
    let listed = json_out(ctx, sb, &["mcp", "list", "--json"])?;
    if listed["mcpServers"].get(SERVER).is_some() {
        bail!("Copilot still loads {SERVER} after uninstall: {listed}");
    }
    println!("   uninstall: the user config is gone again, no {SERVER}");
    Ok(())
}

/// `copilot -p`, its JSON event stream and the fake's requests kept beside the sandbox.
pub(super) fn prompt(ctx: &Ctx, sb: &Sandbox, fake: &FakeResponses, text: &str) -> Result<Output> {
    let args = ["-p", text, "--allow-all", "--output-format", "json"];
    let out = sb.run(copilot(ctx), &args, ctx.gate_timeout)?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let _ = std::fs::write(sb.root.join("copilot-events.jsonl"), &out.stdout);
    expect(
        out.success(),
        &format!(
            "`copilot -p` failed\nmodel requests:\n{}",
            fake.transcript()
        ),
        &out,
    )?;
    // Loopback only: the fake is the one server Copilot may talk to, and only for the model.
    if let Some(other) = fake.exchanges().iter().find(|e| !e.is_model_call()) {
        bail!(
            "Copilot asked the fake for {} {}",
            other.method,
            other.target
        );
    }
    Ok(out)
}

pub(super) fn install(
    ctx: &Ctx,
    sb: &mut Sandbox,
    fake: &FakeResponses,
    agents: &str,
) -> Result<()> {
    ctx.caps.need_init()?;
    offline_env(sb, Some(&fake.base_url()));
    memloop_ok(sb, &["init", "--yes", "--agents", agents, "--trust"])
}

pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Tool(STORE_TOOL.into()),
            Step::Say("Stored it.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake, "copilot")?;
    let out = prompt(ctx, sb, &fake, "Store what you know about this repository.")?;
    let calls = fake.model_calls();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    let Some(first) = calls.first().map(|c| c.request()) else {
        return fail("Copilot sent no request to the fake Responses API".into());
    };
    if first.tool(None, STORE_TOOL).is_none() {
        let names: Vec<String> = first.tools.iter().map(tool_label).collect();
        return fail(format!(
            "Copilot offered no {STORE_TOOL} (offered: {})",
            names.join(", ")
        ));
    }
    let last = calls.last().expect("checked above").request();
    let Some(result) = last.result_of(None, STORE_TOOL) else {
        return fail("no result of memory_store came back to the model".into());
    };
    super::codex::check_stored(&sb.repo, result).or_else(|e| fail(format!("{e:#}")))?;
    println!(
        "   offered {STORE_TOOL}; memloop serve answered {:?}",
        proc::tail(result, 160)
    );
    Ok(())
}

/// memloop's lookup as Copilot names it (`<server>-<tool>`).
pub const LOOKUP_TOOL: &str = "memory-context_query";

/// `copilot -p` without `--allow-all` (nothing approved by a flag): the lookup and the store run
/// only through the location approvals `memloop trust` wrote into `permissions-config.json`, and
/// memloop serve answers both.
pub fn approved_tools(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Tool(LOOKUP_TOOL.into()),
            Step::Tool(STORE_TOOL.into()),
            Step::Say("Looked up and stored it.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake, "copilot")?;
    let approvals = sb.home.join(".copilot/permissions-config.json");
    let written = std::fs::read_to_string(&approvals).unwrap_or_default();
    if !written.contains("\"context_query\"") || !written.contains("\"memory_store\"") {
        bail!(
            "memloop trust wrote no approval of its two tools into {}:\n{written}",
            approvals.display()
        );
    }
    let args = [
        "-p",
        "Look up, then store what you know about this repository.",
        "--output-format",
        "json",
    ];
    let out = sb.run(copilot(ctx), &args, ctx.gate_timeout)?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    let calls = fake.model_calls();
    let Some(last) = calls.last().map(|c| c.request()) else {
        return fail("Copilot sent no request to the fake Responses API".into());
    };
    let Some(lookup) = last.result_of(None, LOOKUP_TOOL) else {
        return fail(format!("no result of {LOOKUP_TOOL} came back to the model"));
    };
    if !serde_json::from_str::<Value>(lookup).is_ok_and(|v| v.is_object()) {
        return fail(format!(
            "{LOOKUP_TOOL} did not run without a question; Copilot answered {lookup:?}"
        ));
    }
    let Some(stored) = last.result_of(None, STORE_TOOL) else {
        return fail(format!("no result of {STORE_TOOL} came back to the model"));
    };
    if !serde_json::from_str::<Value>(stored).is_ok_and(|v| v.is_object()) {
        return fail(format!(
            "{STORE_TOOL} did not run without a question; Copilot answered {stored:?}"
        ));
    }
    super::codex::check_stored(&sb.repo, stored).or_else(|e| fail(format!("{e:#}")))?;
    println!(
        "   without --allow-all: {LOOKUP_TOOL} and {STORE_TOOL} ran, memloop serve answered {:?}",
        proc::tail(stored, 120)
    );
    Ok(())
}

/// Which of memloop's Stop hooks the repository keeps for the gate scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks {
    /// `--agents copilot`: `.github/hooks/memloop.json` alone.
    Own,
    /// `--agents claude,copilot` without `.github/hooks/memloop.json`: Claude's hook alone.
    ClaudeOnly,
    /// `--agents claude,copilot`: both.
    Both,
}

pub fn gate(ctx: &Ctx, sb: &mut Sandbox, hooks: Hooks) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let files = ["e2e-one.txt", "e2e-two.txt"];
    let create = |name: &str, text: &str| Step::Call {
        name: "create".into(),
        args: json!({"path": sb.repo.join(name), "file_text": text}),
    };
    let fake = FakeResponses::start(Script {
        steps: vec![
            create(files[0], "one\n"),
            create(files[1], "two\n"),
            Step::Call {
                name: "bash".into(),
                args: json!({"command": "ls", "description": "List the files"}),
            },
            Step::Say("The files are written.".into()),
            Step::Tool(STORE_TOOL.into()),
            Step::Say("Stored what I learned; done.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    let agents = if hooks == Hooks::Own {
        "copilot"
    } else {
        "claude,copilot"
    };
    install(ctx, sb, &fake, agents)?;
    if hooks == Hooks::ClaudeOnly {
        std::fs::remove_file(sb.repo.join(".github/hooks/memloop.json"))?;
    }
    let out = prompt(ctx, sb, &fake, "Create two files, then stop.")?;
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
            return fail(format!("create did not write {file}"));
        }
    }
    let Some(sent_back) = calls
        .iter()
        .position(|c| c.user_texts.last().is_some_and(|t| t.contains(GATE_MARKER)))
    else {
        return fail(format!(
            "memloop's gate never sent Copilot back ({GATE_MARKER:?} never reached the model)"
        ));
    };
    let Some(last) = calls.last() else {
        return fail("no model request".into());
    };
    let verdicts: usize = last
        .user_texts
        .iter()
        .map(|t| t.matches(GATE_MARKER).count())
        .sum();
    if verdicts != 1 {
        return fail(format!(
            "the model heard {verdicts} verdicts for one stop; memloop must judge each stop once"
        ));
    }
    let Some(result) = last.result_of(None, STORE_TOOL) else {
        return fail("no result of memory_store came back to the model".into());
    };
    super::codex::check_stored(&sb.repo, result).or_else(|e| fail(format!("{e:#}")))?;
    if calls.len() != 6 || calls.iter().any(|c| c.prior_outputs >= 6) {
        return fail(format!(
            "expected 6 model requests (create, create, bash, stop, store, stop) and the second \
             stop to pass; got {}; {SCRIPT_EXHAUSTED:?} means Copilot was sent back again",
            calls.len()
        ));
    }
    let blocks = hook_blocks(sb)?;
    if blocks != 1 {
        return fail(format!(
            "Copilot recorded {blocks} blocking hook results; expected exactly one"
        ));
    }
    println!(
        "   hooks {hooks:?}: one verdict, sent back in request {} ({}); stored; the next stop passed",
        sent_back + 1,
        proc::tail(
            last.user_texts
                .iter()
                .find(|t| t.contains(GATE_MARKER))
                .map_or("", |t| t),
            100
        )
    );
    Ok(())
}

/// How many hook runs the session's `events.jsonl` records as blocking (`hook.end` whose
/// output decides `block`).
fn hook_blocks(sb: &Sandbox) -> Result<usize> {
    let states = sb.home.join(".copilot/session-state");
    let mut blocks = 0;
    for entry in std::fs::read_dir(&states)
        .with_context(|| format!("no Copilot sessions under {}", states.display()))?
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path().join("events.jsonl")).unwrap_or_default();
        blocks += text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|row| row["type"] == "hook.end" && row["data"]["output"]["decision"] == "block")
            .count();
    }
    Ok(blocks)
}
