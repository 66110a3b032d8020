//! `memloop hook` driven as the agents drive it: the real binary, JSON on stdin, exit status and
//! stderr checked. Every run gets its own state, Kimi home and repo in a temp dir.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const DEFAULT_EDIT_PROBLEM: &str = "Modified 2 file(s) but stored nothing. memory_store() the \
     change/decision and why on the \"memory\" server (supersede if updating).";

struct Gate {
    temp: tempfile::TempDir,
}

struct Run {
    code: i32,
    /// Empty, or Copilot's one-line block decision.
    stdout: String,
    stderr: String,
}

impl Gate {
    fn new() -> Gate {
        let gate = Gate {
            temp: tempfile::tempdir().unwrap(),
        };
        for dir in ["home", "state", "kimi", "repo"] {
            std::fs::create_dir_all(gate.temp.path().join(dir)).unwrap();
        }
        gate
    }

    fn path(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    fn repo(&self) -> PathBuf {
        self.path("repo")
    }

    fn run_with(&self, args: &[&str], stdin: &str, state_home: &Path) -> Run {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(self.repo())
            .env("HOME", self.path("home"))
            .env("XDG_STATE_HOME", state_home)
            .env("KIMI_CODE_HOME", self.path("kimi"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout.clone()).unwrap();
        let decision = serde_json::from_str::<Value>(stdout.trim())
            .is_ok_and(|v| v["decision"] == "block" && v["reason"].is_string());
        assert!(
            stdout.is_empty() || (decision && stdout.lines().count() == 1),
            "stdout must stay empty but for a block decision: {out:?}"
        );
        Run {
            code: out.status.code().unwrap(),
            stdout,
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    fn run(&self, args: &[&str], stdin: &Value) -> Run {
        self.run_with(args, &stdin.to_string(), &self.path("state"))
    }

    fn claude(&self, session: &str, transcript: &Path, active: bool) -> Run {
        self.run(
            &["hook", "stop", "--agent", "claude"],
            &json!({
                "session_id": session,
                "transcript_path": transcript,
                "cwd": self.repo(),
                "hook_event_name": "Stop",
                "stop_hook_active": active,
            }),
        )
    }
}

fn tool_row(name: &str) -> String {
    json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": name}]}})
        .to_string()
}

fn text_row() -> String {
    json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "done"}]}})
        .to_string()
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

fn lines(rows: &[String]) -> String {
    rows.iter().map(|row| format!("{row}\n")).collect()
}

fn block(problems: &[&str]) -> String {
    format!(
        "KNOWLEDGE CHECK: {} This is mandatory.\n",
        problems.join(" | ")
    )
}

#[test]
fn seed_synthetic_transcript_blocks_then_a_store_lets_a_new_session_stop() {
    let gate = Gate::new();
    let transcript = gate.path("copperfern-test.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    let run = gate.claude("test-001", &transcript, false);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));

    append(&transcript, &lines(&[tool_row("memory_store")]));
    let run = gate.claude("test-002", &transcript, false);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

#[test]
fn the_retry_after_a_block_is_let_through() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    assert_eq!(gate.claude("s", &transcript, false).code, 2);
    append(&transcript, &lines(&[tool_row("Edit"), text_row()]));
    assert_eq!(gate.claude("s", &transcript, true).code, 0);
}

#[test]
fn the_retry_after_a_block_is_let_through_even_without_a_transcript() {
    let gate = Gate::new();
    let missing = gate.path("gone.jsonl");
    let run = gate.claude("s", &missing, true);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        gate.claude("s", &missing, false).code,
        1,
        "without stop_hook_active it is the gate's own failure"
    );
}

#[test]
fn failure_story_short_session_that_edits_and_stores_nothing_is_flagged() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    // A short session: three calls, one edit, nothing stored.
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Read"),
            tool_row("Write"),
        ]),
    );
    let run = gate.claude("short", &transcript, false);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .starts_with("KNOWLEDGE CHECK: Modified 1 file(s) but stored nothing."),
        "{}",
        run.stderr
    );

    // A later short stretch in a clean session is flagged at the very next check, too.
    let transcript = gate.path("t2.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("memory_store"),
        ]),
    );
    assert_eq!(gate.claude("later", &transcript, false).code, 0);
    append(&transcript, &lines(&[tool_row("Edit"), text_row()]));
    let run = gate.claude("later", &transcript, false);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("Modified 1 file(s)"), "{}", run.stderr);
}

#[test]
fn failure_story_store_before_first_lookup_is_not_sent_back_at_every_later_stop() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("memory_store"),
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("memory_store"),
        ]),
    );
    let run = gate.claude("early", &transcript, false);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("Stored before the first lookup."),
        "{}",
        run.stderr
    );
    assert_eq!(gate.claude("early", &transcript, true).code, 0);
    for _ in 0..4 {
        append(
            &transcript,
            &lines(&[
                tool_row("context_query"),
                tool_row("Edit"),
                tool_row("memory_store"),
                text_row(),
            ]),
        );
        let run = gate.claude("early", &transcript, false);
        assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    }
}

fn claude_stop_with_last_message(gate: &Gate, session: &str, transcript: &Path, last: &str) -> Run {
    gate.run(
        &["hook", "stop", "--agent", "claude"],
        &json!({
            "session_id": session,
            "transcript_path": transcript,
            "cwd": gate.repo(),
            "hook_event_name": "Stop",
            "stop_hook_active": false,
            "last_assistant_message": last,
        }),
    )
}

fn final_text_row(text: &str) -> String {
    json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
        .to_string()
}

#[test]
fn a_transcript_lagging_the_stop_is_waited_for() {
    // Claude Code ran the Stop hook before the last tool calls were in the file: 2 of 3 calls
    // seen meant "fewer than 3 tool calls" and the edits went through.
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[tool_row("context_query"), tool_row("Write")]),
    );
    let late = transcript.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        append(
            &late,
            &lines(&[tool_row("Write"), final_text_row("All files are written.")]),
        );
    });
    let run = claude_stop_with_last_message(&gate, "lag", &transcript, "All files are written.");
    writer.join().unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));
    let log = std::fs::read_to_string(gate.path("state/memloop/gate/debug.log")).unwrap();
    assert!(
        log.contains("claude session lag: waited ") && !log.contains("did not show"),
        "{log}"
    );
}

#[test]
fn a_last_message_that_never_shows_is_judged_on_what_is_there_and_logged() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    let run = claude_stop_with_last_message(&gate, "never", &transcript, "Not in the file.");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));
    let log = std::fs::read_to_string(gate.path("state/memloop/gate/debug.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(
        log.contains("claude session never:")
            && log.contains("did not show the turn's last assistant message within"),
        "{log}"
    );
}

#[test]
fn a_partial_last_line_is_read_once_it_is_complete() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    let edit = tool_row("Edit");
    let (head, tail) = edit.split_at(edit.len() / 2);
    append(
        &transcript,
        &(lines(&[
            tool_row("context_query"),
            tool_row("Read"),
            tool_row("memory_store"),
        ]) + head),
    );
    // The half-written edit is not seen yet: the first window is clean.
    assert_eq!(gate.claude("partial", &transcript, false).code, 0);
    append(&transcript, &format!("{tail}\n{}\n", text_row()));
    // Completed, it lands in the next window, which stored nothing.
    let run = gate.claude("partial", &transcript, false);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("Modified 1 file(s)"), "{}", run.stderr);
}

#[test]
fn a_truncated_transcript_is_read_again_from_the_start() {
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("memory_store"),
            text_row(),
        ]),
    );
    assert_eq!(gate.claude("cut", &transcript, false).code, 0);
    std::fs::write(
        &transcript,
        lines(&[tool_row("Read"), tool_row("Edit"), tool_row("Edit")]),
    )
    .unwrap();
    let run = gate.claude("cut", &transcript, false);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        block(&[
            DEFAULT_EDIT_PROBLEM,
            "No lookup at the first check. Query the memory store first."
        ])
    );
}

#[test]
fn the_convops_preset_uses_the_seed_wording() {
    let gate = Gate::new();
    std::fs::write(
        gate.repo().join("memloop.toml"),
        "[server]\nname = \"convops\"\npreset = \"convops\"\n",
    )
    .unwrap();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("mcp__convops__context_query"),
            tool_row("Read"),
            tool_row("Edit"),
            tool_row("Edit"),
            tool_row("Read"),
        ]),
    );
    let run = gate.claude("convops", &transcript, false);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "KNOWLEDGE CHECK: Modified 2 file(s) but stored nothing. memory_store() the \
         change/decision (supersede if updating). If you explored files, \
         create_route()/update_route() in ConvOps. This is mandatory.\n"
    );
}

#[test]
fn a_broken_memloop_toml_falls_back_to_the_defaults() {
    let gate = Gate::new();
    std::fs::write(gate.repo().join("memloop.toml"), "[gate\n").unwrap();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    let run = gate.claude("broken", &transcript, false);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));
}

#[test]
fn gate_thresholds_come_from_memloop_toml() {
    let gate = Gate::new();
    std::fs::write(
        gate.repo().join("memloop.toml"),
        "[gate]\nmin_tool_calls = 5\nedit_tools = [\"Patch\"]\n",
    )
    .unwrap();
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Patch"),
            tool_row("Edit"),
        ]),
    );
    assert_eq!(gate.claude("cfg", &transcript, false).code, 0);
    append(&transcript, &lines(&[tool_row("Read"), tool_row("Read")]));
    let run = gate.claude("cfg", &transcript, false);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("Modified 1 file(s)"), "{}", run.stderr);
}

#[test]
fn the_gates_own_failures_exit_1_with_one_line() {
    let gate = Gate::new();
    let stop = ["hook", "stop", "--agent", "claude"];

    let run = gate.run_with(&stop, "{not json", &gate.path("state"));
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr.lines().count(), 1);
    assert!(run.stderr.contains("not valid JSON"), "{}", run.stderr);

    let missing = gate.path("missing.jsonl");
    let run = gate.claude("s", &missing, false);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr.lines().count(), 1);
    assert!(run.stderr.contains("missing.jsonl"), "{}", run.stderr);

    // State base that is a file: the state dir cannot be made.
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    let blocker = gate.path("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let input = json!({"session_id": "s", "transcript_path": transcript}).to_string();
    let run = gate.run_with(&stop, &input, &blocker);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr.lines().count(), 1);
    assert!(run.stderr.contains("state directory"), "{}", run.stderr);

    let run = gate.run_with(
        &["hook", "stop", "--agent", "codex"],
        "{}",
        &gate.path("state"),
    );
    assert_eq!(run.code, 1);
}

#[cfg(unix)]
#[test]
fn state_is_private_and_named_by_hash() {
    use std::os::unix::fs::PermissionsExt;
    let gate = Gate::new();
    let transcript = gate.path("t.jsonl");
    append(&transcript, &lines(&[tool_row("Read")]));
    assert_eq!(gate.claude("../../escape", &transcript, false).code, 0);
    let dir = gate.path("state/memloop/gate");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        names[0].ends_with(".1.state") && names[0].len() == 32 + 8,
        "{names:?}"
    );
    assert!(!gate.path("escape").exists());
}

fn kimi_row(event: Value) -> String {
    json!({"type": "context.append_loop_event", "agentId": "main", "event": event}).to_string()
}

fn kimi_step(tool: &str) -> String {
    lines(&[
        kimi_row(json!({"type": "step.begin", "uuid": "u", "turnId": "1", "step": 1})),
        kimi_row(json!({"type": "tool.call", "toolCallId": "c", "name": tool, "args": {}})),
        kimi_row(json!({"type": "tool.result", "toolCallId": "c", "result": {"output": "ok"}})),
        kimi_row(json!({"type": "step.end", "uuid": "u"})),
    ])
}

#[test]
fn kimi_reads_wire_jsonl_and_allows_the_stop_right_after_a_block() {
    let gate = Gate::new();
    let session = "session_5d0c";
    let agents = gate.path(&format!(
        "kimi/sessions/wd_repo_0123456789ab/{session}/agents"
    ));
    std::fs::create_dir_all(agents.join("main")).unwrap();
    let wire = agents.join("main/wire.jsonl");
    let stop = |gate: &Gate| {
        gate.run(
            &["hook", "stop", "--agent", "kimi"],
            &json!({
                "hook_event_name": "Stop",
                "session_id": session,
                "cwd": gate.repo(),
                "client_type": "kimi_code_cli",
                "stop_hook_active": false,
            }),
        )
    };
    append(
        &wire,
        &(kimi_step("mcp__memory__context_query") + &kimi_step("WriteFile") + &kimi_step("Edit")),
    );
    let run = stop(&gate);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));
    // Kimi sends stop_hook_active false after a block; the gate's own guard lets it go.
    assert_eq!(stop(&gate).code, 0);

    append(
        &wire,
        &(kimi_step("mcp__memory__memory_store") + &kimi_step("Read")),
    );
    assert_eq!(stop(&gate).code, 0);

    append(&wire, &(kimi_step("Edit") + &kimi_step("Read")));
    assert_eq!(stop(&gate).code, 2);
    assert_eq!(stop(&gate).code, 0);
}

#[test]
fn kimi_without_a_session_log_fails_open() {
    let gate = Gate::new();
    let run = gate.run(
        &["hook", "stop", "--agent", "kimi"],
        &json!({"session_id": "session_none", "cwd": gate.repo()}),
    );
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("sessions"), "{}", run.stderr);
}

#[test]
fn opencode_record_then_stop() {
    let gate = Gate::new();
    let record = |tool: &str| {
        let run = gate.run(
            &["hook", "record", "--agent", "opencode"],
            &json!({"tool": tool, "sessionID": "ses_1", "callID": "call"}),
        );
        assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    };
    let stop = |messages: u64| {
        gate.run(
            &["hook", "stop", "--agent", "opencode"],
            &json!({"session_id": "ses_1", "cwd": gate.repo(), "assistant_messages": messages}),
        )
    };
    record("memory_context_query");
    record("write");
    record("edit");
    let run = stop(3);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));

    record("memory_memory_store");
    assert_eq!(stop(5).code, 0);

    record("patch");
    // One assistant message since the last check: too soon to judge.
    assert_eq!(stop(6).code, 0);
    let run = stop(7);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("Modified 1 file(s)"), "{}", run.stderr);
}

#[test]
fn opencode_stop_without_any_record_allows() {
    let gate = Gate::new();
    let run = gate.run(
        &["hook", "stop", "--agent", "opencode"],
        &json!({"session_id": "ses_quiet", "cwd": gate.repo(), "assistant_messages": 4}),
    );
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

const PLUGIN_HARNESS: &str = r#"
import { MemloopGate } from "./plugin.mjs";
const prompts = [];
const client = { session: { prompt: async (request) => { prompts.push(request); } } };
const hooks = await MemloopGate({ client, directory: process.argv[2] });
const sid = "ses_plugin";
let message = 0;
const step = async (tool) => {
  message += 1;
  await hooks.event({ event: { type: "message.updated",
    properties: { info: { id: "m" + message, role: "assistant", sessionID: sid } } } });
  if (tool) await hooks["tool.execute.after"]({ tool, sessionID: sid, callID: "c" + message }, {});
};
const idle = async () => {
  await hooks.event({ event: { type: "session.idle", properties: { sessionID: sid } } });
  await new Promise((resolve) => setTimeout(resolve, 20));
  return prompts.length;
};
const counts = [];
await step("memory_context_query");
await step("write");
await step("edit");
counts.push(await idle());
// The agent keeps editing without storing: blocked at every idle, sent back at most 3 times.
for (let round = 0; round < 4; round++) {
  await step("edit");
  await step(null);
  counts.push(await idle());
}
console.log(JSON.stringify({ counts, first: prompts[0] }));
"#;

fn node() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
}

#[test]
fn opencode_plugin_sends_back_on_a_block_and_stops_after_three() {
    let Some(node) = node() else {
        eprintln!("skipped: node is not on PATH");
        return;
    };
    let gate = Gate::new();
    std::fs::write(gate.path("plugin.mjs"), memloop::gate::OPENCODE_PLUGIN).unwrap();
    std::fs::write(gate.path("harness.mjs"), PLUGIN_HARNESS).unwrap();
    let run = |bin: &Path| {
        let out = Command::new(&node)
            .arg(gate.path("harness.mjs"))
            .arg(gate.repo())
            .env("MEMLOOP_BIN", bin)
            .env("HOME", gate.path("home"))
            .env("XDG_STATE_HOME", gate.path("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let result = run(Path::new(env!("CARGO_BIN_EXE_memloop")));
    assert_eq!(result["counts"], json!([1, 2, 3, 3, 4]));
    assert_eq!(result["first"]["path"]["id"], "ses_plugin");
    assert_eq!(
        result["first"]["body"]["parts"][0]["text"],
        block(&[DEFAULT_EDIT_PROBLEM]).trim_end()
    );

    // No memloop at all: the session goes on, nothing is sent, nothing throws.
    let result = run(&gate.path("no-such-memloop"));
    assert_eq!(result["counts"], json!([0, 0, 0, 0, 0]));
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Runs the hook with a stdin that is never closed, under a short budget.
fn run_with_open_stdin(gate: &Gate, budget_ms: &str) -> (i32, String, std::time::Duration) {
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(["hook", "stop", "--agent", "claude"])
        .current_dir(gate.repo())
        .env("HOME", gate.path("home"))
        .env("XDG_STATE_HOME", gate.path("state"))
        .env("MEMLOOP_GATE_BUDGET_MS", budget_ms)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Half an input, and the pipe stays open: the hook would wait forever.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"session_id\": ").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        started.elapsed(),
    )
}

#[test]
fn a_hook_input_that_never_ends_runs_out_of_budget_and_fails_open() {
    let gate = Gate::new();
    let (code, stderr, took) = run_with_open_stdin(&gate, "300");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "memloop hook: gave up after 300 ms while reading the hook input on stdin; the stop was \
         not blocked\n"
    );
    assert!(took < std::time::Duration::from_secs(4), "{took:?}");
    // The variable only shortens the budget: a huge value still ends at the built-in 5 s.
    let (code, stderr, _) = run_with_open_stdin(&gate, "999999999");
    assert_eq!(code, 1);
    assert!(stderr.contains("gave up after 5000 ms"), "{stderr}");
}

#[test]
fn a_transcript_that_is_a_device_or_a_fifo_is_refused_without_blocking() {
    let gate = Gate::new();
    let fifo = gate.path("t.fifo");
    mkfifo(&fifo);
    for transcript in [Path::new("/dev/zero"), fifo.as_path()] {
        let started = std::time::Instant::now();
        let run = gate.claude("dev", transcript, false);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.starts_with(&format!(
                "memloop hook: cannot read {0}: {0} is a ",
                transcript.display()
            )) && run.stderr.contains("not a regular file")
                && run.stderr.ends_with("; the stop was not blocked\n"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("gave up"), "{}", run.stderr);
        assert!(started.elapsed() < std::time::Duration::from_secs(4));
        // The retry after a block is still let through.
        assert_eq!(gate.claude("dev", transcript, true).code, 0);
    }
}

#[test]
fn a_fifo_memloop_toml_is_not_read_and_the_defaults_apply() {
    let gate = Gate::new();
    std::fs::create_dir_all(gate.repo().join(".git")).unwrap();
    mkfifo(&gate.repo().join("memloop.toml"));
    let transcript = gate.path("t.jsonl");
    append(
        &transcript,
        &lines(&[
            tool_row("context_query"),
            tool_row("Edit"),
            tool_row("Edit"),
        ]),
    );
    let run = gate.claude("fifo-toml", &transcript, false);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr, block(&[DEFAULT_EDIT_PROBLEM]));
    // No block: the note about the defaults reaches stderr.
    append(&transcript, &lines(&[tool_row("memory_store"), text_row()]));
    let run = gate.claude("fifo-toml", &transcript, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("memloop.toml is a FIFO (named pipe), not a regular file")
            && run.stderr.contains("using the default gate settings"),
        "{}",
        run.stderr
    );
}

/// The one-shot path: the verdict asked when a reply's text completes, inside the prompt loop.
const PLUGIN_TEXT_COMPLETE_HARNESS: &str = r#"
import { MemloopGate } from "./plugin.mjs";
const prompts = [];
const replies = { m3: [{ type: "text" }, { type: "tool" }], m4: [{ type: "text" }] };
const client = { session: {
  prompt: async (request) => { prompts.push(request); },
  message: async ({ path }) => ({ data: { info: { id: path.messageID }, parts: replies[path.messageID] || [] } }),
} };
const hooks = await MemloopGate({ client, directory: process.argv[2] });
const sid = "ses_run";
await hooks["chat.message"]({ sessionID: sid, agent: "build",
  model: { providerID: "fake", modelID: "fake-model" } }, {});
let message = 0;
const step = async (tool) => {
  message += 1;
  await hooks.event({ event: { type: "message.updated",
    properties: { info: { id: "m" + message, role: "assistant", sessionID: sid } } } });
  if (tool) await hooks["tool.execute.after"]({ tool, sessionID: sid, callID: "c" + message }, {});
};
const counts = [];
await step("memory_context_query");
await step("write");
await step("edit");
// A text before a tool call in the same reply: not the turn's end.
await hooks["experimental.text.complete"]({ sessionID: sid, messageID: "m3", partID: "p3" }, { text: "x" });
counts.push(prompts.length);
await step(null);
await hooks["experimental.text.complete"]({ sessionID: sid, messageID: "m4", partID: "p4" }, { text: "done" });
counts.push(prompts.length);
// The idle that follows judges nothing new.
await hooks.event({ event: { type: "session.idle", properties: { sessionID: sid } } });
await new Promise((resolve) => setTimeout(resolve, 20));
counts.push(prompts.length);
console.log(JSON.stringify({ counts, first: prompts[0] }));
"#;

#[test]
fn opencode_plugin_sends_back_inside_the_prompt_loop_when_the_answer_completes() {
    let Some(node) = node() else {
        eprintln!("skipped: node is not on PATH");
        return;
    };
    let gate = Gate::new();
    std::fs::write(gate.path("plugin.mjs"), memloop::gate::OPENCODE_PLUGIN).unwrap();
    std::fs::write(gate.path("harness.mjs"), PLUGIN_TEXT_COMPLETE_HARNESS).unwrap();
    let out = Command::new(&node)
        .arg(gate.path("harness.mjs"))
        .arg(gate.repo())
        .env("MEMLOOP_BIN", env!("CARGO_BIN_EXE_memloop"))
        .env("HOME", gate.path("home"))
        .env("XDG_STATE_HOME", gate.path("state"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["counts"], json!([0, 1, 1]), "{result}");
    let first = &result["first"];
    assert_eq!(first["path"]["id"], "ses_run");
    assert_eq!(first["body"]["noReply"], true);
    assert_eq!(first["body"]["agent"], "build");
    assert_eq!(first["body"]["model"]["modelID"], "fake-model");
    assert_eq!(
        first["body"]["parts"][0]["text"],
        block(&[DEFAULT_EDIT_PROBLEM]).trim_end()
    );
}

fn git_in(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
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

/// An edit the way `sed -i` makes one, a little after what came before (file times tick in
/// jiffies).
fn shell_edit(path: &Path, text: &str) {
    std::thread::sleep(std::time::Duration::from_millis(30));
    std::fs::write(path, text).unwrap();
}

#[test]
fn edits_made_through_a_shell_count_when_the_window_holds_a_shell_call() {
    let gate = Gate::new();
    let repo = gate.repo();
    git_in(&repo, &["init", "-q"]);
    std::fs::write(repo.join("tax.py"), "round(total)\n").unwrap();
    std::fs::write(repo.join("dirty.txt"), "committed\n").unwrap();
    git_in(&repo, &["add", "."]);
    git_in(&repo, &["commit", "-qm", "init"]);
    // Dirty before the session started: not the agent's edit.
    std::fs::write(repo.join("dirty.txt"), "the user's own work\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(repo.join("dirty.txt"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    // The session starts later than that (file times tick in jiffies).
    std::thread::sleep(std::time::Duration::from_millis(30));

    let transcript = gate.path("t.jsonl");
    append(&transcript, &lines(&[tool_row("context_query")]));
    // `sed -i` through Bash: no edit tool call.
    shell_edit(&repo.join("tax.py"), "round(line) for line in lines\n");
    append(&transcript, &lines(&[tool_row("Bash"), tool_row("Read")]));
    let run = gate.claude("shell", &transcript, false);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .starts_with("KNOWLEDGE CHECK: Modified 1 file(s) but stored nothing."),
        "{}",
        run.stderr
    );
    append(&transcript, &lines(&[tool_row("memory_store"), text_row()]));
    assert_eq!(gate.claude("shell", &transcript, false).code, 0);

    // A file already dirty, edited again through the shell: it counts.
    shell_edit(&repo.join("dirty.txt"), "the agent's heredoc\n");
    append(&transcript, &lines(&[tool_row("Bash"), text_row()]));
    let run = gate.claude("shell", &transcript, false);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("Modified 1 file(s)"), "{}", run.stderr);
    append(&transcript, &lines(&[tool_row("memory_store"), text_row()]));
    assert_eq!(gate.claude("shell", &transcript, false).code, 0);

    // A window without a shell call: the worktree is not looked at, the tool count applies.
    shell_edit(&repo.join("tax.py"), "changed by someone else\n");
    append(&transcript, &lines(&[tool_row("Read"), text_row()]));
    let run = gate.claude("shell", &transcript, false);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));

    // `shell_tools = []` turns the worktree count off.
    std::fs::write(repo.join("memloop.toml"), "[gate]\nshell_tools = []\n").unwrap();
    shell_edit(&repo.join("tax.py"), "once more\n");
    append(&transcript, &lines(&[tool_row("Bash"), text_row()]));
    let run = gate.claude("shell", &transcript, false);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
}

fn qwen_response(uuid: &str, parts: Value) -> String {
    json!({"uuid": uuid, "sessionId": "q", "type": "assistant", "message": {"role": "model", "parts": parts}})
        .to_string()
}

fn qwen_call(id: &str, name: &str) -> Value {
    json!({"functionCall": {"id": id, "name": name, "args": {}}})
}

/// Qwen Code's Stop input and chat recording, as 0.24.4 writes them (qwen_facts.md): edits by
/// `write_file`/`edit` are sent back with exit 0 and the block decision on stdout (exit 2 is a
/// failed hook to Qwen); after the store, the continued prompt's stop (`stop_hook_active`)
/// passes, and so does the next one.
#[test]
fn qwen_recording_blocks_edits_then_lets_the_stored_session_stop() {
    let gate = Gate::new();
    let recording = gate.path("q.jsonl");
    append(
        &recording,
        &lines(&[
            json!({"uuid": "u", "type": "user", "message": {"role": "user", "parts": [{"text": "go"}]}}).to_string(),
            qwen_response("a1", json!([qwen_call("c1", "mcp__memory__context_query")])),
            qwen_response("a2", json!([qwen_call("c2", "write_file")])),
            qwen_response("a3", json!([qwen_call("c3", "edit")])),
            qwen_response("a4", json!([{"text": "done"}])),
        ]),
    );
    let stop = |active: bool, last: &str| {
        gate.run(
            &["hook", "stop", "--agent", "qwen"],
            &json!({"session_id": "q", "transcript_path": recording, "cwd": gate.repo(),
                "hook_event_name": "Stop", "permission_mode": "yolo", "stop_hook_active": active,
                "last_assistant_message": last, "background_tasks": [], "crons": []}),
        )
    };
    let run = stop(false, "done");
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON answer");
    assert_eq!(
        answer,
        json!({"decision": "block", "reason": block(&[DEFAULT_EDIT_PROBLEM]).trim_end()})
    );

    append(
        &recording,
        &lines(&[
            qwen_response("a5", json!([qwen_call("c5", "mcp__memory__memory_store")])),
            qwen_response("a6", json!([{"text": "stored"}])),
        ]),
    );
    let run = stop(true, "stored");
    assert_eq!(
        (run.code, run.stderr.as_str(), run.stdout.as_str()),
        (0, "", "")
    );
    let run = stop(false, "stored");
    assert_eq!(
        (run.code, run.stderr.as_str(), run.stdout.as_str()),
        (0, "", "")
    );
}

fn gemini_message(id: &str, calls: &[(&str, &str, &str)]) -> String {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(call, name, status)| json!({"id": call, "name": name, "args": {}, "status": status}))
        .collect();
    json!({"id": id, "timestamp": "t", "type": "gemini", "content": "", "toolCalls": calls})
        .to_string()
}

/// Gemini's AfterAgent over its chat recording (shapes from Gemini CLI 0.61.0): edits without a
/// store block with exit 2 and nothing on stdout; a message appended again counts once; after a
/// rewind the lookup and store of the next turn let the stop through, though Gemini sends that
/// stop without `stop_hook_active`.
#[test]
fn gemini_reads_the_chat_recording_and_survives_a_rewind() {
    let gate = Gate::new();
    let recording = gate.path("session-2026-12-01T12-20-168df275.jsonl");
    let stop = |gate: &Gate, active: bool| {
        gate.run(
            &["hook", "stop", "--agent", "gemini"],
            &json!({"session_id": "168df275", "transcript_path": recording, "cwd": gate.repo(),
                    "hook_event_name": "AfterAgent", "prompt": "p", "prompt_response": "r",
                    "stop_hook_active": active}),
        )
    };
    append(
        &recording,
        &lines(&[
            json!({"sessionId": "168df275", "kind": "main"}).to_string(),
            json!({"$set": {"messages": [{"id": "ctx", "type": "user", "content": []}]}})
                .to_string(),
            gemini_message("g1", &[]),
            gemini_message("g1", &[("w1", "write_file", "success")]),
            gemini_message("g2", &[("r1", "replace", "success")]),
            gemini_message("g3", &[("w2", "write_file", "success")]),
        ]),
    );
    // Blocked the way Gemini CLI shows as a continuation, not as a failed hook: exit 0, the
    // decision as JSON on stdout, nothing on stderr.
    let run = stop(&gate, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON answer");
    assert_eq!(answer["decision"], "block", "{answer}");
    assert!(
        answer["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Modified 3 file(s)") && r.starts_with("KNOWLEDGE CHECK")),
        "{answer}"
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    append(
        &recording,
        &lines(&[
            json!({"id": "u2", "type": "user", "content": [{"text": "KNOWLEDGE CHECK"}]})
                .to_string(),
            json!({"$rewindTo": "u2"}).to_string(),
            gemini_message("g4", &[("q", "mcp_memory_context_query", "success")]),
            gemini_message("g5", &[("s0", "mcp_memory_memory_store", "error")]),
            gemini_message("g6", &[("s1", "memory__memory_store", "success")]),
            gemini_message("g7", &[]),
        ]),
    );
    let run = stop(&gate, false);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.trim().is_empty(), "let through: {}", run.stdout);
}

fn copilot_row(kind: &str, data: Value) -> String {
    json!({"type": kind, "data": data, "timestamp": "2026-12-01T12:14:35.000Z"}).to_string()
}

/// A Copilot session's `events.jsonl` at a stop: two file writes and a shell call, no store.
fn copilot_events(gate: &Gate, session: &str) -> PathBuf {
    let path = gate.path(&format!(
        "home/.copilot/session-state/{session}/events.jsonl"
    ));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut rows = Vec::new();
    for tool in ["create", "create", "view"] {
        rows.push(copilot_row("assistant.message", json!({"content": ""})));
        rows.push(copilot_row(
            "tool.execution_start",
            json!({"toolName": tool}),
        ));
    }
    rows.push(copilot_row("assistant.message", json!({"content": "done"})));
    rows.push(copilot_row("assistant.turn_end", json!({"turnId": "3"})));
    append(&path, &lines(&rows));
    path
}

#[test]
fn copilot_blocks_on_stdout_and_its_claude_shaped_call_for_the_same_stop_is_a_no_op() {
    let gate = Gate::new();
    let events = copilot_events(&gate, "cs1");
    // Copilot's agentStop input, then the same stop as Copilot passes it to Claude's hook.
    let own = json!({"sessionId": "cs1", "timestamp": 1796127275130_u64, "cwd": gate.repo(),
        "transcriptPath": events, "stopReason": "end_turn", "stop_hook_active": false});
    let run = gate.run(&["hook", "stop", "--agent", "copilot"], &own);
    assert_eq!(
        run.code, 0,
        "Copilot reads a block on stdout, never exit 2: {}",
        run.stderr
    );
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect(&run.stdout);
    assert_eq!(answer["decision"], "block");
    assert!(
        answer["reason"]
            .as_str()
            .unwrap()
            .starts_with("KNOWLEDGE CHECK:")
    );
    let claude_shaped = json!({"hook_event_name": "Stop", "session_id": "cs1",
        "timestamp": "2026-12-01T12:14:35.130Z", "cwd": gate.repo(), "transcript_path": events,
        "stop_reason": "end_turn", "stop_hook_active": false});
    let run = gate.run(&["hook", "stop", "--agent", "claude"], &claude_shaped);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}

#[test]
fn claudes_hook_run_by_copilot_is_judged_as_copilots() {
    let gate = Gate::new();
    let events = copilot_events(&gate, "cs2");
    let claude_shaped = json!({"hook_event_name": "Stop", "session_id": "cs2",
        "timestamp": "2026-12-01T12:14:35.130Z", "cwd": gate.repo(), "transcript_path": events,
        "stop_reason": "end_turn", "stop_hook_active": false});
    let run = gate.run(&["hook", "stop", "--agent", "claude"], &claude_shaped);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect(&run.stdout);
    assert_eq!(
        answer["decision"], "block",
        "read with Copilot's reader: {answer}"
    );
    // The retry Copilot makes after the block is let through.
    let retry = json!({"hook_event_name": "Stop", "session_id": "cs2",
        "timestamp": "2026-12-01T12:14:36.000Z", "cwd": gate.repo(), "transcript_path": events,
        "stop_hook_active": true});
    let run = gate.run(&["hook", "stop", "--agent", "claude"], &retry);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}
