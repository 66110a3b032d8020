//! Kimi migrations, for Kimi Code (2.x, or no `kimi` on PATH, which memloop treats as Kimi
//! Code). Facts: research/kimi.md, sections 2, 3 and 5.
//!
//! - `kimi-legacy-to-code`: memloop's Stop hook in legacy kimi-cli's `~/.kimi/config.toml` and
//!   its server in `~/.kimi/mcp.json` are not read by Kimi Code: the hook moves to
//!   `$KIMI_CODE_HOME/config.toml`, the server to the project's `.kimi-code/mcp.json` (where
//!   `memloop sync` keeps it for Kimi Code). Everything else in the legacy files stays.
//! - `kimi-legacy-hooks`: the user's own `[[hooks]]` in `~/.kimi/config.toml` never run in Kimi
//!   Code. Each one Kimi Code can run is copied to `$KIMI_CODE_HOME/config.toml` with kimi-cli's
//!   tool names renamed; the legacy file stays as it is (as `kimi migrate` leaves it). A hook
//!   already there (same event and command) is not copied again; one that cannot be carried
//!   safely (a tool Kimi Code lacks, a key it rejects) is named with what to do instead. `kimi
//!   migrate --run` is no substitute: it copies hooks verbatim and only into a config without
//!   any (xtask/src/e2e/kimi_facts.md).
//! - `kimi-streamable-http`: an MCP entry with `transport = "streamable-http"` (valid in kimi-cli,
//!   dropped by Kimi Code's own migrator, and a schema error in Kimi Code that drops every
//!   file-declared server) becomes `http`, in every mcp.json Kimi Code reads and in the legacy one.
//! - `kimi-tool-names`: hook matchers naming kimi-cli's tool names (copied verbatim by `kimi
//!   migrate`, then never firing) name Kimi Code's: Shell, ReadFile, WriteFile, StrReplaceFile,
//!   SetTodoList, SearchWeb become Bash, Read, Write, Edit, TodoList, WebSearch.

pub mod legacy_hooks;

use std::path::PathBuf;

use serde_json::{Value, json};
use toml_edit::TableLike;

use crate::agents::kimi::{HOOK_COMMAND, code_home, hook_entry, legacy_home, server_entry};
use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::edit::toml::TomlDoc;
use crate::engine::PlanError;
use crate::upgrade::{Env, Files, Migration};
use crate::version::Version;
use crate::version::{Product, Range};

const KIMI_CODE: Range = Range::Versions {
    product: Product::KimiCode,
    min: Version(0, 0, 0),
    below: None,
    if_missing: true,
};

/// Kimi's migrations, in the order they run.
/// The user's hooks are carried before memloop's moves, so the lines named are those on disk.
pub const MIGRATIONS: &[Migration] = &[
    LEGACY_HOOKS,
    LEGACY_TO_CODE,
    STREAMABLE_HTTP,
    TOOL_NAMES,
    super::start_upgrade::SESSION_START,
];

pub const LEGACY_TO_CODE: Migration = Migration {
    id: "kimi-legacy-to-code",
    agent: Some(AgentId::Kimi),
    range: KIMI_CODE,
    about: "memloop's Stop hook and server move from legacy kimi-cli (~/.kimi) to Kimi Code ($KIMI_CODE_HOME/config.toml, .kimi-code/mcp.json)",
    detect: legacy_detect,
    rewrite: legacy_rewrite,
};

pub const LEGACY_HOOKS: Migration = Migration {
    id: "kimi-legacy-hooks",
    agent: Some(AgentId::Kimi),
    range: KIMI_CODE,
    about: "the user's own hooks in legacy kimi-cli's ~/.kimi/config.toml (never run by Kimi Code) are copied to $KIMI_CODE_HOME/config.toml with Kimi Code's tool names; ~/.kimi/config.toml stays as it is",
    detect: legacy_hooks::carry_detect,
    rewrite: legacy_hooks::carry_rewrite,
};

pub const STREAMABLE_HTTP: Migration = Migration {
    id: "kimi-streamable-http",
    agent: Some(AgentId::Kimi),
    range: KIMI_CODE,
    about: "MCP entries with transport \"streamable-http\" (rejected by Kimi Code, dropped by its migrator) use \"http\"",
    detect: transport_detect,
    rewrite: transport_rewrite,
};

pub const TOOL_NAMES: Migration = Migration {
    id: "kimi-tool-names",
    agent: Some(AgentId::Kimi),
    range: KIMI_CODE,
    about: "hook matchers naming kimi-cli's tools (Shell, ReadFile, ...) name Kimi Code's (Bash, Read, ...)",
    detect: names_detect,
    rewrite: names_rewrite,
};

pub(crate) fn legacy_config(env: &Env) -> PathBuf {
    legacy_home(&env.ctx).join("config.toml")
}

fn legacy_mcp(env: &Env) -> PathBuf {
    legacy_home(&env.ctx).join("mcp.json")
}

fn server_path(env: &Env) -> Vec<String> {
    vec!["mcpServers".into(), env.ctx.server.name.clone()]
}

/// Whether the `[[hooks]]` of `doc` hold memloop's entry.
fn has_our_hook(doc: &TomlDoc) -> bool {
    let text = doc.to_text();
    let Ok(mut copy) = TomlDoc::parse(&text, "") else {
        return false;
    };
    copy.remove_entry("hooks", &hook_entry(), false);
    copy.to_text() != text
}

fn legacy_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let mut found = Vec::new();
    let config = legacy_config(env);
    if let Some((doc, _)) = files.toml(&config)?
        && has_our_hook(&doc)
    {
        found.push(format!(
            "{}: [[hooks]] Stop running `{HOOK_COMMAND}` (Kimi Code reads {})",
            files.display(&config),
            files.display(&code_home(&env.ctx).join("config.toml"))
        ));
    }
    let mcp = legacy_mcp(env);
    if let Some((doc, _)) = files.json(&mcp, Dialect::Strict)?
        && doc.get(&server_path(env)).is_some()
    {
        found.push(format!(
            "{}: mcpServers.{} (Kimi Code reads .kimi-code/mcp.json)",
            files.display(&mcp),
            env.ctx.server.name
        ));
    }
    Ok(found)
}

fn legacy_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let config = legacy_config(env);
    if let Some((mut doc, encoding)) = files.toml(&config)?
        && has_our_hook(&doc)
    {
        doc.remove_entry("hooks", &hook_entry(), true);
        files.write_text(&config, &doc.to_text(), encoding)?;
        let code = code_home(&env.ctx).join("config.toml");
        let (mut doc, encoding) = match files.toml(&code)? {
            Some(found) => found,
            None => (
                TomlDoc::parse("", &files.display(&code))?,
                Default::default(),
            ),
        };
        doc.upsert_entry("hooks", &hook_entry())?;
        files.write_text(&code, &doc.to_text(), encoding)?;
    }
    let mcp = legacy_mcp(env);
    let path = server_path(env);
    if let Some((mut doc, encoding)) = files.json(&mcp, Dialect::Strict)?
        && doc.get(&path).is_some()
    {
        doc.remove(&path, &|_| false);
        files.write_text(&mcp, &doc.to_text(), encoding)?;
        let project = env.ctx.root.join(".kimi-code/mcp.json");
        let (mut doc, encoding) = files.json_or_new(&project, Dialect::Strict)?;
        doc.set(&path, &server_entry(&env.ctx.server.transport)?)?;
        files.write_text(&project, &doc.to_text(), encoding)?;
    }
    Ok(())
}

/// Every mcp.json Kimi Code reads (user, repository root `.mcp.json`, project), and the
/// legacy one its migrator copies from.
fn mcp_files(env: &Env) -> Vec<PathBuf> {
    vec![
        legacy_mcp(env),
        code_home(&env.ctx).join("mcp.json"),
        env.ctx.root.join(".mcp.json"),
        env.ctx.root.join(".kimi-code/mcp.json"),
    ]
}

fn streamable(doc: &crate::edit::json::JsonDoc) -> Vec<String> {
    match doc.get(&["mcpServers".to_owned()]) {
        Some(Value::Object(servers)) => servers
            .iter()
            .filter(|(_, entry)| entry.get("transport") == Some(&json!("streamable-http")))
            .map(|(name, _)| name.clone())
            .collect(),
        _ => Vec::new(),
    }
}

fn transport_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let mut found = Vec::new();
    for path in mcp_files(env) {
        if let Some((doc, _)) = files.json(&path, Dialect::Strict)? {
            for name in streamable(&doc) {
                found.push(format!(
                    "{}: mcpServers.{name} has transport \"streamable-http\"",
                    files.display(&path)
                ));
            }
        }
    }
    Ok(found)
}

fn transport_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    for path in mcp_files(env) {
        let Some((mut doc, encoding)) = files.json(&path, Dialect::Strict)? else {
            continue;
        };
        let names = streamable(&doc);
        if names.is_empty() {
            continue;
        }
        for name in names {
            doc.set(
                &["mcpServers".into(), name, "transport".into()],
                &json!("http"),
            )?;
        }
        files.write_text(&path, &doc.to_text(), encoding)?;
    }
    Ok(())
}

/// kimi-cli's tool names and Kimi Code's (research/kimi.md, section 3).
pub const RENAMED_TOOLS: [(&str, &str); 6] = [
    ("Shell", "Bash"),
    ("ReadFile", "Read"),
    ("WriteFile", "Write"),
    ("StrReplaceFile", "Edit"),
    ("SetTodoList", "TodoList"),
    ("SearchWeb", "WebSearch"),
];

/// Events whose matcher is a tool name (other events match prompts, sources, agents...).
pub const TOOL_EVENTS: [&str; 5] = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionResult",
];

/// `matcher` (a regex) with every whole word that is an old tool name renamed. A backslash
/// escape is never part of a word, so `\bShell` is the word `Shell` after `\b`.
pub fn rename_tools(matcher: &str) -> String {
    map_words(matcher, &mut |word| {
        RENAMED_TOOLS
            .iter()
            .find(|(old, _)| *old == word)
            .map_or(word, |(_, new)| new)
            .to_owned()
    })
}

/// `pattern` (a regex) with every whole word (letters, digits, `_`; never a backslash escape)
/// replaced by what `f` makes of it.
pub(crate) fn map_words(pattern: &str, f: &mut dyn FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut word = String::new();
    let mut flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            out.push_str(&f(word));
            word.clear();
        }
    };
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
        out.push(c);
        if c == '\\'
            && let Some(escaped) = chars.next()
        {
            out.push(escaped);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn code_config(env: &Env) -> PathBuf {
    code_home(&env.ctx).join("config.toml")
}

/// `(event, old matcher, new matcher)` for every hook whose matcher names an old tool.
fn stale_matchers(doc: &mut TomlDoc, apply: bool) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    doc.for_each_entry_mut("hooks", &mut |entry: &mut dyn TableLike| {
        let event = entry
            .get("event")
            .and_then(|e| e.as_str())
            .unwrap_or_default()
            .to_owned();
        if !TOOL_EVENTS.contains(&event.as_str()) {
            return;
        }
        let Some(value) = entry.get_mut("matcher").and_then(|m| m.as_value_mut()) else {
            return;
        };
        let Some(old) = value.as_str().map(str::to_owned) else {
            return;
        };
        let new = rename_tools(&old);
        if new == old {
            return;
        }
        if apply {
            let decor = value.decor().clone();
            *value = toml_edit::Value::from(new.as_str());
            *value.decor_mut() = decor;
        }
        found.push((event, old, new));
    });
    found
}

fn names_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = code_config(env);
    let Some((mut doc, _)) = files.toml(&path)? else {
        return Ok(Vec::new());
    };
    let display = files.display(&path);
    Ok(stale_matchers(&mut doc, false)
        .into_iter()
        .map(|(event, old, new)| {
            format!("{display}: [[hooks]] {event} matcher {old:?} never fires in Kimi Code; becomes {new:?}")
        })
        .collect())
}

fn names_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = code_config(env);
    let Some((mut doc, encoding)) = files.toml(&path)? else {
        return Ok(());
    };
    if !stale_matchers(&mut doc, true).is_empty() {
        files.write_text(&path, &doc.to_text(), encoding)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_whole_words_only() {
        assert_eq!(rename_tools("Shell"), "Bash");
        assert_eq!(rename_tools("Shell|WriteFile"), "Bash|Write");
        assert_eq!(rename_tools("^(ReadFile|Glob)$"), "^(Read|Glob)$");
        assert_eq!(rename_tools("ReadMediaFile"), "ReadMediaFile");
        assert_eq!(rename_tools("MyShell"), "MyShell");
        assert_eq!(rename_tools("\\bShell\\b"), "\\bBash\\b");
        assert_eq!(rename_tools("mcp__x__SearchWeb"), "mcp__x__SearchWeb");
        assert_eq!(rename_tools(".*"), ".*");
    }

    #[test]
    fn matchers_of_other_events_are_left_alone_and_comments_kept() {
        let text = "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Shell\" # guard\ncommand = \"x\"\n\n[[hooks]]\nevent = \"UserPromptSubmit\"\nmatcher = \"Shell\"\ncommand = \"y\"\n";
        let mut doc = TomlDoc::parse(text, "c.toml").unwrap();
        let found = stale_matchers(&mut doc, true);
        assert_eq!(found.len(), 1);
        assert_eq!(
            doc.to_text(),
            text.replacen("\"Shell\" # guard", "\"Bash\" # guard", 1)
        );
    }
}
