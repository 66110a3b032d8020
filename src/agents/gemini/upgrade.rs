//! Gemini's migrations. Facts: xtask/src/e2e/gemini_facts.md ("Hooks by version").
//!
//! - `gemini-hooks-switch`: the switch for hooks moved twice before it settled: `tools.enableHooks`
//!   (0.13 to 0.26), `hooks.enabled` (0.24 and 0.25, inside the object that from 0.26 on may hold
//!   only event names), and `hooksConfig.enabled` (0.26 on; on by default from 0.27). From 0.27
//!   on the old two are dead keys in the project's `.gemini/settings.json`: their value moves to
//!   `hooksConfig.enabled` (unless that is set already, which then wins), comments kept.
//! - `gemini-session-start`: a `.gemini/settings.json` an older memloop wrote holds its
//!   AfterAgent gate but not the SessionStart group that gives each session the memory index;
//!   it is added, as sync would (unless `[memory] session_start = false`).
//! - `gemini-approve-tools`: the same file without the `tools.allowed` entries for memloop's own
//!   two tools gets them, as sync would (unless `[memory] approve_tools = false`).

use serde_json::Value;

use super::{
    DIALECT, HOOK_COMMAND, PROMPT_COMMAND, SESSION_START_COMMAND, SETTINGS, prompt_group,
    session_start_group,
};
use crate::config::AgentId;
use crate::engine::PlanError;
use crate::upgrade::approvals::Approvals;
use crate::upgrade::joined_groups::{self, JoinedGroups, Piece};
use crate::upgrade::{Env, Files, Migration};
use crate::version::{Product, Range, Version};

/// Gemini's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[HOOKS_SWITCH, SESSION_START, RECALL, APPROVE_TOOLS];

pub const APPROVE_TOOLS: Migration = Migration {
    id: "gemini-approve-tools",
    agent: Some(AgentId::Gemini),
    range: Range::Any,
    about: "memloop's own two tools (context_query, memory_store) join its AfterAgent hook in .gemini/settings.json as tools.allowed entries",
    detect: |env, files| APPROVALS.detect(env, files),
    rewrite: |env, files| APPROVALS.rewrite(env, files),
};

const APPROVALS: Approvals = Approvals {
    file: SETTINGS,
    dialect: DIALECT,
    gate: ("AfterAgent", HOOK_COMMAND),
    fragments: super::approvals,
};

pub const RECALL: Migration = Migration {
    id: "gemini-recall",
    agent: Some(AgentId::Gemini),
    range: Range::Any,
    about: "memloop's BeforeAgent hook (the notes that match each prompt) joins its AfterAgent hook in .gemini/settings.json",
    detect: |env, files| RECALL_GROUPS.detect(env, files),
    rewrite: |env, files| RECALL_GROUPS.rewrite(env, files),
};

const RECALL_GROUPS: JoinedGroups = JoinedGroups {
    file: SETTINGS,
    dialect: DIALECT,
    gate: ("AfterAgent", HOOK_COMMAND),
    pieces: &[Piece {
        event: "BeforeAgent",
        command: PROMPT_COMMAND,
        group: prompt_group,
        wanted: joined_groups::recall,
    }],
};

pub const SESSION_START: Migration = Migration {
    id: "gemini-session-start",
    agent: Some(AgentId::Gemini),
    range: Range::Any,
    about: "memloop's SessionStart hook (the memory index at session start) joins its AfterAgent hook in .gemini/settings.json",
    detect: session_start_detect,
    rewrite: session_start_rewrite,
};

const SESSION_START_GROUPS: JoinedGroups = JoinedGroups {
    file: SETTINGS,
    dialect: DIALECT,
    gate: ("AfterAgent", HOOK_COMMAND),
    pieces: &[Piece {
        event: "SessionStart",
        command: SESSION_START_COMMAND,
        group: session_start_group,
        wanted: joined_groups::session_start,
    }],
};

fn session_start_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    SESSION_START_GROUPS.detect(env, files)
}

fn session_start_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    SESSION_START_GROUPS.rewrite(env, files)
}

pub const HOOKS_SWITCH: Migration = Migration {
    id: "gemini-hooks-switch",
    agent: Some(AgentId::Gemini),
    range: Range::Versions {
        product: Product::Gemini,
        min: Version(0, 27, 0),
        below: None,
        if_missing: true,
    },
    about: "tools.enableHooks and hooks.enabled (Gemini CLI's hook switches before 0.26) become hooksConfig.enabled",
    detect,
    rewrite,
};

const OLD_SWITCHES: &[[&str; 2]] = &[["hooks", "enabled"], ["tools", "enableHooks"]];

fn path(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

fn found(value: &Value) -> Vec<String> {
    OLD_SWITCHES
        .iter()
        .filter(|keys| {
            value
                .pointer(&format!("/{}/{}", keys[0], keys[1]))
                .is_some()
        })
        .map(|keys| keys.join("."))
        .collect()
}

fn detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let settings = env.ctx.root.join(SETTINGS);
    let Some((doc, _)) = files.json(&settings, DIALECT)? else {
        return Ok(Vec::new());
    };
    Ok(found(&doc.value())
        .into_iter()
        .map(|key| {
            format!(
                "{}: {key} is an old switch for hooks that this Gemini CLI no longer reads (hooksConfig.enabled is)",
                files.display(&settings)
            )
        })
        .collect())
}

fn rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let settings = env.ctx.root.join(SETTINGS);
    let Some((mut doc, encoding)) = files.json(&settings, DIALECT)? else {
        return Ok(());
    };
    let value = doc.value();
    if found(&value).is_empty() {
        return Ok(());
    }
    let target = path(&["hooksConfig", "enabled"]);
    if value.pointer("/hooksConfig/enabled").is_none() {
        let old = OLD_SWITCHES
            .iter()
            .find_map(|keys| value.pointer(&format!("/{}/{}", keys[0], keys[1])))
            .cloned();
        if let Some(old) = old {
            doc.set(&target, &old)?;
        }
    }
    for keys in OLD_SWITCHES {
        // A parent left empty goes only when it held nothing but the old switch.
        let parent_had_only_it = value
            .get(keys[0])
            .and_then(Value::as_object)
            .is_some_and(|o| o.len() == 1);
        doc.remove(&path(keys), &|_| parent_had_only_it);
    }
    files.write_text(&settings, &doc.to_text(), encoding)
}
