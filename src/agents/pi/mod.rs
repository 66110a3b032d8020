//! Pi (npm `@mariozechner/pi-coding-agent`, 0.73): no hook files and no MCP client. Pi loads every
//! `.pi/extensions/*.{ts,js}` of the folder it starts in (no trust prompt; the user's own in
//! `~/.pi/agent/extensions/`), so memloop's whole part is one extension file, `EXTENSION_PATH`:
//! it starts the memory server memloop.toml names and registers its tools as Pi tools, gates at
//! `agent_end` through `memloop hook stop --agent pi` (sending the agent back with
//! `pi.sendUserMessage`), and gives the session-start index and the per-prompt recall in
//! `before_agent_start`. Rules: Pi reads the first of `AGENTS.md`, `AGENTS.MD`, `CLAUDE.md`,
//! `CLAUDE.MD` in each folder from the working directory up. Facts (Pi 0.73.1's source and runs):
//! xtask/src/e2e/pi_facts.md.

pub mod doctor;
pub mod gate;
pub mod live;

use std::path::Path;

use anyhow::bail;
use serde_json::json;

use crate::config::{AgentId, Transport};
use crate::doctor::Doctor;
use crate::doctor::wiring::McpFile;
use crate::repo::Context;
use crate::target::{Desired, Scope, Target};

/// Pi in the list of agents (`agents::of`).
pub struct Pi;

/// The extension as shipped: the embedded server in its `SERVER` line.
pub const EXTENSION: &str = include_str!("../../../assets/pi-extension.js");
/// Where Pi loads it from: `<cwd>/.pi/extensions/`, top-level `.js` and `.ts` files.
pub const EXTENSION_PATH: &str = ".pi/extensions/memloop.js";
/// The line of the extension that names the server; `extension` writes memloop.toml's there.
const SERVER_LINE: &str = "const SERVER = ";

/// The extension for `transport`: the shipped text with the server memloop.toml names.
pub fn extension(transport: &Transport) -> anyhow::Result<String> {
    let Transport::Stdio { command, args, env } = transport else {
        bail!(
            "Pi has no MCP client: memloop's Pi extension starts the memory server itself and speaks to it \
             over stdio, so a server at a URL cannot reach Pi. Use a command for [server] or drop pi from agents"
        );
    };
    let server = json!({"command": command, "args": args, "env": env});
    let mut out = String::with_capacity(EXTENSION.len() + 64);
    let mut replaced = false;
    for line in EXTENSION.split_inclusive('\n') {
        if !replaced && line.starts_with(SERVER_LINE) {
            out.push_str(&format!("{SERVER_LINE}{server};\n"));
            replaced = true;
        } else {
            out.push_str(line);
        }
    }
    debug_assert!(replaced, "assets/pi-extension.js has its SERVER line");
    Ok(out)
}

/// The extension's version, from its first line (`// memloop pi extension v<N>`).
pub fn extension_version(text: &str) -> Option<u32> {
    text.lines()
        .next()?
        .strip_prefix("// memloop pi extension v")?
        .trim()
        .parse()
        .ok()
}

impl super::agent::Agent for Pi {
    fn id(&self) -> AgentId {
        AgentId::Pi
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".pi").is_dir()
    }

    fn targets(&self, ctx: &Context, _skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        let (path, display) = ctx.project_target_display(EXTENSION_PATH);
        Ok(vec![Target {
            path,
            display,
            scope: Scope::Project,
            agents: vec![AgentId::Pi],
            desired: Desired::Whole {
                content: extension(&ctx.server.transport)?,
            },
            note: None,
        }])
    }

    fn check_rules(&self, d: &mut Doctor) {
        // Pi 0.73.1 (`loadContextFileFromDir`) takes the first of these in each folder.
        let names = ["AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];
        crate::doctor::instructions::first_of(d, AgentId::Pi, "Pi", &names);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn check_wiring(&self, d: &mut Doctor) {
        doctor::user_extension(d);
    }

    /// Pi reads no MCP config: the server's command is in the extension, which holds no secret
    /// memloop.toml does not.
    fn mcp_files(&self) -> &'static [McpFile] {
        &[]
    }

    fn live(&self, d: &mut Doctor, program: &Path, found: &crate::doctor::Agent) {
        live::check(d, program, found);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    fn check_server(&self, transport: &Transport) -> anyhow::Result<()> {
        extension(transport).map(drop)
    }

    /// The extension adds the text to the system prompt as it is.
    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &crate::hook::Plain(crate::hook::Form::Text)
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        self
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        // No memloop before this one wrote Pi's extension: nothing to migrate yet.
        &[]
    }
}

/// The extension hands the prompt over as `prompt` and adds the plain text to it.
impl crate::hook::PromptDialect for Pi {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::Text
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_extension_names_memloops_server() {
        let embedded = Transport::Stdio {
            command: "memloop".into(),
            args: vec!["serve".into()],
            env: BTreeMap::new(),
        };
        // The shipped text already holds the embedded server: written as it is.
        assert_eq!(extension(&embedded).unwrap(), EXTENSION);
        assert_eq!(extension_version(EXTENSION), Some(1));
        let custom = Transport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "team-memory".into()],
            env: BTreeMap::from([("TOKEN".into(), "${TEAM_TOKEN}".into())]),
        };
        let text = extension(&custom).unwrap();
        let line = text.lines().find(|l| l.starts_with(SERVER_LINE)).unwrap();
        assert_eq!(
            line,
            r#"const SERVER = {"command":"npx","args":["-y","team-memory"],"env":{"TOKEN":"${TEAM_TOKEN}"}};"#
        );
        assert_eq!(text.lines().count(), EXTENSION.lines().count());
        let http = Transport::Http {
            url: "https://memory.example/mcp".into(),
            headers: BTreeMap::new(),
        };
        let err = extension(&http).unwrap_err().to_string();
        assert!(err.contains("Pi has no MCP client"), "{err}");
    }
}
