//! Reads a tool call's arguments and says exactly what to fix when they are wrong.
//!
//! Every problem is collected, not only the first, so the model can repair a call in one retry.
//! Where a model commonly sends a near miss (a number as a string, tags as one comma-separated
//! string) the intent is unambiguous and accepted rather than bounced.

use rmcp::model::JsonObject;
use serde_json::Value;

pub struct Args<'a> {
    map: &'a JsonObject,
    known: &'static [&'static str],
    problems: Vec<String>,
}

impl<'a> Args<'a> {
    pub fn new(map: &'a JsonObject, known: &'static [&'static str]) -> Self {
        Args {
            map,
            known,
            problems: Vec::new(),
        }
    }

    pub fn problem(&mut self, text: String) {
        self.problems.push(text);
    }

    /// Present and not null.
    fn value(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// A one-line or multi-line text, trimmed, non-empty, at most `max` bytes.
    pub fn text(
        &mut self,
        key: &str,
        required: bool,
        max: usize,
        one_line: bool,
    ) -> Option<String> {
        let value = match self.value(key) {
            None if required => {
                self.problems.push(format!("{key}: missing"));
                return None;
            }
            None => return None,
            Some(Value::String(s)) => s.trim(),
            Some(Value::Number(n)) => return Some(n.to_string()),
            Some(other) => {
                self.problems
                    .push(format!("{key}: expected a string, got {}", kind(other)));
                return None;
            }
        };
        if value.is_empty() {
            self.problems.push(format!("{key}: empty"));
            return None;
        }
        if value.len() > max {
            self.problems.push(format!(
                "{key}: {} bytes, the limit is {max}; nothing was stored, so shorten it \
                 (keep the fact and its reason) or split it",
                value.len()
            ));
            return None;
        }
        if one_line && value.contains(['\n', '\r']) {
            self.problems.push(format!("{key}: must be a single line"));
            return None;
        }
        Some(value.to_owned())
    }

    /// A whole number in `min..=max`; `7`, `7.0` and `"7"` all mean seven.
    pub fn integer(
        &mut self,
        key: &str,
        required: bool,
        min: i64,
        max: i64,
        hint: &str,
    ) -> Option<i64> {
        let value = match self.value(key) {
            None if required => {
                self.problems.push(format!(
                    "{key}: missing; give a whole number from {min} to {max}{hint}"
                ));
                return None;
            }
            None => return None,
            Some(value) => value,
        };
        let number = match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        match number {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.problems.push(format!(
                    "{key}: give a whole number from {min} to {max}{hint}, got {value}"
                ));
                None
            }
        }
    }

    /// A list of short single-line strings, `count` long; one comma-separated string is split.
    pub fn list(
        &mut self,
        key: &str,
        required: bool,
        count: (usize, usize),
        item_max: usize,
        noun: &str,
    ) -> Option<Vec<String>> {
        let (min, max) = count;
        let items: Vec<String> = match self.value(key) {
            None if required => {
                self.problems
                    .push(format!("{key}: missing; give {min} to {max} {noun}"));
                return None;
            }
            None => return None,
            Some(Value::String(s)) => s.split(',').map(|t| t.trim().to_owned()).collect(),
            Some(Value::Array(values)) => {
                let mut items = Vec::new();
                for value in values {
                    match value {
                        Value::String(s) => items.push(s.trim().to_owned()),
                        other => {
                            self.problems.push(format!(
                                "{key}: every item must be a string, got {}",
                                kind(other)
                            ));
                            return None;
                        }
                    }
                }
                items
            }
            Some(other) => {
                self.problems.push(format!(
                    "{key}: expected a list of strings, got {}",
                    kind(other)
                ));
                return None;
            }
        };
        let items: Vec<String> = items.into_iter().filter(|t| !t.is_empty()).collect();
        if !(min..=max).contains(&items.len()) {
            self.problems.push(format!(
                "{key}: give {min} to {max} {noun}, got {}",
                items.len()
            ));
            return None;
        }
        for item in &items {
            if item.len() > item_max || item.contains(['\n', '\r']) {
                self.problems.push(format!(
                    "{key}: {item:?} is not one short line (at most {item_max} bytes)"
                ));
                return None;
            }
        }
        for (i, item) in items.iter().enumerate() {
            if items[..i]
                .iter()
                .any(|seen| seen.eq_ignore_ascii_case(item))
            {
                self.problems
                    .push(format!("{key}: {item:?} is given twice"));
                return None;
            }
        }
        Some(items)
    }

    /// Everything collected, plus arguments the tool does not take (usually a typo).
    pub fn finish(mut self, tool: &str) -> Result<(), String> {
        for key in self.map.keys() {
            if !self.known.contains(&key.as_str()) {
                self.problems.push(format!(
                    "{key}: {tool} takes no such argument; it takes {}",
                    self.known.join(", ")
                ));
            }
        }
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{tool}: {}. Nothing was changed; fix the arguments and call again.",
                self.problems.join("; ")
            ))
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
