//! Copilot adapter: the `agentStop` input and the session's `events.jsonl`.
//!
//! `agentStop` input (stdin, camelCase): `sessionId`, `timestamp` (ms), `cwd`,
//! `transcriptPath` (`$COPILOT_HOME/session-state/<sessionId>/events.jsonl`), `stopReason`,
//! `stop_hook_active`. Copilot also runs Claude Code's `.claude/settings.json` Stop hooks, with
//! the same facts in snake_case (`session_id`, `transcript_path`, `timestamp` as an ISO string,
//! `stop_reason`, `hook_event_name: "Stop"`): [`recognises`] tells either from Claude Code's own
//! input by the transcript it names, so the gate judges it here, once per stop ([`stop_id`]).
//!
//! Copilot continues the agent only on stdout `{"decision": "block", "reason": ...}` (exit 2 is
//! a warning there) and stops obeying after 8 blocks in a row; the gate lets the stop after its
//! own block through (`stop_hook_active`, else the previous verdict), so it never blocks twice in
//! a row.
//!
//! `events.jsonl`: one JSON object a line, `{"type", "data", "id", "timestamp", "parentId"}`.
//! `assistant.message` is one model step (one assistant entry); `tool.execution_start` is one
//! tool call, named in `data.toolName`: MCP tools as `<server>-<tool>` (`memory-memory_store`,
//! with `mcpServerName` and `mcpToolName`), the file tools `create`, `edit`, `apply_patch` and
//! `str_replace_editor` (counted as `Edit`), the shell `bash`. Other rows and lines that do not
//! parse are skipped. Facts: xtask/src/e2e/copilot_facts.md.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Answer, Reader, Reading, Session, flag_field, text_field};

/// Copilot's shell tool: edits made through it are not tool calls of their own.
pub const SHELL_TOOLS: &[&str] = &["bash"];
/// Copilot's file tools, counted as `Edit` (the `[gate] edit_tools` default).
pub const EDIT_TOOLS: &[&str] = &[
    "create",
    "edit",
    "apply_patch",
    "str_replace_editor",
    "write",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: PathBuf,
    pub stop_hook_active: bool,
    /// When Copilot made the stop: the same in each hook it runs for that stop.
    pub stop: Option<String>,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = text_field(input, &["sessionId", "session_id"])
        .context("the agentStop input has no sessionId")?;
    let Some(transcript) = text_field(input, &["transcriptPath", "transcript_path"]) else {
        bail!(
            "the agentStop input has no transcriptPath; is this hook registered under agentStop in .github/hooks/memloop.json?"
        );
    };
    Ok(Input {
        session_id,
        transcript: transcript.into(),
        stop_hook_active: flag_field(input, "stop_hook_active"),
        stop: stop_id(input),
    })
}

/// Whether `input` is what Copilot sends a hook: camelCase fields, or a transcript that is a
/// Copilot session's `events.jsonl` (what it passes to Claude Code's hooks).
pub fn recognises(input: &Value) -> bool {
    if text_field(input, &["sessionId"]).is_some()
        && text_field(input, &["transcriptPath"]).is_some()
    {
        return true;
    }
    text_field(input, &["transcript_path"]).is_some_and(|path| is_session_log(Path::new(&path)))
}

/// `.../session-state/<id>/events.jsonl`.
fn is_session_log(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "events.jsonl")
        && path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|dir| dir == "session-state")
}

/// The stop's identity, as milliseconds since the epoch: `timestamp` is a number in the
/// `agentStop` input and an ISO-8601 string (`2026-12-01T12:14:35.130Z`) in the Claude-shaped one.
pub fn stop_id(input: &Value) -> Option<String> {
    let ms = match input.get("timestamp")? {
        Value::Number(n) => n.as_u64()?,
        Value::String(text) => iso_millis(text)?,
        _ => return None,
    };
    Some(ms.to_string())
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` as milliseconds since the Unix epoch (UTC only).
fn iso_millis(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (date.next()??, date.next()??, date.next()??);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = clock.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (clock.next()??, clock.next()??, clock.next()??);
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = ((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + millis;
    u64::try_from(ms).ok()
}

#[derive(Deserialize)]
struct Row {
    #[serde(rename = "type")]
    kind: Option<String>,
    data: Option<Data>,
    timestamp: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "toolName")]
    tool_name: Option<String>,
}

/// The name a tool call counts under, as `[gate]` lists name them.
pub fn canonical_tool(name: &str) -> &str {
    if EDIT_TOOLS.contains(&name) {
        "Edit"
    } else {
        name
    }
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    match row.kind.as_deref() {
        Some("assistant.message") => state.session.assistant_entry(),
        Some("tool.execution_start") => {
            if let Some(name) = row.data.and_then(|d| d.tool_name) {
                state
                    .session
                    .tool_call(tools.classify(canonical_tool(&name)));
            }
        }
        _ => {}
    }
}

/// How long the gate waits for Copilot to write the stop's turn to `events.jsonl`: Copilot
/// writes the file in batches, and may not have created it yet when the first stop's hook runs.
pub const CATCH_UP: Duration = Duration::from_millis(2500);

/// Whether waiting can help a log that failed to open: only when it does not exist yet and is
/// where Copilot writes a session's log (`<COPILOT_HOME>/session-state/<id>/events.jsonl`, the
/// `session-state` folder there). A FIFO, a folder, a device, a file that cannot be read, or a
/// path anywhere else will not turn into Copilot's log by waiting: the gate answers at once.
fn may_appear(events: &Path, err: &anyhow::Error) -> bool {
    let missing = err
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::NotFound);
    let session_state = events.parent().and_then(Path::parent);
    missing && is_session_log(events) && session_state.is_some_and(Path::is_dir)
}

/// Reads what was appended to the session's events since the last check into `state`. With the
/// stop's time (`stop_ms`), goes on reading until the newest row ends the turn
/// (`assistant.turn_end`) or is as new as the stop, for at most `wait`; false when it never did.
pub fn collect(
    state: &mut State,
    events: &Path,
    tools: &ToolSets,
    stop_ms: Option<u64>,
    wait: Duration,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    let nap = |pause: &mut Duration| {
        std::thread::sleep(*pause);
        *pause = (*pause * 2).min(Duration::from_millis(100));
    };
    let mut file = loop {
        match state::open_log(events) {
            Ok(file) => break file,
            Err(err)
                if stop_ms.is_some() && started.elapsed() < wait && may_appear(events, &err) =>
            {
                nap(&mut pause)
            }
            Err(err) => return Err(err),
        }
    };
    let (mut offset, verified) = state.resume_single(events, &mut file)?;
    let caught = loop {
        let mut newest: Option<(Option<String>, Option<u64>)> = None;
        offset = jsonl::read_rows(&file, offset, b"\"type\"", |row: Row| {
            newest = Some((
                row.kind.clone(),
                row.timestamp.as_deref().and_then(iso_millis),
            ));
            apply(state, row, tools)
        })
        .with_context(|| format!("cannot read {}", events.display()))?;
        let done = match (stop_ms, &newest) {
            (None, _) => true,
            (Some(stop), Some((kind, at))) => {
                kind.as_deref() == Some("assistant.turn_end") || at.is_some_and(|at| at >= stop)
            }
            (Some(_), None) => false,
        };
        if done {
            break true;
        }
        if started.elapsed() >= wait {
            break false;
        }
        nap(&mut pause);
    };
    let end = Cursor::after(events, &mut file, offset, verified.as_ref())
        .with_context(|| format!("cannot read {}", events.display()))?;
    state.cursors = vec![end];
    Ok(caught)
}

impl Reader for super::Copilot {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        let (mut state, slot) = store.load(reading.agent, &input.session_id)?;
        // The stop right after memloop's own block goes through, whether or not Copilot said
        // `stop_hook_active`: it never sees a second block in a row.
        let active = input.stop_hook_active || state.blocked_last;
        let stop_ms = input.stop.as_deref().and_then(|ms| ms.parse().ok());
        let read = std::path::absolute(&input.transcript)
            .with_context(|| format!("cannot resolve {}", input.transcript.display()))
            .and_then(|events| collect(&mut state, &events, reading.tools, stop_ms, CATCH_UP));
        match read {
            Err(_) if active => return Ok(None),
            Ok(false) => store.debug(&format!(
                "copilot session {}: {} did not reach the stop within {} ms; judged what it held",
                input.session_id,
                input.transcript.display(),
                CATCH_UP.as_millis()
            )),
            other => {
                other?;
            }
        }
        Ok(Some(Session {
            slot,
            state,
            active,
        }))
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        SHELL_TOOLS
    }

    fn recognises(&self, input: &Value) -> bool {
        recognises(input)
    }

    fn stop_id(&self, input: &Value) -> Option<String> {
        let input = parse_input(input).ok()?;
        Some(format!("{}\0{}", input.session_id, input.stop?))
    }

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

    // Rows as the pinned Copilot 1.0.102 wrote them (copilot_facts.md), trimmed.
    const EVENTS: &[&str] = &[
        r#"{"type":"session.start","data":{"sessionId":"s","copilotVersion":"1.0.102"},"id":"a"}"#,
        r#"{"type":"user.message","data":{"content":"write a file"},"id":"b"}"#,
        r#"{"type":"assistant.message","data":{"content":"","toolRequests":[{"toolCallId":"call_0","name":"create","arguments":{}}]},"id":"c"}"#,
        r#"{"type":"tool.execution_start","data":{"toolCallId":"call_0","toolName":"create","arguments":{"path":"/r/a.txt"}},"id":"d"}"#,
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"call_0","success":true},"id":"e"}"#,
        r#"{"type":"assistant.message","data":{"content":"","toolRequests":[]},"id":"f"}"#,
        r#"{"type":"tool.execution_start","data":{"toolCallId":"call_1","toolName":"memory-memory_store","mcpServerName":"memory","mcpToolName":"memory_store"},"id":"g"}"#,
        r#"{"type":"tool.execution_start","data":{"toolCallId":"call_2","toolName":"bash","arguments":{"command":"echo x > b"}},"id":"h"}"#,
        r#"{"type":"assistant.message","data":{"content":"done","toolRequests":[]},"id":"i"}"#,
    ];

    #[test]
    fn steps_edits_stores_and_shell_calls_are_counted() {
        let mut state = State::fresh();
        feed(&mut state, EVENTS);
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 3);
        assert_eq!(state.session.window.edits, 1, "create is an edit");
        assert_eq!(
            state.session.window.stores, 1,
            "memory-memory_store is a store"
        );
        assert_eq!(state.session.window.shells, 1, "bash is the shell");
    }

    #[test]
    fn every_file_tool_counts_as_an_edit() {
        for tool in EDIT_TOOLS {
            assert_eq!(canonical_tool(tool), "Edit");
        }
        assert_eq!(canonical_tool("view"), "view");
    }

    #[test]
    fn odd_rows_are_skipped() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                "not json",
                r#"{"type":"tool.execution_start"}"#,
                r#"{"type":"tool.execution_start","data":"text"}"#,
                r#"{"type":"tool.execution_start","data":{"toolName":7}}"#,
            ],
        );
        assert_eq!(state.session.tool_calls, 0);
    }

    #[test]
    fn both_payload_shapes_parse_to_the_same_stop() {
        // The pinned Copilot's two inputs for one stop (copilot_facts.md, "Stop hooks").
        let own = json!({"sessionId":"03b4","timestamp":1796127275130_u64,"cwd":"/r",
            "transcriptPath":"/h/.copilot/session-state/03b4/events.jsonl","stopReason":"end_turn",
            "stop_hook_active":false});
        let claude_shaped = json!({"hook_event_name":"Stop","session_id":"03b4",
            "timestamp":"2026-12-01T12:14:35.130Z","cwd":"/r",
            "transcript_path":"/h/.copilot/session-state/03b4/events.jsonl","stop_reason":"end_turn",
            "stop_hook_active":false});
        assert_eq!(
            parse_input(&own).unwrap(),
            parse_input(&claude_shaped).unwrap()
        );
        assert_eq!(stop_id(&own).as_deref(), Some("1796127275130"));
        assert!(recognises(&own) && recognises(&claude_shaped));
    }

    #[test]
    fn claude_codes_own_input_is_not_taken_for_copilots() {
        let claude = json!({"session_id":"u","transcript_path":"/h/.claude/projects/-r/u.jsonl",
            "cwd":"/r","hook_event_name":"Stop","stop_hook_active":false});
        assert!(!recognises(&claude));
        assert!(!recognises(
            &json!({"session_id":"u","transcript_path":"/x/events.jsonl"})
        ));
    }

    #[test]
    fn iso_timestamps_read_as_epoch_milliseconds() {
        assert_eq!(iso_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(iso_millis("2000-03-01T00:00:00.5Z"), Some(951_868_800_500));
        assert_eq!(
            iso_millis("2026-12-01T12:14:35.130Z"),
            Some(1_796_127_275_130)
        );
        assert_eq!(iso_millis("2026-12-01T12:14:35+02:00"), None);
        assert_eq!(iso_millis("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn reads_continue_where_the_last_check_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, EVENTS[..5].join("\n") + "\n").unwrap();
        let tools = ToolSets::new(&GateConfig::default());
        let mut state = State::fresh();
        assert!(collect(&mut state, &path, &tools, None, Duration::ZERO).unwrap());
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 1));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, (EVENTS[5..].join("\n") + "\n").as_bytes()).unwrap();
        assert!(collect(&mut state, &path, &tools, None, Duration::ZERO).unwrap());
        assert_eq!((state.session.entries, state.session.tool_calls), (3, 3));
    }

    #[test]
    fn the_read_waits_for_events_copilot_has_not_written_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session-state/s1/events.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let tools = ToolSets::new(&GateConfig::default());
        let late = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let rows = [
                EVENTS[2],
                EVENTS[3],
                r#"{"type":"assistant.turn_end","data":{}}"#,
            ];
            std::fs::write(&late, rows.join("\n") + "\n").unwrap();
        });
        let mut state = State::fresh();
        let caught = collect(&mut state, &path, &tools, Some(1), Duration::from_secs(5)).unwrap();
        writer.join().unwrap();
        assert!(caught, "the file appeared and ended the turn");
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 1));
        // Mid-turn rows only: the read gives up after the wait and says so.
        let mut state = State::fresh();
        std::fs::write(&path, EVENTS[2].to_owned() + "\n").unwrap();
        let far = Some(u64::MAX);
        assert!(!collect(&mut state, &path, &tools, far, Duration::from_millis(30)).unwrap());
        let missing = dir.path().join("none.jsonl");
        assert!(
            collect(&mut State::fresh(), &missing, &tools, None, Duration::ZERO).is_err(),
            "without a stop time a missing file is an error at once"
        );
    }

    /// What waiting cannot turn into Copilot's log is answered at once, stop time or not: a
    /// folder, a FIFO, a device, a missing file outside Copilot's session state, a session
    /// folder that is not there.
    #[test]
    fn the_read_answers_at_once_when_waiting_cannot_help() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("session-state");
        std::fs::create_dir_all(state_dir.join("folder/events.jsonl")).unwrap();
        std::fs::create_dir_all(state_dir.join("fifo")).unwrap();
        let fifo = state_dir.join("fifo/events.jsonl");
        #[cfg(unix)]
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut cases = vec![
            state_dir.join("folder/events.jsonl"),
            dir.path().join("elsewhere/events.jsonl"),
            dir.path().join("session-state-not/s/events.jsonl"),
            dir.path().join("no/session-state/s/events.jsonl"),
            state_dir.join("s/other.jsonl"),
        ];
        if cfg!(unix) {
            cases.push(fifo);
            cases.push(PathBuf::from("/dev/null"));
        }
        let tools = ToolSets::new(&GateConfig::default());
        for path in cases {
            let started = Instant::now();
            let read = collect(&mut State::fresh(), &path, &tools, Some(1), CATCH_UP);
            assert!(read.is_err(), "{}", path.display());
            assert!(
                started.elapsed() < CATCH_UP / 2,
                "{} waited {:?}",
                path.display(),
                started.elapsed()
            );
        }
    }
}
