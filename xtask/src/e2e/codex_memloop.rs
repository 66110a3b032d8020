//! The real Codex against what `memloop init --agents codex` writes (not the probes' hand-written
//! files; those stay in `codex.rs` as the record of what the adapter was built from).
//!
//! - `config-codex`: without consent memloop writes only the project's `.codex/` files and Codex
//!   ignores them (`mcp list` is `[]`); after `memloop trust --yes` Codex lists the server,
//!   `hooks/list` reports memloop's Stop hook as trusted under the key and hash memloop wrote,
//!   and `memloop uninstall` gives the user config back byte for byte.
//! - `connected-codex`: `codex exec` offers the model `mcp__memory/memory_store` and the call
//!   reaches `memloop serve`.
//! - `gate-codex`: Codex edits through `exec_command` only; memloop's gate reads the rollout and
//!   sends it back; it stores over MCP; the next stop (`stop_hook_active`) passes.
//! - `session-start-codex`: memloop's SessionStart hook puts the memory index in the first
//!   request, and again in the first request after an auto-compaction in the middle of the turn.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toml_edit::DocumentMut;

use super::Ctx;
use super::codex::{
    GATE_COMMAND, NAMESPACE, SERVER, check_stored, codex, codex_home, exec, exec_with, files_under,
    hook_state_key, hooks_feature_on, hooks_list, parse_json_out, response_items, set_up_harness,
    store_reached,
};
use super::config::expect;
use super::fake_model::GATE_MARKER;
use super::fake_responses::{
    COMPACT_PROMPT, FakeResponses, SCRIPT_EXHAUSTED, SUMMARY_MARK, Script, Step,
};
use super::proc;
use super::sandbox::Sandbox;
use super::session_start::NOTE_MARK;

/// Below what the fake reports for its tool call, far below the catalog's context window.
const AUTO_COMPACT_LIMIT: u64 = 20_000;

fn memloop(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, std::time::Duration::from_secs(60))?;
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

/// The harness's user config, then memloop's Codex files and its trust entries (`--trust`).
pub(super) fn install(ctx: &Ctx, sb: &mut Sandbox, base_url: Option<&str>) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_harness(sb, base_url)?;
    memloop(sb, &["init", "--yes", "--agents", "codex", "--trust"])
}

/// The `trusted_hash` memloop wrote for `key` in the user config.
fn written_hash(sb: &Sandbox, key: &str) -> Result<String> {
    let path = codex_home(sb).join("config.toml");
    let doc: DocumentMut = std::fs::read_to_string(&path)?.parse()?;
    doc.get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(|s| s.get(key))
        .and_then(|e| e.get("trusted_hash"))
        .and_then(|h| h.as_str())
        .map(str::to_owned)
        .with_context(|| {
            format!(
                "memloop wrote no [hooks.state.{key:?}] in {}",
                path.display()
            )
        })
}

/// memloop's hook of `label` (group 0) as `hooks/list` reports it: under the key memloop wrote
/// the trust for, with the hash memloop wrote, trusted. The key, the hash and the hook.
pub(super) fn trusted_hook(
    ctx: &Ctx,
    sb: &Sandbox,
    label: &str,
    event: &str,
) -> Result<(String, String, Value)> {
    let repo = sb.repo.canonicalize()?;
    let key = hook_state_key(&repo.join(".codex/hooks.json"), label, 0, 0);
    let hash = written_hash(sb, &key)?;
    let hooks = hooks_list(ctx, sb)?;
    let Some(hook) = hooks.into_iter().find(|h| h["key"] == key.as_str()) else {
        bail!("`hooks/list` has no hook under the key memloop wrote ({key:?})");
    };
    if hook["currentHash"] != json!(hash) || hook["trustStatus"] != "trusted" {
        bail!(
            "Codex computes {} (status {}) for memloop's {event} hook; memloop wrote {hash}",
            hook["currentHash"],
            hook["trustStatus"]
        );
    }
    Ok((key, hash, hook))
}

fn listed(ctx: &Ctx, sb: &Sandbox) -> Result<Vec<Value>> {
    let out = sb.run(codex(ctx), &["mcp", "list", "--json"], ctx.timeout)?;
    expect(out.success(), "`codex mcp list --json` failed", &out)?;
    Ok(parse_json_out(&out)?
        .as_array()
        .cloned()
        .unwrap_or_default())
}

pub fn config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    set_up_harness(sb, None)?;
    let user_config = codex_home(sb).join("config.toml");
    let before = std::fs::read(&user_config)?;

    memloop(sb, &["init", "--yes", "--agents", "codex"])?;
    if std::fs::read(&user_config)? != before {
        bail!(
            "memloop init without --trust changed {}",
            user_config.display()
        );
    }
    let servers = listed(ctx, sb)?;
    if !servers.is_empty() || !hooks_list(ctx, sb)?.is_empty() {
        bail!("Codex loaded an untrusted project's .codex/: {servers:?}");
    }
    println!("   without consent: the project is untrusted, mcp list [] and no hooks");

    memloop(sb, &["trust", "--yes"])?;
    let servers = listed(ctx, sb)?;
    let Some(server) = servers.iter().find(|s| s["name"] == SERVER) else {
        bail!(
            "`codex mcp list --json` does not list {SERVER} after `memloop trust --yes`: {servers:?}"
        );
    };
    let transport = &server["transport"];
    if server["enabled"] != json!(true)
        || transport["command"] != "memloop"
        || transport["args"] != json!(["serve"])
    {
        bail!("{SERVER} is not an enabled stdio `memloop serve`: {server}");
    }
    println!("   after memloop trust: mcp list shows {SERVER} = {transport}");

    let (key, hash, hook) = trusted_hook(ctx, sb, "stop", "Stop")?;
    if hook["command"] != GATE_COMMAND {
        bail!(
            "the trusted hook runs {} instead of {GATE_COMMAND:?}",
            hook["command"]
        );
    }
    println!("   hooks/list: {key} {hash} trusted");

    hooks_feature_on(ctx, sb, "")?;

    memloop(sb, &["uninstall", "--yes"])?;
    if std::fs::read(&user_config)? != before {
        bail!(
            "memloop uninstall left {} different from before:\n{}",
            user_config.display(),
            std::fs::read_to_string(&user_config)?
        );
    }
    if !listed(ctx, sb)?.is_empty() {
        bail!("Codex still lists servers after memloop uninstall");
    }
    println!("   uninstall: the user config is byte for byte what it was; mcp list []");
    Ok(())
}

pub fn connected(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Stored it.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, Some(&fake.base_url()))?;
    let out = exec(ctx, sb, &fake, "Store what you know about this repository.")?;
    let answer = store_reached(sb, &fake, &out)?;
    println!(
        "   offered {NAMESPACE}/memory_store; memloop serve answered {:?}",
        proc::tail(&answer, 160)
    );
    Ok(())
}

pub fn gate(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let files = ["e2e-shell-1.txt", "e2e-shell-2.txt"];
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Exec(format!("printf 'one\\n' > {}", files[0])),
            Step::Exec(format!("printf 'two\\n' > {}", files[1])),
            Step::Exec("ls".into()),
            Step::Say("The files are written.".into()),
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Stored what I learned; done.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, Some(&fake.base_url()))?;
    let out = exec(
        ctx,
        sb,
        &fake,
        "Create two files with the shell, then stop.",
    )?;
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
            return fail(format!("exec_command did not create {file}"));
        }
    }
    let Some(sent_back) = calls
        .iter()
        .position(|c| c.user_texts.last().is_some_and(|t| t.contains(GATE_MARKER)))
    else {
        return fail(format!(
            "memloop's gate never sent Codex back ({GATE_MARKER:?} never reached the model): \
             an untrusted hook is skipped silently, or the gate let the stop through"
        ));
    };
    let reason = calls[sent_back]
        .user_texts
        .last()
        .cloned()
        .unwrap_or_default();
    let Some(result) = calls
        .last()
        .and_then(|c| c.result_of(Some(NAMESPACE), "memory_store"))
    else {
        return fail("no result of memory_store came back to the model".into());
    };
    check_stored(&sb.repo, result).or_else(|e| fail(format!("{e:#}")))?;
    if calls.len() != 6 || calls.iter().any(|c| c.prior_outputs >= 6) {
        return fail(format!(
            "expected 6 model requests (3 exec, stop, store, stop) and the second stop to pass; \
             got {}; {SCRIPT_EXHAUSTED:?} means Codex was sent back again",
            calls.len()
        ));
    }
    let rollout = rollout_of(sb)?;
    let shell_calls = response_items(&rollout)
        .iter()
        .filter(|i| i["type"] == "function_call" && i["name"] == "exec_command")
        .count();
    println!(
        "   {shell_calls} exec_command calls; the gate sent Codex back in request {} ({}); \
         memory_store stored; the next stop passed",
        sent_back + 1,
        proc::tail(&reason, 120)
    );
    Ok(())
}

/// The one rollout of the run, under `$CODEX_HOME/sessions/`.
fn rollout_of(sb: &Sandbox) -> Result<String> {
    let sessions = codex_home(sb).join("sessions");
    if let Some(path) = files_under(&sessions).into_iter().find(|p| is_rollout(p)) {
        return Ok(std::fs::read_to_string(path)?);
    }
    bail!(
        "no rollout-*.jsonl under {}",
        codex_home(sb).join("sessions").display()
    )
}

fn is_rollout(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
}

/// Session start: a note stored before the session is in the first request `codex exec` sends,
/// by memloop's SessionStart hook (`additionalContext`), trusted by the hash memloop wrote; and
/// again in the first request after an auto-compaction in the middle of the turn (the fake
/// reports a usage past `model_auto_compact_token_limit` on its tool call). Codex's PreCompact
/// output has no way to the model (session_start_facts.md).
pub fn session_start(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Reporting {
                total_tokens: 60_000,
                step: Box::new(Step::Exec("ls".into())),
            },
            Step::Say("Hello.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, Some(&fake.base_url()))?;
    super::session_start::seed(sb)?;

    let (key, hash, _) = trusted_hook(ctx, sb, "session_start", "SessionStart")?;
    println!("   hooks/list: {key} {hash} trusted");

    let limit = format!("model_auto_compact_token_limit={AUTO_COMPACT_LIMIT}");
    let out = exec_with(ctx, sb, &fake, &[&limit], "List the files, then say hello.")?;
    let calls = fake.model_calls();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    let holds_index = |i: usize| calls[i].body.to_string().contains(NOTE_MARK);
    if calls.is_empty() {
        return fail("Codex sent no request to the fake Responses API".into());
    }
    if !holds_index(0) {
        return fail("the first request of the Codex session lacks the memory index".into());
    }
    println!("   first request holds the index line {NOTE_MARK:?}");

    let Some(summary) = calls.iter().position(|c| c.request().compaction) else {
        return fail(format!(
            "Codex did not compact (no request ending in {COMPACT_PROMPT:?}) although the fake \
             reported 60000 tokens against a limit of {AUTO_COMPACT_LIMIT}"
        ));
    };
    let Some(after) = (summary + 1 < calls.len()).then_some(summary + 1) else {
        return fail("Codex sent no request after the compaction".into());
    };
    // The compacted history drops the first run's developer message; a hook run with source
    // `compact` puts the index back after the summary.
    let input = calls[after].body["input"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let position = |mark: &str| input.iter().position(|i| i.to_string().contains(mark));
    let (Some(summary_at), Some(index_at)) = (position(SUMMARY_MARK), position(NOTE_MARK)) else {
        return fail(format!(
            "the first request after the compaction (#{}) lacks the summary or the memory index",
            calls[after].seq
        ));
    };
    if index_at < summary_at || input[index_at]["role"] != "developer" {
        return fail(format!(
            "in request #{} the index is item {index_at} ({}), the summary item {summary_at}: \
             not a SessionStart run after the compaction",
            calls[after].seq, input[index_at]["role"]
        ));
    }
    println!(
        "   auto-compaction: summary request #{}; the first request after it (#{}) holds the \
         index again, as a developer message after the summary",
        calls[summary].seq, calls[after].seq
    );
    Ok(())
}
