//! Claude Code's per-machine trust (`memloop trust`), checked against the pinned 2.1.328's
//! bundled source: an interactive session holds back every hook and ignores the repository's
//! `.claude/settings.local.json` until the folder's trust dialog was accepted
//! (`projects["<root>"].hasTrustDialogAccepted` in `~/.claude.json`, or
//! `$CLAUDE_CONFIG_DIR/.claude.json`), and it starts a `.mcp.json` server without asking only
//! once its name is in `enabledMcpjsonServers` of a settings file. memloop approves its own
//! server in `.claude/settings.local.json`, which is where Claude Code itself saves a "yes"
//! (untracked, this machine only, honoured in a trusted folder), never in the user's
//! `~/.claude/settings.json`, which would approve a server of that name in every repository.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

pub const LOCAL_SETTINGS: &str = ".claude/settings.local.json";

/// Claude Code's global config: `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`.
pub fn global_config(ctx: &Context) -> PathBuf {
    std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| ctx.home.clone(), PathBuf::from)
        .join(".claude.json")
}

/// The folder trust and the approval of memloop's server.
pub fn targets(ctx: &Context) -> Vec<Target> {
    let root = ctx
        .root
        .canonicalize()
        .unwrap_or_else(|_| ctx.root.to_path_buf());
    let config = global_config(ctx);
    let (local_path, local_display) = ctx.project_target_display(LOCAL_SETTINGS);
    vec![
        Target {
            display: ctx.display_user_path(&config),
            path: config,
            scope: Scope::User,
            agents: vec![AgentId::Claude],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![Fragment::JsonMember {
                    path: vec![
                        "projects".into(),
                        root.display().to_string(),
                        "hasTrustDialogAccepted".into(),
                    ],
                    value: Value::Bool(true),
                }],
            },
            note: None,
        },
        Target {
            path: local_path,
            display: local_display,
            scope: Scope::Project,
            agents: vec![AgentId::Claude],
            desired: Desired::Fragments {
                format: Format::Json(Dialect::Strict),
                fragments: vec![Fragment::JsonArrayItem {
                    path: vec!["enabledMcpjsonServers".into()],
                    value: json!(ctx.server.name),
                    memloops: false,
                }],
            },
            note: None,
        },
    ]
}
