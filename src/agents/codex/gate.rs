//! Codex adapter: the Stop input and the session's rollout.
//!
//! Stop input (stdin): `session_id`, `turn_id`, `transcript_path` (the rollout,
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`), `cwd`, `stop_hook_active`, ...; only
//! `session_id` and `transcript_path` are required. Codex sets no limit on blocks: the gate lets
//! a stop with `stop_hook_active` through.
//!
//! Rollout: JSONL rows `{"timestamp", "type", "payload"}`; rows of type `response_item` carry the
//! Responses API items. `function_call` names a tool in `name`, an MCP tool also in `namespace`
//! (`mcp__<server>`), so the tool counts as `mcp__<server>__<name>`; the shell is
//! `exec_command` ([`SHELL_TOOLS`]); `custom_tool_call` `apply_patch` edits files and counts as
//! `Edit`. One model step (its message and tool calls, up to the next tool output or user
//! message) is one assistant entry. Other rows and lines that do not parse are skipped.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Reader, Reading, Session, read_session};

/// Codex's shell tool: edits made through it are not tool calls of their own (the gate's
/// worktree check counts them).
pub const SHELL_TOOLS: &[&str] = &["exec_command"];

/// Marks, in `State::last_message_id`, that the rows read last were inside a model step.
const IN_STEP: &str = "codex-model-step";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: std::path::PathBuf,
    pub stop_hook_active: bool,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the Stop input has no session_id")?;
    let Some(transcript) = crate::gate::text_field(input, &["transcript_path"]) else {
        bail!(
            "the Stop input has no transcript_path; is this hook registered under Stop in .codex/hooks.json?"
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
    #[serde(rename = "type")]
    kind: Option<String>,
    payload: Option<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: Option<String>,
    role: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

/// The name a tool call counts under, as `[gate]` lists name them.
pub fn canonical_tool(kind: &str, name: &str, namespace: Option<&str>) -> String {
    match (kind, name, namespace) {
        ("custom_tool_call", "apply_patch", _) => "Edit".into(),
        (_, name, Some(namespace)) if !namespace.is_empty() => format!("{namespace}__{name}"),
        (_, name, _) => name.into(),
    }
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if row.kind.as_deref() != Some("response_item") {
        return;
    }
    let Some(item) = row.payload else { return };
    let kind = item.kind.as_deref().unwrap_or_default();
    let from_model = match kind {
        "function_call" | "custom_tool_call" | "local_shell_call" | "reasoning" => true,
        "message" => item.role.as_deref() == Some("assistant"),
        _ => false,
    };
    if !from_model {
        if kind.ends_with("_output") || kind == "message" {
            state.last_message_id = None;
        }
        return;
    }
    if state.last_message_id.as_deref() != Some(IN_STEP) {
        state.session.assistant_entry();
        state.last_message_id = Some(IN_STEP.into());
    }
    let name = match (kind, item.name.as_deref()) {
        ("local_shell_call", _) => Some(SHELL_TOOLS[0]),
        ("function_call" | "custom_tool_call", Some(name)) => Some(name),
        _ => None,
    };
    if let Some(name) = name {
        let tool = canonical_tool(kind, name, item.namespace.as_deref());
        state.session.tool_call(tools.classify(&tool));
    }
}

/// Reads what was appended to the rollout since the last check into `state`.
pub fn collect(state: &mut State, rollout: &Path, tools: &ToolSets) -> anyhow::Result<()> {
    let mut file = state::open_log(rollout)?;
    let (offset, verified) = state.resume_single(rollout, &mut file)?;
    let end = jsonl::read_rows(&file, offset, b"\"response_item\"", |row: Row| {
        apply(state, row, tools)
    })
    .and_then(|end| Cursor::after(rollout, &mut file, end, verified.as_ref()))
    .with_context(|| format!("cannot read {}", rollout.display()))?;
    state.cursors = vec![end];
    Ok(())
}

impl Reader for super::Codex {
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
            |state, rollout| collect(state, rollout, reading.tools),
        )?;
        Ok(session.map(|(session, ())| session))
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

    fn feed(state: &mut State, lines: &[&str]) {
        let tools = ToolSets::new(&GateConfig::default());
        for line in lines {
            if let Ok(row) = serde_json::from_str::<Row>(line) {
                apply(state, row, &tools);
            }
        }
    }

    // Rows as the pinned Codex 0.171.0 wrote them (codex_facts.md section 5), trimmed.
    const ROLLOUT: &[&str] = &[
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"echo x > a\"}","call_id":"c1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n","call_id":"c2"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":"ok"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"item_completed"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[]}}"#,
    ];

    #[test]
    fn shell_and_apply_patch_calls_and_steps_are_counted() {
        let mut state = State::fresh();
        feed(&mut state, ROLLOUT);
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 2);
        assert_eq!(state.session.window.edits, 1, "apply_patch is an edit");
        assert_eq!(
            state.session.window.others, 1,
            "exec_command is a shell call"
        );
    }

    #[test]
    fn an_mcp_call_counts_under_its_namespace() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"type":"response_item","payload":{"type":"function_call","namespace":"mcp__memory","name":"memory_store","arguments":"{}","call_id":"c"}}"#,
                r#"{"type":"response_item","payload":{"type":"function_call","namespace":"mcp__memory","name":"context_query","arguments":"{}","call_id":"d"}}"#,
            ],
        );
        assert_eq!(state.session.entries, 1, "two calls of one step");
        assert_eq!(state.session.window.stores, 1);
        assert_eq!(state.session.window.lookups, 1);
        assert_eq!(
            canonical_tool("function_call", "memory_store", Some("mcp__memory")),
            "mcp__memory__memory_store"
        );
    }

    #[test]
    fn odd_rows_are_skipped() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                "not json",
                r#"{"type":"response_item"}"#,
                r#"{"type":"response_item","payload":"text"}"#,
                r#"{"type":"response_item","payload":{"type":"function_call"}}"#,
            ],
        );
        assert_eq!(state.session.tool_calls, 0);
    }

    #[test]
    fn input_needs_session_and_rollout() {
        let input = parse_input(&json!({"session_id": "s", "transcript_path": "/t.jsonl",
            "turn_id": "u", "stop_hook_active": true}))
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
        let path = dir.path().join("rollout.jsonl");
        std::fs::write(&path, ROLLOUT[..4].join("\n") + "\n").unwrap();
        let tools = ToolSets::new(&GateConfig::default());
        let mut state = State::fresh();
        collect(&mut state, &path, &tools).unwrap();
        assert_eq!(state.session.tool_calls, 1);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, (ROLLOUT[4..].join("\n") + "\n").as_bytes()).unwrap();
        collect(&mut state, &path, &tools).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (3, 2));
    }
}
