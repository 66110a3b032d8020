//! `memloop.toml`: the desired state every command reads.
//!
//! Parsing is strict: an unknown key or a wrong type is an error that names the file position,
//! the key and the nearest valid key. Secrets never live here: header and environment values may
//! only reference environment variables.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
}

impl AgentId {
    pub const ALL: [AgentId; 4] = [
        AgentId::Claude,
        AgentId::Opencode,
        AgentId::Kimi,
        AgentId::Codex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentId::Claude => "claude",
            AgentId::Opencode => "opencode",
            AgentId::Kimi => "kimi",
            AgentId::Codex => "codex",
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
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            min_tool_calls: default_min_tool_calls(),
            interval: default_interval(),
            edit_tools: default_edit_tools(),
            store_tools: default_store_tools(),
            lookup_tools: default_lookup_tools(),
        }
    }
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
        let path = root.join(FILE_NAME);
        // A FIFO or a device named memloop.toml is refused, never read (it could block forever).
        let text = match crate::files::read_regular(&path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => {
                return Err(
                    anyhow::Error::new(err).context(format!("cannot read {}", path.display()))
                );
            }
        };
        Config::parse(&text, &path).map(Some)
    }

    /// Parses and validates the text of `memloop.toml`; errors carry `path:line:col`.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Config> {
        let config: Config = toml_edit::de::from_str(text).map_err(|err| {
            let position = err
                .span()
                .map(|span| crate::position::line_col(text, span.start))
                .map(|(line, col)| format!(":{line}:{col}"))
                .unwrap_or_default();
            anyhow::anyhow!(
                "{}{position}: {}",
                path.display(),
                explain_de_error(err.message())
            )
        })?;
        config
            .validate()
            .with_context(|| format!("{} is not valid", path.display()))?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.version > CONFIG_VERSION {
            bail!(
                "version = {} was written by a newer memloop (this one reads version {CONFIG_VERSION}); \
                 upgrade memloop",
                self.version
            );
        }
        if self.agents.is_empty() {
            bail!(
                "agents is empty; name at least one of {}",
                AgentId::choices()
            );
        }
        if self.gate.interval == 0 {
            bail!("gate.interval must be at least 1");
        }
        self.server()?;
        Ok(())
    }

    /// The validated server, with presets and the embedded default applied.
    pub fn server(&self) -> anyhow::Result<Server> {
        let server = &self.server;
        let name = &server.name;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("server.name = {name:?}: use only letters, digits, '-' and '_'");
        }
        let chosen = [
            server.preset.is_some(),
            server.url.is_some(),
            server.command.is_some(),
        ];
        if chosen.iter().filter(|set| **set).count() > 1 {
            bail!("server: set only one of preset, url and command");
        }
        for (key, value) in &server.headers {
            check_reference(&format!("server.headers.{key}"), value)?;
        }
        for (key, value) in &server.env {
            check_reference(&format!("server.env.{key}"), value)?;
        }
        let transport = match (&server.preset, &server.url, &server.command) {
            (Some(Preset::Convops), _, _) => Transport::Http {
                url: CONVOPS_URL.to_owned(),
                headers: server.headers.clone(),
            },
            (None, Some(url), _) => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    bail!("server.url = {url:?}: give an http:// or https:// URL");
                }
                Transport::Http {
                    url: url.clone(),
                    headers: server.headers.clone(),
                }
            }
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
                bail!("server.env applies to a local (command) server; a url server takes headers")
            }
            Transport::Stdio { .. } if !server.headers.is_empty() => {
                bail!("server.headers applies to a url server; a command server takes env")
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

fn check_reference(key: &str, value: &str) -> anyhow::Result<()> {
    let pieces =
        env_pieces(value).filter(|pieces| pieces.iter().any(|p| matches!(p, Piece::Var(_))));
    let ok = pieces.is_some_and(|pieces| {
        pieces.iter().all(|piece| match piece {
            Piece::Var(_) => true,
            Piece::Literal(text) => is_harmless_literal(text),
        })
    });
    if !ok {
        bail!(
            "{key} holds a literal value; secrets must not be committed. Reference an environment \
             variable instead, e.g. {key} = \"Bearer ${{MEMORY_TOKEN}}\", and export MEMORY_TOKEN \
             in your shell"
        );
    }
    Ok(())
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

    fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse(text, Path::new("memloop.toml"))
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
    fn shipped_schema_is_current() {
        let shipped = include_str!("../assets/memloop.schema.json");
        assert_eq!(
            shipped,
            json_schema(),
            "run `cargo xtask schema` to refresh assets/memloop.schema.json"
        );
    }
}
