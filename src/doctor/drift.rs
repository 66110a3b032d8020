//! Drift, per fragment memloop owns: current, edited by the user, stale (written by an older
//! memloop or for another memloop.toml), missing, or duplicated. Anything not current carries the
//! unified diff of what `memloop sync` would change in that file.

use std::path::Path;

use serde_json::Value;

use super::locate::{Step, json_line, line_containing};
use super::{Doctor, Drift, Finding, Group, Severity};
use crate::edit::json::{Dialect, JsonDoc};
use crate::edit::markdown::{self, BLOCK_VERSION};
use crate::edit::text::Encoding;
use crate::edit::toml::{Entry, EntryValue, TomlDoc};
use crate::engine::{self, Change, Content, Mode};
use crate::report;
use crate::target::{Desired, Format, Fragment, Scope, Target, is_hook_group_for};

/// Keys memloop writes in a server entry, in any agent's file: an entry made only of these was
/// memloop's, written for another memloop.toml.
const SERVER_KEYS: &[&str] = &[
    "type",
    "url",
    "headers",
    "command",
    "args",
    "env",
    "environment",
    "enabled",
    "transport",
    "bearerTokenEnvVar",
];

pub fn check(d: &mut Doctor) {
    // The user's files matter only where their agent runs (CI has neither).
    let targets: Vec<Target> = d
        .wanted
        .targets
        .iter()
        .filter(|t| t.scope == Scope::Project || t.agents.iter().any(|a| d.agent(*a).installed()))
        .cloned()
        .collect();
    for target in &targets {
        let originals = |path: &Path| d.repo.state.original(path);
        match engine::plan(
            &d.repo.root,
            std::slice::from_ref(target),
            Mode::Install,
            &originals,
        ) {
            Ok(changes) => {
                for change in changes {
                    classify_change(d, &change);
                }
            }
            Err(engine::PlanError::Refused(refusals)) => {
                for refusal in refusals {
                    d.refused(group_of(target), "parse", &refusal);
                }
            }
            Err(engine::PlanError::Other(err)) => d.push(
                Finding::error(group_of(target), "drift", format!("{err:#}"))
                    .file(&target.display)
                    .fix("fix the cause named above, then run `memloop doctor` again"),
            ),
        }
    }
}

/// The agent a file belongs to; files several agents read belong to memloop's group.
pub fn group_of(target: &Target) -> Group {
    match target.agents.as_slice() {
        [one] => (*one).into(),
        _ => Group::Memloop,
    }
}

struct State {
    drift: Drift,
    what: String,
    line: Option<usize>,
}

fn classify_change(d: &mut Doctor, change: &Change) {
    let target = &change.target;
    let written_by_memloop = d
        .repo
        .state
        .unchanged_since_write(&change.write_path, &change.before);
    let states = match &target.desired {
        Desired::Symlink { target: link } => vec![(symlink_state(&change.before, link), false)],
        Desired::Whole { content } => vec![(whole_state(&change.before, content), false)],
        Desired::Fragments { format, fragments } => {
            let text = Encoding::decode(change.before.text().as_bytes(), "")
                .map(|(t, _)| t)
                .unwrap_or_default();
            fragments
                .iter()
                // The agent's own member: nothing of memloop's to check.
                .filter(|fragment| !matches!(fragment, Fragment::AgentBookkeeping { .. }))
                .map(|fragment| {
                    // OpenCode adds a missing `$schema` itself (rewriting the file): not fatal.
                    let soft = matches!(fragment, Fragment::JsonFirstMember { .. });
                    let state = fragment_state(
                        &text,
                        *format,
                        fragment,
                        &change.before,
                        written_by_memloop,
                    );
                    (state, soft)
                })
                .collect()
        }
    };
    let group = group_of(target);
    let mut diff = Some(report::unified(change)).filter(|d| !d.is_empty());
    let user = target.scope == Scope::User;
    let sync = d.sync_command(user);
    for (state, soft) in states {
        let severity = match state.drift {
            Drift::Current => Severity::Ok,
            Drift::Missing if soft => Severity::Warning,
            Drift::EditedByUser => Severity::Warning,
            // The user's own files are per machine: CI checks the repository.
            Drift::Missing | Drift::Stale if user => Severity::Warning,
            Drift::Missing | Drift::Stale | Drift::Duplicated => Severity::Error,
        };
        let message = match state.drift {
            Drift::Current => format!("{} is current", state.what),
            Drift::EditedByUser => format!(
                "{} was edited by hand; sync would put memloop's version back",
                state.what
            ),
            Drift::Stale => format!(
                "{} is stale (written by an older memloop or for another memloop.toml)",
                state.what
            ),
            Drift::Missing => format!("{} is missing", state.what),
            Drift::Duplicated => format!(
                "{} is duplicated: every copy runs, so the gate or server acts twice",
                state.what
            ),
        };
        let mut finding = Finding::new(group, "drift", severity, message).at(
            &target.display,
            state
                .line
                .or(Some(1))
                .filter(|_| change.before != Content::Missing),
        );
        finding.drift = Some(state.drift);
        if state.drift != Drift::Current {
            finding = match state.drift {
                Drift::EditedByUser => finding.fix(format!(
                    "keep your edit by changing memloop.toml to match, or run `{sync}` to restore memloop's version"
                )),
                _ => finding.by_sync(sync),
            };
            finding.sync_fixes = state.drift != Drift::EditedByUser;
            finding.diff = diff.take();
        }
        d.push(finding);
    }
}

fn symlink_state(before: &Content, link: &str) -> State {
    let what = format!("the link AGENTS.md -> {link}");
    let drift = match before {
        Content::Link { target } if target == link => Drift::Current,
        Content::Missing => Drift::Missing,
        Content::Link { .. } => Drift::EditedByUser,
        Content::File { text } if text.trim_end() == link => Drift::Stale,
        Content::File { .. } => Drift::EditedByUser,
    };
    State {
        drift,
        what,
        line: None,
    }
}

/// memloop's whole files start with `// memloop <what> v<N>`.
fn whole_state(before: &Content, content: &str) -> State {
    let header = |text: &str| text.lines().next().unwrap_or("").to_owned();
    // `// memloop opencode plugin v1`: the number after the last `v`.
    let version =
        |text: &str| -> Option<u32> { header(text).rsplit_once(" v")?.1.trim().parse().ok() };
    let what = if header(content).starts_with("// memloop pi extension") {
        "the memloop Pi extension".to_owned()
    } else {
        "the memloop OpenCode plugin".to_owned()
    };
    let drift = match before {
        Content::Missing => Drift::Missing,
        Content::File { text } if text == content => Drift::Current,
        // A newer memloop's plugin is its own business (the version check warns about it).
        Content::File { text }
            if header(text).starts_with("// memloop ")
                && version(text)
                    .zip(version(content))
                    .is_some_and(|(theirs, ours)| theirs > ours) =>
        {
            Drift::Current
        }
        Content::File { text }
            if header(text) != header(content) && header(text).starts_with("// memloop ") =>
        {
            Drift::Stale
        }
        _ => Drift::EditedByUser,
    };
    State {
        drift,
        what,
        line: None,
    }
}

fn fragment_state(
    text: &str,
    format: Format,
    fragment: &Fragment,
    before: &Content,
    written_by_memloop: bool,
) -> State {
    let edited_or_stale = |looks_like_ours: bool| {
        if written_by_memloop || looks_like_ours {
            Drift::Stale
        } else {
            Drift::EditedByUser
        }
    };
    if let Fragment::Retired(inner) = fragment {
        let there = fragment_state(text, format, inner, before, written_by_memloop);
        let off = there.drift == Drift::Missing;
        return State {
            drift: if off { Drift::Current } else { Drift::Stale },
            what: format!(
                "{} (switched off by [memory] session_start = false)",
                there.what
            ),
            line: there.line.filter(|_| !off),
        };
    }
    let missing = *before == Content::Missing;
    match (fragment, format) {
        (Fragment::JsonMember { path, value }, Format::Json(dialect)) => {
            let what = format!("`{}`", path.join("."));
            let current = parse(text, dialect).and_then(|v| get(&v, path).cloned());
            let steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            let drift = match current {
                _ if missing => Drift::Missing,
                None => Drift::Missing,
                Some(current) if &current == value => Drift::Current,
                Some(current) => edited_or_stale(only_server_keys(&current)),
            };
            State {
                drift,
                what,
                line: json_line(text, &steps),
            }
        }
        (Fragment::JsonListItem { path, item, .. }, Format::Json(dialect)) => {
            let what = format!("`{item}` in `{}`", path.join("."));
            let current = parse(text, dialect).and_then(|v| get(&v, path).cloned());
            let steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            let listed = match &current {
                Some(Value::String(name)) => name == item,
                Some(Value::Array(names)) => names
                    .iter()
                    .any(|name| name.as_str() == Some(item.as_str())),
                _ => false,
            };
            State {
                drift: if listed {
                    Drift::Current
                } else {
                    Drift::Missing
                },
                what,
                line: json_line(text, &steps),
            }
        }
        (Fragment::JsonFirstMember { key, value }, Format::Json(dialect)) => {
            let what = format!("`{key}` (first key, so the agent never rewrites the file)");
            let drift = match parse(text, dialect).and_then(|v| v.get(key).cloned()) {
                None => Drift::Missing,
                Some(v) if &v == value => Drift::Current,
                Some(_) => Drift::EditedByUser,
            };
            State {
                drift,
                what,
                line: json_line(text, &[Step::Key(key)]),
            }
        }
        (Fragment::JsonArrayItem { path, value, .. }, Format::Json(dialect)) => {
            let what = format!("{value} in `{}`", path.join("."));
            let holds = parse(text, dialect)
                .and_then(|v| get(&v, path).cloned())
                .and_then(|v| v.as_array().cloned())
                .is_some_and(|items| items.contains(value));
            let steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            State {
                drift: if holds {
                    Drift::Current
                } else {
                    Drift::Missing
                },
                what,
                line: json_line(text, &steps),
            }
        }
        (
            Fragment::JsonHookGroup {
                path,
                value,
                command,
            },
            Format::Json(dialect),
        ) => {
            let what = format!("the `{}` hook running `{command}`", path.join("."));
            let items = parse(text, dialect)
                .and_then(|v| get(&v, path).cloned())
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            let ours: Vec<usize> = items
                .iter()
                .enumerate()
                .filter(|(_, group)| is_hook_group_for(group, command))
                .map(|(i, _)| i)
                .collect();
            let mentions = items
                .iter()
                .position(|item| item.to_string().contains(command.as_str()));
            let mut steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            let (drift, index) = match ours.as_slice() {
                [] => match mentions {
                    // memloop's command in another shape: a hand-made or older entry.
                    Some(i) => (Drift::Stale, Some(i)),
                    None => (Drift::Missing, None),
                },
                [one] if &items[*one] == value => (Drift::Current, Some(*one)),
                [one] => (edited_or_stale(true), Some(*one)),
                [_, second, ..] => (Drift::Duplicated, Some(*second)),
            };
            if let Some(index) = index {
                steps.push(Step::Index(index));
            }
            State {
                drift,
                what,
                line: json_line(text, &steps),
            }
        }
        (Fragment::TomlEntry { key, entry }, Format::Toml) => toml_state(text, key, entry),
        (
            Fragment::TomlTable {
                path,
                fields,
                whole,
            },
            Format::Toml,
        ) => {
            let what = format!("[{}]", crate::edit::toml::dotted(path));
            let doc = TomlDoc::parse(text, "").ok();
            let table = doc.as_ref().and_then(|doc| doc.table_at(path));
            let ours = |k: &str| fields.iter().any(|(f, _)| f == k);
            let drift = match table {
                _ if missing => Drift::Missing,
                None => Drift::Missing,
                Some(table) if !fields.iter().any(|(k, _)| table.contains_key(k)) => Drift::Missing,
                Some(table) => {
                    let same = fields.iter().all(|(k, v)| {
                        table
                            .get(k)
                            .and_then(toml_edit::Item::as_value)
                            .is_some_and(|existing| v.matches(existing))
                    });
                    let only_ours = table.iter().all(|(k, _)| ours(k));
                    if same && (only_ours || !whole) {
                        Drift::Current
                    } else {
                        edited_or_stale(only_ours)
                    }
                }
            };
            let line = path.last().and_then(|key| line_containing(text, key));
            State { drift, what, line }
        }
        (Fragment::MarkdownBlock { body }, Format::Markdown) => {
            markdown_state(text, body, written_by_memloop)
        }
        _ => State {
            drift: Drift::Missing,
            what: "a fragment of an unexpected format".into(),
            line: None,
        },
    }
}

fn parse(text: &str, dialect: Dialect) -> Option<Value> {
    JsonDoc::parse(text, dialect, "")
        .ok()
        .map(|doc| doc.value())
}

fn get<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

fn only_server_keys(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| map.keys().all(|k| SERVER_KEYS.contains(&k.as_str())))
}

fn toml_state(text: &str, key: &str, entry: &Entry) -> State {
    let what = format!("the [[{key}]] entry running `{}`", entry.identity.1);
    let entries = toml_entries(text, key);
    let ours: Vec<&Vec<(String, String)>> = entries
        .iter()
        .filter(|fields| {
            fields.iter().any(|(k, v)| {
                *k == entry.identity.0
                    && *v == render(&EntryValue::String(entry.identity.1.clone()))
            })
        })
        .collect();
    let wanted: Vec<(String, String)> = entry
        .fields
        .iter()
        .map(|(k, v)| (k.clone(), render(v)))
        .collect();
    let drift = match ours.as_slice() {
        [] => Drift::Missing,
        [one] if same_fields(one, &wanted) => Drift::Current,
        [one]
            if one
                .iter()
                .all(|(k, _)| ["event", "command", "timeout", "matcher"].contains(&k.as_str())) =>
        {
            Drift::Stale
        }
        [_] => Drift::EditedByUser,
        _ => Drift::Duplicated,
    };
    let line = line_containing(text, &entry.identity.1);
    State { drift, what, line }
}

fn same_fields(a: &[(String, String)], b: &[(String, String)]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    b.sort();
    a == b
}

fn render(value: &EntryValue) -> String {
    match value {
        EntryValue::String(s) => format!("{s:?}"),
        EntryValue::Integer(i) => i.to_string(),
        other => other.to_value().to_string().trim().to_owned(),
    }
}

/// Every entry of the TOML array `key` (tables or inline tables), as keys and rendered values.
pub fn toml_entries(text: &str, key: &str) -> Vec<Vec<(String, String)>> {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let show = |value: &toml_edit::Value| match value {
        toml_edit::Value::String(s) => format!("{:?}", s.value()),
        other => other.to_string().trim().to_owned(),
    };
    match doc.get(key) {
        Some(toml_edit::Item::ArrayOfTables(tables)) => tables
            .iter()
            .map(|table| {
                table
                    .iter()
                    .map(|(k, item)| {
                        (
                            k.to_owned(),
                            item.as_value()
                                .map(show)
                                .unwrap_or_else(|| item.to_string()),
                        )
                    })
                    .collect()
            })
            .collect(),
        Some(toml_edit::Item::Value(toml_edit::Value::Array(array))) => array
            .iter()
            .filter_map(|v| v.as_inline_table())
            .map(|table| table.iter().map(|(k, v)| (k.to_owned(), show(v))).collect())
            .collect(),
        _ => Vec::new(),
    }
}

fn markdown_state(text: &str, body: &str, written_by_memloop: bool) -> State {
    let is_import = body == crate::instructions::IMPORT;
    let what = if is_import {
        "the `@AGENTS.md` import block".to_owned()
    } else {
        "the rules block".to_owned()
    };
    let spans = markdown::find(text, "").unwrap_or_default();
    let Some(first) = spans.first() else {
        return State {
            drift: Drift::Missing,
            what,
            line: None,
        };
    };
    let line = Some(text[..first.start].matches('\n').count() + 1);
    let inner: String = text[first.start..first.end]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("<!-- memloop:end"))
        .collect::<Vec<_>>()
        .join("\n");
    // A newer memloop's block is its own business (the version check warns about it).
    let newer = first.version.is_some_and(|v| v > BLOCK_VERSION);
    let drift = if spans.len() > 1 {
        Drift::Duplicated
    } else if inner.trim_end() == body.trim_end() && (first.version == Some(BLOCK_VERSION) || newer)
    {
        Drift::Current
    } else if first.version.is_none_or(|v| v < BLOCK_VERSION)
        || written_by_memloop
        || inner.trim() == crate::instructions::IMPORT
        || inner.trim_end() == crate::instructions::RULES.trim_end()
    {
        Drift::Stale
    } else {
        Drift::EditedByUser
    };
    State { drift, what, line }
}
