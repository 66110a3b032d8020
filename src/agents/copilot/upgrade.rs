//! Copilot's migrations: none of its files' formats changed (`{"version": 1}` hooks files,
//! `trustedFolders` in config.json). What changed is who owns the trust entry: an older memloop
//! wrote it as one of sync's files, with `--user-scope`; it is `memloop trust`'s now
//! (`Agent::trust`). `legacy_trust` finds a machine in between, which `memloop upgrade` hands
//! over (`commands::upgrade`) and doctor points at.

use std::path::PathBuf;

use super::trust;
use crate::config::AgentId;
use crate::edit::json::{Dialect, JsonDoc};
use crate::repo::Repo;
use crate::upgrade::Migration;

/// Copilot's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[];

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
    let Ok(text) = std::fs::read_to_string(&path) else {
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
