//! The migration shape of agents told to run memloop's own two tools without asking
//! (`[memory] approve_tools`, `agents::APPROVED_TOOLS`): an older memloop wrote its gate into the
//! settings file but no approval. Detect names each approval missing next to the gate; rewrite
//! adds it as sync would. Nothing is added where the gate is not memloop's, or where memloop.toml
//! wants no approval (`approve_tools = false`, a server that is not memloop's own).

use serde_json::Value;

use super::joined_groups::holds_group;
use super::{Env, Files};
use crate::edit::json::Dialect;
use crate::engine::PlanError;
use crate::repo::Context;
use crate::target::Fragment;

pub struct Approvals {
    /// The settings file, relative to the repository.
    pub file: &'static str,
    pub dialect: Dialect,
    /// The event and command of memloop's gate group, whose presence shows an install.
    pub gate: (&'static str, &'static str),
    /// The approvals as sync writes them (retired ones are not wanted).
    pub fragments: fn(&Context) -> Vec<Fragment>,
}

impl Approvals {
    /// The (array path, element) pairs wanted and missing in `doc`.
    fn missing(&self, env: &Env, doc: &Value) -> Vec<(Vec<String>, Value)> {
        let (event, command) = self.gate;
        if !holds_group(doc, event, command) {
            return Vec::new();
        }
        (self.fragments)(&env.ctx)
            .into_iter()
            .filter_map(|fragment| match fragment {
                Fragment::JsonArrayItem { path, value, .. } => Some((path, value)),
                _ => None,
            })
            .filter(|(path, value)| {
                let pointer: String = path.iter().map(|k| format!("/{k}")).collect();
                !doc.pointer(&pointer)
                    .and_then(Value::as_array)
                    .is_some_and(|items| items.contains(value))
            })
            .collect()
    }

    pub fn detect(&self, env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
        let path = env.ctx.root.join(self.file);
        let Some((doc, _)) = files.json(&path, self.dialect)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .missing(env, &doc.value())
            .into_iter()
            .map(|(at, value)| {
                format!(
                    "{}: memloop's {} hook without {value} in `{}` (memloop's own tool, approved since this version)",
                    files.display(&path),
                    self.gate.0,
                    at.join(".")
                )
            })
            .collect())
    }

    pub fn rewrite(&self, env: &Env, files: &mut Files) -> Result<(), PlanError> {
        let path = env.ctx.root.join(self.file);
        let Some((mut doc, encoding)) = files.json(&path, self.dialect)? else {
            return Ok(());
        };
        let wanted = self.missing(env, &doc.value());
        if wanted.is_empty() {
            return Ok(());
        }
        for (at, value) in wanted {
            doc.upsert_item(&at, &value, &|item| *item == value)?;
        }
        files.write_text(&path, &doc.to_text(), encoding)
    }
}
