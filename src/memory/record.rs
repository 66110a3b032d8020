//! Notes and routes as small text files: front matter between `---` lines, then the body.
//!
//! One file per record keeps two branches' notes mergeable and every note reviewable in a pull
//! request. Values are written bare when that is unambiguous and JSON-quoted otherwise, so the
//! front matter stays readable (and valid YAML) while any string survives the round trip. Keys
//! this build does not know are kept verbatim, so a reviewer's additions survive a forget.

use std::fmt::Write as _;

use anyhow::{Context, bail};

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
    pub task_id: Option<String>,
    pub created: String,
    /// Set when the note was forgotten: it stays on disk for `memory_restore`, out of every query.
    pub forgotten: Option<String>,
    pub extra: Vec<String>,
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
            task_id: None,
            created: String::new(),
            forgotten: None,
            extra: Vec::new(),
        };
        for (line, key, value) in doc.fields {
            let at = || format!("front matter line {line} ({key})");
            match key.as_str() {
                "category" => note.category = scalar(&value).with_context(at)?,
                "importance" => {
                    note.importance = value
                        .parse::<u8>()
                        .ok()
                        .filter(|n| (1..=10).contains(n))
                        .with_context(|| format!("{}: want 1 to 10, got {value:?}", at()))?
                }
                "tags" => note.tags = list(&value).with_context(at)?,
                "task_id" => note.task_id = Some(scalar(&value).with_context(at)?),
                "created" => note.created = scalar(&value).with_context(at)?,
                "forgotten" => note.forgotten = Some(scalar(&value).with_context(at)?),
                _ => note.extra.push(format!("{key}: {value}")),
            }
        }
        if note.category.is_empty() || note.importance == 0 || note.created.is_empty() {
            bail!("front matter needs category, importance and created");
        }
        Ok(note)
    }

    fn render(&self) -> String {
        let mut out = String::from("---\n");
        let _ = writeln!(out, "category: {}", quote(&self.category));
        let _ = writeln!(out, "importance: {}", self.importance);
        let _ = writeln!(out, "tags: {}", quote_list(&self.tags));
        if let Some(task) = &self.task_id {
            let _ = writeln!(out, "task_id: {}", quote(task));
        }
        let _ = writeln!(out, "created: {}", quote(&self.created));
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
        for (line, key, value) in doc.fields {
            let at = || format!("front matter line {line} ({key})");
            match key.as_str() {
                "title" => route.title = scalar(&value).with_context(at)?,
                "paths" => route.paths = list(&value).with_context(at)?,
                "created" => route.created = scalar(&value).with_context(at)?,
                "updated" => route.updated = Some(scalar(&value).with_context(at)?),
                _ => route.extra.push(format!("{key}: {value}")),
            }
        }
        if route.title.is_empty() || route.created.is_empty() {
            bail!("front matter needs title and created");
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

struct FrontMatter {
    /// (line number, key, raw value)
    fields: Vec<(usize, String, String)>,
    body: String,
}

impl FrontMatter {
    fn split(text: &str) -> anyhow::Result<FrontMatter> {
        // A checkout with autocrlf turns the files into CRLF; read them the same.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        if lines.next() != Some("---") {
            bail!("line 1: expected `---` opening the front matter");
        }
        let mut fields = Vec::new();
        let mut closed = false;
        let mut number = 1;
        for line in lines.by_ref() {
            number += 1;
            if line == "---" {
                closed = true;
                break;
            }
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                bail!("line {number}: expected `key: value`, got {line:?}");
            };
            fields.push((number, key.trim().to_owned(), value.trim().to_owned()));
        }
        if !closed {
            bail!("no closing `---` after the front matter");
        }
        let body = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
        Ok(FrontMatter { fields, body })
    }
}

/// Bare when a YAML reader would read the same string back; JSON-quoted otherwise.
fn is_bare(value: &str) -> bool {
    !value.is_empty()
        && value.trim() == value
        && !value.starts_with([
            '"', '\'', '[', '{', '-', '!', '&', '*', '?', '|', '>', '%', '@', '`',
        ])
        && !value.contains([',', '[', ']', '{', '}', '\n', '\r', '\t', '"'])
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.ends_with(':')
        // Words YAML 1.1 readers turn into booleans or null.
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n" | "~"
        )
        && value.parse::<f64>().is_err()
}

fn quote(value: &str) -> String {
    if is_bare(value) {
        value.to_owned()
    } else {
        serde_json::to_string(value).expect("a string serializes")
    }
}

fn quote_list(items: &[String]) -> String {
    if items.iter().all(|item| is_bare(item)) {
        format!("[{}]", items.join(", "))
    } else {
        serde_json::to_string(items).expect("strings serialize")
    }
}

fn scalar(value: &str) -> anyhow::Result<String> {
    if value.starts_with('"') {
        return serde_json::from_str(value).context("a quoted value must be a JSON string");
    }
    Ok(value.to_owned())
}

fn list(value: &str) -> anyhow::Result<Vec<String>> {
    if let Ok(items) = serde_json::from_str::<Vec<String>>(value) {
        return Ok(items);
    }
    let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) else {
        bail!("expected a list like [a, b], got {value:?}");
    };
    Ok(inner
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect())
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
            task_id: Some("cf-131".into()),
            created: "2026-11-30T09:55:01.123Z".into(),
            forgotten: None,
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

    #[test]
    fn broken_files_say_where() {
        let err = Note::parse("category: x\n").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        let err = Note::parse("---\ncategory: x\nimportance: 11\n---\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("line 3 (importance)"),
            "{err:#}"
        );
        let err = Note::parse("---\ncategory: x\n").unwrap_err().to_string();
        assert!(err.contains("closing"), "{err}");
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
