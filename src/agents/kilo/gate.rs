//! Kilo's side of the gate: OpenCode's, under Kilo's name. The plugin (`super::plugin`) records
//! every tool call with `memloop hook record --agent kilo` into Kilo's own ledger and asks
//! `memloop hook stop --agent kilo` on `session.idle` and when a reply's text completes inside
//! the prompt loop (so one-shot `kilo run` is gated, as `opencode run` is). Kilo 7.7.7 keeps
//! OpenCode's tool names (`write`, `edit`, `bash`, MCP tools as `<server>_<tool>`).

use serde_json::Value;

use crate::agents::opencode::gate as opencode;
use crate::gate::state::Store;
use crate::gate::{Reader, Reading, Session};

pub const AGENT: &str = "kilo";

impl Reader for super::Kilo {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        crate::agents::opencode::Opencode.stop(input, store, reading)
    }

    fn shell_tools(&self) -> &'static [&'static str] {
        opencode::SHELL_TOOLS
    }

    fn recorder(&self) -> Option<fn(&Value, &Store) -> anyhow::Result<()>> {
        Some(|input, store| opencode::record_as(store, AGENT, &opencode::parse_record(input)?))
    }
}
