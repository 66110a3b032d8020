//! `memloop hook <event>`: the one door through which agents call memloop while they run.
//!
//! The router parses the command line, starts the time budget (`crate::watchdog`), asks the gate
//! (`stop`, `record`) or the memory (`session-start`, `pre-compact`, `prompt`), and answers in the calling
//! agent's dialect. The dialects live in the agents' folders and are handed in as [`Dialects`]:
//! nothing below this module knows an agent by name.
//!
//! Exit status, for every event: 0 done (the stop allowed, the text printed); 2 only for a real
//! block by the gate; 1 when memloop itself failed, with one `memloop hook:` line on stderr that
//! says what the agent goes on without. Usage mistakes exit 1 as well, never clap's 2, which an
//! agent would read as a block.

mod input;
mod prompt;
mod session_start;

use std::process::ExitCode;

use anyhow::{Context, bail};

pub use prompt::{PromptArgs, PromptDialect, PromptForm, text_of as prompt_text};
pub use session_start::{Event, Form, PRE_COMPACT, Plain, StartArgs, StartDialect, Turn};

use crate::config::AgentId;
use crate::gate::{self, Answer, Outcome, one_line};
use crate::watchdog;

/// What the router needs from the agents, handed in by the command line.
pub struct Dialects<'a> {
    /// The agent's side of the Stop gate: where its tool calls come from, how a block reaches it.
    pub gate: &'a dyn Fn(AgentId) -> &'static dyn gate::Reader,
    /// How the agent takes the session-start text, and when it is due.
    pub start: &'a dyn Fn(AgentId) -> &'static dyn StartDialect,
    /// How the agent's prompt hook reads the prompt and hands the matching notes on.
    pub prompt: &'a dyn Fn(AgentId) -> &'static dyn PromptDialect,
}

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    #[command(subcommand)]
    command: Option<HookCommand>,
}

// Agent names are plain strings and stray arguments are collected rather than rejected:
// clap's usage errors exit 2, which an agent would read as a block.
#[derive(Debug, clap::Subcommand)]
enum HookCommand {
    /// Decide a stop: exit 0 lets the agent stop, exit 2 sends it back (message on stderr).
    Stop(AgentArg),
    /// Record one tool call of an OpenCode session (the plugin's tool.execute.after input).
    Record(AgentArg),
    /// Print what a new session is told about the repository's memory (index or reminder).
    SessionStart(StartArgs),
    /// Print the last reminder before older turns are summarised (plain text).
    PreCompact(StartArgs),
    /// Print the notes that match the prompt in the input, in the form the agent reads.
    Prompt(PromptArgs),
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

#[derive(Debug, clap::Args)]
struct AgentArg {
    /// The agent calling, as `agents` in memloop.toml names it.
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

/// `memloop hook`.
pub fn run(args: HookArgs, dialects: &Dialects) -> ExitCode {
    match args.command {
        Some(HookCommand::SessionStart(args)) => {
            // An agent whose prompt hook gives the session start (installed as `session-start`
            // on its prompt event) gets both jobs from it: the start text when due, and the
            // notes that match the prompt.
            if let Some(prompt) = args.prompt_route(dialects.prompt) {
                watchdog::start(prompt::CONSEQUENCE);
                return prompt::run(&prompt, dialects.prompt);
            }
            watchdog::start(session_start::CONSEQUENCE);
            session_start::run(&args, Event::SessionStart, dialects.start)
        }
        Some(HookCommand::PreCompact(args)) => {
            watchdog::start(session_start::CONSEQUENCE);
            session_start::run(&args, Event::PreCompact, dialects.start)
        }
        Some(HookCommand::Prompt(args)) => {
            watchdog::start(prompt::CONSEQUENCE);
            prompt::run(&args, dialects.prompt)
        }
        Some(HookCommand::Stop(arg)) => {
            watchdog::start(STOP_CONSEQUENCE);
            judge(parse_agent(&arg).and_then(|id| gate::stop(id, dialects.gate)))
        }
        Some(HookCommand::Record(arg)) => {
            watchdog::start(STOP_CONSEQUENCE);
            judge(parse_agent(&arg).and_then(|id| gate::record(id, (dialects.gate)(id))))
        }
        Some(HookCommand::Unknown(words)) => judge(Err(anyhow::anyhow!(
            "unknown hook command {:?}; use `memloop hook stop`, `record`, `session-start`, \
             `pre-compact` or `prompt`",
            words.first().map(String::as_str).unwrap_or_default()
        ))),
        None => judge(Err(anyhow::anyhow!(
            "missing hook command; use `memloop hook stop --agent <AGENT>`"
        ))),
    }
}

/// What the agent goes on without when the gate fails or runs out of time.
const STOP_CONSEQUENCE: &str = "the stop was not blocked";

fn parse_agent(arg: &AgentArg) -> anyhow::Result<AgentId> {
    if let Some(extra) = arg.rest.first() {
        bail!("unexpected argument {extra:?}; usage: memloop hook stop --agent <AGENT>");
    }
    match arg.agent.as_deref() {
        Some(name) => AgentId::parse(name)
            .with_context(|| format!("unknown agent {name:?}; use --agent {}", AgentId::choices())),
        None => bail!("missing --agent; use --agent {}", AgentId::choices()),
    }
}

/// Gives the gate's verdict the way the agent reads it.
fn judge(outcome: anyhow::Result<Outcome>) -> ExitCode {
    let mut code = ExitCode::from(1);
    watchdog::answer(|| {
        code = match outcome {
            Ok(Outcome::Allow(note)) => {
                if let Some(note) = note {
                    eprintln!("memloop hook: {}", one_line(&note));
                }
                ExitCode::SUCCESS
            }
            Ok(Outcome::Block(message, Answer::ExitTwo)) => {
                eprintln!("{}", one_line(&message));
                ExitCode::from(2)
            }
            Ok(Outcome::Block(message, Answer::StdoutDecision)) => {
                let decision =
                    serde_json::json!({"decision": "block", "reason": one_line(&message)});
                println!("{decision}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!(
                    "memloop hook: {}; {STOP_CONSEQUENCE}",
                    one_line(&format!("{err:#}"))
                );
                ExitCode::from(1)
            }
        };
    });
    code
}

/// A command line under `memloop hook` that clap refused (a missing value, an unknown or
/// repeated option, a word that is not UTF-8): exit 1 with one line, never clap's exit 2, which
/// the agent would take for a block. Help and version requests print as usual and exit 0.
pub fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    let rendered = err.render().to_string();
    let what = rendered
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("invalid arguments");
    let what = what.strip_prefix("error: ").unwrap_or(what);
    eprintln!(
        "memloop hook: {}; usage: memloop hook stop|record --agent <AGENT>; {STOP_CONSEQUENCE}",
        one_line(what)
    );
    ExitCode::FAILURE
}
