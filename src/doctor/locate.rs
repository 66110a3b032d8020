//! Reading the files the agents read, and finding the line of a value in them.

use std::path::Path;

use jsonc_parser::ast::{ObjectPropName, Value as Ast};
use jsonc_parser::common::Ranged;
use serde_json::Value;

use crate::edit::Refusal;
use crate::edit::json::{Dialect, JsonDoc};
use crate::edit::text::Encoding;
use crate::position::line_col;

/// One step of a path into a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The text of a file (BOM and CRLF removed, so line numbers match the file), `None` when the
/// file does not exist.
pub fn read_text(path: &Path, display: &str) -> Result<Option<String>, Refusal> {
    // A FIFO or a device where the file should be is reported, never opened for a blocking read.
    match crate::files::read_regular(path) {
        Ok(bytes) => Encoding::decode(&bytes, display).map(|(text, _)| Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) if err.kind() == std::io::ErrorKind::IsADirectory => Err(Refusal::whole(
            display,
            "is a folder, not a file",
            "remove or rename the folder",
        )),
        Err(err) if err.kind() == std::io::ErrorKind::InvalidInput => Err(Refusal::whole(
            display,
            format!("is not a regular file ({err})"),
            "remove it or replace it with a file",
        )),
        Err(err) => Err(Refusal::whole(
            display,
            format!("cannot be read: {err}"),
            "check its permissions",
        )),
    }
}

/// A parsed JSON file and its text, for values and their lines.
pub struct JsonFile {
    pub display: String,
    pub text: String,
    pub value: Value,
}

impl JsonFile {
    /// Reads and parses a file; `Ok(None)` when it does not exist.
    pub fn load(path: &Path, display: &str, dialect: Dialect) -> Result<Option<JsonFile>, Refusal> {
        let Some(text) = read_text(path, display)? else {
            return Ok(None);
        };
        let value = JsonDoc::parse(&text, dialect, display)?.value();
        Ok(Some(JsonFile {
            display: display.to_owned(),
            text,
            value,
        }))
    }

    /// The line where the value at `path` starts (or of its nearest existing parent).
    pub fn line(&self, path: &[Step]) -> Option<usize> {
        json_line(&self.text, path)
    }

    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        path.iter()
            .try_fold(&self.value, |value, key| value.get(key))
    }
}

/// The line of the value at `path` in a JSON/JSONC text, or of the deepest parent found.
pub fn json_line(text: &str, path: &[Step]) -> Option<usize> {
    let options = jsonc_parser::ParseOptions::default();
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options).ok()?;
    let mut node = parsed.value?;
    let mut start = node.start();
    for step in path {
        let next = match (step, node) {
            (Step::Key(key), Ast::Object(object)) => object
                .properties
                .into_iter()
                .find(|prop| name(&prop.name) == *key)
                .map(|prop| {
                    start = prop.start();
                    prop.value
                }),
            (Step::Index(index), Ast::Array(array)) => {
                array.elements.into_iter().nth(*index).inspect(|value| {
                    start = value.start();
                })
            }
            _ => None,
        };
        match next {
            Some(value) => node = value,
            None => break,
        }
    }
    Some(line_col(text, start).0)
}

fn name<'a>(name: &'a ObjectPropName<'a>) -> &'a str {
    name.as_str()
}

/// The 1-based line of the first line of `text` containing `needle`.
pub fn line_containing(text: &str, needle: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.contains(needle))
        .map(|i| i + 1)
}
