//! Claude Code migrations (facts: research/claude-code.md, sections 1.5, 1.6 and 4).
//!
//! - `claude-hook-shape`: memloop's Stop hook written in a legacy shape that Claude Code rejects
//!   (a flat handler list, a string value, a string handler, an object matcher). One such entry
//!   makes Claude Code skip the whole settings file, every other hook included. It becomes the
//!   nested `{"hooks": [{"type": "command", ...}]}` group; the user's groups stay as they are.
//! - `claude-agents-md`: Claude Code 2.1.277+ reads `AGENTS.md` when no `CLAUDE.md` exists;
//!   older versions never do. A repository whose rules live only in `AGENTS.md` gives each
//!   version different instructions, so `CLAUDE.md` becomes the file Claude reads on every
//!   version: it takes the rules (and `AGENTS.md` links to it) when `AGENTS.md` holds nothing
//!   but memloop's block and the layout is `symlink`; otherwise it gets what `memloop sync`
//!   writes there for the layout (the `@AGENTS.md` import, or the rules for `copy`).
//! - `claude-recall`: a `.claude/settings.json` an older memloop wrote holds its Stop gate but
//!   not the UserPromptSubmit group (the notes that match each prompt); it is added, as sync
//!   would (unless `[memory] recall = false`).

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::agents::claude::{
    HOOK_COMMAND, PROMPT_COMMAND, approvals, hook_group, prompt_group, settings_fragments,
};
use crate::config::{AgentId, Layout};
use crate::edit::json::Dialect;
use crate::edit::markdown;
use crate::engine::{self, Content, Mode, PlanError};
use crate::instructions;
use crate::target::Fragment;
use crate::target::is_hook_group_for;
use crate::upgrade::approvals::Approvals;
use crate::upgrade::joined_groups::{self, JoinedGroups, Piece};
use crate::upgrade::{Env, Files, Migration};
use crate::version::Version;
use crate::version::{Product, Range};

const EVERY_VERSION: Range = Range::Versions {
    product: Product::ClaudeCode,
    min: Version(0, 0, 0),
    below: None,
    if_missing: true,
};

/// Claude Code's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[HOOK_SHAPE, AGENTS_MD, RECALL, APPROVE_TOOLS];

pub const APPROVE_TOOLS: Migration = Migration {
    id: "claude-approve-tools",
    agent: Some(AgentId::Claude),
    range: Range::Any,
    about: "memloop's own two tools (context_query, memory_store) join its Stop hook in .claude/settings.json as permissions.allow entries",
    detect: |env, files| APPROVALS.detect(env, files),
    rewrite: |env, files| APPROVALS.rewrite(env, files),
};

const APPROVALS: Approvals = Approvals {
    file: ".claude/settings.json",
    dialect: Dialect::Strict,
    gate: ("Stop", HOOK_COMMAND),
    fragments: approvals,
};

pub const HOOK_SHAPE: Migration = Migration {
    id: "claude-hook-shape",
    agent: Some(AgentId::Claude),
    range: EVERY_VERSION,
    about: "memloop's Stop hook in a legacy shape Claude Code rejects (the whole settings file is then skipped) becomes the nested hook group",
    detect: shape_detect,
    rewrite: shape_rewrite,
};

pub const AGENTS_MD: Migration = Migration {
    id: "claude-agents-md",
    agent: Some(AgentId::Claude),
    range: EVERY_VERSION,
    about: "rules only in AGENTS.md reach Claude Code 2.1.277+ but no older version: CLAUDE.md becomes the file every version reads",
    detect: agents_detect,
    rewrite: agents_rewrite,
};

pub const RECALL: Migration = Migration {
    id: "claude-recall",
    agent: Some(AgentId::Claude),
    range: EVERY_VERSION,
    about: "memloop's UserPromptSubmit hook (the notes that match each prompt) joins its Stop hook in .claude/settings.json",
    detect: recall_detect,
    rewrite: recall_rewrite,
};

const RECALL_GROUPS: JoinedGroups = JoinedGroups {
    file: ".claude/settings.json",
    dialect: Dialect::Strict,
    gate: ("Stop", HOOK_COMMAND),
    pieces: &[Piece {
        event: "UserPromptSubmit",
        command: PROMPT_COMMAND,
        group: prompt_group,
        wanted: joined_groups::recall,
    }],
};

fn recall_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    RECALL_GROUPS.detect(env, files)
}

fn recall_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    RECALL_GROUPS.rewrite(env, files)
}

fn settings(env: &Env) -> PathBuf {
    env.ctx.root.join(".claude/settings.json")
}

fn stop_path() -> Vec<String> {
    vec!["hooks".into(), "Stop".into()]
}

fn is_our_command(value: &Value) -> bool {
    value.as_str().map(str::trim) == Some(HOOK_COMMAND)
}

fn is_our_handler(handler: &Value) -> bool {
    is_our_command(handler) || handler.get("command").is_some_and(is_our_command)
}

/// Why an element of `hooks.Stop` (or the value itself) is memloop's hook in a legacy shape.
fn legacy(element: &Value) -> Option<&'static str> {
    match element {
        Value::String(_) if is_our_command(element) => Some("a bare command string"),
        Value::Object(map) if !map.contains_key("hooks") => map
            .get("command")
            .is_some_and(is_our_command)
            .then_some("a flat handler (no `hooks` list)"),
        Value::Object(map) => {
            let hooks = map.get("hooks")?;
            if is_our_command(hooks) {
                return Some("a string `hooks` value");
            }
            let handlers = hooks.as_array()?;
            if handlers.is_empty() || !handlers.iter().all(is_our_handler) {
                return None;
            }
            if map.get("matcher").is_some_and(|m| !m.is_string()) {
                Some("a matcher that is not a string")
            } else if handlers.iter().any(Value::is_string) {
                Some("a string handler")
            } else if handlers.iter().any(|h| h.get("type").is_none()) {
                Some("a handler without `type`")
            } else {
                None
            }
        }
        _ => None,
    }
}

fn shape_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = settings(env);
    let display = files.display(&path);
    let Some((doc, _)) = files.json(&path, Dialect::Strict)? else {
        return Ok(Vec::new());
    };
    note_foreign_flat_handlers(env, &display, doc.get(&["hooks".to_owned()]));
    let found = match doc.get(&stop_path()) {
        Some(Value::Array(groups)) => groups.iter().filter_map(legacy).collect(),
        Some(other) => legacy(&other).into_iter().collect(),
        None => Vec::new(),
    };
    Ok(found
        .into_iter()
        .map(|why| format!("{display}: hooks.Stop holds `{HOOK_COMMAND}` as {why}"))
        .collect())
}

/// The user's own hooks written as flat handlers (`{"type", "command"}` with no `hooks` list)
/// make Claude Code skip the whole file too, memloop's hooks included; they are the user's
/// to reshape (a flat entry may be meant for another program reading the file).
fn note_foreign_flat_handlers(env: &Env, display: &str, hooks: Option<Value>) {
    let Some(Value::Object(events)) = hooks else {
        return;
    };
    for (event, groups) in &events {
        let Value::Array(groups) = groups else {
            continue;
        };
        for (index, group) in groups.iter().enumerate() {
            if let Value::Object(map) = group
                && !map.contains_key("hooks")
                && map.get("command").is_some_and(|c| !is_our_command(c))
            {
                env.note(format!(
                    "{display}: hooks.{event}[{index}] is a flat handler (no `hooks` list), which makes Claude Code skip the whole file, memloop's hooks included; it is not memloop's, so reshape it by hand to {{\"hooks\": [{{\"type\": \"command\", \"command\": ...}}]}}"
                ));
            }
        }
    }
}

fn shape_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = settings(env);
    let Some((mut doc, encoding)) = files.json(&path, Dialect::Strict)? else {
        return Ok(());
    };
    let stop = stop_path();
    match doc.get(&stop) {
        Some(Value::Array(_)) => {
            doc.remove_items(&stop, &|v| legacy(v).is_some(), &|_| false);
            doc.upsert_item(&stop, &hook_group(), &|group| {
                is_hook_group_for(group, HOOK_COMMAND)
            })?;
        }
        Some(other) if legacy(&other).is_some() => doc.set(&stop, &json!([hook_group()]))?,
        _ => return Ok(()),
    }
    // The file is rewritten to today's shape as a whole: the session-start pieces a memloop of
    // the legacy shape never wrote come with it, as sync would add them.
    for fragment in settings_fragments(&env.ctx.config.memory) {
        if let Fragment::JsonHookGroup {
            path,
            value,
            command,
        } = fragment
            && path != stop
        {
            doc.upsert_item(&path, &value, &|group| is_hook_group_for(group, &command))?;
        }
    }
    files.write_text(&path, &doc.to_text(), encoding)
}

/// Files that, in the repository root, make Claude Code 2.1.277+ skip `AGENTS.md`.
const CLAUDE_FILES: [&str; 3] = ["CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md"];

fn agents_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let root = env.ctx.root;
    for name in CLAUDE_FILES {
        if files.entry(&root.join(name))? != Content::Missing {
            return Ok(Vec::new());
        }
    }
    let agents = root.join("AGENTS.md");
    if !matches!(files.entry(&agents)?, Content::File { .. }) {
        return Ok(Vec::new());
    }
    let display = files.display(&agents);
    let Some((text, _)) = files.text(&agents)? else {
        return Ok(Vec::new());
    };
    if markdown::find(&text, &display)?.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "{display}: holds memloop's rules and there is no CLAUDE.md: Claude Code reads them from 2.1.277 on, older versions never"
    )])
}

fn agents_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let root = env.ctx.root;
    let agents = root.join("AGENTS.md");
    let claude = root.join("CLAUDE.md");
    let display = files.display(&agents);
    let Some((text, _)) = files.text(&agents)? else {
        return Ok(());
    };
    let only_memloop = markdown::remove(&text, &display)?.trim().is_empty();
    let layout = env.ctx.config.layout;
    if layout == Layout::Symlink && only_memloop && env.symlinks {
        let content = files.entry(&agents)?;
        files.put(&claude, content)?;
        // It held nothing but memloop's block: uninstall may take the link away.
        files.set_original(&agents, Content::Missing)?;
        return files.put(
            &agents,
            Content::Link {
                target: "CLAUDE.md".into(),
            },
        );
    }
    // Whatever sync writes into CLAUDE.md for this repository and layout.
    let targets = instructions::plan(root, layout, &env.ctx.config.agents)?;
    let Some(target) = targets.into_iter().find(|t| t.path == claude) else {
        return Err(anyhow::anyhow!(
            "memloop has no CLAUDE.md target for layout {}; please report this as a memloop bug",
            layout.as_str()
        )
        .into());
    };
    let changes = engine::plan(root, &[target], Mode::Install, &|_| None)?;
    files.put(&claude, changes[0].after.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_shapes_are_recognised_only_for_memloops_command() {
        let cmd = HOOK_COMMAND;
        assert!(legacy(&json!(cmd)).is_some());
        assert!(legacy(&json!({"type": "command", "command": cmd})).is_some());
        assert!(legacy(&json!({"matcher": {"tools": ["x"]}, "hooks": [{"type": "command", "command": cmd}]})).is_some());
        assert!(legacy(&json!({"hooks": [cmd]})).is_some());
        assert!(legacy(&hook_group()).is_none());
        assert!(legacy(&json!({"type": "command", "command": "other"})).is_none());
        assert!(
            legacy(
                &json!({"matcher": {"t": 1}, "hooks": [{"type": "command", "command": "other"}]})
            )
            .is_none()
        );
    }
}
