//! TOML files (Kimi's `config.toml`), edited with toml_edit so comments and layout survive.
//! memloop owns whole entries of an array of tables (`[[hooks]]`), found again by one key, and
//! tables found by their path (`[mcp_servers.memory]`, Codex's trust entries).

use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::Refusal;

/// One entry memloop owns: its fields in order, and the field that identifies it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub fields: Vec<(String, EntryValue)>,
    pub identity: (String, String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryValue {
    String(String),
    Integer(i64),
    /// An array of strings (`args = ["serve"]`).
    Strings(Vec<String>),
    /// An inline table of strings (`env = { LOG = "debug" }`).
    Map(Vec<(String, String)>),
}

impl EntryValue {
    pub fn to_value(&self) -> Value {
        match self {
            EntryValue::String(s) => Value::from(s.as_str()),
            EntryValue::Integer(i) => Value::from(*i),
            EntryValue::Strings(items) => Value::Array(items.iter().map(|s| s.as_str()).collect()),
            EntryValue::Map(pairs) => {
                let mut table = InlineTable::new();
                for (k, v) in pairs {
                    table.insert(k, Value::from(v.as_str()));
                }
                table.fmt();
                Value::InlineTable(table)
            }
        }
    }

    pub fn matches(&self, value: &Value) -> bool {
        match (self, value) {
            (EntryValue::String(s), Value::String(v)) => v.value() == s,
            (EntryValue::Integer(i), Value::Integer(v)) => v.value() == i,
            (EntryValue::Strings(items), Value::Array(array)) => {
                array.len() == items.len()
                    && array
                        .iter()
                        .zip(items)
                        .all(|(v, s)| v.as_str() == Some(s.as_str()))
            }
            (EntryValue::Map(pairs), Value::InlineTable(table)) => {
                table.len() == pairs.len()
                    && pairs
                        .iter()
                        .all(|(k, v)| table.get(k).and_then(Value::as_str) == Some(v.as_str()))
            }
            _ => false,
        }
    }
}

/// toml_edit writes every line end as LF and drops a byte order mark inside the text, so a
/// file memloop would write back with bytes changed is refused instead (found by
/// `cargo xtask fuzz`). `text` comes decoded: a file whose lines all end in CRLF, and one
/// leading BOM, are restored on writing.
fn refuse_what_toml_edit_rewrites(text: &str, display: &str) -> Result<(), Refusal> {
    if let Some(offset) = text.find('\r') {
        let (line, col) = crate::position::line_col(text, offset);
        return Err(Refusal::at(
            display,
            line,
            col,
            "the file mixes line endings (CRLF or CR here, LF elsewhere); memloop's TOML editor \
             would rewrite them",
            "save the file with one kind of line ending (all LF or all CRLF), then run memloop again",
        ));
    }
    if text.starts_with('\u{feff}') {
        return Err(Refusal::at(
            display,
            1,
            1,
            "the file starts with two byte order marks; memloop's TOML editor would drop one",
            "remove the extra byte order mark, then run memloop again",
        ));
    }
    Ok(())
}

#[derive(Debug)]
pub struct TomlDoc {
    doc: DocumentMut,
    display: String,
    /// The text as parsed, for the positions of refusals about it.
    source: String,
    /// The text had content but no final newline; toml_edit would write one.
    no_final_newline: bool,
}

impl TomlDoc {
    pub fn parse(text: &str, display: &str) -> Result<TomlDoc, Refusal> {
        refuse_what_toml_edit_rewrites(text, display)?;
        let doc = text.parse::<DocumentMut>().map_err(|err| {
            let (line, col) = err.span().map_or((1, 1), |span| crate::position::line_col(text, span.start));
            let problem = err.message().trim().to_owned();
            let hint = if ["already", "redefine", "duplicate"].iter().any(|word| problem.contains(word)) {
                "a key is defined twice (for example `hooks = []` next to `[[hooks]]` tables): keep one form, then run memloop again"
            } else {
                "fix the TOML syntax, then run memloop again"
            };
            Refusal::at(display, line, col, problem, hint)
        })?;
        Ok(TomlDoc {
            doc,
            display: display.to_owned(),
            source: text.to_owned(),
            no_final_newline: !text.trim().is_empty() && !text.ends_with('\n'),
        })
    }

    pub fn to_text(&self) -> String {
        let mut text = self.doc.to_string();
        if self.no_final_newline && text.ends_with('\n') {
            text.pop();
        }
        text
    }

    /// Makes the array `key` hold exactly one entry with `entry`'s identity, equal to `entry`.
    /// Works on `[[key]]` tables and on an inline `key = [...]` array alike.
    pub fn upsert_entry(&mut self, key: &str, entry: &Entry) -> Result<(), Refusal> {
        let was_empty = self.doc.as_table().is_empty();
        match self.doc.get_mut(key) {
            None => {
                let mut tables = ArrayOfTables::new();
                let mut table = entry_table(entry);
                if !was_empty {
                    table.decor_mut().set_prefix("\n");
                }
                tables.push(table);
                self.doc.insert(key, Item::ArrayOfTables(tables));
            }
            Some(Item::ArrayOfTables(tables)) => {
                let positions: Vec<usize> = tables
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| is_ours_table(t, entry))
                    .map(|(i, _)| i)
                    .collect();
                match positions.split_first() {
                    None => {
                        let mut table = entry_table(entry);
                        table.decor_mut().set_prefix("\n");
                        tables.push(table);
                    }
                    Some((first, duplicates)) => {
                        let table = tables.get_mut(*first).expect("index from iteration");
                        sync_table(table, entry);
                        for index in duplicates.iter().rev() {
                            tables.remove(*index);
                        }
                    }
                }
            }
            Some(Item::Value(Value::Array(array))) => {
                let positions: Vec<usize> = array
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| {
                        v.as_inline_table()
                            .is_some_and(|t| is_ours_inline(t, entry))
                    })
                    .map(|(i, _)| i)
                    .collect();
                match positions.split_first() {
                    None => array.push(Value::InlineTable(entry_inline(entry))),
                    Some((first, duplicates)) => {
                        let same = array
                            .get(*first)
                            .and_then(Value::as_inline_table)
                            .is_some_and(|t| inline_equals(t, entry));
                        if !same {
                            array.replace(*first, Value::InlineTable(entry_inline(entry)));
                        }
                        for index in duplicates.iter().rev() {
                            array.remove(*index);
                        }
                    }
                }
            }
            Some(_) => {
                let (line, col) = self.key_position(key);
                return Err(Refusal::at(
                    &self.display,
                    line,
                    col,
                    format!("`{key}` is neither a [[{key}]] table list nor an array"),
                    format!("write each entry as its own [[{key}]] table, then run memloop again"),
                ));
            }
        }
        Ok(())
    }

    /// Where the top-level `key` is defined in the text as parsed.
    fn key_position(&self, key: &str) -> (usize, usize) {
        position_of(&self.source, &[key.to_owned()])
    }

    /// Adds `entry` at the end of the array `key` (created as `[[key]]` tables), in the form the
    /// array already has, leaving every entry there as it is; `comment` (lines without `#`) goes
    /// above a new `[[key]]` table.
    pub fn push_entry(&mut self, key: &str, entry: &Entry, comment: &str) -> Result<(), Refusal> {
        let was_empty = self.doc.as_table().is_empty();
        let mut table = entry_table(entry);
        let prefix: String = comment.lines().map(|line| format!("# {line}\n")).collect();
        table.decor_mut().set_prefix(if was_empty {
            prefix
        } else {
            format!("\n{prefix}")
        });
        match self.doc.get_mut(key) {
            None => {
                let mut tables = ArrayOfTables::new();
                tables.push(table);
                self.doc.insert(key, Item::ArrayOfTables(tables));
            }
            Some(Item::ArrayOfTables(tables)) => tables.push(table),
            Some(Item::Value(Value::Array(array))) => {
                // On the line after the last entry, indented like it (its prefix may also
                // hold the comment after the previous entry, which stays where it is).
                let indent = array
                    .iter()
                    .last()
                    .and_then(|last| last.decor().prefix())
                    .and_then(|p| p.as_str())
                    .and_then(|p| p.rfind('\n').map(|at| p[at..].to_owned()))
                    .unwrap_or_else(|| " ".to_owned());
                let mut value = Value::InlineTable(entry_inline(entry));
                value.decor_mut().set_prefix(indent);
                array.push_formatted(value);
            }
            Some(_) => {
                let (line, col) = self.key_position(key);
                return Err(Refusal::at(
                    &self.display,
                    line,
                    col,
                    format!("`{key}` is neither a [[{key}]] table list nor an array"),
                    format!("write each entry as its own [[{key}]] table, then run memloop again"),
                ));
            }
        }
        Ok(())
    }

    /// Removes every entry with `entry`'s identity; drops the key when it is left empty and
    /// `drop_empty` holds (memloop created it).
    pub fn remove_entry(&mut self, key: &str, entry: &Entry, drop_empty: bool) {
        let empty = match self.doc.get_mut(key) {
            Some(Item::ArrayOfTables(tables)) => {
                tables.retain(|t| !is_ours_table(t, entry));
                tables.is_empty()
            }
            Some(Item::Value(Value::Array(array))) => {
                array.retain(|v| {
                    !v.as_inline_table()
                        .is_some_and(|t| is_ours_inline(t, entry))
                });
                array.is_empty()
            }
            _ => false,
        };
        if empty && drop_empty {
            self.doc.remove(key);
        }
    }

    /// Calls `f` with every entry of the array `key` (`[[key]]` tables and the inline tables of
    /// `key = [...]` alike), for edits in place that keep each entry's layout and comments.
    pub fn for_each_entry_mut(
        &mut self,
        key: &str,
        f: &mut dyn FnMut(&mut dyn toml_edit::TableLike),
    ) {
        match self.doc.get_mut(key) {
            Some(Item::ArrayOfTables(tables)) => tables.iter_mut().for_each(|t| f(t)),
            Some(Item::Value(Value::Array(array))) => array
                .iter_mut()
                .filter_map(Value::as_inline_table_mut)
                .for_each(|t| f(t)),
            _ => {}
        }
    }

    /// Whether an entry with `entry`'s identity exists.
    pub fn has_key(&self, key: &str) -> bool {
        self.doc.get(key).is_some()
    }

    /// Makes the table at `path` hold `fields`; with `whole`, nothing else. Missing tables on the
    /// way are created implicit, so only the innermost header shows (`[mcp_servers.memory]`).
    pub fn upsert_table(
        &mut self,
        path: &[String],
        fields: &[(String, EntryValue)],
        whole: bool,
    ) -> Result<(), Refusal> {
        let was_empty = self.doc.as_table().is_empty();
        let display = self.display.clone();
        let mut table: &mut dyn toml_edit::TableLike = self.doc.as_table_mut();
        for (depth, key) in path.iter().enumerate() {
            let last = depth + 1 == path.len();
            if table.get(key).is_none() {
                let mut fresh = Table::new();
                fresh.set_implicit(!last);
                if last && !was_empty {
                    fresh.decor_mut().set_prefix("\n");
                }
                table.insert(key, Item::Table(fresh));
            }
            let item = table.get_mut(key).expect("just ensured");
            if !item.is_table_like() {
                let (line, col) = position_of(&self.source, &path[..=depth]);
                return Err(Refusal::at(
                    &display,
                    line,
                    col,
                    format!(
                        "`{}` is {}, not a table",
                        dotted(&path[..=depth]),
                        kind_of(item)
                    ),
                    format!(
                        "make it a table (`[{}]`) by hand, or remove it, then run memloop again",
                        dotted(&path[..=depth])
                    ),
                ));
            }
            table = item.as_table_like_mut().expect("checked just above");
        }
        if whole {
            let stale: Vec<String> = table
                .iter()
                .map(|(k, _)| k.to_owned())
                .filter(|k| !fields.iter().any(|(f, _)| f == k))
                .collect();
            for key in stale {
                table.remove(&key);
            }
        }
        for (key, value) in fields {
            let existing = table.get(key).and_then(Item::as_value);
            if existing.is_some_and(|existing| value.matches(existing)) {
                continue;
            }
            // A replaced value keeps its comment.
            let mut fresh = value.to_value();
            if let Some(existing) = existing {
                *fresh.decor_mut() = existing.decor().clone();
            }
            table.insert(key, Item::Value(fresh));
        }
        Ok(())
    }

    /// Gives `fields` of the table at `path` back the values `original` held (a value memloop
    /// replaced comes back, one it added goes), then drops the tables left empty that `original`
    /// did not have.
    pub fn remove_table(
        &mut self,
        path: &[String],
        fields: &[(String, EntryValue)],
        original: Option<&TomlDoc>,
    ) {
        let before = |key: &str| {
            original
                .and_then(|o| o.table_at(path))
                .and_then(|t| t.get(key))
                .cloned()
        };
        if let Some(table) = table_at_mut(self.doc.as_table_mut(), path) {
            for (key, _) in fields {
                match before(key) {
                    Some(item) => {
                        table.insert(key, item);
                    }
                    None => {
                        table.remove(key);
                    }
                }
            }
        }
        for depth in (1..=path.len()).rev() {
            let prefix = &path[..depth];
            let existed = original.is_some_and(|o| o.table_at(prefix).is_some());
            let (last, parents) = prefix.split_last().expect("depth >= 1");
            let Some(parent) = table_at_mut(self.doc.as_table_mut(), parents) else {
                break;
            };
            let empty = parent
                .get(last)
                .and_then(Item::as_table_like)
                .is_some_and(|t| t.is_empty());
            if !empty || existed {
                break;
            }
            parent.remove(last);
        }
    }

    /// Renames `old` to `new` in the table at `path`, keeping its value, comments and place; when
    /// `new` is already there, `old` is dropped instead. Whether anything changed.
    pub fn rename_key(&mut self, path: &[String], old: &str, new: &str) -> bool {
        let Some(table) = table_at_mut(self.doc.as_table_mut(), path) else {
            return false;
        };
        if !table.contains_key(old) {
            return false;
        }
        if table.contains_key(new) {
            table.remove(old);
            return true;
        }
        let entries: Vec<(toml_edit::Key, Item)> = table
            .iter()
            .map(|(k, _)| {
                let (key, item) = table.get_key_value(k).expect("listed");
                (key.clone(), item.clone())
            })
            .collect();
        table.clear();
        for (key, item) in entries {
            let name = if key.get() == old { new } else { key.get() };
            table.insert(name, item);
            if let Some(mut inserted) = table.key_mut(name) {
                *inserted.leaf_decor_mut() = key.leaf_decor().clone();
            }
        }
        true
    }

    /// The table at `path`, if every step is one.
    pub fn table_at(&self, path: &[String]) -> Option<&dyn toml_edit::TableLike> {
        let mut table: &dyn toml_edit::TableLike = self.doc.as_table();
        for key in path {
            table = table.get(key)?.as_table_like()?;
        }
        Some(table)
    }
}

/// `a.b."c d"`: a table path as a TOML header spells it.
pub fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|key| {
            toml_edit::Key::new(key.as_str())
                .display_repr()
                .into_owned()
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn table_at_mut<'a>(
    root: &'a mut Table,
    path: &[String],
) -> Option<&'a mut dyn toml_edit::TableLike> {
    let mut table: &mut dyn toml_edit::TableLike = root;
    for key in path {
        table = table.get_mut(key)?.as_table_like_mut()?;
    }
    Some(table)
}

fn is_ours_table(table: &Table, entry: &Entry) -> bool {
    let (field, value) = &entry.identity;
    table.get(field).and_then(Item::as_str) == Some(value.as_str())
}

fn is_ours_inline(table: &InlineTable, entry: &Entry) -> bool {
    let (field, value) = &entry.identity;
    table.get(field).and_then(Value::as_str) == Some(value.as_str())
}

fn inline_equals(table: &InlineTable, entry: &Entry) -> bool {
    table.len() == entry.fields.len()
        && entry
            .fields
            .iter()
            .all(|(k, v)| table.get(k).is_some_and(|existing| v.matches(existing)))
}

fn entry_table(entry: &Entry) -> Table {
    let mut table = Table::new();
    for (key, value) in &entry.fields {
        table.insert(key, Item::Value(value.to_value()));
    }
    table
}

fn entry_inline(entry: &Entry) -> InlineTable {
    let mut table = InlineTable::new();
    for (key, value) in &entry.fields {
        table.insert(key, value.to_value());
    }
    table.fmt();
    table
}

/// Brings an existing table to the desired fields, touching only keys whose values differ.
fn sync_table(table: &mut Table, entry: &Entry) {
    let stale: Vec<String> = table
        .iter()
        .map(|(k, _)| k.to_owned())
        .filter(|k| !entry.fields.iter().any(|(f, _)| f == k))
        .collect();
    for key in stale {
        table.remove(&key);
    }
    for (key, value) in &entry.fields {
        let same = table
            .get(key)
            .and_then(Item::as_value)
            .is_some_and(|existing| value.matches(existing));
        if !same {
            table.insert(key, Item::Value(value.to_value()));
        }
    }
}

/// Where the key at `path` (table headers, dotted keys and inline tables alike) is defined in
/// `source`; as deep as the path can be followed, the file's start when not even its first key
/// can be found.
fn position_of(source: &str, path: &[String]) -> (usize, usize) {
    let mut start = 0;
    if let Ok(doc) = toml_edit::Document::parse(source) {
        let mut table: &dyn toml_edit::TableLike = doc.as_table();
        for key in path {
            let span = table
                .key(key)
                .and_then(toml_edit::Key::span)
                .or_else(|| table.get(key).and_then(Item::span));
            if let Some(span) = span {
                start = span.start;
            }
            match table.get(key).and_then(Item::as_table_like) {
                Some(inner) => table = inner,
                None => break,
            }
        }
    }
    crate::position::line_col(source, start)
}

/// What a TOML item is, for a refusal: "a string", "an array of tables".
fn kind_of(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(value) => match value {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::InlineTable(_) => "an inline table",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pushed_entry_joins_the_array_in_its_form_and_leaves_the_rest() {
        let guard = Entry {
            fields: vec![
                ("event".into(), EntryValue::String("PreToolUse".into())),
                ("command".into(), EntryValue::String("g".into())),
            ],
            identity: ("command".into(), "g".into()),
        };
        let tables =
            "# top\n[[hooks]]\nevent = \"Stop\"\ncommand = \"g\" # same command\n\n[x]\ny = 1\n";
        let mut doc = TomlDoc::parse(tables, "c.toml").unwrap();
        doc.push_entry("hooks", &guard, "carried").unwrap();
        assert_eq!(
            doc.to_text(),
            "# top\n[[hooks]]\nevent = \"Stop\"\ncommand = \"g\" # same command\n\n# carried\n[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"g\"\n\n[x]\ny = 1\n"
        );
        let inline = "hooks = [\n  { event = \"Stop\", command = \"s\" }, # mine\n  { event = \"Stop\", command = \"t\" },\n]\n";
        let mut doc = TomlDoc::parse(inline, "c.toml").unwrap();
        doc.push_entry("hooks", &guard, "carried").unwrap();
        assert_eq!(
            doc.to_text(),
            "hooks = [\n  { event = \"Stop\", command = \"s\" }, # mine\n  { event = \"Stop\", command = \"t\" },\n  { event = \"PreToolUse\", command = \"g\" },\n]\n"
        );
        let mut doc = TomlDoc::parse("", "c.toml").unwrap();
        doc.push_entry("hooks", &guard, "").unwrap();
        assert_eq!(
            doc.to_text(),
            "[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"g\"\n"
        );
    }

    fn stop_hook() -> Entry {
        Entry {
            fields: vec![
                ("event".into(), EntryValue::String("Stop".into())),
                (
                    "command".into(),
                    EntryValue::String("memloop hook stop --agent kimi".into()),
                ),
                ("timeout".into(), EntryValue::Integer(15)),
            ],
            identity: ("command".into(), "memloop hook stop --agent kimi".into()),
        }
    }

    #[test]
    fn appends_a_table_after_comments_and_removes_it_exactly() {
        let original = "# my config\ndefault_model = \"k\"\n\n[[hooks]]\nevent = \"PreToolUse\" # mine\ncommand = \"x\"\n";
        let mut doc = TomlDoc::parse(original, "config.toml").unwrap();
        doc.upsert_entry("hooks", &stop_hook()).unwrap();
        let edited = doc.to_text();
        assert_eq!(
            edited,
            format!(
                "{original}\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n"
            )
        );
        doc.upsert_entry("hooks", &stop_hook()).unwrap();
        assert_eq!(doc.to_text(), edited);
        doc.remove_entry("hooks", &stop_hook(), false);
        assert_eq!(doc.to_text(), original);
    }

    #[test]
    fn line_endings_toml_edit_would_rewrite_are_refused_with_a_position() {
        for (text, at) in [
            ("a = 'x'\nb = 2\r\n", (2, 6)),
            ("a = 1\r\r\nb = 2\n", (1, 6)),
            ("a = 1\rb = 2\n", (1, 6)),
            ("\u{feff}a = 1\n", (1, 1)),
        ] {
            let refusal = TomlDoc::parse(text, "config.toml").unwrap_err();
            assert_eq!(refusal.line, Some(at), "{text:?}: {refusal}");
        }
    }

    /// Found by `cargo xtask fuzz`: toml_edit ends every key-value line with a newline, so a
    /// file without a final newline gained one, and kept it after removal.
    #[test]
    fn a_missing_final_newline_stays_missing() {
        for original in [
            "model = \"m\"",
            "[[hooks]]\nevent = \"PreToolUse\"\ncommand = \"x\"",
        ] {
            let doc = TomlDoc::parse(original, "config.toml").unwrap();
            assert_eq!(doc.to_text(), original);
            let mut doc = TomlDoc::parse(original, "config.toml").unwrap();
            doc.upsert_entry("hooks", &stop_hook()).unwrap();
            let edited = doc.to_text();
            assert!(!edited.ends_with('\n'), "{edited:?}");
            let mut doc = TomlDoc::parse(&edited, "config.toml").unwrap();
            doc.remove_entry("hooks", &stop_hook(), false);
            assert_eq!(doc.to_text(), original);
        }
    }

    #[test]
    fn empty_inline_array_takes_the_entry_and_stays_valid() {
        let mut doc = TomlDoc::parse("hooks = []\nmodel = \"m\"\n", "config.toml").unwrap();
        doc.upsert_entry("hooks", &stop_hook()).unwrap();
        let text = doc.to_text();
        assert!(text.parse::<DocumentMut>().is_ok(), "{text}");
        assert!(text.starts_with("hooks = [{ event = \"Stop\""), "{text}");
    }

    fn path(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| (*k).to_owned()).collect()
    }

    #[test]
    fn a_table_is_added_under_implicit_parents_and_taken_back_exactly() {
        let original = "# mine\nmodel = \"m\"\n\n[projects.\"/a\"]\ntrust_level = \"trusted\"\n";
        let fields = vec![(
            "trust_level".to_owned(),
            EntryValue::String("trusted".into()),
        )];
        let key = path(&["projects", "/r/x y"]);
        let mut doc = TomlDoc::parse(original, "c.toml").unwrap();
        doc.upsert_table(&key, &fields, false).unwrap();
        let edited = doc.to_text();
        assert_eq!(
            edited,
            format!("{original}\n[projects.\"/r/x y\"]\ntrust_level = \"trusted\"\n")
        );
        doc.upsert_table(&key, &fields, false).unwrap();
        assert_eq!(doc.to_text(), edited, "idempotent");
        let before = TomlDoc::parse(original, "c.toml").unwrap();
        doc.remove_table(&key, &fields, Some(&before));
        assert_eq!(doc.to_text(), original);
    }

    #[test]
    fn a_whole_table_drops_stale_keys_and_a_replaced_value_comes_back() {
        let original = "[mcp_servers.memory]\ncommand = \"old\" # mine\nurl = \"u\"\n";
        let fields = vec![
            ("command".to_owned(), EntryValue::String("memloop".into())),
            ("args".to_owned(), EntryValue::Strings(vec!["serve".into()])),
        ];
        let key = path(&["mcp_servers", "memory"]);
        let mut doc = TomlDoc::parse(original, "c.toml").unwrap();
        doc.upsert_table(&key, &fields, true).unwrap();
        assert_eq!(
            doc.to_text(),
            "[mcp_servers.memory]\ncommand = \"memloop\" # mine\nargs = [\"serve\"]\n"
        );
        let before = TomlDoc::parse(original, "c.toml").unwrap();
        doc.remove_table(&key, &fields, Some(&before));
        assert!(
            doc.to_text().contains("command = \"old\" # mine"),
            "{}",
            doc.to_text()
        );
        let mut other = TomlDoc::parse("x = 1\n", "c.toml").unwrap();
        other.upsert_table(&path(&["a"]), &fields, true).unwrap();
        other.remove_table(&path(&["a"]), &fields, None);
        assert_eq!(other.to_text(), "x = 1\n");
    }

    /// Every wrong type on the way to a table memloop writes (Codex's `mcp_servers`, its
    /// server, `projects` and a project's entry in the user's config) is refused at its place.
    #[test]
    fn a_value_where_a_table_belongs_is_refused_at_its_position() {
        for (text, at, problem) in [
            (
                "projects = 3\n",
                "c.toml:1:1:",
                "`projects` is an integer, not a table",
            ),
            (
                "model = \"m\"\n\n[projects]\n\"/r\" = \"trusted\"\n",
                "c.toml:4:1:",
                "`projects.\"/r\"` is a string, not a table",
            ),
            (
                "a = 1\nprojects = [[1]]\n",
                "c.toml:2:1:",
                "`projects` is an array, not a table",
            ),
            (
                "[[projects]]\nx = 1\n",
                "c.toml:1:3:",
                "`projects` is an array of tables, not a table",
            ),
            (
                "x = 1\nprojects.\"/r\" = true\n",
                "c.toml:2:10:",
                "`projects.\"/r\"` is a boolean, not a table",
            ),
            (
                "projects = { \"/r\" = 1 }\n",
                "c.toml:1:14:",
                "`projects.\"/r\"` is an integer, not a table",
            ),
        ] {
            let mut doc = TomlDoc::parse(text, "c.toml").unwrap();
            let err = doc
                .upsert_table(&path(&["projects", "/r"]), &[], false)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(at), "{text:?}: {err}");
            assert!(err.contains(problem), "{text:?}: {err}");
            // The hint's header is one a person can paste.
            let header = if problem.contains("/r") {
                "[projects.\"/r\"]"
            } else {
                "[projects]"
            };
            assert!(err.contains(&format!("(`{header}`)")), "{text:?}: {err}");
        }
    }

    #[test]
    fn rename_keeps_place_value_and_comment() {
        let text = "[features]\na = false\ncodex_hooks = true # gate\nb = 1\n";
        let mut doc = TomlDoc::parse(text, "c.toml").unwrap();
        assert!(doc.rename_key(&path(&["features"]), "codex_hooks", "hooks"));
        assert_eq!(doc.to_text(), text.replace("codex_hooks", "hooks"));
        assert!(!doc.rename_key(&path(&["features"]), "codex_hooks", "hooks"));
    }

    #[test]
    fn duplicate_definition_is_refused_with_a_hint() {
        let err =
            TomlDoc::parse("hooks = []\n[[hooks]]\nevent = \"Stop\"\n", "config.toml").unwrap_err();
        assert!(err.to_string().starts_with("config.toml:2:"), "{err}");
    }

    #[test]
    fn duplicate_keys_are_refused_at_the_second_at_any_depth() {
        for (text, at) in [
            ("model = \"a\"\nmodel = \"b\"\n", "c.toml:2:1:"),
            (
                "[[hooks]]\nevent = \"Stop\"\ncommand = \"x\"\nevent = \"Stop\"\n",
                "c.toml:4:1:",
            ),
            ("[mcp]\nx = { a = 1, a = 2 }\n", "c.toml:2:14:"),
            ("[t]\na = 1\n[t]\nb = 2\n", "c.toml:3:"),
            ("a.b = 1\na.b = 2\n", "c.toml:2:"),
        ] {
            let err = TomlDoc::parse(text, "c.toml").unwrap_err();
            assert!(err.to_string().starts_with(at), "{text:?}: {err}");
        }
    }

    #[test]
    fn hooks_of_another_type_are_refused_with_a_position() {
        for (text, at) in [
            (
                "model = \"m\"\n\n[hooks]\nevent = \"Stop\"\n",
                "config.toml:3:2:",
            ),
            ("hooks = \"x\"\n", "config.toml:1:1:"),
            ("hooks = { event = \"Stop\" }\n", "config.toml:1:1:"),
        ] {
            let mut doc = TomlDoc::parse(text, "config.toml").unwrap();
            let err = doc.upsert_entry("hooks", &stop_hook()).unwrap_err();
            assert!(err.to_string().starts_with(at), "{text:?}: {err}");
            assert_eq!(doc.to_text(), text);
        }
    }
}
