//! What `memloop upgrade` migrates in Qwen Code's files. memloop's first Qwen entries (0.24.4)
//! avoid the one format known to have moved under them: a hook's `timeout` (milliseconds once,
//! seconds now, 1000 and more still read as milliseconds) is left out, so Qwen's default
//! applies in every version.
//!
//! - `qwen-session-start`: a `.qwen/settings.json` an older memloop wrote holds its Stop gate
//!   but not the SessionStart and PreCompact groups (the memory index at session start and
//!   after a compaction, the reminder before one); they are added, as sync would (unless
//!   `[memory] session_start = false`).
//! - `qwen-recall`: the same for the UserPromptSubmit group (the notes that match each prompt),
//!   unless `[memory] recall = false`.
//! - `qwen-approve-tools`: the same file without the `permissions.allow` entries for memloop's
//!   own two tools gets them, as sync would (unless `[memory] approve_tools = false`).

use super::{
    DIALECT, HOOK_COMMAND, PRE_COMPACT_COMMAND, PROJECT_SETTINGS, PROMPT_COMMAND,
    SESSION_START_COMMAND,
};
use crate::config::AgentId;
use crate::engine::PlanError;
use crate::upgrade::approvals::Approvals;
use crate::upgrade::joined_groups::{self, JoinedGroups, Piece};
use crate::upgrade::{Env, Files, Migration};
use crate::version::Range;

pub const MIGRATIONS: &[Migration] = &[SESSION_START, RECALL, APPROVE_TOOLS];

pub const APPROVE_TOOLS: Migration = Migration {
    id: "qwen-approve-tools",
    agent: Some(AgentId::Qwen),
    range: Range::Any,
    about: "memloop's own two tools (context_query, memory_store) join its Stop hook in .qwen/settings.json as permissions.allow entries",
    detect: |env, files| APPROVALS.detect(env, files),
    rewrite: |env, files| APPROVALS.rewrite(env, files),
};

const APPROVALS: Approvals = Approvals {
    file: PROJECT_SETTINGS,
    dialect: DIALECT,
    gate: ("Stop", HOOK_COMMAND),
    fragments: super::approvals,
};

pub const RECALL: Migration = Migration {
    id: "qwen-recall",
    agent: Some(AgentId::Qwen),
    range: Range::Any,
    about: "memloop's UserPromptSubmit hook (the notes that match each prompt) joins its Stop hook in .qwen/settings.json",
    detect: |env, files| RECALL_GROUPS.detect(env, files),
    rewrite: |env, files| RECALL_GROUPS.rewrite(env, files),
};

const RECALL_GROUPS: JoinedGroups = JoinedGroups {
    file: PROJECT_SETTINGS,
    dialect: DIALECT,
    gate: ("Stop", HOOK_COMMAND),
    pieces: &[Piece {
        event: "UserPromptSubmit",
        command: PROMPT_COMMAND,
        group: || super::command_group(PROMPT_COMMAND),
        wanted: joined_groups::recall,
    }],
};

pub const SESSION_START: Migration = Migration {
    id: "qwen-session-start",
    agent: Some(AgentId::Qwen),
    range: Range::Any,
    about: "memloop's SessionStart and PreCompact hooks (the memory index at session start and after a compaction) join its Stop hook in .qwen/settings.json",
    detect,
    rewrite,
};

const GROUPS: JoinedGroups = JoinedGroups {
    file: PROJECT_SETTINGS,
    dialect: DIALECT,
    gate: ("Stop", HOOK_COMMAND),
    pieces: &[
        Piece {
            event: "SessionStart",
            command: SESSION_START_COMMAND,
            group: || super::command_group(SESSION_START_COMMAND),
            wanted: joined_groups::session_start,
        },
        Piece {
            event: "PreCompact",
            command: PRE_COMPACT_COMMAND,
            group: || super::command_group(PRE_COMPACT_COMMAND),
            wanted: joined_groups::session_start,
        },
    ],
};

fn detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    GROUPS.detect(env, files)
}

fn rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    GROUPS.rewrite(env, files)
}
