//! `memloop hook prompt`: the notes that match a prompt, given with it, as the agents run it (the
//! real binary, the agent's input on stdin), and the gate counting a prompt given notes as the
//! session's lookup.

mod hook_world;

use std::path::Path;
use std::time::{Duration, Instant};

use hook_world::{NOTE, World};
use serde_json::{Value, json};

/// What only the note's full text holds (its index line stops before it).
const BODY: &str = "lacks the legacy provider";
const MATCHING: &str = "Why does the release build fail to load the OpenSSL legacy provider?";

fn claude_input(world: &World, session: &str, prompt: &str) -> Value {
    json!({"session_id": session, "cwd": world.repo, "hook_event_name": "UserPromptSubmit",
        "prompt": prompt, "transcript_path": world.repo.join("t.jsonl")})
}

/// The `additionalContext` of Claude Code's UserPromptSubmit answer, or "" for no answer.
fn claude_context(world: &World, session: &str, prompt: &str) -> String {
    let out = world.ok(
        &["prompt", "--agent", "claude"],
        &claude_input(world, session, prompt),
    );
    if out.is_empty() {
        return out;
    }
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_matching_prompt_gets_the_note_once_per_session_and_nonsense_gets_nothing() {
    let world = World::new();
    assert_eq!(
        claude_context(&world, "s", "Write a limerick about a purple giraffe."),
        ""
    );
    let first = claude_context(&world, "s", MATCHING);
    assert!(first.contains(NOTE), "{first}");
    assert!(
        first.contains(
            "[n-20261130-095501-aaaaaa] in .memloop/memory/notes/n-20261130-095501-aaaaaa.md"
        ),
        "{first}"
    );
    assert_eq!(
        claude_context(&world, "s", "the release openssl provider again"),
        ""
    );
    // Another session has not been given it.
    assert!(claude_context(&world, "t", MATCHING).contains(BODY));

    // Edited since, the note is given again.
    let file = world
        .repo
        .join(".memloop/memory/notes/n-20261130-095501-aaaaaa.md");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("legacy provider.", "legacy provider (OpenSSL 3)."),
    )
    .unwrap();
    assert!(claude_context(&world, "s", MATCHING).contains("OpenSSL 3"));
}

#[test]
fn each_agent_gets_it_in_its_own_form() {
    let world = World::new();
    let input = |session: &str| json!({"session_id": session, "sessionId": session, "cwd": world.repo, "prompt": MATCHING});
    for (agent, event) in [
        ("codex", "UserPromptSubmit"),
        ("qwen", "UserPromptSubmit"),
        ("gemini", "BeforeAgent"),
    ] {
        let out = world.ok(&["prompt", "--agent", agent], &input(agent));
        let answer: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            answer["hookSpecificOutput"]["hookEventName"], event,
            "{agent}"
        );
        assert!(
            answer["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap()
                .contains(BODY),
            "{agent}"
        );
    }
    // Gemini CLI 0.61.0 puts the session-start text before the prompt: it is not searched.
    let index = "<hook_context>Before exploring or working on anything you don't already know, \
                 query the memory store first. Memory index: - gotcha: Deploys need a tag\
                 </hook_context>\n\n";
    let out = world.ok(
        &["prompt", "--agent", "gemini"],
        &json!({"session_id": "g2", "cwd": world.repo, "prompt": format!("{index}{MATCHING}")}),
    );
    assert!(out.contains(BODY), "{out}");
    let copilot = world.ok(&["prompt", "--agent", "copilot"], &input("copilot"));
    let answer: Value = serde_json::from_str(&copilot).unwrap();
    assert!(answer["additionalContext"].as_str().unwrap().contains(BODY));
    for agent in ["opencode", "text"] {
        let out = world.ok(&["prompt", "--agent", agent], &input(agent));
        assert!(
            out.starts_with("memloop recall:") && out.contains(BODY),
            "{agent}: {out}"
        );
    }
}

/// Kimi Code's UserPromptSubmit hook (installed as `session-start --agent kimi`) does both jobs:
/// the index on the session's first prompt, then the notes of each prompt. A note the index gave
/// only as a title is still given whole.
#[test]
fn kimi_one_hook_gives_the_index_and_the_notes() {
    let world = World::new();
    let prompt = |prompt: &str| {
        world.ok(
            &["session-start", "--agent", "kimi"],
            // Kimi Code 2.1.0 passes the message's content parts as `prompt`.
            &json!({"session_id": "k", "cwd": world.repo, "prompt": [{"type": "text", "text": prompt}]}),
        )
    };
    let first = prompt(MATCHING);
    assert!(first.contains("Memory index"), "{first}");
    assert!(first.contains(BODY), "{first}");
    assert_eq!(prompt(MATCHING), "");
    let other = world.ok(
        &["session-start", "--agent", "kimi"],
        &json!({"session_id": "k2", "cwd": world.repo, "prompt": "hello"}),
    );
    assert!(
        other.contains("Memory index") && !other.contains(BODY),
        "{other}"
    );
}

/// A note short enough that the session-start index gives it whole is not given again.
#[test]
fn a_note_the_index_gave_whole_is_not_given_again() {
    let world = World::new();
    let short = "Signing needs OpenSSL legacy.";
    std::fs::write(
        world
            .repo
            .join(".memloop/memory/notes/n-20261130-095501-aaaaaa.md"),
        format!(
            "---\ncategory: gotchas\nimportance: 8\ntags: [release]\ncreated: \
             2026-11-30T09:55:01.123Z\n---\n{short}\n"
        ),
    )
    .unwrap();
    let start = world.ok(
        &["session-start", "--agent", "claude"],
        &json!({"session_id": "s", "cwd": world.repo, "source": "startup"}),
    );
    assert!(start.contains(short.trim_end_matches('.')), "{start}");
    assert_eq!(claude_context(&world, "s", "openssl legacy signing"), "");
    assert!(claude_context(&world, "fresh", "openssl legacy signing").contains(short));
    // After a compaction the session's context lost it: it may come again.
    world.ok(
        &["pre-compact", "--agent", "claude"],
        &json!({"session_id": "s", "cwd": world.repo}),
    );
    assert!(claude_context(&world, "s", "openssl legacy signing").contains(short));
}

#[test]
fn switched_off_it_gives_nothing() {
    let world = World::new();
    std::fs::write(
        world.repo.join("memloop.toml"),
        "[memory]\nrecall = false\n",
    )
    .unwrap();
    assert_eq!(claude_context(&world, "s", MATCHING), "");
}

/// Hostile prompts: bounded, exit 0, nothing or a clean answer; never a block.
#[test]
fn hostile_prompts_are_bounded_and_never_block() {
    let world = World::new();
    let huge = format!("{MATCHING} {}", "openssl ".repeat(10 << 20 >> 3));
    let escapes = format!("\u{1b}[2J\u{1b}]0;pwned\u{7}{MATCHING}\u{0}\u{9b}31m");
    let inputs: Vec<String> = vec![
        claude_input(&world, "a", &huge).to_string(),
        claude_input(&world, "b", &escapes).to_string(),
        claude_input(&world, "c", "").to_string(),
        json!({"session_id": "d", "cwd": world.repo}).to_string(),
        json!({"session_id": "e", "cwd": world.repo, "prompt": 42}).to_string(),
        String::from_utf8_lossy(&[0xff, 0xfe, 0, 1, 2, 0x1b, b'[']).into_owned(),
        String::new(),
        "{\"prompt\": \"unterminated".to_owned(),
    ];
    for input in &inputs {
        let started = Instant::now();
        let out = world.hook(&["prompt", "--agent", "claude"], input);
        let what = &input[..input.len().min(60)];
        assert_eq!(out.status.code(), Some(0), "{what:?}: {out:?}");
        // The hook's own budget bounds it; this only catches a hang.
        assert!(started.elapsed() < Duration::from_secs(30), "{what:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        if !stdout.is_empty() {
            let answer: Value = serde_json::from_str(&stdout).unwrap();
            let text = answer["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap();
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "{text:?}"
            );
        }
    }
}

fn transcript(path: &Path, tools: &[&str]) {
    let mut rows = String::new();
    for tool in tools {
        rows.push_str(
            &json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": tool}]}})
                .to_string(),
        );
        rows.push('\n');
    }
    rows.push_str(
        &json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "done"}]}})
            .to_string(),
    );
    rows.push('\n');
    std::fs::write(path, rows).unwrap();
}

fn stop(world: &World, session: &str) -> std::process::Output {
    let path = world.repo.join(format!("{session}.jsonl"));
    transcript(
        &path,
        &["Read", "Edit", "Edit", "mcp__memory__memory_store"],
    );
    let input = json!({"session_id": session, "transcript_path": path, "cwd": world.repo,
        "hook_event_name": "Stop", "stop_hook_active": false, "last_assistant_message": "done"});
    world.hook(&["stop", "--agent", "claude"], &input.to_string())
}

/// A prompt given notes was the session's lookup: the gate does not send the agent back to
/// query; without recall (or with `[gate] recall_counts_as_lookup = false`) it does.
#[test]
fn the_gate_counts_a_recall_as_the_lookup() {
    let world = World::new();
    assert!(claude_context(&world, "given", MATCHING).contains(BODY));
    let given = stop(&world, "given");
    assert_eq!(
        given.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&given.stderr)
    );

    assert_eq!(claude_context(&world, "nothing", "Say hello."), "");
    let nothing = stop(&world, "nothing");
    assert_eq!(nothing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("No lookup at the first check"));

    std::fs::write(
        world.repo.join("memloop.toml"),
        "[gate]\nrecall_counts_as_lookup = false\n",
    )
    .unwrap();
    assert!(claude_context(&world, "strict", MATCHING).contains(BODY));
    let strict = stop(&world, "strict");
    assert_eq!(strict.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("No lookup at the first check"));
}

/// Loads memloop's OpenCode plugin in node and hands its `chat.message` hook one user message
/// per prompt (argv: plugin, repository, prompts as JSON); prints the parts of each message.
const PLUGIN_HARNESS: &str = r#"
import { pathToFileURL } from "node:url";
const [plugin, repo, prompts] = process.argv.slice(2);
const { MemloopGate } = await import(pathToFileURL(plugin).href);
const hooks = await MemloopGate({ client: { session: {} }, directory: repo });
const messages = [];
for (const [i, text] of JSON.parse(prompts).entries()) {
  const messageID = `msg_${i}`;
  const output = { message: { id: messageID, role: "user" },
    parts: [{ id: `prt_00000000000${i}abcdefghijklmn`, sessionID: "ses_recall", messageID, type: "text", text }] };
  await hooks["chat.message"]({ sessionID: "ses_recall", agent: "build", messageID }, output);
  messages.push(output.parts);
}
console.log(JSON.stringify(messages));
"#;

fn node() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
}

/// The OpenCode plugin (and Kilo's, the same code) adds the notes that match a user message to
/// it as a synthetic text part sorting after the person's text; nothing for nonsense, nothing the
/// second time, and nothing (no throw) without memloop.
#[test]
fn the_opencode_plugin_adds_the_matching_notes_to_the_user_message() {
    let Some(node) = node() else {
        eprintln!("skipped: node is not on PATH");
        return;
    };
    let world = World::new();
    let plugin = world.repo.join("plugin.mjs");
    std::fs::write(&plugin, memloop::gate::OPENCODE_PLUGIN).unwrap();
    let harness = world.repo.join("harness.mjs");
    std::fs::write(&harness, PLUGIN_HARNESS).unwrap();
    let prompts = json!([
        "Write a limerick about a purple giraffe.",
        MATCHING,
        "the release openssl legacy provider again"
    ]);
    let run = |bin: &Path| -> Value {
        let out = std::process::Command::new(&node)
            .arg(&harness)
            .arg(&plugin)
            .arg(&world.repo)
            .arg(prompts.to_string())
            .env("MEMLOOP_BIN", bin)
            .env("XDG_STATE_HOME", &world.state)
            .env_remove("MEMLOOP_ROOT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let messages = run(Path::new(env!("CARGO_BIN_EXE_memloop")));
    let count = |i: usize| messages[i].as_array().unwrap().len();
    assert_eq!((count(0), count(1), count(2)), (1, 2, 1), "{messages}");
    let (prompt, added) = (&messages[1][0], &messages[1][1]);
    assert_eq!(added["type"], "text");
    assert_eq!(added["synthetic"], true);
    assert_eq!(added["messageID"], "msg_1");
    assert_eq!(added["sessionID"], "ses_recall");
    let text = added["text"].as_str().unwrap();
    assert!(text.contains(NOTE), "{text}");
    let (id, after) = (
        prompt["id"].as_str().unwrap(),
        added["id"].as_str().unwrap(),
    );
    assert!(after.starts_with("prt") && after > id, "{after} after {id}");

    let messages = run(&world.repo.join("no-such-memloop"));
    for message in messages.as_array().unwrap() {
        assert_eq!(message.as_array().unwrap().len(), 1, "{messages}");
    }
}
