//! Factory Droid's side of `memloop hook`, run as Droid 0.215.0 runs it (its Stop, SessionStart
//! and UserPromptSubmit inputs on stdin, its transcript rows on disk): the gate answers a block
//! with `{"decision": "block", "reason"}` on stdout and exit 0, the way Droid reads it without
//! marking the hook run as failed.

mod hook_world;

use std::io::Write as _;

use hook_world::{TITLE, World};
use serde_json::{Value, json};

/// Rows as Droid 0.215.0 wrote them in a `droid exec` run (trimmed): a write, a shell call, the
/// text that ended the turn.
const TURN: &[&str] = &[
    r#"{"type":"session_start","id":"s1","title":"t","owner":"unknown","version":2,"cwd":"/p"}"#,
    r#"{"type":"message","id":"u1","message":{"role":"user","content":[{"type":"text","text":"write files"}]}}"#,
    r#"{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"Create","input":{"file_path":"/p/a.txt","content":"x"}}]}}"#,
    r#"{"type":"message","id":"r1","parentId":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_0","is_error":false,"content":"ok"}]}}"#,
    r#"{"type":"message","id":"a2","parentId":"r1","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"Create","input":{"file_path":"/p/b.txt","content":"y"}}]}}"#,
    r#"{"type":"message","id":"r2","parentId":"a2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","is_error":false,"content":"ok"}]}}"#,
    r#"{"type":"message","id":"a3","parentId":"r2","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_2","name":"Execute","input":{"command":"echo z > c.txt"}}]}}"#,
    r#"{"type":"message","id":"r3","parentId":"a3","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_2","is_error":false,"content":"ok"}]}}"#,
    r#"{"type":"message","id":"a4","parentId":"r3","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#,
];

/// The agent sent back looks up and stores.
const SENT_BACK: &[&str] = &[
    r#"{"type":"message","id":"u2","parentId":"a4","message":{"role":"user","content":[{"type":"text","text":"KNOWLEDGE CHECK"}]}}"#,
    r#"{"type":"message","id":"a5","parentId":"u2","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_3","name":"memory___context_query","input":{"query":"q"}}]}}"#,
    r#"{"type":"message","id":"a6","parentId":"a5","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_4","name":"memory___memory_store","input":{"content":"c"}}]}}"#,
    r#"{"type":"message","id":"a7","parentId":"a6","message":{"role":"assistant","content":[{"type":"text","text":"stored"}]}}"#,
];

fn append(path: &std::path::Path, rows: &[&str]) {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all((rows.join("\n") + "\n").as_bytes()).unwrap();
}

fn stop_input(world: &World, transcript: &std::path::Path, last: &str, active: bool) -> String {
    json!({"session_id": "d1", "transcript_path": transcript, "cwd": world.repo,
        "permission_mode": "auto-high", "hook_event_name": "Stop", "message_id": last,
        "stop_hook_active": active, "tool_execution_count": 3, "elapsed_time": 10})
    .to_string()
}

#[test]
fn droid_is_sent_back_with_a_json_decision_then_let_go_once_it_stored() {
    let world = World::new();
    let transcript = world.repo.join("../d1.jsonl");
    append(&transcript, TURN);
    let blocked = world.hook(
        &["stop", "--agent", "droid"],
        &stop_input(&world, &transcript, "a4", false),
    );
    assert_eq!(blocked.status.code(), Some(0), "{blocked:?}");
    let answer: Value = serde_json::from_slice(&blocked.stdout).unwrap();
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.starts_with("KNOWLEDGE CHECK:"), "{reason}");

    append(&transcript, SENT_BACK);
    let allowed = world.hook(
        &["stop", "--agent", "droid"],
        &stop_input(&world, &transcript, "a7", false),
    );
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");
    assert!(allowed.stdout.is_empty(), "{allowed:?}");
}

#[test]
fn the_retry_after_a_block_is_let_through() {
    let world = World::new();
    let transcript = world.repo.join("../d1.jsonl");
    append(&transcript, TURN);
    let out = world.hook(
        &["stop", "--agent", "droid"],
        &stop_input(&world, &transcript, "a4", true),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn droid_session_start_and_prompt_answer_in_hook_json() {
    let world = World::new();
    let start = world.ok(
        &["session-start", "--agent", "droid"],
        &json!({"session_id": "d2", "transcript_path": "/t.jsonl", "cwd": world.repo,
            "permission_mode": "off", "hook_event_name": "SessionStart", "source": "startup"}),
    );
    let start: Value = serde_json::from_str(&start).unwrap();
    let context = start["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(context.contains(TITLE), "{context}");

    let prompt = world.ok(
        &["prompt", "--agent", "droid"],
        &json!({"session_id": "d3", "transcript_path": "/t.jsonl", "cwd": world.repo,
            "hook_event_name": "UserPromptSubmit", "prompt": "why does the release build need vendored openssl",
            "has_images": false}),
    );
    let prompt: Value = serde_json::from_str(&prompt).unwrap();
    assert_eq!(
        prompt["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    let recalled = prompt["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(recalled.contains("vendored OpenSSL"), "{recalled}");
}

fn git_in(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@127.0.0.1")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@127.0.0.1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn row(id: &str, tool: &str) -> String {
    json!({"type": "message", "id": id, "message": {"role": "assistant",
        "content": [{"type": "tool_use", "id": format!("c-{id}"), "name": tool, "input": {}}]}})
    .to_string()
}

/// A file changed through `Execute` (no edit tool call) counts as an edit, as Bash's do for
/// Claude Code: the window holds a shell call, so the gate looks at the worktree.
#[test]
fn edits_made_through_execute_are_seen() {
    let world = World::new();
    let repo = &world.repo;
    git_in(repo, &["init", "-q"]);
    std::fs::write(repo.join("tax.py"), "round(total)\n").unwrap();
    git_in(repo, &["add", "tax.py"]);
    git_in(repo, &["commit", "-qm", "init"]);
    let transcript = world.repo.join("../d4.jsonl");
    append(&transcript, &[&row("a1", "memory___context_query")]);
    // The session's log exists before the edit (file times tick in jiffies).
    std::thread::sleep(std::time::Duration::from_millis(30));
    std::fs::write(repo.join("tax.py"), "round(line) for line in lines\n").unwrap();
    append(&transcript, &[&row("a2", "Execute"), &row("a3", "Read")]);
    let input = json!({"session_id": "d4", "transcript_path": transcript, "cwd": repo,
        "hook_event_name": "Stop", "message_id": "a3", "stop_hook_active": false});
    let out = world.hook(&["stop", "--agent", "droid"], &input.to_string());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = answer["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("KNOWLEDGE CHECK: Modified 1 file(s) but stored nothing."),
        "{answer}"
    );
}
