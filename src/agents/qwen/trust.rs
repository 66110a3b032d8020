//! Qwen Code's per-machine approvals, in the user's `~/.qwen/`:
//! - `mcpApprovals.json`: `{"<project>": {"<server>": {"hash", "status": "approved"}}}`. Qwen
//!   0.24.4 starts a server of a project's `.qwen/settings.json` or `.mcp.json` only with a record
//!   whose `hash` matches the entry as it is now, so memloop recomputes it on every sync. The
//!   hash is 0.24.4's `hashMcpServerConfig` (packages/core/src/mcp/configHash.ts), checked
//!   against what `qwen mcp approve` wrote.
//! - `trustedFolders.json`: `{"<folder>": "TRUST_FOLDER"}`, read only when the user's settings
//!   turn `security.folderTrust.enabled` on (off by default in 0.24.4); in an untrusted folder
//!   Qwen ignores the project's settings, hooks and servers alike.
//!
//! memloop writes both only through `memloop trust` (`Agent::trust`); sync keeps the hash
//! current once trust was given.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{DIALECT, approvals_path, project_key, server_entry, trusted_folders_path};
use crate::config::AgentId;
use crate::edit::json::{Dialect, JsonDoc};
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

pub const APPROVED: &str = "approved";
pub const TRUST_FOLDER: &str = "TRUST_FOLDER";

/// The user files holding this repository's approvals: the server's, and the folder's trust
/// where the user turned folder trust on.
pub fn targets(ctx: &Context) -> Vec<Target> {
    let key = project_key(ctx.root);
    let approvals = approvals_path(&ctx.home);
    let entry = server_entry(&ctx.server.transport);
    let mut out = vec![Target {
        display: ctx.display_user_path(&approvals),
        path: approvals,
        scope: Scope::User,
        agents: vec![AgentId::Qwen],
        desired: Desired::Fragments {
            format: Format::Json(Dialect::Strict),
            fragments: vec![approval_fragment(&key, &ctx.server.name, &entry)],
        },
        note: None,
    }];
    if folder_trust_enabled(&ctx.home) {
        let folders = trusted_folders_path(&ctx.home);
        out.push(Target {
            display: ctx.display_user_path(&folders),
            path: folders,
            scope: Scope::User,
            agents: vec![AgentId::Qwen],
            desired: Desired::Fragments {
                format: Format::Json(DIALECT),
                fragments: vec![folder_fragment(&key)],
            },
            note: None,
        });
    }
    out
}

/// SHA-256 (hex) over `JSON.stringify` of the entry without `scope`, `extensionName` and
/// `description`, the keys of every object sorted; array order kept.
pub fn server_hash(entry: &Value) -> String {
    let mut behavioral = entry.clone();
    if let Value::Object(map) = &mut behavioral {
        for key in ["scope", "extensionName", "description"] {
            map.shift_remove(key);
        }
    }
    let text = sorted_keys(&behavioral).to_string();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// serde_json keeps insertion order here (`preserve_order`), so the sorted form is rebuilt.
fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// The approval record of server `name` (whose entry is `entry`) for the project `key`.
pub fn approval(entry: &Value) -> Value {
    json!({"hash": server_hash(entry), "status": APPROVED})
}

pub fn approval_fragment(key: &str, name: &str, entry: &Value) -> Fragment {
    Fragment::JsonMember {
        path: vec![key.to_owned(), name.to_owned()],
        value: approval(entry),
    }
}

pub fn folder_fragment(key: &str) -> Fragment {
    Fragment::JsonMember {
        path: vec![key.to_owned()],
        value: json!(TRUST_FOLDER),
    }
}

/// Whether the user's settings (`~/.qwen/settings.json`) turn folder trust on. A file that
/// cannot be read or parsed counts as off; the doctor reports it.
pub fn folder_trust_enabled(home: &Path) -> bool {
    user_settings(home)
        .and_then(|v| v.pointer("/security/folderTrust/enabled").cloned())
        .is_some_and(|v| v == Value::Bool(true))
}

/// The user's settings as a value, if it parses.
pub fn user_settings(home: &Path) -> Option<Value> {
    let dir = super::qwen_dir(home);
    let text = crate::files::read_within(&dir.join("settings.json"), &dir).ok()??;
    JsonDoc::parse(&text, super::DIALECT, "")
        .ok()
        .map(|doc| doc.value())
}

/// What the approvals file says about server `name` of project `key` whose entry is `entry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    Approved,
    /// A record for another version of the entry: Qwen asks again (headless: does not start it, except in YOLO mode).
    Stale,
    Rejected,
    Missing,
}

pub fn approval_state(approvals: Option<&Value>, key: &str, name: &str, entry: &Value) -> Approval {
    let Some(record) = approvals.and_then(|v| v.get(key)).and_then(|p| p.get(name)) else {
        return Approval::Missing;
    };
    if record.get("hash").and_then(Value::as_str) != Some(server_hash(entry).as_str()) {
        return Approval::Stale;
    }
    match record.get("status").and_then(Value::as_str) {
        Some(APPROVED) => Approval::Approved,
        Some("rejected") => Approval::Rejected,
        _ => Approval::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the real Qwen Code 0.24.4 wrote into mcpApprovals.json after `qwen mcp approve
    /// memory` for this entry (xtask/src/e2e/qwen_facts.md, "MCP approval").
    #[test]
    fn the_hash_matches_what_qwen_wrote() {
        let entry = json!({"command": "/work/wt/qwen/target/debug/memloop", "args": ["serve"], "alwaysLoadTools": true});
        assert_eq!(
            server_hash(&entry),
            "417b22062165b8ad383359d4f66f16ee9ea1ebfd9c4cb5ea79f2bffe7128cf4d"
        );
        let mut labelled = entry.clone();
        labelled["description"] = json!("cosmetic");
        labelled["scope"] = json!("workspace");
        assert_eq!(server_hash(&labelled), server_hash(&entry));
        let mut changed = entry;
        changed["args"] = json!(["serve", "--x"]);
        assert_ne!(
            server_hash(&changed),
            "417b22062165b8ad383359d4f66f16ee9ea1ebfd9c4cb5ea79f2bffe7128cf4d"
        );
    }

    #[test]
    fn approval_state_reads_hash_and_status() {
        let entry = json!({"command": "memloop", "args": ["serve"]});
        let file = json!({"/r": {"memory": approval(&entry), "old": {"hash": "x", "status": "approved"},
            "no": {"hash": server_hash(&entry), "status": "rejected"}}});
        assert_eq!(
            approval_state(Some(&file), "/r", "memory", &entry),
            Approval::Approved
        );
        assert_eq!(
            approval_state(Some(&file), "/r", "old", &entry),
            Approval::Stale
        );
        assert_eq!(
            approval_state(Some(&file), "/r", "no", &entry),
            Approval::Rejected
        );
        assert_eq!(
            approval_state(Some(&file), "/s", "memory", &entry),
            Approval::Missing
        );
        assert_eq!(
            approval_state(None, "/r", "memory", &entry),
            Approval::Missing
        );
    }
}
