//! OpenCode 1.x: `mcp.<name>` in the repository's config (`config_file`: `opencode.jsonc` or
//! `opencode.json`, at the root or in `.opencode/`), with
//! `$schema` first so OpenCode never rewrites the file itself; the gate is a plugin file.
//! Facts: research/opencode.md.

pub mod doctor;
pub mod gate;
pub mod live;
pub mod upgrade;

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::config::{AgentId, Piece, Transport, env_pieces};
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Opencode in the list of agents (`agents::of`).
pub struct Opencode;

impl super::agent::Agent for Opencode {
    fn id(&self) -> AgentId {
        AgentId::Opencode
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join("opencode.json").exists()
            || root.join("opencode.jsonc").exists()
            || root.join(".opencode").exists()
    }

    fn targets(&self, ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        targets(ctx)
    }

    fn live(&self, d: &mut Doctor, program: &Path, found: &crate::doctor::Agent) {
        live::check(d, program, found);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        const FILE: McpFile = McpFile {
            agent: AgentId::Opencode,
            name: "opencode.json",
            syntax: Syntax::Opencode,
            dialect: Dialect::Jsonc,
            servers: "mcp",
            maps: &["headers", "environment"],
        };
        &[
            FILE,
            McpFile {
                name: "opencode.jsonc",
                ..FILE
            },
            McpFile {
                name: ".opencode/opencode.json",
                ..FILE
            },
            McpFile {
                name: ".opencode/opencode.jsonc",
                ..FILE
            },
        ]
    }

    fn check_wiring(&self, d: &mut Doctor) {
        doctor::global_plugin(d);
    }

    fn check_rules(&self, d: &mut Doctor) {
        // OpenCode reads the first of these that exists.
        let names = ["AGENTS.md", "CLAUDE.md", "CONTEXT.md"];
        crate::doctor::instructions::first_of(d, AgentId::Opencode, "OpenCode", &names);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &crate::hook::Plain(crate::hook::Form::Text)
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        self
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        upgrade::MIGRATIONS
    }
}

pub const SCHEMA_URL: &str = "https://opencode.ai/config.json";
pub use crate::gate::OPENCODE_PLUGIN_PATH as PLUGIN_PATH;

/// The project config files OpenCode 1.18.33 reads, in the order it merges them (a later one
/// wins a key both set): the root pair, found upwards, then each `.opencode/` folder's pair.
pub const CONFIG_FILES: [&str; 4] = [
    "opencode.json",
    "opencode.jsonc",
    ".opencode/opencode.json",
    ".opencode/opencode.jsonc",
];

/// The config file memloop writes its server into: the one the repository already keeps, never
/// a second one beside it. A root file comes first (where memloop always wrote), `opencode.jsonc`
/// before its twin since it wins; a repository that keeps its config only in `.opencode/` gets
/// memloop's entry there; with none, a new root `opencode.json`.
pub fn config_file(root: &Path) -> &'static str {
    [
        "opencode.jsonc",
        "opencode.json",
        ".opencode/opencode.jsonc",
        ".opencode/opencode.json",
    ]
    .into_iter()
    .find(|name| root.join(name).exists())
    .unwrap_or("opencode.json")
}

pub fn targets(ctx: &Context) -> anyhow::Result<Vec<Target>> {
    let server = &ctx.server;
    let file = config_file(ctx.root);
    let (config_path, config_display) = ctx.project_target_display(file);
    let (plugin_path, plugin_display) = ctx.project_target_display(PLUGIN_PATH);
    Ok(vec![
        Target {
            path: config_path,
            display: config_display,
            scope: Scope::Project,
            agents: vec![AgentId::Opencode],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Jsonc),
                fragments: vec![
                    Fragment::JsonFirstMember {
                        key: "$schema".into(),
                        value: json!(SCHEMA_URL),
                    },
                    server_member(&server.name, &server.transport, is_v2()),
                ],
            },
            note: None,
        },
        Target {
            path: plugin_path,
            display: plugin_display,
            scope: Scope::Project,
            agents: vec![AgentId::Opencode],
            desired: Desired::Whole {
                content: crate::gate::OPENCODE_PLUGIN.to_owned(),
            },
            note: None,
        },
    ])
}

/// Whether the installed OpenCode is 2.x, which keeps servers in `mcp.servers.<name>` with
/// `disabled` (its documentation; `memloop upgrade` migrates V1 entries).
pub fn is_v2() -> bool {
    crate::detect::installed_version("opencode")
        .and_then(|line| crate::version::Version::find(&line))
        .is_some_and(|version| version.0 >= 2)
}

/// memloop's server entry: `mcp.<name>` (V1) or `mcp.servers.<name>` (V2).
pub fn server_member(name: &str, transport: &Transport, v2: bool) -> Fragment {
    let entry = server_entry(transport);
    if v2 {
        Fragment::JsonMember {
            path: vec!["mcp".into(), "servers".into(), name.to_owned()],
            value: v2_entry(&entry),
        }
    } else {
        Fragment::JsonMember {
            path: vec!["mcp".into(), name.to_owned()],
            value: entry,
        }
    }
}

/// `{type:"remote", url, headers?, enabled}` or `{type:"local", command:[argv], environment?, enabled}`.
pub fn server_entry(transport: &Transport) -> Value {
    let mut entry = Map::new();
    match transport {
        Transport::Http { url, headers } => {
            entry.insert("type".into(), json!("remote"));
            entry.insert("url".into(), json!(url));
            if !headers.is_empty() {
                entry.insert("headers".into(), references(headers));
            }
        }
        Transport::Stdio { command, args, env } => {
            entry.insert("type".into(), json!("local"));
            let argv: Vec<&String> = std::iter::once(command).chain(args).collect();
            entry.insert("command".into(), json!(argv));
            if !env.is_empty() {
                entry.insert("environment".into(), references(env));
            }
        }
    }
    entry.insert("enabled".into(), json!(true));
    Value::Object(entry)
}

/// `${VAR}` becomes OpenCode's `{env:VAR}`.
fn references(values: &std::collections::BTreeMap<String, String>) -> Value {
    let converted: Map<String, Value> = values
        .iter()
        .map(|(key, value)| {
            let text: String = env_pieces(value)
                .unwrap_or_default()
                .into_iter()
                .map(|piece| match piece {
                    Piece::Literal(text) => text.to_owned(),
                    Piece::Var(name) => format!("{{env:{name}}}"),
                })
                .collect();
            (key.clone(), json!(text))
        })
        .collect();
    Value::Object(converted)
}

/// A V1 server entry (it has `type`), as V2 spells it.
pub fn v2_entry(entry: &Value) -> Value {
    let Some(map) = entry.as_object() else {
        return entry.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        match (key.as_str(), value) {
            ("enabled", Value::Bool(enabled)) => {
                out.insert("disabled".into(), Value::Bool(!enabled));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// Its prompt hook takes the prompt from the input's `prompt`.
impl crate::hook::PromptDialect for Opencode {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::Text
    }
}
