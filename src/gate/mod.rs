//! `memloop hook`: the Stop gate the agents call. The rules live in [`rules`]; each agent has a
//! thin adapter that turns its input into tool-call events.
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
//! ```
//!
//! Exit status:
//! - `0`: the agent may stop (for `record`: the call was recorded). Nothing on stdout.
//! - `2`: only for a real block. stderr holds exactly one line,
//!   `KNOWLEDGE CHECK: <problems joined by " | "> This is mandatory.`, which the agent reads.
//! - `1`: the gate itself failed (bad JSON on stdin, unreadable log, unwritable state). stderr
//!   holds one line starting with `memloop hook:` saying why. Agents treat it as non-blocking,
//!   so a broken gate never traps a session. Usage mistakes under `memloop hook` (unknown agent,
//!   stray argument) exit 1 as well, never 2.
//!
//! Loop guards: Claude Code's retry after a block arrives with `stop_hook_active` and is let
//! through; Kimi Code never sets it, so the gate lets the stop right after its own block through
//! ([`kimi`]); the OpenCode plugin sends the agent back at most 3 times in a row. The plugin
//! ([`OPENCODE_PLUGIN`]) runs `$MEMLOOP_BIN`, else `memloop` from `PATH`.
//!
//! Settings come from the `[gate]` and `[server]` sections of the `memloop.toml` found from the
//! input's `cwd` (else the process's); when there is none or it cannot be read, the defaults
//! apply and the gate still runs. State is kept per session in `$XDG_STATE_HOME/memloop/gate`
//! (default `~/.local/state/memloop/gate`, mode 0700); see [`state`].

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::config::{self, Config, GateConfig};

pub mod claude;
pub mod jsonl;
pub mod kimi;
pub mod opencode;
pub mod rules;
pub mod state;

use rules::{StoreHint, ToolSets, Verdict};
use state::Store;

/// The OpenCode plugin, written verbatim to `.opencode/plugins/memloop.js` by the installer.
/// Its first line is a version marker (`// memloop opencode plugin v<N>`).
pub const OPENCODE_PLUGIN: &str = include_str!("../../assets/opencode-plugin.js");

/// Stdin larger than this is not a hook input.
const MAX_INPUT: u64 = 16 << 20;

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
    SessionStart(crate::serve::SessionStartArgs),
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

#[derive(Debug, clap::Args)]
struct AgentArg {
    /// The agent calling: claude, kimi or opencode.
    #[arg(long, value_name = "AGENT")]
    agent: Option<String>,
    #[arg(hide = true, trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agent {
    Claude,
    Kimi,
    Opencode,
}

impl Agent {
    fn parse(arg: &AgentArg) -> anyhow::Result<Agent> {
        if let Some(extra) = arg.rest.first() {
            bail!("unexpected argument {extra:?}; usage: memloop hook stop --agent <AGENT>");
        }
        match arg.agent.as_deref() {
            Some("claude") => Ok(Agent::Claude),
            Some("kimi") => Ok(Agent::Kimi),
            Some("opencode") => Ok(Agent::Opencode),
            Some(other) => bail!("unknown agent {other:?}; use --agent claude, kimi or opencode"),
            None => bail!("missing --agent; use --agent claude, kimi or opencode"),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Kimi => "kimi",
            Agent::Opencode => opencode::AGENT,
        }
    }
}

enum Outcome {
    Allow(Option<String>),
    Block(String),
}

pub fn run(args: HookArgs) -> anyhow::Result<ExitCode> {
    let outcome = match args.command {
        Some(HookCommand::Stop(arg)) => Agent::parse(&arg).and_then(stop),
        Some(HookCommand::Record(arg)) => Agent::parse(&arg).and_then(record),
        Some(HookCommand::SessionStart(args)) => return Ok(crate::serve::session_start_hook(args)),
        Some(HookCommand::Unknown(words)) => Err(anyhow::anyhow!(
            "unknown hook command {:?}; use `memloop hook stop` or `memloop hook record`",
            words.first().map(String::as_str).unwrap_or_default()
        )),
        None => Err(anyhow::anyhow!(
            "missing hook command; use `memloop hook stop --agent <AGENT>`"
        )),
    };
    Ok(match outcome {
        Ok(Outcome::Allow(note)) => {
            if let Some(note) = note {
                eprintln!("memloop hook: {}", one_line(&note));
            }
            ExitCode::SUCCESS
        }
        Ok(Outcome::Block(message)) => {
            eprintln!("{}", one_line(&message));
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!(
                "memloop hook: {}; the stop was not blocked",
                one_line(&format!("{err:#}"))
            );
            ExitCode::from(1)
        }
    })
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn stop(agent: Agent) -> anyhow::Result<Outcome> {
    let input = read_input()?;
    let cwd = text_field(&input, &["cwd", "directory"])
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok());
    let settings = Settings::load(cwd.as_deref());
    let tools = ToolSets::new(&settings.gate);
    let store = Store::open()?;

    let name = agent.as_str();
    let (slot, mut state, active) = match agent {
        Agent::Claude => {
            let input = claude::parse_input(&input)?;
            let (mut state, slot) = store.load(name, &input.session_id)?;
            let read = std::path::absolute(&input.transcript)
                .with_context(|| format!("cannot resolve {}", input.transcript.display()))
                .and_then(|transcript| claude::collect(&mut state, &transcript, &tools));
            match read {
                // The retry after a block is let through, whatever became of the transcript.
                Err(_) if input.stop_hook_active => return Ok(Outcome::Allow(settings.note)),
                other => other?,
            }
            (slot, state, input.stop_hook_active)
        }
        Agent::Kimi => {
            let input = kimi::parse_input(&input)?;
            let logs = kimi::logs(&kimi::home()?, &input.session_id)?;
            let (mut state, slot) = store.load(name, &input.session_id)?;
            kimi::collect(&mut state, &logs, &tools)?;
            let active = input.stop_hook_active || state.blocked_last;
            (slot, state, active)
        }
        Agent::Opencode => {
            let input = opencode::parse_stop(&input)?;
            let ledger = store.ledger_path(name, &input.session_id);
            let (mut state, slot) = store.load(name, &input.session_id)?;
            opencode::collect(&mut state, &ledger, &input, &settings.server, &tools)?;
            (slot, state, input.stop_hook_active)
        }
    };
    let verdict = rules::check(&mut state.session, active, &settings.gate, &settings.hint);
    state.blocked_last = matches!(verdict, Verdict::Block(_));
    // Saved before answering: a block whose check was not recorded would repeat forever.
    store.save(&slot, &state)?;
    Ok(match verdict.message() {
        Some(message) => Outcome::Block(message),
        None => Outcome::Allow(settings.note),
    })
}

fn record(agent: Agent) -> anyhow::Result<Outcome> {
    if agent != Agent::Opencode {
        bail!(
            "`memloop hook record` is for --agent opencode; {} calls are read from its own log",
            agent.as_str()
        );
    }
    let input = read_input()?;
    let record = opencode::parse_record(&input)?;
    let store = Store::open()?;
    opencode::record(&store, &record)?;
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
fn text_field(input: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .filter_map(|key| input.get(*key).and_then(Value::as_str))
        .find(|text| !text.is_empty())
        .map(str::to_owned)
}

/// A flag that is only set by `true` (or `"true"`); anything else leaves it unset.
fn flag_field(input: &Value, key: &str) -> bool {
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
