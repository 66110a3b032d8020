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

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::config::{AgentId, Config};
use crate::memory::recall::index_fingerprints;
use crate::memory::session::{Source, session_text};
use crate::watchdog;

use super::input::{hook_input, input_cwd, session_id};

/// What the agent goes on without when this hook fails or runs out of time.
pub const CONSEQUENCE: &str = "the session starts without the memory index";

#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// The agent calling: claude, codex, gemini, qwen, droid (hook JSON), copilot (its sessionStart JSON), or kimi, opencode, kilo, pi, text (plain text).
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

impl StartArgs {
    /// The prompt hook's arguments when this agent's prompt hook is where its session start is
    /// given (Kimi Code; Copilot's `--after-compaction` piece): that hook runs as `prompt`.
    pub fn prompt_route(
        &self,
        dialects: &dyn Fn(AgentId) -> &'static dyn super::PromptDialect,
    ) -> Option<super::PromptArgs> {
        let id = AgentId::parse(self.agent.as_deref()?)?;
        let (_, after_compaction) = dialects(id).start()?;
        (after_compaction == self.after_compaction && self.rest.is_empty())
            .then(|| super::PromptArgs::for_agent(id))
    }
}

/// How an agent takes the session-start text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
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

/// Whether this run prints.
pub enum Turn {
    /// Print the text (or the reminder); when that fails, `give_back` runs so a later run
    /// tries again.
    Give(Option<Box<dyn FnOnce()>>),
    /// Print nothing: the session has the text already, or the run only took a note.
    Quiet,
}

/// One agent's way with the session-start hooks, implemented in its folder. Most agents run the
/// hook once per session start and take every run's text; Kimi Code runs it on every prompt and
/// Copilot on its prompt hook, so they decide per run from the input's session id.
pub trait StartDialect: Sync {
    fn form(&self) -> Form;

    /// Decides this run from the agent's hook input (`None` when none arrived or it is not JSON)
    /// before the repository is read. `after_compaction` is `--after-compaction`.
    fn turn(
        &self,
        _input: Option<&Value>,
        _event: Event,
        after_compaction: bool,
    ) -> anyhow::Result<Turn> {
        if after_compaction {
            bail!("--after-compaction is for --agent copilot only (its prompt hook)");
        }
        Ok(Turn::Give(None))
    }
}

/// An agent that runs the start hook once per session start and takes every run's text in
/// `.0`; `--agent text` (for a person or a script) is `Plain(Form::Text)`.
pub struct Plain(pub Form);

impl StartDialect for Plain {
    fn form(&self) -> Form {
        self.0
    }
}

/// Printed before a compaction: Claude Code hands a PreCompact hook's output to the summary as
/// instructions, so it asks for what was not stored to survive the summary, and to be stored.
pub const PRE_COMPACT: &str = "memloop: older turns are about to be summarised. Keep in the \
summary, under \"Not yet stored\", every decision, lesson and fact of this session that is not \
in the memory store yet, with why; right after the summary, store each of them in the memory \
store (a type, an honest importance, two to five tags).";

pub fn run(
    args: &StartArgs,
    event: Event,
    dialects: &dyn Fn(AgentId) -> &'static dyn StartDialect,
) -> ExitCode {
    let outcome = decide(args, event, dialects);
    let mut code = ExitCode::from(1);
    watchdog::answer(|| {
        code = match outcome.and_then(print) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                let why = format!("{err:#}");
                eprintln!(
                    "memloop hook: {}; {CONSEQUENCE}",
                    why.split_whitespace().collect::<Vec<_>>().join(" ")
                );
                ExitCode::from(1)
            }
        };
    });
    code
}

/// What to print: the agent's dialect decides whether this run gives anything, then the text
/// is read and shaped for it.
fn decide(
    args: &StartArgs,
    event: Event,
    dialects: &dyn Fn(AgentId) -> &'static dyn StartDialect,
) -> anyhow::Result<String> {
    if let Some(extra) = args.rest.first() {
        bail!("unexpected argument {extra:?}; usage: memloop hook session-start --agent <AGENT>");
    }
    let agents = format!("{} or text", AgentId::choices());
    let dialect: &dyn StartDialect = match args.agent.as_deref() {
        Some("text") => &Plain(Form::Text),
        Some("") | None => bail!("missing --agent; use --agent {agents}"),
        Some(name) => match AgentId::parse(name) {
            Some(id) => dialects(id),
            None => bail!("unknown agent {name:?}; use --agent {agents}"),
        },
    };
    let agent = args.agent.as_deref().and_then(AgentId::parse);
    watchdog::phase("reading the hook input on stdin");
    let input = hook_input();
    if event == Event::PreCompact
        && let (Some(agent), Some(session)) = (agent, session_id(input))
    {
        // The summary drops what the session was handed: recall may give it again.
        if let Ok(state) = crate::gate::state::Store::open() {
            state.forget_given(agent.as_str(), session);
        }
    }
    match dialect.turn(input, event, args.after_compaction)? {
        Turn::Quiet => Ok(String::new()),
        Turn::Give(give_back) => text(dialect.form(), event, agent).inspect_err(|_| {
            if let Some(give_back) = give_back {
                give_back();
            }
        }),
    }
}

/// The repository the hook runs for (`MEMLOOP_ROOT`, else the input's `cwd`, else the working
/// directory) and its `memloop.toml`.
pub(super) fn repository() -> anyhow::Result<(PathBuf, Config)> {
    let given = std::env::var_os("MEMLOOP_ROOT")
        .filter(|root| !root.is_empty())
        .map(PathBuf::from);
    watchdog::phase("finding the repository");
    let root = crate::memory::repository(given, input_cwd()).map_err(anyhow::Error::msg)?;
    watchdog::phase("reading memloop.toml");
    let config = Config::load(&root)?.unwrap_or_default();
    Ok((root, config))
}

/// The session-start text as plain text. With the calling agent and a session id in its input,
/// the notes the index holds whole are noted as given, so recall does not repeat them.
pub(super) fn start_text(
    root: &std::path::Path,
    config: &Config,
    agent: Option<AgentId>,
) -> anyhow::Result<String> {
    watchdog::phase("reading the memory index");
    let session = session_text(root, config)?;
    if let (Some(agent), Some(session_id)) = (agent, session_id(hook_input()))
        && session.source == Source::Index
    {
        watchdog::phase("noting what the index gave");
        // Best effort: without the note, a short note may come once more with a prompt.
        if let Ok(state) = crate::gate::state::Store::open() {
            let _ = state.note_given(
                agent.as_str(),
                session_id,
                &index_fingerprints(&session.text),
            );
        }
    }
    Ok(session.text)
}

fn text(form: Form, event: Event, agent: Option<AgentId>) -> anyhow::Result<String> {
    let (root, config) = repository()?;
    if event == Event::PreCompact {
        if !config.memory.session_start {
            return Ok(String::new());
        }
        // Claude Code reads plain text as the summary's instructions; Qwen Code only the JSON.
        return Ok(match form {
            Form::HookJson => hook_json("PreCompact", PRE_COMPACT),
            Form::ClaudeJson | Form::CopilotJson | Form::Text => format!("{PRE_COMPACT}\n"),
        });
    }
    let text = start_text(&root, &config, agent)?;
    if text.is_empty() {
        return Ok(String::new());
    }
    Ok(match form {
        Form::Text => text,
        Form::ClaudeJson | Form::HookJson => hook_json("SessionStart", &text),
        Form::CopilotJson => format!("{}\n", json!({"additionalContext": text})),
    })
}

pub(super) fn hook_json(event: &str, text: &str) -> String {
    let answer = json!({"hookSpecificOutput": {
        "hookEventName": event,
        "additionalContext": text,
    }});
    format!("{answer}\n")
}

pub(super) fn print(out: String) -> anyhow::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .context("could not write to stdout")
}
