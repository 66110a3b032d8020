//! Kimi Code 2.x: the project MCP server in `.kimi-code/mcp.json` (`transport` always set: Kimi
//! ignores `type`) and the Stop hook in the user's `$KIMI_CODE_HOME/config.toml` (Kimi has no
//! project hooks). Legacy kimi-cli 1.x reads `~/.kimi/config.toml` and `~/.kimi/mcp.json`.
//! The session-start pieces (Kimi Code only) sit beside the Stop hook: see [`start`].
//! Facts: research/kimi.md, xtask/src/e2e/session_start_facts.md.

pub mod doctor;
pub mod gate;
pub mod live;
pub mod start;
pub mod start_upgrade;
pub mod trust;
pub mod upgrade;

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Map, Value, json};

use crate::config::{AgentId, Piece, Transport, env_pieces};
use crate::doctor::Doctor;
use crate::doctor::wiring::{McpFile, Syntax};
use crate::edit::json::Dialect;
use crate::edit::toml::{Entry, EntryValue};
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// Which Kimi program reads the user's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KimiFlavor {
    /// Kimi Code 2.x (`~/.kimi-code`), also the choice when no `kimi` is installed.
    Code,
    /// Legacy kimi-cli 1.x (`~/.kimi`), whose `--version` prints `kimi, version 1.x`.
    Legacy,
}

/// Kimi in the list of agents (`agents::of`).
pub struct Kimi;

impl super::agent::Agent for Kimi {
    fn id(&self) -> AgentId {
        AgentId::Kimi
    }

    fn configured_in(&self, root: &Path) -> bool {
        root.join(".kimi-code").exists()
    }

    fn user_scope_question(&self) -> Option<&'static str> {
        Some(
            "Kimi Code reads hooks only from your user config (~/.kimi-code/config.toml). Add the Stop gate there?",
        )
    }

    fn targets(&self, ctx: &Context, skipped: &mut Vec<String>) -> anyhow::Result<Vec<Target>> {
        targets(ctx, kimi_flavor(), skipped)
    }

    fn live(&self, d: &mut Doctor, program: &Path, found: &crate::doctor::Agent) {
        live::check(d, program, found);
    }

    fn mcp_files(&self) -> &'static [McpFile] {
        &[McpFile {
            agent: AgentId::Kimi,
            name: ".kimi-code/mcp.json",
            syntax: Syntax::Verbatim,
            dialect: Dialect::Strict,
            servers: "mcpServers",
            maps: &["headers", "env"],
        }]
    }

    fn check_rules(&self, d: &mut Doctor) {
        doctor::agents_md_size(d);
        crate::doctor::instructions::first_of(d, AgentId::Kimi, "Kimi Code", &["AGENTS.md"]);
    }

    fn check(&self, d: &mut Doctor) {
        doctor::check(d);
    }

    fn gate(&self) -> &dyn crate::gate::Reader {
        self
    }

    /// Kimi Code reads no variables in `mcp.json`: a header or env value it cannot carry is
    /// refused where memloop.toml is read, where its line is known, rather than while planning.
    fn check_server(&self, transport: &crate::config::Transport) -> anyhow::Result<()> {
        server_entry(transport).map(drop)
    }

    fn session_start(&self) -> &dyn crate::hook::StartDialect {
        &start::Dialect
    }

    fn prompt(&self) -> &dyn crate::hook::PromptDialect {
        &start::Dialect
    }

    fn migrations(&self) -> &'static [crate::upgrade::Migration] {
        upgrade::MIGRATIONS
    }

    fn trust(&self, ctx: &Context) -> anyhow::Result<Vec<Target>> {
        Ok(trust::targets(ctx))
    }
}

pub fn kimi_flavor() -> KimiFlavor {
    match crate::detect::installed_version("kimi") {
        Some(version)
            if version.starts_with("kimi, version 1.")
                || version.starts_with("kimi, version 0.") =>
        {
            KimiFlavor::Legacy
        }
        _ => KimiFlavor::Code,
    }
}

pub const HOOK_COMMAND: &str = "memloop hook stop --agent kimi";
pub const HOOK_TIMEOUT: i64 = 15;
/// On `UserPromptSubmit`, the one event whose output reaches Kimi Code's model (SessionStart's
/// is discarded); memloop prints the index on a session's first prompt only ([`start`]).
pub const SESSION_START_COMMAND: &str = "memloop hook session-start --agent kimi";
/// On `PreCompact`: notes the compaction, so the next prompt brings the index back.
pub const PRE_COMPACT_COMMAND: &str = "memloop hook pre-compact --agent kimi";
/// Seconds; the repeat answer costs a few milliseconds, the index a few more.
pub const SESSION_HOOK_TIMEOUT: i64 = 10;

/// Kimi Code's data root: `$KIMI_CODE_HOME`, else `~/.kimi-code`.
pub fn code_home(ctx: &Context) -> PathBuf {
    std::env::var_os("KIMI_CODE_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| ctx.home.join(".kimi-code"), PathBuf::from)
}

/// Legacy kimi-cli's data root: `$KIMI_SHARE_DIR`, else `~/.kimi`.
pub fn legacy_home(ctx: &Context) -> PathBuf {
    std::env::var_os("KIMI_SHARE_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| ctx.home.join(".kimi"), PathBuf::from)
}

/// The targets, and what was left out for want of consent to write the user's files.
pub fn targets(
    ctx: &Context,
    flavor: KimiFlavor,
    skipped: &mut Vec<String>,
) -> anyhow::Result<Vec<Target>> {
    let entry = server_entry(&ctx.server.transport)?;
    let server_member = Fragment::JsonMember {
        path: vec!["mcpServers".into(), ctx.server.name.clone()],
        value: entry,
    };
    let mut out = Vec::new();
    let home = match flavor {
        KimiFlavor::Code => {
            let (path, display) = ctx.project_target_display(".kimi-code/mcp.json");
            out.push(json_target(path, display, Scope::Project, server_member));
            code_home(ctx)
        }
        KimiFlavor::Legacy => {
            let home = legacy_home(ctx);
            if ctx.user_scope {
                let path = home.join("mcp.json");
                out.push(json_target(
                    path.clone(),
                    ctx.display_user_path(&path),
                    Scope::User,
                    server_member,
                ));
            }
            home
        }
    };
    let config = home.join("config.toml");
    if ctx.user_scope {
        out.push(Target {
            display: ctx.display_user_path(&config),
            path: config,
            scope: Scope::User,
            agents: vec![AgentId::Kimi],
            desired: Desired::Fragments {
                format: Format::Toml,
                fragments: config_fragments(flavor, &ctx.config.memory),
            },
            note: None,
        });
    } else {
        let (what, verb) = match flavor {
            KimiFlavor::Code => ("Kimi's Stop hook", "lives"),
            KimiFlavor::Legacy => ("kimi-cli's Stop hook and MCP server", "live"),
        };
        skipped.push(format!(
            "{what} {verb} in your user config ({}), outside the repository: run `memloop sync --user-scope` to allow it",
            ctx.display_user_path(&config)
        ));
    }
    Ok(out)
}

fn json_target(path: PathBuf, display: String, scope: Scope, fragment: Fragment) -> Target {
    Target {
        path,
        display,
        scope,
        agents: vec![AgentId::Kimi],
        desired: Desired::Fragments {
            format: Format::Json(Dialect::Strict),
            fragments: vec![fragment],
        },
        note: None,
    }
}

/// memloop's `[[hooks]]` entries in the user's config: the Stop gate, and for Kimi Code the
/// session-start pair unless `[memory] session_start = false` retires it (kimi-cli 1.x was never
/// checked with a real program, so it keeps the gate alone). The UserPromptSubmit entry also
/// gives each prompt its matching notes, so it stays while `[memory] recall` wants it.
pub fn config_fragments(flavor: KimiFlavor, memory: &crate::config::MemoryConfig) -> Vec<Fragment> {
    let session_start = memory.session_start;
    let entry = |entry: Entry| Fragment::TomlEntry {
        key: "hooks".into(),
        entry,
    };
    let mut fragments = vec![entry(hook_entry())];
    if flavor == KimiFlavor::Code {
        fragments.push(entry(session_start_entry()).wanted_if(session_start || memory.recall));
        fragments.push(entry(pre_compact_entry()).wanted_if(session_start));
    }
    fragments
}

/// One `[[hooks]]` entry with only the keys Kimi accepts (an extra key disables every hook) and no
/// matcher (Claude's `"*"` is an invalid regex there; the gate reads Kimi's session log itself).
pub fn hook_entry() -> Entry {
    command_entry("Stop", HOOK_COMMAND, HOOK_TIMEOUT)
}

/// The session-start entry: no matcher, since a UserPromptSubmit matcher is matched against the
/// prompt's text.
pub fn session_start_entry() -> Entry {
    command_entry(
        "UserPromptSubmit",
        SESSION_START_COMMAND,
        SESSION_HOOK_TIMEOUT,
    )
}

/// The compaction marker: no matcher, so manual and automatic compactions both count.
pub fn pre_compact_entry() -> Entry {
    command_entry("PreCompact", PRE_COMPACT_COMMAND, SESSION_HOOK_TIMEOUT)
}

fn command_entry(event: &str, command: &str, timeout: i64) -> Entry {
    Entry {
        fields: vec![
            ("event".into(), EntryValue::String(event.into())),
            ("command".into(), EntryValue::String(command.into())),
            ("timeout".into(), EntryValue::Integer(timeout)),
        ],
        identity: ("command".into(), command.into()),
    }
}

/// `mcpServers.<name>` with `transport`. Kimi reads no variables in headers; a bearer token comes
/// from `bearerTokenEnvVar`, and a stdio server inherits the environment.
pub fn server_entry(transport: &Transport) -> anyhow::Result<Value> {
    let mut entry = Map::new();
    match transport {
        Transport::Http { url, headers } => {
            entry.insert("transport".into(), json!("http"));
            entry.insert("url".into(), json!(url));
            for (name, value) in headers {
                match (
                    name.eq_ignore_ascii_case("authorization"),
                    bearer_variable(value),
                ) {
                    (true, Some(var)) => {
                        entry.insert("bearerTokenEnvVar".into(), json!(var));
                    }
                    _ => bail!(
                        "server.headers.{name} = {value:?}: Kimi Code cannot read a variable in a header; \
                         only `Authorization = \"Bearer ${{VAR}}\"` can be passed on (as bearerTokenEnvVar). \
                         Remove the header or drop kimi from agents"
                    ),
                }
            }
        }
        Transport::Stdio { command, args, env } => {
            entry.insert("transport".into(), json!("stdio"));
            entry.insert("command".into(), json!(command));
            entry.insert("args".into(), json!(args));
            for (name, value) in env {
                let inherited =
                    matches!(env_pieces(value).as_deref(), Some([Piece::Var(var)]) if var == name);
                if !inherited {
                    bail!(
                        "server.env.{name} = {value:?}: Kimi Code cannot read variables in mcp.json; the server \
                         inherits the environment, so only `{name} = \"${{{name}}}\"` works with kimi"
                    );
                }
            }
        }
    }
    Ok(Value::Object(entry))
}

fn bearer_variable(value: &str) -> Option<&str> {
    match env_pieces(value)?.as_slice() {
        [Piece::Literal(scheme), Piece::Var(var)]
            if scheme.trim().eq_ignore_ascii_case("bearer") =>
        {
            Some(var)
        }
        _ => None,
    }
}

/// Kimi Code's trust key for a folder: `wd_<slug(basename)>_<sha256(path)[:12]>`.
pub fn trust_key(dir: &std::path::Path) -> String {
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    // Each run of other characters becomes one `-` (a `-` of the name itself stays).
    let mut slug = String::new();
    let mut in_run = false;
    for c in base.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
            slug.push(c);
            in_run = false;
        } else if !in_run {
            slug.push('-');
            in_run = true;
        }
    }
    let mut slug: String = slug.trim_matches('-').chars().take(40).collect();
    if slug.is_empty() {
        slug = "workspace".into();
    }
    let digest = <sha2::Sha256 as sha2::Digest>::digest(dir.to_string_lossy().as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("wd_{slug}_{hex}")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn trust_key_slugs_runs_and_hashes_the_whole_path() {
        let key = trust_key(Path::new("/home/me/My Project!!"));
        assert!(key.starts_with("wd_my-project_"), "{key}");
        assert_eq!(key.len(), "wd_my-project_".len() + 12);
        assert!(trust_key(Path::new("/w/a-@b")).starts_with("wd_a--b_"));
        assert!(trust_key(Path::new("/")).starts_with("wd_workspace_"));
        assert_ne!(trust_key(Path::new("/a/x")), trust_key(Path::new("/b/x")));
    }
}
