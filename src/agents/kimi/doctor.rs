//! Kimi Code's whole files: the user's `config.toml` (`[[hooks]]` with only `event`, `matcher`,
//! `command`, `timeout`; one bad entry makes Kimi Code ignore every hook), the hooks' home
//! (`~/.kimi-code` for 2.x, `~/.kimi` for legacy kimi-cli), the project `.kimi-code/mcp.json`
//! (`transport` set; one invalid entry drops every server) and the workspace trust it needs.
//! Facts: research/kimi.md sections 1-3, e2e-findings.md.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::agents::kimi::upgrade::{TOOL_EVENTS, rename_tools};
use crate::agents::kimi::{
    KimiFlavor, PRE_COMPACT_COMMAND, SESSION_START_COMMAND, code_home, legacy_home,
};
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step, read_text};
use crate::doctor::{Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Kimi;
/// memloop's session-start commands, the one event each works on in Kimi Code (`start.rs`), and
/// what is lost elsewhere.
const SESSION_EVENTS: &[(&str, &str, &str)] = &[
    (
        SESSION_START_COMMAND,
        "UserPromptSubmit",
        "the memory index never reaches the model",
    ),
    (
        PRE_COMPACT_COMMAND,
        "PreCompact",
        "the memory index does not come back after a compaction",
    ),
];
const HOOK_KEYS: &[&str] = &["event", "matcher", "command", "timeout"];
const LEGACY_EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "SessionStart",
    "SessionEnd",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Notification",
];
/// Added by Kimi Code's legacy engine (`KIMI_CODE_LEGACY_FLAG=1`).
const CODE_LEGACY_ENGINE_EVENTS: &[&str] = &["PermissionRequest", "PermissionResult", "Interrupt"];
/// Added by Kimi Code's default v2 engine on top of those.
const CODE_V2_EVENTS: &[&str] = &[
    "UserPromptQueued",
    "TurnStarted",
    "TaskStarted",
    "SessionHeartbeat",
];

pub fn check(d: &mut Doctor) {
    let agent = d.agent(AGENT).clone();
    let flavor = match agent.version.as_deref() {
        Some(v) if v.starts_with("kimi, version 1.") || v.starts_with("kimi, version 0.") => {
            KimiFlavor::Legacy
        }
        _ => KimiFlavor::Code,
    };
    if agent.installed() {
        let (reads, other) = match flavor {
            KimiFlavor::Code => (code_home(&d.ctx), legacy_home(&d.ctx)),
            KimiFlavor::Legacy => (legacy_home(&d.ctx), code_home(&d.ctx)),
        };
        let events = events(flavor);
        config_toml(d, &reads.join("config.toml"), flavor, &events);
        wrong_home(d, &reads, &other, flavor);
        if flavor == KimiFlavor::Code {
            trust(d);
        }
    }
    if flavor == KimiFlavor::Code {
        claude_file(d);
    }
    let root = d.repo.root.clone();
    match flavor {
        KimiFlavor::Code => {
            // The user's file is one of the layers too: one bad entry there drops memloop's.
            if agent.installed() {
                let path = code_home(&d.ctx).join("mcp.json");
                let display = d.ctx.display_user_path(&path);
                mcp_json(d, &path, &display, flavor);
            }
            mcp_json(
                d,
                &root.join(".kimi-code/mcp.json"),
                ".kimi-code/mcp.json",
                flavor,
            )
        }
        KimiFlavor::Legacy if agent.installed() => {
            let path = legacy_home(&d.ctx).join("mcp.json");
            let display = d.ctx.display_user_path(&path);
            mcp_json(d, &path, &display, flavor);
        }
        KimiFlavor::Legacy => {}
    }
}

fn events(flavor: KimiFlavor) -> Vec<&'static str> {
    let mut events = LEGACY_EVENTS.to_vec();
    if flavor == KimiFlavor::Code {
        events.extend(CODE_LEGACY_ENGINE_EVENTS);
        let legacy_engine = std::env::var_os("KIMI_CODE_LEGACY_FLAG").is_some_and(|v| v == "1");
        if !legacy_engine {
            events.extend(CODE_V2_EVENTS);
        }
    }
    events
}

/// One `[[hooks]]` entry as read, with its line.
struct Hook {
    line: usize,
    fields: Vec<(String, toml_edit::Value)>,
}

fn config_toml(d: &mut Doctor, path: &Path, flavor: KimiFlavor, events: &[&str]) {
    let display = d.ctx.display_user_path(path);
    let text = match read_text(path, &display) {
        Ok(Some(text)) => text,
        Ok(None) => return, // the drift check reports a missing gate
        Err(refusal) => return d.refused(AGENT, "config-toml", &refusal),
    };
    let doc = match toml_edit::Document::parse(text.as_str()) {
        Ok(doc) => doc,
        Err(err) => {
            let (line, col) = err
                .span()
                .map_or((1, 1), |span| crate::position::line_col(&text, span.start));
            let message = err.message().trim().to_owned();
            let twice = ["already", "redefine", "duplicate"]
                .iter()
                .any(|w| message.contains(w));
            let fix = if twice && text.contains("hooks = [") {
                "`hooks = []` next to `[[hooks]]` tables defines `hooks` twice: delete the `hooks = [...]` line (or move its entries into [[hooks]] tables)"
            } else {
                "fix the TOML syntax"
            };
            d.push(
                Finding::error(
                    AGENT,
                    "config-toml",
                    format!(
                        "{message} (column {col}): Kimi cannot read {display}, so no hook runs"
                    ),
                )
                .at(&display, Some(line))
                .fix(fix),
            );
            return;
        }
    };
    d.push(Finding::ok(AGENT, "config-toml", "valid TOML").file(&display));
    let hooks: Vec<Hook> = match doc.get("hooks") {
        None => return,
        Some(toml_edit::Item::ArrayOfTables(tables)) => tables
            .iter()
            .map(|table| Hook {
                line: table
                    .span()
                    .map_or(1, |s| crate::position::line_col(&text, s.start).0),
                fields: table
                    .iter()
                    .map(|(k, item)| {
                        (
                            k.to_owned(),
                            item.as_value()
                                .cloned()
                                .unwrap_or_else(|| toml_edit::Value::from("(a table)")),
                        )
                    })
                    .collect(),
            })
            .collect(),
        Some(toml_edit::Item::Value(toml_edit::Value::Array(array))) => array
            .iter()
            .map(|value| Hook {
                line: value
                    .span()
                    .map_or(1, |s| crate::position::line_col(&text, s.start).0),
                fields: value
                    .as_inline_table()
                    .map(|t| t.iter().map(|(k, v)| (k.to_owned(), v.clone())).collect())
                    .unwrap_or_default(),
            })
            .collect(),
        Some(_) => {
            d.push(
                Finding::error(
                    AGENT,
                    "hooks-keys",
                    "`hooks` is neither [[hooks]] tables nor an array: Kimi ignores every hook",
                )
                .file(&display)
                .fix("write each hook as a [[hooks]] table"),
            );
            return;
        }
    };
    let consequence = match flavor {
        KimiFlavor::Code => "Kimi Code ignores the whole hooks section, every hook included",
        KimiFlavor::Legacy => "kimi-cli refuses to start",
    };
    let mut problems = 0;
    for (index, hook) in hooks.iter().enumerate() {
        let here = format!("hooks[{index}]");
        let mut bad = |d: &mut Doctor, severity_error: bool, what: String, fix: String| {
            problems += 1;
            let f = if severity_error {
                Finding::error(AGENT, "hooks", format!("{here} {what}"))
            } else {
                Finding::warning(AGENT, "hooks", format!("{here} {what}"))
            };
            d.push(f.at(&display, Some(hook.line)).fix(fix));
        };
        let get = |key: &str| hook.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        for (key, _) in hook
            .fields
            .iter()
            .filter(|(k, _)| !HOOK_KEYS.contains(&k.as_str()))
        {
            match flavor {
                KimiFlavor::Code => bad(
                    d,
                    true,
                    format!("has the key `{key}`: {consequence}"),
                    format!(
                        "remove `{key}`; a hook takes only event, matcher, command and timeout"
                    ),
                ),
                KimiFlavor::Legacy => bad(
                    d,
                    false,
                    format!("has the key `{key}`, which kimi-cli ignores"),
                    format!("remove `{key}`"),
                ),
            }
        }
        match get("event").and_then(|v| v.as_str()) {
            Some(event) if events.contains(&event) => {}
            Some(event) => bad(
                d,
                true,
                format!("has the event `{event}`, unknown to this Kimi: {consequence}"),
                format!("use one of {}", events.join(", ")),
            ),
            None => bad(
                d,
                true,
                format!("has no `event` string: {consequence}"),
                "add event = \"Stop\" (or another event)".into(),
            ),
        }
        match get("command").and_then(|v| v.as_str()) {
            Some(command) if !command.is_empty() => {}
            _ => bad(
                d,
                true,
                format!("has no `command`: {consequence}"),
                "add command = \"...\"".into(),
            ),
        }
        if let Some(matcher) = get("matcher") {
            match matcher.as_str() {
                Some(pattern) => {
                    if let Some(why) = invalid_regex(pattern) {
                        bad(
                            d,
                            true,
                            format!(
                                "has the matcher {pattern:?}, not a valid regex ({why}): the hook never fires"
                            ),
                            "use \".*\" to match everything, or leave the matcher out".into(),
                        );
                    } else if flavor == KimiFlavor::Code
                        && get("event")
                            .and_then(|v| v.as_str())
                            .is_some_and(|e| TOOL_EVENTS.contains(&e))
                        && rename_tools(pattern) != pattern
                    {
                        bad(
                            d,
                            true,
                            format!(
                                "has the matcher {pattern:?}, naming kimi-cli's tools, which Kimi Code calls {:?}: the hook never fires",
                                rename_tools(pattern)
                            ),
                            "run `memloop upgrade --user-scope` (it renames them), or rename them by hand".into(),
                        );
                    }
                }
                None => bad(
                    d,
                    true,
                    format!("has a matcher that is not a string: {consequence}"),
                    "write the matcher as a string regex".into(),
                ),
            }
        }
        if let Some(timeout) = get("timeout") {
            match timeout.as_integer() {
                Some(1..=600) => {}
                _ => bad(
                    d,
                    true,
                    format!(
                        "has timeout = {}, outside 1..600 seconds: {consequence}",
                        timeout.to_string().trim()
                    ),
                    "set timeout to a whole number of seconds from 1 to 600".into(),
                ),
            }
        }
        if flavor == KimiFlavor::Code
            && let Some((command, wanted, lost)) =
                get("command").and_then(|v| v.as_str()).and_then(|command| {
                    SESSION_EVENTS
                        .iter()
                        .find(|(ours, _, _)| *ours == command.trim())
                })
            && let Some(event) = get("event").and_then(|v| v.as_str())
            && event != *wanted
        {
            let why = match event {
                "SessionStart" | "PreCompact" | "PostCompact" => {
                    "Kimi Code discards what that event's hooks print".to_owned()
                }
                _ => format!("memloop expects it on `{wanted}`"),
            };
            d.push(
                Finding::warning(
                    AGENT,
                    "session-start",
                    format!("{here} runs `{command}` on `{event}`: {why}, so {lost}"),
                )
                .at(&display, Some(hook.line))
                .fix(format!(
                    "set event = \"{wanted}\" (`memloop sync --user-scope` writes it)"
                )),
            );
        }
    }
    if problems == 0 {
        d.push(
            Finding::ok(
                AGENT,
                "hooks",
                "every [[hooks]] entry is valid for this Kimi",
            )
            .file(&display),
        );
    }
}

/// Why `pattern` is no regex (JavaScript and Python agree on these); `None` when it is one.
/// Look-around and back-references, which Rust's parser does not support, count as valid.
pub fn invalid_regex(pattern: &str) -> Option<String> {
    use regex_syntax::ast::ErrorKind;
    match regex_syntax::ast::parse::Parser::new().parse(pattern) {
        Ok(_) => None,
        Err(err) => match err.kind() {
            ErrorKind::UnsupportedLookAround | ErrorKind::UnsupportedBackreference => None,
            kind => Some(kind.to_string()),
        },
    }
}

/// Hooks in the folder the installed Kimi does not read. For Kimi Code, a legacy hook that is
/// in its config too (same event and command: `memloop upgrade` carried it, or the user did)
/// is not lost, and the legacy file stays as `kimi migrate` leaves it.
fn wrong_home(d: &mut Doctor, reads: &Path, other: &Path, flavor: KimiFlavor) {
    use crate::agents::kimi::upgrade::legacy_hooks::{Carry, carried, carry, hooks_in};
    let path = other.join("config.toml");
    let Ok(Some(text)) = read_text(&path, "") else {
        return;
    };
    let has_hooks = text
        .parse::<toml_edit::DocumentMut>()
        .ok()
        .is_some_and(|doc| doc.get("hooks").is_some());
    if !has_hooks {
        return;
    }
    let (program, version) = match flavor {
        KimiFlavor::Code => ("Kimi Code 2.x", "kimi-cli 1.x"),
        KimiFlavor::Legacy => ("kimi-cli 1.x", "Kimi Code 2.x"),
    };
    let display = d.ctx.display_user_path(&path);
    let reads_display = d.ctx.display_user_path(reads);
    let mut fix = format!(
        "move the hooks to {reads_display}/config.toml (`memloop sync --user-scope` writes memloop's there)"
    );
    let mut line = crate::doctor::locate::line_containing(&text, "hooks");
    let mut what = "holds hooks".to_owned();
    if flavor == KimiFlavor::Code {
        let present = read_text(&reads.join("config.toml"), "")
            .ok()
            .flatten()
            .map(|t| hooks_in(&t))
            .unwrap_or_default();
        let lost: Vec<_> = hooks_in(&text)
            .into_iter()
            .filter(|hook| !carried(hook, &present))
            .collect();
        let Some(first) = lost.first() else {
            d.push(
                Finding::ok(
                    AGENT,
                    "hooks-home",
                    format!("every hook in {display} is in {reads_display}/config.toml too"),
                )
                .file(&display),
            );
            return;
        };
        line = Some(first.line);
        what = format!(
            "holds {} hook{} missing from {reads_display}/config.toml ({})",
            lost.len(),
            if lost.len() == 1 { "" } else { "s" },
            lost.iter()
                .map(|h| h.describe())
                .collect::<Vec<_>>()
                .join("; ")
        );
        let by_hand = lost
            .iter()
            .any(|h| !h.is_memloops() && matches!(carry(h), Carry::Cannot(_)));
        fix = if by_hand {
            format!(
                "run `memloop upgrade --user-scope --dry-run`: it copies what it can to {reads_display}/config.toml with Kimi Code's tool names and says why it leaves the rest; add those by hand"
            )
        } else {
            format!(
                "run `memloop upgrade --user-scope`: it copies them to {reads_display}/config.toml with Kimi Code's tool names (Shell is Bash there)"
            )
        };
    }
    d.push(
        Finding::error(
            AGENT,
            "hooks-home",
            format!("{display} {what}, but the installed {program} reads {reads_display}; they were written for {version} and never run"),
        )
        .at(&display, line)
        .fix(fix),
    );
}

/// Project MCP files (`.kimi-code/mcp.json`, `.mcp.json`) load only in a trusted folder.
fn trust(d: &mut Doctor) {
    let root = &d.repo.root;
    if !root.join(".kimi-code/mcp.json").exists() {
        return;
    }
    let dir: PathBuf = std::fs::canonicalize(root).unwrap_or_else(|_| root.clone());
    let file = code_home(&d.ctx)
        .join("workspace-trust")
        .join(crate::agents::kimi::trust_key(&dir));
    let display = d.ctx.display_user_path(&file);
    if file.is_file() {
        d.push(
            Finding::ok(
                AGENT,
                "trust",
                format!("this folder is trusted by Kimi Code ({display})"),
            )
            .file(display),
        );
    } else {
        let finding = Finding::warning(
            AGENT,
            "trust",
            format!(
                "this folder is not trusted by Kimi Code ({display} is missing): it skips .kimi-code/mcp.json and .mcp.json here, so the memory server does not load (trust is your call)"
            ),
        );
        d.push(d.by_trust(finding));
    }
}

/// Kimi Code also loads the project's `.mcp.json` (Claude Code's file): an entry it cannot read
/// there drops every MCP server too.
fn claude_file(d: &mut Doctor) {
    let Ok(Some(file)) =
        JsonFile::load(&d.repo.root.join(".mcp.json"), ".mcp.json", Dialect::Strict)
    else {
        return; // a parse error is reported by the file's own check
    };
    let Some(servers) = file.value.get("mcpServers").and_then(Value::as_object) else {
        return;
    };
    for (name, entry) in servers {
        let command = entry
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        let url = entry.get("url").and_then(Value::as_str).is_some();
        if !command && !url {
            d.push(
                Finding::error(
                    AGENT,
                    "transport",
                    format!(
                        "mcpServers.{name} has neither `command` nor `url`: Kimi Code reads .mcp.json too and drops every MCP server for it"
                    ),
                )
                .at(".mcp.json", file.line(&[Step::Key("mcpServers"), Step::Key(name)]))
                .fix("give the entry a `command` (stdio) or a `url` (http), or remove it"),
            );
        }
    }
}

fn mcp_json(d: &mut Doctor, path: &Path, display: &str, flavor: KimiFlavor) {
    let file = match JsonFile::load(path, display, Dialect::Strict) {
        Ok(Some(file)) => file,
        Ok(None) => return,
        Err(refusal) => {
            return d.refused(
                AGENT,
                "mcp-json",
                &crate::edit::Refusal {
                    problem: format!(
                        "{}: Kimi drops every MCP server from every file",
                        refusal.problem
                    ),
                    ..refusal
                },
            );
        }
    };
    let Some(servers) = file.value.get("mcpServers").and_then(Value::as_object) else {
        return;
    };
    let transports: &[&str] = match flavor {
        KimiFlavor::Code => &["stdio", "http", "sse"],
        KimiFlavor::Legacy => &["stdio", "http", "sse", "streamable-http"],
    };
    let drop_all = "one invalid entry makes Kimi drop every MCP server from every file";
    let mut problems = 0;
    for (name, entry) in servers {
        let line = file.line(&[Step::Key("mcpServers"), Step::Key(name)]);
        let here = format!("mcpServers.{name}");
        let mut push = |d: &mut Doctor, f: Finding| {
            problems += 1;
            d.push(f.at(display, line));
        };
        let transport = entry.get("transport").and_then(Value::as_str);
        let command = entry
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty());
        let url = entry.get("url").and_then(Value::as_str);
        match transport {
            Some(t) if !transports.contains(&t) => push(
                d,
                Finding::error(
                    AGENT,
                    "transport",
                    format!("{here}.transport is `{t}`: {drop_all}"),
                )
                .fix(if t == "streamable-http" {
                    "use \"http\", kimi-cli's `streamable-http` under Kimi Code's name (`memloop upgrade` rewrites it)".to_owned()
                } else {
                    format!("use one of {}", transports.join(", "))
                }),
            ),
            Some("stdio") if command.is_none() => push(
                d,
                Finding::error(
                    AGENT,
                    "transport",
                    format!("{here} is stdio without a `command`: {drop_all}"),
                )
                .fix("add \"command\""),
            ),
            Some(t) if t != "stdio" && url.is_none() => push(
                d,
                Finding::error(
                    AGENT,
                    "transport",
                    format!("{here} is {t} without a `url`: {drop_all}"),
                )
                .fix("add \"url\""),
            ),
            Some(_) => {}
            None if command.is_none() && url.is_none() => push(
                d,
                Finding::error(
                    AGENT,
                    "transport",
                    format!("{here} has neither `command` nor `url`: {drop_all}"),
                )
                .fix("add \"transport\" with \"command\" (stdio) or \"url\" (http)"),
            ),
            None => {
                let guess = if command.is_some() { "stdio" } else { "http" };
                let kind = entry.get("type").and_then(Value::as_str);
                let note = match kind {
                    Some(kind) if kind != guess => format!(" (its `type: {kind}` is ignored)"),
                    _ => String::new(),
                };
                push(
                    d,
                    Finding::warning(
                        AGENT,
                        "transport",
                        format!("{here} has no `transport`; Kimi assumes {guess}{note}"),
                    )
                    .fix(format!(
                        "add \"transport\": \"{}\"",
                        kind.filter(|k| transports.contains(k)).unwrap_or(guess)
                    )),
                );
            }
        }
    }
    if problems == 0 {
        d.push(
            Finding::ok(AGENT, "transport", "every server sets a valid `transport`").file(display),
        );
    }
}

/// Kimi warns above this many bytes of instructions (legacy kimi-cli cuts there).
pub const AGENTS_MD_CAP: u64 = 32 * 1024;

/// `AGENTS.md` over Kimi's cap.
pub fn agents_md_size(d: &mut Doctor) {
    let path = d.repo.root.join("AGENTS.md");
    if let Ok(meta) = std::fs::metadata(&path)
        && meta.len() > AGENTS_MD_CAP
    {
        d.push(
            Finding::warning(
                AGENT,
                "agents-md-size",
                format!(
                    "AGENTS.md is {} KiB, over Kimi's 32 KiB cap: Kimi warns and legacy kimi-cli cuts the end off, where memloop's block usually sits",
                    meta.len() / 1024
                ),
            )
            .file("AGENTS.md")
            .fix("shorten AGENTS.md below 32 KiB or move detail into linked files"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_check_follows_javascript_where_rust_is_narrower() {
        assert!(invalid_regex("*").is_some());
        assert!(invalid_regex("(").is_some());
        assert!(invalid_regex("Bash|Edit").is_none());
        assert!(invalid_regex("^(?!Read).*").is_none());
        assert!(invalid_regex("(a)\\1").is_none());
    }
}
