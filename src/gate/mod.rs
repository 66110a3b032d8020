//! The Stop gate the agents call through `memloop hook stop` (routed by `crate::hook`). The rules
//! live in [`rules`]; each agent has a thin adapter that turns its input into tool-call events.
//!
//! # Contract (what the installer writes and the agents rely on)
//!
//! ```text
//! memloop hook stop --agent claude     stdin: Claude Code's Stop input
//!                                      (session_id, transcript_path, cwd, stop_hook_active)
//! memloop hook stop --agent kimi       stdin: Kimi Code's Stop input (session_id, cwd); the calls
//!                                      are read from $KIMI_CODE_HOME/sessions/*/<session_id>/
//!                                      agents/*/wire.jsonl (KIMI_CODE_HOME defaults to ~/.kimi-code)
//! memloop hook stop --agent opencode   stdin: {"session_id", "cwd", "assistant_messages"} from
//!                                      the plugin; the calls come from `record`
//! memloop hook record --agent opencode stdin: {"tool", "sessionID"} (tool.execute.after input)
//! memloop hook stop --agent pi         stdin: {"session_id", "cwd", "tool_calls": [<name>...],
//!                                      "assistant_messages"} from memloop's Pi extension at
//!                                      agent_end: the calls since the last stop it handed over
//! ```
//!
//! Exit status:
//! - `0`: the agent may stop (for `record`: the call was recorded). Nothing on stdout; or, for
//!   an agent that reads a block from stdout ([`Answer::StdoutDecision`]: Gemini CLI, Qwen Code,
//!   Copilot), one line `{"decision": "block", "reason": "KNOWLEDGE CHECK: ..."}`.
//! - `2`: only for a real block. stderr holds exactly one line,
//!   `KNOWLEDGE CHECK: <problems joined by " | "> This is mandatory.`, which the agent reads.
//! - `1`: the gate itself failed (bad JSON on stdin, unreadable log, unwritable state). stderr
//!   holds one line starting with `memloop hook:` saying why. Agents treat it as non-blocking,
//!   so a broken gate never traps a session. Usage mistakes under `memloop hook` (unknown agent,
//!   stray argument) exit 1 as well, never 2.
//!
//! Time budget: a whole run has `crate::watchdog::BUDGET` (5 s), well under the agents' hook timeouts; past it
//! the gate prints `memloop hook: gave up after ...` and exits 1, so a stdin that never closes or
//! a hung read never holds an agent. Only regular files are read (transcripts, session logs,
//! the ledger, `memloop.toml`, state): a FIFO or a device such as `/dev/zero` is refused, exit 1.
//!
//! Loop guards: Claude Code's retry after a block arrives with `stop_hook_active` and is let
//! through; Kimi Code never sets it, so the gate lets the stop right after its own block through
//! ([`kimi`]); the OpenCode plugin sends the agent back at most 3 times in a row. The plugin
//! ([`OPENCODE_PLUGIN`]) runs `$MEMLOOP_BIN`, else `memloop` from `PATH`.
//!
//! Settings come from the `[gate]` and `[server]` sections of the `memloop.toml` found from the
//! input's `cwd` (else the process's); when there is none or it cannot be read, the defaults
//! apply and the gate still runs. State is kept per session in `$XDG_STATE_HOME/memloop/gate`
//! (default `~/.local/state/memloop/gate`, mode 0700); see [`state`]. What the gate could not
//! see (a transcript that never caught up) goes to `debug.log` there, one line per event.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::config::{self, AgentId, Config, GateConfig};

pub mod jsonl;
pub mod rules;
pub mod skim;
pub mod state;
pub mod worktree;

use rules::{StoreHint, ToolSets, Verdict};
use state::{Slot, State, Store};

/// The OpenCode plugin, written verbatim to `.opencode/plugins/memloop.js` by the installer.
/// Its first line is a version marker (`// memloop opencode plugin v<N>`).
pub const OPENCODE_PLUGIN: &str = include_str!("../../assets/opencode-plugin.js");
/// Where the installer writes it, in the repository.
pub const OPENCODE_PLUGIN_PATH: &str = ".opencode/plugins/memloop.js";

/// Stdin larger than this is not a hook input.
const MAX_INPUT: u64 = 16 << 20;

/// One agent's side of the gate: where its tool calls come from. Each agent implements it in its
/// own folder (`agents::<agent>::gate`); `run` is handed the one `--agent` names.
pub trait Reader: Sync {
    /// Reads the Stop `input`, loads the session's state from `store` and folds in the tool calls
    /// since the last check; `None` lets the stop through without a verdict.
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>>;

    /// The names of this agent's shell tools: a window holding a call to one also counts the
    /// files changed in the worktree as edits (`[gate] shell_tools` overrides them).
    fn shell_tools(&self) -> &'static [&'static str];

    /// Whether `input` is this agent's, whatever `--agent` said: an agent that runs another
    /// agent's hooks (Copilot runs `.claude/settings.json`) sends its own payload to them.
    fn recognises(&self, _input: &Value) -> bool {
        false
    }

    /// What names this one stop in `input`, for an agent that may run more than one of
    /// memloop's hooks for it (Copilot: its own and Claude Code's); only the first judges.
    fn stop_id(&self, _input: &Value) -> Option<String> {
        None
    }

    /// How a block reaches this agent.
    fn answer(&self) -> Answer {
        Answer::ExitTwo
    }

    /// How `memloop hook record` stores one tool call, for an agent whose plugin reports each
    /// call; `None` where the calls are read from the agent's own log.
    fn recorder(&self) -> Option<fn(&Value, &Store) -> anyhow::Result<()>> {
        None
    }
}

/// How an agent reads a block: for each agent, the form its real program presents as a
/// continuation rather than as a failed hook. Where both forms present alike, exit 2 stays:
/// Claude Code 2.1.332 shows either as "Stop hook reported a problem" (a JSON decision only
/// drops the command's name in front of the message; "Stop hook failed" is for hooks that
/// failed), Codex 0.171 turns either into the same `Blocked` run with the message as feedback
/// (`hooks/src/events/stop.rs`), and Kimi Code 2.1.0 blocks on exit 2 and does not read a
/// `decision` key at all (`resultFromExitCode`, main.mjs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Exit 2, the message on stderr (Claude Code, Kimi, Codex; the OpenCode plugin).
    ExitTwo,
    /// Exit 0, `{"decision": "block", "reason": <message>}` on stdout (Copilot, for which
    /// exit 2 is only a warning; Gemini CLI and Qwen Code, for which it is a failed hook).
    StdoutDecision,
}

/// What a reader is given besides the input.
pub struct Reading<'a> {
    /// The state's key for this agent (`--agent`).
    pub agent: &'a str,
    pub tools: &'a ToolSets,
    /// memloop's server name, as the agent's tool names carry it.
    pub server: &'a str,
}

/// A session ready to be judged: its saved state with this stop's calls folded in.
pub struct Session {
    pub slot: Slot,
    pub state: State,
    /// Whether the agent is already continuing after a block (the loop guard).
    pub active: bool,
}

/// What a reader of a session log does with one Stop: load `session_id`'s state, fold in what
/// `read` finds in `log` (resolved against the working directory) and hand both back with what
/// `read` returned. A failed read on the retry after a block (`active`) lets the stop through
/// (`None`), whatever became of the log; any other failure is the gate's own.
pub fn read_session<T>(
    store: &Store,
    reading: &Reading,
    session_id: &str,
    log: &Path,
    active: bool,
    read: impl FnOnce(&mut State, &Path) -> anyhow::Result<T>,
) -> anyhow::Result<Option<(Session, T)>> {
    let (mut state, slot) = store.load(reading.agent, session_id)?;
    let read = std::path::absolute(log)
        .with_context(|| format!("cannot resolve {}", log.display()))
        .and_then(|log| read(&mut state, &log));
    match read {
        Err(_) if active => Ok(None),
        Err(err) => Err(err),
        Ok(found) => Ok(Some((
            Session {
                slot,
                state,
                active,
            },
            found,
        ))),
    }
}

/// What the gate decided about one stop (or what `record` did).
pub enum Outcome {
    /// Let the agent stop; the note says why the defaults were used, when they were.
    Allow(Option<String>),
    Block(String, Answer),
}

pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn stop(
    named: AgentId,
    readers: &dyn Fn(AgentId) -> &'static dyn Reader,
) -> anyhow::Result<Outcome> {
    let started = std::time::SystemTime::now();
    crate::watchdog::phase("reading the hook input on stdin");
    let input = read_input()?;
    let agent = whose(named, &input, readers);
    let reader = readers(agent);
    crate::watchdog::phase("reading memloop.toml");
    let cwd = text_field(&input, &["cwd", "directory"])
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok());
    let settings = Settings::load(cwd.as_deref());
    let tools = ToolSets::new(&settings.gate).shell_defaults(reader.shell_tools());
    let store = Store::open()?;

    if let Some(stop) = reader.stop_id(&input) {
        crate::watchdog::phase("claiming the stop");
        if !store.claim_stop(agent.as_str(), &stop)? {
            // Another of memloop's hooks already judges this stop.
            return Ok(Outcome::Allow(settings.note));
        }
    }
    crate::watchdog::phase("reading the agent's log");
    let reading = Reading {
        agent: agent.as_str(),
        tools: &tools,
        server: &settings.server,
    };
    let Some(Session {
        slot,
        mut state,
        active,
    }) = reader.stop(&input, &store, &reading)?
    else {
        return Ok(Outcome::Allow(settings.note));
    };
    // Notes handed to the agent with a prompt were its lookup (`[gate] recall_counts_as_lookup`).
    if settings.gate.recall_counts_as_lookup && !state.session.looked_up && store.recalled(&slot) {
        state.session.looked_up = true;
        state.session.window.store_before_lookup = false;
    }
    let due = rules::not_due(&state.session, active, &settings.gate).is_none();
    // Only a window with a shell call pays for git: edits made through it are not tool calls.
    if due
        && state.session.window.shells > 0
        && let Some(dir) = cwd.as_deref()
    {
        crate::watchdog::phase("reading the worktree (git status)");
        let since = state.window_start();
        let check = state.session.checks;
        if let Some(count) = worktree::count(dir, state.worktree.as_ref(), check, since, check + 1)
        {
            state.session.window.worktree_edits = count.changed;
            state.worktree = count.keep;
        }
    }
    let verdict = rules::check(&mut state.session, active, &settings.gate, &settings.hint);
    if due {
        let since_epoch = started
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        state.checked_at_ms = u64::try_from(since_epoch.as_millis()).ok();
    }
    state.blocked_last = matches!(verdict, Verdict::Block(_));
    // Saved before answering: a block whose check was not recorded would repeat forever.
    crate::watchdog::phase("saving the gate state");
    store.save(&slot, &state)?;
    Ok(match verdict.message() {
        Some(message) => Outcome::Block(message, reader.answer()),
        None => Outcome::Allow(settings.note),
    })
}

/// The agent whose payload `input` is: `named` (`--agent`), unless another agent's reader
/// recognises it as its own (Copilot running Claude Code's Stop hook).
fn whose(
    named: AgentId,
    input: &Value,
    readers: &dyn Fn(AgentId) -> &'static dyn Reader,
) -> AgentId {
    if readers(named).recognises(input) {
        return named;
    }
    AgentId::ALL
        .into_iter()
        .find(|other| *other != named && readers(*other).recognises(input))
        .unwrap_or(named)
}

pub fn record(agent: AgentId, reader: &dyn Reader) -> anyhow::Result<Outcome> {
    let Some(record) = reader.recorder() else {
        bail!(
            "`memloop hook record` is for agents whose plugin reports each call; {agent} calls are read from its own log"
        );
    };
    crate::watchdog::phase("reading the hook input on stdin");
    let input = read_input()?;
    crate::watchdog::phase("recording the tool call");
    let store = Store::open()?;
    record(&input, &store)?;
    Ok(Outcome::Allow(None))
}

fn read_input() -> anyhow::Result<Value> {
    let mut text = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT)
        .read_to_end(&mut text)
        .context("cannot read the hook input on stdin")?;
    if text.iter().all(u8::is_ascii_whitespace) {
        bail!("no hook input on stdin; the agent passes a JSON object there");
    }
    let value: Value =
        serde_json::from_slice(&text).context("the hook input on stdin is not valid JSON")?;
    if !value.is_object() {
        bail!("the hook input on stdin is not a JSON object");
    }
    Ok(value)
}

/// The first of `keys` holding a non-empty string.
pub fn text_field(input: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .filter_map(|key| input.get(*key).and_then(Value::as_str))
        .find(|text| !text.is_empty())
        .map(str::to_owned)
}

/// A flag that is only set by `true` (or `"true"`); anything else leaves it unset.
pub fn flag_field(input: &Value, key: &str) -> bool {
    match input.get(key) {
        Some(Value::Bool(flag)) => *flag,
        Some(Value::String(text)) => text == "true",
        _ => false,
    }
}

/// The gate's settings for one stop.
struct Settings {
    gate: GateConfig,
    hint: StoreHint,
    server: String,
    /// Why the defaults were used, when `memloop.toml` exists but could not be used.
    note: Option<String>,
}

impl Settings {
    fn load(cwd: Option<&Path>) -> Settings {
        let root = cwd.and_then(config::find_root);
        let (config, note) = match root.map(|root| Config::load(&root)) {
            Some(Ok(Some(config))) => (config, None),
            Some(Err(err)) => (
                Config::default(),
                Some(format!("{err:#}; using the default gate settings")),
            ),
            _ => (Config::default(), None),
        };
        let (server, preset) = match config.server() {
            Ok(server) => (server.name, server.preset),
            Err(_) => (config.server.name.clone(), config.server.preset),
        };
        Settings {
            hint: StoreHint::new(&config.gate, &server, preset),
            gate: config.gate,
            server,
            note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_read_leniently() {
        let input = json!({"a": "", "b": "x", "c": 3, "t": true, "s": "true", "n": 1});
        assert_eq!(text_field(&input, &["a", "b"]), Some("x".into()));
        assert_eq!(text_field(&input, &["c"]), None);
        assert!(flag_field(&input, "t"));
        assert!(flag_field(&input, "s"));
        assert!(!flag_field(&input, "n"));
        assert!(!flag_field(&input, "missing"));
    }

    #[test]
    fn settings_fall_back_to_defaults_on_a_broken_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(config::FILE_NAME), "gate = [").unwrap();
        let settings = Settings::load(Some(dir.path()));
        assert_eq!(settings.gate, GateConfig::default());
        assert!(settings.note.unwrap().contains("default gate settings"));
    }

    #[test]
    fn settings_read_the_config_found_from_cwd() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(config::FILE_NAME),
            "[server]\nname = \"notes\"\n[gate]\nmin_tool_calls = 5\n",
        )
        .unwrap();
        let sub = dir.path().join("src/deep");
        std::fs::create_dir_all(&sub).unwrap();
        let settings = Settings::load(Some(&sub));
        assert_eq!(settings.gate.min_tool_calls, 5);
        assert_eq!(settings.server, "notes");
        assert!(settings.note.is_none());
    }

    #[test]
    fn the_plugin_asset_starts_with_its_version_marker() {
        assert!(OPENCODE_PLUGIN.starts_with("// memloop opencode plugin v"));
    }
}
