//! The YAML between a record file's `---` lines: read as YAML reads it, written so that it
//! reads back the same.
//!
//! The reader walks the parser's events with its own stack instead of building a tree: a
//! front matter of `a: : : : ...` nests one mapping per `: `, and a tree built by recursion
//! would take the process down on a file a person can write by accident. Only the top level
//! matters here (a few fields, each a word, a list of words, or something kept verbatim).

use std::borrow::Cow;

use saphyr::{Marker, Scalar, ScalarStyle, Tag};
use saphyr_parser::{Event, Parser, Span};

/// Why a record's file cannot be read, and where (1-based line and column in the file), with
/// what to do about it. `memloop doctor` reports it as `file:line:col`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub line: usize,
    pub column: usize,
    pub problem: String,
    pub hint: String,
}

impl Unreadable {
    pub fn new(
        line: usize,
        column: usize,
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Unreadable {
            line,
            column,
            problem: problem.into(),
            hint: hint.into(),
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}; {}",
            self.line, self.column, self.problem, self.hint
        )
    }
}

impl std::error::Error for Unreadable {}

const YAML_HINT: &str = "fix the YAML between the `---` lines: quote a value that holds `: ` or \
                         ` #`, or starts with one of `[{&*!|>'\"%@`";

/// A record file cut in two: its top-level fields and the text after the closing `---`.
pub struct FrontMatter {
    pub fields: Vec<Field>,
    pub body: String,
}

impl FrontMatter {
    /// The fields between the `---` lines, read as YAML, and the body after them.
    pub fn split(text: &str) -> Result<FrontMatter, Unreadable> {
        // A checkout with autocrlf turns the files into CRLF; read them the same.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        // Every CR before a line end goes, not only one: a text of `a\r\r\n` would otherwise
        // keep a CR that the next write turns into a line end of its own.
        let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
        if lines.next() != Some("---") {
            return Err(Unreadable::new(
                1,
                1,
                "expected `---` opening the front matter",
                "a note file starts with a `---` line, its fields, and another `---` line \
                 before the text",
            ));
        }
        let mut yaml_lines: Vec<&str> = Vec::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line == "---" {
                closed = true;
                break;
            }
            // YAML ends a line at a lone CR too; the fields' own lines (kept verbatim for keys
            // this build does not know) would then no longer be the lines YAML saw.
            if let Some(at) = line.find('\r') {
                return Err(Unreadable::new(
                    yaml_lines.len() + 2,
                    line[..at].chars().count() + 1,
                    "a carriage return in the middle of a line",
                    "remove it, or break the line there with an ordinary line end",
                ));
            }
            yaml_lines.push(line);
        }
        if !closed {
            return Err(Unreadable::new(
                yaml_lines.len() + 1,
                1,
                "no closing `---` after the front matter",
                "end the fields with a `---` line before the text",
            ));
        }
        let body = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
        let fields = match canonical(&yaml_lines) {
            Some(fast) => {
                debug_assert_eq!(
                    fields(&yaml_lines).as_ref().ok(),
                    Some(&fast),
                    "the canonical reader and YAML disagree on {yaml_lines:?}"
                );
                fast
            }
            None => fields(&yaml_lines)?,
        };
        Ok(FrontMatter { fields, body })
    }
}

/// A top-level field of the front matter as YAML reads it.
#[derive(Debug, PartialEq)]
pub struct Field {
    pub key: String,
    /// Where the value starts (1-based, in the file), for errors about it.
    line: usize,
    column: usize,
    value: FieldValue,
    /// The field's lines as written, comments inside it included: kept verbatim when this
    /// build does not know the key.
    pub raw: String,
}

#[derive(Debug, PartialEq)]
enum FieldValue {
    /// Empty (`key:` or `key: ~`).
    Null,
    /// A scalar as its text: a quoted string's value, a plain scalar as written (`0x1F` stays
    /// `0x1F`, not 31).
    Text(String),
    List(Vec<String>),
    /// A mapping of words to words (`path: fingerprint`), in the order written.
    Map(Vec<(String, String)>),
    /// A mapping holding more than words, a list holding one, or an alias.
    Nested,
}

impl Field {
    fn error(&self, problem: String, hint: &str) -> Unreadable {
        Unreadable::new(
            self.line,
            self.column,
            format!("{}: {problem}", self.key),
            hint,
        )
    }

    pub fn text(&self) -> Result<String, Unreadable> {
        match &self.value {
            FieldValue::Text(text) => Ok(text.clone()),
            FieldValue::Null => Err(self.error("is empty".into(), "give it a value")),
            FieldValue::List(_) | FieldValue::Map(_) | FieldValue::Nested => Err(self.error(
                "want a single value, got a list, a mapping or an alias".into(),
                "write it on one line as `key: value`",
            )),
        }
    }

    pub fn importance(&self) -> Result<u8, Unreadable> {
        let text = self.text()?;
        text.parse::<u8>()
            .ok()
            .filter(|n| (1..=10).contains(n))
            .ok_or_else(|| {
                self.error(
                    format!("want a whole number from 1 to 10, got {text:?}"),
                    "most notes are 4 to 6",
                )
            })
    }

    /// A list in either style (`[a, b]` or one `- a` per line); one value reads as a list of one.
    pub fn list(&self) -> Result<Vec<String>, Unreadable> {
        match &self.value {
            FieldValue::List(items) => Ok(items.clone()),
            FieldValue::Text(text) => Ok(vec![text.clone()]),
            FieldValue::Null => Ok(Vec::new()),
            FieldValue::Map(_) | FieldValue::Nested => Err(self.error(
                "want a list of words, got a mapping or an alias".into(),
                "write it as `[a, b]` or one `- item` per line",
            )),
        }
    }

    /// A mapping of words to words, one `key: value` per line below the field.
    pub fn map(&self) -> Result<Vec<(String, String)>, Unreadable> {
        match &self.value {
            FieldValue::Map(pairs) => Ok(pairs.clone()),
            FieldValue::Null => Ok(Vec::new()),
            _ => Err(self.error(
                "want `key: value` lines, got something else".into(),
                "write one indented `key: value` per line below it",
            )),
        }
    }
}

/// A scalar as the core schema resolves it. A number or a boolean (`Other`) is taken as written,
/// so a reviewer's `0x1F` or `1.10` stays what it was.
enum Resolved {
    Null,
    String(String),
    Other,
}

fn resolve(value: &str, style: ScalarStyle, tag: Option<&Cow<'_, Tag>>) -> Resolved {
    match Scalar::parse_from_cow_and_metadata(Cow::Borrowed(value), style, tag) {
        Some(Scalar::Null) => Resolved::Null,
        Some(Scalar::String(text)) => Resolved::String(text.into_owned()),
        _ => Resolved::Other,
    }
}

/// One node under the top-level mapping, as far as a field needs it.
struct Node {
    span: Span,
    value: FieldValue,
    /// A string key's text, when the node is one.
    name: Option<String>,
}

/// The parser's events, with positions in the file (the YAML starts on the file's second line).
struct Events<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
}

fn at(marker: &Marker) -> (usize, usize) {
    (marker.line() + 1, marker.col() + 1)
}

impl<'a> Events<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), Unreadable> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(err)) => {
                let (line, column) = at(err.marker());
                Err(Unreadable::new(line, column, err.info(), YAML_HINT))
            }
            // The parser ends every stream with StreamEnd; past it there is nothing to read.
            None => Ok((Event::StreamEnd, Span::default())),
        }
    }

    /// The node that starts with `first`, read to its end without recursion.
    fn node(&mut self, first: Event<'a>, span: Span, source: &Source) -> Result<Node, Unreadable> {
        let start = span.start;
        let mut end = span.end;
        let value = match first {
            Event::Scalar(text, style, _, tag) => match resolve(&text, style, tag.as_ref()) {
                Resolved::Null => FieldValue::Null,
                Resolved::String(text) => {
                    return Ok(Node {
                        span,
                        name: Some(text.clone()),
                        value: FieldValue::Text(text),
                    });
                }
                Resolved::Other => FieldValue::Text(source.text(&span).trim().to_owned()),
            },
            Event::Alias(_) => FieldValue::Nested,
            Event::SequenceStart(..) => {
                let words;
                (words, end) = self.words(source)?;
                words.map_or(FieldValue::Nested, FieldValue::List)
            }
            Event::MappingStart(..) => {
                let words;
                (words, end) = self.words(source)?;
                // A mapping's words alternate key and value.
                words.map_or(FieldValue::Nested, |words| {
                    let pairs = words.chunks_exact(2);
                    FieldValue::Map(pairs.map(|kv| (kv[0].clone(), kv[1].clone())).collect())
                })
            }
            _ => FieldValue::Nested,
        };
        Ok(Node {
            span: Span::new(start, end),
            value,
            name: None,
        })
    }
}

impl<'a> Events<'a> {
    /// The rest of a list or mapping just opened, read to its end: its items as words when
    /// every one is a non-null scalar (`None` when anything nests, is null or an alias), and
    /// where it ends.
    fn words(&mut self, source: &Source) -> Result<(Option<Vec<String>>, Marker), Unreadable> {
        let mut words = Some(Vec::new());
        let mut depth = 1usize;
        let mut end = Marker::default();
        while depth > 0 {
            let (event, span) = self.next()?;
            end = span.end;
            match event {
                Event::SequenceStart(..) | Event::MappingStart(..) => {
                    depth += 1;
                    words = None;
                }
                Event::SequenceEnd | Event::MappingEnd => depth -= 1,
                Event::Scalar(text, style, _, tag) if depth == 1 => {
                    let word = match resolve(&text, style, tag.as_ref()) {
                        Resolved::String(text) => Some(text),
                        Resolved::Other => Some(source.text(&span).trim().to_owned()),
                        Resolved::Null => None,
                    };
                    match (word, words.as_mut()) {
                        (Some(word), Some(list)) => list.push(word),
                        _ => words = None,
                    }
                }
                Event::Alias(_) if depth == 1 => words = None,
                Event::StreamEnd => break,
                _ => {}
            }
        }
        Ok((words, end))
    }
}

/// The YAML text, for the source of a span (spans count characters, not bytes).
struct Source {
    chars: Vec<char>,
}

impl Source {
    fn text(&self, span: &Span) -> String {
        let end = span.end.index().min(self.chars.len());
        self.chars[span.start.index().min(end)..end]
            .iter()
            .collect()
    }
}

/// The front matter as memloop writes it, read without the YAML parser (a cold start reads
/// every note, and the parser is most of that): each line `key: value` with the value exactly
/// as [`quote`] or [`quote_list`] writes it, or `key:` over indented `name: value` lines (a
/// note's `about`). Anything else (a comment, a block list, another quoting, a repeated key) is
/// `None`, for the YAML reader. What this accepts, YAML reads the same: debug builds (the
/// tests, the fuzzer) check every file against it.
fn canonical(lines: &[&str]) -> Option<Vec<Field>> {
    let mut fields: Vec<Field> = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let first = at;
        let (key, value) = lines[at].split_once(':')?;
        let word =
            |key: &str| !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if !word(key) || fields.iter().any(|field| field.key == key) {
            return None;
        }
        // 1-based, in the file: the YAML's first line is the file's second.
        let (mut line, mut column) = (at + 2, key.len() + 3);
        let value = if value.is_empty() {
            let mut pairs = Vec::new();
            while let Some(entry) = lines.get(at + 1).and_then(|l| l.strip_prefix("  ")) {
                let (name, text) = entry.split_once(": ")?;
                if !is_bare(name) {
                    return None;
                }
                pairs.push((name.to_owned(), canonical_scalar(text)?));
                at += 1;
            }
            if pairs.is_empty() {
                return None;
            }
            (line, column) = (first + 3, 3);
            FieldValue::Map(pairs)
        } else {
            let value = value.strip_prefix(' ')?;
            if value.starts_with('[') {
                FieldValue::List(canonical_list(value)?)
            } else {
                FieldValue::Text(canonical_scalar(value)?)
            }
        };
        fields.push(Field {
            key: key.to_owned(),
            line,
            column,
            value,
            raw: lines[first..=at].join("\n"),
        });
        at += 1;
    }
    Some(fields)
}

/// A value as [`quote`] writes it, read back.
fn canonical_scalar(value: &str) -> Option<String> {
    if value.starts_with('"') {
        let text: String = serde_json::from_str(value).ok()?;
        (double_quoted(&text) == value).then_some(text)
    } else {
        // A number as written (`importance: 7`): YAML reads an integer, taken as written too.
        let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
        (digits || is_bare(value)).then(|| value.to_owned())
    }
}

/// A list as [`quote_list`] writes it, read back.
fn canonical_list(value: &str) -> Option<Vec<String>> {
    let items: Vec<String> = if value == "[]" {
        Vec::new()
    } else if value.starts_with("[\"") {
        serde_json::from_str(value).ok()?
    } else {
        let inner = value.strip_prefix('[')?.strip_suffix(']')?;
        inner.split(", ").map(str::to_owned).collect()
    };
    (quote_list(&items) == value).then_some(items)
}

/// The top-level fields of the front matter (its lines, the file's second line first).
fn fields(lines: &[&str]) -> Result<Vec<Field>, Unreadable> {
    let yaml = lines.join("\n") + "\n";
    let source = Source {
        chars: yaml.chars().collect(),
    };
    let mut events = Events {
        parser: Parser::new_from_str(&yaml),
    };
    // Up to the first node: StreamStart, DocumentStart.
    let (first, first_span) = loop {
        match events.next()? {
            (Event::StreamStart | Event::DocumentStart(_), _) => {}
            (Event::StreamEnd, span) => break (Event::StreamEnd, span),
            other => break other,
        }
    };
    let mut fields: Vec<Field> = Vec::new();
    // (key node, value node) in the order written.
    let mut pairs: Vec<(Node, Node)> = Vec::new();
    match first {
        Event::StreamEnd => return Ok(fields),
        Event::MappingStart(..) => loop {
            let (event, span) = events.next()?;
            if matches!(event, Event::MappingEnd | Event::StreamEnd) {
                break;
            }
            let key = events.node(event, span, &source)?;
            let Some(name) = &key.name else {
                let (line, column) = at(&key.span.start);
                return Err(Unreadable::new(
                    line,
                    column,
                    "a field name must be a word",
                    YAML_HINT,
                ));
            };
            if pairs.iter().any(|(k, _)| k.name.as_ref() == Some(name)) {
                let (line, column) = at(&key.span.start);
                return Err(Unreadable::new(
                    line,
                    column,
                    format!("duplicated key `{name}`"),
                    "keep one of the two lines",
                ));
            }
            let (event, span) = events.next()?;
            let value = events.node(event, span, &source)?;
            pairs.push((key, value));
        },
        other => {
            let node = events.node(other, first_span, &source)?;
            if !matches!(node.value, FieldValue::Null) {
                let (line, column) = at(&node.span.start);
                return Err(Unreadable::new(
                    line,
                    column,
                    "the front matter is not a set of `key: value` fields",
                    YAML_HINT,
                ));
            }
        }
    }
    // The rest of the stream still has to be YAML (a second document after `...`).
    loop {
        if let (Event::StreamEnd, _) = events.next()? {
            break;
        }
    }
    let key_lines: Vec<usize> = pairs.iter().map(|(k, _)| k.span.start.line()).collect();
    for (i, (key, value)) in pairs.into_iter().enumerate() {
        let name = key.name.unwrap_or_default();
        let (line, column) = at(&value.span.start);
        // The field's own lines: from its key to the next key (a block list spans several).
        let first = key.span.start.line() - 1;
        let next = key_lines.get(i + 1).map_or(lines.len(), |n| n - 1);
        let raw = if next > first {
            let mut own = &lines[first..next.min(lines.len())];
            while let [rest @ .., last] = own
                && (last.trim().is_empty() || last.trim_start().starts_with('#'))
                && !rest.is_empty()
            {
                own = rest;
            }
            own.join("\n")
        } else {
            // Several fields on one line (`{a: 1, b: 2}`): the field alone.
            format!("{name}: {}", source.text(&value.span).trim())
        };
        fields.push(Field {
            key: name,
            line,
            column,
            value: value.value,
            raw,
        });
    }
    Ok(fields)
}

/// Whether YAML would read `c` as written inside a scalar (its printable set, less the BOM).
fn printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}')
        || ('\u{a0}'..='\u{d7ff}').contains(&c)
        || (('\u{e000}'..='\u{fffd}').contains(&c) && c != '\u{feff}')
        || c >= '\u{10000}'
}

/// Bare when a YAML reader would read the same string back; double-quoted otherwise.
fn is_bare(value: &str) -> bool {
    !value.is_empty()
        && value.trim() == value
        && value.chars().all(printable)
        && !value.starts_with([
            '"', '\'', '[', '{', '-', '!', '&', '*', '?', '|', '>', '%', '@', '`', '#',
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

/// A double-quoted scalar, valid as JSON and as YAML: the escapes both share, and `\uXXXX` for
/// every character YAML would not take as written (DEL, the C1 controls, the BOM).
fn double_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c < ' ' || !printable(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn quote(value: &str) -> String {
    if is_bare(value) {
        value.to_owned()
    } else {
        double_quoted(value)
    }
}

pub fn quote_list(items: &[String]) -> String {
    if items.iter().all(|item| is_bare(item)) {
        format!("[{}]", items.join(", "))
    } else {
        let quoted: Vec<String> = items.iter().map(|item| double_quoted(item)).collect();
        format!("[{}]", quoted.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields_of(text: &str) -> Result<Vec<Field>, Unreadable> {
        FrontMatter::split(text).map(|doc| doc.fields)
    }

    #[test]
    fn deep_nesting_is_read_without_recursion() {
        // One mapping per `: `, far deeper than any stack would hold if each level recursed.
        let deep = format!("---\nx{}\n---\n", ": a".repeat(200_000));
        let _ = fields_of(&deep);
        let deep = format!("---\nx: {}\n---\n", "- ".repeat(200_000));
        let _ = fields_of(&deep);
        let field = fields_of("---\nreviewers: {a: [1, {b: c}]}\nk: v\n---\n").unwrap();
        assert_eq!(field[0].raw, "reviewers: {a: [1, {b: c}]}");
        assert!(field[0].text().is_err());
        assert_eq!(field[1].text().unwrap(), "v");
    }

    #[test]
    fn a_lone_carriage_return_is_refused_where_it_is() {
        let err = fields_of("---\r\nimportance: 3\r\x0etags: []\r\ncreated: x\r\n---\r\nbody\r\n")
            .err()
            .unwrap();
        assert_eq!((err.line, err.column), (2, 14), "{err}");
        assert!(err.problem.contains("carriage return"), "{err}");
        // At a line's end it is part of a CRLF checkout, not an error.
        assert!(fields_of("---\r\nk: v\r\r\n---\r\n").is_ok());
    }

    #[test]
    fn a_repeated_key_is_refused_even_when_unknown() {
        let err = fields_of("---\nreviewer: a\nk: v\nreviewer: b\n---\n")
            .err()
            .unwrap();
        assert_eq!((err.line, err.column), (4, 1), "{err}");
        assert!(err.problem.contains("`reviewer`"), "{err}");
    }

    #[test]
    fn every_character_survives_quoting() {
        let specials: Vec<char> = (0u32..0x100)
            .chain([
                0x2028, 0x2029, 0xfeff, 0xfffe, 0xffff, 0xd7ff, 0xe000, 0x1f600,
            ])
            .filter_map(char::from_u32)
            .collect();
        for c in specials {
            for value in [c.to_string(), format!("a{c}b"), format!("2026-11-30{c}T09")] {
                let text = format!(
                    "---\nk: {}\nl: {}\n---\n",
                    quote(&value),
                    quote_list(&[value.clone(), "x".into()])
                );
                let fields =
                    fields_of(&text).unwrap_or_else(|err| panic!("{c:?}: {err}\n{text:?}"));
                assert_eq!(fields[0].text().unwrap(), value, "{c:?}: {text:?}");
                assert_eq!(
                    fields[1].list().unwrap(),
                    [value.clone(), "x".into()],
                    "{c:?}"
                );
            }
        }
    }

    #[test]
    fn what_memloop_writes_is_read_without_yaml_and_the_same() {
        let written = [
            "category: gotchas",
            "importance: 7",
            "tags: [shop, checkout]",
            "paths: [\"#x\",\"y\"]",
            "empty: []",
            "created: 2026-11-30T09:55:01.123Z",
            "task_id: \"#12 [urgent]\"",
            "about:",
            "  src/tax.py: 5d41402abc4b",
            "  Makefile: \"123456789012\"",
            "commit: 3074b62c1d2e",
        ];
        let fast = canonical(&written).expect("memloop's own layout");
        assert_eq!(fields(&written).unwrap(), fast);
        assert_eq!(fast[7].map().unwrap()[1].1, "123456789012");
        // Hand edits go to the YAML reader.
        for edited in [
            &["category: gotchas # why"][..],
            &["tags:", "  - a"],
            &["category: 'gotchas'"],
            &["k: v", "k: w"],
            &["  indented: x"],
            &["k:"],
            &["k: ~"],
            &["about:", "  a: b", "   c: d"],
        ] {
            assert_eq!(canonical(edited), None, "{edited:?}");
        }
    }

    #[test]
    fn quoting_matches_json_for_what_json_escapes() {
        for value in [
            "a\"b",
            "back\\slash",
            "\u{1}\u{1f}",
            "tab\tnew\nline",
            "\u{8}\u{c}",
        ] {
            assert_eq!(double_quoted(value), serde_json::to_string(value).unwrap());
        }
        assert_eq!(double_quoted("\u{7f}\u{feff}"), "\"\\u007f\\ufeff\"");
    }
}
