//! Pi's side of the gate. Pi has no Stop hook and memloop reads no log of Pi's: the extension
//! (`assets/pi-extension.js`) hands each stop its own record of the calls. At `agent_end` it runs
//! `memloop hook stop --agent pi` with `{"session_id", "cwd", "tool_calls": [<name>...],
//! "assistant_messages": <n>}`: the names of the tool calls in the assistant messages of the
//! runs since the last stop the gate read, and how many such messages there were. Each stop
//! folds in only what it is given, so nothing is counted twice.
//!
//! Tool names are Pi 0.73's (`read`, `bash`, `edit`, `write`, `grep`, `find`, `ls`; memloop's
//! tools under the server's own names, `memory_store`, `context_query`) and are mapped to the
//! canonical names the gate's config lists use.

use anyhow::Context;
use serde_json::Value;

use crate::gate::rules::ToolSets;
use crate::gate::state::{State, Store};
use crate::gate::{Reader, Reading, Session};

/// Pi's shell tool. What it changes in the worktree is counted at the check (unless
/// `[gate] shell_tools` names others).
pub const SHELL_TOOLS: &[&str] = &["bash"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopInput {
    pub session_id: String,
    pub tool_calls: Vec<String>,
    pub assistant_messages: u64,
}

pub fn parse_stop(input: &Value) -> anyhow::Result<StopInput> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the stop input has no session_id")?;
    let tool_calls = match input.get("tool_calls") {
        None => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .map(|call| call.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .context("the stop input's tool_calls holds something other than tool names")?,
        Some(_) => anyhow::bail!("the stop input's tool_calls is not a list of tool names"),
    };
    let assistant_messages = input
        .get("assistant_messages")
        .and_then(Value::as_u64)
        .unwrap_or(tool_calls.len() as u64);
    Ok(StopInput {
        session_id,
        tool_calls,
        assistant_messages,
    })
}

/// Pi's built-in edit tools under their canonical names; every other name as it is (memloop's
/// tools carry their own names, which the gate's lists match).
pub fn canonical_tool(name: &str) -> &str {
    match name {
        "write" => "Write",
        "edit" => "Edit",
        other => other,
    }
}

/// Folds one stop's calls into `state`.
pub fn fold(state: &mut State, input: &StopInput, tools: &ToolSets) {
    for name in &input.tool_calls {
        state
            .session
            .tool_call(tools.classify(canonical_tool(name)));
    }
    state.session.entries += input.assistant_messages;
}

impl Reader for super::Pi {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_stop(input)?;
        let (mut state, slot) = store.load(reading.agent, &input.session_id)?;
        fold(&mut state, &input, reading.tools);
        // The extension caps its own send-backs; each stop is judged on what it brings.
        Ok(Some(Session {
            slot,
            state,
            active: false,
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
    use crate::gate::rules::{StoreHint, ToolKind, Verdict, check};
    use serde_json::json;

    #[test]
    fn stop_input_is_the_extensions_record() {
        let input = parse_stop(&json!({
            "session_id": "s1", "cwd": "/repo", "tool_calls": ["read", "write"], "assistant_messages": 3
        }))
        .unwrap();
        assert_eq!(
            input,
            StopInput {
                session_id: "s1".into(),
                tool_calls: vec!["read".into(), "write".into()],
                assistant_messages: 3
            }
        );
        let bare = parse_stop(&json!({"session_id": "s2"})).unwrap();
        assert!(bare.tool_calls.is_empty());
        assert!(parse_stop(&json!({"tool_calls": []})).is_err());
        assert!(parse_stop(&json!({"session_id": "s", "tool_calls": "write"})).is_err());
        assert!(parse_stop(&json!({"session_id": "s", "tool_calls": [1]})).is_err());
    }

    #[test]
    fn pi_tools_are_classified() {
        let tools = ToolSets::new(&GateConfig::default()).shell_defaults(SHELL_TOOLS);
        let kind = |name| tools.classify(canonical_tool(name));
        assert_eq!(kind("write"), ToolKind::Edit);
        assert_eq!(kind("edit"), ToolKind::Edit);
        assert_eq!(kind("bash"), ToolKind::Shell);
        assert_eq!(kind("read"), ToolKind::Other);
        assert_eq!(kind("memory_store"), ToolKind::Store);
        assert_eq!(kind("context_query"), ToolKind::Lookup);
    }

    #[test]
    fn a_lookup_and_two_writes_are_sent_back_and_the_stored_stop_passes() {
        let gate = GateConfig::default();
        let tools = ToolSets::new(&gate).shell_defaults(SHELL_TOOLS);
        let hint = StoreHint::new(&gate, "memory", None);
        let mut state = State::fresh();
        let stop = |calls: &[&str], entries| StopInput {
            session_id: "s".into(),
            tool_calls: calls.iter().map(|c| (*c).to_owned()).collect(),
            assistant_messages: entries,
        };
        fold(
            &mut state,
            &stop(&["context_query", "write", "write"], 4),
            &tools,
        );
        let Verdict::Block(problems) = check(&mut state.session, false, &gate, &hint) else {
            panic!("two writes and nothing stored must be sent back");
        };
        assert!(
            problems[0].starts_with("Modified 2 file(s) but stored nothing"),
            "{problems:?}"
        );
        fold(&mut state, &stop(&["memory_store"], 2), &tools);
        assert!(matches!(
            check(&mut state.session, false, &gate, &hint),
            Verdict::Allow(_)
        ));
    }
}
