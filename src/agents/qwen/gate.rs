//! Qwen Code adapter: the Stop input and the session's chat recording.
//!
//! Stop input (stdin, 0.24.4): `session_id`, `transcript_path`
//! (`~/.qwen/projects/<cwd with / as ->/chats/<session_id>.jsonl`), `cwd`, `hook_event_name`,
//! `permission_mode`, `prompt_id`, `stop_hook_active`, `last_assistant_message` (`[no response
//! text]` when the turn ended without text), `background_tasks`, `crons`, `context_usage`...;
//! only `session_id` and `transcript_path` are required. Qwen sets `stop_hook_active` on every
//! stop of a prompt it continued after a block (and caps blocks in a row itself).
//!
//! Recording: JSONL, one row per line, `{"uuid", "parentUuid", "sessionId", "type", ...}`. A row
//! of type `assistant` is one model response: `message.parts[]` holds `{"text"}` and
//! `{"functionCall": {"id", "name", "args"}}` parts (Gemini's content shape). Tools are named
//! `write_file`, `edit`, `notebook_edit` (edits, counted as `Write`, `Edit`, `NotebookEdit`),
//! `run_shell_command` (the shell) and `mcp__<server>__<tool>`. Rows of other types (`user`,
//! `tool_result`, `system` telemetry) and lines that do not parse are skipped. This is not
//! Gemini CLI's recording (`toolCalls[]` on `gemini` rows, `$set`/`$rewindTo` records): Qwen
//! 0.24.4 writes no rewind records, only appends.
//!
//! The row of the turn's last response is written before the Stop hook runs in 0.24.4; the
//! reader still waits (bounded, as for Claude Code) until the newest response holds
//! `last_assistant_message`, so a slower disk cannot hide the last calls.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::agents::claude::gate::TextKey;
use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Answer, Reader, Reading, Session, read_session};

/// Qwen Code's shell tool.
pub const SHELL_TOOLS: &[&str] = &["run_shell_command"];
/// What 0.24.4 sends as `last_assistant_message` for a turn that ended without text.
const NO_TEXT: &str = "[no response text]";
/// How long a stop waits for the recording to show the turn's last response.
pub const TRANSCRIPT_WAIT: Duration = Duration::from_millis(2000);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: PathBuf,
    pub stop_hook_active: bool,
    pub last_message: Option<String>,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the Stop input has no session_id")?;
    let Some(transcript) =
        crate::gate::text_field(input, &["transcript_path"]).filter(|path| !path.is_empty())
    else {
        bail!(
            "the Stop input has no transcript_path; is chat recording off (--chat-recording false or general.chatRecording false)? The gate reads Qwen's tool calls from it"
        );
    };
    Ok(Input {
        session_id,
        transcript: transcript.into(),
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
        last_message: crate::gate::text_field(input, &["last_assistant_message"])
            .filter(|text| !text.trim().is_empty() && text != NO_TEXT),
    })
}

#[derive(Deserialize)]
struct Row {
    uuid: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    parts: Vec<Value>,
}

/// The name a tool call counts under, as `[gate]` lists name them.
pub fn canonical_tool(name: &str) -> &str {
    match name {
        "write_file" => "Write",
        "edit" => "Edit",
        "notebook_edit" => "NotebookEdit",
        other => other,
    }
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if row.kind.as_deref() != Some("assistant") {
        return;
    }
    let Some(message) = row.message else { return };
    // A response written twice (same uuid) is one entry.
    if row.uuid.is_some() && row.uuid == state.last_message_id {
        return;
    }
    state.session.assistant_entry();
    state.last_message_id = row.uuid;
    state.last_message_tools.clear();
    state.tail_text = None;
    for part in &message.parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            // Qwen marks reasoning parts with `thought`; they are not the reply's text.
            if part.get("thought").and_then(Value::as_bool) != Some(true) {
                state.tail_text = Some(TextKey::of(text).0);
            }
            continue;
        }
        let Some(call) = part.get("functionCall") else {
            continue;
        };
        let Some(name) = call.get("name").and_then(Value::as_str) else {
            continue;
        };
        if let Some(id) = call.get("id").and_then(Value::as_str) {
            if state.last_message_tools.iter().any(|seen| seen == id) {
                continue;
            }
            state.last_message_tools.push(id.to_owned());
        }
        state.tail_text = None;
        state
            .session
            .tool_call(tools.classify(canonical_tool(name)));
    }
}

/// Reads what was appended to the recording since the last check into `state`; with the turn's
/// last message, goes on reading until the newest response holds it, for at most `wait`.
/// Returns how long it waited, and whether the message showed.
pub fn collect(
    state: &mut State,
    recording: &Path,
    tools: &ToolSets,
    last_message: Option<&str>,
    wait: Duration,
) -> anyhow::Result<(Duration, bool)> {
    let mut file = state::open_log(recording)?;
    let (mut offset, verified) = state.resume_single(recording, &mut file)?;
    let want = last_message.map(TextKey::of);
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    let caught = loop {
        offset = jsonl::read_rows(&file, offset, b"\"assistant\"", |row: Row| {
            apply(state, row, tools)
        })
        .with_context(|| format!("cannot read {}", recording.display()))?;
        if want.is_none_or(|want| state.tail_text == Some(want.0)) {
            break true;
        }
        let waited = started.elapsed();
        if waited >= wait {
            break false;
        }
        std::thread::sleep(pause.min(wait - waited));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let end = Cursor::after(recording, &mut file, offset, verified.as_ref())
        .with_context(|| format!("cannot read {}", recording.display()))?;
    state.cursors = vec![end];
    Ok((started.elapsed(), caught))
}

impl Reader for super::Qwen {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        let last = match input.stop_hook_active {
            true => None,
            false => input.last_message.as_deref(),
        };
        let Some((session, (waited, caught_up))) = read_session(
            store,
            reading,
            &input.session_id,
            &input.transcript,
            input.stop_hook_active,
            |state, recording| collect(state, recording, reading.tools, last, TRANSCRIPT_WAIT),
        )?
        else {
            return Ok(None);
        };
        if !caught_up {
            store.debug(&format!(
                "qwen session {}: {} did not show the turn's last response within {} ms; \
                 judged the {} assistant entries and {} tool calls read",
                input.session_id,
                input.transcript.display(),
                waited.as_millis(),
                session.state.session.entries,
                session.state.session.tool_calls
            ));
        }
        Ok(Some(session))
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        SHELL_TOOLS
    }

    /// Qwen Code 0.24.4 sends the agent back on exit 2 and on `{"decision": "block"}` with exit
    /// 0 alike, and shows both the same way ("Ran 1 stop hooks / Stop hook error: <reason>").
    /// But exit 2 is a failed hook to its runner (`success: false`, "Hook(s) [...] failed for
    /// event Stop" in the debug log and the hook telemetry); the JSON decision is a hook that
    /// ran and blocked (hookRunner.ts, hookEventHandler.ts).
    fn answer(&self) -> Answer {
        Answer::StdoutDecision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GateConfig;
    use serde_json::json;

    fn tools() -> ToolSets {
        ToolSets::new(&GateConfig::default()).shell_defaults(SHELL_TOOLS)
    }

    fn feed(state: &mut State, lines: &[&str]) {
        for line in lines {
            if let Ok(row) = serde_json::from_str::<Row>(line) {
                apply(state, row, &tools());
            }
        }
    }

    // Rows as the pinned Qwen Code 0.24.4 wrote them (qwen_facts.md, "Chat recording"), trimmed.
    const RECORDING: &[&str] = &[
        r#"{"uuid":"u1","parentUuid":null,"sessionId":"s","type":"user","message":{"role":"user","parts":[{"text":"write a note"}]}}"#,
        r#"{"uuid":"u2","type":"system","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.tool_call","function_name":"write_file"}}}"#,
        r#"{"uuid":"a1","type":"assistant","model":"m","message":{"role":"model","parts":[{"functionCall":{"id":"call_1","name":"write_file","args":{"file_path":"/r/n.txt","content":"hi"}}}]}}"#,
        r#"{"uuid":"t1","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"call_1","name":"write_file","response":{"output":"ok"}}}]}}"#,
        r#"{"uuid":"a2","type":"assistant","message":{"role":"model","parts":[{"functionCall":{"id":"call_2","name":"run_shell_command","args":{"command":"echo x > y"}}},{"functionCall":{"id":"call_3","name":"edit","args":{}}}]}}"#,
        r#"{"uuid":"a3","type":"assistant","message":{"role":"model","parts":[{"text":"done"}]}}"#,
    ];

    #[test]
    fn responses_edits_and_shell_calls_are_counted() {
        let mut state = State::fresh();
        feed(&mut state, RECORDING);
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 3);
        assert_eq!(state.session.window.edits, 2, "write_file and edit");
        assert_eq!(state.session.window.shells, 1, "run_shell_command");
        assert_eq!(state.tail_text, Some(TextKey::of("done").0));
    }

    #[test]
    fn mcp_calls_count_as_store_and_lookup() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"uuid":"a","type":"assistant","message":{"parts":[{"functionCall":{"id":"c1","name":"mcp__memory__context_query","args":{}}},{"functionCall":{"id":"c2","name":"mcp__memory__memory_store","args":{}}}]}}"#,
            ],
        );
        assert_eq!(state.session.entries, 1);
        assert_eq!(state.session.window.lookups, 1);
        assert_eq!(state.session.window.stores, 1);
    }

    #[test]
    fn a_row_written_twice_and_odd_rows_count_once_or_not_at_all() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                RECORDING[2],
                RECORDING[2],
                "not json",
                r#"{"type":"assistant"}"#,
                r#"{"type":"assistant","message":{"parts":"text"}}"#,
                r#"{"uuid":"x","type":"assistant","message":{"parts":[{"functionCall":{"args":{}}}, 7, {"text":"why","thought":true}]}}"#,
            ],
        );
        assert_eq!(state.session.tool_calls, 1);
        assert_eq!(state.session.entries, 2);
        assert_eq!(state.tail_text, None, "a thought is not the reply");
    }

    #[test]
    fn input_needs_session_and_recording() {
        let input = parse_input(&json!({"session_id": "s", "transcript_path": "/t.jsonl",
            "permission_mode": "yolo", "stop_hook_active": false,
            "last_assistant_message": "[no response text]"}))
        .unwrap();
        assert_eq!(input.last_message, None, "nothing to wait for");
        let err = parse_input(&json!({"session_id": "s", "transcript_path": ""})).unwrap_err();
        assert!(err.to_string().contains("chat recording"), "{err}");
    }

    #[test]
    fn reads_continue_where_the_last_check_ended_and_wait_for_the_last_response() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, RECORDING[..3].join("\n") + "\n").unwrap();
        let mut state = State::fresh();
        let (_, caught) = collect(&mut state, &path, &tools(), None, Duration::ZERO).unwrap();
        assert!(caught);
        assert_eq!(state.session.tool_calls, 1);
        let rest = RECORDING[3..].join("\n") + "\n";
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                std::io::Write::write_all(&mut file, rest.as_bytes()).unwrap();
            })
        };
        let (_, caught) = collect(
            &mut state,
            &path,
            &tools(),
            Some("done"),
            Duration::from_secs(5),
        )
        .unwrap();
        writer.join().unwrap();
        assert!(caught, "the late rows were waited for");
        assert_eq!((state.session.entries, state.session.tool_calls), (3, 3));
    }
}
