//! Probes of the pinned Codex CLI (`@openai/codex`), ahead of memloop's Codex adapter: the real
//! Codex against a scripted fake Responses API on 127.0.0.1, in a sandbox with its own HOME and
//! CODEX_HOME. memloop writes no Codex file yet, so each probe writes by hand what the adapter
//! is meant to write ([`expected_adapter_output`]); `config-codex`, `connected-codex` and
//! `gate-codex` replace these once `memloop init` knows Codex. The facts they rest on are in
//! `codex_facts.md` beside this file.
//!
//! - `probe-codex-config`: `codex mcp list --json` shows the project's server only once the
//!   project is trusted; `codex app-server`'s `hooks/list` reports the Stop hook under the key we
//!   compute, with the hash we compute, as trusted; `codex features list` has `hooks` on.
//! - `probe-codex-mcp`: `codex exec` offers the model `memory_store` in namespace `mcp__memory`,
//!   and the call reaches `memloop serve` (a note lands in `.memloop/memory/`).
//! - `probe-codex-gate`: Codex edits through `exec_command` and `apply_patch`, a trusted Stop
//!   hook (a shell stand-in for memloop's gate) blocks once, Codex continues with the reason,
//!   stores over MCP, and the retry (`stop_hook_active`) is allowed. `probe-codex-gate-exit2`:
//!   the same, blocking with exit 2.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toml_edit::{DocumentMut, Item, Table, value};

use super::config::expect;
use super::fake_model::{GATE_MARKER, STORED_TEXT};
use super::fake_responses::{FakeResponses, SCRIPT_EXHAUSTED, Script, Step, tool_label};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::{Ctx, tools};

/// The memory server's name in every agent's config (memloop's default `--server-name`).
pub const SERVER: &str = "memory";
/// How Codex offers the MCP server's tools to the model.
pub const NAMESPACE: &str = "mcp__memory";
/// What memloop's Stop gate will be for Codex.
pub const GATE_COMMAND: &str = "memloop hook stop --agent codex";
/// The gate's timeout in seconds, as for the other agents.
pub const GATE_TIMEOUT_SEC: u64 = 30;
/// The fake provider's API key variable (`model_providers.fake.env_key`).
const KEY_VAR: &str = "MEMLOOP_E2E_FAKE_KEY";
/// Model metadata for `fake-model` (`model_catalog_json`): with it Codex offers the freeform
/// `apply_patch` tool, keeps MCP tools in `tools[]` (no `tool_search`), and drops its "model
/// metadata not found" warning.
const MODEL_CATALOG: &str = r#"{"models": [{"slug": "fake-model", "display_name": "fake-model",
  "description": null, "supported_reasoning_levels": [], "shell_type": "shell_command",
  "visibility": "list", "supported_in_api": true, "priority": 1, "availability_nux": null,
  "upgrade": null, "base_instructions": "You are the scripted e2e model.",
  "supports_reasoning_summaries": false, "support_verbosity": false, "default_verbosity": null,
  "apply_patch_tool_type": "freeform", "truncation_policy": {"mode": "bytes", "limit": 10000},
  "supports_parallel_tool_calls": false, "context_window": 100000,
  "experimental_supported_tools": []}]}
"#;

// One definition of Codex's trust key and hash: memloop's own (its unit test holds hashes Codex
// reported; `probe-codex-config` checks them against the running Codex each time).
pub use memloop::agents::codex::trust::{command_hook_trusted_hash, hook_state_key};

/// What the future Codex adapter writes for a repository.
pub struct AdapterOutput {
    /// `<repo>/.codex/config.toml`
    pub project_config: String,
    /// `<repo>/.codex/hooks.json`
    pub hooks_json: String,
    /// `[projects."<repo>"]`, the key of the user config's project trust entry.
    pub trusted_project: String,
    /// `[hooks.state."<key>"] trusted_hash = <hash>` in the user config.
    pub hook_state: (String, String),
}

/// EXPECTED OUTPUT OF THE FUTURE memloop CODEX ADAPTER (not memloop's: written by this harness
/// until `memloop init --agents codex` exists). `repo` must be absolute and symlink-free.
pub fn expected_adapter_output(repo: &Path, stop_command: &str) -> AdapterOutput {
    let project_config = format!(
        "[mcp_servers.{SERVER}]\ncommand = \"memloop\"\nargs = [\"serve\"]\n\
         # codex exec refuses MCP calls that need approval; memloop's tools are safe to run.\n\
         default_tools_approval_mode = \"approve\"\n"
    );
    let hooks = json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": stop_command, "timeout": GATE_TIMEOUT_SEC}]}]}});
    let hooks_path = repo.join(".codex/hooks.json");
    AdapterOutput {
        project_config,
        hooks_json: serde_json::to_string_pretty(&hooks).expect("serializes") + "\n",
        trusted_project: repo.display().to_string(),
        hook_state: (
            hook_state_key(&hooks_path, "stop", 0, 0),
            command_hook_trusted_hash("stop", stop_command, Some(GATE_TIMEOUT_SEC), None),
        ),
    }
}

pub(super) fn codex_home(sb: &Sandbox) -> PathBuf {
    sb.home.join(".codex")
}

/// The harness's part of the user config alone (the fake model provider, the model catalog,
/// plugins, apps and analytics off), for memloop to add its trust entries to.
pub(super) fn set_up_harness(sb: &mut Sandbox, base_url: Option<&str>) -> Result<()> {
    let unused = expected_adapter_output(&sb.repo, GATE_COMMAND);
    write_user_config(sb, &unused, base_url, false)
}

/// `$CODEX_HOME/config.toml` (with the model catalog beside it) and the variables Codex reads.
fn write_user_config(
    sb: &mut Sandbox,
    adapter: &AdapterOutput,
    base_url: Option<&str>,
    trust: bool,
) -> Result<()> {
    let home = codex_home(sb);
    std::fs::create_dir_all(&home)?;
    let catalog = home.join("e2e-models.json");
    std::fs::write(&catalog, MODEL_CATALOG)?;
    std::fs::write(
        home.join("config.toml"),
        user_config(adapter, base_url, &catalog, trust),
    )?;
    sb.set_env("CODEX_HOME", home.to_string_lossy());
    sb.set_env(KEY_VAR, "sk-e2e");
    Ok(())
}

/// Write the adapter's project files and the user config: the harness's part (the fake model
/// provider; plugins, remote plugins, apps and analytics off, since they reach github.com and
/// chatgpt.com) plus, with `trust`, the adapter's user-scope entries.
fn set_up(
    sb: &mut Sandbox,
    adapter: &AdapterOutput,
    base_url: Option<&str>,
    trust: bool,
) -> Result<()> {
    let dot_codex = sb.repo.join(".codex");
    std::fs::create_dir_all(&dot_codex)?;
    std::fs::write(dot_codex.join("config.toml"), &adapter.project_config)?;
    std::fs::write(dot_codex.join("hooks.json"), &adapter.hooks_json)?;
    write_user_config(sb, adapter, base_url, trust)
}

fn user_config(
    adapter: &AdapterOutput,
    base_url: Option<&str>,
    catalog: &Path,
    trust: bool,
) -> String {
    let mut doc = DocumentMut::new();
    doc["model_provider"] = value("fake");
    doc["model"] = value("fake-model");
    doc["model_catalog_json"] = value(catalog.to_string_lossy().as_ref());
    doc["check_for_update_on_startup"] = value(false);
    let mut provider = Table::new();
    provider["name"] = value("fake");
    provider["base_url"] = value(base_url.unwrap_or("http://127.0.0.1:9/v1"));
    provider["wire_api"] = value("responses");
    provider["env_key"] = value(KEY_VAR);
    provider["request_max_retries"] = value(0);
    provider["stream_max_retries"] = value(0);
    doc["model_providers"] = implicit([("fake", provider)]);
    let mut features = Table::new();
    for off in ["plugins", "remote_plugin", "apps"] {
        features[off] = value(false);
    }
    doc["features"] = Item::Table(features);
    // Otherwise every run tries ab.chatgpt.com:443.
    let mut analytics = Table::new();
    analytics["enabled"] = value(false);
    doc["analytics"] = Item::Table(analytics);
    if trust {
        let mut project = Table::new();
        project["trust_level"] = value("trusted");
        doc["projects"] = implicit([(adapter.trusted_project.as_str(), project)]);
        let mut state = Table::new();
        state["trusted_hash"] = value(adapter.hook_state.1.as_str());
        let states = implicit([(adapter.hook_state.0.as_str(), state)]);
        doc["hooks"] = implicit([("state", states.into_table().expect("a table"))]);
    }
    doc.to_string()
}

fn implicit<'a>(entries: impl IntoIterator<Item = (&'a str, Table)>) -> Item {
    let mut outer = Table::new();
    outer.set_implicit(true);
    for (key, table) in entries {
        outer.insert(key, Item::Table(table));
    }
    Item::Table(outer)
}

pub(super) fn codex(ctx: &Ctx) -> PathBuf {
    ctx.tools.bin.join("codex")
}

pub fn probe_config(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let adapter = expected_adapter_output(&sb.repo, GATE_COMMAND);

    // Untrusted: the project layer, and with it the server and the hook, is ignored silently.
    set_up(sb, &adapter, None, false)?;
    let out = sb.run(codex(ctx), &["mcp", "list", "--json"], ctx.timeout)?;
    expect(out.success(), "`codex mcp list --json` failed", &out)?;
    let listed = parse_json_out(&out)?;
    expect(
        listed.as_array().is_some_and(|a| a.is_empty()),
        "`codex mcp list --json` lists servers of an untrusted project (expected [])",
        &out,
    )?;
    let hooks = hooks_list(ctx, sb)?;
    if !hooks.is_empty() {
        bail!("`hooks/list` reports hooks of an untrusted project: {hooks:?}");
    }
    println!("   untrusted project: mcp list [] and no hooks");

    set_up(sb, &adapter, None, true)?;
    let out = sb.run(codex(ctx), &["mcp", "list", "--json"], ctx.timeout)?;
    expect(out.success(), "`codex mcp list --json` failed", &out)?;
    let listed = parse_json_out(&out)?;
    let server = listed
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(SERVER));
    let Some(server) = server else {
        bail!(
            "`codex mcp list --json` does not list `{SERVER}` in a trusted project\n{}",
            out.report()
        );
    };
    let transport = &server["transport"];
    expect(
        server["enabled"] == json!(true)
            && transport["type"] == "stdio"
            && transport["command"] == "memloop"
            && transport["args"] == json!(["serve"]),
        &format!("`{SERVER}` is not an enabled stdio `memloop serve`: {server}"),
        &out,
    )?;
    println!("   trusted project: mcp list shows {SERVER} = {transport}");

    let hooks = hooks_list(ctx, sb)?;
    let (key, hash) = &adapter.hook_state;
    let Some(hook) = hooks
        .iter()
        .find(|h| h.get("key").and_then(Value::as_str) == Some(key))
    else {
        bail!("`hooks/list` has no hook under {key:?}: {hooks:?}");
    };
    if hook["currentHash"] != json!(hash) || hook["trustStatus"] != "trusted" {
        bail!(
            "Codex computes the Stop hook's hash as {} (status {}), memloop's function as {hash}",
            hook["currentHash"],
            hook["trustStatus"]
        );
    }
    println!("   hooks/list: {key} {hash} trusted");

    // Any other hash (e.g. one left from an older command) is "modified": skipped as well.
    let stale = AdapterOutput {
        hook_state: (
            key.clone(),
            command_hook_trusted_hash("stop", "old", None, None),
        ),
        ..adapter
    };
    set_up(sb, &stale, None, true)?;
    let hooks = hooks_list(ctx, sb)?;
    let status = hooks
        .iter()
        .find(|h| h["key"] == json!(key))
        .map(|h| h["trustStatus"].clone());
    if status != Some(json!("modified")) {
        bail!("with a stale trusted_hash hooks/list should say modified, got {status:?}");
    }
    println!("   a stale trusted_hash: modified");

    let line = hooks_feature_on(ctx, sb, "")?;
    println!("   features list: {line}");
    Ok(())
}

/// The `hooks` line of `codex features list`, which must say it is on; `when` says when (for
/// the failure message).
pub(super) fn hooks_feature_on(ctx: &Ctx, sb: &Sandbox, when: &str) -> Result<String> {
    let out = sb.run(codex(ctx), &["features", "list"], ctx.timeout)?;
    expect(out.success(), "`codex features list` failed", &out)?;
    let line = out
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("hooks"));
    expect(
        line.is_some_and(|l| l.split_whitespace().last() == Some("true")),
        &format!("{when}`codex features list` does not show hooks on: {line:?}"),
        &out,
    )?;
    Ok(line.unwrap_or("").trim().to_owned())
}

/// For `upgrade-legacy`: Codex's files as memloop writes them, in a user config that still turns
/// hooks on under their old name (`[features] codex_hooks`, deprecated since 0.129).
pub fn legacy_world(sb: &mut Sandbox) -> Result<()> {
    let repo = sb.repo.canonicalize()?;
    set_up(
        sb,
        &expected_adapter_output(&repo, GATE_COMMAND),
        None,
        true,
    )?;
    let path = codex_home(sb).join("config.toml");
    let mut doc: DocumentMut = std::fs::read_to_string(&path)?.parse()?;
    doc["features"]["codex_hooks"] = value(true);
    std::fs::write(&path, doc.to_string())?;
    Ok(())
}

/// After `memloop upgrade`: the old name is gone, `hooks` is on, Codex still loads the server.
pub fn after_upgrade(ctx: &Ctx, sb: &Sandbox) -> Result<()> {
    let path = codex_home(sb).join("config.toml");
    let text = std::fs::read_to_string(&path)?;
    let doc: DocumentMut = text.parse()?;
    if doc["features"].get("codex_hooks").is_some()
        || doc["features"]["hooks"].as_bool() != Some(true)
    {
        bail!("after the upgrade [features] should hold hooks = true and no codex_hooks:\n{text}");
    }
    hooks_feature_on(ctx, sb, "after the upgrade ")?;
    let out = sb.run(codex(ctx), &["mcp", "list", "--json"], ctx.timeout)?;
    let listed = parse_json_out(&out)?;
    if !listed
        .as_array()
        .is_some_and(|a| a.iter().any(|s| s["name"] == SERVER))
    {
        bail!("after the upgrade `codex mcp list --json` does not list {SERVER}: {listed}");
    }
    println!(
        "      codex: [features] hooks = true, features list shows hooks on, mcp list has {SERVER}"
    );
    Ok(())
}

pub(super) fn parse_json_out(out: &Output) -> Result<Value> {
    serde_json::from_str(out.stdout.trim())
        .with_context(|| format!("Codex printed no JSON on stdout\n{}", out.report()))
}

/// `codex app-server` (JSON-RPC over stdio): `initialize`, then `hooks/list` for the repo; the
/// hooks as Codex sees them (key, currentHash, trustStatus, ...).
pub(super) fn hooks_list(ctx: &Ctx, sb: &Sandbox) -> Result<Vec<Value>> {
    let mut cmd = sb.command(codex(ctx));
    cmd.arg("app-server");
    let deadline = Instant::now() + ctx.timeout;
    let mut p = Proc::spawn(cmd)?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "memloop-e2e", "version": "0"}}});
    p.write_stdin(&format!("{init}\n"))?;
    if p.wait_line(deadline, |l| has_id(l, 1)).is_none() {
        let out = p.stop();
        bail!(
            "`codex app-server` did not answer initialize\n{}",
            out.report()
        );
    }
    p.write_stdin(&format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [sb.repo]}})
    ))?;
    let answer = p.wait_line(deadline, |l| has_id(l, 2));
    let out = p.stop();
    let Some(answer) = answer else {
        bail!(
            "`codex app-server` did not answer hooks/list\n{}",
            out.report()
        );
    };
    let answer: Value = serde_json::from_str(answer.trim())?;
    let entry = answer
        .pointer("/result/data/0")
        .with_context(|| format!("hooks/list answered without data: {answer}"))?;
    let problems: Vec<&Value> = ["warnings", "errors"]
        .iter()
        .filter_map(|k| entry.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if !problems.is_empty() {
        bail!("hooks/list reports problems with the hooks file: {problems:?}");
    }
    Ok(entry["hooks"].as_array().cloned().unwrap_or_default())
}

fn has_id(line: &str, id: u64) -> bool {
    serde_json::from_str::<Value>(line.trim()).is_ok_and(|v| v.get("id") == Some(&json!(id)))
}

pub fn probe_mcp(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    let script = || Script {
        steps: vec![
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Stored it.".into()),
        ],
        latency: ctx.model_latency,
    };
    // No Stop hook in this probe: an empty hooks file.
    let adapter = expected_adapter_output(&sb.repo, GATE_COMMAND);
    let prompt = "Store what you know about this repository.";

    // Plain `codex exec` (approval policy never): a mode that asks first refuses the call,
    // which shows the key is read; the adapter's mode lets it through.
    let refused = FakeResponses::start(script())?;
    set_up(sb, &adapter, Some(&refused.base_url()), true)?;
    std::fs::write(sb.repo.join(".codex/hooks.json"), "{\"hooks\": {}}\n")?;
    let asking = adapter.project_config.replace("\"approve\"", "\"prompt\"");
    std::fs::write(sb.repo.join(".codex/config.toml"), &asking)?;
    let out = exec(ctx, sb, &refused, prompt)?;
    let answer = refused.model_calls().last().and_then(|c| {
        c.request()
            .result_of(Some(NAMESPACE), "memory_store")
            .map(String::from)
    });
    expect(
        answer
            .as_deref()
            .is_some_and(|a| a.contains("requires approval")),
        &format!(
            "with default_tools_approval_mode = \"prompt\" `codex exec` should refuse the call; \
             the model got {answer:?}\nmodel requests:\n{}",
            refused.transcript()
        ),
        &out,
    )?;
    println!(
        "   approval mode \"prompt\": refused ({:?})",
        answer
            .as_deref()
            .and_then(|a| a.lines().last())
            .unwrap_or("")
    );

    let fake = FakeResponses::start(script())?;
    set_up(sb, &adapter, Some(&fake.base_url()), true)?;
    std::fs::write(sb.repo.join(".codex/hooks.json"), "{\"hooks\": {}}\n")?;
    let out = exec(ctx, sb, &fake, prompt)?;
    let answer = store_reached(sb, &fake, &out)?;
    println!(
        "   approval mode \"approve\": offered {NAMESPACE}/memory_store; memloop serve answered {:?}",
        proc::tail(&answer, 160)
    );
    let calls = fake.model_calls();
    expect(
        calls.len() == 2,
        &format!(
            "expected 2 model requests (call, final message), got {}\n{}",
            calls.len(),
            fake.transcript()
        ),
        &out,
    )
}

/// The run `out` offered the model memloop's `memory_store`, and its call reached `memloop serve`:
/// what the server answered.
pub(super) fn store_reached(sb: &Sandbox, fake: &FakeResponses, out: &Output) -> Result<String> {
    let calls = fake.model_calls();
    let fail = |msg: String| -> Result<String> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };
    let Some(first) = calls.first().map(|c| c.request()) else {
        return fail("Codex sent no request to the fake Responses API".into());
    };
    if first.tool(Some(NAMESPACE), "memory_store").is_none() {
        let names: Vec<String> = first.tools.iter().map(tool_label).collect();
        return fail(format!(
            "Codex offered no {NAMESPACE}/memory_store (offered: {})",
            names.join(", ")
        ));
    }
    let last = calls.last().expect("checked above").request();
    let Some(result) = last.result_of(Some(NAMESPACE), "memory_store") else {
        return fail("no result of memory_store came back to the model".into());
    };
    match check_stored(&sb.repo, result) {
        Ok(()) => Ok(result.to_owned()),
        Err(e) => fail(format!("{e:#}")),
    }
}

/// The store reached `memloop serve`: a note holding the stored text is under `.memloop/memory/`.
pub(super) fn check_stored(repo: &Path, result: &str) -> Result<()> {
    let lower = result.to_ascii_lowercase();
    if lower.contains("requires approval") || lower.contains("rejected") {
        bail!("Codex did not run the MCP call: {result:?}");
    }
    let notes = files_under(&repo.join(".memloop/memory"));
    if !notes
        .iter()
        .any(|n| std::fs::read_to_string(n).is_ok_and(|t| t.contains(STORED_TEXT)))
    {
        bail!(
            "memory_store answered {result:?} but no note under .memloop/memory/ holds {STORED_TEXT:?} \
             (notes: {notes:?})"
        );
    }
    Ok(())
}

pub(super) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
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

/// `codex exec --json` (stdin closed), as a user would run it: in a trusted project that is
/// approval policy `never` and the `workspace-write` sandbox (network off), in which
/// exec_command may write the repo.
pub(super) fn exec(ctx: &Ctx, sb: &Sandbox, fake: &FakeResponses, prompt: &str) -> Result<Output> {
    exec_with(ctx, sb, fake, &[], prompt)
}

/// [`exec`] with `config` overrides (`-c key=value` each).
pub(super) fn exec_with(
    ctx: &Ctx,
    sb: &Sandbox,
    fake: &FakeResponses,
    config: &[&str],
    prompt: &str,
) -> Result<Output> {
    let mut args = vec!["exec", "--json"];
    for over in config {
        args.extend(["-c", over]);
    }
    args.push(prompt);
    let out = sb.run(codex(ctx), &args, ctx.gate_timeout)?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let _ = std::fs::write(sb.root.join("codex-exec.jsonl"), &out.stdout);
    expect(
        out.success(),
        &format!(
            "`codex exec` failed\nmodel requests:\n{}",
            fake.transcript()
        ),
        &out,
    )?;
    Ok(out)
}

/// How the stand-in gate blocks: both ways Codex 0.171.0 accepts.
#[derive(Debug, Clone, Copy)]
pub enum Block {
    /// stdout `{"decision":"block","reason":...}`, exit 0.
    Json,
    /// The reason on stderr, exit 2.
    Exit2,
}

/// A stand-in for memloop's gate: records each Stop input and a copy of the rollout as it was
/// then, blocks the first stop, and allows the retry.
fn stop_once_script(runs: &Path, block: Block) -> String {
    let reason = format!("{GATE_MARKER}: call memory_store with what you learned, then stop.");
    let block = match block {
        Block::Json => format!("printf '{{\"decision\":\"block\",\"reason\":\"{reason}\"}}\\n'"),
        Block::Exit2 => format!("printf '%s\\n' '{reason}' >&2\nexit 2"),
    };
    format!(
        r#"#!/bin/sh
runs='{runs}'
mkdir -p "$runs"
n=$(( $(ls "$runs" | grep -c '^input-') + 1 ))
input=$(cat)
printf '%s\n' "$input" > "$runs/input-$n.json"
rollout=$(printf '%s' "$input" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p')
if [ -n "$rollout" ] && [ -f "$rollout" ]; then cp "$rollout" "$runs/rollout-at-stop-$n.jsonl"; fi
case "$input" in
  *'"stop_hook_active":true'*|*'"stop_hook_active": true'*) exit 0 ;;
esac
{block}
"#,
        runs = runs.display()
    )
}

pub fn probe_gate(ctx: &Ctx, sb: &mut Sandbox, block: Block) -> Result<()> {
    ctx.caps.need_serve()?;
    let runs = sb.root.join("hook-runs");
    let script = sb.root.join("stop-once.sh");
    std::fs::write(&script, stop_once_script(&runs, block))?;
    tools::set_executable(&script)?;
    let note = "e2e-note-1.txt";
    let patched = "e2e-note-2.txt";
    let fake = FakeResponses::start(Script {
        steps: vec![
            Step::Exec(format!("printf 'edited by codex\\n' > {note}")),
            Step::Patch(format!(
                "*** Begin Patch\n*** Add File: {patched}\n+patched by codex\n*** End Patch\n"
            )),
            Step::Say("The files are written.".into()),
            Step::Mcp {
                server: SERVER.into(),
                tool: "memory_store".into(),
            },
            Step::Say("Stored what I learned; done.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    let command = format!("sh {}", script.display());
    let adapter = expected_adapter_output(&sb.repo, &command);
    set_up(sb, &adapter, Some(&fake.base_url()), true)?;
    let out = exec(
        ctx,
        sb,
        &fake,
        "Create e2e-note-1.txt and e2e-note-2.txt, then stop.",
    )?;
    let calls: Vec<_> = fake.model_calls().iter().map(|c| c.request()).collect();
    let fail = |msg: String| -> Result<()> {
        bail!(
            "{msg}\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        )
    };

    if !sb.repo.join(note).is_file() {
        return fail(format!("exec_command did not create {note}"));
    }
    if !sb.repo.join(patched).is_file() {
        return fail(format!("apply_patch did not create {patched}"));
    }
    let inputs = hook_inputs(&runs)?;
    let Some(first) = inputs.first() else {
        return fail(
            "the Stop hook never ran (an untrusted hook is skipped silently: wrong hash or key?)"
                .into(),
        );
    };
    for field in [
        "session_id",
        "turn_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "model",
        "permission_mode",
        "stop_hook_active",
        "last_assistant_message",
    ] {
        if first.get(field).is_none() {
            return fail(format!("the Stop input has no {field:?}: {first}"));
        }
    }
    if first["stop_hook_active"] != json!(false) || first["hook_event_name"] != "Stop" {
        return fail(format!("unexpected first Stop input: {first}"));
    }
    // The block's reason came back as a user message, and the model went on from there.
    let Some(sent_back) = calls
        .iter()
        .position(|c| c.user_texts.last().is_some_and(|t| t.contains(GATE_MARKER)))
    else {
        return fail(format!(
            "the hook's {GATE_MARKER:?} never reached the model"
        ));
    };
    let Some(result) = calls
        .last()
        .and_then(|c| c.result_of(Some(NAMESPACE), "memory_store"))
    else {
        return fail("no result of memory_store came back to the model".into());
    };
    check_stored(&sb.repo, result).or_else(|e| fail(format!("{e:#}")))?;
    if inputs.len() != 2 || inputs[1]["stop_hook_active"] != json!(true) {
        return fail(format!(
            "expected a second Stop with stop_hook_active true, then the end; Stop inputs: {inputs:?}"
        ));
    }
    if calls.len() != 5 || calls.iter().any(|c| c.prior_outputs >= 5) {
        return fail(format!(
            "expected 5 model requests (exec, patch, stop, store, stop); {SCRIPT_EXHAUSTED:?} \
             means Codex went on"
        ));
    }
    println!(
        "   exec_command wrote {note}, apply_patch {patched}; Stop blocked ({block:?}); the \
         reason reached the model in request {}; memory_store stored; the retry was allowed",
        sent_back + 1
    );

    // The rollout as the first Stop saw it already holds the turn's calls and outputs.
    let rollout = std::fs::read_to_string(runs.join("rollout-at-stop-1.jsonl"))
        .context("the hook copied no rollout at the first stop")?;
    let items = response_items(&rollout);
    let has = |kind: &str, name: &str| {
        items
            .iter()
            .any(|i| i["type"] == kind && (name.is_empty() || i["name"] == name))
    };
    if !has("function_call", "exec_command")
        || !has("function_call_output", "")
        || !has("custom_tool_call", "apply_patch")
        || !has("custom_tool_call_output", "")
    {
        return fail(format!(
            "the rollout at the first stop lacks the exec_command or apply_patch call or an output: \
             {items:?}"
        ));
    }
    let path = first["transcript_path"].as_str().unwrap_or("");
    let full = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mcp_call = response_items(&full)
        .into_iter()
        .find(|i| i["type"] == "function_call" && i["name"] == "memory_store");
    match mcp_call {
        Some(call) if call["namespace"] == NAMESPACE => {
            println!("   rollout: function_call namespace {NAMESPACE} name memory_store")
        }
        other => {
            return fail(format!(
                "the rollout holds no memory_store function_call in {NAMESPACE}: {other:?}"
            ));
        }
    }
    Ok(())
}

pub(super) fn hook_inputs(runs: &Path) -> Result<Vec<Value>> {
    let mut inputs = Vec::new();
    for n in 1.. {
        let Ok(text) = std::fs::read_to_string(runs.join(format!("input-{n}.json"))) else {
            break;
        };
        inputs.push(
            serde_json::from_str(text.trim())
                .with_context(|| format!("Stop input {n} is not JSON: {text}"))?,
        );
    }
    Ok(inputs)
}

/// The `payload` of every `response_item` line of a rollout.
pub(super) fn response_items(rollout: &str) -> Vec<Value> {
    rollout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "response_item")
        .map(|v| v["payload"].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_config_spells_the_trust_entries_as_quoted_keys() {
        let adapter = expected_adapter_output(Path::new("/tmp/a b/repo"), GATE_COMMAND);
        let catalog = Path::new("/h/e2e-models.json");
        let text = user_config(&adapter, Some("http://127.0.0.1:1/v1"), catalog, true);
        let doc: DocumentMut = text.parse().unwrap();
        assert_eq!(
            doc["projects"]["/tmp/a b/repo"]["trust_level"].as_str(),
            Some("trusted")
        );
        let state = &doc["hooks"]["state"]["/tmp/a b/repo/.codex/hooks.json:stop:0:0"];
        assert_eq!(
            state["trusted_hash"].as_str(),
            Some(adapter.hook_state.1.as_str())
        );
        assert!(text.contains("[projects.\"/tmp/a b/repo\"]"), "{text}");
        let untrusted = user_config(&adapter, None, catalog, false);
        assert!(!untrusted.contains("projects") && !untrusted.contains("trusted_hash"));
    }
}
