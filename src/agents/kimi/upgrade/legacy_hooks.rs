//! `kimi-legacy-hooks`: the user's own `[[hooks]]` in legacy kimi-cli's `~/.kimi/config.toml`
//! carried over to Kimi Code's `$KIMI_CODE_HOME/config.toml`, which is the only file Kimi Code
//! reads hooks from. Doctor asks the same questions (`carried`, `Carry`) to tell a legacy hook
//! that still never runs from one that was carried.
//!
//! Facts (Kimi Code 2.1.0's bundled `migrateConfigStep`, run in xtask/src/e2e/kimi_facts.md):
//! `kimi migrate --run` copies hooks verbatim (`Shell` stays `Shell`), only when the target has
//! no `hooks` yet, drops every hook its schema rejects, rewrites the target without its comments,
//! and never changes the source.

use std::path::PathBuf;

use super::{RENAMED_TOOLS, legacy_config, map_words};
use crate::agents::kimi::{HOOK_COMMAND, code_home};
use crate::edit::toml::{Entry, EntryValue};
use crate::engine::PlanError;
use crate::upgrade::{Env, Files};

/// kimi-cli's tools whose names Kimi Code kept (research/kimi.md section 3; kimi-cli 1.49
/// `src/kimi_cli/tools`, Kimi Code 2.1.0 `dist/main.mjs`).
const KEPT_TOOLS: [&str; 11] = [
    "Glob",
    "Grep",
    "FetchURL",
    "ReadMediaFile",
    "Agent",
    "AskUserQuestion",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "EnterPlanMode",
    "ExitPlanMode",
];

/// kimi-cli's events whose matcher is a tool name.
const LEGACY_TOOL_EVENTS: [&str; 3] = ["PreToolUse", "PostToolUse", "PostToolUseFailure"];

/// The keys Kimi Code accepts in a hook; any other makes it ignore every hook.
const HOOK_KEYS: [&str; 4] = ["event", "matcher", "command", "timeout"];

/// kimi-cli's events; Kimi Code knows every one of them.
const LEGACY_EVENTS: [&str; 13] = [
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

/// One `[[hooks]]` entry (or inline `hooks = [...]` element) as written, with its line.
#[derive(Debug, Clone)]
pub struct Hook {
    pub line: usize,
    pub fields: Vec<(String, toml_edit::Value)>,
}

impl Hook {
    pub fn get(&self, key: &str) -> Option<&toml_edit::Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(toml_edit::Value::as_str)
    }

    /// memloop's own Stop hook (moved by `kimi-legacy-to-code`).
    pub fn is_memloops(&self) -> bool {
        self.str("command").map(str::trim) == Some(HOOK_COMMAND)
    }

    /// How the hook is named to the user: event, matcher and command.
    pub fn describe(&self) -> String {
        let event = self.str("event").unwrap_or("(no event)");
        let command = self.str("command").unwrap_or_default();
        match self.str("matcher") {
            Some(matcher) => format!("{event} matcher {matcher:?} (`{command}`)"),
            None => format!("{event} (`{command}`)"),
        }
    }
}

/// The hooks of a config's text; none when it has none or is no TOML (refused elsewhere).
pub fn hooks_in(text: &str) -> Vec<Hook> {
    let Ok(doc) = toml_edit::Document::parse(text) else {
        return Vec::new();
    };
    let line = |span: Option<std::ops::Range<usize>>| {
        span.map_or(1, |s| crate::position::line_col(text, s.start).0)
    };
    match doc.get("hooks") {
        Some(toml_edit::Item::ArrayOfTables(tables)) => tables
            .iter()
            .map(|table| Hook {
                line: line(table.span()),
                fields: table
                    .iter()
                    .map(|(k, item)| {
                        let value = item
                            .as_value()
                            .cloned()
                            .unwrap_or_else(|| toml_edit::Value::from("(a table)"));
                        (k.to_owned(), value)
                    })
                    .collect(),
            })
            .collect(),
        Some(toml_edit::Item::Value(toml_edit::Value::Array(array))) => array
            .iter()
            .map(|value| Hook {
                line: line(value.span()),
                fields: value
                    .as_inline_table()
                    .map(|t| t.iter().map(|(k, v)| (k.to_owned(), v.clone())).collect())
                    .unwrap_or_default(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `hooks` (Kimi Code's) already hold `hook`: the same event running the same command.
/// Its matcher may differ (renamed since, or edited by the user), so it is never added twice.
pub fn carried(hook: &Hook, hooks: &[Hook]) -> bool {
    hooks.iter().any(|h| {
        h.str("event") == hook.str("event")
            && h.str("command").map(str::trim) == hook.str("command").map(str::trim)
    })
}

/// What becomes of one legacy hook in Kimi Code.
#[derive(Debug, PartialEq)]
pub enum Carry {
    /// Copied as this entry; `renamed` when the matcher changed.
    Copy {
        entry: Entry,
        renamed: Option<String>,
    },
    /// Not copied: why (what makes it unsafe), for the user.
    Cannot(String),
}

/// What `hook` becomes in Kimi Code: the same entry with kimi-cli's tool names in its matcher
/// renamed, or why it cannot be carried without guessing.
pub fn carry(hook: &Hook) -> Carry {
    let cannot = |why: String| Carry::Cannot(why);
    if let Some((key, _)) = hook
        .fields
        .iter()
        .find(|(k, _)| !HOOK_KEYS.contains(&k.as_str()))
    {
        return cannot(format!(
            "it has the key `{key}`, and one such hook makes Kimi Code ignore every hook"
        ));
    }
    let Some(event) = hook.str("event").filter(|e| LEGACY_EVENTS.contains(e)) else {
        return cannot("its `event` is none of kimi-cli's".into());
    };
    let Some(command) = hook.str("command").filter(|c| !c.is_empty()) else {
        return cannot("it has no `command`".into());
    };
    let timeout = match hook.get("timeout") {
        None => None,
        Some(value) => match value.as_integer() {
            Some(t @ 1..=600) => Some(t),
            _ => return cannot("its `timeout` is not a whole number from 1 to 600".into()),
        },
    };
    let matcher = match hook.get("matcher") {
        None => None,
        Some(value) => match value.as_str() {
            Some(m) => Some(m),
            None => return cannot("its matcher is not a string".into()),
        },
    };
    let mut renamed = None;
    if let Some(pattern) = matcher
        && LEGACY_TOOL_EVENTS.contains(&event)
    {
        if crate::agents::kimi::doctor::invalid_regex(pattern).is_some() {
            return cannot(format!("its matcher {pattern:?} is no regex"));
        }
        let mut unknown = Vec::new();
        let new = map_words(pattern, &mut |word| {
            if word.chars().all(|c| c.is_ascii_digit()) || KEPT_TOOLS.contains(&word) {
                return word.to_owned();
            }
            match RENAMED_TOOLS.iter().find(|(old, _)| *old == word) {
                Some((_, new)) => (*new).to_owned(),
                None => {
                    unknown.push(format!("`{word}`"));
                    word.to_owned()
                }
            }
        });
        if !unknown.is_empty() {
            return cannot(format!(
                "its matcher {pattern:?} names {}, no kimi-cli tool Kimi Code has under a known name (an MCP tool is `mcp__<server>__<tool>` there)",
                unknown.join(", ")
            ));
        }
        if new != pattern {
            renamed = Some(new);
        }
    }
    let mut fields = Vec::new();
    for (key, _) in &hook.fields {
        let value = match key.as_str() {
            "event" => EntryValue::String(event.to_owned()),
            "command" => EntryValue::String(command.to_owned()),
            "matcher" => EntryValue::String(
                renamed
                    .clone()
                    .unwrap_or_else(|| matcher.unwrap_or_default().to_owned()),
            ),
            _ => EntryValue::Integer(timeout.expect("checked above")),
        };
        fields.push((key.clone(), value));
    }
    Carry::Copy {
        entry: Entry {
            fields,
            identity: ("command".into(), command.to_owned()),
        },
        renamed,
    }
}

fn target(env: &Env) -> PathBuf {
    code_home(&env.ctx).join("config.toml")
}

/// The user's legacy hooks Kimi Code lacks, each with what becomes of it (one copy per event
/// and command, so a hook listed twice is carried once).
fn plan(env: &Env, files: &mut Files) -> Result<Vec<(Hook, Carry)>, PlanError> {
    let source = legacy_config(env);
    // Parsed as a document first, so an unreadable file is refused with its position.
    if files.toml(&source)?.is_none() {
        return Ok(Vec::new());
    }
    let target = target(env);
    files.toml(&target)?;
    let legacy = files
        .text(&source)?
        .map(|(t, _)| hooks_in(&t))
        .unwrap_or_default();
    let mut present = files
        .text(&target)?
        .map(|(t, _)| hooks_in(&t))
        .unwrap_or_default();
    let mut found = Vec::new();
    for hook in legacy {
        if hook.is_memloops() || carried(&hook, &present) {
            continue;
        }
        present.push(hook.clone());
        let carry = carry(&hook);
        found.push((hook, carry));
    }
    Ok(found)
}

pub fn carry_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let source = files.display(&legacy_config(env));
    let target = files.display(&target(env));
    let mut findings = Vec::new();
    for (hook, carry) in plan(env, files)? {
        let here = format!("{source}:{}: [[hooks]] {}", hook.line, hook.describe());
        match carry {
            Carry::Copy { renamed, .. } => findings.push(format!(
                "{here} never runs in Kimi Code; copied to {target}{}",
                renamed.map_or_else(String::new, |m| format!(" with matcher {m:?}"))
            )),
            Carry::Cannot(why) => env.note(format!(
                "{here} never runs in Kimi Code, and is not copied to {target}: {why}. Add it there by hand with Kimi Code's names (`kimi migrate --run` copies hooks verbatim, and only into a config without hooks)"
            )),
        }
    }
    Ok(findings)
}

pub fn carry_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let copies: Vec<Entry> = plan(env, files)?
        .into_iter()
        .filter_map(|(_, carry)| match carry {
            Carry::Copy { entry, .. } => Some(entry),
            Carry::Cannot(_) => None,
        })
        .collect();
    if copies.is_empty() {
        return Ok(());
    }
    let path = target(env);
    let display = files.display(&path);
    let created = files.toml(&path)?.is_none();
    let (mut doc, encoding) = match files.toml(&path)? {
        Some(found) => found,
        None => (
            crate::edit::toml::TomlDoc::parse("", &display)?,
            Default::default(),
        ),
    };
    let source = files.display(&legacy_config(env));
    for (index, entry) in copies.iter().enumerate() {
        let comment = if index == 0 {
            format!("from {source}, carried over by memloop upgrade")
        } else {
            String::new()
        };
        doc.push_entry("hooks", entry, &comment)?;
    }
    files.write_text(&path, &doc.to_text(), encoding)?;
    if created {
        // The carried hooks are the user's: uninstall keeps them, and takes back only what
        // memloop adds to the file afterwards (its own hooks).
        let real = files.resolve(&path)?;
        let content = files.entry(&real)?;
        files.set_original(&real, content)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(text: &str) -> Hook {
        hooks_in(text).remove(0)
    }

    fn copied(text: &str) -> Option<String> {
        match carry(&hook(text)) {
            Carry::Copy { entry, .. } => entry.fields.iter().find_map(|(k, v)| match (k, v) {
                (k, EntryValue::String(m)) if k == "matcher" => Some(m.clone()),
                _ => None,
            }),
            Carry::Cannot(why) => panic!("not carried: {why}"),
        }
    }

    #[test]
    fn tool_names_are_renamed_and_kept_names_stay() {
        let pre = |m: &str| {
            format!("[[hooks]]\nevent = \"PreToolUse\"\nmatcher = {m:?}\ncommand = \"x\"\n")
        };
        assert_eq!(copied(&pre("Shell")).as_deref(), Some("Bash"));
        assert_eq!(
            copied(&pre("^(WriteFile|StrReplaceFile)$")).as_deref(),
            Some("^(Write|Edit)$")
        );
        assert_eq!(copied(&pre("Grep|Glob")).as_deref(), Some("Grep|Glob"));
        assert_eq!(copied(&pre(".*")).as_deref(), Some(".*"));
        // Not a tool event: the matcher is prompt text, kept as it is.
        let prompt =
            "[[hooks]]\nevent = \"UserPromptSubmit\"\nmatcher = \"Shell\"\ncommand = \"x\"\n";
        assert_eq!(copied(prompt).as_deref(), Some("Shell"));
    }

    #[test]
    fn what_cannot_be_carried_says_why() {
        let cases = [
            (
                "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Think\"\ncommand = \"x\"\n",
                "`Think`",
            ),
            (
                "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"(Read|Write)File\"\ncommand = \"x\"\n",
                "`File`",
            ),
            (
                "[[hooks]]\nevent = \"PostToolUse\"\nmatcher = \"search_docs\"\ncommand = \"x\"\n",
                "mcp__",
            ),
            (
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nextra = 1\n",
                "`extra`",
            ),
            (
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\ntimeout = 0\n",
                "timeout",
            ),
            (
                "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"(\"\ncommand = \"x\"\n",
                "no regex",
            ),
        ];
        for (text, why) in cases {
            match carry(&hook(text)) {
                Carry::Cannot(reason) => assert!(reason.contains(why), "{text}: {reason}"),
                other => panic!("{text}: carried as {other:?}"),
            }
        }
    }

    #[test]
    fn a_hook_with_the_same_event_and_command_counts_as_carried() {
        let legacy =
            hook("[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Shell\"\ncommand = \"g.sh\"\n");
        let code = hooks_in(
            "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"Bash|Write\"\ncommand = \"g.sh\"\n",
        );
        assert!(carried(&legacy, &code));
        let other = hooks_in("[[hooks]]\nevent = \"PostToolUse\"\ncommand = \"g.sh\"\n");
        assert!(!carried(&legacy, &other));
    }
}
