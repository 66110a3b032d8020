//! `memloop hook prompt --agent <AGENT>`: run by the agent when the person sends a prompt, before
//! the model sees it. It prints the notes of the repository's memory that match the prompt
//! (`crate::memory::recall`) in the form the agent adds to the model's context, and, for an agent
//! whose prompt event is also where its session start is given (Kimi Code; Copilot after a
//! compaction), the session-start text before them: one hook, both jobs.
//!
//! ```text
//! --agent claude, codex, qwen, droid  {"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"..."}}
//! --agent gemini                       {"hookSpecificOutput":{"hookEventName":"BeforeAgent","additionalContext":"..."}}
//! --agent copilot                      {"additionalContext":"..."}
//! --agent kimi, opencode, kilo, pi     the text itself
//! ```
//!
//! Per session (the input's session id), the gate's state folder keeps what was given, so a
//! note comes once unless it changed, and none the session-start index gave whole; and it marks
//! the session as given notes, which the gate counts as its lookup
//! (`[gate] recall_counts_as_lookup`).
//!
//! It never blocks the prompt: exit 0 with the text or nothing (no prompt, no match, a prompt of
//! megabytes, binary, no input at all), exit 1 with one `memloop hook:` line on stderr when
//! memloop itself fails, never 2, which agents read as a block.

use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::bail;
use serde_json::{Value, json};

use super::input::{hook_input, session_id};
use super::session_start::{self, Event, StartDialect, Turn};
use crate::config::{AgentId, Config};
use crate::memory::recall::{self, Options, Recall};
use crate::memory::store::Store;
use crate::watchdog;

/// What the agent goes on without when this hook fails or runs out of time.
pub const CONSEQUENCE: &str = "the prompt goes on without the matching notes";

#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    /// The agent calling (claude, codex, gemini, qwen, droid, copilot, kimi, opencode, kilo, pi), or text.
    // A value-less `--agent` is reported by the hook itself: clap's usage errors exit 2.
    #[arg(long, value_name = "AGENT", num_args = 0..=1, default_missing_value = "")]
    agent: Option<String>,
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

impl PromptArgs {
    pub fn for_agent(id: AgentId) -> PromptArgs {
        PromptArgs {
            agent: Some(id.as_str().to_owned()),
            rest: Vec::new(),
        }
    }
}

/// How an agent's prompt hook hands text to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptForm {
    /// `hookSpecificOutput.additionalContext` under this `hookEventName`.
    HookJson(&'static str),
    /// `additionalContext` at the top level (Copilot CLI).
    TopLevel,
    /// The text itself on stdout.
    Text,
}

/// One agent's prompt hook, implemented in its folder.
pub trait PromptDialect: Sync {
    fn form(&self) -> PromptForm;

    /// The prompt's text in the agent's input: `prompt`, a string or a list of content parts
    /// (Kimi Code 2.1.0 passes its message content, `[{"type": "text", "text": ...}]`).
    fn prompt(&self, input: &Value) -> Option<String> {
        text_of(input.get("prompt")?)
    }

    /// Whether `input` is this agent's, whatever `--agent` said (an agent that also runs
    /// another agent's hooks sends its own payload to them).
    fn recognises(&self, _input: &Value) -> bool {
        false
    }

    /// The session start this agent's prompt hook also carries, and whether it is the
    /// after-compaction one (Copilot); `None` for an agent with a start hook of its own.
    fn start(&self) -> Option<(&dyn StartDialect, bool)> {
        None
    }
}

/// The text of a prompt value: a string, or the `text` of each part of a list, joined.
pub fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.as_str().or_else(|| part.get("text")?.as_str()))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// `--agent text`: for a person or a script.
struct Plain;

impl PromptDialect for Plain {
    fn form(&self) -> PromptForm {
        PromptForm::Text
    }
}

pub fn run(
    args: &PromptArgs,
    dialects: &dyn Fn(AgentId) -> &'static dyn PromptDialect,
) -> ExitCode {
    let outcome = decide(args, dialects);
    let mut code = ExitCode::from(1);
    watchdog::answer(|| {
        code = match outcome.and_then(session_start::print) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!(
                    "memloop hook: {}; {CONSEQUENCE}",
                    crate::gate::one_line(&format!("{err:#}"))
                );
                ExitCode::from(1)
            }
        };
    });
    code
}

fn decide(
    args: &PromptArgs,
    dialects: &dyn Fn(AgentId) -> &'static dyn PromptDialect,
) -> anyhow::Result<String> {
    if let Some(extra) = args.rest.first() {
        bail!("unexpected argument {extra:?}; usage: memloop hook prompt --agent <AGENT>");
    }
    let agents = format!("{} or text", AgentId::choices());
    let named = match args.agent.as_deref() {
        Some("text") => None,
        Some("") | None => bail!("missing --agent; use --agent {agents}"),
        Some(name) => match AgentId::parse(name) {
            Some(id) => Some(id),
            None => bail!("unknown agent {name:?}; use --agent {agents}"),
        },
    };
    watchdog::phase("reading the hook input on stdin");
    let input = hook_input();
    let (root, config) = session_start::repository()?;
    let (agent, dialect): (Option<AgentId>, &dyn PromptDialect) = match named {
        None => (None, &Plain),
        Some(named) => {
            let agent = whose(named, input, dialects);
            // Another enabled agent running this agent's hooks has its own prompt hook.
            if agent != named && config.agents.contains(&agent) {
                return Ok(String::new());
            }
            (Some(agent), dialects(agent))
        }
    };
    let mut parts: Vec<String> = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    if let Some((start, after_compaction)) = dialect.start() {
        match start.turn(input, Event::SessionStart, after_compaction)? {
            Turn::Quiet => {}
            Turn::Give(give_back) => match session_start::start_text(&root, &config, agent) {
                Ok(text) => parts.push(text),
                Err(err) => {
                    if let Some(give_back) = give_back {
                        give_back();
                    }
                    failed = Some(err.context("the session-start text was not given"));
                }
            },
        }
    }
    match given_notes(&root, &config, agent, dialect, input) {
        Ok(recall) if !recall.text.is_empty() => parts.push(recall.text),
        Ok(_) => {}
        Err(err) => failed = Some(err.context("the matching notes were not given")),
    }
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return match failed {
            Some(err) => Err(err),
            None => Ok(String::new()),
        };
    }
    if let Some(err) = failed {
        // What could be given is; the rest is said where the person sees it.
        eprintln!(
            "memloop hook: {}",
            crate::gate::one_line(&format!("{err:#}"))
        );
    }
    let text = parts.join("\n");
    Ok(match dialect.form() {
        PromptForm::Text => text,
        PromptForm::HookJson(event) => session_start::hook_json(event, &text),
        PromptForm::TopLevel => format!("{}\n", json!({"additionalContext": text})),
    })
}

/// The agent whose payload `input` is: `named`, unless another agent's dialect recognises it.
fn whose(
    named: AgentId,
    input: Option<&Value>,
    dialects: &dyn Fn(AgentId) -> &'static dyn PromptDialect,
) -> AgentId {
    let Some(input) = input else { return named };
    if dialects(named).recognises(input) {
        return named;
    }
    AgentId::ALL
        .into_iter()
        .find(|other| *other != named && dialects(*other).recognises(input))
        .unwrap_or(named)
}

/// The recall for the input's prompt, noted in the session's state when it gave notes.
fn given_notes(
    root: &std::path::Path,
    config: &Config,
    agent: Option<AgentId>,
    dialect: &dyn PromptDialect,
    input: Option<&Value>,
) -> anyhow::Result<Recall> {
    if !config.memory.recall || !config.server()?.is_embedded() {
        return Ok(Recall::default());
    }
    let Some(prompt) = input.and_then(|input| dialect.prompt(input)) else {
        return Ok(Recall::default());
    };
    if prompt.trim().is_empty() {
        return Ok(Recall::default());
    }
    // Without a session (a person running it by hand), nothing is remembered between runs.
    let session = agent.zip(session_id(input));
    let state = match session {
        Some(_) => Some(crate::gate::state::Store::open()?),
        None => None,
    };
    let given: HashSet<String> = match (&state, session) {
        (Some(state), Some((agent, id))) => state.given(agent.as_str(), id),
        _ => HashSet::new(),
    };
    watchdog::phase("searching the memory");
    let mut store = Store::open(root)?;
    let recall = recall::recall(
        &mut store,
        &prompt,
        &Options {
            cap: config.memory.recall_bytes as usize,
            given: &given,
        },
    );
    if let (Some(state), Some((agent, id))) = (&state, session)
        && !recall.notes.is_empty()
    {
        watchdog::phase("noting what was given");
        let fingerprints: Vec<String> =
            recall.notes.iter().map(|n| n.fingerprint.clone()).collect();
        state.note_given(agent.as_str(), id, &fingerprints)?;
        state.mark_recalled(agent.as_str(), id)?;
    }
    Ok(recall)
}
