//! Kimi Code adapter: the Stop input and Kimi's own session log.
//!
//! Kimi's Stop input (`session_id`, `cwd`, `stop_hook_active`) has no transcript, and
//! PostToolUse hooks are killed when the tool step ends, so a ledger fed by them loses calls.
//! The calls are read instead from `$KIMI_CODE_HOME/sessions/*/<session_id>/agents/*/wire.jsonl`
//! (`~/.kimi-code` by default), one log per agent of the session, each read incrementally.
//! Rows of type `context.append_loop_event` carry `event.type`: `step.begin` opens an assistant
//! step (an entry), `tool.call` names a tool in `event.name`. Everything else is skipped. A
//! session whose log has tool calls but no step markers (a Kimi version that renamed them)
//! counts each tool call as an entry, and `doctor --live` warns that the log format moved.
//!
//! Kimi sends `stop_hook_active: false` even right after a block and continues only once per
//! turn, so the gate keeps its own guard: the stop right after a block is allowed.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor, Resume};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Reader, Reading, Session};

/// Kimi Code 2.x's shell tool, and legacy kimi-cli's. What it changes in the worktree is counted at the check
/// (unless `[gate] shell_tools` names others).
pub const SHELL_TOOLS: &[&str] = &["Bash", "Shell"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub stop_hook_active: bool,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the Stop input has no session_id")?;
    Ok(Input {
        session_id,
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
    })
}

/// Kimi Code 2.x names tools like Claude Code; legacy kimi-cli used its own names. MCP tools
/// (`mcp__<server>__<tool>` in 2.x, the raw tool name in legacy) pass through: store and lookup
/// names are matched by substring.
pub fn canonical_tool(name: &str) -> &str {
    match name {
        "WriteFile" => "Write",
        "StrReplaceFile" => "Edit",
        other => other,
    }
}

/// `$KIMI_CODE_HOME`, else `~/.kimi-code`.
pub fn home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("KIMI_CODE_HOME").filter(|home| !home.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .context("neither KIMI_CODE_HOME nor HOME is set; cannot find Kimi's session logs")?;
    Ok(PathBuf::from(home).join(".kimi-code"))
}

/// A session id is used as one path component below `sessions/*/`, so it must be a plain name.
fn plain_name(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Every agent log of the session, sorted, main agent included.
pub fn logs(home: &Path, session_id: &str) -> anyhow::Result<Vec<PathBuf>> {
    if !plain_name(session_id) {
        bail!("session_id {session_id:?} is not a plain name; refusing to use it in a path");
    }
    let sessions = home.join("sessions");
    let workspaces = std::fs::read_dir(&sessions).with_context(|| {
        format!(
            "cannot read {}; set KIMI_CODE_HOME to the directory Kimi Code uses",
            sessions.display()
        )
    })?;
    let mut logs = Vec::new();
    for workspace in workspaces.flatten() {
        let agents = workspace.path().join(session_id).join("agents");
        let Ok(agents) = std::fs::read_dir(&agents) else {
            continue;
        };
        for agent in agents.flatten() {
            let log = agent.path().join("wire.jsonl");
            if log.is_file() {
                logs.push(log);
            }
        }
    }
    logs.sort();
    if logs.is_empty() {
        bail!(
            "no session log for {session_id} under {}/*/{session_id}/agents/*/wire.jsonl",
            sessions.display()
        );
    }
    Ok(logs)
}

#[derive(Deserialize)]
struct Row {
    #[serde(rename = "type")]
    kind: Option<String>,
    event: Option<Event>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
}

/// Reads what every agent log of the session gained since the last check into `state`.
pub fn collect(state: &mut State, logs: &[PathBuf], tools: &ToolSets) -> anyhow::Result<()> {
    let mut files = Vec::with_capacity(logs.len());
    let mut restart = state
        .cursors
        .iter()
        .any(|cursor| !logs.contains(&cursor.path));
    for path in logs {
        let mut file = state::open_log(path)?;
        let saved = state.cursors.iter().find(|cursor| &cursor.path == path);
        let resume = Cursor::resume(saved, path, &mut file)
            .with_context(|| format!("cannot read {}", path.display()))?;
        restart |= resume == Resume::Restart;
        files.push((path, file, resume));
    }
    if restart {
        // One log was truncated or replaced: the counts mix all logs, so all are read again.
        state.start_over();
    }
    let mut cursors = Vec::with_capacity(files.len());
    let saved = std::mem::take(&mut state.cursors);
    for (path, mut file, resume) in files {
        let (offset, verified) = match resume {
            Resume::At(offset) if !restart => {
                (offset, saved.iter().find(|cursor| &cursor.path == path))
            }
            _ => (0, None),
        };
        let end = jsonl::read_rows(&file, offset, b"context.append_loop_event", |row: Row| {
            apply(state, row, tools)
        })
        .and_then(|end| Cursor::after(path, &mut file, end, verified))
        .with_context(|| format!("cannot read {}", path.display()))?;
        cursors.push(end);
    }
    state.cursors = cursors;
    Ok(())
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if row.kind.as_deref() != Some("context.append_loop_event") {
        return;
    }
    let Some(event) = row.event else { return };
    match (event.kind.as_deref(), event.name) {
        (Some(STEP_MARKER), _) => {
            state.step_markers = true;
            state.session.assistant_entry();
        }
        (Some(TOOL_CALL), Some(name)) => {
            // Without step markers (a Kimi version that renamed them) every stop would be "too
            // soon": each tool call counts as an entry instead.
            if !state.step_markers {
                state.session.assistant_entry();
            }
            state
                .session
                .tool_call(tools.classify(canonical_tool(&name)));
        }
        _ => {}
    }
}

/// The loop event that starts an assistant step (one model reply) in Kimi Code 2.x.
pub const STEP_MARKER: &str = "step.begin";
const TOOL_CALL: &str = "tool.call";

/// What a `wire.jsonl` holds, as far as the gate reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogShape {
    pub tool_calls: u64,
    pub step_markers: u64,
}

impl LogShape {
    /// Tool calls without a single step marker: the log format moved, and the gate falls back
    /// to counting tool calls as entries.
    pub fn markers_missing(&self) -> bool {
        self.tool_calls > 0 && self.step_markers == 0
    }
}

/// Counts the rows of one session log the gate relies on (for `doctor --live`).
pub fn log_shape(path: &Path) -> anyhow::Result<LogShape> {
    let file = state::open_log(path)?;
    let mut shape = LogShape::default();
    jsonl::read_rows(&file, 0, b"context.append_loop_event", |row: Row| {
        if row.kind.as_deref() != Some("context.append_loop_event") {
            return;
        }
        match row.event.and_then(|event| event.kind).as_deref() {
            Some(STEP_MARKER) => shape.step_markers += 1,
            Some(TOOL_CALL) => shape.tool_calls += 1,
            _ => {}
        }
    })
    .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(shape)
}

/// The newest session log of the workspace `sessions/<workspace>/` (the main agent's
/// `wire.jsonl` of the session touched last), if there is one.
pub fn newest_log(workspace: &Path) -> Option<PathBuf> {
    let sessions = std::fs::read_dir(workspace).ok()?;
    let newest = sessions
        .flatten()
        .filter_map(|entry| {
            let log = entry.path().join("agents/main/wire.jsonl");
            let modified = std::fs::metadata(&log).ok()?.modified().ok()?;
            Some((modified, log))
        })
        .max_by_key(|(modified, _)| *modified)?;
    Some(newest.1)
}

impl Reader for super::Kimi {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        let logs = logs(&home()?, &input.session_id)?;
        let (mut state, slot) = store.load(reading.agent, &input.session_id)?;
        collect(&mut state, &logs, reading.tools)?;
        let active = input.stop_hook_active || state.blocked_last;
        Ok(Some(Session {
            slot,
            state,
            active,
        }))
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        SHELL_TOOLS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GateConfig;
    use serde_json::json;

    fn tools() -> ToolSets {
        ToolSets::new(&GateConfig::default())
    }

    #[test]
    fn input_takes_session_id_and_ignores_the_rest() {
        let input = parse_input(&json!({
            "hook_event_name": "Stop",
            "session_id": "session_0b9e",
            "cwd": "/repo",
            "client_type": "kimi_code_cli",
            "stop_hook_active": false
        }))
        .unwrap();
        assert_eq!(
            input,
            Input {
                session_id: "session_0b9e".into(),
                stop_hook_active: false
            }
        );
        assert!(parse_input(&json!({"cwd": "/repo"})).is_err());
    }

    #[test]
    fn legacy_tool_names_are_canonical() {
        assert_eq!(canonical_tool("WriteFile"), "Write");
        assert_eq!(canonical_tool("StrReplaceFile"), "Edit");
        assert_eq!(canonical_tool("Edit"), "Edit");
        assert_eq!(canonical_tool("memory_store"), "memory_store");
    }

    #[test]
    fn session_ids_that_are_paths_are_refused() {
        let home = tempfile::tempdir().unwrap();
        for id in ["../x", "a/b", "..", ".hidden", ""] {
            assert!(logs(home.path(), id).is_err(), "{id}");
        }
    }

    #[test]
    fn logs_of_every_agent_are_found_and_counted() {
        let home = tempfile::tempdir().unwrap();
        let session = home
            .path()
            .join("sessions/wd_repo_0123456789ab/session_1/agents");
        for agent in ["main", "sub1"] {
            std::fs::create_dir_all(session.join(agent)).unwrap();
        }
        let row = |event: Value| {
            json!({"type": "context.append_loop_event", "agentId": "main", "event": event})
                .to_string()
        };
        let main = [
            row(json!({"type": "step.begin", "uuid": "s1", "turnId": "1", "step": 1})),
            row(json!({"type": "tool.call", "name": "mcp__memory__context_query", "args": {}})),
            row(json!({"type": "tool.result", "toolCallId": "c1", "result": {"output": "x"}})),
            r#"{"type":"context.append_message","message":{"role":"user"}}"#.to_owned(),
            "garbage".to_owned(),
            row(json!({"type": "step.begin", "uuid": "s2"})),
            row(json!({"type": "tool.call", "name": "WriteFile"})),
        ];
        std::fs::write(session.join("main/wire.jsonl"), main.join("\n") + "\n").unwrap();
        let sub = [row(json!({"type": "tool.call", "name": "StrReplaceFile"}))];
        std::fs::write(session.join("sub1/wire.jsonl"), sub.join("\n") + "\n").unwrap();

        let found = logs(home.path(), "session_1").unwrap();
        assert_eq!(found.len(), 2);
        let mut state = State::fresh();
        collect(&mut state, &found, &tools()).unwrap();
        assert_eq!(state.session.entries, 2);
        assert_eq!(state.session.tool_calls, 3);
        assert_eq!(state.session.window.edits, 2);
        assert!(state.session.looked_up);

        // Nothing new: nothing counted twice.
        collect(&mut state, &found, &tools()).unwrap();
        assert_eq!(state.session.tool_calls, 3);
        assert!(logs(home.path(), "session_2").is_err());
    }

    #[test]
    fn without_step_markers_tool_calls_count_as_entries() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("wire.jsonl");
        let row = |event: Value| {
            json!({"type": "context.append_loop_event", "agentId": "main", "event": event})
                .to_string()
        };
        // A renamed marker: the reader does not know it.
        let rows = [
            row(json!({"type": "turn.step.start", "uuid": "s1"})),
            row(json!({"type": "tool.call", "name": "mcp__memory__context_query"})),
            row(json!({"type": "turn.step.start", "uuid": "s2"})),
            row(json!({"type": "tool.call", "name": "Write"})),
            row(json!({"type": "tool.call", "name": "Write"})),
        ];
        std::fs::write(&log, rows.join("\n") + "\n").unwrap();
        let mut state = State::fresh();
        collect(&mut state, std::slice::from_ref(&log), &tools()).unwrap();
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 3);
        assert!(!state.step_markers);
        let shape = log_shape(&log).unwrap();
        assert_eq!(
            shape,
            LogShape {
                tool_calls: 3,
                step_markers: 0
            }
        );
        assert!(shape.markers_missing());

        // With markers, entries are steps, not calls.
        let marked = dir.path().join("marked.jsonl");
        let rows = [
            row(json!({"type": "step.begin", "uuid": "s1"})),
            row(json!({"type": "tool.call", "name": "Write"})),
            row(json!({"type": "tool.call", "name": "Write"})),
        ];
        std::fs::write(&marked, rows.join("\n") + "\n").unwrap();
        let mut state = State::fresh();
        collect(&mut state, std::slice::from_ref(&marked), &tools()).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 2));
        assert!(!log_shape(&marked).unwrap().markers_missing());
    }

    #[test]
    fn the_newest_session_log_of_a_workspace_is_found() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(newest_log(dir.path()), None);
        for (session, age) in [("session_old", 3600), ("session_new", 0)] {
            let agents = dir.path().join(session).join("agents/main");
            std::fs::create_dir_all(&agents).unwrap();
            let log = agents.join("wire.jsonl");
            std::fs::write(&log, "{}\n").unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            std::fs::File::options()
                .write(true)
                .open(&log)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        let newest = newest_log(dir.path()).unwrap();
        assert!(
            newest.ends_with("session_new/agents/main/wire.jsonl"),
            "{newest:?}"
        );
    }
}
