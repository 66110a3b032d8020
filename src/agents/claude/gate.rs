//! Claude Code adapter: the Stop input and the session transcript.
//!
//! Stop input (stdin): `session_id`, `transcript_path`, `cwd`, `stop_hook_active`; everything
//! else is ignored, and only `session_id` and `transcript_path` are required.
//!
//! Transcript: JSONL, one row per line. Rows with `"type": "assistant"` carry `message.content[]`
//! blocks; `tool_use` blocks name the tool (`Edit`, `mcp__<server>__<tool>`, ...). One assistant
//! message can span several rows sharing `message.id`, one block per row: they count as one
//! assistant entry. Other row types and lines that do not parse are skipped, because the format
//! is internal to Claude Code and changes between versions.

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::state::{self, State, Store};
use crate::gate::{Reader, Reading, Session};

/// What the gate takes from Claude Code's Stop input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: PathBuf,
    pub stop_hook_active: bool,
}

pub fn parse_input(input: &Value) -> anyhow::Result<Input> {
    let session_id = crate::gate::text_field(input, &["session_id"])
        .context("the Stop input has no session_id")?;
    let Some(transcript) = crate::gate::text_field(input, &["transcript_path"]) else {
        bail!("the Stop input has no transcript_path; is this hook registered under Stop?");
    };
    Ok(Input {
        session_id,
        transcript: expand_home(&transcript),
        stop_hook_active: crate::gate::flag_field(input, "stop_hook_active"),
    })
}

/// Documentation examples show `~/.claude/...`; real inputs are absolute.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

#[derive(Deserialize)]
struct Row {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    #[serde(default)]
    content: Blocks,
}

/// `message.content`: an array of blocks; a plain string (a text-only message) holds none.
#[derive(Default)]
struct Blocks(Vec<Block>);

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    name: Option<String>,
}

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BlocksVisitor)
    }
}

struct BlocksVisitor;

impl<'de> Visitor<'de> for BlocksVisitor {
    type Value = Blocks;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Blocks, A::Error> {
        let mut blocks = Vec::new();
        while let Some(item) = seq.next_element::<Lenient<Block>>()? {
            blocks.extend(item.0);
        }
        Ok(Blocks(blocks))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Blocks, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Blocks::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Blocks, E> {
        Ok(Blocks::default())
    }
}

/// An object parsed as `T`; anything else in its place (a bare string block) is skipped, so
/// one odd block does not hide the rest of the row.
struct Lenient<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LenientVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for LenientVisitor<T> {
            type Value = Lenient<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content block")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lenient<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Lenient(Some(t)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<T>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }

            fn visit_str<E: de::Error>(self, _: &str) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }

            fn visit_unit<E: de::Error>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
        }

        deserializer.deserialize_any(LenientVisitor(PhantomData))
    }
}

/// Reads what was appended to the transcript since the last check into `state`.
pub fn collect(state: &mut State, transcript: &Path, tools: &ToolSets) -> anyhow::Result<()> {
    let mut file = state::open_log(transcript)?;
    let (offset, verified) = state.resume_single(transcript, &mut file)?;
    let end = jsonl::read_rows(&file, offset, b"\"assistant\"", |row: Row| {
        apply(state, row, tools)
    })
    .and_then(|end| Cursor::after(transcript, &mut file, end, verified.as_ref()))
    .with_context(|| format!("cannot read {}", transcript.display()))?;
    state.cursors = vec![end];
    Ok(())
}

fn apply(state: &mut State, row: Row, tools: &ToolSets) {
    if row.kind.as_deref() != Some("assistant") {
        return;
    }
    let Some(message) = row.message else { return };
    let same_message = message.id.is_some() && message.id == state.last_message_id;
    if !same_message {
        state.session.assistant_entry();
        state.last_message_id = message.id;
        state.last_message_tools.clear();
    }
    for block in message.content.0 {
        if block.kind.as_deref() != Some("tool_use") {
            continue;
        }
        let Some(name) = block.name else { continue };
        if let Some(id) = block.id {
            // A block written twice for one message (a re-flushed row) is one call.
            if state.last_message_tools.contains(&id) {
                continue;
            }
            state.last_message_tools.push(id);
        }
        state.session.tool_call(tools.classify(&name));
    }
}

impl Reader for super::Claude {
    fn stop(
        &self,
        input: &Value,
        store: &Store,
        reading: &Reading,
    ) -> anyhow::Result<Option<Session>> {
        let input = parse_input(input)?;
        let (mut state, slot) = store.load(reading.agent, &input.session_id)?;
        let read = std::path::absolute(&input.transcript)
            .with_context(|| format!("cannot resolve {}", input.transcript.display()))
            .and_then(|transcript| collect(&mut state, &transcript, reading.tools));
        match read {
            // The retry after a block is let through, whatever became of the transcript.
            Err(_) if input.stop_hook_active => return Ok(None),
            other => other?,
        }
        Ok(Some(Session {
            slot,
            state,
            active: input.stop_hook_active,
        }))
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

    fn feed(state: &mut State, lines: &[&str]) {
        for line in lines {
            if let Ok(row) = serde_json::from_str::<Row>(line) {
                apply(state, row, &tools());
            }
        }
    }

    #[test]
    fn input_takes_the_documented_fields_and_ignores_the_rest() {
        let input = parse_input(&json!({
            "session_id": "abc123",
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/repo",
            "hook_event_name": "Stop",
            "stop_hook_active": true,
            "background_tasks": [],
            "last_assistant_message": "done"
        }))
        .unwrap();
        assert_eq!(
            input,
            Input {
                session_id: "abc123".into(),
                transcript: "/tmp/t.jsonl".into(),
                stop_hook_active: true,
            }
        );
    }

    #[test]
    fn input_without_stop_hook_active_is_not_continuing() {
        let input = parse_input(&json!({"session_id": "s", "transcript_path": "t"})).unwrap();
        assert!(!input.stop_hook_active);
    }

    #[test]
    fn input_without_transcript_or_session_is_an_error() {
        let err = parse_input(&json!({"session_id": "s"})).unwrap_err();
        assert!(err.to_string().contains("transcript_path"));
        let err = parse_input(&json!({"transcript_path": "t"})).unwrap_err();
        assert!(err.to_string().contains("session_id"));
    }

    #[test]
    fn rows_sharing_message_id_are_one_entry() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{}}]}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t2","name":"Write","input":{}}]}}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t3","name":"mcp__memory__memory_store","input":{}}]}}"#,
            ],
        );
        assert_eq!(state.session.entries, 2);
        assert_eq!(state.session.tool_calls, 3);
        assert_eq!(state.session.window.edits, 2);
        assert_eq!(state.session.window.stores, 1);
    }

    #[test]
    fn rows_without_id_each_count_and_duplicate_blocks_count_once() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"context_query"}]}}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Edit"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Edit"}]}}"#,
            ],
        );
        assert_eq!(state.session.entries, 3);
        assert_eq!(state.session.tool_calls, 3);
        assert!(state.session.looked_up);
    }

    #[test]
    fn odd_rows_are_skipped_without_losing_their_neighbours() {
        let mut state = State::fresh();
        feed(
            &mut state,
            &[
                "not json",
                r#"{"type":"summary","summary":"x"}"#,
                r#"{"type":"file-history-snapshot","snapshot":{}}"#,
                r#"{"type":"assistant","message":{"content":"plain text"}}"#,
                r#"{"type":"assistant","message":{"content":["odd", 3, {"type":"tool_use","name":"Read"}]}}"#,
                r#"{"type":"assistant"}"#,
                r#"{"type":7}"#,
            ],
        );
        assert_eq!(state.session.entries, 2);
        assert_eq!(state.session.tool_calls, 1);
    }

    #[test]
    fn incremental_reads_continue_a_message_split_across_checks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"a","name":"Read"}]}}"#,
                "\n",
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"b","name":"Re"#
            ),
        )
        .unwrap();
        let mut state = State::fresh();
        collect(&mut state, &path, &tools()).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 1));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"ad\"}]}}\n").unwrap();
        collect(&mut state, &path, &tools()).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 2));
        assert_eq!(
            state.cursors[0].offset,
            std::fs::metadata(&path).unwrap().len()
        );
    }

    #[test]
    fn a_missing_transcript_is_an_error_naming_it() {
        let mut state = State::fresh();
        let err = collect(&mut state, Path::new("/nonexistent/t.jsonl"), &tools()).unwrap_err();
        assert!(format!("{err:#}").contains("/nonexistent/t.jsonl"));
    }
}
