//! Session start in the real Copilot CLI (pinned 1.0.102), against the fake Responses API.
//!
//! - `session-start-copilot`: a note stored before the session; memloop's `sessionStart` hook in
//!   `.github/hooks/memloop.json` (as `memloop init --trust` writes it) puts the index holding it
//!   in the FIRST model request of `copilot -p`, as the first user message (`input[0]`).
//! - `probe-copilot-session-start`: hand-written hooks for every event that may add context
//!   (`sessionStart` in three output shapes, `userPromptSubmitted`), each printing its own
//!   marker; reports which markers reach the first model request, and where. The facts the
//!   Copilot session-start piece rests on (session_start_facts.md).
//! - `session-start-copilot-compaction`: the index after a compaction (`probe_compaction`).
//! - `probe-copilot-trust`: which `trustedFolders` entries Copilot honours (copilot_facts.md).

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::Ctx;
use super::copilot::{install, prompt};
use super::fake_responses::{FakeResponses, Script, Step};
use super::sandbox::Sandbox;
use super::session_start::{NOTE_MARK, seed};

/// `agents`: `copilot`, or `claude,copilot`, where Copilot also runs the hooks of Claude Code's
/// `.claude/settings.json` (its SessionStart one included): the index must still come once.
pub fn session_start(ctx: &Ctx, sb: &mut Sandbox, agents: &str) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let fake = FakeResponses::start(Script {
        steps: vec![Step::Say("Hello.".into())],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake, agents)?;
    seed(sb)?;
    let out = prompt(ctx, sb, &fake, "Say hello.")?;
    let calls = fake.model_calls();
    let Some(first) = calls.first() else {
        bail!("Copilot sent no model request\n{}", out.report());
    };
    let found = locate(&first.body, NOTE_MARK);
    // The index is the session's opening user message, before the prompt.
    if found.first().map(String::as_str) != Some(".input[0](role user).content[0].text") {
        bail!(
            "the first model request does not open with the memory index (found {NOTE_MARK:?} at {found:?})\nmodel requests:\n{}{}",
            fake.transcript(),
            out.report()
        );
    }
    if found.len() != 1 {
        bail!(
            "the index reached the first request {} times ({found:?}); once is right\nmodel requests:\n{}",
            found.len(),
            fake.transcript()
        );
    }
    let prompt_at = locate(&first.body, "Say hello.");
    if prompt_at.iter().any(|at| at.starts_with(".input[0]")) {
        bail!("the index and the prompt share a message: {prompt_at:?}");
    }
    println!(
        "   {agents}: request #1 of {} opens with the index ({NOTE_MARK:?} once, at input[0], role user); the prompt follows",
        calls.len()
    );
    Ok(())
}

/// Where `mark` occurs in `body`: JSON paths, with the role of the `input` item holding it.
fn locate(body: &Value, mark: &str) -> Vec<String> {
    fn walk(v: &Value, path: String, mark: &str, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.contains(mark) => out.push(path),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let role = item
                        .get("role")
                        .and_then(Value::as_str)
                        .map(|r| format!("(role {r})"))
                        .unwrap_or_default();
                    walk(item, format!("{path}[{i}]{role}"), mark, out);
                }
            }
            Value::Object(map) => {
                for (key, value) in map {
                    walk(value, format!("{path}.{key}"), mark, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), mark, &mut out);
    out
}

fn command(text: &str) -> Value {
    json!({"type": "command", "bash": text, "timeoutSec": 15})
}

pub fn probe(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let fake = FakeResponses::start(Script {
        steps: vec![Step::Say("Hello.".into()), Step::Say("Again.".into())],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake, "copilot")?;
    let hooks = json!({"version": 1, "hooks": {
        "sessionStart": [
            command(r#"cat > "$PWD/ss-input.json"; printf '%s\n' '{"additionalContext":"MARK-SS-FLAT"}'"#),
            command(r#"printf '%s\n' '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"MARK-SS-CLAUDE"}}'"#),
            command("echo MARK-SS-TEXT"),
        ],
        "userPromptSubmitted": [
            command(r#"cat > "$PWD/ups-input.json"; printf '%s\n' '{"additionalContext":"MARK-UPS-FLAT"}'"#),
        ],
    }});
    std::fs::write(
        sb.repo.join(".github/hooks/probe.json"),
        serde_json::to_string_pretty(&hooks)?,
    )?;
    let out = prompt(ctx, sb, &fake, "Say hello.")?;
    let calls = fake.model_calls();
    let Some(first) = calls.first() else {
        bail!("Copilot sent no model request\n{}", out.report());
    };
    for mark in [
        "MARK-SS-FLAT",
        "MARK-SS-CLAUDE",
        "MARK-SS-TEXT",
        "MARK-UPS-FLAT",
    ] {
        let found = locate(&first.body, mark);
        println!(
            "   {mark}: {}",
            if found.is_empty() {
                "not in the first request".to_owned()
            } else {
                found.join(", ")
            }
        );
    }
    for input in ["ss-input.json", "ups-input.json"] {
        let text = std::fs::read_to_string(sb.repo.join(input)).unwrap_or_default();
        println!("   {input}: {}", text.trim());
    }
    Ok(())
}

/// `probe-copilot-trust`: which `trustedFolders` entries make Copilot load the repository's
/// server (`copilot mcp list --json`): the folder, a parent, a trailing slash, a name that only
/// starts the same, a symlink to the repository, and the key in `settings.json`.
pub fn probe_trust(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_init()?;
    super::copilot::offline_env(sb, None);
    super::copilot::memloop_ok(sb, &["init", "--yes", "--agents", "copilot"])?;
    let repo = sb.repo.canonicalize()?;
    let link = sb.home.join("repo-link");
    std::os::unix::fs::symlink(&repo, &link)?;
    let parent = repo
        .parent()
        .expect("the repository has a parent")
        .to_path_buf();
    let name = repo.display().to_string();
    let cases: Vec<(&str, Value)> = vec![
        ("the folder", json!([name])),
        ("a trailing slash", json!([format!("{name}/")])),
        ("the parent", json!([parent.display().to_string()])),
        (
            "a name that only starts the same",
            json!([&name[..name.len() - 1]]),
        ),
        (
            "a symlink to the folder",
            json!([link.display().to_string()]),
        ),
    ];
    let config = sb.home.join(".copilot/config.json");
    std::fs::create_dir_all(config.parent().expect("in .copilot"))?;
    for (what, folders) in cases {
        std::fs::write(&config, json!({"trustedFolders": folders}).to_string())?;
        let listed = super::copilot::json_out(ctx, sb, &["mcp", "list", "--json"])?;
        let loads = listed["mcpServers"].get(super::copilot::SERVER).is_some();
        println!(
            "   trustedFolders {what}: {}",
            if loads { "trusted" } else { "NOT trusted" }
        );
    }
    std::fs::write(&config, "{}")?;
    std::fs::write(
        sb.home.join(".copilot/settings.json"),
        json!({"trustedFolders": [name]}).to_string(),
    )?;
    let listed = super::copilot::json_out(ctx, sb, &["mcp", "list", "--json"])?;
    let loads = listed["mcpServers"].get(super::copilot::SERVER).is_some();
    println!(
        "   trustedFolders in settings.json: {}",
        if loads { "trusted" } else { "NOT trusted" }
    );
    // Run from the symlink, with the real path trusted.
    std::fs::remove_file(sb.home.join(".copilot/settings.json"))?;
    std::fs::write(&config, json!({"trustedFolders": [name]}).to_string())?;
    let mut cmd = sb.command(super::copilot::copilot(ctx));
    cmd.args(["mcp", "list", "--json"]).current_dir(&link);
    let out = super::proc::run(cmd, ctx.timeout, None)?;
    let listed: Value = serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null);
    let loads = listed["mcpServers"].get(super::copilot::SERVER).is_some();
    println!(
        "   run from a symlink, real path trusted: {}",
        if loads { "trusted" } else { "NOT trusted" }
    );
    Ok(())
}

/// `session-start-copilot-compaction`: Copilot's background compaction made to start at once
/// (`COPILOT_BACKGROUND_COMPACTION_THRESHOLD`, `COPILOT_BUFFER_EXHAUSTION_THRESHOLD` in the pinned
/// runtime) during a `-p` turn of several steps: the index is gone from the requests after the
/// summary, memloop's `preCompact` hook left its note, and the session's next prompt
/// (`copilot --resume <id> -p`) holds the index once in its first request. The fake derives its
/// step from the history, which the compaction empties, so the turn never ends by itself: it is
/// cut after 30 s and the requests read (the replayed steps only make more compactions).
pub fn probe_compaction(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let ls = || Step::Call {
        name: "bash".into(),
        args: json!({"command": "ls", "description": "List the files"}),
    };
    let fake = FakeResponses::start(Script {
        steps: vec![ls(), ls(), ls(), ls(), Step::Say("Done.".into())],
        latency: ctx.model_latency,
    })?;
    install(ctx, sb, &fake, "copilot")?;
    seed(sb)?;
    sb.set_env("COPILOT_BACKGROUND_COMPACTION_THRESHOLD", "0.0001");
    sb.set_env("COPILOT_BUFFER_EXHAUSTION_THRESHOLD", "0.0002");
    let args = [
        "-p",
        "List the files a few times.",
        "--allow-all",
        "--output-format",
        "json",
    ];
    let _cut = sb.run(
        super::copilot::copilot(ctx),
        &args,
        std::time::Duration::from_secs(30),
    );
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let calls = fake.model_calls();
    let summarised = calls.iter().position(|c| {
        c.body["input"][0]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Some of the conversation history has been summarized"))
    });
    let Some(summarised) = summarised else {
        bail!("no request after a compaction in {} requests", calls.len());
    };
    let before = calls[..summarised]
        .iter()
        .filter(|c| !locate(&c.body, NOTE_MARK).is_empty())
        .count();
    let after = calls[summarised..]
        .iter()
        .filter(|c| !locate(&c.body, NOTE_MARK).is_empty())
        .count();
    let starts = hook_runs(sb, "sessionStart")?;
    println!(
        "   {} requests; the first after a compaction is #{} (opens with Copilot's summary); the index is in {before} of the {summarised} before and in {after} after; sessionStart hook runs: {starts}",
        calls.len(),
        summarised + 1,
    );
    let notes = compaction_notes(sb);
    if notes.len() != 1 {
        bail!("memloop's preCompact hook left no compaction note for the session ({notes:?})");
    }
    println!(
        "   preCompact hook runs: {}; session.compaction_complete rows: {}; userPromptSubmitted runs: {}; compaction notes left: {notes:?}",
        hook_runs(sb, "preCompact")?,
        event_rows(sb, "\"type\":\"session.compaction_complete\"")?,
        hook_runs(sb, "userPromptSubmitted")?,
    );
    // The next prompt of the same session (compaction no longer forced): its first request.
    let session = only_session(sb)?;
    sb.set_env("COPILOT_BACKGROUND_COMPACTION_THRESHOLD", "0.95");
    sb.set_env("COPILOT_BUFFER_EXHAUSTION_THRESHOLD", "0.99");
    let before_resume = calls.len();
    let resume = [
        "--resume",
        session.as_str(),
        "-p",
        "Say hello.",
        "--allow-all",
        "--output-format",
        "json",
    ];
    let _cut = sb.run(
        super::copilot::copilot(ctx),
        &resume,
        std::time::Duration::from_secs(30),
    );
    let calls = fake.model_calls();
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let Some(next) = calls.get(before_resume) else {
        bail!("the resumed session sent no model request");
    };
    let index_at = locate(&next.body, NOTE_MARK);
    let summary_at = locate(
        &next.body,
        "Some of the conversation history has been summarized",
    );
    if index_at.len() != 1 {
        bail!(
            "the first request of the prompt after the compaction holds the index {} times ({index_at:?}); once is right",
            index_at.len()
        );
    }
    println!(
        "   resumed prompt: request #{}: index at {index_at:?}, Copilot's summary at {summary_at:?}; sessionStart runs now {}, userPromptSubmitted runs now {}; notes left: {:?}",
        before_resume + 1,
        hook_runs(sb, "sessionStart")?,
        hook_runs(sb, "userPromptSubmitted")?,
        compaction_notes(sb),
    );
    Ok(())
}

/// The rows of every session's events.jsonl holding `needle`.
fn event_rows(sb: &Sandbox, needle: &str) -> Result<usize> {
    Ok(std::fs::read_dir(sb.home.join(".copilot/session-state"))?
        .flatten()
        .map(|e| std::fs::read_to_string(e.path().join("events.jsonl")).unwrap_or_default())
        .collect::<String>()
        .lines()
        .filter(|l| l.contains(needle))
        .count())
}

/// How often Copilot started hooks of `event` (its `hook.start` rows).
fn hook_runs(sb: &Sandbox, event: &str) -> Result<usize> {
    let kind = format!("\"hookType\":\"{event}\"");
    Ok(std::fs::read_dir(sb.home.join(".copilot/session-state"))?
        .flatten()
        .map(|e| std::fs::read_to_string(e.path().join("events.jsonl")).unwrap_or_default())
        .collect::<String>()
        .lines()
        .filter(|l| l.contains("\"type\":\"hook.start\"") && l.contains(&kind))
        .count())
}

/// The compaction notes memloop's preCompact hook left in the gate's state folder.
fn compaction_notes(sb: &Sandbox) -> Vec<String> {
    std::fs::read_dir(sb.xdg_state.join("memloop/gate"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".compact"))
                .collect()
        })
        .unwrap_or_default()
}

/// The id of the one session Copilot recorded.
pub(super) fn only_session(sb: &Sandbox) -> Result<String> {
    let ids: Vec<String> = std::fs::read_dir(sb.home.join(".copilot/session-state"))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // `.session-operation-locks` sits beside the sessions.
        .filter(|name| !name.starts_with('.'))
        .collect();
    match ids.as_slice() {
        [id] => Ok(id.clone()),
        _ => bail!("expected one Copilot session, found {ids:?}"),
    }
}
