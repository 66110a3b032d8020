//! JSON and JSONC files, edited through jsonc-parser's concrete syntax tree so that comments,
//! key order, indentation and trailing commas survive. serde_json only builds the values that
//! are inserted and reads values back; it never writes a user's file.

use std::collections::HashMap;

use jsonc_parser::ParseOptions;
use jsonc_parser::ast::{ObjectPropName, Value as Ast};
use jsonc_parser::common::Ranged;
use jsonc_parser::cst::{CstArray, CstInputValue, CstNode, CstObject, CstRootNode};
use serde_json::Value;

use super::Refusal;
use crate::position::line_col;

/// Which syntax the agent that reads the file accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Strict JSON (Claude Code's settings and `.mcp.json`, Kimi's `mcp.json`): comments and
    /// trailing commas are refused, never written.
    Strict,
    /// JSON with comments and trailing commas (OpenCode parses both extensions this way).
    Jsonc,
    /// JSON with comments but no trailing commas: Gemini CLI and Qwen Code strip the comments,
    /// then call `JSON.parse` (Qwen drops the whole file at a trailing comma).
    Comments,
}

impl Dialect {
    fn options(self) -> ParseOptions {
        ParseOptions {
            allow_comments: self != Dialect::Strict,
            allow_trailing_commas: self == Dialect::Jsonc,
            allow_loose_object_property_names: false,
            allow_missing_commas: false,
            allow_single_quoted_strings: false,
            allow_hexadecimal_numbers: false,
            allow_unary_plus_numbers: false,
            allow_bare_decimal_point_numbers: false,
            allow_non_finite_numbers: false,
            allow_extended_string_escapes: false,
        }
    }
}

/// A parsed JSON document whose root is an object.
#[derive(Debug)]
pub struct JsonDoc {
    root: CstRootNode,
    display: String,
    /// The text as parsed, for the positions of refusals about it.
    source: String,
}

impl JsonDoc {
    /// Parses `text`; an empty or whitespace-only text is an empty object.
    pub fn parse(text: &str, dialect: Dialect, display: &str) -> Result<JsonDoc, Refusal> {
        let source = if text.trim().is_empty() { "{}\n" } else { text };
        let refuse = |err: jsonc_parser::errors::ParseError| {
            let hint = match dialect {
                Dialect::Strict => {
                    "this file must be strict JSON (no comments, no trailing commas): fix it, then run memloop again"
                }
                Dialect::Jsonc => "fix the syntax, then run memloop again",
                Dialect::Comments => {
                    "this file may hold comments but no trailing commas (the agent drops the whole file at one): fix it, then run memloop again"
                }
            };
            Refusal::at(
                display,
                err.line_display(),
                err.column_display(),
                err.kind().to_string(),
                hint,
            )
        };
        // The CST keeps comments whatever the options say, so strictness is checked on the AST.
        let ast = jsonc_parser::parse_to_ast(source, &Default::default(), &dialect.options())
            .map_err(refuse)?;
        if let Some(value) = &ast.value {
            refuse_duplicate_keys(source, value, display)?;
            if !matches!(value, Ast::Object(_)) {
                let (line, col) = line_col(source, value.start());
                return Err(Refusal::at(
                    display,
                    line,
                    col,
                    "the top level is not a JSON object",
                    "make it an object ({ ... }), then run memloop again",
                ));
            }
        }
        refuse_foreign_whitespace(source, display)?;
        let root = CstRootNode::parse(source, &dialect.options()).map_err(refuse)?;
        Ok(JsonDoc {
            root,
            display: display.to_owned(),
            source: source.to_owned(),
        })
    }

    pub fn to_text(&self) -> String {
        self.root.to_string()
    }

    /// The whole document as a value.
    pub fn value(&self) -> Value {
        self.root
            .to_serde_value()
            .unwrap_or(Value::Object(Default::default()))
    }

    /// The value at `path` (object keys), if every step exists.
    pub fn get(&self, path: &[String]) -> Option<Value> {
        let mut value = self.value();
        for key in path {
            value = value.get(key)?.clone();
        }
        Some(value)
    }

    fn root_object(&self) -> CstObject {
        self.root.object_value_or_set()
    }

    /// The object at `path`, created where missing. A step that holds something else than an
    /// object is refused, never replaced.
    fn object_at(&self, path: &[String]) -> Result<CstObject, Refusal> {
        let mut object = self.root_object();
        for (depth, key) in path.iter().enumerate() {
            object = match object.get(key) {
                Some(prop) => prop
                    .object_value()
                    .ok_or_else(|| self.not_a(&path[..=depth], "an object"))?,
                None => object
                    .append(key, CstInputValue::Object(Vec::new()))
                    .object_value()
                    .expect("just inserted"),
            };
        }
        Ok(object)
    }

    fn existing_object(&self, path: &[String]) -> Option<CstObject> {
        let mut object = self.root.object_value()?;
        for key in path {
            object = object.get(key)?.object_value()?;
        }
        Some(object)
    }

    fn not_a(&self, path: &[String], expected: &str) -> Refusal {
        let (line, col) = value_position(&self.source, path);
        Refusal::at(
            &self.display,
            line,
            col,
            format!("`{}` is not {expected}", path.join(".")),
            "memloop only adds to it; fix its type by hand, then run memloop again",
        )
    }

    /// Sets `path` to `value`, creating parent objects. An equal value is left byte-identical.
    pub fn set(&mut self, path: &[String], value: &Value) -> Result<(), Refusal> {
        let (key, parents) = path.split_last().expect("a path has at least one key");
        let object = self.object_at(parents)?;
        match object.get(key) {
            Some(prop)
                if prop.value().and_then(|node| node.to_serde_value()).as_ref() == Some(value) => {}
            Some(prop) => prop.set_value(input(value)),
            None => {
                object.append(key, input(value));
            }
        }
        Ok(())
    }

    /// Inserts `key` as the first member of the root object when it is missing.
    pub fn ensure_first(&mut self, key: &str, value: &Value) {
        let object = self.root_object();
        if object.get(key).is_some() {
            return;
        }
        let text = self.to_text();
        match comment_after_open_brace(&text) {
            // The syntax tree would put the member between the brace and the comment that
            // follows it on its line, and then take that comment away with the member. The
            // member goes on its own line below the comment instead.
            Some(line_end) => {
                let indent = member_indent(&text).unwrap_or("  ");
                let eol = if text[line_end..].starts_with('\r') {
                    "\r\n"
                } else {
                    "\n"
                };
                let member = format!(
                    "{eol}{indent}{}: {},",
                    Value::String(key.to_owned()),
                    serde_json::to_string(value).expect("a JSON value serializes")
                );
                let mut edited = text.clone();
                edited.insert_str(line_end, &member);
                // Trailing comma before `}` when the object was empty: JSONC allows it, and
                // this branch only runs where comments are allowed, which is JSONC.
                if let Ok(root) = CstRootNode::parse(&edited, &Dialect::Jsonc.options()) {
                    self.root = root;
                    return;
                }
                object.insert(0, key, input(value));
            }
            None => {
                object.insert(0, key, input(value));
            }
        }
    }

    /// Removes `path`; then removes each parent left empty for which `prune(parent_path)` holds.
    pub fn remove(&mut self, path: &[String], prune: &dyn Fn(&[String]) -> bool) {
        let (key, parents) = path.split_last().expect("a path has at least one key");
        if let Some(prop) = self
            .existing_object(parents)
            .and_then(|object| object.get(key))
        {
            prop.remove();
        }
        self.prune_empty(parents, prune);
    }

    fn prune_empty(&mut self, path: &[String], prune: &dyn Fn(&[String]) -> bool) {
        for depth in (1..=path.len()).rev() {
            let here = &path[..depth];
            let empty = self
                .existing_object(here)
                .is_some_and(|object| object.properties().is_empty())
                || self
                    .existing_array(here)
                    .is_some_and(|array| array.elements().is_empty());
            if !(empty && prune(here)) {
                return;
            }
            let (key, parents) = here.split_last().expect("depth >= 1");
            if let Some(prop) = self
                .existing_object(parents)
                .and_then(|object| object.get(key))
            {
                prop.remove();
            }
        }
    }

    fn existing_array(&self, path: &[String]) -> Option<CstArray> {
        let (key, parents) = path.split_last()?;
        self.existing_object(parents)?.get(key)?.array_value()
    }

    /// Makes the array at `path` hold exactly one element for which `is_ours` holds, equal to
    /// `value`: appended when missing, replaced when it differs, later duplicates removed.
    pub fn upsert_item(
        &mut self,
        path: &[String],
        value: &Value,
        is_ours: &dyn Fn(&Value) -> bool,
    ) -> Result<(), Refusal> {
        let (key, parents) = path.split_last().expect("a path has at least one key");
        let object = self.object_at(parents)?;
        let array = match object.get(key) {
            Some(prop) => prop
                .array_value()
                .ok_or_else(|| self.not_a(path, "an array"))?,
            None => object
                .append(key, CstInputValue::Array(Vec::new()))
                .array_value()
                .expect("just inserted"),
        };
        let mut ours = array
            .elements()
            .into_iter()
            .filter(|element| element_value(element).is_some_and(|v| is_ours(&v)));
        match ours.next() {
            None => {
                array.append(input(value));
            }
            Some(first) => {
                let duplicates: Vec<CstNode> = ours.collect();
                duplicates.into_iter().for_each(CstNode::remove);
                if element_value(&first).as_ref() != Some(value) {
                    let index = first.element_index().expect("an array element");
                    first.remove();
                    array.insert(index, input(value));
                }
            }
        }
        Ok(())
    }

    /// Removes every element of the array at `path` for which `is_ours` holds, then prunes.
    pub fn remove_items(
        &mut self,
        path: &[String],
        is_ours: &dyn Fn(&Value) -> bool,
        prune: &dyn Fn(&[String]) -> bool,
    ) {
        if let Some(array) = self.existing_array(path) {
            for element in array.elements() {
                if element_value(&element).is_some_and(|v| is_ours(&v)) {
                    element.remove();
                }
            }
        }
        self.prune_empty(path, prune);
    }
}

/// Where a member can go on a line of its own below the comments that follow the root object's
/// `{` on its line (a block comment may run over several lines): the offset of the end of the
/// comments' last line. `None` when no comment follows the brace, or a member shares its line.
fn comment_after_open_brace(text: &str) -> Option<usize> {
    let mut at = text.find('{')? + 1;
    let mut saw_comment = false;
    loop {
        let rest = &text[at..];
        let blank = rest.len() - rest.trim_start_matches([' ', '\t', '\r']).len();
        at += blank;
        let rest = &text[at..];
        if rest.starts_with("//") {
            saw_comment = true;
            at += rest.find('\n')?;
        } else if rest.starts_with("/*") {
            saw_comment = true;
            at += rest.find("*/")? + 2;
        } else if rest.starts_with('\n') && saw_comment {
            let line_end = at;
            return Some(if text[..line_end].ends_with('\r') {
                line_end - 1
            } else {
                line_end
            });
        } else {
            return None;
        }
    }
}

/// The indentation of the root object's first member, when it stands on a line of its own.
fn member_indent(text: &str) -> Option<&str> {
    let brace = text.find('{')?;
    let next_line = &text[brace + text[brace..].find('\n')? + 1..];
    let indent = &next_line[..next_line.len() - next_line.trim_start_matches([' ', '\t']).len()];
    (!indent.is_empty()).then_some(indent)
}

/// JSON's whitespace is space, tab, line feed and carriage return. The parser also skips the
/// Unicode spaces (U+2028, U+00A0 and the like): `JSON.parse` refuses them in strict files, and
/// in JSONC the syntax tree does not keep them where they stand when it lays out an edit.
fn refuse_foreign_whitespace(text: &str, display: &str) -> Result<(), Refusal> {
    let mut in_string = false;
    let mut escaped = false;
    for (offset, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() && !matches!(c, ' ' | '\t' | '\n' | '\r') {
            let (line, col) = line_col(text, offset);
            return Err(Refusal::at(
                display,
                line,
                col,
                format!("U+{:04X} is not whitespace in JSON", c as u32),
                "replace it with a space or a line break, then run memloop again",
            ));
        }
    }
    Ok(())
}

/// Agents read the last of two equal keys, memloop's editor the first: a file with one is
/// refused at the second, at any depth.
fn refuse_duplicate_keys(text: &str, root: &Ast, display: &str) -> Result<(), Refusal> {
    // An explicit stack: a deeply nested file must not exhaust the call stack.
    let mut pending = vec![root];
    while let Some(value) = pending.pop() {
        match value {
            Ast::Object(object) => {
                let mut seen: HashMap<&str, usize> = HashMap::new();
                for prop in &object.properties {
                    let key = prop.name.as_str();
                    if let Some(first) = seen.insert(key, prop.start()) {
                        let (line, col) = line_col(text, prop.start());
                        let (first_line, _) = line_col(text, first);
                        return Err(Refusal::at(
                            display,
                            line,
                            col,
                            format!(
                                "the key {key:?} is defined twice in the same object (first at line {first_line}); agents read only the last one"
                            ),
                            format!(
                                "merge the two {key:?} entries into one, then run memloop again"
                            ),
                        ));
                    }
                    pending.push(&prop.value);
                }
            }
            Ast::Array(array) => pending.extend(array.elements.iter()),
            _ => {}
        }
    }
    Ok(())
}

/// `current` with the value at `path` replaced by the bytes of the value at `path` in
/// `original`: a member comes back exactly as the user wrote it. `None` when either is missing.
pub fn splice_member(current: &str, original: &str, path: &[String]) -> Option<String> {
    let here = value_range(current, path)?;
    let there = value_range(original, path)?;
    let mut out = String::with_capacity(current.len() + there.len());
    out.push_str(&current[..here.start]);
    out.push_str(&original[there]);
    out.push_str(&current[here.end..]);
    Some(out)
}

/// The byte range of the value at `path` (object keys), if every step exists.
fn value_range(text: &str, path: &[String]) -> Option<std::ops::Range<usize>> {
    let options = Dialect::Jsonc.options();
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options).ok()?;
    let mut node = parsed.value.as_ref()?;
    for key in path {
        let Ast::Object(object) = node else {
            return None;
        };
        node = &object
            .properties
            .iter()
            .find(|prop| prop_name(&prop.name) == key)?
            .value;
    }
    Some(node.start()..node.end())
}

/// Where the value at `path` starts in `text`, or the deepest parent of it that exists.
pub fn value_position(text: &str, path: &[String]) -> (usize, usize) {
    let options = ParseOptions::default();
    let Ok(parsed) = jsonc_parser::parse_to_ast(text, &Default::default(), &options) else {
        return (1, 1);
    };
    let Some(mut node) = parsed.value.as_ref() else {
        return (1, 1);
    };
    let mut start = node.start();
    for key in path {
        let Ast::Object(object) = node else { break };
        let Some(prop) = object
            .properties
            .iter()
            .find(|prop| prop_name(&prop.name) == key)
        else {
            break;
        };
        start = prop.value.start();
        node = &prop.value;
    }
    line_col(text, start)
}

fn prop_name<'a>(name: &'a ObjectPropName<'a>) -> &'a str {
    name.as_str()
}

fn element_value(node: &CstNode) -> Option<Value> {
    node.to_serde_value()
}

/// A serde value as CST input, keeping the key order of `value`.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn path(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| (*k).to_owned()).collect()
    }

    fn always(_: &[String]) -> bool {
        true
    }

    #[test]
    fn set_appends_and_remove_restores() {
        let original = "{\n  // keep me\n  \"a\": 1,\n}\n";
        let mut doc = JsonDoc::parse(original, Dialect::Jsonc, "f").unwrap();
        doc.set(&path(&["mcp", "memory"]), &json!({"type": "local"}))
            .unwrap();
        let edited = doc.to_text();
        assert!(edited.contains("// keep me"));
        assert!(edited.contains("\"mcp\": {"));
        doc.remove(&path(&["mcp", "memory"]), &always);
        assert_eq!(doc.to_text(), original);
    }

    #[test]
    fn a_first_member_goes_below_a_comment_on_the_brace_line_and_comes_off_again() {
        for original in [
            "{//\n \"mcpServers\": {}\n}\n",
            "{ // note\r\n  \"a\": 1\r\n}\r\n",
            "{/* one\n two */\n\t\"a\": 1\n}\n",
            "{ // only a comment\n}\n",
        ] {
            let mut doc = JsonDoc::parse(original, Dialect::Jsonc, "f").unwrap();
            doc.ensure_first("$schema", &json!("https://example.test/s.json"));
            let edited = doc.to_text();
            let comment_line = original.lines().next().unwrap().trim_end_matches('\r');
            assert!(
                edited.starts_with(comment_line),
                "the comment keeps the brace's line in {edited:?}"
            );
            assert!(edited.contains("\"$schema\": \"https://example.test/s.json\""));
            doc.remove(&path(&["$schema"]), &|_| false);
            assert_eq!(doc.to_text(), original);
        }
    }

    #[test]
    fn unicode_spaces_outside_strings_are_refused_where_they_stand() {
        for dialect in [Dialect::Strict, Dialect::Jsonc] {
            let err = JsonDoc::parse("{\n  \"a\":\u{2028}1\n}", dialect, "f.json").unwrap_err();
            let text = err.to_string();
            assert!(text.contains("f.json:2:7"), "{text}");
            assert!(text.contains("U+2028"), "{text}");
        }
        let inside = JsonDoc::parse("{\"a\": \"x\u{00a0}\\\"\u{2028}\"}", Dialect::Strict, "f");
        assert!(inside.is_ok(), "inside a string they are text");
    }

    #[test]
    fn strict_dialect_refuses_comments_with_position() {
        let err = JsonDoc::parse(
            "{\n  \"a\": 1, // no\n}",
            Dialect::Strict,
            ".claude/settings.json",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(".claude/settings.json:2:"),
            "{err}"
        );
    }

    #[test]
    fn non_object_parent_is_refused() {
        let mut doc = JsonDoc::parse("{\"hooks\": \"x\"}", Dialect::Strict, "s.json").unwrap();
        let err = doc
            .upsert_item(&path(&["hooks", "Stop"]), &json!({}), &|_| true)
            .unwrap_err();
        assert!(err.problem.contains("`hooks` is not an object"), "{err}");
        assert_eq!(doc.to_text(), "{\"hooks\": \"x\"}");
    }

    #[test]
    fn upsert_item_is_idempotent_and_removes_duplicates() {
        let ours = |v: &Value| v["id"] == "m";
        let mut doc = JsonDoc::parse(
            "{\"l\": [{\"id\": \"x\"}, {\"id\": \"m\", \"n\": 1}, {\"id\": \"m\"}]}",
            Dialect::Strict,
            "f",
        )
        .unwrap();
        doc.upsert_item(&path(&["l"]), &json!({"id": "m", "n": 2}), &ours)
            .unwrap();
        assert_eq!(
            doc.get(&path(&["l"])).unwrap(),
            json!([{"id": "x"}, {"id": "m", "n": 2}])
        );
        let once = doc.to_text();
        doc.upsert_item(&path(&["l"]), &json!({"id": "m", "n": 2}), &ours)
            .unwrap();
        assert_eq!(doc.to_text(), once);
    }

    #[test]
    fn ensure_first_inserts_at_the_top_only_when_missing() {
        let mut doc = JsonDoc::parse("{\n  \"model\": \"x\"\n}\n", Dialect::Jsonc, "f").unwrap();
        doc.ensure_first("$schema", &json!("s"));
        assert_eq!(
            doc.to_text(),
            "{\n  \"$schema\": \"s\",\n  \"model\": \"x\"\n}\n"
        );
        doc.ensure_first("$schema", &json!("other"));
        assert_eq!(
            doc.to_text(),
            "{\n  \"$schema\": \"s\",\n  \"model\": \"x\"\n}\n"
        );
    }

    #[test]
    fn the_comments_dialect_keeps_comments_and_refuses_trailing_commas() {
        let text = "{\n  // why\n  \"a\": 1 /* one */\n}\n";
        assert!(JsonDoc::parse(text, Dialect::Comments, "f").is_ok());
        assert!(JsonDoc::parse(text, Dialect::Strict, "f").is_err());
        let err = JsonDoc::parse("{\n  \"a\": 1,\n}\n", Dialect::Comments, "s.json").unwrap_err();
        assert!(err.to_string().starts_with("s.json:2:9:"), "{err}");
        assert!(err.to_string().contains("no trailing commas"), "{err}");
        assert!(JsonDoc::parse("{\"a\": 1,}", Dialect::Jsonc, "f").is_ok());
    }

    #[test]
    fn duplicate_keys_are_refused_at_the_second_at_any_depth() {
        for (text, at) in [
            (
                "{\n  \"mcpServers\": {},\n  \"mcpServers\": {}\n}\n",
                "f:3:3:",
            ),
            ("{\"a\": {\"b\": [ {\"c\": 1, \"c\": 2} ]}}", "f:1:24:"),
            ("{\"a\": 1, \"\\u0061\": 2}", "f:1:10:"),
        ] {
            for dialect in [Dialect::Strict, Dialect::Jsonc] {
                let err = JsonDoc::parse(text, dialect, "f").unwrap_err();
                assert!(err.to_string().starts_with(at), "{text}: {err}");
                assert!(err.problem.contains("defined twice"), "{err}");
            }
        }
        // The same key in sibling objects is fine.
        JsonDoc::parse(
            "{\"a\": {\"k\": 1}, \"b\": {\"k\": 1}}",
            Dialect::Strict,
            "f",
        )
        .unwrap();
    }

    #[test]
    fn splice_member_gives_back_the_original_bytes() {
        let original = "{\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"npx\" }\n  }\n}\n";
        let current = "{\n  \"a\": 1,\n  \"mcpServers\": {\n    \"memory\": {\n      \"type\": \"stdio\"\n    }\n  }\n}\n";
        assert_eq!(
            splice_member(current, original, &path(&["mcpServers", "memory"])).unwrap(),
            "{\n  \"a\": 1,\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"npx\" }\n  }\n}\n"
        );
        assert!(splice_member(current, original, &path(&["mcpServers", "x"])).is_none());
    }

    #[test]
    fn a_top_level_that_is_not_an_object_has_a_position() {
        let err = JsonDoc::parse("\n  [1, 2]\n", Dialect::Strict, "f").unwrap_err();
        assert!(err.to_string().starts_with("f:2:3: the top level"), "{err}");
    }

    #[test]
    fn a_wrong_type_on_the_path_has_the_position_of_the_value() {
        let mut doc = JsonDoc::parse(
            "{\n  \"hooks\": {\n    \"Stop\": {}\n  }\n}\n",
            Dialect::Strict,
            "s",
        )
        .unwrap();
        let err = doc
            .upsert_item(&path(&["hooks", "Stop"]), &json!({}), &|_| true)
            .unwrap_err();
        assert!(err.to_string().starts_with("s:3:13:"), "{err}");
    }
}
