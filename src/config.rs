//! `memloop.toml`: the desired state every command reads.
//!
//! Parsing is strict: an unknown key or a wrong type is an error that names the file position,
//! the key and the nearest valid key. Secrets never live here: header and environment values may
//! only reference environment variables.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::secrets::Syntax;

pub const FILE_NAME: &str = "memloop.toml";
/// The schema version of `memloop.toml` this build writes and reads.
pub const CONFIG_VERSION: u32 = 1;
pub const CONVOPS_URL: &str = "https://mcp.convops.app/";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Schema version of this file; written by `memloop init`.
    #[serde(default = "default_version")]
    pub version: u32,
    /// The agents memloop sets up.
    #[serde(default = "default_agents")]
    pub agents: Vec<AgentId>,
    /// How `AGENTS.md` shares the rules with `CLAUDE.md`.
    #[serde(default)]
    pub layout: Layout,
    /// The memory server every agent is pointed at.
    #[serde(default)]
    pub server: ServerConfig,
    /// Thresholds and tool names of the Stop gate.
    #[serde(default)]
    pub gate: GateConfig,
    /// What a new session is told about the repository's memory.
    #[serde(default, skip_serializing_if = "MemoryConfig::is_default")]
    pub memory: MemoryConfig,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentId {
    Claude,
    Opencode,
    Kimi,
    Codex,
    Gemini,
    Qwen,
    Copilot,
    Kilo,
    Droid,
    Pi,
}

impl AgentId {
    pub const ALL: [AgentId; 10] = [
        AgentId::Claude,
        AgentId::Opencode,
        AgentId::Kimi,
        AgentId::Codex,
        AgentId::Gemini,
        AgentId::Qwen,
        AgentId::Copilot,
        AgentId::Kilo,
        AgentId::Droid,
        AgentId::Pi,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentId::Claude => "claude",
            AgentId::Opencode => "opencode",
            AgentId::Kimi => "kimi",
            AgentId::Codex => "codex",
            AgentId::Gemini => "gemini",
            AgentId::Qwen => "qwen",
            AgentId::Copilot => "copilot",
            AgentId::Kilo => "kilo",
            AgentId::Droid => "droid",
            AgentId::Pi => "pi",
        }
    }

    /// The program's name as its makers write it, for texts a person reads (`--help`, the
    /// GitHub Action, the npm package; `tests/agent_names.rs` checks that they name every agent).
    pub fn name(self) -> &'static str {
        match self {
            AgentId::Claude => "Claude Code",
            AgentId::Opencode => "OpenCode",
            AgentId::Kimi => "Kimi Code",
            AgentId::Codex => "Codex CLI",
            AgentId::Gemini => "Gemini CLI",
            AgentId::Qwen => "Qwen Code",
            AgentId::Copilot => "Copilot CLI",
            AgentId::Kilo => "Kilo Code CLI",
            AgentId::Droid => "Factory Droid",
            AgentId::Pi => "Pi",
        }
    }

    /// Every agent's name, for a message: `claude, opencode or kimi`.
    pub fn choices() -> String {
        let names: Vec<&str> = AgentId::ALL.iter().map(|a| a.as_str()).collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    pub fn parse(text: &str) -> Option<AgentId> {
        AgentId::ALL
            .into_iter()
            .find(|agent| agent.as_str() == text)
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `AGENTS.md` is a symlink to `CLAUDE.md` (falls back to `import` where links fail).
    #[default]
    Symlink,
    /// `AGENTS.md` holds the rules; `CLAUDE.md` imports it with `@AGENTS.md`.
    Import,
    /// Both files hold their own copy of the managed block.
    Copy,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Symlink => "symlink",
            Layout::Import => "import",
            Layout::Copy => "copy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// The hosted ConvOps memory service (`https://mcp.convops.app/`, http).
    Convops,
}

/// The memory server as written in the file. Exactly one of `preset`, `url` or `command`
/// decides the transport; with none of them, the embedded `memloop serve` is used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Name of the server in every agent's MCP config (letters, digits, `-`, `_`).
    #[serde(default = "default_server_name")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
    /// Remote server (transport http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Local server (transport stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// HTTP headers; values reference environment variables, e.g. `"Bearer ${MEMORY_TOKEN}"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Environment of a stdio server; values reference environment variables, e.g. `"${HOME}"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            name: default_server_name(),
            preset: None,
            url: None,
            command: None,
            args: Vec::new(),
            headers: BTreeMap::new(),
            env: BTreeMap::new(),
        }
    }
}

/// The Stop gate's rules (see DESIGN.md "The gate").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Sessions with fewer tool calls than this are let through.
    #[serde(default = "default_min_tool_calls")]
    pub min_tool_calls: u32,
    /// Assistant entries that must arrive between two checks.
    #[serde(default = "default_interval")]
    pub interval: u32,
    /// Tool names that edit files (exact match).
    #[serde(default = "default_edit_tools")]
    pub edit_tools: Vec<String>,
    /// A tool whose name contains one of these stores a note.
    #[serde(default = "default_store_tools")]
    pub store_tools: Vec<String>,
    /// A tool whose name contains one of these looks the memory up.
    #[serde(default = "default_lookup_tools")]
    pub lookup_tools: Vec<String>,
    /// Shell-like tool names (exact match). When a check's window holds one, the files changed
    /// in the git worktree since the previous check count as edits. Unset: each agent's own
    /// (Claude Code `Bash`; OpenCode `bash`; Kimi Code `Bash`, `Shell`); `[]` turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_tools: Option<Vec<String>>,
    /// A prompt for which memloop's prompt hook handed the agent matching notes counts as the
    /// lookup for that turn, so an agent given its memory is not sent back to query it. The
    /// store rule is unchanged.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub recall_counts_as_lookup: bool,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            min_tool_calls: default_min_tool_calls(),
            interval: default_interval(),
            edit_tools: default_edit_tools(),
            store_tools: default_store_tools(),
            lookup_tools: default_lookup_tools(),
            shell_tools: None,
            recall_counts_as_lookup: true,
        }
    }
}

/// The memory index each session starts with (see DESIGN.md "Memory at session start").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Hard cap of the session-start text in bytes: whole lines only, and what did not fit is
    /// counted in a closing line inside the cap.
    #[serde(default = "default_index_bytes")]
    #[schemars(range(min = 512, max = 10000))]
    pub index_bytes: u32,
    /// Give each new session the index (or, with a remote server, the lookup reminder), and a
    /// reminder before a compaction. false: sync removes the SessionStart and PreCompact hooks
    /// memloop installed.
    #[serde(default = "default_true")]
    pub session_start: bool,
    /// Let the agents run the embedded memory server's two tools, `context_query` (a read of
    /// the notes) and `memory_store` (a write under `.memloop/memory/`), without asking each
    /// time, where the agent can be told so for single tools (Claude Code's and Qwen Code's
    /// `permissions.allow`, Gemini CLI's `tools.allowed`, Copilot CLI's location approvals
    /// written with `memloop trust`).
    /// Nothing else is ever approved. false: sync takes the approvals back out.
    #[serde(default = "default_true")]
    pub approve_tools: bool,
    /// Hand the agent the notes that match each prompt, with the prompt (the prompt hook).
    /// false: sync removes the prompt hooks memloop installed for it (where the same hook also
    /// carries the session start, it stays and only stops giving notes).
    #[serde(default = "default_true")]
    pub recall: bool,
    /// Hard cap of what one prompt is given, in bytes: whole notes, or a note cut at a line end
    /// with a cut mark, never a broken line.
    #[serde(default = "default_recall_bytes")]
    #[schemars(range(min = 256, max = 10000))]
    pub recall_bytes: u32,
    /// Budget of the notes in bytes: all notes' files together (forgotten ones do not count). A
    /// store that would pass it is refused, naming the notes to consolidate or forget; nothing
    /// stored is cut.
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 4096, max = 1073741824u64))]
    pub max_bytes: u64,
    /// Cap of one note's file in bytes, front matter included; a longer note is refused.
    #[serde(default = "default_max_note_bytes")]
    #[schemars(range(min = 512, max = 65536))]
    pub max_note_bytes: u64,
}

impl MemoryConfig {
    /// Claude Code cuts hook output past 10,000 characters; below 512 bytes the rule line and a few index lines barely fit.
    pub const INDEX_BYTES: std::ops::RangeInclusive<u32> = 512..=10_000;
    /// Below 256 bytes not even one short note with its id and file fits.
    pub const RECALL_BYTES: std::ops::RangeInclusive<u32> = 256..=10_000;
    /// Below 4 KiB a handful of notes fills it; past 1 GiB it limits nothing.
    pub const MAX_BYTES: std::ops::RangeInclusive<u64> = 4096..=1 << 30;
    /// Below 512 bytes the front matter and one sentence barely fit; past 64 KiB a note is a
    /// document.
    pub const MAX_NOTE_BYTES: std::ops::RangeInclusive<u64> = 512..=65_536;

    fn is_default(&self) -> bool {
        *self == MemoryConfig::default()
    }
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            index_bytes: default_index_bytes(),
            session_start: true,
            approve_tools: true,
            recall: true,
            recall_bytes: default_recall_bytes(),
            max_bytes: default_max_bytes(),
            max_note_bytes: default_max_note_bytes(),
        }
    }
}

fn default_index_bytes() -> u32 {
    2048
}
fn default_recall_bytes() -> u32 {
    1500
}
/// 1 MiB: some 3,000 notes of a few sentences. Only the session index and what a query finds
/// reach an agent's context, so the budget can be far above Knecht's 64 KB; past it a memory
/// is a wiki nobody tidies, and the agent is asked to consolidate.
fn default_max_bytes() -> u64 {
    1 << 20
}
/// The 4,000 bytes a note's text may have, with room for its front matter.
fn default_max_note_bytes() -> u64 {
    4608
}
fn is_true(value: &bool) -> bool {
    *value
}
fn default_true() -> bool {
    true
}
fn default_version() -> u32 {
    CONFIG_VERSION
}
/// A `memloop.toml` without `agents` keeps meaning the agents it meant before Codex was added.
fn default_agents() -> Vec<AgentId> {
    vec![AgentId::Claude, AgentId::Opencode, AgentId::Kimi]
}
fn default_server_name() -> String {
    "memory".to_owned()
}
fn default_min_tool_calls() -> u32 {
    3
}
fn default_interval() -> u32 {
    2
}
fn default_edit_tools() -> Vec<String> {
    strings(&["Edit", "Write", "MultiEdit", "NotebookEdit"])
}
fn default_store_tools() -> Vec<String> {
    strings(&["memory_store"])
}
fn default_lookup_tools() -> Vec<String> {
    strings(&["context_query", "route_query"])
}
fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            version: CONFIG_VERSION,
            agents: default_agents(),
            layout: Layout::default(),
            server: ServerConfig::default(),
            gate: GateConfig::default(),
            memory: MemoryConfig::default(),
        }
    }
}

/// How the agents reach the server, after presets and defaults are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
}

/// The server every adapter writes, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub preset: Option<Preset>,
    pub transport: Transport,
}

impl Server {
    /// The embedded default: `memloop serve` over stdio.
    pub fn is_embedded(&self) -> bool {
        matches!(&self.transport, Transport::Stdio { command, args, .. }
            if command == "memloop" && args.first().is_some_and(|arg| arg == "serve"))
    }
}

/// A piece of text with `${VAR}` references, split so each agent can write its own syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    Literal(&'a str),
    Var(&'a str),
}

/// Splits `Bearer ${TOKEN}` into its literal and variable parts. `None` when a `${` is not closed
/// or a name is not a valid environment variable name.
pub fn env_pieces(value: &str) -> Option<Vec<Piece<'_>>> {
    let mut pieces = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            pieces.push(Piece::Literal(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after.find('}')?;
        let name = &after[..end];
        if !is_env_name(name) {
            return None;
        }
        pieces.push(Piece::Var(name));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Literal(rest));
    }
    Some(pieces)
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Literal text allowed next to a variable reference: an HTTP auth scheme, nothing secret.
fn is_harmless_literal(text: &str) -> bool {
    let word = text.trim();
    word.is_empty()
        || ["Bearer", "Basic", "Token"]
            .iter()
            .any(|scheme| word.eq_ignore_ascii_case(scheme))
}

impl Config {
    /// Reads `memloop.toml` from `root`. `Ok(None)` when there is none.
    pub fn load(root: &Path) -> anyhow::Result<Option<Config>> {
        Config::load_checked(root, &|_, _| Ok(()))
    }

    /// [`Config::load`], with each enabled agent's [`ServerCheck`] of the `[server]` values.
    pub fn load_checked(root: &Path, check: ServerCheck) -> anyhow::Result<Option<Config>> {
        let path = root.join(FILE_NAME);
        // A FIFO or a device named memloop.toml is refused, never read (it could block forever),
        // and so is a link that leads out of the repository.
        let bytes = match crate::files::check_within(&path, root)
            .and_then(|()| crate::files::read_regular(&path))
        {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => {
                return Err(
                    anyhow::Error::new(err).context(format!("cannot read {}", path.display()))
                );
            }
        };
        let display = path.display().to_string();
        let (text, _) = crate::edit::text::Encoding::decode(&bytes, &display)?;
        Config::parse_checked(&text, &path, check).map(Some)
    }

    /// Parses and validates the text of `memloop.toml`; errors carry `path:line:col`.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Config> {
        Config::parse_checked(text, path, &|_, _| Ok(()))
    }

    /// [`Config::parse`], with each enabled agent's [`ServerCheck`] of the `[server]` values.
    pub fn parse_checked(text: &str, path: &Path, check: ServerCheck) -> anyhow::Result<Config> {
        let config: Config = toml_edit::de::from_str(text).map_err(|err| {
            let (line, col) = err
                .span()
                .map_or((1, 1), |span| crate::position::line_col(text, span.start));
            anyhow::anyhow!(
                "{}:{line}:{col}: {}",
                path.display(),
                explain_de_error(err.message())
            )
        })?;
        let source = Source::new(path, text);
        config.validate(&source)?;
        let server = config.checked_server(&source)?;
        check_server_values(&source, &config.agents, &server, check)?;
        Ok(config)
    }

    fn validate(&self, src: &Source) -> anyhow::Result<()> {
        if self.version > CONFIG_VERSION {
            return Err(src.refuse(
                &[Step::Key("version")],
                format!(
                    "version = {} was written by a newer memloop (this one reads version {CONFIG_VERSION})",
                    self.version
                ),
                "upgrade memloop, or write version = 1",
            ));
        }
        if self.agents.is_empty() {
            return Err(src.refuse(
                &[Step::Key("agents")],
                "agents is empty",
                format!("name at least one of {}", AgentId::choices()),
            ));
        }
        if self.gate.interval == 0 {
            return Err(src.refuse(
                &[Step::Key("gate"), Step::Key("interval")],
                "gate.interval must be at least 1",
                "write interval = 1 to check at every stop",
            ));
        }
        self.checked_server(src)?;
        let range = MemoryConfig::INDEX_BYTES;
        if !range.contains(&self.memory.index_bytes) {
            return Err(src.refuse(
                &[Step::Key("memory"), Step::Key("index_bytes")],
                format!(
                    "memory.index_bytes = {} is outside {} to {} bytes",
                    self.memory.index_bytes,
                    range.start(),
                    range.end()
                ),
                "give a size in that range, or leave it out for the default 2048",
            ));
        }
        let range = MemoryConfig::RECALL_BYTES;
        if !range.contains(&self.memory.recall_bytes) {
            return Err(src.refuse(
                &[Step::Key("memory"), Step::Key("recall_bytes")],
                format!(
                    "memory.recall_bytes = {} is outside {} to {} bytes",
                    self.memory.recall_bytes,
                    range.start(),
                    range.end()
                ),
                "give a size in that range, or leave it out for the default 1500",
            ));
        }
        for (key, value, range, default) in [
            (
                "max_bytes",
                self.memory.max_bytes,
                MemoryConfig::MAX_BYTES,
                default_max_bytes(),
            ),
            (
                "max_note_bytes",
                self.memory.max_note_bytes,
                MemoryConfig::MAX_NOTE_BYTES,
                default_max_note_bytes(),
            ),
        ] {
            if !range.contains(&value) {
                return Err(src.refuse(
                    &[Step::Key("memory"), Step::Key(key)],
                    format!(
                        "memory.{key} = {value} is outside {} to {} bytes",
                        range.start(),
                        range.end()
                    ),
                    format!("give a size in that range, or leave it out for the default {default}"),
                ));
            }
        }
        Ok(())
    }

    /// The validated server, with presets and the embedded default applied.
    pub fn server(&self) -> anyhow::Result<Server> {
        self.checked_server(&Source::unknown())
    }

    fn checked_server(&self, src: &Source) -> anyhow::Result<Server> {
        let server = &self.server;
        let at = |key: &'static str| [Step::Key("server"), Step::Key(key)];
        let name = &server.name;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(src.refuse(
                &at("name"),
                format!("server.name = {name:?} is not a valid server name"),
                "use only letters, digits, '-' and '_' (for example name = \"memory\")",
            ));
        }
        let chosen: Vec<&'static str> = [
            ("preset", server.preset.is_some()),
            ("url", server.url.is_some()),
            ("command", server.command.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        if let [first, second, ..] = chosen.as_slice() {
            return Err(src.refuse(
                &at(second),
                format!("server.{second} is set next to server.{first}"),
                "set only one of preset, url and command",
            ));
        }
        for (key, value) in &server.headers {
            check_reference(src, "headers", key, value)?;
        }
        for (key, value) in &server.env {
            check_reference(src, "env", key, value)?;
        }
        if let Some(url) = &server.url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(src.refuse(
                    &at("url"),
                    format!("server.url = {url:?} is not an http:// or https:// URL"),
                    "give the URL of the MCP endpoint, for example url = \"https://memory.example.com/mcp\"",
                ));
            }
            if let Some(problem) = crate::secrets::in_url(url, Syntax::Dollar) {
                return Err(src.refuse(
                    &at("url"),
                    format!(
                        "server.url holds {problem}; secrets must not be committed, and memloop writes this URL into every agent's MCP config"
                    ),
                    format!(
                        "drop it from the URL and send it as a header instead: {HEADER_FIX}; then rotate the credential if it was ever committed"
                    ),
                ));
            }
        }
        if let Some(command) = &server.command
            && let Some(problem) = crate::secrets::in_command(command, Syntax::Dollar)
        {
            return Err(src.refuse(
                &at("command"),
                format!("server.command holds {problem}; secrets must not be committed"),
                env_fix("MEMORY_TOKEN"),
            ));
        }
        if let Some((index, problem)) = crate::secrets::in_args(&server.args, Syntax::Dollar) {
            return Err(src.refuse(
                &[Step::Key("server"), Step::Key("args"), Step::Index(index)],
                format!("server.args[{index}] holds {problem}; secrets must not be committed"),
                env_fix(&variable_for(&server.args, index)),
            ));
        }
        let transport = match (&server.preset, &server.url, &server.command) {
            (Some(Preset::Convops), _, _) => Transport::Http {
                url: CONVOPS_URL.to_owned(),
                headers: server.headers.clone(),
            },
            (None, Some(url), _) => Transport::Http {
                url: url.clone(),
                headers: server.headers.clone(),
            },
            (None, None, command) => Transport::Stdio {
                command: command.clone().unwrap_or_else(|| "memloop".to_owned()),
                args: if command.is_some() {
                    server.args.clone()
                } else {
                    vec!["serve".to_owned()]
                },
                env: server.env.clone(),
            },
        };
        match &transport {
            Transport::Http { .. } if !server.env.is_empty() => {
                return Err(src.refuse(
                    &at("env"),
                    "server.env applies to a local (command) server",
                    "a url server takes headers; remove env or use command",
                ));
            }
            Transport::Stdio { .. } if !server.headers.is_empty() => {
                return Err(src.refuse(
                    &at("headers"),
                    "server.headers applies to a url server",
                    "a command server takes env; remove headers or use url",
                ));
            }
            _ => {}
        }
        Ok(Server {
            name: name.clone(),
            preset: server.preset,
            transport,
        })
    }

    /// The file as `memloop init` writes it: every section present, defaults shown.
    pub fn to_toml(&self) -> String {
        let pretty = toml_edit::ser::to_string_pretty(self).expect("the config always serializes");
        let mut doc: toml_edit::DocumentMut = pretty.parse().expect("serialized TOML parses");
        // Short lists read best on one line: `agents = ["claude", "opencode", "kimi"]`.
        fn inline_arrays(table: &mut toml_edit::Table) {
            for (_, item) in table.iter_mut() {
                match item {
                    toml_edit::Item::Value(toml_edit::Value::Array(array)) => array.fmt(),
                    toml_edit::Item::Table(inner) => inline_arrays(inner),
                    _ => {}
                }
            }
        }
        inline_arrays(doc.as_table_mut());
        let body = doc.to_string();
        format!(
            "# The memory loop of this repository. Apply changes with `memloop sync`.\n\n{body}"
        )
    }
}

/// An agent's refusal of a server value it cannot carry into its own files (Kimi Code reads no
/// variables in `mcp.json`), asked of each `[server]` header and env value alone, so the refusal
/// can name that value's line in `memloop.toml`. Handed in by the commands that write the
/// agents' files; readers of the config (the gate, the hooks) do without it.
pub type ServerCheck<'a> = &'a dyn Fn(AgentId, &Transport) -> anyhow::Result<()>;

fn check_server_values(
    src: &Source,
    agents: &[AgentId],
    server: &Server,
    check: ServerCheck,
) -> anyhow::Result<()> {
    let refused = |map: &'static str, name: &str, transport: Transport| {
        agents.iter().find_map(|agent| {
            check(*agent, &transport).err().map(|err| {
                src.refuse(
                    &[Step::Key("server"), Step::Key(map), Step::Key(name)],
                    err.to_string(),
                    "fix this line of memloop.toml; memloop writes nothing until then",
                )
            })
        })
    };
    let first = match &server.transport {
        Transport::Http { url, headers } => headers.iter().find_map(|(name, value)| {
            let headers = BTreeMap::from([(name.clone(), value.clone())]);
            let url = url.clone();
            refused("headers", name, Transport::Http { url, headers })
        }),
        Transport::Stdio { command, args, env } => env.iter().find_map(|(name, value)| {
            let env = BTreeMap::from([(name.clone(), value.clone())]);
            let (command, args) = (command.clone(), args.clone());
            refused("env", name, Transport::Stdio { command, args, env })
        }),
    };
    first.map_or(Ok(()), Err)
}

/// How each agent gets a header value from the environment, for the refusals' hints.
const HEADER_FIX: &str = "headers = { Authorization = \"Bearer ${MEMORY_TOKEN}\" } (memloop writes it as ${MEMORY_TOKEN} for Claude Code, {env:MEMORY_TOKEN} for OpenCode and bearerTokenEnvVar = \"MEMORY_TOKEN\" for Kimi Code), and export MEMORY_TOKEN";

/// The hint for a credential on a command line: the server reads it from its environment.
fn env_fix(variable: &str) -> String {
    format!(
        "let the server read it from its environment instead: env = {{ {variable} = \"${{{variable}}}\" }} \
         (memloop writes ${{{variable}}} for Claude Code and {{env:{variable}}} for OpenCode; Kimi Code passes its own \
         environment to the server), export {variable}, and drop the value from the command line; then rotate the \
         credential if it was ever committed"
    )
}

/// A variable name for the credential at `args[index]`: its flag's name (`--api-key` gives
/// `API_KEY`), else `MEMORY_TOKEN`.
fn variable_for(args: &[String], index: usize) -> String {
    let flag = args[index]
        .strip_prefix("--")
        .and_then(|f| f.split_once('=').map(|(name, _)| name))
        .or_else(|| args[index].split_once('=').map(|(name, _)| name))
        .or_else(|| {
            index
                .checked_sub(1)
                .and_then(|i| args[i].strip_prefix("--"))
        });
    let name: String = flag
        .unwrap_or("MEMORY_TOKEN")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "MEMORY_TOKEN".into()
    } else {
        name
    }
}

fn check_reference(src: &Source, map: &'static str, key: &str, value: &str) -> anyhow::Result<()> {
    let pieces =
        env_pieces(value).filter(|pieces| pieces.iter().any(|p| matches!(p, Piece::Var(_))));
    let ok = pieces.is_some_and(|pieces| {
        pieces.iter().all(|piece| match piece {
            Piece::Var(_) => true,
            Piece::Literal(text) => is_harmless_literal(text),
        })
    });
    if ok {
        return Ok(());
    }
    let example = if map == "headers" {
        format!("{key} = \"Bearer ${{MEMORY_TOKEN}}\" and export MEMORY_TOKEN")
    } else {
        format!("{key} = \"${{{key}}}\" and export {key}")
    };
    Err(src.refuse(
        &[Step::Key("server"), Step::Key(map), Step::Key(key)],
        format!("server.{map}.{key} holds a literal value; secrets must not be committed"),
        format!(
            "reference an environment variable instead, e.g. {example} (memloop writes ${{VAR}} for Claude Code, \
             {{env:VAR}} for OpenCode and bearerTokenEnvVar for Kimi Code)"
        ),
    ))
}

/// One step into memloop.toml: a key of a table, or an element of an array.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The text of memloop.toml with its spans, so every refusal names `file:line:col`.
struct Source<'a> {
    path: Option<&'a Path>,
    text: &'a str,
    doc: Option<toml_edit::Document<&'a str>>,
}

impl<'a> Source<'a> {
    fn new(path: &'a Path, text: &'a str) -> Source<'a> {
        Source {
            path: Some(path),
            text,
            doc: toml_edit::Document::parse(text).ok(),
        }
    }

    /// For checks of a config that was read (and positioned) before.
    fn unknown() -> Source<'static> {
        Source {
            path: None,
            text: "",
            doc: None,
        }
    }

    /// Where the value at `steps` starts, or the deepest part of it that exists.
    fn position(&self, steps: &[Step]) -> (usize, usize) {
        let Some(doc) = &self.doc else {
            return (1, 1);
        };
        let mut item = doc.as_item();
        let mut start = 0;
        for step in steps {
            let (next, span) = match step {
                Step::Key(key) => {
                    let Some(next) = item.get(*key) else { break };
                    let span = next.span().or_else(|| {
                        item.as_table_like()
                            .and_then(|table| table.key(key))
                            .and_then(toml_edit::Key::span)
                    });
                    (next, span)
                }
                // Array elements are values, never tables: the walk ends at one.
                Step::Index(index) => {
                    if let Some(span) = item
                        .as_array()
                        .and_then(|array| array.get(*index))
                        .and_then(toml_edit::Value::span)
                    {
                        start = span.start;
                    }
                    break;
                }
            };
            if let Some(span) = span {
                start = span.start;
            }
            item = next;
        }
        crate::position::line_col(self.text, start)
    }

    fn refuse(
        &self,
        steps: &[Step],
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> anyhow::Error {
        let (problem, hint) = (problem.into(), hint.into());
        match self.path {
            Some(path) => {
                let (line, col) = self.position(steps);
                anyhow::anyhow!("{}:{line}:{col}: {problem}\n  hint: {hint}", path.display())
            }
            None => anyhow::anyhow!("{FILE_NAME}: {problem}\n  hint: {hint}"),
        }
    }
}

/// Rewrites serde's "unknown field `x`, expected one of `a`, `b`" into a hint with the nearest key.
fn explain_de_error(message: &str) -> String {
    let message = message.trim();
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_owned();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return message.to_owned();
    };
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match crate::position::nearest(unknown, &candidates) {
        Some(best) => format!("unknown key `{unknown}`; did you mean `{best}`?"),
        None => format!(
            "unknown key `{unknown}`; valid keys: {}",
            candidates.join(", ")
        ),
    }
}

/// Finds the repository root from `start`: the nearest folder holding `memloop.toml`, else `.git`.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    let ancestors = || start.ancestors();
    ancestors()
        .find(|dir| dir.join(FILE_NAME).is_file())
        .or_else(|| ancestors().find(|dir| dir.join(".git").exists()))
        .map(Path::to_path_buf)
}

/// The JSON Schema of `memloop.toml`, shipped as `assets/memloop.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut text = serde_json::to_string_pretty(&schema).expect("schema serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent's server check as the commands hand one in; this one reads variables only in a
    /// bearer token and in an env value passed on under its own name, as Kimi Code does (whose
    /// own check lives in its folder and runs in its binary cases).
    fn no_variables(agent: AgentId, transport: &Transport) -> anyhow::Result<()> {
        if agent != AgentId::Kimi {
            return Ok(());
        }
        let carried = match transport {
            Transport::Http { headers, .. } => headers
                .iter()
                .all(|(name, value)| name == "Authorization" && value.starts_with("Bearer ${")),
            Transport::Stdio { env, .. } => env
                .iter()
                .all(|(name, value)| *value == format!("${{{name}}}")),
        };
        anyhow::ensure!(carried, "this agent reads no variables there");
        Ok(())
    }

    fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse_checked(text, Path::new("memloop.toml"), &no_variables)
    }

    #[test]
    fn empty_file_gives_the_embedded_default() {
        let config = parse("").unwrap();
        assert_eq!(config, Config::default());
        assert!(config.server().unwrap().is_embedded());
    }

    #[test]
    fn unknown_key_names_position_and_nearest_key() {
        let err = parse("[gate]\nmin_tool_call = 4\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("memloop.toml:2:1:"), "{err}");
        assert!(
            err.contains("unknown key `min_tool_call`; did you mean `min_tool_calls`?"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_position() {
        let err = parse("[gate]\ninterval = \"two\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("memloop.toml:2:12:"), "{err}");
    }

    #[test]
    fn literal_secret_is_refused_with_a_hint() {
        let err = parse("[server]\nurl = \"https://x.test/\"\nheaders = { Authorization = \"Bearer abc123\" }\n")
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("server.headers.Authorization holds a literal value"),
            "{text}"
        );
        assert!(text.contains("${MEMORY_TOKEN}"), "{text}");
    }

    #[test]
    fn references_are_accepted() {
        let config =
            parse("[server]\nurl = \"https://x.test/\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\n").unwrap();
        let server = config.server().unwrap();
        assert!(
            matches!(server.transport, Transport::Http { ref headers, .. } if headers["Authorization"] == "Bearer ${TOKEN}")
        );
    }

    #[test]
    fn convops_preset_is_http() {
        let server = parse("[server]\npreset = \"convops\"\nname = \"convops\"\n")
            .unwrap()
            .server()
            .unwrap();
        assert_eq!(
            server.transport,
            Transport::Http {
                url: CONVOPS_URL.into(),
                headers: BTreeMap::new()
            }
        );
    }

    #[test]
    fn written_file_reads_back() {
        let config = Config {
            layout: Layout::Import,
            ..Config::default()
        };
        assert_eq!(parse(&config.to_toml()).unwrap(), config);
    }

    #[test]
    fn memory_section_defaults_bounds_and_round_trip() {
        let config = parse("[memory]\nindex_bytes = 4096\nsession_start = false\n").unwrap();
        assert_eq!(config.memory.index_bytes, 4096);
        assert!(!config.memory.session_start);
        assert_eq!(parse(&config.to_toml()).unwrap(), config);
        assert_eq!(parse("").unwrap().memory, MemoryConfig::default());
        // The default section is left out of what init writes.
        assert!(!Config::default().to_toml().contains("[memory]"));
        let err = format!("{:#}", parse("[memory]\nindex_bytes = 100\n").unwrap_err());
        assert!(err.contains("memory.index_bytes = 100"), "{err}");
        let config = parse("[memory]\nmax_bytes = 65536\nmax_note_bytes = 2048\n").unwrap();
        assert_eq!(
            (config.memory.max_bytes, config.memory.max_note_bytes),
            (65536, 2048)
        );
        assert_eq!(parse(&config.to_toml()).unwrap(), config);
        assert_eq!(MemoryConfig::default().max_bytes, 1 << 20);
        let err = format!("{:#}", parse("[memory]\nmax_bytes = 100\n").unwrap_err());
        assert!(
            err.contains("memory.max_bytes = 100 is outside 4096"),
            "{err}"
        );
        let err = format!(
            "{:#}",
            parse("[memory]\nmax_note_bytes = 100000\n").unwrap_err()
        );
        assert!(err.contains("memory.max_note_bytes = 100000"), "{err}");
        let err = parse("[memory]\nindex_byte = 100\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean `index_bytes`?"), "{err}");
    }

    #[test]
    fn shipped_schema_is_current() {
        let shipped = include_str!("../assets/memloop.schema.json");
        assert_eq!(
            shipped,
            json_schema(),
            "run `cargo xtask schema` to refresh assets/memloop.schema.json"
        );
    }

    /// The `line:col` a refusal of `text` starts with.
    fn refused_at(text: &str) -> String {
        let err = format!("{:#}", parse(text).unwrap_err());
        let rest = err
            .strip_prefix("memloop.toml:")
            .unwrap_or_else(|| panic!("no position: {err}"));
        let mut parts = rest.splitn(3, ':');
        format!("{}:{}", parts.next().unwrap(), parts.next().unwrap())
    }

    #[test]
    fn every_refusal_has_a_position() {
        for (text, at) in [
            ("version = 2\n", "1:11"),
            ("agents = []\n", "1:10"),
            ("agents = [\"claude\", 3]\n", "1:21"),
            ("[gate]\ninterval = 0\n", "2:12"),
            ("gate = 3\n", "1:8"),
            ("[server]\nname = \"my server\"\n", "2:8"),
            (
                "[server]\nurl = \"https://x.test/\"\ncommand = \"srv\"\n",
                "3:11",
            ),
            ("[server]\nurl = \"ftp://x.test/\"\n", "2:7"),
            (
                "[server]\nurl = \"https://x.test/\"\nenv = { A = \"${A}\" }\n",
                "3:7",
            ),
            (
                "[server]\ncommand = \"srv\"\nheaders = { A = \"${A}\" }\n",
                "3:11",
            ),
            (
                "[server]\nurl = \"https://x.test/\"\n[server.headers]\nAuthorization = \"Bearer abc\"\n",
                "4:17",
            ),
            (
                "agents = [\"kimi\"]\n[server]\nurl = \"https://x.test/\"\nheaders = { X-Team = \"${TEAM}\" }\n",
                "4:22",
            ),
            (
                "agents = [\"kimi\"]\n[server]\ncommand = \"srv\"\nenv = { A = \"${B}\" }\n",
                "4:13",
            ),
            (
                "[server]\ncommand = \"srv\"\nargs = [\"-y\",\n  \"--api-key\", \"sk-live-abcdefghijklmnop\"]\n",
                "4:16",
            ),
            ("[server]\nname = \"a\"\nname = \"b\"\n", "3:1"),
            ("[server.env]\nA = \"${A}\"\nA = \"${A}\"\n", "3:1"),
        ] {
            assert_eq!(refused_at(text), at, "{text}");
        }
    }

    #[test]
    fn credentials_outside_headers_are_refused_with_the_fix() {
        for (text, needle, fix) in [
            (
                "url = \"https://user:sk-live-123@m.test/\"",
                "password in its user part",
                "bearerTokenEnvVar",
            ),
            (
                "url = \"https://m.test/mcp?api_key=abc\"",
                "query (`api_key=`)",
                "{env:MEMORY_TOKEN}",
            ),
            (
                "url = \"https://m.test/sk-live-0123456789abcdef/mcp\"",
                "token in its path",
                "${MEMORY_TOKEN}",
            ),
            (
                "url = \"https://m.test/mcp#access_token=abc\"",
                "fragment (`access_token=`)",
                "${MEMORY_TOKEN}",
            ),
            (
                "url = \"https://m.test/mcp?token=abc&x=1\"",
                "query (`token=`)",
                "${MEMORY_TOKEN}",
            ),
            (
                "command = \"srv\"\nargs = [\"--api-key\", \"sk-abc\"]",
                "after `--api-key`",
                "env = { API_KEY = \"${API_KEY}\" }",
            ),
            (
                "command = \"srv\"\nargs = [\"--token=abc\"]",
                "`--token=...`",
                "{env:TOKEN}",
            ),
            (
                "command = \"env KEY=abc srv\"",
                "`KEY=...`",
                "Kimi Code passes its own",
            ),
            (
                "command = \"srv\"\nargs = [\"ghp_abcdefghijklmnop1234\"]",
                "a literal token",
                "${MEMORY_TOKEN}",
            ),
        ] {
            let err = format!("{:#}", parse(&format!("[server]\n{text}\n")).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
            assert!(err.contains(fix), "{text}: {err}");
            assert!(err.contains("secrets must not be committed"), "{err}");
        }
        for fine in [
            "url = \"https://user:${PASS}@m.test/mcp?key=${KEY}\"",
            "command = \"srv\"\nargs = [\"--api-key\", \"${API_KEY}\", \"--token=${T}\"]",
            "command = \"env KEY=${KEY} srv\"",
            "command = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-memory\"]",
        ] {
            parse(&format!("[server]\n{fine}\n")).unwrap();
        }
    }

    #[test]
    fn a_non_utf8_config_is_refused_with_a_position() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE_NAME),
            b"agents = [\"claude\"]\n# caf\xe9\n",
        )
        .unwrap();
        let err = Config::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("memloop.toml:2:6:"), "{err}");
    }
}
