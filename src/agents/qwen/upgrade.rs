//! What `memloop upgrade` migrates in Qwen Code's files. memloop's first Qwen entries (0.24.4)
//! avoid the one format known to have moved under them: a hook's `timeout` (milliseconds once,
//! seconds now, 1000 and more still read as milliseconds) is left out, so Qwen's default
//! applies in every version.
//!
//! - `qwen-session-start`: a `.qwen/settings.json` an older memloop wrote holds its Stop gate
//!   but not the SessionStart and PreCompact groups (the memory index at session start and
//!   after a compaction, the reminder before one); they are added, as sync would (unless
//!   `[memory] session_start = false`).

use serde_json::Value;

use super::{DIALECT, HOOK_COMMAND, PRE_COMPACT_COMMAND, PROJECT_SETTINGS, SESSION_START_COMMAND};
use crate::config::AgentId;
use crate::engine::PlanError;
use crate::target::is_hook_group_for;
use crate::upgrade::{Env, Files, Migration};
use crate::version::Range;

pub const MIGRATIONS: &[Migration] = &[SESSION_START];

pub const SESSION_START: Migration = Migration {
    id: "qwen-session-start",
    agent: Some(AgentId::Qwen),
    range: Range::Any,
    about: "memloop's SessionStart and PreCompact hooks (the memory index at session start and after a compaction) join its Stop hook in .qwen/settings.json",
    detect,
    rewrite,
};

/// The groups a session-start install holds: event and command.
const PIECES: &[(&str, &str)] = &[
    ("SessionStart", SESSION_START_COMMAND),
    ("PreCompact", PRE_COMPACT_COMMAND),
];

fn holds_group(doc: &Value, event: &str, command: &str) -> bool {
    doc.pointer(&format!("/hooks/{event}"))
        .and_then(Value::as_array)
        .is_some_and(|groups| groups.iter().any(|g| is_hook_group_for(g, command)))
}

fn missing(value: &Value) -> Vec<&'static (&'static str, &'static str)> {
    if !holds_group(value, "Stop", HOOK_COMMAND) {
        return Vec::new();
    }
    PIECES
        .iter()
        .filter(|(event, command)| !holds_group(value, event, command))
        .collect()
}

fn detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    if !env.ctx.config.memory.session_start {
        return Ok(Vec::new());
    }
    let settings = env.ctx.root.join(PROJECT_SETTINGS);
    let Some((doc, _)) = files.json(&settings, DIALECT)? else {
        return Ok(Vec::new());
    };
    Ok(missing(&doc.value())
        .into_iter()
        .map(|(event, _)| {
            format!(
                "{}: memloop's Stop hook without its {event} hook (written by an older memloop)",
                files.display(&settings)
            )
        })
        .collect())
}

fn rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let settings = env.ctx.root.join(PROJECT_SETTINGS);
    let Some((mut doc, encoding)) = files.json(&settings, DIALECT)? else {
        return Ok(());
    };
    let wanted = missing(&doc.value());
    if wanted.is_empty() {
        return Ok(());
    }
    for (event, command) in wanted {
        doc.upsert_item(
            &["hooks".into(), (*event).into()],
            &super::command_group(command),
            &|group| is_hook_group_for(group, command),
        )?;
    }
    files.write_text(&settings, &doc.to_text(), encoding)
}
