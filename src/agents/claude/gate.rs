//! Claude Code adapter: the Stop input and the session transcript.
//!
//! Stop input (stdin): `session_id`, `transcript_path`, `cwd`, `stop_hook_active`,
//! `last_assistant_message`; everything else is ignored, and only `session_id` and
//! `transcript_path` are required.
//!
//! Claude Code writes the transcript asynchronously: with a fast model the Stop hook can run
//! before the turn's last rows are in the file. `last_assistant_message` is the text that ended
//! the turn, so the reader goes on reading what gets appended (from where it stopped, never from
//! the start) until the newest assistant row holds that text, within a small bound
//! ([`TRANSCRIPT_WAIT`]). When it never shows, what is there is judged and the gate's debug log
//! gets a line.
//!
//! Transcript: JSONL, one row per line. Rows with `"type": "assistant"` carry `message.content[]`
//! blocks; `tool_use` blocks name the tool (`Edit`, `mcp__<server>__<tool>`, ...). One assistant
//! message can span several rows sharing `message.id`, one block per row: they count as one
//! assistant entry. Other row types and lines that do not parse are skipped, because the format
//! is internal to Claude Code and changes between versions.

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::gate::jsonl::{self, Cursor};
use crate::gate::rules::ToolSets;
use crate::gate::skim::{Kind, RawString, Skim};
use crate::gate::state::{self, State, Store};
use crate::gate::{Reader, Reading, Session, read_session};

/// What the gate takes from Claude Code's Stop input.
/// Claude Code's shell tool. What it changes in the worktree is counted at the check
/// (unless `[gate] shell_tools` names others).
pub const SHELL_TOOLS: &[&str] = &["Bash"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub session_id: String,
    pub transcript: PathBuf,
    pub stop_hook_active: bool,
    /// The text of the assistant message that ended the turn (Claude Code 2.1.47 and later).
    pub last_message: Option<String>,
}

/// How long a stop waits for the transcript to catch up with `last_assistant_message`.
pub const TRANSCRIPT_WAIT: Duration = Duration::from_millis(2000);

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
        last_message: crate::gate::text_field(input, &["last_assistant_message"])
            .filter(|text| !text.trim().is_empty()),
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
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Row {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Message {
    id: Option<String>,
    #[serde(default)]
    content: Blocks,
}

/// `message.content`: an array of blocks; a plain string (a text-only message) holds none.
#[derive(Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Blocks(Vec<Block>);

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    name: Option<String>,
    #[serde(default)]
    text: TextField,
}

/// A text compared by its characters other than whitespace, kept as a hash: the transcript's
/// texts are read without being copied, and `last_assistant_message` may differ from the stored
/// block in line ends and trailing spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextKey(pub u64);

impl TextKey {
    /// Every text block of a transcript is keyed on a first read, so this runs over a good part
    /// of it: the bytes other than whitespace go eight at a time through a multiply-xor mix,
    /// several times cheaper than SipHash fed one character at a time. Equal texts (whitespace
    /// aside) give equal keys; the key is only ever compared, never trusted as a secret.
    pub fn of(text: &str) -> TextKey {
        let bytes = text.as_bytes();
        let mut key = WordMix::default();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii() {
                // `char::is_whitespace` on ASCII: space, \t, \n, \x0b, \x0c, \r.
                if !matches!(b, b' ' | b'\t'..=b'\r') {
                    key.byte(b);
                }
                i += 1;
                continue;
            }
            let width = utf8_width(b);
            let end = (i + width).min(bytes.len());
            let c = text[i..end].chars().next().unwrap_or(' ');
            if !c.is_whitespace() {
                bytes[i..end].iter().for_each(|&b| key.byte(b));
            }
            i = end;
        }
        TextKey(key.finish())
    }
}

/// The length of the UTF-8 sequence a leading byte starts (`text` is valid UTF-8).
fn utf8_width(lead: u8) -> usize {
    match lead {
        0xf0.. => 4,
        0xe0.. => 3,
        _ => 2,
    }
}

/// A streaming hash of bytes: eight at a time into a word, each word mixed in by a multiply and
/// a shift; the length goes in last, so no two byte strings of different lengths share a tail.
#[derive(Default)]
struct WordMix {
    state: u64,
    word: u64,
    filled: u32,
    len: u64,
}

impl WordMix {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn byte(&mut self, b: u8) {
        self.word |= u64::from(b) << (self.filled * 8);
        self.filled += 1;
        if self.filled == 8 {
            self.mix();
        }
    }

    fn mix(&mut self) {
        let x = (self.state ^ self.word).wrapping_mul(Self::K);
        self.state = x ^ (x >> 29);
        self.len += u64::from(self.filled);
        self.word = 0;
        self.filled = 0;
    }

    fn finish(mut self) -> u64 {
        self.mix();
        let x = (self.state ^ self.len).wrapping_mul(Self::K);
        x ^ (x >> 32)
    }
}

/// A block's `text` when it is a string; anything else in its place holds no text. Kept as
/// read, not keyed: only the newest text of a read is ever compared ([`Tail`]).
#[derive(Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct TextField(Option<Text>);

/// A text as serde decodes it, or as a skimmed row holds it: left as written, decoded only when
/// it turns out to be the newest text of the read.
#[cfg_attr(test, derive(Debug))]
enum Text {
    Decoded(String),
    Written(RawString),
}

impl Text {
    fn key(&self) -> Option<TextKey> {
        match self {
            Text::Decoded(text) => Some(TextKey::of(text)),
            Text::Written(raw) => raw.decode().map(|text| TextKey::of(&text)),
        }
    }
}

#[cfg(test)]
impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        let decoded = |text: &Text| match text {
            Text::Decoded(text) => Some(text.clone()),
            Text::Written(raw) => raw.decode().map(|text| text.into_owned()),
        };
        decoded(self) == decoded(other)
    }
}

impl<'de> Deserialize<'de> for TextField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;

        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = TextField;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a text")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<TextField, E> {
                Ok(TextField(Some(Text::Decoded(text.to_owned()))))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TextField, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TextField(None))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextField, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TextField(None))
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<TextField, E> {
                Ok(TextField(None))
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<TextField, E> {
                Ok(TextField(None))
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<TextField, E> {
                Ok(TextField(None))
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<TextField, E> {
                Ok(TextField(None))
            }

            fn visit_unit<E: de::Error>(self) -> Result<TextField, E> {
                Ok(TextField(None))
            }
        }

        deserializer.deserialize_any(KeyVisitor)
    }
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

/// The transcript's rows are read with [`Skim`], which decodes only the fields below and passes
/// over the rest (most of a row is thinking, tool input and text); the serde derives above stay
/// the reference, used for lines too long to hold and compared with these in the tests. A
/// repeated field is an error, as in the derives.
impl Row {
    fn skim(line: &[u8]) -> Option<Row> {
        let mut skim = Skim::new(line);
        let mut kind = Field::default();
        let mut message = Field::default();
        skim.object(|key, skim| {
            if key.is("type") {
                kind.set(skim.optional_string()?)
            } else if key.is("message") {
                message.set(match skim.kind()? {
                    Kind::Null => skim.null().map(|()| None)?,
                    Kind::Object => Some(Message::skim(skim)?),
                    // An array would fill the struct by position in serde; no agent writes one.
                    _ => return None,
                })
            } else {
                skim.skip()
            }
        })?;
        skim.finished().then(|| Row {
            kind: kind.value.flatten(),
            message: message.value.flatten(),
        })
    }
}

impl Message {
    fn skim(skim: &mut Skim) -> Option<Message> {
        let mut id = Field::default();
        let mut content = Field::default();
        skim.object(|key, skim| {
            if key.is("id") {
                id.set(skim.optional_string()?)
            } else if key.is("content") {
                content.set(Blocks::skim(skim)?)
            } else {
                skim.skip()
            }
        })?;
        Some(Message {
            id: id.value.flatten(),
            content: content.value.unwrap_or_default(),
        })
    }
}

impl Blocks {
    fn skim(skim: &mut Skim) -> Option<Blocks> {
        let mut blocks = Vec::new();
        if skim.kind()? != Kind::Array {
            skim.skip()?;
            return Some(Blocks(blocks));
        }
        skim.array(|skim| match skim.kind()? {
            Kind::Object => Block::skim(skim).map(|block| blocks.push(block)),
            _ => skim.skip(),
        })?;
        Some(Blocks(blocks))
    }
}

impl Block {
    fn skim(skim: &mut Skim) -> Option<Block> {
        let mut kind = Field::default();
        let mut id = Field::default();
        let mut name = Field::default();
        let mut text = Field::default();
        skim.object(|key, skim| {
            if key.is("type") {
                kind.set(skim.optional_string()?)
            } else if key.is("id") {
                id.set(skim.optional_string()?)
            } else if key.is("name") {
                name.set(skim.optional_string()?)
            } else if key.is("text") {
                text.set(match skim.kind()? {
                    Kind::String => TextField(Some(Text::Written(skim.string()?.to_owned()))),
                    _ => skim.skip().map(|()| TextField(None))?,
                })
            } else {
                skim.skip()
            }
        })?;
        Some(Block {
            kind: kind.value.flatten(),
            id: id.value.flatten(),
            name: name.value.flatten(),
            text: text.value.unwrap_or_default(),
        })
    }
}

/// A field of a skimmed object: set once; a second time is an error.
struct Field<T> {
    value: Option<T>,
}

impl<T> Default for Field<T> {
    fn default() -> Self {
        Field { value: None }
    }
}

impl<T> Field<T> {
    fn set(&mut self, value: T) -> Option<()> {
        match self.value.replace(value) {
            None => Some(()),
            Some(_) => None,
        }
    }
}

/// What one read of the transcript found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// The newest assistant row holds the turn's last message, or there was none to wait for;
    /// `waited` is how long the transcript took to catch up.
    Up { waited: Duration },
    /// The message never showed within the wait: what was there was read and is judged.
    Behind { waited: Duration },
}

/// Reads what was appended to the transcript since the last check into `state`. With the turn's
/// last message, goes on reading what gets appended until the newest assistant row holds it,
/// for at most `wait`.
pub fn collect(
    state: &mut State,
    transcript: &Path,
    tools: &ToolSets,
    last_message: Option<&str>,
    wait: Duration,
) -> anyhow::Result<Caught> {
    let mut file = state::open_log(transcript)?;
    let (mut offset, verified) = state.resume_single(transcript, &mut file)?;
    let want = last_message.map(TextKey::of);
    let started = Instant::now();
    let mut pause = Duration::from_millis(2);
    let mut slept = false;
    let caught = loop {
        let mut tail = Tail::Unchanged;
        offset = jsonl::read_rows_with(&file, offset, b"\"assistant\"", Row::skim, |row: Row| {
            apply(state, row, tools, &mut tail)
        })
        .with_context(|| format!("cannot read {}", transcript.display()))?;
        tail.settle(state);
        let waited = match slept {
            true => started.elapsed(),
            false => Duration::ZERO,
        };
        if want.is_none_or(|want| state.tail_text == Some(want.0)) {
            break Caught::Up { waited };
        }
        let waited = started.elapsed();
        if waited >= wait {
            break Caught::Behind { waited };
        }
        slept = true;
        // Claude Code flushes within milliseconds: poll fast at first, then back off.
        std::thread::sleep(pause.min(wait - waited));
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let end = Cursor::after(transcript, &mut file, offset, verified.as_ref())
        .with_context(|| format!("cannot read {}", transcript.display()))?;
    state.cursors = vec![end];
    Ok(caught)
}

/// The newest assistant content of one read, settled into [`State::tail_text`] when the read
/// ends: a first check passes thousands of texts, and keying each would cost more than copying
/// it, when only the last one is ever compared with `last_assistant_message`.
#[derive(Default)]
enum Tail {
    #[default]
    Unchanged,
    Text(Text),
    NotText,
}

impl Tail {
    fn settle(self, state: &mut State) {
        match self {
            Tail::Unchanged => {}
            Tail::Text(text) => state.tail_text = text.key().map(|key| key.0),
            Tail::NotText => state.tail_text = None,
        }
    }
}

fn apply(state: &mut State, row: Row, tools: &ToolSets, tail: &mut Tail) {
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
        match block.kind.as_deref() {
            Some("text") => {
                *tail = block.text.0.map_or(Tail::NotText, Tail::Text);
                continue;
            }
            Some("tool_use") => *tail = Tail::NotText,
            _ => continue,
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
        // The retry after a block is allowed whatever the transcript says: no wait for it.
        let last = match input.stop_hook_active {
            true => None,
            false => input.last_message.as_deref(),
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
        match caught {
            Caught::Up { waited } if waited.is_zero() => {}
            Caught::Up { waited } => store.debug(&format!(
                "claude session {}: waited {} ms for {} to show the turn's last assistant message",
                input.session_id,
                waited.as_millis(),
                input.transcript.display()
            )),
            Caught::Behind { waited } => store.debug(&format!(
                "claude session {}: {} did not show the turn's last assistant message within {} ms; \
                 judged the {} assistant entries and {} tool calls read",
                input.session_id,
                input.transcript.display(),
                waited.as_millis(),
                session.state.session.entries,
                session.state.session.tool_calls
            )),
        }
        Ok(Some(session))
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

    fn feed(state: &mut State, lines: &[&str]) {
        for line in lines {
            if let Some(row) = Row::skim(line.as_bytes()) {
                let mut tail = Tail::Unchanged;
                apply(state, row, &tools(), &mut tail);
                tail.settle(state);
            }
        }
    }

    #[test]
    fn text_keys_ignore_whitespace_and_tell_texts_apart() {
        let key = TextKey::of;
        assert_eq!(
            key("Done: all tests pass."),
            key("  Done:\r\n all tests\tpass. \n")
        );
        assert_eq!(key("a\u{a0}b\u{3000}c\u{2028}d\u{85}e"), key("abcde"));
        assert_eq!(key("über … 日本"), key("über…日本"));
        assert_eq!(key(""), key(" \n\t"));
        for (a, b) in [
            ("done", "Done"),
            ("abcdefgh", "abcdefghi"),
            ("abcdefgh\0", "abcdefgh"),
            ("", "\0"),
            ("12345678abcdefgh", "abcdefgh12345678"),
            ("ü", "u"),
        ] {
            assert_ne!(key(a), key(b), "{a:?} vs {b:?}");
        }
    }

    fn both_ways(line: &str) -> (Option<Row>, Option<Row>) {
        (
            Row::skim(line.as_bytes()),
            serde_json::from_str::<Row>(line).ok(),
        )
    }

    #[test]
    fn a_skimmed_row_is_the_row_serde_reads() {
        let rows = [
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a\nb"},{"type":"tool_use","id":"t1","name":"Edit","input":{"x":[1,{"y":"}"}]}}]}}"#,
            r#"{"message":{"content":"plain text"},"type":"assistant"}"#,
            r#"{"type":"assistant","message":{"id":null,"content":[7,"s",[1],{"type":"text","text":{"no":1}}]}}"#,
            r#" { "type" : "assistant" , "message" : null } "#,
            r#"{"type":"assistant","message":{"id":"m","content":[]},"extra":[true,false,null,-1.5e3]}"#,
            r#"{"typ\u0065":"assistant","message":{"\u0069d":"m\u00e9","content":[{"nam\u0065":"Bash"}]}}"#,
        ];
        for line in rows {
            let (skimmed, parsed) = both_ways(line);
            assert!(parsed.is_some(), "{line}");
            assert_eq!(skimmed, parsed, "{line}");
        }
    }

    #[test]
    fn rows_serde_refuses_are_refused_when_skimmed() {
        let rows = [
            r#"{"type":"assistant","type":"user"}"#,
            r#"{"type":"assistant","message":{"id":"a","id":"b"}}"#,
            r#"{"type":"assistant","message":{"content":[{"name":"a","name":"b"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"text":"a","text":"b"}]}}"#,
            r#"{"type":1}"#,
            r#"{"type":"assistant","message":"text"}"#,
            r#"{"type":"assistant","message":{"id":7}}"#,
            r#"{"type":"assistant","message":{"content":[{"name":["Edit"]}]}}"#,
            r#"{"type":"assistant"} trailing"#,
            r#"{"type":"assistant""#,
            r#"{"type":"bad \q escape"}"#,
            "[1]",
            "",
        ];
        for line in rows {
            let (skimmed, parsed) = both_ways(line);
            assert!(parsed.is_none(), "{line}");
            assert_eq!(skimmed, None, "{line}");
        }
    }

    /// A JSON value in the places a transcript row has them, odd types included.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |n| n.is_finite())
                .prop_map(|n| json!(n)),
            "\\PC{0,12}|[\"\\\\\n\t\u{1}\u{7f}\u{e9}\u{1F600}{}\\[\\],:]{0,12}"
                .prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,5}|type|id|name|text", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    fn any_block() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            any_value(),
            (
                prop_oneof![Just(json!("text")), Just(json!("tool_use")), any_value()],
                proptest::option::of(any_value()),
                proptest::option::of(any_value()),
                proptest::option::of(any_value()),
                any_value(),
            )
                .prop_map(|(kind, id, name, text, input)| {
                    let mut block = json!({"type": kind, "input": input});
                    for (key, value) in [("id", id), ("name", name), ("text", text)] {
                        if let Some(value) = value {
                            block[key] = value;
                        }
                    }
                    block
                }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn any_row_reads_the_same_skimmed_or_parsed(
            kind in proptest::option::of(proptest::prop_oneof![proptest::strategy::Just(json!("assistant")), any_value()]),
            id in proptest::option::of(any_value()),
            content in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Strategy::prop_map(proptest::collection::vec(any_block(), 0..5), Value::Array),
                any_value(),
            ]),
            null_message in proptest::bool::ANY,
            extra in any_value(),
            pretty in proptest::bool::ANY,
        ) {
            let mut message = json!({"model": "m", "usage": extra.clone()});
            if let Some(id) = id {
                message["id"] = id;
            }
            if let Some(content) = content {
                message["content"] = content;
            }
            let mut row = json!({"parentUuid": extra, "message": message});
            if null_message {
                row["message"] = Value::Null;
            }
            if let Some(kind) = kind {
                row["type"] = kind;
            }
            let line = match pretty {
                true => serde_json::to_string_pretty(&row).unwrap(),
                false => serde_json::to_string(&row).unwrap(),
            };
            let (skimmed, parsed) = both_ways(&line);
            proptest::prop_assert_eq!(skimmed, parsed, "{}", line);
        }
    }

    proptest::proptest! {
        #[test]
        fn text_keys_are_the_same_whatever_the_whitespace(text in "\\PC{0,64}", spaces in proptest::collection::vec("[ \t\r\n\u{a0}\u{2003}]{0,3}", 0..8)) {
            let mut spaced = String::new();
            let mut gaps = spaces.iter().cycle();
            for c in text.chars() {
                spaced.push(c);
                spaced.push_str(gaps.next().map_or("", String::as_str));
            }
            let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            proptest::prop_assert_eq!(TextKey::of(&spaced), TextKey::of(&squeezed));
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
                last_message: Some("done".into()),
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
        collect(&mut state, &path, &tools(), None, Duration::ZERO).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 1));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, b"ad\"}]}}\n").unwrap();
        collect(&mut state, &path, &tools(), None, Duration::ZERO).unwrap();
        assert_eq!((state.session.entries, state.session.tool_calls), (1, 2));
        assert_eq!(
            state.cursors[0].offset,
            std::fs::metadata(&path).unwrap().len()
        );
    }

    /// A turn as Claude Code 2.1.328 wrote it for the gate-claude scenario (lookup, two writes,
    /// final text), trimmed to the fields that matter.
    const TURN: [&str; 4] = [
        r#"{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"call_lookup","name":"mcp__memory__context_query","input":{}}],"stop_reason":null}}"#,
        r#"{"type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"tool_use","id":"call_write_1","name":"Write","input":{}}],"stop_reason":null}}"#,
        r#"{"type":"assistant","message":{"id":"msg_3","role":"assistant","content":[{"type":"tool_use","id":"call_write_2","name":"Write","input":{}}],"stop_reason":null}}"#,
        r#"{"type":"assistant","message":{"id":"msg_4","role":"assistant","content":[{"type":"text","text":"All files are written."}],"stop_reason":null}}"#,
    ];

    fn write_lines(path: &Path, lines: &[&str]) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        for line in lines {
            std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()).unwrap();
        }
    }

    #[test]
    fn a_lagging_transcript_is_read_on_until_the_last_message_shows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write_lines(&path, &TURN[..2]);
        let late = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            write_lines(&late, &TURN[2..]);
        });
        let mut state = State::fresh();
        let caught = collect(
            &mut state,
            &path,
            &tools(),
            Some("All files are written.\n"),
            Duration::from_secs(10),
        )
        .unwrap();
        writer.join().unwrap();
        assert!(matches!(caught, Caught::Up { .. }), "{caught:?}");
        assert_eq!(state.session.tool_calls, 3);
        assert_eq!(state.session.window.edits, 2);
        assert_eq!(state.session.entries, 4);
        assert_eq!(
            state.cursors[0].offset,
            std::fs::metadata(&path).unwrap().len()
        );
        // A repeat check on a current transcript finds the message at once and reads nothing
        // twice.
        let started = Instant::now();
        let caught = collect(
            &mut state,
            &path,
            &tools(),
            Some("All files are written."),
            Duration::from_secs(10),
        );
        assert!(matches!(caught.unwrap(), Caught::Up { .. }));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(state.session.tool_calls, 3);
    }

    #[test]
    fn a_message_that_never_shows_is_waited_for_only_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write_lines(&path, &TURN[..3]);
        let mut state = State::fresh();
        let caught = collect(
            &mut state,
            &path,
            &tools(),
            Some("All files are written."),
            Duration::from_millis(60),
        )
        .unwrap();
        let Caught::Behind { waited } = caught else {
            panic!("expected Behind, got {caught:?}");
        };
        assert!(waited >= Duration::from_millis(60), "{waited:?}");
        assert_eq!(state.session.tool_calls, 3);
    }

    #[test]
    fn the_text_must_be_the_newest_assistant_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        // The same words before a tool call do not end the turn.
        write_lines(
            &path,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Working on it."}]}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Edit"}]}}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":17}]}}"#,
            ],
        );
        let mut state = State::fresh();
        let caught = collect(
            &mut state,
            &path,
            &tools(),
            Some("Working  on it."),
            Duration::from_millis(20),
        )
        .unwrap();
        assert!(matches!(caught, Caught::Behind { .. }), "{caught:?}");
        assert_eq!(state.session.entries, 2);
        write_lines(
            &path,
            &[
                r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"Working\r\non it. "}]}}"#,
            ],
        );
        let caught = collect(
            &mut state,
            &path,
            &tools(),
            Some("Working  on it."),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(matches!(caught, Caught::Up { .. }), "{caught:?}");
        assert_eq!(state.session.entries, 3);
    }

    #[test]
    fn a_missing_transcript_is_an_error_naming_it() {
        let mut state = State::fresh();
        let err = collect(
            &mut state,
            Path::new("/nonexistent/t.jsonl"),
            &tools(),
            None,
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("/nonexistent/t.jsonl"));
    }
}
