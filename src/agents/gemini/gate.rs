//! Gemini adapter: the `AfterAgent` input and the session's chat recording.
//!
//! AfterAgent input (stdin, 0.61.0): `session_id`, `transcript_path`
//! (`~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`), `cwd`, `hook_event_name`
//! (`AfterAgent`), `timestamp`, `prompt`, `prompt_response`, `stop_hook_active` (true on the turn
//! a block sent the agent back into). The gate answers with exit 0 and
//! `{"decision": "block", "reason": ...}` on stdout (Gemini reads stdout as JSON only; an exit
//! 2 also sends it back, but shown as a failed hook); the next AfterAgent carries
//! `stop_hook_active` and is let through.
//!
//! Chat recording (JSONL, `chatRecordingService.ts`): a metadata line, then message records
//! `{"id", "type": "user"|"gemini"|..., "toolCalls": [{"id", "name", "args", "status"}]}`.
//! Gemini appends a message again each time it changes (first without its tool calls, then with
//! them): a record whose `id` is the message read last is the same message, and its tool calls
//! count once each, by their `id`. `{"$set": {"messages": [...]}}` restates the whole history
//! (at the start of a session, after a compression or a resume): nothing in it is new.
//! `{"$rewindTo": id}` drops that message and every later one from the chat: the calls read
//! before stay counted (files written and notes stored outlive a rewound chat), and as the
//! messages after a rewind have new ids, nothing counts twice. Edit tools are `replace` (counts as
//! `Edit`) and `write_file` (as `Write`); the shell is `run_shell_command`.
//! A call whose `status` is `error` or `cancelled` did nothing and is not counted. MCP tools are
//! `mcp_<server>_<tool>` from 0.34 on, `<server>__<tool>` before; the store and lookup names
//! match both, as `[gate]` matches parts of names.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Answer, Reader, Reading, Session, read_session};

/// Gemini's shell tool: edits made through it are not tool calls of their own (the gate's
/// worktree check counts them).
pub const SHELL_TOOLS: &[&str] = &["run_shell_command"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: std::path::PathBuf,
    pub stop_hook_active: bool,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the AfterAgent input has no session_id")?;
    let Some(transcript) = crate::gate::text_field(input, &["transcript_path"]) else {
        bail!(
            "the AfterAgent input has no transcript_path; is this hook registered under AfterAgent in .gemini/settings.json?"
        );
    };
    Ok(Input {
        session_id,
        transcript: transcript.into(),
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
    })
}

#[derive(Deserialize)]
struct Row {
    id: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "toolCalls", default)]
    tool_calls: Vec<ToolCall>,
    #[serde(rename = "$set")]
    set: Option<SetRecord>,
    #[serde(rename = "$rewindTo")]
    rewind_to: Option<String>,
}

#[derive(Deserialize)]
struct SetRecord {
    messages: Option<Vec<Restated>>,
}

#[derive(Deserialize)]
struct Restated {
    id: Option<String>,
    #[serde(rename = "toolCalls", default)]
    tool_calls: Vec<ToolCall>,
}

#[derive(Deserialize)]
struct ToolCall {
    id: Option<String>,
    name: Option<String>,
    status: Option<String>,
}

/// A call that failed or was cancelled did nothing (a store refused for its arguments stored
/// nothing): it is not counted, and not marked as read, should it be recorded again.
fn did_nothing(call: &ToolCall) -> bool {
    matches!(call.status.as_deref(), Some("error" | "cancelled"))
}

/// The name a tool call counts under, as `[gate]` lists name them.
pub fn canonical_tool(name: &str) -> &str {
    match name {
        "replace" => "Edit",
        "write_file" => "Write",
        other => other,
    }
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if let Some(set) = row.set {
        if let Some(messages) = set.messages {
            // Known history: the last message and its calls are taken as read.
            let last = messages.into_iter().rev().find(|m| m.id.is_some());
            state.last_message_tools = last
                .as_ref()
                .map(|m| m.tool_calls.iter().filter_map(|c| c.id.clone()).collect())
                .unwrap_or_default();
            state.last_message_id = last.and_then(|m| m.id);
        }
        return;
    }
    if row.rewind_to.is_some() {
        state.last_message_id = None;
        state.last_message_tools.clear();
        return;
    }
    let Some(id) = row.id else { return };
    if row.kind.as_deref() != Some("gemini") {
        if state.last_message_id.as_deref() != Some(id.as_str()) {
            state.last_message_id = Some(id);
            state.last_message_tools.clear();
        }
        return;
    }
    if state.last_message_id.as_deref() != Some(id.as_str()) {
        state.session.assistant_entry();
        state.last_message_id = Some(id);
        state.last_message_tools.clear();
    }
    for call in row.tool_calls {
        if did_nothing(&call) {
            continue;
        }
        let Some(name) = call.name else { continue };
        let key = call.id.unwrap_or_else(|| name.clone());
        if state.last_message_tools.contains(&key) {
            continue;
        }
        state.last_message_tools.push(key);
        state
            .session
            .tool_call(tools.classify(canonical_tool(&name)));
    }
}

/// Reads what was appended to the chat recording since the last check into `state`.
pub fn collect(state: &mut State, recording: &Path, tools: &ToolSets) -> anyhow::Result<()> {
    let mut file = state::open_log(recording)?;
    let (offset, verified) = state.resume_single(recording, &mut file)?;
    let end = jsonl::read_rows(&file, offset, b"\"", |row: Row| apply(state, row, tools))
        .and_then(|end| Cursor::after(recording, &mut file, end, verified.as_ref()))
        .with_context(|| format!("cannot read {}", recording.display()))?;
    state.cursors = vec![end];
    Ok(())
}

impl Reader for super::Gemini {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        let session = read_session(
            store,
            reading,
            &input.session_id,
            &input.transcript,
            input.stop_hook_active,
            |state, recording| collect(state, recording, reading.tools),
        )?;
        Ok(session.map(|(session, ())| session))
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        SHELL_TOOLS
    }

    /// Gemini CLI (0.61.0, `hookRunner.ts`, `client.ts`) continues the turn on a `block` or
    /// `deny` decision either way, but a hook that exits non-zero is a failed hook to it: it
    /// shows "Hook(s) [memloop] failed for event AfterAgent". `{"decision": "block", "reason"}`
    /// on stdout with exit 0 is the answer it presents as a normal continuation.
    fn answer(&self) -> Answer {
        Answer::StdoutDecision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GateConfig;
    use serde_json::json;

    fn feed(state: &mut State, lines: &[&str]) {
        let tools = ToolSets::new(&GateConfig::default()).shell_defaults(SHELL_TOOLS);
        for line in lines {
            if let Ok(row) = serde_json::from_str::<Row>(line) {
                apply(state, row, &tools);
            }
        }
    }

    // Records as the pinned Gemini CLI 0.61.0 wrote them (gemini_facts.md), trimmed: the model
    // message is appended twice, first without its tool call.
    const RECORDING: &[&str] = &[
        r#"{"sessionId":"s","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}"#,
        r#"{"$set":{"messages":[{"id":"ctx","timestamp":"t","type":"user","content":[{"text":"<session_context>"}]}]}}"#,
        r#"{"id":"u1","timestamp":"t","type":"user","content":[{"text":"FAKE_STEP_EDIT please"}]}"#,
        r#"{"$set":{"lastUpdated":"t"}}"#,
        r#"{"id":"g1","timestamp":"t","type":"gemini","content":"","thoughts":[],"model":"m"}"#,
        r#"{"$set":{"lastUpdated":"t"}}"#,
        r#"{"id":"g1","timestamp":"t","type":"gemini","content":"","thoughts":[],"model":"m","toolCalls":[{"id":"write_file__write_file_1_0","name":"write_file","args":{"file_path":"edited.txt","content":"hi\n"},"status":"success"}]}"#,
        r#"{"id":"u2","timestamp":"t","type":"user","content":[{"functionResponse":{"id":"write_file__write_file_1_0","name":"write_file","response":{}}}]}"#,
        r#"{"id":"g2","timestamp":"t","type":"gemini","content":"done step 3","thoughts":[],"model":"m"}"#,
    ];

    #[test]
    fn a_message_appended_again_counts_once() {
        let mut state = State::fresh();
        feed(&mut state, RECORDING);
        assert_eq!(state.session.entries, 2);
        assert_eq!(state.session.tool_calls, 1);
        assert_eq!(state.session.window.edits, 1, "write_file is an edit");
    }

    #[test]
    fn shell_replace_and_both_mcp_spellings_are_classified() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"id":"g","type":"gemini","toolCalls":[{"id":"a","name":"replace"},{"id":"b","name":"run_shell_command"}]}"#,
                r#"{"id":"h","type":"gemini","toolCalls":[{"id":"c","name":"mcp_memory_memory_store"},{"id":"d","name":"memory__context_query"}]}"#,
                r#"{"id":"i","type":"gemini","toolCalls":[{"id":"e","name":"memory__memory_store"},{"id":"f","name":"mcp_memory_context_query"}]}"#,
            ],
        );
        let window = &state.session.window;
        assert_eq!(
            (window.edits, window.shells, window.stores, window.lookups),
            (1, 1, 2, 2)
        );
        assert_eq!(state.session.entries, 3);
    }

    #[test]
    fn a_rewind_neither_crashes_nor_counts_twice() {
        let mut state = State::fresh();
        feed(&mut state, RECORDING);
        feed(
            &mut state,
            &[
                r#"{"$rewindTo":"u2"}"#,
                r#"{"$rewindTo":"no-such-id"}"#,
                r#"{"$rewindTo":42}"#,
                r#"{"id":"u3","type":"user","content":[{"text":"again"}]}"#,
                r#"{"id":"g3","type":"gemini","toolCalls":[{"id":"x","name":"mcp_memory_memory_store"}]}"#,
            ],
        );
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 2);
        assert_eq!(state.session.window.stores, 1);
    }

    #[test]
    fn restated_history_is_not_new() {
        let mut state = State::fresh();
        feed(&mut state, RECORDING);
        let before = state.session.clone();
        feed(
            &mut state,
            &[
                r#"{"$set":{"messages":[{"id":"u1","type":"user"},{"id":"g1","type":"gemini","toolCalls":[{"id":"write_file__write_file_1_0","name":"write_file"}]},{"id":"g2","type":"gemini"}]}}"#,
                r#"{"id":"g2","type":"gemini","content":"done step 3"}"#,
            ],
        );
        assert_eq!(state.session, before);
    }

    #[test]
    fn a_failed_store_stores_nothing() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"id":"g","type":"gemini","toolCalls":[{"id":"s","name":"mcp_memory_memory_store","status":"error"},{"id":"w","name":"write_file","status":"cancelled"}]}"#,
                r#"{"id":"g","type":"gemini","toolCalls":[{"id":"s","name":"mcp_memory_memory_store","status":"success"}]}"#,
            ],
        );
        assert_eq!(state.session.tool_calls, 1);
        assert_eq!(
            (state.session.window.stores, state.session.window.edits),
            (1, 0)
        );
    }

    #[test]
    fn odd_rows_are_skipped() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                "not json",
                r#"{"type":"gemini"}"#,
                r#"{"id":"g","type":"gemini","toolCalls":[{"id":"a"}]}"#,
                r#"{"$set":{"messages":"text"}}"#,
                r#"[1,2]"#,
            ],
        );
        assert_eq!(state.session.tool_calls, 0);
    }

    #[test]
    fn input_needs_session_and_recording() {
        let input = parse_input(&json!({"session_id": "s", "transcript_path": "/t.jsonl",
            "hook_event_name": "AfterAgent", "stop_hook_active": true}))
        .unwrap();
        assert!(input.stop_hook_active);
        assert!(
            parse_input(&json!({"session_id": "s"}))
                .unwrap_err()
                .to_string()
                .contains("transcript_path")
        );
    }

    #[test]
    fn reads_continue_where_the_last_check_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, RECORDING[..5].join("\n") + "\n").unwrap();
        let tools = ToolSets::new(&GateConfig::default());
        let mut state = State::fresh();
        collect(&mut state, &path, &tools).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 0));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, (RECORDING[5..].join("\n") + "\n").as_bytes())
            .unwrap();
        collect(&mut state, &path, &tools).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (2, 1));
    }
}
