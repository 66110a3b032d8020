//! Notes and routes as small text files: front matter between `---` lines, then the body.
//!
//! One file per record keeps two branches' notes mergeable and every note reviewable in a pull
//! request. Values are written bare when that is unambiguous and JSON-quoted otherwise, so the
//! front matter stays readable (and valid YAML) while any string survives the round trip. Keys
//! this build does not know are kept verbatim, so a reviewer's additions survive a forget.

use std::fmt::Write as _;
use std::path::Path;

use crate::secrets::{Syntax, in_args};

pub use super::front_matter::Unreadable;
use super::front_matter::{FrontMatter, quote, quote_list};
use super::session::title;

/// What a note is about; the first two words of each are what the model picks from.
pub const CATEGORIES: [&str; 4] = ["decisions", "gotchas", "patterns", "context"];

/// A stored note. Its id is the file name without `.md`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    pub content: String,
    pub category: String,
    pub importance: u8,
    pub tags: Vec<String>,
    /// What the note is about, in a few words (`vat-rounding`): storing a note under the same
    /// key again replaces this one instead of adding a second.
    pub key: Option<String>,
    pub task_id: Option<String>,
    pub created: String,
    /// When it was last rewritten (a duplicate merged into it, a correction under its key).
    pub updated: Option<String>,
    /// Set when the note was forgotten: it stays on disk for `memory_restore`, out of every query.
    pub forgotten: Option<String>,
    /// The files the note is about, each with a fingerprint of its content when the note was
    /// written (see [`super::stale`]), and the commit checked out then.
    pub about: Vec<(String, String)>,
    pub commit: Option<String>,
    pub extra: Vec<String>,
}

impl Note {
    /// The files the note is about, without their fingerprints.
    pub fn paths(&self) -> Vec<&str> {
        self.about.iter().map(|(path, _)| path.as_str()).collect()
    }

    /// What in the note looks like a credential, if anything (see [`secret_in`]).
    pub fn secret(&self) -> Option<String> {
        secret_in(
            std::iter::once(self.content.as_str())
                .chain(self.tags.iter().map(String::as_str))
                .chain(self.task_id.as_deref())
                .chain(self.extra.iter().map(String::as_str)),
        )
    }
}

impl Route {
    /// What in the route looks like a credential, if anything (see [`secret_in`]).
    pub fn secret(&self) -> Option<String> {
        secret_in(
            [self.title.as_str(), self.description.as_str()]
                .into_iter()
                .chain(self.paths.iter().map(String::as_str))
                .chain(self.extra.iter().map(String::as_str)),
        )
    }
}

/// The first thing in `texts` that looks like a credential, said the way the installer says it
/// for a config value: a known token shape (`ghp_...`, `sk-...`, a JWT), a password in a URL,
/// or `NAME=value` / `--flag=value` with a credential's name. Each word is looked at alone, so
/// prose about a flag (`pass --token and the value`) is no finding; a placeholder
/// (`API_KEY=<key>`, `TOKEN=${TOKEN}`) is none either.
pub fn secret_in<'a>(texts: impl IntoIterator<Item = &'a str>) -> Option<String> {
    texts.into_iter().find_map(|text| {
        text.split_whitespace().find_map(|word| {
            let word = word.trim_matches(|c: char| {
                matches!(
                    c,
                    '`' | '"' | '\'' | ',' | ';' | '(' | ')' | '[' | ']' | '<' | '>'
                )
            });
            let word = word.trim_end_matches(['.', ':']);
            let value = word.split_once('=').map_or(word, |(_, value)| value);
            let placeholder = value.is_empty()
                || value.starts_with(['<', '{', '$', '*', '.'])
                || value.chars().all(|c| c == 'x' || c == 'X');
            if word.contains('=') && placeholder {
                return None;
            }
            in_args(&[word], Syntax::Dollar).map(|(_, problem)| problem)
        })
    })
}

/// Where something lives in the repository.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Route {
    pub title: String,
    pub description: String,
    pub paths: Vec<String>,
    pub created: String,
    pub updated: Option<String>,
    pub extra: Vec<String>,
}

/// The two kinds of record share storage, indexing and caching; this is what differs.
pub trait Record: Clone + serde::Serialize + serde::de::DeserializeOwned {
    /// Folder under `.memloop/memory/` and id prefix.
    const FOLDER: &'static str;
    const PREFIX: &'static str;
    const KIND: &'static str;
    fn parse(text: &str) -> anyhow::Result<Self>;
    fn render(&self) -> String;
    /// Whether queries may return it.
    fn searchable(&self) -> bool;
    /// The texts a query is matched against, each with a weight (a repeat count).
    fn index_texts(&self) -> Vec<(&str, u32)>;
    fn created(&self) -> &str;
    /// When it was last written: what recency counts from.
    fn at(&self) -> &str {
        self.created()
    }
    /// What it is about, when it says (a note's `key`): the index finds it by that.
    fn key(&self) -> Option<&str> {
        None
    }
    /// Its rank in the session index, before recency.
    fn rank(&self) -> u8;
    /// Its line in the session index, without the id.
    fn index_line(&self) -> String;
    /// Multiplies the text score of a record of rank `rank`.
    fn boost_of(_rank: u8) -> f64 {
        1.0
    }
}

impl Record for Note {
    const FOLDER: &'static str = "notes";
    const PREFIX: &'static str = "n";
    const KIND: &'static str = "note";

    fn parse(text: &str) -> anyhow::Result<Self> {
        let doc = FrontMatter::split(text)?;
        let mut note = Note {
            content: doc.body,
            category: String::new(),
            importance: 0,
            tags: Vec::new(),
            key: None,
            task_id: None,
            created: String::new(),
            updated: None,
            forgotten: None,
            about: Vec::new(),
            commit: None,
            extra: Vec::new(),
        };
        for field in doc.fields {
            match field.key.as_str() {
                "category" => note.category = field.text()?,
                "about" => note.about = field.map()?,
                "commit" => note.commit = Some(field.text()?),
                "importance" => note.importance = field.importance()?,
                "tags" => note.tags = field.list()?,
                "key" => note.key = Some(field.text()?),
                "task_id" => note.task_id = Some(field.text()?),
                "created" => note.created = field.text()?,
                "updated" => note.updated = Some(field.text()?),
                "forgotten" => note.forgotten = Some(field.text()?),
                _ => note.extra.push(field.raw),
            }
        }
        let missing: Vec<&str> = [
            (
                "category: <one of decisions, gotchas, patterns, context>",
                note.category.is_empty(),
            ),
            ("importance: <1 to 10>", note.importance == 0),
            (
                "created: <a timestamp like 2026-11-30T09:55:01.123Z>",
                note.created.is_empty(),
            ),
        ]
        .into_iter()
        .filter_map(|(field, missing)| missing.then_some(field))
        .collect();
        if !missing.is_empty() {
            return Err(Unreadable::new(
                1,
                1,
                "the front matter lacks a field a note needs",
                format!("add {}", missing.join(", ")),
            )
            .into());
        }
        Ok(note)
    }

    fn render(&self) -> String {
        let mut out = String::from("---\n");
        let _ = writeln!(out, "category: {}", quote(&self.category));
        let _ = writeln!(out, "importance: {}", self.importance);
        let _ = writeln!(out, "tags: {}", quote_list(&self.tags));
        if let Some(key) = &self.key {
            let _ = writeln!(out, "key: {}", quote(key));
        }
        if let Some(task) = &self.task_id {
            let _ = writeln!(out, "task_id: {}", quote(task));
        }
        let _ = writeln!(out, "created: {}", quote(&self.created));
        if let Some(at) = &self.updated {
            let _ = writeln!(out, "updated: {}", quote(at));
        }
        if let Some(commit) = &self.commit {
            let _ = writeln!(out, "commit: {}", quote(commit));
        }
        if !self.about.is_empty() {
            out.push_str("about:\n");
            for (path, fingerprint) in &self.about {
                let _ = writeln!(out, "  {}: {}", quote(path), quote(fingerprint));
            }
        }
        if let Some(at) = &self.forgotten {
            let _ = writeln!(out, "forgotten: {}", quote(at));
        }
        for line in &self.extra {
            let _ = writeln!(out, "{line}");
        }
        let _ = write!(out, "---\n{}\n", self.content);
        out
    }

    fn searchable(&self) -> bool {
        self.forgotten.is_none()
    }

    fn index_texts(&self) -> Vec<(&str, u32)> {
        let mut texts = vec![(self.content.as_str(), 1), (self.category.as_str(), 1)];
        // Tags are chosen keywords, so a hit there says more than a word in passing.
        texts.extend(self.tags.iter().map(|tag| (tag.as_str(), 2)));
        texts
    }

    /// From 0.8 (importance 1) through 1.0 (5) to 1.25 (10): enough to order near-equal
    /// matches by what they are worth, too little to lift a poor match over a good one.
    fn boost_of(importance: u8) -> f64 {
        0.75 + f64::from(importance) / 20.0
    }

    fn created(&self) -> &str {
        &self.created
    }

    fn at(&self) -> &str {
        self.updated.as_deref().unwrap_or(&self.created)
    }

    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    fn rank(&self) -> u8 {
        self.importance
    }

    fn index_line(&self) -> String {
        let category = self.category.strip_suffix('s').unwrap_or(&self.category);
        format!("{category}: {}", title(&self.content))
    }
}

impl Record for Route {
    const FOLDER: &'static str = "routes";
    const PREFIX: &'static str = "r";
    const KIND: &'static str = "route";

    fn parse(text: &str) -> anyhow::Result<Self> {
        let doc = FrontMatter::split(text)?;
        let mut route = Route {
            title: String::new(),
            description: doc.body,
            paths: Vec::new(),
            created: String::new(),
            updated: None,
            extra: Vec::new(),
        };
        for field in doc.fields {
            match field.key.as_str() {
                "title" => route.title = field.text()?,
                "paths" => route.paths = field.list()?,
                "created" => route.created = field.text()?,
                "updated" => route.updated = Some(field.text()?),
                _ => route.extra.push(field.raw),
            }
        }
        if route.title.is_empty() || route.created.is_empty() {
            return Err(Unreadable::new(
                1,
                1,
                "the front matter lacks a field a route needs",
                "a route needs title: <a few words> and created: <a timestamp like \
                 2026-11-30T09:55:01.123Z>",
            )
            .into());
        }
        Ok(route)
    }

    fn render(&self) -> String {
        let mut out = String::from("---\n");
        let _ = writeln!(out, "title: {}", quote(&self.title));
        let _ = writeln!(out, "paths: {}", quote_list(&self.paths));
        let _ = writeln!(out, "created: {}", quote(&self.created));
        if let Some(at) = &self.updated {
            let _ = writeln!(out, "updated: {}", quote(at));
        }
        for line in &self.extra {
            let _ = writeln!(out, "{line}");
        }
        let _ = write!(out, "---\n{}\n", self.description);
        out
    }

    fn searchable(&self) -> bool {
        true
    }

    fn index_texts(&self) -> Vec<(&str, u32)> {
        let mut texts = vec![(self.title.as_str(), 2), (self.description.as_str(), 1)];
        texts.extend(self.paths.iter().map(|path| (path.as_str(), 1)));
        texts
    }

    fn created(&self) -> &str {
        &self.created
    }

    fn at(&self) -> &str {
        self.updated.as_deref().unwrap_or(&self.created)
    }

    /// A route saves a search of the tree: ranked like a note a little above the usual 4 to 6.
    fn rank(&self) -> u8 {
        6
    }

    fn index_line(&self) -> String {
        let mut paths = String::new();
        if let Some(first) = self.paths.first() {
            paths = format!(": {first}");
            if self.paths.len() > 1 {
                paths.push_str(&format!(" +{}", self.paths.len() - 1));
            }
        }
        format!("route: {}{paths}", title(&self.title))
    }
}

/// Every record file in `dir` (`<id>.md`, by id), read: the record, or what is wrong with the
/// file and where. For the checks a person sees (`memloop doctor`, `memloop memory list`); the
/// store keeps its own view.
pub fn read_all<T: Record>(dir: &Path) -> Vec<(String, Result<T, Unreadable>)> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = listing
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| Some(name.strip_suffix(".md")?.to_owned()))
        .filter(|id| !id.is_empty() && !id.starts_with('.'))
        .collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let read = read_file(&dir.join(format!("{id}.md")));
            (id, read)
        })
        .collect()
}

/// Reads one record's file: not UTF-8, or not a record, is an [`Unreadable`] with its place.
pub fn read_file<T: Record>(path: &Path) -> Result<T, Unreadable> {
    let bytes = crate::files::read_regular(path).map_err(|err| {
        Unreadable::new(
            1,
            1,
            format!("could not read the file: {err}"),
            "check its permissions",
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|err| {
        let before = &err.as_bytes()[..err.utf8_error().valid_up_to()];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Unreadable::new(line, column, "not UTF-8 text", "save the file as UTF-8")
    })?;
    T::parse(&text).map_err(|err| match err.downcast::<Unreadable>() {
        Ok(unreadable) => unreadable,
        Err(other) => Unreadable::new(1, 1, format!("{other:#}"), "fix the file or delete it"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_note() -> Note {
        Note {
            content: "Spanish VAT rounds per line, not per order total; rounding the\ntotal is off by a cent on multi-item orders.".into(),
            category: "gotchas".into(),
            importance: 7,
            tags: vec!["shop".into(), "checkout".into(), "vat".into()],
            key: None,
            task_id: Some("cf-131".into()),
            created: "2026-11-30T09:55:01.123Z".into(),
            updated: None,
            forgotten: None,
            about: Vec::new(),
            commit: None,
            extra: Vec::new(),
        }
    }

    #[test]
    fn note_file_reads_like_the_seed() {
        let text = seed_note().render();
        assert_eq!(
            text,
            "---\ncategory: gotchas\nimportance: 7\ntags: [shop, checkout, vat]\ntask_id: cf-131\n\
             created: 2026-11-30T09:55:01.123Z\n---\nSpanish VAT rounds per line, not per order \
             total; rounding the\ntotal is off by a cent on multi-item orders.\n"
        );
        assert_eq!(Note::parse(&text).unwrap(), seed_note());
    }

    #[test]
    fn awkward_strings_survive_the_round_trip() {
        let mut note = seed_note();
        note.tags = vec![
            "a, b".into(),
            "\"q\"".into(),
            "x: y".into(),
            "42".into(),
            "On".into(),
        ];
        note.task_id = Some("#12 [urgent]".into());
        note.content = "---\nbody that looks like front matter\n---".into();
        note.forgotten = Some("2026-12-01T00:00:00.000Z".into());
        note.key = Some("vat: rounding".into());
        note.updated = Some("2026-12-02T00:00:00.000Z".into());
        assert_eq!(Note::parse(&note.render()).unwrap(), note);
    }

    #[test]
    fn stray_carriage_returns_before_a_line_end_do_not_survive_a_round_trip() {
        let text = "---\ncategory: gotchas\nimportance: 5\ntags: []\ncreated: 2026-01-01\n---\nfirst\r\r\nsecond\r\n";
        let note = Note::parse(text).unwrap();
        assert_eq!(note.content, "first\nsecond");
        assert_eq!(Note::parse(&note.render()).unwrap(), note);
    }

    #[test]
    fn crlf_checkout_and_unknown_keys_are_kept() {
        let text = "---\r\ncategory: decisions\r\nimportance: 5\r\ntags: [a, b]\r\n\
                    created: 2026-01-01T00:00:00.000Z\r\nreviewed_by: maya\r\n---\r\nUse X.\r\n";
        let note = Note::parse(text).unwrap();
        assert_eq!(note.content, "Use X.");
        assert_eq!(note.extra, vec!["reviewed_by: maya".to_owned()]);
        assert!(note.render().contains("reviewed_by: maya\n"));
    }

    fn unreadable(text: &str) -> Unreadable {
        Note::parse(text)
            .unwrap_err()
            .downcast::<Unreadable>()
            .expect("a parse error says where")
    }

    #[test]
    fn broken_files_say_where() {
        let err = unreadable("category: x\n");
        assert_eq!((err.line, err.column), (1, 1), "{err}");
        let err = unreadable("---\ncategory: x\nimportance: 11\ncreated: t\n---\n");
        assert_eq!((err.line, err.column), (3, 13), "{err}");
        assert!(
            err.to_string()
                .contains("importance: want a whole number from 1 to 10")
        );
        let err = unreadable("---\ncategory: x\n");
        assert!(err.problem.contains("closing"), "{err}");
        // YAML's own errors, at the line and column of the file (not of the front matter).
        let err = unreadable("---\ncategory: x\ntags: [a, b\nimportance: 5\n---\nbody\n");
        assert_eq!(err.line, 4, "{err}");
        let err = unreadable("---\ncategory: x\nimportance: 5\n  nested: y\n---\n");
        assert_eq!((err.line, err.column), (4, 9), "{err}");
        let err = unreadable("---\ncategory: 'x\n---\n");
        assert_eq!(err.line, 2, "{err}");
        let err = unreadable("---\ncategory: x\ncategory: y\n---\n");
        assert_eq!((err.line, err.column), (3, 1), "{err}");
        assert!(err.problem.contains("duplicated key"), "{err}");
        let err = unreadable("---\ncategory: x\nimportance: 5\n---\n");
        assert!(err.hint.contains("created"), "{err}");
        let err = unreadable("---\n- a\n- b\n---\n");
        assert_eq!((err.line, err.column), (2, 1), "{err}");
        let err = unreadable("---\ncategory: [a, b]\nimportance: 5\ncreated: t\n---\n");
        assert_eq!((err.line, err.column), (2, 11), "{err}");
    }

    #[test]
    fn hand_edited_yaml_reads_as_meant() {
        let text = "---\r\n\
                    # reviewed in #412\r\n\
                    category: 'gotchas'   # was patterns\r\n\
                    importance: 7\r\n\
                    tags:\r\n\
                    \x20 - shop\r\n\
                    \x20 - \"check out\"\r\n\
                    \x20 - 'it''s'\r\n\
                    \x20 - 0x1F\r\n\
                    task_id: \"cf-131\"\r\n\
                    created: 2026-11-30T09:55:01.123Z\r\n\
                    reviewers:\r\n\
                    \x20 - maya   # owner\r\n\
                    \x20 - li\r\n\
                    \r\n\
                    # trailing comment\r\n\
                    ---\r\n\
                    Spanish VAT rounds per line.\r\n";
        let note = Note::parse(text).unwrap();
        assert_eq!(note.category, "gotchas");
        assert_eq!(note.importance, 7);
        assert_eq!(note.tags, ["shop", "check out", "it's", "0x1F"]);
        assert_eq!(note.task_id.as_deref(), Some("cf-131"));
        assert_eq!(note.created, "2026-11-30T09:55:01.123Z");
        assert_eq!(note.content, "Spanish VAT rounds per line.");
        // The unknown field stays as written, comment and all, and reads back the same.
        assert_eq!(note.extra, ["reviewers:\n  - maya   # owner\n  - li"]);
        let again = Note::parse(&note.render()).unwrap();
        assert_eq!(again, note);
        // One tag without brackets, an empty list, a quoted number.
        let note = Note::parse(
            "---\ncategory: context\nimportance: \"4\"\ntags: shop\ncreated: t\n---\nx\n",
        )
        .unwrap();
        assert_eq!((note.importance, note.tags), (4, vec!["shop".to_owned()]));
        let note = Note::parse("---\ncategory: c\nimportance: 4\ntags:\ncreated: t\n---\nx\n");
        assert_eq!(note.unwrap().tags, Vec::<String>::new());
    }

    #[test]
    fn the_writer_stays_put_and_every_string_reads_back() {
        let mut note = seed_note();
        for value in [
            "#urgent",
            "a #b",
            "0x1F",
            ".inf",
            "1e3",
            "~",
            "null",
            "yes",
            "[x",
            "x]",
            "é ü",
            "tab\there",
            "it's",
            "'q'",
            "- item",
            "key: value",
            "trailing:",
            " lead",
            "%x",
            "@x",
            "`x",
            "!x",
            "&x",
            "*x",
            "|x",
            ">x",
            "?x",
            "",
            "\\",
            "a\nb",
        ] {
            note.tags = vec![value.to_owned(), "plain".to_owned()];
            note.task_id = Some(value.to_owned());
            let text = note.render();
            assert_eq!(Note::parse(&text).unwrap(), note, "{value:?}:\n{text}");
            assert_eq!(Note::parse(&text).unwrap().render(), text, "{value:?}");
        }
    }

    #[test]
    fn credentials_are_found_in_prose_and_placeholders_are_not() {
        for text in [
            "push with ghp_abcdefghijklmnopqrstuvwxyz0123.",
            "`API_KEY=abc123` in .env",
            "see https://user:hunter2@host/x",
            "run it as `tool --token=abc123`",
            "the key is AKIAIOSFODNN7EXAMPLE",
        ] {
            assert!(secret_in([text]).is_some(), "{text}");
        }
        for text in [
            "pass --token and the value from the vault",
            "API_KEY=<your key> in .env",
            "TOKEN=${TOKEN} and API_KEY=$API_KEY and KEY=...",
            "NODE_ENV=production",
            "the token lives in the vault entry ci/deploy",
            "https://host/mcp?page=2",
        ] {
            assert_eq!(secret_in([text]), None, "{text}");
        }
        let mut note = seed_note();
        assert_eq!(note.secret(), None);
        note.tags.push("sk-abcdefghijklmnopqrstu".into());
        assert!(note.secret().is_some());
    }

    #[test]
    fn route_round_trip() {
        let route = Route {
            title: "VAT rounding".into(),
            description: "VAT rounding lives in shop/checkout/tax.py".into(),
            paths: vec!["shop/checkout/tax.py".into(), "tests/test_tax.py".into()],
            created: "2026-11-30T09:55:01.123Z".into(),
            updated: None,
            extra: Vec::new(),
        };
        let text = route.render();
        assert!(
            text.contains("paths: [shop/checkout/tax.py, tests/test_tax.py]\n"),
            "{text}"
        );
        assert_eq!(Route::parse(&text).unwrap(), route);
    }
}
