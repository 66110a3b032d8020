//! Scenarios "interactive": the real agent's own terminal UI, driven through tmux in the
//! permission mode that asks before tools, as a person meets memloop (issue 26 §3). A note is
//! stored before the session; the person types one prompt; the scripted fake model writes three
//! files (the agent asks before each edit, and the test answers yes as a person would), stops, is
//! sent back by the gate, looks up and stores; the turn ends. Checked on the model's requests and
//! on every screen seen:
//! - the memory index is in the first request;
//! - the gate's message reached the model and the screen, the lookup and the store ran, and no
//!   question about either was ever on screen;
//! - no screen shows a line with "failed" or "error" (the gate as a failed hook).
//!
//! The `-unapproved` variants run the same session with `[memory] approve_tools = false`: there
//! the agent must ask before the lookup. That shows the question detector sees such a question,
//! so a later UI that words it differently fails these scenarios instead of passing them.
//!
//! Screens go to `screens.txt` under the sandbox root (kept with a failed sandbox), never into
//! the repository.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::codex::check_stored;
use super::fake_gemini::{FakeGemini, Script as GeminiScript, Step};
use super::fake_model::{Dialect, FakeModel, GATE_MARKER, Script};
use super::gate::{PROMPT, WRITES, check_loop, check_ran_unasked};
use super::proc::{self, Output};
use super::sandbox::Sandbox;
use super::session_start::{self, NOTE_MARK, all_text, conversation_calls};
use super::tmux::Pane;
use super::{Ctx, agents, gemini_memloop, qwen};

const COLS: u16 = 120;
const ROWS: u16 = 50;
/// How long the model must have been quiet, after the store, for the turn to count as ended.
const SETTLED: Duration = Duration::from_secs(5);

/// A permission question on screen, by what it asks about.
#[derive(Debug, PartialEq, Eq)]
enum Question {
    /// A file write or edit: the person answers yes.
    Edit,
    /// One of memloop's own two tools; the text names it.
    Memloop(String),
    /// Anything else, which this scenario does not expect.
    Other(String),
}

/// What one agent's terminal UI looks like.
struct Ui {
    agent: &'static str,
    /// The input box takes a prompt.
    ready: fn(&str) -> bool,
    /// The agent is working on a turn.
    busy: fn(&str) -> bool,
    /// The permission question on screen, if there is one.
    question: fn(&str) -> Option<Question>,
    /// How the person answers yes to an edit question (tmux key names).
    yes: &'static [&'static str],
    /// Lines the real program shows for any send-back, whatever the hook answers (read in its
    /// source): not the gate's doing, so not held against it.
    shown_for_every_block: &'static [&'static str],
}

/// The last box drawn from the left edge of the screen (Gemini CLI's dialogs), to the end.
fn last_box(screen: &str) -> &str {
    let at = screen
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .rfind(|&i| screen[i..].starts_with('╭'))
        .unwrap_or(0);
    &screen[at..]
}

const CLAUDE_UI: Ui = Ui {
    agent: "Claude Code",
    ready: |s| {
        s.contains('❯')
            && (s.contains("for shortcuts") || s.contains("shift+tab to cycle"))
            && !s.contains("Do you want")
    },
    busy: |s| s.contains("esc to interrupt"),
    question: |s| {
        if !s.contains("Do you want") {
            return None;
        }
        // Claude Code 2.1.332: the dialog opens with a rule, then "Create file" or "Tool use"
        // and, for an MCP tool, "memory — Context Query Tool: (MCP)".
        let dialog = &s[s.rfind("Do you want").map_or(0, |at| {
            s[..at]
                .rfind("Tool use")
                .or_else(|| s[..at].rfind("Create file"))
                .or_else(|| s[..at].rfind("Edit file"))
                .unwrap_or(at)
        })..];
        Some(if dialog.contains("(MCP)") {
            if dialog.contains("Context Query") || dialog.contains("Memory Store") {
                Question::Memloop(dialog.to_owned())
            } else {
                Question::Other(dialog.to_owned())
            }
        } else if dialog.contains("Do you want to create") || dialog.contains("Do you want to make")
        {
            Question::Edit
        } else {
            Question::Other(dialog.to_owned())
        })
    },
    yes: &["Enter"],
    shown_for_every_block: &[],
};

const GEMINI_UI: Ui = Ui {
    agent: "Gemini CLI",
    ready: |s| s.contains("Type your message") && !last_box(s).contains("Allow once"),
    busy: |s| s.contains("esc to cancel"),
    question: |s| {
        // 0.61.0: "Action Required ... Allow execution of MCP tool "context_query" from server
        // "memory"?" for an MCP tool, "WriteFile ... Apply this change?" for a write; both in a
        // box with "1. Allow once" first.
        let dialog = last_box(s);
        if !dialog.contains("Allow once") {
            return None;
        }
        Some(if dialog.contains("Allow execution of MCP tool") {
            if dialog.contains("\"context_query\"") || dialog.contains("\"memory_store\"") {
                Question::Memloop(dialog.to_owned())
            } else {
                Question::Other(dialog.to_owned())
            }
        } else if dialog.contains("Apply this change?") {
            Question::Edit
        } else {
            Question::Other(dialog.to_owned())
        })
    },
    yes: &["Enter"],
    // 0.61.0 turns every AfterAgent block, exit 2 or a JSON decision alike, into an
    // AgentExecutionBlocked event (client.ts), which the UI shows as "Agent execution blocked:
    // <reason>" followed, unless `ui.errorVerbosity` is "full", by this note once per prompt
    // (useGeminiStream.ts, LOW_VERBOSITY_FAILURE_NOTE). Exit 2 would add "Hook(s) [memloop]
    // failed for event AfterAgent", which still fails the check.
    shown_for_every_block: &["This request failed. Press F12 for diagnostics"],
};

const QWEN_UI: Ui = Ui {
    agent: "Qwen Code",
    ready: |s| s.contains("Type your message") && !s.contains("allow once"),
    busy: |s| s.contains("esc to cancel") || s.contains("Waiting for user confirmation"),
    question: |s| {
        // 0.24.4: "? context_query (memory MCP Server) ... Allow execution of MCP tool
        // "context_query" from server "memory"? › 1. Yes, allow once", not in a box; the
        // question is the screen's last lines.
        if !s.contains("allow once") {
            return None;
        }
        let dialog = &s[s.rfind("allow once").map_or(0, |at| {
            s[..at]
                .rfind("\n  ? ")
                .or_else(|| s[..at].rfind("\n ? "))
                .unwrap_or(0)
        })..];
        Some(if dialog.contains("Allow execution of MCP tool") {
            if dialog.contains("\"context_query\"") || dialog.contains("\"memory_store\"") {
                Question::Memloop(dialog.to_owned())
            } else {
                Question::Other(dialog.to_owned())
            }
        } else if dialog.contains("WriteFile") || dialog.contains("Apply this change") {
            Question::Edit
        } else {
            Question::Other(dialog.to_owned())
        })
    },
    yes: &["Enter"],
    // 0.24.4 shows every Stop block, exit 2 or a JSON decision alike, as "Ran 1 stop hooks /
    // Stop hook error: <reason>" (its `stop_hook_loop` history item); a failed hook is not
    // shown on screen at all (only in the debug log, which gate-qwen checks).
    shown_for_every_block: &["Stop hook error: KNOWLEDGE CHECK"],
};

/// What the person saw during the session.
struct Seen {
    edits_answered: usize,
    /// The memloop-tool question, when one came up (the `-unapproved` runs stop there).
    memloop_question: Option<String>,
}

/// Types the prompt once the UI takes it, answers the edit questions, and waits until the store
/// ran and the model has been quiet for [`SETTLED`] with the agent idle. With `approved`, a
/// question about memloop's tools fails the run; without, it ends the run (it was the point).
fn drive(
    pane: &mut Pane,
    ui: &Ui,
    deadline: Instant,
    approved: bool,
    progress: &dyn Fn() -> (usize, bool),
) -> Result<Seen> {
    pane.wait_for(deadline, &format!("{}'s prompt", ui.agent), ui.ready)?;
    pane.type_text(PROMPT)?;
    pane.press(&["Enter"])?;
    let mut seen = Seen {
        edits_answered: 0,
        memloop_question: None,
    };
    let (mut calls, mut quiet_since) = (0, Instant::now());
    loop {
        let screen = pane.screen()?;
        match (ui.question)(&screen) {
            Some(Question::Edit) => {
                if seen.edits_answered > 3 * WRITES {
                    bail!("{} kept asking about edits:\n{screen}", ui.agent);
                }
                pane.press(ui.yes)?;
                // A key pressed while the dialog is still being drawn can be lost: the answer
                // counts once the screen changed, else the loop sees the question again.
                let pressed = Instant::now();
                while pressed.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(100));
                    if pane.screen()? != screen {
                        seen.edits_answered += 1;
                        break;
                    }
                }
                continue;
            }
            Some(Question::Memloop(dialog)) if !approved => {
                seen.memloop_question = Some(dialog);
                return Ok(seen);
            }
            Some(Question::Memloop(dialog)) => bail!(
                "{} asked the person before one of memloop's own tools, which memloop approved:\n{dialog}",
                ui.agent
            ),
            Some(Question::Other(dialog)) => {
                bail!(
                    "{} asked a question this scenario does not expect:\n{dialog}",
                    ui.agent
                )
            }
            None => {}
        }
        let (now, stored) = progress();
        if now != calls {
            (calls, quiet_since) = (now, Instant::now());
        }
        if stored && quiet_since.elapsed() > SETTLED && !(ui.busy)(&screen) {
            return Ok(seen);
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not finish the turn (stored: {stored}, {calls} model requests); last screen:\n{screen}",
                ui.agent
            );
        }
        if pane.exited() {
            bail!(
                "{} exited during the session; last screen:\n{screen}",
                ui.agent
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every line of every screen that shows something as failed or as an error, but for what the
/// program shows for every block.
fn failure_lines(pane: &Pane, ui: &Ui) -> Vec<String> {
    let mut lines: Vec<String> = pane
        .screens()
        .iter()
        .flat_map(|s| s.lines())
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            (lower.contains("failed") || lower.contains("error"))
                && !ui
                    .shown_for_every_block
                    .iter()
                    .any(|known| l.contains(known))
        })
        .map(|l| l.trim().to_owned())
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// The checks on what the person saw, common to every agent.
fn check_screens(pane: &Pane, ui: &Ui, seen: &Seen) -> Result<()> {
    let failures = failure_lines(pane, ui);
    if !failures.is_empty() {
        bail!(
            "{} showed a failure or an error on screen:\n  {}",
            ui.agent,
            failures.join("\n  ")
        );
    }
    if !pane.screens().iter().any(|s| s.contains(GATE_MARKER)) {
        bail!(
            "the gate's {GATE_MARKER:?} never showed on screen: the person does not see why the agent went on"
        );
    }
    if seen.edits_answered == 0 {
        bail!(
            "{} asked nothing before its edits: not the mode that asks, so the run shows nothing about questions",
            ui.agent
        );
    }
    println!(
        "   {} screens; {} edit questions answered yes; no question about memloop's tools; no \
         failed or error line; the gate's message shown",
        pane.screens().len(),
        seen.edits_answered
    );
    Ok(())
}

/// The end of an `-unapproved` run: the question about memloop's tool must have come.
fn check_asked(ui: &Ui, seen: &Seen) -> Result<()> {
    match &seen.memloop_question {
        Some(dialog) => {
            let names = [
                "context_query",
                "Context Query",
                "memory_store",
                "Memory Store",
            ];
            let first = dialog
                .lines()
                .map(str::trim)
                .find(|l| names.iter().any(|name| l.contains(name)));
            println!(
                "   without the approvals {} asks before memloop's tool: {:?}",
                ui.agent,
                first.unwrap_or_default()
            );
            Ok(())
        }
        None => bail!(
            "with [memory] approve_tools = false {} ran memloop's tools without asking; the \
             question detector saw no question (did the dialog's wording change?)",
            ui.agent
        ),
    }
}

fn screen_output(pane: &Pane, ui: &Ui, started: Instant) -> Output {
    Output {
        display: format!("{} in tmux", ui.agent),
        status: None,
        stdout: pane.screens().last().cloned().unwrap_or_default(),
        stderr: String::new(),
        elapsed: started.elapsed(),
    }
}

pub fn claude(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    claude_with(ctx, sb, true)
}

pub fn claude_unapproved(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    claude_with(ctx, sb, false)
}

/// In `--permission-mode default`, the mode that asks before a tool nothing approved. Claude
/// Code 2.1.332 starts in its auto mode instead, where a call no rule allows waits for a safety
/// check on Anthropic's server; behind another endpoint (this fake, a gateway) the check cannot
/// run and the person is asked ("Auto mode can't check actions in this session"). memloop's
/// allow rules spare the lookup and the store that check too (both seen in runs of 2.1.332).
fn claude_with(ctx: &Ctx, sb: &mut Sandbox, approved: bool) -> Result<()> {
    session_start::needs(ctx)?;
    agents::claude(sb, false)?;
    memloop(sb, &["init", "--yes", "--agents", "claude", "--trust"])?;
    if !approved {
        withhold_approvals(sb)?;
    }
    session_start::seed(sb)?;
    let store = "mcp__memory__memory_store";
    let lookup = "mcp__memory__context_query";
    let fake = FakeModel::start(
        Dialect::Anthropic,
        Script {
            repo: sb.repo.clone(),
            writes: WRITES,
            write_tool: "Write".into(),
            store_tool: store.into(),
            lookup_tool: Some(lookup.into()),
            latency: ctx.model_latency,
        },
    )?;
    sb.set_env("ANTHROPIC_BASE_URL", fake.base_url());
    sb.set_env("ANTHROPIC_AUTH_TOKEN", "sk-e2e");
    sb.set_env("ENABLE_TOOL_SEARCH", "false");
    let claude = ctx.tools.bin.join("claude");
    let claude = claude.to_string_lossy();
    let started = Instant::now();
    let mut pane = Pane::start(sb, &claude, &["--permission-mode", "default"], COLS, ROWS)?;
    let ui = &CLAUDE_UI;
    let progress = || {
        let calls = fake.model_calls();
        let stored = calls
            .iter()
            .any(|c| c.conversation(fake.dialect).result_of(store).is_some());
        (calls.len(), stored)
    };
    let seen = drive(
        &mut pane,
        ui,
        started + ctx.gate_timeout,
        approved,
        &progress,
    );
    pane.save(sb, "screens.txt");
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let seen =
        seen.map_err(|err| anyhow::anyhow!("{err:#}\nmodel requests:\n{}", fake.transcript()))?;
    if !approved {
        return check_asked(ui, &seen);
    }
    let out = screen_output(&pane, ui, started);
    let calls = conversation_calls(&fake);
    let first = calls.first().map(|c| all_text(&c.body)).unwrap_or_default();
    if !first.contains(NOTE_MARK) {
        bail!(
            "the first model request lacks the memory index ({NOTE_MARK:?}):\n{}",
            proc::tail(&first, 3000)
        );
    }
    println!("   the first request holds the index line {NOTE_MARK:?}");
    check_loop(&fake, store, &sb.repo, &out)?;
    check_ran_unasked(&fake, &[lookup, store], &sb.repo)?;
    check_screens(&pane, ui, &seen)
}

pub fn gemini(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gemini_with(ctx, sb, true)
}

pub fn gemini_unapproved(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    gemini_with(ctx, sb, false)
}

/// Gemini CLI 0.61.0 starts in its `default` approval mode, which asks before edits and before
/// any MCP tool nothing allowed.
fn gemini_with(ctx: &Ctx, sb: &mut Sandbox, approved: bool) -> Result<()> {
    ctx.caps.need_serve()?;
    ctx.caps.need_hook()?;
    let server = gemini_memloop::SERVER;
    let files = ["e2e-note-1.txt", "e2e-note-2.txt", "e2e-note-3.txt"];
    let write = |path: &str| Step::Write {
        path: path.into(),
        content: format!("{path}\n"),
    };
    let mcp = |tool: &str| Step::Mcp {
        server: server.into(),
        tool: tool.into(),
    };
    let fake = FakeGemini::start(GeminiScript {
        steps: vec![
            write(files[0]),
            write(files[1]),
            write(files[2]),
            Step::Say("The files are written.".into()),
            mcp("context_query"),
            mcp("memory_store"),
            Step::Say("Looked up and stored what I learned; done.".into()),
        ],
        latency: ctx.model_latency,
    })?;
    gemini_memloop::install(ctx, sb, &fake)?;
    if !approved {
        withhold_approvals(sb)?;
    }
    session_start::seed(sb)?;
    let store = format!("mcp_{server}_memory_store");
    let lookup = format!("mcp_{server}_context_query");
    let started = Instant::now();
    let mut pane = Pane::start(sb, "gemini", &[], COLS, ROWS)?;
    let ui = &GEMINI_UI;
    let progress = || {
        let calls = fake.model_calls();
        let stored = calls
            .iter()
            .any(|c| c.request().result_of(&store).is_some());
        (calls.len(), stored)
    };
    let seen = drive(
        &mut pane,
        ui,
        started + ctx.gate_timeout,
        approved,
        &progress,
    );
    pane.save(sb, "screens.txt");
    let seen =
        seen.map_err(|err| anyhow::anyhow!("{err:#}\nmodel requests:\n{}", fake.transcript()))?;
    if !approved {
        return check_asked(ui, &seen);
    }
    let calls: Vec<_> = fake.model_calls().iter().map(|c| c.request()).collect();
    let opening = calls
        .first()
        .map(|c| c.user_texts.join("\n"))
        .unwrap_or_default();
    if !opening.contains(NOTE_MARK) {
        bail!(
            "the first model request lacks the memory index ({NOTE_MARK:?}):\n{}\nmodel requests:\n{}",
            proc::tail(&opening, 3000),
            fake.transcript()
        );
    }
    println!("   the first request holds the index line {NOTE_MARK:?}");
    for file in files {
        if !sb.repo.join(file).is_file() {
            bail!(
                "write_file did not create {file}\nmodel requests:\n{}",
                fake.transcript()
            );
        }
    }
    if !calls
        .iter()
        .any(|c| c.user_texts.iter().any(|t| t.contains(GATE_MARKER)))
    {
        bail!(
            "memloop's gate never sent Gemini back ({GATE_MARKER:?} never reached the model)\nmodel requests:\n{}",
            fake.transcript()
        );
    }
    for tool in [&lookup, &store] {
        let Some(result) = calls.iter().rev().find_map(|c| c.result_of(tool)) else {
            bail!(
                "no result of {tool} came back to the model\nmodel requests:\n{}",
                fake.transcript()
            );
        };
        if result.contains("\"error\"") {
            bail!("{tool} did not run: Gemini answered {result}");
        }
    }
    let stored = calls
        .iter()
        .rev()
        .find_map(|c| c.result_of(&store))
        .unwrap_or_default();
    check_stored(&sb.repo, &stored)?;
    println!("   the gate sent Gemini back; {lookup} and {store} ran; the note is stored");
    check_screens(&pane, ui, &seen)
}

pub fn qwen(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    qwen_with(ctx, sb, true)
}

pub fn qwen_unapproved(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    qwen_with(ctx, sb, false)
}

/// Qwen Code 0.24.4 in `--approval-mode default`, which asks before edits and before any MCP
/// tool nothing allowed (it starts in its auto mode, where an LLM classifier judges each call
/// and, unreachable behind this fake, asks the person).
fn qwen_with(ctx: &Ctx, sb: &mut Sandbox, approved: bool) -> Result<()> {
    session_start::needs(ctx)?;
    let store = "mcp__memory__memory_store";
    let lookup = "mcp__memory__context_query";
    let fake = FakeModel::start(Dialect::OpenAi, qwen::script(ctx, sb, WRITES))?;
    qwen::install(ctx, sb, &fake)?;
    // In its own UI Qwen asks the model for a follow-up suggestion after each turn (one more
    // request, "[SUGGESTION MODE: ..."), which is none of memloop's doing: off, as a person may
    // set it in /settings.
    let settings = sb.home.join(".qwen/settings.json");
    let mut user: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&settings)?)?;
    user["ui"]["enableFollowupSuggestions"] = serde_json::json!(false);
    std::fs::write(&settings, serde_json::to_string_pretty(&user)?)?;
    if !approved {
        withhold_approvals(sb)?;
    }
    session_start::seed(sb)?;
    let program = ctx.tools.bin.join("qwen");
    let program = program.to_string_lossy();
    let started = Instant::now();
    let mut pane = Pane::start(sb, &program, &["--approval-mode", "default"], COLS, ROWS)?;
    let ui = &QWEN_UI;
    let progress = || {
        let calls = fake.model_calls();
        let stored = calls
            .iter()
            .any(|c| c.conversation(fake.dialect).result_of(store).is_some());
        (calls.len(), stored)
    };
    let seen = drive(
        &mut pane,
        ui,
        started + ctx.gate_timeout,
        approved,
        &progress,
    );
    pane.save(sb, "screens.txt");
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    let seen =
        seen.map_err(|err| anyhow::anyhow!("{err:#}\nmodel requests:\n{}", fake.transcript()))?;
    if !approved {
        return check_asked(ui, &seen);
    }
    let out = screen_output(&pane, ui, started);
    let calls = conversation_calls(&fake);
    let first = calls.first().map(|c| all_text(&c.body)).unwrap_or_default();
    if !first.contains(NOTE_MARK) {
        bail!(
            "the first model request lacks the memory index ({NOTE_MARK:?}):\n{}",
            proc::tail(&first, 3000)
        );
    }
    println!("   the first request holds the index line {NOTE_MARK:?}");
    check_loop(&fake, store, &sb.repo, &out)?;
    check_ran_unasked(&fake, &[lookup, store], &sb.repo)?;
    check_screens(&pane, ui, &seen)
}

fn memloop(sb: &Sandbox, args: &[&str]) -> Result<()> {
    let out = sb.run("memloop", args, Duration::from_secs(60))?;
    if !out.success() {
        bail!("`memloop {}` failed\n{}", args.join(" "), out.report());
    }
    Ok(())
}

/// `[memory] approve_tools = false` in the repository's memloop.toml, applied by `memloop sync`:
/// memloop's own two tools are no longer approved for the agent.
fn withhold_approvals(sb: &Sandbox) -> Result<()> {
    let path = sb.repo.join("memloop.toml");
    let text = std::fs::read_to_string(&path)?;
    if text.contains("[memory]") {
        bail!("memloop.toml already has a [memory] table; the scenario cannot add one:\n{text}");
    }
    std::fs::write(&path, format!("{text}\n[memory]\napprove_tools = false\n"))?;
    memloop(sb, &["sync"])
}
