//! `memloop hook session-start --agent <AGENT>`: prints the session-start text (the memory
//! index, or the lookup rule alone) in the form the agent's start hook reads.
//!
//! ```text
//! --agent claude, codex, gemini, qwen  {"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"..."}}
//! --agent copilot                    {"additionalContext":"..."}
//! --agent <other>                    the text itself (kimi, opencode, text)
//! ```
//!
//! `memloop hook pre-compact` prints the reminder as plain text, except for Qwen Code, which
//! takes a PreCompact hook's words to the summary only as `hookSpecificOutput.additionalContext`
//! (plain stdout of that event is shown to the user alone).
//!
//! With `--agent kimi` (run on every prompt, Kimi's only event that reaches the model) and a
//! `session_id` in the input, the text is printed on a session's first prompt and the first
//! after each compaction only, and `pre-compact` notes the compaction instead of printing.
//!
//! With `--agent copilot` and a `sessionId` in the input, `pre-compact` notes the compaction
//! and `session-start --after-compaction` (Copilot's prompt hook)
//! prints the text only on the first prompt after such a note.
//!
//! stdin may carry the agent's hook input; its `cwd` (and Kimi's `session_id`) is read, it is
//! optional, and it is waited for at most [`INPUT_WAIT`], so the hook never hangs on a pipe
//! nobody closes. Exit 0 with the text (or nothing, with `[memory] session_start = false`);
//! exit 1 with one `memloop hook:` line on stderr when it fails, never 2, which some agents
//! read as a block.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::session::session_text;
use crate::config::Config;

const INPUT_WAIT: Duration = Duration::from_millis(500);
const MAX_INPUT: u64 = 1 << 20;
const AGENTS: &str = "claude, codex, copilot, gemini, kilo, kimi, opencode, qwen or text";

#[derive(Debug, clap::Args)]
pub struct SessionStartArgs {
    /// The agent calling: claude, codex, gemini, qwen (hook JSON), copilot (its sessionStart JSON), or kimi, opencode, text (plain text).
    // A value-less `--agent` is reported by the hook itself: clap's usage errors exit 2.
    #[arg(long, value_name = "AGENT", num_args = 0..=1, default_missing_value = "")]
    agent: Option<String>,
    /// Copilot's prompt hook: print the text only on the first prompt after a compaction that
    /// memloop's preCompact hook noted for the input's `sessionId`, nothing otherwise.
    #[arg(long)]
    after_compaction: bool,
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `hookSpecificOutput.additionalContext` for the start hook, plain text before a compaction.
    ClaudeJson,
    /// `hookSpecificOutput.additionalContext` for both events (Qwen Code).
    HookJson,
    /// Copilot reads `additionalContext` at the top level of a `sessionStart` hook's output
    /// (the Claude shape is ignored there).
    CopilotJson,
    Text,
}

/// What the hook is asked for: the text a session starts with, or the last reminder before the
/// agent summarises older turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    SessionStart,
    PreCompact,
}

/// Printed before a compaction: Claude Code hands a PreCompact hook's output to the summary as
/// instructions, so it asks for what was not stored to survive the summary, and to be stored.
pub const PRE_COMPACT: &str = "memloop: older turns are about to be summarised. Keep in the \
summary, under \"Not yet stored\", every decision, lesson and fact of this session that is not \
in the memory store yet, with why; right after the summary, store each of them in the memory \
store (a type, an honest importance, two to five tags).";

pub fn run(args: SessionStartArgs) -> ExitCode {
    run_event(args, Event::SessionStart)
}

pub fn run_event(args: SessionStartArgs, event: Event) -> ExitCode {
    let outcome = if args.agent.as_deref() == Some("kimi") {
        kimi(&args, event)
    } else if args.agent.as_deref() == Some("copilot") {
        copilot(&args, event)
    } else if args.after_compaction {
        Err(anyhow::anyhow!(
            "--after-compaction is for --agent copilot only (its prompt hook)"
        ))
    } else {
        session_start(&args, event)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let why = format!("{err:#}");
            eprintln!(
                "memloop hook: {}; the session starts without the memory index",
                why.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            ExitCode::from(1)
        }
    }
}

fn session_start(args: &SessionStartArgs, event: Event) -> anyhow::Result<()> {
    if let Some(extra) = args.rest.first() {
        bail!("unexpected argument {extra:?}; usage: memloop hook session-start --agent <AGENT>");
    }
    let form = match args.agent.as_deref() {
        // Codex and Gemini CLI read the same SessionStart JSON as Claude Code (hookSpecificOutput).
        Some("claude" | "codex" | "gemini") => Form::ClaudeJson,
        Some("qwen") => Form::HookJson,
        Some("copilot") => Form::CopilotJson,
        Some("kimi" | "opencode" | "kilo" | "text") => Form::Text,
        Some("") | None => bail!("missing --agent; use --agent {AGENTS}"),
        Some(other) => bail!("unknown agent {other:?}; use --agent {AGENTS}"),
    };
    let given = std::env::var_os("MEMLOOP_ROOT")
        .filter(|root| !root.is_empty())
        .map(PathBuf::from);
    let root = super::repository(given, input_cwd()).map_err(anyhow::Error::msg)?;
    let config = Config::load(&root)?.unwrap_or_default();
    if event == Event::PreCompact {
        if !config.memory.session_start {
            return Ok(());
        }
        // Claude Code reads plain text as the summary's instructions; Qwen Code only the JSON.
        return match form {
            Form::HookJson => print(&hook_json("PreCompact", PRE_COMPACT)),
            Form::ClaudeJson | Form::CopilotJson | Form::Text => print(&format!("{PRE_COMPACT}\n")),
        };
    }
    let session = session_text(&root, &config)?;
    if session.text.is_empty() {
        return Ok(());
    }
    let out = match form {
        Form::Text => session.text,
        Form::ClaudeJson | Form::HookJson => hook_json("SessionStart", &session.text),
        Form::CopilotJson => format!("{}\n", json!({"additionalContext": session.text})),
    };
    print(&out)
}

/// Kimi Code runs memloop's session-start piece on every prompt (`agents::kimi::start`): whether
/// this prompt gets the index is settled from the hook input alone, before the repository or the
/// store is read. Run by hand (no `session_id`), it prints like any other agent's.
fn kimi(args: &SessionStartArgs, event: Event) -> anyhow::Result<()> {
    use crate::agents::kimi::start;
    let session = hook_input()
        .and_then(|input| input.get("session_id")?.as_str())
        .filter(|id| !id.is_empty());
    let Some(session) = session.filter(|_| args.rest.is_empty()) else {
        return session_start(args, event);
    };
    match event {
        // What Kimi's PreCompact hooks print goes nowhere: the note is all that matters.
        Event::PreCompact => start::note_compaction(session),
        Event::SessionStart => match start::claim(session)? {
            None => Ok(()),
            Some(claim) => session_start(args, event).inspect_err(|_| claim.give_back()),
        },
    }
}

/// Copilot runs memloop's prompt hook (`--after-compaction`) on every prompt and its preCompact
/// hook before each compaction (`agents::copilot::start`): whether a prompt gets the index is
/// settled from the input's `sessionId` alone, before the repository or the store is read.
fn copilot(args: &SessionStartArgs, event: Event) -> anyhow::Result<()> {
    use crate::agents::copilot::start;
    let session = hook_input()
        .and_then(|input| input.get("sessionId").or_else(|| input.get("session_id")))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && args.rest.is_empty());
    match (event, session) {
        // Copilot 1.0.102 has no output type for preCompact (the SDK's hook types): the note is
        // all that matters.
        (Event::PreCompact, Some(session)) => start::note_compaction(session),
        (Event::SessionStart, Some(session)) if args.after_compaction => {
            match start::claim_after_compaction(session)? {
                None => Ok(()),
                Some(claim) => session_start(args, event).inspect_err(|_| claim.give_back()),
            }
        }
        // Without a session to ask about, a prompt hook cannot tell: it gives nothing rather
        // than the index on every prompt.
        (Event::SessionStart, None) if args.after_compaction && args.rest.is_empty() => Ok(()),
        (Event::SessionStart, Some(session)) => {
            start::started(session);
            session_start(args, event)
        }
        _ => session_start(args, event),
    }
}

fn hook_json(event: &str, text: &str) -> String {
    let answer = json!({"hookSpecificOutput": {
        "hookEventName": event,
        "additionalContext": text,
    }});
    format!("{answer}\n")
}

fn print(out: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .context("could not write to stdout")
}

/// The `cwd` of the agent's hook input, if one arrives in time and holds it.
fn input_cwd() -> Option<PathBuf> {
    let cwd = hook_input()?
        .get("cwd")?
        .as_str()
        .filter(|cwd| !cwd.is_empty())?;
    Some(PathBuf::from(cwd))
}

/// The agent's hook input (read once, waited for at most [`INPUT_WAIT`]), if it is JSON.
fn hook_input() -> Option<&'static Value> {
    static INPUT: OnceLock<Option<Value>> = OnceLock::new();
    INPUT.get_or_init(read_input).as_ref()
}

fn read_input() -> Option<Value> {
    if std::io::stdin().is_terminal() {
        return None;
    }
    let (sender, receiver) = mpsc::channel();
    // Left blocked on a pipe that never closes, the thread ends with the process.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::stdin().take(MAX_INPUT).read_to_end(&mut bytes);
        let _ = sender.send(read.map(|_| bytes));
    });
    let bytes = receiver.recv_timeout(INPUT_WAIT).ok()?.ok()?;
    serde_json::from_slice(&bytes).ok()
}
