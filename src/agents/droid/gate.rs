//! Factory Droid adapter: the Stop input and the session transcript.
//!
//! Stop input (stdin, Droid 0.215.0): `session_id`, `transcript_path`
//! (`~/.factory/sessions/<cwd with / as ->/<session_id>.jsonl`), `cwd`, `permission_mode`,
//! `hook_event_name`, `message_id` (the id of the assistant row that ended the turn),
//! `stop_hook_active` (true on the stop right after a block), `tool_execution_count`,
//! `elapsed_time`. Only `session_id` and `transcript_path` are required.
//!
//! Transcript: JSONL. Rows `{"type": "message", "id", "parentId", "message": {"role",
//! "content": [...]}}`; an assistant row is one model step, its `tool_use` blocks name the tool
//! (`Create`, `Edit`, `ApplyPatch`, `Execute`, `<server>___<tool>` for an MCP tool). Hook runs
//! are rows of their own (`role: user`, empty `content`, `hookEventName`), the text a Stop block
//! sends back is a user row. Other rows, rows whose content is not a list of objects, and lines
//! that do not parse are skipped: the format is internal to Droid.
//!
//! The reader waits (bounded, [`TRANSCRIPT_WAIT`]) until the row named by `message_id` was read,
//! so a turn's last rows are never judged missing because the file lagged behind the hook.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Answer, Reader, Reading, Session, read_session};

/// Droid's shell tool: what it changes in the worktree is counted at the check.
pub const SHELL_TOOLS: &[&str] = &["Execute"];

/// How long a stop waits for the transcript to show the row that ended the turn.
pub const TRANSCRIPT_WAIT: Duration = Duration::from_millis(2000);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: PathBuf,
    pub stop_hook_active: bool,
    /// The assistant row that ended the turn.
    pub message_id: Option<String>,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the Stop input has no session_id")?;
    let Some(transcript) = crate::gate::text_field(input, &["transcript_path"]) else {
        bail!(
            "the Stop input has no transcript_path; is this hook registered under Stop in .factory/settings.json?"
        );
    };
    Ok(Input {
        session_id,
        transcript: transcript.into(),
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
        message_id: crate::gate::text_field(input, &["message_id"]).filter(|id| !id.is_empty()),
    })
}

/// The name a Droid tool counts under, as `[gate]` lists name them (Claude Code's names).
pub fn canonical_tool(name: &str) -> &str {
    match name {
        "Create" => "Write",
        "ApplyPatch" => "Edit",
        name => name,
    }
}

#[derive(Deserialize)]
struct Row {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    role: Option<String>,
    #[serde(default)]
    content: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if row.kind.as_deref() != Some("message") {
        return;
    }
    let Some(message) = row.message else { return };
    if message.role.as_deref() != Some("assistant") {
        return;
    }
    if row.id.is_some() && row.id == state.last_message_id {
        // The same row read twice (a file rewritten in place) is one step.
        return;
    }
    state.session.assistant_entry();
    state.last_message_id = row.id;
    for block in message.content {
        if block.kind.as_deref() != Some("tool_use") {
            continue;
        }
        if let Some(name) = block.name {
            state
                .session
                .tool_call(tools.classify(canonical_tool(&name)));
        }
    }
}

/// What one read of the transcript found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// The turn's last row was read (or there was none to wait for).
    Up { waited: Duration },
    /// It never showed within the wait: what was there is judged.
    Behind { waited: Duration },
}

/// Reads what was appended to the transcript since the last check into `state`; with the id of
/// the row that ended the turn, goes on reading until that row was read, for at most `wait`.
pub fn collect(
    state: &mut State,
    transcript: &Path,
    tools: &ToolSets,
    last_row: Option<&str>,
    wait: Duration,
) -> anyhow::Result<Caught> {
    let mut file = state::open_log(transcript)?;
    let (mut offset, verified) = state.resume_single(transcript, &mut file)?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    let caught = loop {
        offset = jsonl::read_rows(&file, offset, b"\"assistant\"", |row: Row| {
            apply(state, row, tools)
        })
        .with_context(|| format!("cannot read {}", transcript.display()))?;
        let waited = started.elapsed();
        if last_row.is_none_or(|id| state.last_message_id.as_deref() == Some(id)) {
            break Caught::Up { waited };
        }
        if waited >= wait {
            break Caught::Behind { waited };
        }
        std::thread::sleep(pause.min(wait - waited));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let end = Cursor::after(transcript, &mut file, offset, verified.as_ref())
        .with_context(|| format!("cannot read {}", transcript.display()))?;
    state.cursors = vec![end];
    Ok(caught)
}

impl Reader for super::Droid {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        // The retry after a block is let through whatever the transcript says: no wait for it.
        let last = match input.stop_hook_active {
            true => None,
            false => input.message_id.as_deref(),
        };
        let Some((session, caught)) = read_session(
            store,
            reading,
            &input.session_id,
            &input.transcript,
            input.stop_hook_active,
            |state, transcript| collect(state, transcript, reading.tools, last, TRANSCRIPT_WAIT),
        )?
        else {
            return Ok(None);
        };
        if let Caught::Behind { waited } = caught {
            store.debug(&format!(
                "droid session {}: {} did not show the turn's last row within {} ms; judged the {} assistant entries and {} tool calls read",
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

    /// Droid reads both; exit 2 marks the hook run as failed in its session view, the JSON
    /// decision does not (hookStatus "completed").
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

    // Rows as Droid 0.215.0 wrote them (a `droid exec` run against the fake model), trimmed.
    const TRANSCRIPT: &[&str] = &[
        r#"{"type":"session_start","id":"s1","title":"write two files","owner":"unknown","version":2,"cwd":"/p"}"#,
        r#"{"type":"message","id":"h1","timestamp":"t","message":{"role":"user","content":[],"visibility":"user_only","hookEventName":"SessionStart","hookResults":[{"exitCode":0,"stdout":"{}","stderr":""}]}}"#,
        r#"{"type":"message","id":"u1","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"write two files"}],"interactionMode":"auto"}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"t","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_0","name":"Create","input":{"file_path":"/p/a.txt","content":"hello\n"}}],"modelId":"custom:Fake-0"}}"#,
        r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"t","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_0","is_error":false,"content":"{\"success\":true}"}]}}"#,
        r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"t","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"Execute","input":{"summary":"write b","command":"echo hi > b.txt","riskLevel":"low"}}]}}"#,
        r#"{"type":"message","id":"r2","parentId":"a2","timestamp":"t","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","is_error":false,"content":"Command completed successfully"}]}}"#,
        r#"{"type":"message","id":"a3","parentId":"r2","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"first"}]}}"#,
        r#"{"type":"message","id":"h2","parentId":"a3","timestamp":"t","message":{"role":"user","content":[],"visibility":"user_only","hookEventName":"Stop","hookResults":[{"exitCode":0,"stdout":"{\"decision\":\"block\",\"reason\":\"KNOWLEDGE CHECK\"}","stderr":""}]}}"#,
        r#"{"type":"message","id":"u2","parentId":"a3","timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"KNOWLEDGE CHECK"}],"interactionMode":"auto"}}"#,
        r#"{"type":"message","id":"a4","parentId":"u2","timestamp":"t","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_3","name":"memory___context_query","input":{"query":"e2e"}}]}}"#,
        r#"{"type":"message","id":"a5","parentId":"a4","timestamp":"t","message":{"role":"assistant","content":[{"type":"tool_use","id":"call_4","name":"memory___memory_store","input":{}}]}}"#,
        r#"{"type":"agent_turn_outcome","turnId":"u1","reason":"completed","resultKind":"text"}"#,
    ];

    #[test]
    fn create_edit_and_shell_calls_and_steps_are_counted() {
        let mut state = State::fresh();
        feed(&mut state, &TRANSCRIPT[..9]);
        assert_eq!(state.session.entries, 3, "three assistant rows");
        assert_eq!(state.session.tool_calls, 2);
        assert_eq!(state.session.window.edits, 1, "Create is an edit");
        assert_eq!(state.session.window.shells, 1, "Execute is the shell");
        assert_eq!(state.last_message_id.as_deref(), Some("a3"));
    }

    #[test]
    fn mcp_calls_count_by_their_tool_name() {
        let mut state = State::fresh();
        feed(&mut state, TRANSCRIPT);
        assert_eq!(state.session.window.lookups, 1);
        assert_eq!(state.session.window.stores, 1);
        assert!(!state.session.window.store_before_lookup);
    }

    #[test]
    fn apply_patch_counts_as_edit() {
        assert_eq!(canonical_tool("ApplyPatch"), "Edit");
        assert_eq!(canonical_tool("Create"), "Write");
        assert_eq!(canonical_tool("Read"), "Read");
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"ApplyPatch","input":{}},{"type":"tool_use","id":"d","name":"Edit","input":{}}]}}"#,
            ],
        );
        assert_eq!((state.session.entries, state.session.window.edits), (1, 2));
    }

    #[test]
    fn hook_rows_user_rows_and_odd_lines_are_skipped() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                "not json",
                r#"{"type":"message"}"#,
                r#"{"type":"message","id":"x","message":{"role":"user","content":[{"type":"tool_use","name":"Create"}]}}"#,
                r#"{"type":"message","id":"y","message":{"role":"assistant","content":"text"}}"#,
                r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","name":"Create"}]}}"#,
            ],
        );
        assert_eq!((state.session.entries, state.session.tool_calls), (0, 0));
    }

    #[test]
    fn input_needs_session_and_transcript() {
        let input = parse_input(&json!({"session_id": "s", "transcript_path": "/t.jsonl",
            "cwd": "/p", "hook_event_name": "Stop", "message_id": "a3", "stop_hook_active": true,
            "tool_execution_count": 0, "elapsed_time": 0}))
        .unwrap();
        assert!(input.stop_hook_active);
        assert_eq!(input.message_id.as_deref(), Some("a3"));
        let err = parse_input(&json!({"session_id": "s"})).unwrap_err();
        assert!(err.to_string().contains("transcript_path"), "{err}");
    }

    #[test]
    fn reads_continue_where_the_last_check_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, TRANSCRIPT[..9].join("\n") + "\n").unwrap();
        let mut state = State::fresh();
        let caught = collect(&mut state, &path, &tools(), Some("a3"), TRANSCRIPT_WAIT).unwrap();
        assert!(matches!(caught, Caught::Up { .. }), "{caught:?}");
        assert_eq!(state.session.tool_calls, 2);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, (TRANSCRIPT[9..].join("\n") + "\n").as_bytes())
            .unwrap();
        collect(&mut state, &path, &tools(), Some("a5"), TRANSCRIPT_WAIT).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (5, 4));
    }

    #[test]
    fn a_lagging_transcript_is_waited_for_until_the_turns_last_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, TRANSCRIPT[..6].join("\n") + "\n").unwrap();
        let late = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&late)
                .unwrap();
            std::io::Write::write_all(&mut file, (TRANSCRIPT[6..8].join("\n") + "\n").as_bytes())
                .unwrap();
        });
        let mut state = State::fresh();
        let caught = collect(&mut state, &path, &tools(), Some("a3"), TRANSCRIPT_WAIT).unwrap();
        writer.join().unwrap();
        assert!(
            matches!(caught, Caught::Up { waited } if waited >= Duration::from_millis(100)),
            "{caught:?}"
        );
        assert_eq!(state.session.entries, 3);
    }

    #[test]
    fn a_row_that_never_shows_is_waited_for_at_most_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, TRANSCRIPT[..6].join("\n") + "\n").unwrap();
        let mut state = State::fresh();
        let wait = Duration::from_millis(120);
        let caught = collect(&mut state, &path, &tools(), Some("never"), wait).unwrap();
        assert!(
            matches!(caught, Caught::Behind { waited } if waited >= wait),
            "{caught:?}"
        );
        assert_eq!(state.session.tool_calls, 2, "what was there is judged");
    }
}
