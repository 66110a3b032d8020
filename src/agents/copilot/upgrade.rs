//! Copilot's migrations. Its files' formats did not change (`{"version": 1}` hooks files,
//! `trustedFolders` in config.json); what an older memloop wrote may lack pieces this one adds:
//!
//! - `copilot-session-start`: a `.github/hooks/memloop.json` holding memloop's `agentStop` gate
//!   but not all of its session-start hooks (`sessionStart`, and the `preCompact` and
//!   `userPromptSubmitted` pair that gives the index again after a compaction) gets them, as
//!   sync writes them (unless `[memory] session_start = false`).
//!
//! - `copilot-approve-tools`: where `memloop trust` was given by a memloop that approved no
//!   tools yet (the install state says so, or Copilot's `trustedFolders` holds trust's entry for
//!   the repository), `$COPILOT_HOME/permissions-config.json` gets memloop's two approvals for this
//!   repository's location, as trust and sync write them now (unless `[memory] approve_tools =
//!   false`). A file outside the repository: held without consent to write there.
//!
//! What changed besides is who owns the trust entry: an older memloop
//! wrote it as one of sync's files, with `--user-scope`; it is `memloop trust`'s now
//! (`Agent::trust`). `legacy_trust` finds a machine in between, which `memloop upgrade` hands
//! over (`commands::upgrade`) and doctor points at.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{HOOKS_JSON, approvals, trust};
use crate::config::AgentId;
use crate::edit::json::{Dialect, JsonDoc};
use crate::engine::PlanError;
use crate::repo::Repo;
use crate::target::Fragment;
use crate::upgrade::{Env, Files, Migration};
use crate::version::Range;

/// Copilot's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[SESSION_START, APPROVE_TOOLS];

pub const APPROVE_TOOLS: Migration = Migration {
    id: "copilot-approve-tools",
    agent: Some(AgentId::Copilot),
    range: Range::Any,
    about: "memloop's own two tools (context_query, memory_store) approved for this repository in $COPILOT_HOME/permissions-config.json, next to the folder trust memloop trust gave",
    detect: approvals_detect,
    rewrite: approvals_rewrite,
};

/// Whether memloop trust was given here: recorded in the install state, or (a state this
/// machine no longer has) memloop trust's own entry for the repository in Copilot's
/// `trustedFolders`, the folder itself rather than one above it.
fn trust_given(env: &Env, files: &mut Files) -> Result<bool, PlanError> {
    if env.ctx.trusted {
        return Ok(true);
    }
    let Some((config, _)) = files.json(&trust::config_path(&env.ctx.home), Dialect::Jsonc)? else {
        return Ok(false);
    };
    let ours = trust::trusted_root(env.ctx.root).display().to_string();
    Ok(config
        .value()
        .get(trust::KEY)
        .and_then(Value::as_array)
        .is_some_and(|folders| folders.iter().any(|f| f.as_str() == Some(ours.as_str()))))
}

/// The approvals sync would write and `doc` lacks; none where trust was never given (they are
/// trust's, like the folder trust) or none are wanted.
fn missing_approvals(env: &Env, trusted: bool, doc: &Value) -> Vec<(Vec<String>, Value)> {
    if !trusted {
        return Vec::new();
    }
    approvals::fragments(&env.ctx)
        .into_iter()
        .filter_map(|fragment| match fragment {
            Fragment::JsonArrayItem { path, value, .. } => Some((path, value)),
            _ => None,
        })
        .filter(|(path, value)| {
            let pointer: String = path.iter().map(|key| format!("/{}", escape(key))).collect();
            !doc.pointer(&pointer)
                .and_then(Value::as_array)
                .is_some_and(|items| items.contains(value))
        })
        .collect()
}

/// A key as a JSON pointer spells it (a location key is a path, full of `/`).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn approvals_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let trusted = trust_given(env, files)?;
    let path = approvals::config_path(&env.ctx.home);
    let doc = match files.json(&path, Dialect::Strict)? {
        Some((doc, _)) => doc.value(),
        None => json!({}),
    };
    Ok(missing_approvals(env, trusted, &doc)
        .into_iter()
        .map(|(_, value)| {
            format!(
                "{}: memloop trust was given but {value} is not approved for this repository (memloop's own tool, approved since this version)",
                files.display(&path)
            )
        })
        .collect())
}

fn approvals_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let trusted = trust_given(env, files)?;
    let path = approvals::config_path(&env.ctx.home);
    let (mut doc, encoding) = files.json_or_new(&path, Dialect::Strict)?;
    let wanted = missing_approvals(env, trusted, &doc.value());
    if wanted.is_empty() {
        return Ok(());
    }
    for (at, value) in wanted {
        doc.upsert_item(&at, &value, &|item| *item == value)?;
    }
    files.write_text(&path, &doc.to_text(), encoding)
}

pub const SESSION_START: Migration = Migration {
    id: "copilot-session-start",
    agent: Some(AgentId::Copilot),
    range: Range::Any,
    about: "memloop's sessionStart, preCompact and userPromptSubmitted hooks (the memory index at session start and after a compaction) join its agentStop hook in .github/hooks/memloop.json",
    detect: session_start_detect,
    rewrite: session_start_rewrite,
};

/// memloop's session-start members of the hooks file, as sync writes them.
fn session_start_members() -> [(&'static str, Value); 3] {
    [
        ("sessionStart", json!([super::session_start_entry()])),
        ("preCompact", json!([super::pre_compact_entry()])),
        ("userPromptSubmitted", json!([super::prompt_entry()])),
    ]
}

/// The members to write: none unless memloop's own gate entry shows an older install, and only
/// absent ones (a member the user holds is theirs: sync refuses it with a hint, as before).
fn missing(doc: &Value) -> Vec<(&'static str, Value)> {
    let gate = json!([super::hook_entry()]);
    if doc.pointer("/hooks/agentStop") != Some(&gate) {
        return Vec::new();
    }
    session_start_members()
        .into_iter()
        .filter(|(event, _)| doc.pointer(&format!("/hooks/{event}")).is_none())
        .collect()
}

fn session_start_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    if !env.ctx.config.memory.session_start {
        return Ok(Vec::new());
    }
    let path = env.ctx.root.join(HOOKS_JSON);
    let Some((doc, _)) = files.json(&path, Dialect::Strict)? else {
        return Ok(Vec::new());
    };
    Ok(missing(&doc.value())
        .into_iter()
        .map(|(event, _)| {
            format!(
                "{}: memloop's agentStop hook without its {event} hook (written by an older memloop)",
                files.display(&path)
            )
        })
        .collect())
}

fn session_start_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    if !env.ctx.config.memory.session_start {
        return Ok(());
    }
    let path = env.ctx.root.join(HOOKS_JSON);
    let Some((mut doc, encoding)) = files.json(&path, Dialect::Strict)? else {
        return Ok(());
    };
    let wanted = missing(&doc.value());
    if wanted.is_empty() {
        return Ok(());
    }
    for (event, value) in wanted {
        doc.set(&["hooks".into(), event.into()], &value)?;
    }
    files.write_text(&path, &doc.to_text(), encoding)
}

pub const TRUST_HANDOVER: &str = "copilot-trust-owner";

/// `$COPILOT_HOME/config.json` when an older memloop's `sync --user-scope` wrote memloop's
/// `trustedFolders` entry there on this machine and `memloop trust` was never given: the install
/// state records the file and the entry is still in it, but sync no longer keeps it (nor takes
/// it back when Copilot leaves memloop.toml) until trust owns it.
pub fn legacy_trust(repo: &Repo) -> anyhow::Result<Option<PathBuf>> {
    if repo.state.trusted || !repo.config.agents.contains(&AgentId::Copilot) {
        return Ok(None);
    }
    let path = trust::config_path(&crate::files::home_dir()?);
    if !repo.state.files.contains_key(&path) {
        return Ok(None);
    }
    let place = path.parent().unwrap_or(&path);
    let Ok(Some(text)) = crate::files::read_within(&path, place) else {
        return Ok(None);
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let Ok(doc) = JsonDoc::parse(text, Dialect::Jsonc, &path.display().to_string()) else {
        return Ok(None);
    };
    let ours = trust::trusted_root(&repo.root).display().to_string();
    let holds_ours = doc
        .value()
        .get(trust::KEY)
        .and_then(|folders| folders.as_array())
        .is_some_and(|folders| folders.iter().any(|f| f.as_str() == Some(ours.as_str())));
    Ok(holds_ours.then_some(path))
}
