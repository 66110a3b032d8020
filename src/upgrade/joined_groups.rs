//! The migration shape of agents whose hooks live in a JSON settings file: an older memloop wrote
//! its gate group there alone, and this memloop installs more groups beside it (the session-start
//! pieces, the prompt hook). Detect names each group that is missing next to the gate; rewrite
//! adds them as sync would. Nothing is added where the gate is not memloop's, nor a piece that
//! `memloop.toml` switches off (`[memory] session_start = false`, `recall = false`).

use serde_json::Value;

use super::{Env, Files};
use crate::config::MemoryConfig;
use crate::edit::json::Dialect;
use crate::engine::PlanError;
use crate::target::is_hook_group_for;

/// One group memloop puts under `hooks.<event>`: the event, the command that marks the group
/// as memloop's, and the group as sync writes it.
pub struct Piece {
    pub event: &'static str,
    pub command: &'static str,
    pub group: fn() -> Value,
    /// Whether `[memory]` wants it (sync's `wanted_if` for the same fragment).
    pub wanted: fn(&MemoryConfig) -> bool,
}

/// The session-start pieces' condition.
pub fn session_start(memory: &MemoryConfig) -> bool {
    memory.session_start
}

/// The prompt hook's condition.
pub fn recall(memory: &MemoryConfig) -> bool {
    memory.recall
}

pub struct JoinedGroups {
    /// The settings file, relative to the repository.
    pub file: &'static str,
    pub dialect: Dialect,
    /// The event and command of memloop's gate group, whose presence shows an older install.
    pub gate: (&'static str, &'static str),
    pub pieces: &'static [Piece],
}

/// Whether `doc` holds memloop's group running `command` under `hooks.<event>`.
pub(super) fn holds_group(doc: &Value, event: &str, command: &str) -> bool {
    doc.pointer(&format!("/hooks/{event}"))
        .and_then(Value::as_array)
        .is_some_and(|groups| groups.iter().any(|g| is_hook_group_for(g, command)))
}

impl JoinedGroups {
    fn missing(&self, value: &Value, memory: &MemoryConfig) -> Vec<&Piece> {
        let (event, command) = self.gate;
        if !holds_group(value, event, command) {
            return Vec::new();
        }
        self.pieces
            .iter()
            .filter(|piece| {
                (piece.wanted)(memory) && !holds_group(value, piece.event, piece.command)
            })
            .collect()
    }

    pub fn detect(&self, env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
        let path = env.ctx.root.join(self.file);
        let Some((doc, _)) = files.json(&path, self.dialect)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .missing(&doc.value(), &env.ctx.config.memory)
            .into_iter()
            .map(|piece| {
                format!(
                    "{}: memloop's {} hook without its {} hook (written by an older memloop)",
                    files.display(&path),
                    self.gate.0,
                    piece.event
                )
            })
            .collect())
    }

    pub fn rewrite(&self, env: &Env, files: &mut Files) -> Result<(), PlanError> {
        let path = env.ctx.root.join(self.file);
        let Some((mut doc, encoding)) = files.json(&path, self.dialect)? else {
            return Ok(());
        };
        let wanted = self.missing(&doc.value(), &env.ctx.config.memory);
        if wanted.is_empty() {
            return Ok(());
        }
        for piece in wanted {
            doc.upsert_item(
                &["hooks".into(), piece.event.into()],
                &(piece.group)(),
                &|group| is_hook_group_for(group, piece.command),
            )?;
        }
        files.write_text(&path, &doc.to_text(), encoding)
    }
}
