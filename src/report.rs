//! How changes are shown: one line per file, or unified diffs (coloured on a terminal, JSON for bots).

use std::fmt::Write as _;

use serde::Serialize;
use similar::TextDiff;

use crate::engine::{Change, Content};
use crate::target::{Desired, Fragment};

/// What happens to a path, in the words the summary uses.
pub fn verb(change: &Change) -> &'static str {
    match (&change.before, &change.after) {
        (before, after) if before == after => "unchanged",
        (_, Content::Missing) => "removed",
        (Content::Missing, Content::Link { .. }) => "linked",
        (_, Content::Link { .. }) => "relinked",
        (Content::Missing, _) => "created",
        _ => "updated",
    }
}

/// What memloop owns in the file, briefly.
pub fn owned(change: &Change) -> String {
    match &change.target.desired {
        Desired::Symlink { target } => format!("-> {target}"),
        Desired::Whole { .. } => match change.target.path.file_name().and_then(|n| n.to_str()) {
            Some(crate::config::FILE_NAME) => "the desired state (commit it)".into(),
            Some(name) if name.ends_with(".js") => match change.target.agents.as_slice() {
                [crate::config::AgentId::Kilo] => "the Kilo gate plugin".into(),
                [crate::config::AgentId::Pi] => "the Pi extension (memory tools and gate)".into(),
                _ => "the OpenCode gate plugin".into(),
            },
            Some("AGENTS.md") => "the rules (whole file)".into(),
            _ => "the whole file".into(),
        },
        Desired::Fragments { fragments, .. } => fragments
            .iter()
            .filter(|fragment| {
                !matches!(
                    fragment,
                    Fragment::Retired(_) | Fragment::AgentBookkeeping { .. }
                )
            })
            .map(|fragment| match fragment {
                Fragment::JsonMember { path, .. } => path.join("."),
                Fragment::JsonFirstMember { key, .. } => key.clone(),
                Fragment::JsonHookGroup { path, command, .. } => {
                    format!("{} ({command})", path.join("."))
                }
                Fragment::JsonListItem { path, item, .. } => format!("{} ({item})", path.join(".")),
                Fragment::JsonArrayItem { path, value, .. } => {
                    format!("{} ({value})", path.join("."))
                }
                Fragment::TomlEntry { key, entry } => format!("[[{key}]] {}", entry.identity.1),
                Fragment::TomlTable { path, .. } => {
                    format!("[{}]", crate::edit::toml::dotted(path))
                }
                Fragment::MarkdownBlock { body } if body == crate::instructions::IMPORT => {
                    "@AGENTS.md import".into()
                }
                Fragment::MarkdownBlock { .. } => "rules block".into(),
                Fragment::Retired(_) | Fragment::AgentBookkeeping { .. } => {
                    unreachable!("filtered out above")
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// One line per file: verb, path, what memloop owns there.
pub fn summary(changes: &[Change]) -> String {
    let width = changes
        .iter()
        .map(|c| c.target.display.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for change in changes {
        let _ = writeln!(
            out,
            "  {:<9} {:<width$}  {}",
            verb(change),
            change.target.display,
            owned(change)
        );
        if let Some(note) = &change.target.note {
            let _ = writeln!(out, "            note: {note}");
        }
    }
    out
}

fn side(content: &Content) -> String {
    match content {
        Content::Missing => String::new(),
        Content::File { text } => text.clone(),
        Content::Link { target } => format!("(symlink to {target})\n"),
    }
}

/// The unified diff of one change (empty when nothing changes).
pub fn unified(change: &Change) -> String {
    if change.is_noop() {
        return String::new();
    }
    let (before, after) = (side(&change.before), side(&change.after));
    let name = &change.target.display;
    let old = if change.before == Content::Missing {
        "/dev/null".to_owned()
    } else {
        format!("a/{name}")
    };
    let new = if change.after == Content::Missing {
        "/dev/null".to_owned()
    } else {
        format!("b/{name}")
    };
    TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&old, &new)
        .to_string()
}

/// All diffs, coloured when `color` holds.
pub fn diffs(changes: &[Change], color: bool) -> String {
    let mut out = String::new();
    for change in changes {
        let diff = unified(change);
        if diff.is_empty() {
            continue;
        }
        for line in diff.lines() {
            let paint = match line.as_bytes().first() {
                _ if !color => None,
                Some(b'+') if !line.starts_with("+++") => Some("32"),
                Some(b'-') if !line.starts_with("---") => Some("31"),
                Some(b'@') => Some("36"),
                _ => None,
            };
            match paint {
                Some(code) => {
                    let _ = writeln!(out, "\x1b[{code}m{line}\x1b[0m");
                }
                None => {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
        if !diff.ends_with('\n') {
            out.push_str("\\ No newline at end of file\n");
        }
    }
    out
}

#[derive(Serialize)]
struct JsonReport<'a> {
    version: u32,
    changed: bool,
    files: Vec<JsonFile<'a>>,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    path: &'a str,
    status: &'static str,
    owned: String,
    diff: String,
}

/// The stable JSON form of a plan, for bots.
pub fn json(changes: &[Change]) -> String {
    let files = changes
        .iter()
        .map(|change| JsonFile {
            path: &change.target.display,
            status: verb(change),
            owned: owned(change),
            diff: unified(change),
        })
        .collect();
    let report = JsonReport {
        version: 1,
        changed: changes.iter().any(|c| !c.is_noop()),
        files,
    };
    let mut text = serde_json::to_string_pretty(&report).expect("report serializes");
    text.push('\n');
    text
}
