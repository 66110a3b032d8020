//! OpenCode adapter: the ledger the plugin (`assets/opencode-plugin.js`) fills, and its stop.
//!
//! OpenCode has no Stop hook; the plugin stands in for one. On `tool.execute.after` it runs
//! `memloop hook record --agent opencode` with `{"tool": "<name>", "sessionID": "<id>"}` on
//! stdin, which appends one line to the session's ledger in the state dir. On `session.idle` it
//! runs `memloop hook stop --agent opencode` with `{"session_id": "<id>", "cwd": "<dir>",
//! "assistant_messages": <n>}`; `assistant_messages` is the number of assistant messages the
//! plugin saw in the session (without it, each recorded call counts as one entry).
//!
//! Tool names are OpenCode's (`write`, `edit`, `patch`, `multiedit`, MCP tools as
//! `<server>_<tool>`) and are mapped to the canonical names the gate's config lists use.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{State, Store};
use crate::gate::{Reader, Reading, Session};

/// OpenCode's shell tool. What it changes in the worktree is counted at the check
/// (unless `[gate] shell_tools` names others).
pub const SHELL_TOOLS: &[&str] = &["bash"];

pub const AGENT: &str = "opencode";

/// One call recorded by the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub session_id: String,
    pub tool: String,
}

pub fn parse_record(input: &Value) -> anyhow::Result<Record> {
    Ok(Record {
        session_id: crate::gate::text_field(input, &["sessionID", "session_id"])
            .context("the record input has no sessionID")?,
        tool: crate::gate::text_field(input, &["tool", "tool_name"])
            .context("the record input has no tool")?,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopInput {
    pub session_id: String,
    pub assistant_messages: Option<u64>,
    pub stop_hook_active: bool,
}

pub fn parse_stop(input: &Value) -> anyhow::Result<StopInput> {
    Ok(StopInput {
        session_id: crate::gate::text_field(input, &["session_id", "sessionID"])
            .context("the stop input has no session_id")?,
        assistant_messages: input.get("assistant_messages").and_then(Value::as_u64),
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
    })
}

/// OpenCode's built-in edit tools under their canonical names; an MCP tool of the configured
/// server (`memory_memory_store`) as `mcp__memory__memory_store`, as Claude Code names it.
pub fn canonical_tool(name: &str, server: &str) -> String {
    match name {
        "write" => "Write".to_owned(),
        "edit" | "patch" | "apply_patch" => "Edit".to_owned(),
        "multiedit" => "MultiEdit".to_owned(),
        other => match other
            .strip_prefix(server)
            .and_then(|rest| rest.strip_prefix('_'))
        {
            Some(tool) if !server.is_empty() && !tool.is_empty() => {
                format!("mcp__{server}__{tool}")
            }
            _ => other.to_owned(),
        },
    }
}

#[derive(Serialize, Deserialize)]
struct LedgerRow {
    tool: Option<String>,
}

/// Appends one recorded call to the session's ledger.
pub fn record(store: &Store, record: &Record) -> anyhow::Result<()> {
    record_as(store, AGENT, record)
}

/// Appends one call to the ledger of `agent` (OpenCode, or a fork running the same plugin).
pub fn record_as(store: &Store, agent: &str, record: &Record) -> anyhow::Result<()> {
    let line = serde_json::to_vec(&LedgerRow {
        tool: Some(record.tool.clone()),
    })
    .context("cannot serialize the ledger row")?;
    store.append(&store.ledger_path(agent, &record.session_id), &line)
}

/// Reads the ledger lines added since the last check into `state`.
pub fn collect(
    state: &mut State,
    ledger: &Path,
    input: &StopInput,
    server: &str,
    tools: &ToolSets,
) -> anyhow::Result<()> {
    let recorded_before = state.session.tool_calls;
    match crate::gate::state::open_regular(ledger) {
        // No call recorded yet: nothing to read.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => {
            return Err(err).with_context(|| format!("cannot read {}", ledger.display()));
        }
        Ok(mut file) => {
            let (offset, verified) = state.resume_single(ledger, &mut file)?;
            let end = jsonl::read_rows(&file, offset, b"tool", |row: LedgerRow| {
                if let Some(tool) = row.tool {
                    let name = canonical_tool(&tool, server);
                    state.session.tool_call(tools.classify(&name));
                }
            })
            .and_then(|end| Cursor::after(ledger, &mut file, end, verified.as_ref()))
            .with_context(|| format!("cannot read {}", ledger.display()))?;
            state.cursors = vec![end];
        }
    }
    match input.assistant_messages {
        Some(total) => state.session.set_entries(total),
        None => {
            let new = state.session.tool_calls.saturating_sub(recorded_before);
            state.session.entries += new;
        }
    }
    Ok(())
}

impl Reader for super::Opencode {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_stop(input)?;
        let ledger = store.ledger_path(reading.agent, &input.session_id);
        let (mut state, slot) = store.load(reading.agent, &input.session_id)?;
        collect(&mut state, &ledger, &input, reading.server, reading.tools)?;
        Ok(Some(Session {
            slot,
            state,
            active: input.stop_hook_active,
        }))
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        SHELL_TOOLS
    }

    fn recorder(&self) -> Option<fn(&Value, &Store) -> anyhow::Result<()>> {
        Some(|input, store| record(store, &parse_record(input)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn record_input_is_the_tool_execute_after_payload() {
        let record = parse_record(&json!({
            "tool": "write", "sessionID": "ses_1", "callID": "call_1", "args": {"filePath": "a"}
        }))
        .unwrap();
        assert_eq!(
            record,
            Record {
                session_id: "ses_1".into(),
                tool: "write".into()
            }
        );
        assert!(parse_record(&json!({"tool": "write"})).is_err());
        assert!(parse_record(&json!({"sessionID": "s"})).is_err());
    }

    #[test]
    fn stop_input_reads_the_plugin_payload() {
        let input = parse_stop(&json!({
            "session_id": "ses_1", "cwd": "/repo", "assistant_messages": 4
        }))
        .unwrap();
        assert_eq!(
            input,
            StopInput {
                session_id: "ses_1".into(),
                assistant_messages: Some(4),
                stop_hook_active: false
            }
        );
        let input = parse_stop(&json!({"sessionID": "ses_2", "assistant_messages": "x"})).unwrap();
        assert_eq!(input.assistant_messages, None);
    }

    #[test]
    fn tool_names_are_canonical() {
        assert_eq!(canonical_tool("write", "memory"), "Write");
        assert_eq!(canonical_tool("edit", "memory"), "Edit");
        assert_eq!(canonical_tool("patch", "memory"), "Edit");
        assert_eq!(canonical_tool("multiedit", "memory"), "MultiEdit");
        assert_eq!(
            canonical_tool("memory_memory_store", "memory"),
            "mcp__memory__memory_store"
        );
        assert_eq!(
            canonical_tool("convops_context_query", "memory"),
            "convops_context_query"
        );
        assert_eq!(canonical_tool("memory_", "memory"), "memory_");
        assert_eq!(canonical_tool("read", "memory"), "read");
    }
}
