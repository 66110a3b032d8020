//! Kilo Code's side of `memloop hook`: the plugin's calls as `--agent kilo` (record, stop,
//! session-start), kept apart from OpenCode's in a repository that has both.

mod hook_world;

use hook_world::{TITLE, World};
use serde_json::json;

#[test]
fn kilo_records_and_stops_in_its_own_ledger() {
    let world = World::new();
    let record = |agent: &str, tool: &str| {
        let out = world.hook(
            &["record", "--agent", agent],
            &json!({"tool": tool, "sessionID": "ses_1", "callID": "c"}).to_string(),
        );
        assert!(out.status.success(), "{out:?}");
    };
    let stop = |agent: &str, messages: u64| {
        world
            .hook(
                &["stop", "--agent", agent],
                &json!({"session_id": "ses_1", "cwd": world.repo, "assistant_messages": messages})
                    .to_string(),
            )
            .status
            .code()
    };
    record("kilo", "memory_context_query");
    record("kilo", "write");
    record("kilo", "edit");
    // OpenCode's plugin on the same session id sees none of Kilo's calls.
    assert_eq!(stop("opencode", 3), Some(0));
    let blocked = world.hook(
        &["stop", "--agent", "kilo"],
        &json!({"session_id": "ses_1", "cwd": world.repo, "assistant_messages": 3}).to_string(),
    );
    assert_eq!(blocked.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&blocked.stderr).starts_with("KNOWLEDGE CHECK:"),
        "{blocked:?}"
    );
    record("kilo", "memory_memory_store");
    assert_eq!(stop("kilo", 5), Some(0));
    // One ledger (Kilo's; the names are hashed): OpenCode's stop read none.
    let files: Vec<String> = world.state_files().into_iter().map(|(n, _)| n).collect();
    let ledgers = files.iter().filter(|n| n.ends_with(".ledger")).count();
    assert_eq!(ledgers, 1, "{files:?}");
}

#[test]
fn kilo_session_start_prints_the_index_as_text() {
    let world = World::new();
    let text = world.ok(
        &["session-start", "--agent", "kilo"],
        &json!({"session_id": "ses_1", "cwd": world.repo}),
    );
    assert!(text.contains(TITLE), "{text}");
    assert!(
        !text.trim_start().starts_with('{'),
        "plain text, not JSON: {text}"
    );
}
