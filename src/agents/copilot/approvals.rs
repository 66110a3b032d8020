//! memloop's own two tools without a question in Copilot CLI: Copilot 1.0.102 reads no per-tool
//! rule from the repository (`permissions` is not among the keys `.github/copilot/settings.json`
//! may set), and a `permissions.allow` in the user's `settings.json` would hold for every folder
//! and every server of that name. The narrowest yes it has is the one it saves itself when the
//! person approves a tool "for this location": in `$COPILOT_HOME/permissions-config.json`,
//! `locations."<repository>".tool_approvals` holds `{"kind": "mcp", "serverName": "<server>",
//! "toolName": "<tool>"}`, one MCP tool of one server in this repository only (`toolName: null`
//! would approve the whole server: never written). A per-person file in the home folder, so it is
//! written with the trust entries (`memloop trust`), and only for memloop's own server. Facts:
//! xtask/src/e2e/copilot_facts.md.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// `$COPILOT_HOME/permissions-config.json`.
pub fn config_path(home: &Path) -> PathBuf {
    super::copilot_home(home).join("permissions-config.json")
}

/// The location key Copilot looks approvals up under: the repository's symlink-free path, or
/// for a linked worktree its main worktree's (Copilot resolves a linked worktree to the main
/// repository root: approvals under the worktree's own path are not found, checked with 1.0.102
/// by `cargo xtask e2e connected-copilot-approved-tools-worktree`).
pub fn location(root: &Path) -> PathBuf {
    crate::git_exclude::main_worktree(root).unwrap_or_else(|| super::trust::trusted_root(root))
}

/// One approval per tool of `agents::APPROVED_TOOLS` under the repository's [`location`] key.
/// Retired with `[memory] approve_tools = false` or a server that is not memloop's own. In a
/// linked worktree, the same approvals under the worktree's own path (where a memloop before
/// this one wrote them, and where Copilot never looks) are retired too.
pub fn fragments(ctx: &Context) -> Vec<Fragment> {
    let wanted = ctx.config.memory.approve_tools && ctx.server.is_embedded();
    let location = location(ctx.root);
    let own = super::trust::trusted_root(ctx.root);
    let mut keys = vec![(location.display().to_string(), wanted)];
    if own != location {
        keys.push((own.display().to_string(), false));
    }
    keys.into_iter()
        .flat_map(|(key, wanted)| {
            crate::agents::APPROVED_TOOLS.iter().map(move |tool| {
                Fragment::JsonArrayItem {
                    path: vec!["locations".into(), key.clone(), "tool_approvals".into()],
                    value: json!({"kind": "mcp", "serverName": ctx.server.name, "toolName": tool}),
                    memloops: true,
                }
                .wanted_if(wanted)
            })
        })
        .collect()
}

/// The user's `permissions-config.json`, holding memloop's approvals for this repository.
pub fn target(ctx: &Context) -> Target {
    let config = config_path(&ctx.home);
    Target {
        display: ctx.display_user_path(&config),
        path: config,
        scope: Scope::User,
        agents: vec![AgentId::Copilot],
        desired: Desired::Fragments {
            format: Format::Json(Dialect::Strict),
            fragments: fragments(ctx),
        },
        note: None,
    }
}

/// The tools of `agents::APPROVED_TOOLS` that `config` (the parsed file) does not approve for
/// `location`: an approval of that one tool, or of the whole server (`toolName: null`, the
/// person's own), counts.
pub fn missing<'t>(server: &str, location: &str, config: &Value) -> Vec<&'t str> {
    let approvals = config
        .get("locations")
        .and_then(|l| l.get(location))
        .and_then(|l| l.get("tool_approvals"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    crate::agents::APPROVED_TOOLS
        .into_iter()
        .filter(|tool| {
            !approvals.iter().any(|a| {
                a.get("kind") == Some(&json!("mcp"))
                    && a.get("serverName") == Some(&json!(server))
                    && a.get("toolName")
                        .is_some_and(|name| name.is_null() || name == *tool)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_counts_when_approved_alone_or_with_its_whole_server() {
        let loc = "/work/repo";
        let approval =
            |tool: Value| json!({"kind": "mcp", "serverName": "memory", "toolName": tool});
        let file = |items: Value| json!({"locations": {loc: {"tool_approvals": items}}});
        assert_eq!(
            missing("memory", loc, &Value::Null),
            ["context_query", "memory_store"]
        );
        assert_eq!(
            missing(
                "memory",
                loc,
                &file(json!([approval(json!("memory_store"))]))
            ),
            ["context_query"]
        );
        assert!(missing("memory", loc, &file(json!([approval(Value::Null)]))).is_empty());
        assert_eq!(
            missing("notes", loc, &file(json!([approval(Value::Null)]))),
            ["context_query", "memory_store"],
            "another server's approval"
        );
        let elsewhere =
            json!({"locations": {"/work": {"tool_approvals": [approval(Value::Null)]}}});
        assert_eq!(
            missing("memory", loc, &elsewhere),
            ["context_query", "memory_store"],
            "a parent folder's approvals are its own"
        );
    }
}
