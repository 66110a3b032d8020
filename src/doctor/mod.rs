//! `memloop doctor`: what each agent will actually see. The doctor reads every file an agent
//! reads (not only memloop's entries in them), detects which agent version will read it, and
//! reports one finding per check.
//!
//! Rooms: `finding` (what is reported) and `format` (text, json, github), `drift` (each
//! fragment memloop owns), `instructions` (the rules each agent reads), `wiring` (the gate's
//! binary and secrets), `live` (running the real agents) and `probe` (talking MCP to the memory
//! server), `notes` (the memory's committed notes and routes). Each agent's own whole-file and live checks live with the agent
//! (`agents::<agent>::{doctor, live}`); `commands::doctor` runs them all.
//!
//! Check ids (`<group>.<check>`, stable; the same id reports `ok` when the check passes):
//! - memloop: `config`, `plan`, `drift` (files several agents read), `parse`, `agents-link`,
//!   `on-path`, `version`, `upgrade`, `notes`, `note-secrets`, `server-probe` (`--live`)
//! - every agent: `installed`, `drift`, `parse`, `instructions`, `secrets`, `live` (`--live`)
//! - claude: `settings-json`, `hooks-schema`, `hook-events`, `disable-all-hooks`, `mcp-type`,
//!   `approval`, `import`
//! - opencode: `config-json`, `twins`, `schema`, `entry-shape`, `command-array`,
//!   `plugin-origins`, `plugin-file`, `gate-duplicate`
//! - kimi: `config-toml`, `hooks`, `hooks-home`, `trust`, `transport`, `mcp-json`,
//!   `agents-md-size`
//! - gemini: `context-file`, `hooks`, `server-name`, `trust`, `session-start`
//! - kilo: `config-json`, `schema`, `entry-shape`, `plugin-file`, `gate-duplicate`
//! - pi: `extension-file`, `extension-duplicate`, `extension-version`

pub mod curl;
pub mod drift;
pub mod finding;
pub mod format;
pub mod instructions;
pub mod live;
pub mod locate;
pub mod notes;
pub mod probe;
pub mod wiring;

use std::path::PathBuf;
use std::time::Duration;

pub use finding::{AgentStatus, Drift, Finding, Group, Report, Severity, Summary};

use crate::config::AgentId;
use crate::edit::Refusal;
use crate::repo::{Context, Repo};
use crate::target::Wanted;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Also ask the real agents and probe the memory server.
    pub live: bool,
    /// An enabled agent that is not installed is an error.
    pub require_agents: bool,
    /// Per external command in `--live`.
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            live: false,
            require_agents: false,
            timeout: Duration::from_secs(20),
        }
    }
}

/// An agent program as found on PATH.
#[derive(Debug, Clone)]
pub struct Agent {
    pub id: AgentId,
    pub enabled: bool,
    pub path: Option<PathBuf>,
    /// First line of `--version`.
    pub version: Option<String>,
}

impl Agent {
    pub fn program(id: AgentId) -> &'static str {
        id.as_str()
    }

    pub fn installed(&self) -> bool {
        self.path.is_some()
    }

    /// The numbers of the version (`2.1.328 (Claude Code)` gives `[2, 1, 328]`).
    pub fn numbers(&self) -> Option<Vec<u64>> {
        self.version.as_deref().and_then(version_numbers)
    }

    /// Whether the detected version is at least `min`; `None` when no version is known.
    pub fn at_least(&self, min: &[u64]) -> Option<bool> {
        self.numbers()
            .map(|v| compare(&v, min) != std::cmp::Ordering::Less)
    }
}

/// The first dotted number in a version line.
pub fn version_numbers(text: &str) -> Option<Vec<u64>> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|word| word.contains('.') && word.starts_with(|c: char| c.is_ascii_digit()))
        .map(|word| {
            word.split('.')
                .map_while(|part| part.parse::<u64>().ok())
                .collect()
        })
}

pub fn compare(a: &[u64], b: &[u64]) -> std::cmp::Ordering {
    let len = a.len().max(b.len());
    (0..len)
        .map(|i| {
            a.get(i)
                .copied()
                .unwrap_or(0)
                .cmp(&b.get(i).copied().unwrap_or(0))
        })
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// Everything the checks share.
pub struct Doctor<'a> {
    pub repo: &'a Repo,
    /// The adapters' context, with the user's files in view (doctor only reads).
    pub ctx: Context<'a>,
    pub wanted: Wanted,
    pub agents: Vec<Agent>,
    pub options: &'a Options,
    pub report: Report,
}

impl Doctor<'_> {
    pub fn agent(&self, id: AgentId) -> &Agent {
        self.agents
            .iter()
            .find(|a| a.id == id)
            .expect("every agent is detected")
    }

    pub fn enabled(&self, id: AgentId) -> bool {
        self.ctx.enabled(id)
    }

    pub fn push(&mut self, finding: Finding) {
        self.report.push(finding);
    }

    /// A file that cannot be read or parsed: the agent drops it (or refuses to start). Reported
    /// once per file: a later, more specific check replaces the drift check's generic finding.
    pub fn refused(&mut self, group: impl Into<Group>, check: &str, refusal: &Refusal) {
        let line = refusal.line.map(|(line, _)| line);
        let position = refusal
            .line
            .map(|(_, col)| format!(" (column {col})"))
            .unwrap_or_default();
        let finding = Finding::error(group, check, format!("{}{position}", refusal.problem))
            .at(&refusal.file, line)
            .fix(refusal.hint.clone());
        let earlier = self.report.findings.iter().position(|f| {
            f.id.ends_with(".parse") && f.file == finding.file && f.line == finding.line
        });
        match earlier {
            Some(index) => self.report.findings[index] = finding,
            None => self.push(finding),
        }
    }

    /// The command that makes sync write the user's files too, when this machine has not agreed.
    pub fn sync_command(&self, user_scope: bool) -> &'static str {
        if user_scope && !self.repo.state.user_scope {
            "memloop sync --user-scope"
        } else {
            "memloop sync"
        }
    }

    /// The fix of a missing or stale per-machine trust entry: `memloop trust` writes it with the
    /// user's consent; once given, sync keeps it current (what `--fix` acts on).
    pub fn by_trust(&self, finding: Finding) -> Finding {
        if self.repo.state.trusted {
            finding.by_sync("memloop sync")
        } else {
            finding.fix("run `memloop trust` (it shows what it writes and asks first)")
        }
    }

    pub fn home(&self) -> &std::path::Path {
        &self.ctx.home
    }
}

/// Finds each agent on PATH and its version (cached per binary).
pub fn detect(ctx: &Context) -> Vec<Agent> {
    AgentId::ALL
        .into_iter()
        .map(|id| {
            let enabled = ctx.enabled(id);
            let path = enabled
                .then(|| which::which(Agent::program(id)).ok())
                .flatten();
            let version = path
                .as_ref()
                .and_then(|_| crate::detect::installed_version(Agent::program(id)));
            Agent {
                id,
                enabled,
                path,
                version,
            }
        })
        .collect()
}

/// What `memloop.toml` asks for, in one line.
pub fn config_summary(d: &mut Doctor) {
    let agents: Vec<&str> = d.repo.config.agents.iter().map(|a| a.as_str()).collect();
    let server = &d.ctx.server;
    let how = match &server.transport {
        crate::config::Transport::Http { url, .. } => format!("{url}, http"),
        crate::config::Transport::Stdio { command, args, .. } => {
            format!("{} {}, stdio", command, args.join(" ")).replace(" ,", ",")
        }
    };
    let message = format!(
        "agents {}; server `{}` ({how}); layout {}",
        agents.join(", "),
        server.name,
        d.repo.config.layout.as_str()
    );
    d.push(Finding::ok(Group::Memloop, "config", message).file(crate::config::FILE_NAME));
}

/// Whether each enabled agent is on PATH, and which version.
pub fn installed(d: &mut Doctor) {
    for agent in d.agents.clone() {
        if !agent.enabled {
            continue;
        }
        let program = Agent::program(agent.id);
        let finding = match (&agent.path, &agent.version) {
            (Some(path), Some(version)) => Finding::ok(
                agent.id,
                "installed",
                format!("{program} {version} at {}", path.display()),
            ),
            (Some(path), None) => Finding::warning(
                agent.id,
                "installed",
                format!(
                    "{program} at {} did not tell its version (`{program} --version` failed or took over 10 s); checked against the newest known format",
                    path.display()
                ),
            )
            .fix(format!("run `{program} --version` to see why")),
            (None, _) if d.options.require_agents => Finding::error(
                agent.id,
                "installed",
                format!("{program} is not on PATH, and memloop.toml enables it (--require-agents)"),
            )
            .fix(format!(
                "install {program}, or remove \"{program}\" from agents in memloop.toml"
            )),
            (None, _) => Finding::info(
                agent.id,
                "installed",
                format!(
                    "{program} is not on PATH: its committed files are checked against the newest known format; its user files and live checks are skipped"
                ),
            ),
        };
        d.push(finding);
    }
}

/// Migrations `memloop upgrade` would apply (`pending`, as `upgrade::pending` found them): files
/// written for an older agent or memloop.
pub fn upgrade(d: &mut Doctor, pending: anyhow::Result<Vec<String>>) {
    let finding = match pending {
        Ok(ids) if ids.is_empty() => Finding::ok(
            Group::Memloop,
            "upgrade",
            "no migration applies (`memloop upgrade` has nothing to do)",
        ),
        Ok(ids) => Finding::warning(
            Group::Memloop,
            "upgrade",
            format!("upgrade available: {}", ids.join(", ")),
        )
        .fix("run `memloop upgrade --dry-run` to see the changes, then `memloop upgrade`"),
        // The unreadable file is reported by its own check already.
        Err(err) => Finding::info(
            Group::Memloop,
            "upgrade",
            format!(
                "could not check for migrations: {}",
                format!("{err:#}").lines().next().unwrap_or_default()
            ),
        ),
    };
    d.push(finding);
}
