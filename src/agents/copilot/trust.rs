//! Copilot's folder trust: `{"trustedFolders": ["/abs/path", ...]}` in the user's
//! `$COPILOT_HOME/config.json`. Without an entry for the repository or a folder above it, Copilot
//! loads none of the project's MCP servers or hooks (`copilot mcp list` shows no workspace
//! servers), and says nothing in `-p` mode. The same key in `settings.json` is not read.
//! Copilot 1.0.102 accepts comments and trailing commas in the file, and matches a folder and
//! everything below it (a trailing slash is fine). memloop writes one entry for the repository,
//! only through `memloop trust` (`Agent::trust`); an older memloop wrote the same entry through
//! `sync --user-scope`, which `upgrade::adopt_trust` hands over. Facts:
//! xtask/src/e2e/copilot_facts.md.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

pub const KEY: &str = "trustedFolders";

/// `$COPILOT_HOME/config.json`.
pub fn config_path(home: &Path) -> PathBuf {
    super::copilot_home(home).join("config.json")
}

/// The repository as the entry spells it: absolute, symlink-free.
pub fn trusted_root(root: &Path) -> PathBuf {
    root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
}

/// The entry memloop owns: the repository itself in `trustedFolders`.
pub fn fragment(root: &Path) -> Fragment {
    Fragment::JsonArrayItem {
        path: vec![KEY.into()],
        value: json!(trusted_root(root).display().to_string()),
        memloops: false,
    }
}

/// The user's config, holding the entry that trusts `ctx`'s repository.
pub fn target(ctx: &Context) -> Target {
    let config = config_path(&ctx.home);
    Target {
        display: ctx.display_user_path(&config),
        path: config,
        scope: Scope::User,
        agents: vec![AgentId::Copilot],
        desired: Desired::Fragments {
            format: Format::Json(Dialect::Jsonc),
            fragments: vec![fragment(ctx.root)],
        },
        note: None,
    }
}

/// The entry of `config` (the parsed file) that trusts `root`, if any: the folder itself or one
/// above it, whole path components, an entry through a symlink as where it leads (as Copilot
/// 1.0.102 matches: probe-copilot-trust).
pub fn trusted_by<'c>(config: &'c Value, root: &Path) -> Option<&'c str> {
    let root = trusted_root(root);
    config
        .get(KEY)?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|folder| {
            let folder = Path::new(folder.trim_end_matches('/'));
            !folder.as_os_str().is_empty()
                && (root.starts_with(folder) || root.starts_with(trusted_root(folder)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_trusts_itself_and_everything_below_it() {
        let config = json!({"trustedFolders": ["/srv/other", "/work/"]});
        assert_eq!(trusted_by(&config, Path::new("/work/repo")), Some("/work/"));
        assert_eq!(trusted_by(&config, Path::new("/workshop")), None);
        assert_eq!(trusted_by(&json!({}), Path::new("/work")), None);
        assert_eq!(
            trusted_by(&json!({"trustedFolders": "/work"}), Path::new("/work")),
            None
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_entry_through_a_symlink_trusts_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let real = trusted_root(dir.path()).join("repo");
        std::fs::create_dir_all(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let link = link.display().to_string();
        let config = json!({"trustedFolders": [&link]});
        assert_eq!(trusted_by(&config, &real), Some(link.as_str()));
        assert_eq!(trusted_by(&config, &real.with_file_name("other")), None);
    }
}
