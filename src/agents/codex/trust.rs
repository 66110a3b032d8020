//! Codex's per-machine trust (`memloop trust`), in the user's `$CODEX_HOME/config.toml`: the
//! project's `[projects."<root>"] trust_level = "trusted"` and the hook's
//! `[hooks.state."<key>"] trusted_hash = "sha256:<hex>"`. Codex skips an untrusted project's
//! `.codex/` and an untrusted or modified hook without a word, so memloop writes both entries
//! once the user agreed, and sync recomputes the hook's on every run: the key holds the hooks
//! file's path, the hash the command and its timeout. The recipe is Codex 0.171.0's
//! `command_hook_hash` (codex-rs/hooks/src/engine/discovery.rs), checked against hashes Codex
//! reported.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    HOOKS_JSON, PROMPT_COMMAND, SESSION_START_COMMAND, codex_home, group_index, group_index_of,
    hook_hash, prompt_hash, prompt_trust, session_start_hash, session_start_trust, trusted_root,
};
use crate::config::AgentId;
use crate::edit::toml::EntryValue;
use crate::repo::Context;
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// One of memloop's handlers in `.codex/hooks.json` as Codex's trust sees it.
pub struct Handler {
    /// The event as the hooks file names it (`Stop`).
    pub event: &'static str,
    /// The event as Codex's trust key and hash spell it (`stop`).
    pub label: &'static str,
    /// Its group's place in the event's array (or where sync puts it).
    pub group: usize,
    pub hash: String,
    /// Whether the configuration asks for this handler.
    pub wanted: bool,
}

impl Handler {
    /// Its `[hooks.state]` key for the repository at `root` (canonical).
    pub fn key(&self, root: &Path) -> String {
        hook_state_key(&root.join(HOOKS_JSON), self.label, self.group, 0)
    }
}

/// memloop's handlers in this repository's `.codex/hooks.json`: the Stop gate, then the
/// session-start index and the per-prompt recall.
pub fn handlers(ctx: &Context) -> [Handler; 3] {
    let hooks_json = ctx.root.join(HOOKS_JSON);
    [
        Handler {
            event: "Stop",
            label: "stop",
            group: group_index(&hooks_json),
            hash: hook_hash(),
            wanted: true,
        },
        Handler {
            event: "SessionStart",
            label: "session_start",
            group: group_index_of(&hooks_json, "SessionStart", SESSION_START_COMMAND),
            hash: session_start_hash(),
            wanted: ctx.config.memory.session_start,
        },
        Handler {
            event: "UserPromptSubmit",
            label: "user_prompt_submit",
            group: group_index_of(&hooks_json, "UserPromptSubmit", PROMPT_COMMAND),
            hash: prompt_hash(),
            wanted: ctx.config.memory.recall,
        },
    ]
}

/// The user config holding this repository's trust entries.
pub fn target(ctx: &Context) -> Target {
    let user_config = codex_home(&ctx.home).join("config.toml");
    let [stop, start, prompt] = handlers(ctx);
    let root = trusted_root(ctx.root);
    let mut fragments = fragments(&root, stop.group);
    fragments.push(session_start_trust(&root, start.group).wanted_if(start.wanted));
    fragments.push(prompt_trust(&root, prompt.group).wanted_if(prompt.wanted));
    // A group that moved in .codex/hooks.json leaves memloop's trust at its old key, where a hook
    // put there later would run trusted: those entries are taken out.
    let current = [stop, start, prompt].map(|handler| (handler.label, handler.group, handler.hash));
    for (key, hash) in left_behind(&user_config, &root.join(HOOKS_JSON), &current) {
        fragments.push(Fragment::Retired(Box::new(Fragment::TomlTable {
            path: vec!["hooks".into(), "state".into(), key],
            fields: vec![("trusted_hash".into(), EntryValue::String(hash))],
            whole: false,
        })));
    }
    Target {
        display: ctx.display_user_path(&user_config),
        path: user_config,
        scope: Scope::User,
        agents: vec![AgentId::Codex],
        desired: Desired::Fragments {
            format: Format::Toml,
            fragments,
        },
        note: None,
    }
}

/// The `[hooks.state]` keys in `user_config` that trust one of memloop's handlers (its event
/// label, current group, hash) by memloop's hash at another group than the current one.
pub fn left_behind(
    user_config: &Path,
    hooks_json: &Path,
    current: &[(&str, usize, String)],
) -> Vec<(String, String)> {
    let place = user_config.parent().unwrap_or(user_config);
    let Ok(Some(text)) = crate::files::read_within(user_config, place) else {
        return Vec::new();
    };
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let Some(states) = doc
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(toml_edit::Item::as_table_like)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (event, group, hash) in current {
        let prefix = format!("{}:{event}:", hooks_json.display());
        let now = hook_state_key(hooks_json, event, *group, 0);
        for (key, state) in states.iter() {
            let trusted = state.get("trusted_hash").and_then(toml_edit::Item::as_str);
            if key.starts_with(&prefix) && key != now && trusted == Some(hash.as_str()) {
                out.push((key.to_owned(), hash.clone()));
            }
        }
    }
    out
}

/// The user config's entries for the repository at `root` (canonical) whose memloop Stop group
/// is group `group` of `.codex/hooks.json`.
pub fn fragments(root: &Path, group: usize) -> Vec<Fragment> {
    let hooks_json = root.join(HOOKS_JSON);
    vec![
        Fragment::TomlTable {
            path: vec!["projects".into(), root.display().to_string()],
            fields: vec![("trust_level".into(), EntryValue::String("trusted".into()))],
            whole: false,
        },
        Fragment::TomlTable {
            path: vec![
                "hooks".into(),
                "state".into(),
                hook_state_key(&hooks_json, "stop", group, 0),
            ],
            fields: vec![("trusted_hash".into(), EntryValue::String(hook_hash()))],
            whole: false,
        },
    ]
}

/// The `trusted_hash` of one command hook of `event_label` (`stop`): SHA-256 over the compact
/// JSON, keys sorted at every level, of `{"event_name", "hooks": [{"type": "command", "command",
/// "timeout", "async", "statusMessage"?}]}`. The timeout defaults to 600 and is at least 1; a
/// Stop group's `matcher` is not part of it; strings keep non-ASCII as UTF-8.
pub fn command_hook_trusted_hash(
    event_label: &str,
    command: &str,
    timeout_sec: Option<u64>,
    status_message: Option<&str>,
) -> String {
    command_hook_trusted_hash_matching(event_label, None, command, timeout_sec, status_message)
}

/// As [`command_hook_trusted_hash`] for a group whose `matcher` is part of the identity (the
/// events that use one, such as `session_start`).
pub fn command_hook_trusted_hash_matching(
    event_label: &str,
    matcher: Option<&str>,
    command: &str,
    timeout_sec: Option<u64>,
    status_message: Option<&str>,
) -> String {
    let mut handler = json!({
        "type": "command",
        "command": command,
        "timeout": timeout_sec.unwrap_or(600).max(1),
        "async": false,
    });
    if let Some(message) = status_message {
        handler["statusMessage"] = json!(message);
    }
    let mut identity = json!({"event_name": event_label, "hooks": [handler]});
    if let Some(matcher) = matcher {
        identity["matcher"] = json!(matcher);
    }
    let identity = sorted_keys(&identity);
    let digest = Sha256::digest(identity.to_string().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
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

/// The `[hooks.state]` key of handler `handler` in group `group` of `event_label` in the hooks
/// file at `hooks_json` (as Codex spells it: the session's cwd joined, not resolved).
pub fn hook_state_key(
    hooks_json: &Path,
    event_label: &str,
    group: usize,
    handler: usize,
) -> String {
    format!("{}:{event_label}:{group}:{handler}", hooks_json.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hashes the real Codex 0.171.0 reported as `currentHash` in `hooks/list` for these handlers
    /// of a project `.codex/hooks.json` (xtask/src/e2e/codex_facts.md, "Stop hook trust").
    #[test]
    fn a_session_start_hash_holds_its_matcher_as_codex_computes_it() {
        // `currentHash` of memloop's SessionStart handler in `hooks/list` of Codex 0.171.0
        // (e2e session-start-codex); without the matcher the hash differs.
        let with = command_hook_trusted_hash_matching(
            "session_start",
            Some("startup|resume|clear|compact"),
            "memloop hook session-start --agent codex",
            Some(10),
            None,
        );
        assert_eq!(
            with,
            "sha256:ac7445cc8bd1bd4d6e145880f6581cc762e4c535d2121e22da6b9730820a5381"
        );
        let without = command_hook_trusted_hash(
            "session_start",
            "memloop hook session-start --agent codex",
            Some(10),
            None,
        );
        assert_ne!(with, without);
    }

    #[test]
    fn the_prompt_hook_hash_is_the_one_codex_reports() {
        // `currentHash` of memloop's UserPromptSubmit handler in `hooks/list` of Codex 0.171.0
        // (e2e recall-codex); a matcher on this event is ignored by Codex and its hash.
        assert_eq!(
            crate::agents::codex::prompt_hash(),
            "sha256:dc5869ecd77cfe12e6229361ae49bf755229e215f70aeb75545628ed1c1cd5f6"
        );
    }

    #[test]
    fn trusted_hash_matches_what_codex_computes() {
        assert_eq!(
            command_hook_trusted_hash("stop", "sh /tmp/cx/lab/stop.sh", Some(30), None),
            "sha256:cb1ad5e289ca13d6b1de0c8bf3d6793aab2c72def6c30725a0d9916a8eb37423"
        );
        // No timeout (600), a status message, non-ASCII, a quote, a backslash and a tab.
        assert_eq!(
            command_hook_trusted_hash("stop", "echo \"é\" \\ tab\there", None, Some("Checking é")),
            "sha256:376f82da77c6f8426ed1e66fcec86082f7bcd4a3976579a35f907f38087c7f35"
        );
        // timeout 0 counts as 1.
        assert_eq!(
            command_hook_trusted_hash("stop", "memloop hook stop --agent codex", Some(0), None),
            "sha256:6e27a85f4140764bc3bd69b06841e092dc645d7b31da9d6ed1456d83f6000062"
        );
    }

    #[test]
    fn the_key_names_file_event_group_and_handler() {
        assert_eq!(
            hook_state_key(Path::new("/r/repo/.codex/hooks.json"), "stop", 1, 0),
            "/r/repo/.codex/hooks.json:stop:1:0"
        );
    }
}
