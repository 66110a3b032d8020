//! The engine: reads each target file, computes its new content with the format's editor, and
//! hands the list of changes to a view (diff, sync, uninstall). Nothing else decides what a
//! file holds.

pub mod apply;
pub mod place;
pub mod state;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::edit::Refusal;
use crate::edit::json::JsonDoc;
use crate::edit::markdown;
use crate::edit::text::Encoding;
use crate::edit::toml::TomlDoc;
use crate::target::{Desired, Format, Fragment, Target, is_hook_group_for};

/// What is (or will be) at a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Content {
    Missing,
    File { text: String },
    Link { target: String },
}

impl Content {
    pub fn text(&self) -> &str {
        match self {
            Content::File { text } => text,
            _ => "",
        }
    }

    /// A short fingerprint, to tell later whether someone else changed the file.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let bytes = serde_json::to_vec(self).expect("content serializes");
        Sha256::digest(&bytes)
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// One path's transition.
#[derive(Debug, Clone)]
pub struct Change {
    pub target: Target,
    /// Where the bytes really go: the target, or the file its in-repository symlink points to.
    pub write_path: PathBuf,
    pub before: Content,
    pub after: Content,
}

impl Change {
    pub fn is_noop(&self) -> bool {
        self.before == self.after
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Install,
    Remove,
}

/// What memloop knew about a file before it first touched it (from the machine's install state).
pub type Originals<'a> = &'a dyn Fn(&Path) -> Option<Content>;

/// Plans every target. All refusals are collected, so the user sees every broken file at once.
pub fn plan(
    root: &Path,
    targets: &[Target],
    mode: Mode,
    originals: Originals,
) -> Result<Vec<Change>, PlanError> {
    let mut changes = Vec::new();
    let mut refusals = Vec::new();
    for target in targets {
        match plan_one(root, target, mode, originals) {
            Ok(change) => changes.push(change),
            Err(PlanError::Refused(mut found)) => refusals.append(&mut found),
            Err(other) => return Err(other),
        }
    }
    if refusals.is_empty() {
        Ok(changes)
    } else {
        Err(PlanError::Refused(refusals))
    }
}

#[derive(Debug)]
pub enum PlanError {
    /// Files memloop will not touch (exit 2, nothing written).
    Refused(Vec<Refusal>),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for PlanError {
    fn from(err: anyhow::Error) -> Self {
        PlanError::Other(err)
    }
}

impl From<Refusal> for PlanError {
    fn from(refusal: Refusal) -> Self {
        PlanError::Refused(vec![refusal])
    }
}

fn plan_one(
    root: &Path,
    target: &Target,
    mode: Mode,
    originals: Originals,
) -> Result<Change, PlanError> {
    let display = target.display.as_str();
    if let Desired::Symlink { .. } = &target.desired {
        place::confine(root, &target.path, target.scope, display, true)?;
        let before = read(&target.path, display)?;
        let after = planned(target, &before, mode, originals(&target.path))?;
        return Ok(Change {
            target: target.clone(),
            write_path: target.path.clone(),
            before,
            after,
        });
    }

    let write_path = place::confine(root, &target.path, target.scope, display, false)?;
    let mut before = read(&write_path, display)?;
    if mode == Mode::Install
        && let Desired::Fragments { format, .. } = &target.desired
    {
        before = settled(&write_path, display, before, *format)?;
    }
    let after = planned(target, &before, mode, originals(&write_path))?;
    Ok(Change {
        target: target.clone(),
        write_path,
        before,
        after,
    })
}

/// What `target` holds after `mode` when it holds `before` now; `original` is what it held
/// before memloop first touched it, when this machine knows.
fn planned(
    target: &Target,
    before: &Content,
    mode: Mode,
    original: Option<Content>,
) -> Result<Content, PlanError> {
    let display = target.display.as_str();
    Ok(match (&target.desired, mode) {
        (Desired::Symlink { target: link }, Mode::Install) => Content::Link {
            target: link.clone(),
        },
        (Desired::Symlink { target: link }, Mode::Remove) => match before {
            Content::Link { target: current } if current == link => {
                original.unwrap_or(Content::Missing)
            }
            _ => before.clone(),
        },
        (Desired::Whole { content }, Mode::Install) => Content::File {
            text: content.clone(),
        },
        (Desired::Whole { content }, Mode::Remove) => match before {
            Content::File { text } if text == content => original.unwrap_or(Content::Missing),
            _ => before.clone(),
        },
        // Nothing to write where every fragment is switched off: a missing file stays missing
        // (not an empty `{}` in the user's home).
        (Desired::Fragments { fragments, .. }, Mode::Install)
            if *before == Content::Missing
                && fragments.iter().all(|f| {
                    matches!(f, Fragment::Retired(_) | Fragment::AgentBookkeeping { .. })
                }) =>
        {
            Content::Missing
        }
        (Desired::Fragments { format, fragments }, mode) => {
            let raw = before.text();
            let (mut text, mut encoding) = Encoding::decode(raw.as_bytes(), display)?;
            if mode == Mode::Remove
                && encoding.crlf
                && original.as_ref().is_some_and(mixes_line_ends)
            {
                // The original mixed LF and CRLF, and memloop's edit left the file all CRLF:
                // what comes back from the original (a member `sync --force` replaced) brings
                // its own line ends, so the file is edited with the ones it has, and nothing is
                // converted on the way out (CRLF would become CR CR LF).
                text = raw.strip_prefix('\u{feff}').unwrap_or(raw).to_owned();
                encoding.crlf = false;
            }
            let original_view = original.as_ref().map(|o| original_view(o, *format));
            let edited = edit(
                &text,
                *format,
                fragments,
                mode,
                display,
                original_view.as_ref(),
            )?;
            validate(&edited, *format, display)?;
            // What the agent wrote into it for itself does not make the file the user's.
            let bookkeeping = bookkeeping_keys(fragments);
            let gone = *before == Content::Missing
                || match &original {
                    Some(Content::Missing) => {
                        is_empty(&without(&edited, *format, &bookkeeping), *format)
                    }
                    Some(_) => false,
                    // Nothing known (another machine, a second uninstall): the file goes only
                    // when it is byte for byte what memloop creates from nothing.
                    None => is_created_from_nothing(
                        &without(&text, *format, &bookkeeping),
                        *format,
                        fragments,
                    ),
                };
            if mode == Mode::Remove && gone {
                Content::Missing
            } else {
                let encoding = if *before == Content::Missing {
                    Encoding::default()
                } else {
                    encoding
                };
                Content::File {
                    text: String::from_utf8(encoding.encode(&edited))
                        .expect("encoding keeps UTF-8"),
                }
            }
        }
    })
}

/// Whether `current` is exactly what installing `target` into `original` gives: nothing but
/// memloop changed the file since it held `original`.
pub fn installed_over(target: &Target, original: &Content, current: &Content) -> bool {
    planned(target, original, Mode::Install, Some(original.clone())).is_ok_and(|c| c == *current)
}

/// What the file held before memloop, once the user changed it after memloop's last write:
/// what an uninstall would leave of `current`, given what was known before. Restoring the
/// first install's bytes instead would throw the user's later edits away.
pub fn rebased_original(target: &Target, current: &Content, original: Option<Content>) -> Content {
    planned(target, current, Mode::Remove, original).unwrap_or_else(|_| current.clone())
}

/// Reads a path without following a final symlink. Anything but a regular file, a symlink or
/// nothing is refused without being opened, so a FIFO or a device never blocks memloop.
pub fn read(path: &Path, display: &str) -> Result<Content, PlanError> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Content::Missing),
        Err(err) => {
            return Err(anyhow::Error::new(err)
                .context(format!("cannot read {display}"))
                .into());
        }
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        let target = fs_err::read_link(path).map_err(anyhow::Error::from)?;
        return Ok(Content::Link {
            target: target.to_string_lossy().into_owned(),
        });
    }
    let not_regular = |meta: &std::fs::Metadata| {
        PlanError::from(Refusal::whole(
            display,
            format!(
                "is {}, not a regular file",
                crate::files::describe_kind(&meta.file_type())
            ),
            "memloop reads and writes only regular files; remove it or replace it with a file",
        ))
    };
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let bytes = match crate::files::read_regular(path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return Err(match std::fs::symlink_metadata(path) {
                Ok(meta) if !meta.is_file() => not_regular(&meta),
                _ => anyhow::Error::new(err)
                    .context(format!("cannot read {display}"))
                    .into(),
            });
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Content::File { text }),
        Err(err) => match Encoding::decode(err.as_bytes(), display) {
            Err(refusal) => Err(PlanError::Refused(vec![refusal])),
            Ok(_) => Err(PlanError::Other(anyhow::anyhow!("{display}: cannot read"))),
        },
    }
}

/// How long an empty config file is watched for the rest of an agent's rewrite to arrive.
const SETTLE_TRIES: u32 = 10;
const SETTLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// An agent that rewrites its config in place truncates it first: an empty file is read again
/// after a short wait, and a JSON or TOML one that stays empty is refused, never taken for an
/// empty document (an edit built on it would hold only memloop's fragments).
fn settled(
    path: &Path,
    display: &str,
    mut before: Content,
    format: Format,
) -> Result<Content, PlanError> {
    let is_blank = |content: &Content| matches!(content, Content::File { text } if text.trim_start_matches('\u{feff}').trim().is_empty());
    for _ in 0..SETTLE_TRIES {
        if !is_blank(&before) {
            return Ok(before);
        }
        std::thread::sleep(SETTLE_PAUSE);
        before = read(path, display)?;
    }
    if !is_blank(&before) {
        return Ok(before);
    }
    // An empty Markdown file is a document like any other (a `touch CLAUDE.md`): the block
    // goes in. Emptiness only loses structure in JSON and TOML, where it is refused.
    let hint = match format {
        Format::Markdown => return Ok(before),
        Format::Toml => {
            "if it is meant to be empty, delete it (or put a comment line in it) and run again"
        }
        _ => "if it is meant to be empty, write `{}` in it (or delete it) and run again",
    };
    Err(Refusal::at(
        display,
        1,
        1,
        "is empty; memloop never takes an empty file for an empty document (an agent may be in the middle of rewriting it)",
        hint,
    )
    .into())
}

/// What the file looked like before memloop, parsed, to decide which parents memloop created.
/// Whether `content` is a file whose lines end in both LF and CRLF (kept as they are by
/// [`Encoding`], not normalized).
fn mixes_line_ends(content: &Content) -> bool {
    match content {
        Content::File { text } => {
            text.contains("\r\n")
                && Encoding::decode(text.as_bytes(), "").is_ok_and(|(_, encoding)| !encoding.crlf)
        }
        _ => false,
    }
}

enum OriginalView {
    /// The parsed value and the text it came from (to give a replaced member its bytes back).
    Json(Option<(Value, String)>),
    Toml(Option<TomlDoc>),
    Other,
}

fn original_view(original: &Content, format: Format) -> OriginalView {
    let text = match original {
        Content::File { text } => Encoding::decode(text.as_bytes(), "")
            .map(|(t, _)| t)
            .unwrap_or_default(),
        _ => String::new(),
    };
    match format {
        Format::Json(dialect) => OriginalView::Json(
            JsonDoc::parse(&text, dialect, "")
                .ok()
                .map(|doc| (doc.value(), text.clone())),
        ),
        Format::Toml => OriginalView::Toml(TomlDoc::parse(&text, "").ok()),
        Format::Markdown => OriginalView::Other,
    }
}

fn edit(
    text: &str,
    format: Format,
    fragments: &[Fragment],
    mode: Mode,
    display: &str,
    original: Option<&OriginalView>,
) -> Result<String, Refusal> {
    match format {
        Format::Json(dialect) => {
            let base = if text.trim().is_empty() { "{}\n" } else { text };
            let mut doc = JsonDoc::parse(base, dialect, display)?;
            // `None`: nothing is known about the file before memloop (another machine, or a
            // second uninstall), so nothing but memloop's own members is provably memloop's.
            let original_json: Option<(Value, &str)> = match original {
                Some(OriginalView::Json(Some((value, text)))) => Some((value.clone(), text)),
                Some(_) => Some((Value::Object(Default::default()), "{}")),
                None => None,
            };
            let original_value = original_json.as_ref().map(|(value, _)| value);
            // A parent may go when it is empty and did not exist before memloop.
            let prune =
                |path: &[String]| original_value.is_some_and(|value| lookup(value, path).is_none());
            let mut restore: Vec<&[String]> = Vec::new();
            for (fragment, mode) in effective(fragments, mode) {
                match (fragment, mode) {
                    (Fragment::JsonMember { path, value }, Mode::Install) => {
                        doc.set(path, value)?
                    }
                    (Fragment::JsonMember { path, value }, Mode::Remove) => {
                        let ours = doc.get(path).as_ref() == Some(value);
                        match original_value.map(|original| lookup(original, path)) {
                            // `sync --force` replaced the user's entry: it comes back, unless
                            // the user changed it since.
                            Some(Some(_)) if ours => restore.push(path),
                            Some(Some(_)) => {}
                            Some(None) => doc.remove(path, &prune),
                            // Unknown history: only memloop's exact entry is provably its own.
                            None if ours => doc.remove(path, &prune),
                            None => {}
                        }
                    }
                    (Fragment::JsonFirstMember { key, value }, Mode::Install) => {
                        doc.ensure_first(key, value)
                    }
                    (Fragment::JsonFirstMember { key, .. }, Mode::Remove) => {
                        // Only taken back when memloop is known to have added it.
                        if original_value.is_some_and(|v| v.get(key).is_none()) {
                            doc.remove(std::slice::from_ref(key), &|_| false);
                        }
                    }
                    (
                        Fragment::JsonHookGroup {
                            path,
                            value,
                            command,
                        },
                        Mode::Install,
                    ) => {
                        doc.upsert_item(path, value, &|group| is_hook_group_for(group, command))?
                    }
                    (Fragment::JsonHookGroup { path, command, .. }, Mode::Remove) => {
                        doc.remove_items(path, &|group| is_hook_group_for(group, command), &prune)
                    }
                    (
                        Fragment::JsonListItem {
                            path,
                            item,
                            default,
                        },
                        Mode::Install,
                    ) => install_list_item(&mut doc, path, item, default)?,
                    (
                        Fragment::JsonListItem {
                            path,
                            item,
                            default,
                        },
                        Mode::Remove,
                    ) => {
                        let before = original_value.map(|original| lookup(original, path));
                        if remove_list_item(&mut doc, path, item, default, before, &prune) {
                            restore.push(path);
                        }
                    }
                    (Fragment::JsonArrayItem { path, value, .. }, Mode::Install) => {
                        doc.upsert_item(path, value, &|item| item == value)?
                    }
                    (
                        Fragment::JsonArrayItem {
                            path,
                            value,
                            memloops,
                        },
                        Mode::Remove,
                    ) => {
                        // A user's own equal element (there before memloop, or with no history
                        // to tell, unless only memloop has a use for it) is not memloop's to take.
                        let held_before = match original_value {
                            None => !memloops,
                            Some(original) => lookup(original, path)
                                .and_then(Value::as_array)
                                .is_some_and(|items| items.contains(value)),
                        };
                        // Containers emptied by taking memloop's own elements out go too
                        // where nothing is known of the file before: empty, they mean nothing.
                        let prune_own = |path: &[String]| {
                            original_value.is_none_or(|value| lookup(value, path).is_none())
                        };
                        let prune: &dyn Fn(&[String]) -> bool =
                            if *memloops { &prune_own } else { &prune };
                        if !held_before {
                            doc.remove_items(path, &|item| item == value, prune)
                        }
                    }
                    // The agent's own: never memloop's to write or take back.
                    (Fragment::AgentBookkeeping { .. }, _) => {}
                    _ => unreachable!("a JSON file holds JSON fragments"),
                }
            }
            let mut out = doc.to_text();
            if let Some((_, original_text)) = original_json {
                for path in restore {
                    out =
                        crate::edit::json::splice_member(&out, original_text, path).unwrap_or(out);
                }
            }
            // An untouched empty file stays empty rather than becoming `{}`.
            Ok(if text.trim().is_empty() && mode == Mode::Remove {
                text.to_owned()
            } else {
                out
            })
        }
        Format::Toml => {
            let mut doc = TomlDoc::parse(text, display)?;
            let original_doc = match original {
                Some(OriginalView::Toml(Some(original))) => Some(original),
                _ => None,
            };
            for (fragment, mode) in effective(fragments, mode) {
                match (fragment, mode) {
                    (Fragment::TomlEntry { key, entry }, Mode::Install) => {
                        doc.upsert_entry(key, entry)?
                    }
                    (Fragment::TomlEntry { key, entry }, Mode::Remove) => {
                        // An emptied `hooks` goes only when memloop is known to have added it.
                        let drop_empty = match original {
                            Some(OriginalView::Toml(Some(original))) => !original.has_key(key),
                            Some(_) => true,
                            None => false,
                        };
                        doc.remove_entry(key, entry, drop_empty)
                    }
                    (
                        Fragment::TomlTable {
                            path,
                            fields,
                            whole,
                        },
                        Mode::Install,
                    ) => doc.upsert_table(path, fields, *whole)?,
                    (Fragment::TomlTable { path, fields, .. }, Mode::Remove) => {
                        doc.remove_table(path, fields, original_doc)
                    }
                    _ => unreachable!("a TOML file holds TOML fragments"),
                }
            }
            Ok(doc.to_text())
        }
        Format::Markdown => {
            let body = fragments.iter().find_map(|f| match f {
                Fragment::MarkdownBlock { body } => Some(body.as_str()),
                _ => None,
            });
            match (mode, body) {
                (Mode::Install, Some(body)) => markdown::upsert(text, body, display),
                _ => markdown::remove(text, display),
            }
        }
    }
}

/// Whether `value` (a string or an array of strings) names `item`.
fn lists(value: &Value, item: &str) -> bool {
    match value {
        Value::String(name) => name == item,
        Value::Array(names) => names.iter().any(|name| name.as_str() == Some(item)),
        _ => false,
    }
}

fn created_list(item: &str, default: &[String]) -> Value {
    let mut names: Vec<Value> = default
        .iter()
        .map(|name| Value::from(name.as_str()))
        .collect();
    if !default.iter().any(|name| name == item) {
        names.push(Value::from(item));
    }
    Value::Array(names)
}

fn install_list_item(
    doc: &mut JsonDoc,
    path: &[String],
    item: &str,
    default: &[String],
) -> Result<(), Refusal> {
    match doc.get(path) {
        None => doc.set(path, &created_list(item, default)),
        Some(found) if lists(&found, item) => Ok(()),
        Some(Value::String(name)) => doc.set(path, &serde_json::json!([name, item])),
        Some(_) => {
            let wanted = Value::from(item);
            doc.upsert_item(path, &wanted, &|element| *element == wanted)
        }
    }
}

/// Takes back what `install_list_item` added. `before` is the member before memloop (`None`:
/// nothing known). True when the member must get the user's own bytes back (a lone string
/// memloop turned into a list).
fn remove_list_item(
    doc: &mut JsonDoc,
    path: &[String],
    item: &str,
    default: &[String],
    before: Option<Option<&Value>>,
    prune: &dyn Fn(&[String]) -> bool,
) -> bool {
    let Some(current) = doc.get(path) else {
        return false;
    };
    let ours = Value::from(item);
    match before {
        // The user listed it already: nothing of it is memloop's.
        Some(Some(original)) if lists(original, item) => false,
        Some(Some(Value::String(_))) => true,
        Some(Some(_)) => {
            doc.remove_items(path, &|element| *element == ours, &|_| false);
            false
        }
        Some(None) => {
            if current == created_list(item, default) {
                doc.remove(path, prune);
            } else {
                doc.remove_items(path, &|element| *element == ours, &|_| false);
            }
            false
        }
        // Unknown history: only the exact list memloop creates is provably its own.
        None => {
            if current == created_list(item, default) {
                doc.remove(path, prune);
            }
            false
        }
    }
}

/// Each fragment with what `mode` does to it: a retired one is only ever taken out.
fn effective(fragments: &[Fragment], mode: Mode) -> impl Iterator<Item = (&Fragment, Mode)> {
    fragments.iter().map(move |fragment| match fragment {
        Fragment::Retired(inner) => (inner.as_ref(), Mode::Remove),
        other => (other, mode),
    })
}

/// Re-parses an edited text: memloop never writes a file its agent could not read.
fn validate(text: &str, format: Format, display: &str) -> Result<(), Refusal> {
    let result = match format {
        Format::Json(dialect) => JsonDoc::parse(text, dialect, display).map(drop),
        Format::Toml => TomlDoc::parse(text, display).map(drop),
        Format::Markdown => markdown::find(text, display).map(drop),
    };
    result.map_err(|refusal| Refusal {
        problem: format!(
            "memloop's edit would not parse ({}); nothing was written",
            refusal.problem
        ),
        hint: "please report this as a memloop bug, with the file".into(),
        ..refusal
    })
}

fn lookup<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

/// Whether `text` is exactly the file memloop writes where there was none: such a file held
/// nothing but memloop's. The bytes decide, not the value: the user's own `{"mcpServers": {}}`
/// that memloop added to reads differently from the file memloop creates.
fn is_created_from_nothing(text: &str, format: Format, fragments: &[Fragment]) -> bool {
    edit(
        "",
        format,
        fragments,
        Mode::Install,
        "",
        Some(&OriginalView::Other),
    )
    .is_ok_and(|created| created == text)
}

/// The root members the agent keeps in the file for itself (`Fragment::AgentBookkeeping`).
fn bookkeeping_keys(fragments: &[Fragment]) -> Vec<&str> {
    fragments
        .iter()
        .filter_map(|fragment| match fragment {
            Fragment::AgentBookkeeping { key } => Some(key.as_str()),
            _ => None,
        })
        .collect()
}

/// `text` without the root members `keys` (a JSON file; anything else, or a text that does not
/// parse, as it is).
fn without(text: &str, format: Format, keys: &[&str]) -> String {
    let Format::Json(dialect) = format else {
        return text.to_owned();
    };
    if keys.is_empty() {
        return text.to_owned();
    }
    let Ok(mut doc) = JsonDoc::parse(text, dialect, "") else {
        return text.to_owned();
    };
    for key in keys {
        doc.remove(&[(*key).to_owned()], &|_| false);
    }
    doc.to_text()
}

fn is_empty(text: &str, format: Format) -> bool {
    match format {
        Format::Json(dialect) => {
            JsonDoc::parse(text, dialect, "")
                .is_ok_and(|doc| doc.value() == Value::Object(Default::default()))
                && !text.contains("//")
                && !text.contains("/*")
        }
        Format::Toml | Format::Markdown => text.trim().is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_config_is_read_again_and_refused_when_it_stays_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "").unwrap();
        let format = Format::Json(crate::edit::json::Dialect::Strict);
        let refused = settled(&path, "settings.json", read(&path, "").unwrap(), format);
        let Err(PlanError::Refused(refusals)) = refused else {
            panic!("an empty file was taken for a document: {refused:?}");
        };
        assert!(refusals[0].problem.contains("is empty"), "{refusals:?}");
        // An agent finishing its in-place rewrite meanwhile: the rewritten file is what counts.
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(SETTLE_PAUSE * 2);
                std::fs::write(path, "{\"model\": \"opus\"}").unwrap();
            })
        };
        let found = settled(
            &path,
            "settings.json",
            Content::File {
                text: String::new(),
            },
            format,
        );
        writer.join().unwrap();
        assert_eq!(found.unwrap().text(), "{\"model\": \"opus\"}");
    }
}
