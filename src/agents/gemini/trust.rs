//! Gemini's folder trust: `~/.gemini/trustedFolders.json` (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`
//! when set), an object from absolute paths to `TRUST_FOLDER`, `TRUST_PARENT` or `DO_NOT_TRUST`.
//! Folder trust is on by default (`security.folderTrust.enabled`); in a folder without a rule
//! Gemini ignores the project's settings file (MCP servers, hooks, `context.fileName`), and a
//! headless `gemini -p` exits 55 at once. Gemini 0.61.0 (`packages/core/src/utils/trust.ts`)
//! resolves both the folder and each rule's path to their real paths, lets the longest matching
//! rule win, and refuses to start when any value is not one of the three levels. memloop writes
//! one `TRUST_FOLDER` entry for the repository, only through `memloop trust` (`Agent::trust`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::DIALECT;
use crate::config::AgentId;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

pub const TRUST_FOLDER: &str = "TRUST_FOLDER";
pub const LEVELS: &[&str] = &["TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"];

/// Where Gemini keeps its trust rules for the user whose home is `home`.
pub fn trusted_folders_path(home: &Path) -> PathBuf {
    std::env::var_os("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || super::gemini_dir(home).join("trustedFolders.json"),
            PathBuf::from,
        )
}

/// The repository as the trust entry names it: absolute and symlink-free, as Gemini compares.
pub fn trusted_root(root: &Path) -> PathBuf {
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// The entry trusting the repository at `root` (canonical).
pub fn fragments(root: &Path) -> Vec<Fragment> {
    vec![Fragment::JsonMember {
        path: vec![root.display().to_string()],
        value: json!(TRUST_FOLDER),
    }]
}

/// The user's trust rules, holding the entry that trusts `ctx`'s repository.
pub fn target(ctx: &Context) -> Target {
    let folders = trusted_folders_path(&ctx.home);
    Target {
        display: ctx.display_user_path(&folders),
        path: folders,
        scope: Scope::User,
        agents: vec![AgentId::Gemini],
        desired: Desired::Fragments {
            format: Format::Json(DIALECT),
            fragments: fragments(&trusted_root(ctx.root)),
        },
        note: None,
    }
}

/// What the rules in `config` (the parsed file) say about `folder` (canonical): `Some(true)`
/// trusted, `Some(false)` distrusted, `None` no rule matches (Gemini then asks, or ignores the
/// folder's settings when it cannot ask). The longest matching rule wins; `TRUST_PARENT` covers
/// the parent of its path.
pub fn verdict(config: &Value, folder: &Path) -> Option<bool> {
    let rules = config.as_object()?;
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in rules {
        let Some(level) = level.as_str() else {
            continue;
        };
        let rule_path = Path::new(rule);
        let effective = if level == "TRUST_PARENT" {
            rule_path.parent().unwrap_or(rule_path)
        } else {
            rule_path
        };
        let effective = effective
            .canonicalize()
            .unwrap_or_else(|_| effective.to_path_buf());
        if folder.starts_with(&effective) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    match best?.1 {
        "DO_NOT_TRUST" => Some(false),
        "TRUST_FOLDER" | "TRUST_PARENT" => Some(true),
        _ => None,
    }
}

/// The first value in `config` that is not a trust level (Gemini refuses to start on it).
pub fn invalid_level(config: &Value) -> Option<(String, String)> {
    config.as_object()?.iter().find_map(|(path, level)| {
        let ok = level.as_str().is_some_and(|l| LEVELS.contains(&l));
        (!ok).then(|| (path.clone(), level.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_rule_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = trusted_root(dir.path());
        let repo = root.join("work/repo");
        std::fs::create_dir_all(&repo).unwrap();
        let (work, repo_s) = (
            root.join("work").display().to_string(),
            repo.display().to_string(),
        );
        assert_eq!(verdict(&json!({}), &repo), None);
        assert_eq!(verdict(&json!({&work: "TRUST_FOLDER"}), &repo), Some(true));
        assert_eq!(
            verdict(
                &json!({&work: "TRUST_FOLDER", &repo_s: "DO_NOT_TRUST"}),
                &repo
            ),
            Some(false)
        );
        assert_eq!(
            verdict(
                &json!({&work: "DO_NOT_TRUST", &repo_s: "TRUST_FOLDER"}),
                &repo
            ),
            Some(true)
        );
        // TRUST_PARENT on the repository trusts its parent, hence the repository.
        assert_eq!(
            verdict(
                &json!({root.join("work/other").display().to_string(): "TRUST_PARENT"}),
                &repo
            ),
            Some(true)
        );
        // A sibling whose name starts the same is not a parent.
        assert_eq!(
            verdict(&json!({format!("{repo_s}-old"): "TRUST_FOLDER"}), &repo),
            None
        );
    }

    #[test]
    fn a_value_that_is_no_level_is_found() {
        assert_eq!(invalid_level(&json!({"/a": "TRUST_FOLDER"})), None);
        assert_eq!(
            invalid_level(&json!({"/a": "TRUST_FOLDER", "/b": true})),
            Some(("/b".into(), "true".into()))
        );
    }
}
