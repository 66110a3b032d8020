//! `cargo xtask e2e [scenario|group ...] [--latest] [--versions AGENT=VERSION,...] [--repeat N]
//! [--keep] [--hand-written] [--memloop PATH] [--shared-network] [--list]`
//! (CI: `cargo xtask e2e`; the first run fills the tool cache from the npm registry).
//!
//! Drives the pinned real agents (or the registry's newest with `--latest`, or given versions) (Claude Code, OpenCode, Kimi Code, Codex, Gemini CLI, Qwen Code; installed from npm into a
//! cache on first use) against what memloop installs, each scenario in a throw-away git repo with
//! its own HOME and config dirs, and each model a scripted fake on 127.0.0.1. Nothing in a test
//! talks to any other address, and the kernel holds everyone to it: the scenarios run in a network
//! namespace where only loopback is up (`netns`). A scenario passes, fails, or is MISSING a memloop command it
//! needs (which also fails the run).

mod agents;
mod codex;
mod codex_memloop;
mod config;
mod connected;
mod copilot;
mod copilot_start;
mod copilot_worktree;
mod doctor;
mod droid;
mod fake_gemini;
mod fake_model;
mod fake_responses;
mod gate;
mod gemini_memloop;
pub mod http;
mod interactive;
mod kilo;
mod memloop;
mod netns;
mod pi;
pub mod proc;
mod qwen;
mod recall;
mod sandbox;
mod session_start;
mod session_start_kimi;
mod summary;
mod tmux;
mod tools;
mod upgrade;
mod versions;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use sandbox::Sandbox;

/// A memloop command a scenario needs does not exist (yet), as opposed to a failed check.
#[derive(Debug)]
pub struct Missing(pub String);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Missing {}

pub struct Ctx {
    pub tools: tools::Tools,
    pub memloop: PathBuf,
    pub caps: memloop::Caps,
    pub hand_written: bool,
    /// Per agent command (config checks, `mcp list`).
    pub timeout: Duration,
    /// Per gate-loop run.
    pub gate_timeout: Duration,
    /// How long the fake model takes per reply.
    pub model_latency: Duration,
    keep: bool,
}

impl Ctx {
    fn sandbox(&self, name: &str) -> Result<Sandbox> {
        let dir = self
            .memloop
            .parent()
            .context("memloop binary has no parent dir")?;
        Sandbox::new(name, &self.tools, dir, self.keep)
    }
}

type ScenarioFn = fn(&Ctx, &mut Sandbox) -> Result<()>;

struct Scenario {
    name: &'static str,
    about: &'static str,
    run: ScenarioFn,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "config-claude",
        about: "`claude mcp get memory` accepts .mcp.json (embedded server); settings hold the Stop gate",
        run: |c, s| config::claude(c, s, None),
    },
    Scenario {
        name: "config-opencode",
        about: "`opencode debug config` resolves mcp.memory to local [memloop, serve]",
        run: |c, s| config::opencode(c, s, None),
    },
    Scenario {
        name: "config-kimi",
        about: "`kimi doctor config` accepts the [[hooks]] Stop entry; .kimi-code/mcp.json shape",
        run: |c, s| config::kimi(c, s, None),
    },
    Scenario {
        name: "config-remote-claude",
        about: "as config-claude with `--url http://127.0.0.1:9/mcp`",
        run: |c, s| config::claude(c, s, Some(config::REMOTE_URL)),
    },
    Scenario {
        name: "config-remote-opencode",
        about: "as config-opencode with `--url http://127.0.0.1:9/mcp` (type remote)",
        run: |c, s| config::opencode(c, s, Some(config::REMOTE_URL)),
    },
    Scenario {
        name: "config-remote-kimi",
        about: "as config-kimi with `--url http://127.0.0.1:9/mcp` (transport http)",
        run: |c, s| config::kimi(c, s, Some(config::REMOTE_URL)),
    },
    Scenario {
        name: "connected-claude",
        about: "`claude mcp list` shows `memory` (memloop serve) connected",
        run: connected::claude,
    },
    Scenario {
        name: "connected-opencode",
        about: "`opencode mcp list` shows `memory` (memloop serve) connected",
        run: connected::opencode,
    },
    Scenario {
        name: "connected-kimi",
        about: "`kimi -p` offers the model mcp__memory__memory_store (trusted workspace)",
        run: connected::kimi,
    },
    Scenario {
        name: "gate-claude",
        about: "Claude Code edits, the Stop gate sends it back, it stores over MCP, the next stop passes",
        run: gate::claude,
    },
    Scenario {
        name: "gate-claude-unknown-keys",
        about: "as gate-claude with unknown keys in memloop's Stop group and handler: Claude Code ignores them and the gate still runs",
        run: gate::claude_unknown_keys,
    },
    Scenario {
        name: "gate-claude-approved-tools",
        about: "as gate-claude in --permission-mode acceptEdits: the lookup and the store run without a question only through the permissions.allow entries memloop wrote for its own two tools",
        run: gate::claude_approved_tools,
    },
    Scenario {
        name: "gate-opencode",
        about: "OpenCode (serve) edits, the plugin sends it back, it stores over MCP, then idles",
        run: gate::opencode,
    },
    Scenario {
        name: "gate-opencode-run",
        about: "one-shot `opencode run` edits, the plugin sends it back before the run exits, it stores over MCP",
        run: gate::opencode_run,
    },
    Scenario {
        name: "gate-kimi",
        about: "Kimi Code edits, the [[hooks]] Stop gate sends it back, it stores over MCP",
        run: gate::kimi,
    },
    Scenario {
        name: "config-kilo",
        about: "memloop init --agents kilo: `kilo debug config` resolves mcp.memory from kilo.json as memloop wrote it, and Kilo leaves the file as it is on load",
        run: kilo::config,
    },
    Scenario {
        name: "connected-kilo",
        about: "`kilo mcp list` shows `memory` (memloop serve) connected, once",
        run: kilo::connected,
    },
    Scenario {
        name: "gate-kilo",
        about: "Kilo (serve) looks up, writes three files, the plugin sends it back, it stores over MCP, then idles",
        run: kilo::gate_serve,
    },
    Scenario {
        name: "gate-kilo-run",
        about: "one-shot `kilo run` writes, the plugin sends it back before the run exits, it stores over MCP",
        run: kilo::gate_run,
    },
    Scenario {
        name: "session-start-kilo",
        about: "a stored note is in the system prompt of the first model request of `kilo run` (memloop's plugin)",
        run: kilo::session_start,
    },
    Scenario {
        name: "gate-kilo-with-opencode",
        about: "OpenCode and Kilo enabled: the server is written once (root opencode.json), each lists it once connected, each loads only its own plugin and a one-shot run of each is sent back once and stores",
        run: kilo::with_opencode,
    },
    Scenario {
        name: "config-droid",
        about: "memloop init --agents droid: `droid mcp list` lists memory from .factory/mcp.json, `memloop doctor --live` is all ok, `droid exec` runs the SessionStart hook from .factory/settings.json and leaves both files as written; uninstall takes them back",
        run: droid::config,
    },
    Scenario {
        name: "connected-droid",
        about: "`droid mcp list` shows `memory` connected, once; `droid exec` loads memory___memory_store, the rules reach the model and the call reaches memloop serve",
        run: droid::connected,
    },
    Scenario {
        name: "gate-droid",
        about: "`droid exec` writes three files with Create, the Stop gate reads the transcript and sends it back (decision: block), it looks up and stores over MCP, the next stop passes",
        run: droid::gate,
    },
    Scenario {
        name: "session-start-droid",
        about: "a stored note is in the first model request of `droid exec` (SessionStart additionalContext)",
        run: droid::session_start,
    },
    Scenario {
        name: "recall-droid",
        about: "as recall-claude in one `droid exec --input-format stream-jsonrpc` session (three droid.add_user_message): the UserPromptSubmit hook's additionalContext",
        run: droid::recall,
    },
    Scenario {
        name: "config-pi",
        about: "memloop init --agents pi: `pi -p` loads .pi/extensions/memloop.js (memory_store and context_query offered beside Pi's own tools) and AGENTS.md's rules; doctor --live sees it through `pi --mode rpc`; memloop uninstall leaves the repository as before",
        run: pi::config,
    },
    Scenario {
        name: "connected-pi",
        about: "`pi -p` offers memory_store (the extension's, from memloop serve's tool list) and the call stores a note",
        run: pi::connected,
    },
    Scenario {
        name: "gate-pi",
        about: "one-shot `pi -p` writes three files, the extension's agent_end gate sends it back with sendUserMessage before Pi exits, it looks up and stores, the next stop passes",
        run: pi::gate,
    },
    Scenario {
        name: "gate-pi-rpc",
        about: "a Pi that keeps running (`pi --mode rpc`): one prompt writes three files, the extension's agent_end gate sends it back, it looks up and stores, and the session rests",
        run: pi::gate_rpc,
    },
    Scenario {
        name: "session-start-pi",
        about: "a stored note is in the system prompt of the first model request of `pi -p` (memloop's extension, before_agent_start), once",
        run: pi::session_start,
    },
    Scenario {
        name: "recall-pi",
        about: "three prompts of one Pi session (pi -p, then -c): memloop's extension gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: pi::recall,
    },
    Scenario {
        name: "doctor-live",
        about: "`memloop doctor --live` on a correct install: claude mcp get, opencode debug config, kimi doctor config, codex mcp list --json, features list and app-server hooks/list (all three memloop hooks trusted), gemini mcp list, qwen mcp list, copilot mcp list and instruction list, and the server probe all ok; then memloop's Codex Stop handler edited: Codex reports it modified and doctor says so",
        run: doctor::live,
    },
    Scenario {
        name: "upgrade-legacy",
        about: "legacy shapes for all five agents, `memloop upgrade`, then claude mcp get / opencode debug config / kimi doctor config / codex features list and mcp list / gemini mcp list and kimi -p accept the result",
        run: upgrade::legacy,
    },
    Scenario {
        name: "config-codex",
        about: "memloop init: untrusted without consent (mcp list []); after sync --user-scope codex lists the server and hooks/list trusts the Stop hook by memloop's hash; uninstall restores the user config",
        run: codex_memloop::config,
    },
    Scenario {
        name: "connected-codex",
        about: "`codex exec` offers mcp__memory/memory_store from memloop's .codex/config.toml and the call reaches memloop serve",
        run: codex_memloop::connected,
    },
    Scenario {
        name: "gate-codex",
        about: "Codex edits through exec_command, memloop's gate sends it back, it stores over MCP, the next stop passes",
        run: codex_memloop::gate,
    },
    Scenario {
        name: "config-qwen",
        about: "memloop init: qwen mcp list shows the server pending approval; after memloop trust --yes it connects (memloop's hash is Qwen's); folder trust turned on: untrusted until sync (trust given) trusts it; uninstall restores the user files",
        run: qwen::config,
    },
    Scenario {
        name: "connected-qwen",
        about: "`qwen -p` offers mcp__memory__memory_store directly, AGENTS.md's rules reach the model, and the call reaches memloop serve",
        run: qwen::connected,
    },
    Scenario {
        name: "gate-qwen",
        about: "Qwen writes three files with write_file, memloop's gate reads its chat recording and sends it back, it stores over MCP, the next stop passes",
        run: qwen::gate,
    },
    Scenario {
        name: "gate-qwen-approved-tools",
        about: "as gate-qwen in --approval-mode auto-edit: the lookup and the store run without a question only through the permissions.allow entries memloop wrote for its own two tools",
        run: qwen::gate_approved_tools,
    },
    Scenario {
        name: "config-gemini",
        about: "memloop init: untrusted without memloop trust (gemini mcp list shows memory disabled); after memloop trust --yes it connects to memloop serve; uninstall leaves no trust entry",
        run: gemini_memloop::config,
    },
    Scenario {
        name: "connected-gemini",
        about: "`gemini -p` offers mcp_memory_memory_store, its context holds the rules from AGENTS.md, and the call reaches memloop serve",
        run: gemini_memloop::connected,
    },
    Scenario {
        name: "gate-gemini",
        about: "Gemini writes files, memloop's AfterAgent gate sends it back, it looks up and stores over MCP, the next stop passes",
        run: gemini_memloop::gate,
    },
    Scenario {
        name: "gate-gemini-approved-tools",
        about: "as gate-gemini in --approval-mode auto_edit: the lookup and the store run without a question only through the tools.allowed entries memloop wrote for its own two tools",
        run: gemini_memloop::gate_approved_tools,
    },
    Scenario {
        name: "config-copilot",
        about: "memloop init: untrusted without consent (no workspace server); after memloop trust --yes copilot mcp list loads memory from .mcp.json, instruction list reads the rules once, doctor --live agrees; uninstall removes the trust",
        run: copilot::config,
    },
    Scenario {
        name: "connected-copilot",
        about: "`copilot -p` offers memory-memory_store from the shared .mcp.json and the call reaches memloop serve",
        run: copilot::connected,
    },
    Scenario {
        name: "connected-copilot-approved-tools",
        about: "`copilot -p` without --allow-all: the lookup and the store run only through the location approvals memloop trust wrote into permissions-config.json for its own two tools",
        run: copilot::approved_tools,
    },
    Scenario {
        name: "gate-copilot",
        about: "Copilot writes with create, memloop's agentStop gate blocks on stdout, it stores over MCP, the next stop passes",
        run: |c, s| copilot::gate(c, s, copilot::Hooks::Own),
    },
    Scenario {
        name: "gate-copilot-claude-hook",
        about: "Claude Code and Copilot set up, Copilot's own hook removed: Copilot runs Claude's Stop hook, the gate takes it for Copilot's and answers Copilot's way, once",
        run: |c, s| copilot::gate(c, s, copilot::Hooks::ClaudeOnly),
    },
    Scenario {
        name: "gate-copilot-both-hooks",
        about: "Claude Code and Copilot set up: Copilot runs both memloop hooks for each stop, and the gate gives exactly one verdict",
        run: |c, s| copilot::gate(c, s, copilot::Hooks::Both),
    },
    Scenario {
        name: "session-start-copilot",
        about: "a stored note is in Copilot's first model request: memloop's sessionStart hook (additionalContext) opens the session with the index as its first user message",
        run: |c, s| copilot_start::session_start(c, s, "copilot"),
    },
    Scenario {
        name: "session-start-copilot-with-claude",
        about: "Claude Code and Copilot set up: Copilot runs Claude's SessionStart hook too, and its first model request holds the index once",
        run: |c, s| copilot_start::session_start(c, s, "claude,copilot"),
    },
    Scenario {
        name: "probe-copilot-trust",
        about: "which trustedFolders entries make Copilot load the repository's server: the folder, a trailing slash, a parent, a name that only starts the same, a symlink, the key in settings.json, a run from a symlink",
        run: copilot_start::probe_trust,
    },
    Scenario {
        name: "session-start-copilot-compaction",
        about: "Copilot's background compaction forced during a -p turn: memloop's preCompact hook leaves its note, the index is gone after the summary, and the session's next prompt (--resume) has it again in its first request, once",
        run: copilot_start::probe_compaction,
    },
    Scenario {
        name: "probe-copilot-session-start",
        about: "hand-written Copilot hooks (sessionStart in three output shapes, userPromptSubmitted) print markers: which reach the first model request, and where",
        run: copilot_start::probe,
    },
    Scenario {
        name: "recall-claude",
        about: "three prompts in one Claude Code session: a nonsense one gets no note, one matching a stored note has the note's full text in its request (UserPromptSubmit additionalContext), a second matching one does not get it again",
        run: recall::claude,
    },
    Scenario {
        name: "recall-kimi",
        about: "three prompts of one Kimi Code session (kimi -p, then -c): memloop's UserPromptSubmit hook gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::kimi,
    },
    Scenario {
        name: "recall-copilot",
        about: "three prompts of one Copilot CLI session (copilot -p, then --resume): memloop's userPromptSubmitted hook gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::copilot,
    },
    Scenario {
        name: "recall-qwen",
        about: "three prompts in one Qwen Code process (stream-json): memloop's UserPromptSubmit hook gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::qwen,
    },
    Scenario {
        name: "recall-gemini",
        about: "three prompts of one Gemini CLI session (gemini -p, then --resume latest): memloop's BeforeAgent hook gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::gemini,
    },
    Scenario {
        name: "recall-codex",
        about: "three prompts of one Codex CLI session (codex exec, then exec resume --last): memloop's UserPromptSubmit hook, trusted by memloop's hash in hooks/list, gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::codex,
    },
    Scenario {
        name: "recall-opencode",
        about: "three one-shot `opencode run` calls of one session (--continue after the first): memloop's plugin (chat.message) gives no note for a nonsense prompt, the note's full text with one that matches it, not again with a second one",
        run: recall::opencode,
    },
    Scenario {
        name: "recall-kilo",
        about: "as recall-opencode with `kilo run` (memloop's plugin for Kilo, --agent kilo)",
        run: recall::kilo,
    },
    Scenario {
        name: "session-start-claude",
        about: "a stored note is in Claude Code's first model request (SessionStart additionalContext); /compact sends the PreCompact reminder to the summary and the next request holds the index again",
        run: session_start::claude,
    },
    Scenario {
        name: "session-start-opencode",
        about: "a stored note is in the system prompt of OpenCode's first model request (memloop's plugin); after POST /session/:id/summarize (the reminder in the summary's prompt) the next request holds the index again",
        run: session_start::opencode,
    },
    Scenario {
        name: "session-start-kimi",
        about: "a stored note is in Kimi Code's first model request (memloop's UserPromptSubmit hook), not given again on the session's second prompt; after an automatic compaction (PreCompact notes it) the next prompt's request holds the index again",
        run: session_start_kimi::run,
    },
    Scenario {
        name: "session-start-codex",
        about: "a stored note is in the first request `codex exec` sends (memloop's SessionStart hook, trusted by the hash memloop wrote, per hooks/list), and again in the first request after an auto-compaction mid-turn",
        run: codex_memloop::session_start,
    },
    Scenario {
        name: "session-start-gemini",
        about: "a stored note is in the first request `gemini -p` sends (memloop's SessionStart hook, additionalContext put before the prompt in <hook_context>)",
        run: gemini_memloop::session_start,
    },
    Scenario {
        name: "session-start-qwen",
        about: "a stored note is in the system instruction of Qwen's first request (SessionStart additionalContext); /compress carries the PreCompact reminder to the summary, SessionStart runs with source compact, and the next request holds the index again",
        run: session_start::qwen,
    },
    Scenario {
        name: "interactive-claude",
        about: "Claude Code's own UI in tmux, --permission-mode default (the mode that asks): the index in the first request, edits asked and answered, the gate sends it back, the lookup and the store run with no question on screen, the turn ends, no failed hook shown",
        run: interactive::claude,
    },
    Scenario {
        name: "interactive-claude-unapproved",
        about: "as interactive-claude with [memory] approve_tools = false: Claude Code must ask before the lookup (the question detector sees it)",
        run: interactive::claude_unapproved,
    },
    Scenario {
        name: "interactive-gemini",
        about: "Gemini CLI's own UI in tmux, default approval mode: the index in the first request, edits asked and answered, the gate sends it back, the lookup and the store run with no question on screen, the turn ends, no failed hook shown",
        run: interactive::gemini,
    },
    Scenario {
        name: "interactive-gemini-unapproved",
        about: "as interactive-gemini with [memory] approve_tools = false: Gemini CLI must ask before the lookup (the question detector sees it)",
        run: interactive::gemini_unapproved,
    },
    Scenario {
        name: "interactive-qwen",
        about: "Qwen Code's own UI in tmux, default approval mode: the index in the first request, edits asked and answered, the gate sends it back, the lookup and the store run with no question on screen, the turn ends, no failed hook shown",
        run: interactive::qwen,
    },
    Scenario {
        name: "interactive-qwen-unapproved",
        about: "as interactive-qwen with [memory] approve_tools = false: Qwen Code must ask before the lookup (the question detector sees it)",
        run: interactive::qwen_unapproved,
    },
    Scenario {
        name: "connected-copilot-approved-tools-worktree",
        about: "as connected-copilot-approved-tools, installed and trusted in a linked git worktree: the approvals sit under the key Copilot looks up there",
        run: copilot_worktree::approved_tools,
    },
    // Probes of Codex itself with hand-written files (the facts the adapter rests on, such as a
    // stale hash reported as modified and a hook blocking with exit 2); xtask/src/e2e/codex.rs.
    Scenario {
        name: "probe-codex-config",
        about: "`codex mcp list --json` shows the project server only once trusted; hooks/list trusts the Stop hook by our hash",
        run: codex::probe_config,
    },
    Scenario {
        name: "probe-codex-mcp",
        about: "`codex exec` offers mcp__memory/memory_store and the call reaches memloop serve",
        run: codex::probe_mcp,
    },
    Scenario {
        name: "probe-codex-gate",
        about: "Codex edits via exec_command, a trusted Stop hook blocks once (JSON decision), it stores over MCP, the retry passes",
        run: |c, s| codex::probe_gate(c, s, codex::Block::Json),
    },
    Scenario {
        name: "probe-codex-gate-exit2",
        about: "as probe-codex-gate, the hook blocking with exit 2 and the reason on stderr",
        run: |c, s| codex::probe_gate(c, s, codex::Block::Exit2),
    },
];

const USAGE: &str =
    "usage: cargo xtask e2e [SCENARIO|GROUP ...] [--latest] [--versions AGENT=VERSION,...]
                      [--keep] [--hand-written] [--memloop PATH] [--repeat N] [--timeout SECS]
                      [--model-latency-ms MS] [--shared-network] [--list]

  SCENARIO    a name from --list; GROUP selects several: config, connected, gate, remote, or an
              agent key (claude, opencode, kimi, codex, ...) (no names: run everything)
  --latest          every agent at the npm registry's newest version (`npm view PKG version`),
                    installed next to the pins in the cache; a scenario that fails there and drives
                    an agent not at its pin is run again on the pins, and the summary puts both
                    results side by side
  --versions AGENT=VERSION,...  these agents at these versions (VERSION: x.y.z[-pre] or latest),
                    the others at their pin (or the newest with --latest): one command per step
                    of a bisection, e.g. --versions claude=2.1.330,codex=0.171.0
  --repeat N        run each selected scenario N times in a row (each in a fresh sandbox); the
                    summary gives passes per scenario, and any failed run fails the whole
  --keep            keep every sandbox (failed ones are always kept)
  --hand-written    without `memloop init`, write the documented file shapes by hand (checks the
                    harness and the agents, not memloop's installer)
  --memloop PATH    test this memloop binary instead of building the workspace's
  --timeout SECS    per agent command (default 60; gate runs get 4x)
  --model-latency-ms MS  how long each fake model reply takes (default 0: the gate must keep up
                    with Claude Code running the Stop hook before its transcript is complete)
  --shared-network  run the scenarios on this machine's network instead of a network namespace
                    where only loopback is up (the default, where the kernel allows one)
  --list            list the scenarios

env: MEMLOOP_E2E_CACHE overrides the tool cache (default ${XDG_CACHE_HOME:-~/.cache}/memloop-e2e)";

pub fn run(args: &[String]) -> Result<()> {
    if args.first().map(String::as_str) == Some(netns::PROBE_ARG) {
        netns::probe();
    }
    let mut selected = Vec::new();
    let mut keep = false;
    let mut shared_network = false;
    let mut hand_written = false;
    let mut memloop_bin = None;
    let mut timeout = Duration::from_secs(60);
    let mut model_latency = Duration::ZERO;
    let mut repeat = 1usize;
    let mut latest = false;
    let mut wanted = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--keep" => keep = true,
            "--shared-network" => shared_network = true,
            "--latest" => latest = true,
            "--versions" => {
                let spec = it
                    .next()
                    .context("--versions needs AGENT=VERSION[,AGENT=VERSION...]")?;
                wanted.extend(versions::parse(spec)?);
            }
            "--hand-written" => hand_written = true,
            "--memloop" => {
                memloop_bin = Some(PathBuf::from(it.next().context("--memloop needs a path")?))
            }
            "--timeout" => {
                let secs: u64 = it
                    .next()
                    .context("--timeout needs seconds")?
                    .parse()
                    .context("--timeout takes whole seconds")?;
                timeout = Duration::from_secs(secs);
            }
            "--repeat" => {
                repeat = it
                    .next()
                    .context("--repeat needs a number of runs")?
                    .parse()
                    .context("--repeat takes a whole number")?;
                if repeat == 0 {
                    bail!("--repeat must be at least 1");
                }
            }
            "--model-latency-ms" => {
                let ms: u64 = it
                    .next()
                    .context("--model-latency-ms needs milliseconds")?
                    .parse()
                    .context("--model-latency-ms takes whole milliseconds")?;
                model_latency = Duration::from_millis(ms);
            }
            "--list" => {
                for s in SCENARIOS {
                    println!("{:<24} {}", s.name, s.about);
                }
                return Ok(());
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with('-') => bail!("unknown option {flag}\n{USAGE}"),
            name => selected.push(name.to_string()),
        }
    }
    let scenarios: Vec<&Scenario> = SCENARIOS
        .iter()
        .filter(|s| selected.is_empty() || selected.iter().any(|sel| matches(s.name, sel)))
        .collect();
    if scenarios.is_empty() {
        bail!("no scenario matches {selected:?}; see `cargo xtask e2e --list`");
    }

    for (i, (agent, _)) in wanted.iter().enumerate() {
        if wanted[..i].iter().any(|(a, _)| a.key == agent.key) {
            bail!("--versions: {} is named twice", agent.key);
        }
    }

    let started = Instant::now();
    let set = versions::resolve(latest, &wanted, &|agent| {
        let version = tools::registry_version(agent.pin.package, "latest")?;
        println!(
            "e2e: newest {} in the registry: {version} (pinned {})",
            agent.pin.package, agent.pin.version
        );
        Ok(version)
    })?;
    let tools = tools::ensure(&set)?;
    let memloop = match memloop_bin {
        Some(p) => p
            .canonicalize()
            .with_context(|| format!("--memloop {}", p.display()))?,
        None => memloop::build()?,
    };
    if shared_network {
        println!("e2e: --shared-network: the scenarios share this machine's network");
    } else {
        // A failure on a moved agent is run again on the pins, from inside the namespace.
        tools::ensure(&versions::VersionSet::pinned())?;
        match netns::enter().map_err(|err| anyhow::anyhow!("e2e: network namespace: {err}"))? {
            netns::Isolation::Loopback => {
                println!("e2e: in a network namespace of its own: only 127.0.0.1 is reachable")
            }
            netns::Isolation::Unavailable(why) => println!(
                "e2e: no network namespace ({why}); loopback only is not enforced in this run"
            ),
        }
    }
    let mut ctx = Ctx {
        tools,
        memloop,
        caps: memloop::Caps {
            init: Err("not probed".into()),
            serve: Err("not probed".into()),
            hook: Err("not probed".into()),
        },
        hand_written,
        timeout,
        gate_timeout: timeout * 4,
        model_latency,
        keep,
    };
    {
        let probe_box = ctx.sandbox("probe")?;
        ctx.caps = memloop::probe(&probe_box);
    }
    println!("e2e: testing {}", ctx.memloop.display());
    println!("     {}", ctx.caps.summary());
    println!(
        "     agents: {} on node {}",
        set.describe(),
        tools::NODE.version
    );

    let mut outcomes: Vec<summary::Outcome> = scenarios
        .iter()
        .map(|scenario| summary::Outcome::new(run_scenario(&ctx, scenario, repeat, ""), &set))
        .collect();

    // The pins' result next to each failure on a newer version: run again on the pins only what
    // failed and drives a moved agent (a scenario whose agents are all at their pin has just
    // given the pins' result).
    if outcomes.iter().any(summary::Outcome::needs_pinned_run) {
        println!("\n== again on the pinned versions, what failed on the others");
        ctx.tools = tools::ensure(&versions::VersionSet::pinned())?;
        for (outcome, scenario) in outcomes.iter_mut().zip(&scenarios) {
            if outcome.needs_pinned_run() {
                outcome.on_pins = Some(run_scenario(&ctx, scenario, repeat, "-pinned"));
            }
        }
    }

    println!();
    for line in summary::lines(
        &set,
        tools::NODE.version,
        &outcomes,
        repeat,
        started.elapsed(),
    ) {
        println!("{line}");
    }
    let bad = outcomes.iter().filter(|o| !o.tally.passed()).count();
    if bad > 0 {
        bail!(
            "{bad} of {} e2e scenarios did not pass on {}",
            outcomes.len(),
            set.describe()
        );
    }
    Ok(())
}

/// `scenario` `repeat` times on the versions behind `ctx.tools`, each run in a fresh sandbox
/// (named after the scenario, plus `suffix`).
fn run_scenario(ctx: &Ctx, scenario: &Scenario, repeat: usize, suffix: &str) -> summary::Tally {
    let mut tally = summary::Tally::new(scenario.name);
    for run in 1..=repeat {
        match repeat {
            1 => println!("\n== {}{suffix} -- {}", scenario.name, scenario.about),
            _ => println!(
                "\n== {}{suffix} (run {run}/{repeat}) -- {}",
                scenario.name, scenario.about
            ),
        }
        let t0 = Instant::now();
        let name = match repeat {
            1 => format!("{}{suffix}", scenario.name),
            _ => format!("{}{suffix}-run{run}", scenario.name),
        };
        let outcome = match ctx.sandbox(&name) {
            Ok(mut sb) => {
                let result = (scenario.run)(ctx, &mut sb);
                if result.is_err() {
                    sb.keep();
                }
                result
            }
            Err(err) => Err(err),
        };
        let elapsed = t0.elapsed();
        tally.runs += 1;
        tally.elapsed += elapsed;
        match &outcome {
            Ok(()) => {
                tally.passes += 1;
                println!("   PASS ({elapsed:.1?})");
            }
            Err(err) => {
                let missing = err.downcast_ref::<Missing>().is_some();
                tally.missing |= missing;
                let status = if missing { "MISSING" } else { "FAIL" };
                println!("   {status} ({elapsed:.1?}): {err:#}");
            }
        }
        // A missing command stays missing: repeating it proves nothing.
        if tally.missing {
            break;
        }
    }
    tally
}

/// `config-remote-kimi` is selected by its name and by `config`, `remote`, `kimi`.
fn matches(name: &str, sel: &str) -> bool {
    name == sel || name.split('-').any(|part| part == sel)
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_select_by_name_part() {
        assert!(super::matches("config-remote-kimi", "kimi"));
        assert!(super::matches("config-remote-kimi", "remote"));
        assert!(super::matches("gate-claude", "gate-claude"));
        assert!(!super::matches("gate-claude", "gate-c"));
    }
}
