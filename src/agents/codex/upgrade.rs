//! Codex's migrations. Facts: xtask/src/e2e/codex_facts.md section 6.
//!
//! - `codex-hooks-feature`: `[features] codex_hooks` in the user's `$CODEX_HOME/config.toml`
//!   is the old name of `hooks` (renamed in 0.129, openai/codex PR #20522); 0.171.0 still honours
//!   it but prints a deprecation error item on every run. From 0.129 on it becomes `hooks`,
//!   value and comments kept; where both are set, `hooks` already wins and the old key goes.
//! - `codex-session-start`: a `.codex/hooks.json` an older memloop wrote holds its Stop group
//!   but not the SessionStart group that gives each session the memory index; it is added, as
//!   sync would (unless `[memory] session_start = false`).
//! - `codex-recall`: the same for the UserPromptSubmit group (the notes that match each prompt),
//!   unless `[memory] recall = false`. Its trust entry in the user config is written by
//!   `memloop trust` and by every sync with consent, as the other hooks' are; doctor names it
//!   while it is missing.

use std::path::PathBuf;

use super::{
    HOOK_COMMAND, HOOKS_JSON, PROMPT_COMMAND, SESSION_START_COMMAND, codex_home, prompt_group,
    session_start_group,
};
use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::engine::PlanError;
use crate::upgrade::joined_groups::{self, JoinedGroups, Piece};
use crate::upgrade::{Env, Files, Migration};
use crate::version::{Product, Range, Version};

/// Codex's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[HOOKS_FEATURE, SESSION_START, RECALL];

pub const RECALL: Migration = Migration {
    id: "codex-recall",
    agent: Some(AgentId::Codex),
    range: Range::Any,
    about: "memloop's UserPromptSubmit hook (the notes that match each prompt) joins its Stop hook in .codex/hooks.json",
    detect: |env, files| RECALL_GROUPS.detect(env, files),
    rewrite: |env, files| RECALL_GROUPS.rewrite(env, files),
};

const RECALL_GROUPS: JoinedGroups = JoinedGroups {
    file: HOOKS_JSON,
    dialect: Dialect::Strict,
    gate: ("Stop", HOOK_COMMAND),
    pieces: &[Piece {
        event: "UserPromptSubmit",
        command: PROMPT_COMMAND,
        group: prompt_group,
        wanted: joined_groups::recall,
    }],
};

pub const SESSION_START: Migration = Migration {
    id: "codex-session-start",
    agent: Some(AgentId::Codex),
    range: Range::Any,
    about: "memloop's SessionStart hook (the memory index at session start) joins its Stop hook in .codex/hooks.json",
    detect: session_start_detect,
    rewrite: session_start_rewrite,
};

const SESSION_START_GROUPS: JoinedGroups = JoinedGroups {
    file: HOOKS_JSON,
    dialect: Dialect::Strict,
    gate: ("Stop", HOOK_COMMAND),
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

pub const HOOKS_FEATURE: Migration = Migration {
    id: "codex-hooks-feature",
    agent: Some(AgentId::Codex),
    range: Range::Versions {
        product: Product::Codex,
        min: Version(0, 129, 0),
        below: None,
        if_missing: true,
    },
    about: "[features] codex_hooks (the old name, deprecated since Codex 0.129) becomes hooks",
    detect: feature_detect,
    rewrite: feature_rewrite,
};

fn user_config(env: &Env) -> PathBuf {
    codex_home(&env.ctx.home).join("config.toml")
}

fn features() -> Vec<String> {
    vec!["features".into()]
}

fn feature_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = user_config(env);
    let Some((doc, _)) = files.toml(&path)? else {
        return Ok(Vec::new());
    };
    let old = doc
        .table_at(&features())
        .is_some_and(|t| t.contains_key("codex_hooks"));
    Ok(if old {
        vec![format!(
            "{}: [features] codex_hooks is the old name of hooks; Codex warns on every run",
            files.display(&path)
        )]
    } else {
        Vec::new()
    })
}

fn feature_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = user_config(env);
    let Some((mut doc, encoding)) = files.toml(&path)? else {
        return Ok(());
    };
    if doc.rename_key(&features(), "codex_hooks", "hooks") {
        files.write_text(&path, &doc.to_text(), encoding)?;
    }
    Ok(())
}
