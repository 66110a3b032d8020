//! `kimi-session-start`: a `$KIMI_CODE_HOME/config.toml` an older memloop wrote holds its Stop
//! hook but not the session-start pair (the UserPromptSubmit hook giving the memory index, the
//! PreCompact hook noting a compaction); they are added, as sync would, unless
//! `[memory] session_start = false`. Kept apart from `upgrade.rs`, which it only joins in
//! `MIGRATIONS`. It runs after `kimi-legacy-to-code`, so a Stop hook just moved over from
//! kimi-cli gets its pair too.

use super::{code_home, hook_entry, pre_compact_entry, session_start_entry};
use crate::config::AgentId;
use crate::edit::toml::{Entry, TomlDoc};
use crate::engine::PlanError;
use crate::upgrade::{Env, Files, Migration};
use crate::version::{Product, Range, Version};

/// Kimi Code, or no `kimi` on PATH (which memloop treats as Kimi Code), as sync does.
const KIMI_CODE: Range = Range::Versions {
    product: Product::KimiCode,
    min: Version(0, 0, 0),
    below: None,
    if_missing: true,
};

pub const SESSION_START: Migration = Migration {
    id: "kimi-session-start",
    agent: Some(AgentId::Kimi),
    range: KIMI_CODE,
    about: "memloop's session-start hooks (the memory index on a session's first prompt, the compaction note) join its Stop hook in $KIMI_CODE_HOME/config.toml",
    detect,
    rewrite,
};

/// Whether the `[[hooks]]` of `doc` hold `entry` (matched by its command, as sync matches it).
fn holds(doc: &TomlDoc, entry: &Entry) -> bool {
    let text = doc.to_text();
    let Ok(mut copy) = TomlDoc::parse(&text, "") else {
        return false;
    };
    copy.remove_entry("hooks", entry, false);
    copy.to_text() != text
}

/// The session-start entries missing beside memloop's Stop hook.
fn missing(doc: &TomlDoc) -> Vec<Entry> {
    if !holds(doc, &hook_entry()) {
        return Vec::new();
    }
    [session_start_entry(), pre_compact_entry()]
        .into_iter()
        .filter(|entry| !holds(doc, entry))
        .collect()
}

fn detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    if !env.ctx.config.memory.session_start {
        return Ok(Vec::new());
    }
    let path = code_home(&env.ctx).join("config.toml");
    let Some((doc, _)) = files.toml(&path)? else {
        return Ok(Vec::new());
    };
    let display = files.display(&path);
    Ok(missing(&doc)
        .iter()
        .map(|entry| {
            format!(
                "{display}: memloop's Stop hook without `{}` (written by an older memloop)",
                entry.identity.1
            )
        })
        .collect())
}

fn rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = code_home(&env.ctx).join("config.toml");
    let Some((mut doc, encoding)) = files.toml(&path)? else {
        return Ok(());
    };
    let missing = missing(&doc);
    if missing.is_empty() {
        return Ok(());
    }
    for entry in &missing {
        doc.upsert_entry("hooks", entry)?;
    }
    files.write_text(&path, &doc.to_text(), encoding)
}
