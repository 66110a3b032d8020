//! Kilo Code CLI (npm `@kilocode/cli`, 7.x): an OpenCode fork. It reads OpenCode's config format
//! (`mcp.<name>` with `type` local/remote) from `kilo.json(c)` and the legacy `opencode.json(c)` at
//! the root, and from the same four names inside `.kilo/` and `.kilocode/`; it no longer loads
//! `.opencode/` folders. It runs OpenCode's plugin API from `{plugin,plugins}/*.{js,ts}` inside
//! `.kilo/`, so the gate is memloop's OpenCode plugin calling memloop as `--agent kilo`, at
//! `.kilo/plugins/memloop.js`. Rules: the first of `AGENTS.md`, `CLAUDE.md`, `CONTEXT.md`.
//! Facts (Kilo 7.7.7's bundled config guide and JS, and runs): xtask/src/e2e/kilo_facts.md.
//!
//! A repository with both OpenCode and Kilo enabled: both read a root `opencode.json(c)`, and
//! Kilo merges every file it reads key by key, so memloop's server is one server however many
//! of Kilo's files name it. memloop writes it once where it can: into the root OpenCode config
//! both programs read (one target, owned by both), else into Kilo's own file. The plugins never
//! meet: OpenCode loads only `.opencode/plugins/`, Kilo only `.kilo/plugins/`, and each records
//! to its own ledger (`--agent opencode`, `--agent kilo`).

pub mod doctor;
pub mod gate;
pub mod live;

use std::path::Path;

use serde_json::json;

use crate::config::AgentId;
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Kilo in the list of agents (`agents::of`).
pub struct Kilo;

/// The `$schema` Kilo adds to a config file that lacks one (rewriting the file on load).
pub const SCHEMA_URL: &str = "https://app.kilo.ai/config.json";
pub const PLUGIN_PATH: &str = ".kilo/plugins/memloop.js";

/// The project config files Kilo 7.7.7 reads: the root ones (found upwards to the worktree), then
/// those inside each `.kilo/` and `.kilocode/` folder.
pub const CONFIG_FILES: [&str; 12] = [
    "kilo.jsonc",
    "kilo.json",
    "opencode.jsonc",
    "opencode.json",
    ".kilo/kilo.jsonc",
    ".kilo/kilo.json",
    ".kilo/opencode.jsonc",
    ".kilo/opencode.json",
    ".kilocode/kilo.jsonc",
    ".kilocode/kilo.json",
    ".kilocode/opencode.jsonc",
    ".kilocode/opencode.json",
];

/// Kilo's own config files memloop writes into, the first that exists.
const OWN_FILES: [&str; 4] = [
    "kilo.jsonc",
    "kilo.json",
    ".kilo/kilo.jsonc",
    ".kilo/kilo.json",
];

/// Where memloop's server entry for Kilo goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFile {
    /// One of Kilo's own files (`kilo.json` when none exists yet).
    Own(&'static str),
    /// The root OpenCode config memloop writes for OpenCode, which Kilo reads too.
    SharedWithOpencode(&'static str),
}

impl ConfigFile {
    pub fn name(self) -> &'static str {
        match self {
            ConfigFile::Own(name) | ConfigFile::SharedWithOpencode(name) => name,
        }
    }
}

/// Kilo's own file when the repository keeps one; else, with OpenCode enabled (1.x shape) and
/// its config at the root, that file; else a new `kilo.json`.
pub fn config_file(root: &Path, opencode_enabled: bool) -> ConfigFile {
    if let Some(own) = OWN_FILES.into_iter().find(|name| root.join(name).exists()) {
        return ConfigFile::Own(own);
    }
    if opencode_enabled && !crate::agents::opencode::is_v2() {
        let shared = crate::agents::opencode::config_file(root);
        if !shared.starts_with('.') {
            return ConfigFile::SharedWithOpencode(shared);
        }
    }
    ConfigFile::Own("kilo.json")
}

/// How the OpenCode plugin sends the agent back inside the running prompt loop: a message added
/// with `noReply`, which OpenCode's loop reads at its next step.
const OPENCODE_IN_LOOP: &str =
    "    const body = { noReply: true, parts: [{ type: \"text\", text }] };
    // The added message must name the session's agent and model, or OpenCode files it under
    // the default agent.
    if (state.agent) body.agent = state.agent;
    if (state.model) body.model = state.model;
    await client.session.prompt({ path: { id }, body });
";

/// Kilo hides a user message added while a loop runs from that loop (its follow-up queue), so a
/// `noReply` message is never answered. A prompt sent while the session is busy is queued and
/// runs right after the loop ends, keeping the session busy: the plugin queues it
/// (`prompt_async`) and waits until Kilo holds it, so the loop ends with a follow-up pending and
/// one-shot `kilo run` takes the turn before it exits.
const KILO_IN_LOOP: &str = "    const body = { parts: [{ type: \"text\", text }] };
    if (state.agent) body.agent = state.agent;
    if (state.model) body.model = state.model;
    await client.session.promptAsync({ path: { id }, body });
    // prompt_async answers before the message exists: wait (bounded) until Kilo holds it.
    for (let i = 0; i < 40; i++) {
      const listed = await client.session.messages({ path: { id } });
      const held = ((listed && listed.data) || []).some((m) => m && m.info && m.info.role === \"user\"
        && (m.parts || []).some((part) => part && part.type === \"text\" && part.text === text));
      if (held) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
";

/// memloop's OpenCode plugin for Kilo (which runs OpenCode's plugin API): memloop is called as
/// `--agent kilo`, and the in-loop send-back queues a prompt instead of adding a `noReply`
/// message. Its first line is `// memloop kilo plugin v<N>`, N the OpenCode plugin's.
pub fn plugin() -> String {
    let opencode = crate::gate::OPENCODE_PLUGIN;
    let (first, rest) = opencode.split_once('\n').unwrap_or((opencode, ""));
    let header = first.replace("memloop opencode plugin", "memloop kilo plugin");
    let note = "// Kilo Code runs OpenCode's plugin API: this is memloop's OpenCode plugin calling memloop as\n\
                // --agent kilo, sending the agent back inside a running loop as a queued prompt (Kilo\n\
                // keeps a message added during a loop from that loop).";
    let body = rest
        .replace(r#""--agent", "opencode""#, r#""--agent", "kilo""#)
        .replace(OPENCODE_IN_LOOP, KILO_IN_LOOP);
    format!("{header}\n{note}\n{body}")
}

impl super::agent::Agent for Kilo {
    fn id(&self) -> AgentId {
        AgentId::Kilo
    }

    fn configured_in(&self, root: &Path) -> bool {
        ["kilo.json", "kilo.jsonc", ".kilo", ".kilocode"]
            .iter()
            .any(|name| root.join(name).exists())
    }

    fn targets(&self, ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        let file = config_file(ctx.root, ctx.enabled(AgentId::Opencode));
        let (config_path, config_display) = ctx.project_target_display(file.name());
        let (plugin_path, plugin_display) = ctx.project_target_display(PLUGIN_PATH);
        let server =
            crate::agents::opencode::server_member(&ctx.server.name, &ctx.server.transport, false);
        let schema = match file {
            ConfigFile::Own(_) => SCHEMA_URL,
            // The very target OpenCode wants there, so the two are planned as one.
            ConfigFile::SharedWithOpencode(_) => crate::agents::opencode::SCHEMA_URL,
        };
        Ok(vec![
            Target {
                path: config_path,
                display: config_display,
                scope: Scope::Project,
                agents: vec![AgentId::Kilo],
                desired: Desired::Fragments {
                    format: Format::Json(Dialect::Jsonc),
                    fragments: vec![
                        Fragment::JsonFirstMember {
                            key: "$schema".into(),
                            value: json!(schema),
                        },
                        server,
                    ],
                },
                note: None,
            },
            Target {
                path: plugin_path,
                display: plugin_display,
                scope: Scope::Project,
                agents: vec![AgentId::Kilo],
                desired: Desired::Whole { content: plugin() },
                note: None,
            },
        ])
    }

    fn check_rules(&self, d: &mut Doctor) {
        let names = ["AGENTS.md", "CLAUDE.md", "CONTEXT.md"];
        crate::doctor::instructions::first_of(d, AgentId::Kilo, "Kilo", &names);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn check_wiring(&self, d: &mut Doctor) {
        doctor::global_plugin(d);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        const FILE: McpFile = McpFile {
            agent: AgentId::Kilo,
            name: "kilo.json",
            syntax: Syntax::Opencode,
            dialect: Dialect::Jsonc,
            servers: "mcp",
            maps: &["headers", "environment"],
        };
        &[
            FILE,
            McpFile {
                name: "kilo.jsonc",
                ..FILE
            },
            McpFile {
                name: ".kilo/kilo.json",
                ..FILE
            },
            McpFile {
                name: ".kilo/kilo.jsonc",
                ..FILE
            },
        ]
    }

    fn live(&self, d: &mut Doctor, program: &Path, found: &crate::doctor::Agent) {
        live::check(d, program, found);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    /// The plugin adds the text to the system prompt as it is (as OpenCode's does).
    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &crate::hook::Plain(crate::hook::Form::Text)
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        self
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        // No memloop before this one wrote Kilo's files: nothing to migrate yet.
        &[]
    }
}

/// Its prompt hook would take the prompt from the input's `prompt` and answer in plain text, as
/// OpenCode's; the plugin does not call it yet (like OpenCode's).
impl crate::hook::PromptDialect for Kilo {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::Text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_opencodes_calling_memloop_as_kilo() {
        let text = plugin();
        assert!(text.starts_with("// memloop kilo plugin v"));
        let opencode_calls = crate::gate::OPENCODE_PLUGIN
            .matches(r#""--agent", "opencode""#)
            .count();
        assert!(opencode_calls >= 3, "stop, record and session-start");
        assert_eq!(text.matches(r#""--agent", "kilo""#).count(), opencode_calls);
        assert!(!text.contains(r#""--agent", "opencode""#));
        // The in-loop send-back is Kilo's: the OpenCode plugin still holds the code it replaces.
        assert!(crate::gate::OPENCODE_PLUGIN.contains(OPENCODE_IN_LOOP));
        assert!(text.contains(KILO_IN_LOOP));
        assert!(!text.contains("noReply: true"));
    }

    #[test]
    fn the_server_goes_where_kilo_reads_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(config_file(root, false), ConfigFile::Own("kilo.json"));
        std::fs::write(root.join("opencode.json"), "{}").unwrap();
        // Without OpenCode, a user's legacy opencode.json stays untouched.
        assert_eq!(config_file(root, false), ConfigFile::Own("kilo.json"));
        std::fs::create_dir(root.join(".kilo")).unwrap();
        std::fs::write(root.join(".kilo/kilo.jsonc"), "{}").unwrap();
        assert_eq!(config_file(root, true), ConfigFile::Own(".kilo/kilo.jsonc"));
        std::fs::write(root.join("kilo.json"), "{}").unwrap();
        assert_eq!(config_file(root, true), ConfigFile::Own("kilo.json"));
    }
}
