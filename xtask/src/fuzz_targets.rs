//! The fuzz targets and their input generator, shared by `cargo xtask fuzz` (a million inputs
//! and more) and `tests/fuzz.rs` (a few thousand, in `cargo test`), which includes this file by
//! path. Stable Rust only: a seeded byte mutator of our own, no coverage instrumentation.
//!
//! Every parser that reads a user's file is a target. Each input must come back without a
//! panic and within a time bound; on top of that each target checks what its parser promises:
//! an unedited document is written back byte for byte, a refusal carries a `line:col` inside
//! the file, and the installer either refuses or round-trips (memloop's edit, then its removal
//! knowing the original, gives back the original bytes).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memloop::agents;
use memloop::agents::claude::gate as claude;
use memloop::agents::codex::gate as codex;
use memloop::agents::copilot::gate as copilot;
use memloop::agents::droid::gate as droid;
use memloop::agents::gemini::gate as gemini;
use memloop::agents::kimi::gate as kimi;
use memloop::agents::opencode::gate as opencode;
use memloop::agents::qwen::gate as qwen;
use memloop::agents::{copilot::trust as copilot_trust, gemini::trust as gemini_trust};
use memloop::agents::{kimi::trust as kimi_trust, qwen::trust as qwen_trust};
use memloop::config::{AgentId, Config, GateConfig};
use memloop::edit::Refusal;
use memloop::edit::json::{Dialect, JsonDoc};
use memloop::edit::markdown;
use memloop::edit::text::Encoding;
use memloop::edit::toml::TomlDoc;
use memloop::engine::{self, Content, Mode, PlanError};
use memloop::gate::rules::ToolSets;
use memloop::gate::state::State;
use memloop::memory::record::{Note, Record, Route};
use memloop::repo::Context;
use memloop::serve::transport;
use memloop::target::{Desired, Format, Target as FileTarget};

/// A deterministic generator (splitmix64): the same seed gives the same inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Json,
    Toml,
    Markdown,
    Config,
    Jsonl,
    Mcp,
    Note,
}

/// One parser entry and what it must hold.
pub struct Target {
    pub name: &'static str,
    pub about: &'static str,
    kind: Kind,
    run: fn(&mut Scratch, &[u8]) -> Result<(), String>,
}

pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "json",
            about: "JSON/JSONC editor: parse, value, write back unedited byte for byte",
            kind: Kind::Json,
            run: json,
        },
        Target {
            name: "toml",
            about: "TOML editor: parse, write back unedited byte for byte",
            kind: Kind::Toml,
            run: toml,
        },
        Target {
            name: "markdown",
            about: "Markdown block finder: find, upsert then remove gives the text back",
            kind: Kind::Markdown,
            run: markdown_block,
        },
        Target {
            name: "config",
            about: "memloop.toml: parse and validate; what memloop writes parses back the same",
            kind: Kind::Config,
            run: config,
        },
        Target {
            name: "install-json",
            about: "installer on settings.json, .mcp.json, opencode.json, kimi mcp.json: refuse \
                    with a position or round-trip",
            kind: Kind::Json,
            run: install_json,
        },
        Target {
            name: "install-markdown",
            about: "installer on CLAUDE.md: refuse with a position or round-trip",
            kind: Kind::Markdown,
            run: install_markdown,
        },
        Target {
            name: "install-toml",
            about: "installer on TOML targets: refuse with a position or round-trip",
            kind: Kind::Toml,
            run: install_toml,
        },
        Target {
            name: "claude-transcript",
            about: "gate: Claude Code transcript, read whole and in two steps",
            kind: Kind::Jsonl,
            run: claude_transcript,
        },
        Target {
            name: "kimi-wire",
            about: "gate: Kimi Code wire.jsonl, read whole and in two steps",
            kind: Kind::Jsonl,
            run: kimi_wire,
        },
        Target {
            name: "opencode-ledger",
            about: "gate: OpenCode ledger, read whole and in two steps",
            kind: Kind::Jsonl,
            run: opencode_ledger,
        },
        Target {
            name: "codex-rollout",
            about: "gate: Codex rollout, read whole and in two steps",
            kind: Kind::Jsonl,
            run: codex_rollout,
        },
        Target {
            name: "gemini-chat",
            about: "gate: Gemini chat recording ($set, $rewindTo), read whole and in two steps",
            kind: Kind::Jsonl,
            run: gemini_chat,
        },
        Target {
            name: "copilot-events",
            about: "gate: Copilot events.jsonl, read whole and in two steps",
            kind: Kind::Jsonl,
            run: copilot_events,
        },
        Target {
            name: "droid-transcript",
            about: "gate: Factory Droid session transcript, read whole and in two steps",
            kind: Kind::Jsonl,
            run: droid_transcript,
        },
        Target {
            name: "qwen-recording",
            about: "gate: Qwen Code chat recording, read whole and in two steps",
            kind: Kind::Jsonl,
            run: qwen_recording,
        },
        Target {
            name: "note",
            about: "memory: a note's and a route's front matter; what is rendered parses back the same",
            kind: Kind::Note,
            run: note,
        },
        Target {
            name: "trust-json",
            about: "trust files (~/.claude.json, trustedFolders.json, Qwen settings, Copilot config, \
                    Kimi's trust record): readers, and refuse with a position or round-trip",
            kind: Kind::Json,
            run: trust_json,
        },
        Target {
            name: "trust-toml",
            about: "trust file ~/.codex/config.toml: refuse with a position or round-trip",
            kind: Kind::Toml,
            run: trust_toml,
        },
        Target {
            name: "hook-input",
            about: "gate: the agents' Stop and record input on stdin",
            kind: Kind::Json,
            run: hook_input,
        },
        Target {
            name: "mcp-line",
            about: "memory server: one request line, and the id search of an oversize one",
            kind: Kind::Mcp,
            run: mcp_line,
        },
    ]
}

impl Target {
    /// A target around any function, to check the harness itself (tests/fuzz.rs).
    #[allow(dead_code)]
    pub fn probe(name: &'static str, run: fn(&mut Scratch, &[u8]) -> Result<(), String>) -> Target {
        Target {
            name,
            about: "a probe of the harness",
            kind: Kind::Json,
            run,
        }
    }
}

/// Per-target working state: a scratch folder for the targets that read files.
pub struct Scratch {
    dir: tempfile::TempDir,
    root: PathBuf,
    installer: Vec<FileTarget>,
    /// Every agent's per-machine trust files (`memloop trust`) memloop edits by fragments.
    trust: Vec<FileTarget>,
    /// Kimi Code's trust record for the scratch repository (a whole file memloop writes).
    kimi_trust: Option<PathBuf>,
    trust_config: Config,
    tools: ToolSets,
    /// Known outcomes that are not failures, counted for the report.
    notes: std::collections::BTreeMap<&'static str, u64>,
}

impl Scratch {
    pub fn new() -> Result<Scratch, String> {
        // Memory-backed where there is one: the gate and installer targets write every input.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::Builder::new()
                .prefix("memloop-fuzz")
                .tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .map_err(|e| e.to_string())?;
        let root = std::fs::canonicalize(dir.path()).map_err(|e| e.to_string())?;
        let config = Config {
            agents: vec![AgentId::Claude, AgentId::Opencode, AgentId::Kimi],
            ..Config::default()
        };
        let ctx = Context {
            root: &root,
            config: &config,
            server: config.server().map_err(|e| format!("{e:#}"))?,
            home: root.join("home"),
            user_scope: true,
            trusted: false,
        };
        let wanted = agents::wanted(&ctx).map_err(|e| format!("{e:#}"))?;
        let installer = wanted
            .targets
            .into_iter()
            .filter(|t| matches!(t.desired, Desired::Fragments { .. }))
            .collect();
        let trust_config = Config {
            agents: AgentId::ALL.to_vec(),
            ..Config::default()
        };
        let ctx = Context {
            config: &trust_config,
            ..ctx
        };
        let all_trust = agents::trust(&ctx).map_err(|e| format!("{e:#}"))?;
        let kimi_trust = all_trust
            .iter()
            .find(|t| matches!(t.desired, Desired::Whole { .. }) && t.agents == [AgentId::Kimi])
            .map(|t| t.path.clone());
        let trust = all_trust
            .into_iter()
            .filter(|t| matches!(t.desired, Desired::Fragments { .. }))
            .collect();
        Ok(Scratch {
            dir,
            root,
            installer,
            trust,
            kimi_trust,
            trust_config,
            tools: ToolSets::new(&GateConfig::default()),
            notes: Default::default(),
        })
    }

    fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn trust_targets(&self, format: fn(&Format) -> bool) -> Vec<FileTarget> {
        self.trust
            .iter()
            .filter(|t| matches!(&t.desired, Desired::Fragments { format: f, .. } if format(f)))
            .cloned()
            .collect()
    }

    fn installer_targets(&self, format: fn(&Format) -> bool) -> Vec<FileTarget> {
        self.installer
            .iter()
            .filter(|t| matches!(&t.desired, Desired::Fragments { format: f, .. } if format(f)))
            .cloned()
            .collect()
    }
}

// ---- the targets ----------------------------------------------------------------------------

/// Every refusal of a user's file carries a position inside that file.
fn positioned(refusal: &Refusal, bytes: &[u8]) -> Result<(), String> {
    let Some((line, col)) = refusal.line else {
        return Err(format!("refused without a position: {refusal}"));
    };
    // Parsers count lone CRs (and jsonc-parser U+2028/U+2029) as line breaks too.
    let text = String::from_utf8_lossy(bytes);
    let lines = text.matches('\n').count()
        + text.matches('\r').count()
        + text.matches(['\u{2028}', '\u{2029}']).count()
        + 1;
    if line == 0 || col == 0 || line > lines {
        return Err(format!(
            "refusal position {line}:{col} is outside the file ({lines} lines): {refusal}"
        ));
    }
    Ok(())
}

fn json(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let (text, encoding) = match Encoding::decode(input, "f.json") {
        Ok(decoded) => decoded,
        Err(refusal) => return positioned(&refusal, input),
    };
    for dialect in [Dialect::Strict, Dialect::Jsonc, Dialect::Comments] {
        match JsonDoc::parse(&text, dialect, "f.json") {
            Ok(doc) => {
                let _ = doc.value();
                // A blank file is read as `{}` on purpose.
                let blank = text.trim().is_empty();
                if !blank && encoding.encode(&doc.to_text()) != input {
                    return Err(format!("{dialect:?}: an unedited document changed"));
                }
            }
            Err(refusal) => positioned(&refusal, text.as_bytes())?,
        }
    }
    Ok(())
}

fn toml(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let (text, encoding) = match Encoding::decode(input, "f.toml") {
        Ok(decoded) => decoded,
        Err(refusal) => return positioned(&refusal, input),
    };
    match TomlDoc::parse(&text, "f.toml") {
        Ok(doc) => {
            if encoding.encode(&doc.to_text()) != input {
                return Err("an unedited document changed".into());
            }
            Ok(())
        }
        Err(refusal) => positioned(&refusal, text.as_bytes()),
    }
}

fn markdown_block(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let (text, _) = match Encoding::decode(input, "CLAUDE.md") {
        Ok(decoded) => decoded,
        Err(refusal) => return positioned(&refusal, input),
    };
    let spans = match markdown::find(&text, "CLAUDE.md") {
        Ok(spans) => spans,
        Err(refusal) => return positioned(&refusal, text.as_bytes()),
    };
    let body = "Use the memory server.\n";
    let with = match markdown::upsert(&text, body, "CLAUDE.md") {
        Ok(with) => with,
        Err(refusal) => return positioned(&refusal, text.as_bytes()),
    };
    let again = markdown::upsert(&with, body, "CLAUDE.md").map_err(|r| format!("{r}"))?;
    if again != with {
        return Err("a second upsert changed the text".into());
    }
    if markdown::find(&with, "CLAUDE.md")
        .map_err(|r| format!("after upsert: {r}"))?
        .len()
        != 1
    {
        return Err("after upsert there is not exactly one block".into());
    }
    let without = markdown::remove(&with, "CLAUDE.md").map_err(|r| format!("{r}"))?;
    if spans.is_empty() && without != text {
        return Err("upsert then remove did not give the text back".into());
    }
    Ok(())
}

fn config(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok(());
    };
    if let Ok(config) = Config::parse(text, Path::new("memloop.toml")) {
        let written = config.to_toml();
        let back = Config::parse(&written, Path::new("memloop.toml"))
            .map_err(|e| format!("memloop's own memloop.toml does not parse: {e:#}"))?;
        if back != config {
            return Err("memloop.toml as memloop writes it reads back differently".into());
        }
    }
    Ok(())
}

fn install_json(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    install(scratch, input, |f| matches!(f, Format::Json(_)))
}

fn install_markdown(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    install(scratch, input, |f| matches!(f, Format::Markdown))
}

fn install_toml(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    install(scratch, input, |f| matches!(f, Format::Toml))
}

/// Every installer target of `format` gets the input: memloop's edit either refuses with a
/// position, or applies, is idempotent, and comes off again leaving the original bytes.
fn install(scratch: &mut Scratch, input: &[u8], format: fn(&Format) -> bool) -> Result<(), String> {
    let targets = scratch.installer_targets(format);
    if targets.is_empty() {
        return Err("no installer target of this format".into());
    }
    for target in &targets {
        install_one(scratch, target, input).map_err(|e| format!("{}: {e}", target.display))?;
    }
    Ok(())
}

fn install_one(scratch: &mut Scratch, target: &FileTarget, input: &[u8]) -> Result<(), String> {
    let path = &target.path;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, input).map_err(|e| e.to_string())?;
    let root = scratch.root.clone();
    let plan = |mode: Mode, original: Option<Content>| {
        engine::plan(&root, std::slice::from_ref(target), mode, &|_| {
            original.clone()
        })
    };
    let installed = match plan(Mode::Install, None) {
        Ok(changes) => changes.into_iter().next().ok_or("no change planned")?.after,
        Err(PlanError::Refused(refusals)) => {
            for refusal in &refusals {
                let decoded = Encoding::decode(input, "").map(|(t, _)| t.into_bytes());
                positioned(refusal, decoded.as_deref().unwrap_or(input))?;
            }
            return Ok(());
        }
        Err(PlanError::Other(err)) => return Err(format!("failed without a refusal: {err:#}")),
    };
    let Content::File { text: installed } = installed else {
        return Err(format!("installing made {installed:?}"));
    };
    std::fs::write(path, &installed).map_err(|e| e.to_string())?;
    let original = Content::File {
        text: String::from_utf8(input.to_vec()).map_err(|_| "accepted a non-UTF-8 file")?,
    };
    let again = plan(Mode::Install, Some(original.clone()))
        .map_err(|e| format!("the installed file is refused: {e:?}"))?;
    if !again.iter().all(|c| c.is_noop()) {
        return Err("a second install changes the file".into());
    }
    let removed = plan(Mode::Remove, Some(original.clone()))
        .map_err(|e| format!("removal is refused: {e:?}"))?;
    let after = &removed.first().ok_or("no removal planned")?.after;
    if *after == original {
        return Ok(());
    }
    // A file that already held memloop's fragments loses them on removal, as it should.
    std::fs::write(path, input).map_err(|e| e.to_string())?;
    let held_memloop = plan(Mode::Remove, Some(original.clone()))
        .map(|changes| changes.iter().any(|c| !c.is_noop()))
        .unwrap_or(false);
    let decoded = Encoding::decode(input, "")
        .map(|(text, _)| text)
        .unwrap_or_default();
    if held_memloop || (decoded.trim().is_empty() && is_blank_document(after)) {
        return Ok(());
    }
    if layout_only(input, after.text().as_bytes()) {
        scratch.note(LAYOUT);
        return Ok(());
    }
    let json = matches!(
        target.desired,
        Desired::Fragments {
            format: Format::Json(_),
            ..
        }
    );
    let kept = |got: &[u8]| {
        got.trim_ascii_end()
            .strip_suffix(b"{}")
            .is_some_and(|rest| rest.trim_ascii_end() == input.trim_ascii_end())
    };
    if json && kept(after.text().as_bytes()) {
        scratch.note(VALUELESS);
        return Ok(());
    }
    Err(format!(
        "install then remove does not give the original back:\n{}",
        first_difference(input, after.text().as_bytes())
    ))
}

/// Known and reported, not a failure: inserting into a JSON container written on one line
/// makes it multi-line (jsonc-parser's insertion), and removal does not join the lines again
/// (nor re-split an empty `{\n}`). Only whitespace outside strings differs; every other byte,
/// comments and key order included, is the user's.
pub const LAYOUT: &str = "JSON layout (whitespace outside strings) not restored after removal";
/// Known and reported, not a failure: a JSONC file holding only comments gets `{}` added, and
/// removal leaves it (the comments stay).
pub const VALUELESS: &str = "comment-only JSONC file left with `{}` after removal";

fn layout_only(original: &[u8], got: &[u8]) -> bool {
    original != got && without_layout(original) == without_layout(got)
}

/// The bytes without whitespace outside strings and comments (a quote inside a comment starts
/// no string).
fn without_layout(bytes: &[u8]) -> Vec<u8> {
    enum In {
        Code,
        String {
            escaped: bool,
        },
        LineComment,
        /// Opened at this byte (its `/`).
        BlockComment(usize),
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut state = In::Code;
    for (at, &byte) in bytes.iter().enumerate() {
        let next = bytes.get(at + 1).copied();
        match state {
            In::String { escaped } => {
                out.push(byte);
                state = match (escaped, byte) {
                    (true, _) => In::String { escaped: false },
                    (false, b'\\') => In::String { escaped: true },
                    (false, b'"') => In::Code,
                    _ => In::String { escaped: false },
                };
            }
            In::LineComment => {
                if byte == b'\n' {
                    state = In::Code;
                } else if byte != b'\r' {
                    out.push(byte);
                }
            }
            In::BlockComment(opened) => {
                out.push(byte);
                if byte == b'/' && at >= opened + 3 && bytes[at - 1] == b'*' {
                    state = In::Code;
                }
            }
            In::Code => {
                match (byte, next) {
                    (b'"', _) => state = In::String { escaped: false },
                    (b'/', Some(b'/')) => state = In::LineComment,
                    (b'/', Some(b'*')) => state = In::BlockComment(at),
                    _ => {}
                }
                if !byte.is_ascii_whitespace() {
                    out.push(byte);
                }
            }
        }
    }
    out
}

/// Missing, blank, or an empty object: what memloop leaves of a file that held nothing.
fn is_blank_document(content: &Content) -> bool {
    match content {
        Content::Missing => true,
        Content::File { text } => {
            let text = text.trim_start_matches('\u{feff}').trim();
            text.is_empty() || text == "{}"
        }
        Content::Link { .. } => false,
    }
}

fn first_difference(want: &[u8], got: &[u8]) -> String {
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let window = |bytes: &[u8]| {
        let start = at.saturating_sub(40);
        String::from_utf8_lossy(&bytes[start..(at + 40).min(bytes.len())]).into_owned()
    };
    format!(
        "  at byte {at}: original {:?}\n  got {:?}",
        window(want),
        window(got)
    )
}

/// A log read in one go and in two (a prefix first, as if the agent were still writing) must
/// both work and count the same calls.
fn two_step(
    input: &[u8],
    path: &Path,
    mut collect: impl FnMut(&mut State) -> anyhow::Result<()>,
) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, input).map_err(|e| e.to_string())?;
    let mut whole = State::fresh();
    let whole_read = collect(&mut whole).is_ok();

    let split = if input.is_empty() {
        0
    } else {
        usize::from(input[input.len() / 2]) * input.len() / 256
    };
    std::fs::write(path, &input[..split]).map_err(|e| e.to_string())?;
    let mut stepped = State::fresh();
    let first = collect(&mut stepped).is_ok();
    std::fs::write(path, input).map_err(|e| e.to_string())?;
    let second = collect(&mut stepped).is_ok();
    let third = collect(&mut stepped).is_ok();
    if whole_read && first && second && third && whole.session != stepped.session {
        return Err(format!(
            "read in two steps (split at byte {split}) counts {:?}, read whole {:?}",
            stepped.session, whole.session
        ));
    }
    Ok(())
}

fn claude_transcript(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("transcript.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| {
        claude::collect(state, &path, tools, None, std::time::Duration::ZERO).map(|_| ())
    })
}

fn kimi_wire(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let logs = vec![scratch.path("kimi/agents/main/wire.jsonl")];
    let tools = &scratch.tools;
    two_step(input, &logs[0], |state| kimi::collect(state, &logs, tools))
}

fn opencode_ledger(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("ledger.jsonl");
    let tools = &scratch.tools;
    let stop = opencode::StopInput {
        session_id: "s".into(),
        assistant_messages: None,
        stop_hook_active: false,
    };
    two_step(input, &path, |state| {
        opencode::collect(state, &path, &stop, "memloop", tools)
    })
}

fn codex_rollout(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("rollout.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| codex::collect(state, &path, tools))
}

fn gemini_chat(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("session-chat.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| gemini::collect(state, &path, tools))
}

fn copilot_events(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("session-state/s/events.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| {
        copilot::collect(state, &path, tools, None, std::time::Duration::ZERO).map(|_| ())
    })
}

fn droid_transcript(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("sessions/-p/s.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| {
        droid::collect(state, &path, tools, None, std::time::Duration::ZERO).map(|_| ())
    })
}

fn qwen_recording(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let path = scratch.path("qwen.jsonl");
    let tools = &scratch.tools;
    two_step(input, &path, |state| {
        qwen::collect(state, &path, tools, None, std::time::Duration::ZERO).map(|_| ())
    })
}

/// A note or route read from its file; what memloop renders from it reads back the same.
fn note(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok(());
    };
    fn round_trip<T: Record + PartialEq + std::fmt::Debug>(text: &str) -> Result<(), String> {
        let Ok(record) = T::parse(text) else {
            return Ok(());
        };
        let rendered = record.render();
        match T::parse(&rendered) {
            Ok(again) if again == record => Ok(()),
            Ok(again) => Err(format!(
                "a {} renders as {rendered:?}, which reads back as {again:?}, not {record:?}",
                T::KIND
            )),
            Err(err) => Err(format!(
                "a {} renders as {rendered:?}, which does not read back: {err:#}",
                T::KIND
            )),
        }
    }
    round_trip::<Note>(text)?;
    round_trip::<Route>(text)
}

/// The trust files: each reader on what parses, and the installer's edit of every JSON trust
/// file (refuse with a position, or round-trip); Kimi's whole trust record is kept byte for
/// byte when it is memloop's and left alone when it is the user's.
fn trust_json(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) {
        let _ = gemini_trust::verdict(&value, &scratch.root);
        let _ = gemini_trust::invalid_level(&value);
        let _ = copilot_trust::trusted_by(&value, &scratch.root);
        let entry = serde_json::json!({"command": "memloop", "args": ["serve"]});
        let _ = qwen_trust::approval_state(value.get("x"), "x", "memory", &entry);
        let _ = qwen_trust::approval_state(Some(&value), "x", "memory", &entry);
    }
    for target in scratch.trust_targets(|f| matches!(f, Format::Json(_))) {
        install_one(scratch, &target, input).map_err(|e| format!("{}: {e}", target.display))?;
    }
    if let Some(path) = scratch.kimi_trust.clone() {
        std::fs::create_dir_all(path.parent().unwrap_or(&path)).map_err(|e| e.to_string())?;
        std::fs::write(&path, input).map_err(|e| e.to_string())?;
        let config = scratch.trust_config.clone();
        let ctx = Context {
            root: &scratch.root,
            config: &config,
            server: config.server().map_err(|e| format!("{e:#}"))?,
            home: scratch.root.join("home"),
            user_scope: true,
            trusted: true,
        };
        let targets = kimi_trust::targets(&ctx);
        let memloops = serde_json::from_slice::<serde_json::Value>(input)
            .is_ok_and(|v| v.get("trustedBy") == Some(&serde_json::json!("memloop")));
        let kept = targets.iter().any(
            |t| matches!(&t.desired, Desired::Whole { content } if content.as_bytes() == input),
        );
        match (memloops, targets.is_empty(), kept) {
            (true, _, true) | (false, true, _) => {}
            (true, _, false) => {
                return Err("memloop's Kimi trust record is not kept as it is".into());
            }
            (false, false, _) => {
                return Err("the user's Kimi trust record would be replaced".into());
            }
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

fn trust_toml(scratch: &mut Scratch, input: &[u8]) -> Result<(), String> {
    let targets = scratch.trust_targets(|f| matches!(f, Format::Toml));
    if targets.is_empty() {
        return Err("no TOML trust target".into());
    }
    for target in &targets {
        install_one(scratch, target, input).map_err(|e| format!("{}: {e}", target.display))?;
    }
    Ok(())
}

fn hook_input(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(input) {
        let _ = claude::parse_input(&value);
        let _ = kimi::parse_input(&value);
        let _ = opencode::parse_stop(&value);
        let _ = opencode::parse_record(&value);
        let _ = codex::parse_input(&value);
        let _ = gemini::parse_input(&value);
        let _ = qwen::parse_input(&value);
        let _ = copilot::parse_input(&value);
        let _ = copilot::recognises(&value);
        let _ = copilot::stop_id(&value);
    }
    Ok(())
}

fn mcp_line(_: &mut Scratch, input: &[u8]) -> Result<(), String> {
    match transport::classify(input) {
        transport::Incoming::Reply(reply) => {
            serde_json::to_vec(&reply).map_err(|e| format!("the reply does not serialize: {e}"))?;
        }
        transport::Incoming::Message(_) | transport::Incoming::Skip => {}
    }
    let window = 4096.min(input.len());
    let reply = transport::oversize(
        &input[..window],
        &input[input.len() - window..],
        input.len() as u64,
    );
    serde_json::to_vec(&reply)
        .map_err(|e| format!("the oversize reply does not serialize: {e}"))?;
    // An id found in the line's start must be the one a full parse of that line sees.
    if let (Some(found), Ok(serde_json::Value::Object(message))) = (
        transport::id_in_head(&input[..window]),
        serde_json::from_slice::<serde_json::Value>(input),
    ) && window == input.len()
    {
        let id = serde_json::to_value(&found).map_err(|e| e.to_string())?;
        if message.get("id") != Some(&id) {
            return Err(format!(
                "id_in_head found {id}, the message's id is {:?}",
                message.get("id")
            ));
        }
    }
    Ok(())
}

// ---- seeds ----------------------------------------------------------------------------------

/// Seed inputs for each kind: files from `tests/cases`, the real-world corpus (when found),
/// and hand-written bad inputs.
pub struct Seeds {
    by_kind: Vec<(Kind, Vec<Vec<u8>>)>,
}

/// Seed files larger than this are left out: they slow every input down, not the search.
const SEED_LIMIT: u64 = 64 << 10;

impl Seeds {
    /// `workspace` is the repository's root; the corpus is looked for beside it.
    pub fn load(workspace: &Path) -> Seeds {
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        let mut roots = vec![workspace.join("tests/cases")];
        for corpus in ["../shared/corpus", "../../shared/corpus"] {
            let dir = workspace.join(corpus);
            if dir.is_dir() {
                roots.push(dir);
                break;
            }
        }
        for root in roots {
            walk(&root, &mut files);
        }
        let pick = |test: fn(&str) -> bool| -> Vec<Vec<u8>> {
            files
                .iter()
                .filter(|(path, _)| test(&path.to_string_lossy()))
                .map(|(_, bytes)| bytes.clone())
                .collect()
        };
        let mut json = pick(|p| p.ends_with(".json") || p.ends_with(".jsonc"));
        let mut toml = pick(|p| p.ends_with(".toml") && !p.ends_with("case.toml"));
        let mut markdown = pick(|p| p.ends_with(".md"));
        let mut config = pick(|p| p.ends_with("memloop.toml"));
        json.extend(BAD_JSON.iter().map(|s| s.as_bytes().to_vec()));
        toml.extend(BAD_TOML.iter().map(|s| s.as_bytes().to_vec()));
        markdown.extend(BAD_MARKDOWN.iter().map(|s| s.as_bytes().to_vec()));
        config.push(Config::default().to_toml().into_bytes());
        config.extend(BAD_CONFIG.iter().map(|s| s.as_bytes().to_vec()));
        let jsonl = JSONL
            .iter()
            .chain(AGENT_LOGS)
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let mcp = MCP.iter().map(|s| s.as_bytes().to_vec()).collect();
        let notes = NOTES.iter().map(|s| s.as_bytes().to_vec()).collect();
        Seeds {
            by_kind: vec![
                (Kind::Json, json),
                (Kind::Toml, toml),
                (Kind::Markdown, markdown),
                (Kind::Config, config),
                (Kind::Jsonl, jsonl),
                (Kind::Mcp, mcp),
                (Kind::Note, notes),
            ],
        }
    }

    fn of(&self, kind: Kind) -> &[Vec<u8>] {
        self.by_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, seeds)| seeds.as_slice())
            .unwrap_or_default()
    }

    pub fn count(&self, target: &Target) -> usize {
        self.of(target.kind).len()
    }
}

fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, out);
        } else if meta.is_file()
            && meta.len() <= SEED_LIMIT
            && let Ok(bytes) = std::fs::read(&path)
        {
            out.push((path, bytes));
        }
    }
}

const BAD_JSON: &[&str] = &[
    "",
    "\u{feff}",
    "{}",
    "[]",
    "null",
    "{\"mcpServers\": {}, \"mcpServers\": {\"x\": {\"command\": \"y\"}}}",
    "{\"hooks\": {\"Stop\": []}, \"mcp\": {}}",
    "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"memloop hook stop --agent claude\"}]}]}}",
    "{\"hooks\": []}",
    "{\"hooks\": {\"Stop\": {}}}",
    "{\"mcpServers\": []}",
    "{\"mcp\": {\"memloop\": {\"type\": \"local\", \"command\": [\"memloop\", \"serve\"]}}}",
    "{\r\n  \"a\": 1\r\n}\r\n",
    "{\n  // comment\n  \"a\": [1, 2,],\n  /* block */\n}\n",
    "{\"a\": \"\\ud800\"}",
    "{\"a\": 1e999999, \"b\": -0, \"c\": 123456789012345678901234567890}",
    "{\"a\":\u{0}}",
    "{\"$schema\": \"https://opencode.ai/config.json\"}",
    "{\"a\": 1} trailing",
    "{\"a\": 1",
    "{\"a\": \"unterminated",
    "/* only a comment */",
];

const BAD_TOML: &[&str] = &[
    "",
    "[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\n",
    "hooks = { event = \"Stop\" }\n",
    "[hooks]\nevent = \"Stop\"\n",
    "a = 1\na = 2\n",
    "[t]\n[t]\n",
    "[[hooks]]\n[hooks.x]\n",
    "a = \"\"\"\nunterminated",
    "a = 'x'\r\nb = 2\r\n",
    "\u{feff}a = 1\n",
    "[mcpServers.memloop]\ncommand = \"memloop\"\nargs = [\"serve\"]\n",
    "a = [[[[[[[[[[1]]]]]]]]]]\n",
    "a = {b = {c = {d = 1}}}\n",
    "x = 1979-05-27T07:32:00Z\ny = inf\nz = nan\n",
];

const BAD_MARKDOWN: &[&str] = &[
    "",
    "# Notes\n",
    "<!-- memloop:begin v1 -->\nold\n<!-- memloop:end -->\n",
    "<!-- memloop:begin v1 -->\nunterminated\n",
    "<!-- memloop:end -->\n",
    "```md\n<!-- memloop:begin v1 -->\nexample\n<!-- memloop:end -->\n```\n",
    "~~~\n<!-- memloop:begin v1 -->\n~~~\n",
    "    <!-- memloop:begin v1 -->\n    <!-- memloop:end -->\n",
    "text <!-- memloop:begin v1 --> inline <!-- memloop:end -->\n",
    "<!-- memloop:begin v1 -->\n<!-- memloop:begin v1 -->\n<!-- memloop:end -->\n",
    "<!-- memloop:begin v99 -->\nx\n<!-- memloop:end -->",
    "\r\n# CRLF\r\n\r\ntext\r\n",
    "@AGENTS.md\n",
];

const BAD_CONFIG: &[&str] = &[
    "",
    "version = 2\n",
    "agents = []\n",
    "agents = [\"claude\", \"claude\"]\n",
    "agents = \"claude\"\n",
    "[server]\nname = \"\"\n",
    "[server]\nname = \"has space\"\n",
    "[server]\nurl = \"https://user:sk-secret@host/mcp\"\n",
    "[server]\ncommand = \"env KEY=sk-1 srv\"\nargs = [\"--api-key\", \"sk-1\"]\n",
    "[server]\nheaders = { Authorization = \"Bearer sk-1\" }\n",
    "[gate]\ninterval = 0\nmin_tool_calls = -1\n",
    "[gate]\nstore_tools = [\"\", \"*\"]\n",
    "agents = [\"claude\"]\nagents = [\"kimi\"]\n",
    "unknown = 1\n",
];

const JSONL: &[&str] = &[
    "{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"Edit\"}]}}\n{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"mcp__memloop__context_query\"}]}}\n{\"type\":\"user\",\"message\":{\"content\":\"ok\"}}\n",
    "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n",
    "{\"type\":\"context.append_loop_event\",\"agentId\":\"main\",\"event\":{\"type\":\"step.begin\",\"uuid\":\"u\",\"turnId\":\"1\",\"step\":1}}\n{\"type\":\"context.append_loop_event\",\"agentId\":\"main\",\"event\":{\"type\":\"tool.call\",\"toolCallId\":\"c\",\"name\":\"WriteFile\",\"args\":{}}}\n{\"type\":\"context.append_loop_event\",\"agentId\":\"main\",\"event\":{\"type\":\"step.end\",\"uuid\":\"u\"}}\n",
    "{\"tool\":\"edit\",\"sessionID\":\"s\"}\n{\"tool\":\"memloop_memory_store\"}\n{\"tool\":null}\n",
    "{\"session_id\":\"s\",\"transcript_path\":\"/tmp/t.jsonl\",\"cwd\":\"/tmp\",\"stop_hook_active\":true}",
    "{\"session_id\":\"s\",\"cwd\":\"/tmp\",\"assistant_messages\":3}",
    "{\"type\":\"assistant\"\n",
    "\n\n\r\n",
    "{\"type\":\"assistant\",\"message\":{\"content\":\"not a list\"}}\n",
];

/// Codex rollouts, Gemini chat recordings (a message appended again, `$set`, `$rewindTo`),
/// Copilot's events.jsonl, Qwen's recording and Droid's transcript, as the real programs write them.
const AGENT_LOGS: &[&str] = &[
    "{\"type\":\"message\",\"id\":\"h1\",\"timestamp\":\"t\",\"message\":{\"role\":\"user\",\"content\":[],\"visibility\":\"user_only\",\"hookEventName\":\"SessionStart\",\"hookResults\":[{\"exitCode\":0,\"stdout\":\"{}\",\"stderr\":\"\"}]}}\n{\"type\":\"message\",\"id\":\"a1\",\"parentId\":\"u1\",\"timestamp\":\"t\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call_0\",\"name\":\"Create\",\"input\":{\"file_path\":\"/p/a.txt\",\"content\":\"hello\\n\"}}],\"modelId\":\"custom:Fake-0\"}}\n{\"type\":\"message\",\"id\":\"a2\",\"parentId\":\"r1\",\"timestamp\":\"t\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"memory___memory_store\",\"input\":{}}]}}\n",
    "{\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"s\"}}\n{\"timestamp\":\"2026-12-01T10:00:01.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"x\"}]}}\n{\"timestamp\":\"2026-12-01T10:00:02.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"function_call\",\"name\":\"exec_command\",\"arguments\":\"{}\",\"call_id\":\"c1\"}}\n{\"timestamp\":\"2026-12-01T10:00:03.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"}}\n{\"timestamp\":\"2026-12-01T10:00:04.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"function_call\",\"name\":\"memory_store\",\"namespace\":\"mcp__memory\",\"arguments\":\"{}\",\"call_id\":\"c2\"}}\n{\"timestamp\":\"2026-12-01T10:00:05.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"custom_tool_call\",\"name\":\"apply_patch\",\"input\":\"*** Begin Patch\",\"call_id\":\"c3\"}}\n{\"timestamp\":\"2026-12-01T10:00:06.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"go\"}}\n",
    "{\"sessionId\":\"168df275\",\"kind\":\"main\"}\n{\"$set\":{\"messages\":[{\"id\":\"ctx\",\"type\":\"user\",\"content\":[]}]}}\n{\"id\":\"g1\",\"type\":\"gemini\",\"content\":\"\",\"toolCalls\":[]}\n{\"id\":\"g1\",\"type\":\"gemini\",\"content\":\"\",\"toolCalls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"args\":{},\"status\":\"success\"}]}\n{\"id\":\"u2\",\"type\":\"user\",\"content\":[{\"text\":\"KNOWLEDGE CHECK\"}]}\n{\"$rewindTo\":\"u2\"}\n{\"id\":\"g4\",\"type\":\"gemini\",\"content\":\"\",\"toolCalls\":[{\"id\":\"q\",\"name\":\"mcp_memory_context_query\",\"args\":{},\"status\":\"success\"},{\"id\":\"s0\",\"name\":\"mcp_memory_memory_store\",\"args\":{},\"status\":\"error\"},{\"id\":\"r1\",\"name\":\"replace\",\"args\":{},\"status\":\"cancelled\"}]}\n",
    "{\"type\":\"session.start\",\"data\":{\"sessionId\":\"s\",\"copilotVersion\":\"1.0.102\"},\"id\":\"a\"}\n{\"type\":\"assistant.message\",\"data\":{\"content\":\"\",\"toolRequests\":[{\"toolCallId\":\"call_0\",\"name\":\"create\",\"arguments\":{}}]},\"id\":\"c\",\"timestamp\":\"2026-12-01T12:14:35.000Z\"}\n{\"type\":\"tool.execution_start\",\"data\":{\"toolCallId\":\"call_0\",\"toolName\":\"create\",\"arguments\":{\"path\":\"/r/a.txt\"}},\"id\":\"d\"}\n{\"type\":\"tool.execution_start\",\"data\":{\"toolCallId\":\"call_1\",\"toolName\":\"memory-memory_store\",\"mcpServerName\":\"memory\",\"mcpToolName\":\"memory_store\"},\"id\":\"g\"}\n{\"type\":\"tool.execution_start\",\"data\":{\"toolCallId\":\"call_2\",\"toolName\":\"bash\"},\"id\":\"h\"}\n{\"type\":\"assistant.turn_end\",\"data\":{\"turnId\":\"3\"}}\n",
    "{\"uuid\":\"u\",\"type\":\"user\",\"message\":{\"role\":\"user\",\"parts\":[{\"text\":\"go\"}]}}\n{\"uuid\":\"a1\",\"sessionId\":\"q\",\"type\":\"assistant\",\"message\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"id\":\"c1\",\"name\":\"mcp__memory__context_query\",\"args\":{}}}]}}\n{\"uuid\":\"a2\",\"sessionId\":\"q\",\"type\":\"assistant\",\"message\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"id\":\"c2\",\"name\":\"write_file\",\"args\":{}}},{\"text\":\"done\"}]}}\n",
];

/// Notes and routes as memloop writes them, and as a person might edit them.
const NOTES: &[&str] = &[
    "---\ncategory: decisions\nimportance: 7\ntags: [build, layout]\ncreated: 2026-11-30T09:55:00.000Z\n---\nThe build puts generated code under target/gen; keep it out of git.\n",
    "---\ncategory: \"gotchas\"\nimportance: 10\ntags: [\"a b\", \"c,d\"]\ntask_id: \"t-1\"\ncreated: \"2026-11-30T09:55:00.000Z\"\nforgotten: 2026-12-01T00:00:00.000Z\nreviewer: kept as is\n---\nline one\n\n---\nnot front matter\n",
    "---\r\ncategory: patterns\r\nimportance: 3\r\ntags: []\r\ncreated: x\r\n---\r\nCRLF body\r\n",
    "---\ntitle: Where the gate lives\ndescription: \"src/gate: the rules\\nand readers\"\npaths: [src/gate/mod.rs, \"src/gate/a b.rs\"]\ncreated: 2026-06-01T00:00:00.000Z\nupdated: 2026-06-02T00:00:00.000Z\n---\nbody\n",
    "---\ncategory: context\nimportance: 0\n---\n",
    "---\n---\n",
    "no front matter at all\n",
    // Once failed: a lone CR that YAML reads as a line end; a NUL in a quoted value; a nesting
    // of one mapping per `: ` that took a recursive reader down.
    "---\r\ncategory: patterns\r\nimportance: 3\r\x0etags: []\r\ncreated: x\r\n---\r\nbody\r\n",
    "---\ncategory: gotchas\nimportance: 10\ntags: []\ncreated: \"2026-11-30\\u0000T09:55:00.000Z\\u007f\"\n---\nx\n",
    "---\ncategory: \"got\\\\chas\"\n: : : : : : : : : : : : : : : : : : : : : : : : : : : : : : : : : : : :\n---\n",
];

const MCP: &[&str] = &[
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"a\",\"version\":\"1\"}}}",
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/call\",\"params\":{\"name\":\"memory_store\",\"arguments\":{\"content\":\"a\",\"category\":\"gotchas\",\"importance\":5,\"tags\":[\"a\",\"b\"]}}}",
    "{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"context_query\",\"arguments\":[1]},\"id\":7}",
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}",
    "{\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32601,\"message\":\"x\"}}",
    "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\r",
    "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
    "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"tools/list\",\"params\":{\"cursor\":\"c\"}}",
];

// ---- the mutator ----------------------------------------------------------------------------

fn dictionary(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Json => &[
            "{",
            "}",
            "[",
            "]",
            "\"",
            ":",
            ",",
            "//",
            "/*",
            "*/",
            "\\",
            "\\u0000",
            "\\ud800",
            "\"mcpServers\"",
            "\"hooks\"",
            "\"Stop\"",
            "\"mcp\"",
            "\"$schema\"",
            "\"command\"",
            "\"memloop\"",
            "\"type\"",
            "null",
            "true",
            "1e999",
            "-0",
            "\u{feff}",
            "\r\n",
            "\n",
            "\"a\": ",
            "{\"hooks\": [",
            "\u{2028}",
            "\t",
        ],
        Kind::Toml | Kind::Config => &[
            "[",
            "]",
            "[[hooks]]",
            "[hooks]",
            "=",
            "\"\"\"",
            "'''",
            "#",
            "\n",
            "\r\n",
            "{",
            "}",
            ".",
            ",",
            "\"",
            "'",
            "[mcpServers.memloop]",
            "event = \"Stop\"",
            "inf",
            "nan",
            "1979-05-27",
            "agents = [\"claude\"]",
            "[server]",
            "[gate]",
            "version = 1",
            "name = \"x\"",
            "url = \"https://h/\"",
            "command = \"memloop hook stop --agent kimi\"",
            "\\u0000",
            "\u{feff}",
        ],
        Kind::Markdown => &[
            "<!-- memloop:begin v1 -->",
            "<!-- memloop:begin",
            "<!-- memloop:end -->",
            "-->",
            "```",
            "~~~",
            "    ",
            "\n",
            "\r\n",
            "# ",
            "@AGENTS.md",
            "<!--",
            "\u{feff}",
            " v2 ",
            "\t",
        ],
        Kind::Jsonl => &[
            "\n",
            "\r\n",
            "{\"type\":\"assistant\",",
            "\"message\":{\"id\":\"m2\",\"content\":[",
            "{\"type\":\"tool_use\",\"id\":\"t9\",\"name\":\"Write\"}",
            "\"name\":\"mcp__memloop__memory_store\"",
            "{\"type\":\"context.append_loop_event\",\"event\":{\"type\":\"tool.call\",\"name\":\"Shell\"}}",
            "{\"tool\":\"bash\"}",
            "{\"$rewindTo\":\"g1\"}",
            "{\"$set\":{\"messages\":[",
            "\"toolCalls\":[{\"id\":\"w9\",\"name\":\"replace\",\"status\":\"success\"}]",
            "{\"type\":\"response_item\",\"payload\":{\"type\":\"function_call\",\"name\":\"exec_command\"}}",
            "{\"type\":\"tool.execution_start\",\"data\":{\"toolName\":\"edit\"}}",
            "{\"type\":\"assistant.turn_end\",\"data\":{}}",
            "\"parts\":[{\"functionCall\":{\"id\":\"c9\",\"name\":\"edit\"}}]",
            "\"assistant\"",
            "\"tool\"",
            "null",
            "]}}",
            "\\",
            "\"",
        ],
        Kind::Note => &[
            "---\n",
            "\n",
            "category: ",
            "importance: ",
            "tags: [",
            "]",
            "created: ",
            "task_id: ",
            "forgotten: ",
            "title: ",
            "paths: ",
            "updated: ",
            "\"",
            "\\",
            "\\u0000",
            ", ",
            ": ",
            "#",
            "\r\n",
        ],
        Kind::Mcp => &[
            "{\"jsonrpc\":\"2.0\",",
            "\"id\":",
            "\"id\":\"",
            "\"method\":\"tools/call\"",
            "\"method\":\"initialize\"",
            "\"params\":",
            "\"arguments\":",
            "\"name\":\"memory_store\"",
            "\\\"",
            "\\",
            "}",
            "{",
            "[",
            "]",
            ",",
            ":",
            "-1",
            "9223372036854775808",
            "\r",
            "\u{feff}",
        ],
    }
}

const INTERESTING: &[u8] = b"{}[]\",:\\/*#='\n\r\t \x00\x7f\xff\xfe\xef\xbb\xbf-+.0e";

/// One generated input: a seed (or, now and then, an empty start) with 1 to 8 mutations.
fn generate(rng: &mut Rng, seeds: &[Vec<u8>], kind: Kind) -> Vec<u8> {
    let dict = dictionary(kind);
    let mut data = if seeds.is_empty() || rng.chance(20) {
        Vec::new()
    } else {
        seeds[rng.below(seeds.len())].clone()
    };
    if data.is_empty() {
        // Built from tokens only.
        for _ in 0..rng.below(40) {
            data.extend_from_slice(dict[rng.below(dict.len())].as_bytes());
        }
    }
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        mutate(rng, &mut data, seeds, dict);
    }
    data
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>], dict: &[&str]) {
    let at = |rng: &mut Rng, data: &Vec<u8>| rng.below(data.len() + 1);
    match rng.below(13) {
        0 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 | 3 => {
            let i = at(rng, data);
            let token = dict[rng.below(dict.len())].as_bytes();
            data.splice(i..i, token.iter().copied());
        }
        4 if !data.is_empty() => {
            let i = rng.below(data.len());
            let len = 1 + rng.below(16.min(data.len() - i));
            data.drain(i..i + len);
        }
        5 if !data.is_empty() => {
            let i = rng.below(data.len());
            let len = 1 + rng.below(64.min(data.len() - i));
            let copy = data[i..i + len].to_vec();
            let j = at(rng, data);
            data.splice(j..j, copy);
        }
        6 if !seeds.is_empty() => {
            // Splice a piece of another seed in.
            let other = &seeds[rng.below(seeds.len())];
            if !other.is_empty() {
                let i = rng.below(other.len());
                let len = 1 + rng.below(256.min(other.len() - i));
                let j = at(rng, data);
                let cut = (j + rng.below(32)).min(data.len());
                data.splice(j..cut, other[i..i + len].iter().copied());
            }
        }
        7 => {
            let i = at(rng, data);
            let bytes: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect();
            data.splice(i..i, bytes);
        }
        8 if !data.is_empty() => data.truncate(rng.below(data.len())),
        9 => {
            // Deep nesting or a long run: what recursion and quadratic scans trip on.
            let token = dict[rng.below(dict.len())].as_bytes();
            let most = if rng.chance(4) { 5000 } else { 64 };
            let times = 1 + rng.below(most);
            let i = at(rng, data);
            let run: Vec<u8> = token
                .iter()
                .copied()
                .cycle()
                .take(token.len() * times)
                .collect();
            data.splice(i..i, run);
        }
        10 => {
            // Line endings, BOM, final newline: what the editors must keep.
            match rng.below(4) {
                0 => {
                    let text = String::from_utf8_lossy(data).replace('\n', "\r\n");
                    *data = text.into_bytes();
                }
                1 => {
                    data.splice(0..0, *b"\xef\xbb\xbf");
                }
                2 if data.last() == Some(&b'\n') => {
                    data.pop();
                }
                _ => data.push(b'\n'),
            };
        }
        11 => {
            // Swap two lines.
            let lines: Vec<&[u8]> = data.split_inclusive(|b| *b == b'\n').collect();
            if lines.len() > 1 {
                let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                let mut lines: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
                lines.swap(a, b);
                *data = lines.concat();
            }
        }
        _ => {
            // Duplicate a line (duplicate keys, repeated markers).
            let lines: Vec<&[u8]> = data.split_inclusive(|b| *b == b'\n').collect();
            if !lines.is_empty() {
                let line = lines[rng.below(lines.len())].to_vec();
                let j = at(rng, data);
                data.splice(j..j, line);
            }
        }
    }
    // Keep inputs to a size a user's config could have.
    data.truncate(1 << 20);
}

// ---- running --------------------------------------------------------------------------------

/// What went wrong with one input.
#[derive(Debug)]
pub struct Failure {
    pub index: u64,
    pub input: Vec<u8>,
    pub problem: String,
}

#[derive(Debug)]
pub struct Report {
    pub inputs: u64,
    pub elapsed: Duration,
    pub slowest: Duration,
    /// Every failing input; only the first few are kept in `failures`.
    pub failed: u64,
    pub failures: Vec<Failure>,
    /// Set when an input was still running at the time bound (the run was stopped there).
    pub hung: bool,
    /// Known outcomes that are not failures (see [`LAYOUT`]), with their counts.
    pub notes: std::collections::BTreeMap<&'static str, u64>,
}

/// The input a worker is on, for the watchdog.
#[derive(Default)]
pub struct Progress {
    started_micros: AtomicU64,
    input: Mutex<Vec<u8>>,
    index: AtomicU64,
}

/// How many failures are kept per target; the rest only counted.
const KEEP_FAILURES: usize = 20;

thread_local! {
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Panics on fuzz worker threads are caught and reported with the input; the default hook
/// would print thousands of them.
fn quiet_panics_on_fuzz_threads() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let fuzzing = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("fuzz-"));
            if fuzzing {
                let location = info.location().map(|l| l.to_string()).unwrap_or_default();
                PANIC_AT.with(|at| *at.borrow_mut() = Some(location));
            } else {
                default(info);
            }
        }));
    });
}

/// Runs `inputs` generated inputs through `target` on a worker thread, with a watchdog: an
/// input that has not returned after `bound` stops the run and is reported with its bytes.
/// `trace`, when given, receives every input before it runs (to find one that crashes the
/// process, e.g. by overflowing the stack).
pub fn campaign(
    target: &Target,
    seeds: &Seeds,
    inputs: u64,
    seed: u64,
    bound: Duration,
    trace: Option<PathBuf>,
) -> Result<Report, String> {
    quiet_panics_on_fuzz_threads();
    let progress = Arc::new(Progress::default());
    let seeds_of: Vec<Vec<u8>> = seeds.of(target.kind).to_vec();
    let (kind, run, name) = (target.kind, target.run, target.name);
    let worker_progress = progress.clone();
    let clock = Instant::now();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{name}"))
        // The stack the real binary's main thread has: a parser that overflows it is a bug.
        .stack_size(8 << 20)
        .spawn(move || -> Result<Report, String> {
            let mut scratch = Scratch::new()?;
            let mut rng = Rng::new(seed ^ fnv(name));
            let mut failures = Vec::new();
            let mut failed = 0u64;
            let mut slowest = Duration::ZERO;
            for index in 0..inputs {
                let input = generate(&mut rng, &seeds_of, kind);
                if let Some(trace) = &trace {
                    std::fs::write(trace, &input).map_err(|e| e.to_string())?;
                }
                *worker_progress
                    .input
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = input.clone();
                worker_progress.index.store(index, Ordering::Relaxed);
                let start = Instant::now();
                worker_progress
                    .started_micros
                    .store(clock.elapsed().as_micros() as u64 + 1, Ordering::Release);
                let outcome = catch_unwind(AssertUnwindSafe(|| run(&mut scratch, &input)));
                worker_progress.started_micros.store(0, Ordering::Release);
                let took = start.elapsed();
                slowest = slowest.max(took);
                let problem = match outcome {
                    Ok(Ok(())) if took <= bound => None,
                    Ok(Ok(())) => Some(format!("took {took:?}, over the bound of {bound:?}")),
                    Ok(Err(problem)) => Some(problem),
                    Err(payload) => {
                        let message = payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_default();
                        let at = PANIC_AT
                            .with(|at| at.borrow_mut().take())
                            .unwrap_or_default();
                        // The scratch files may be half-written; start from clean ones.
                        let notes = std::mem::take(&mut scratch.notes);
                        scratch = Scratch::new()?;
                        scratch.notes = notes;
                        Some(format!("panicked at {at}: {message}"))
                    }
                };
                if let Some(problem) = problem {
                    failed += 1;
                    if failures.len() < KEEP_FAILURES {
                        failures.push(Failure {
                            index,
                            input,
                            problem,
                        });
                    }
                }
            }
            Ok(Report {
                inputs,
                elapsed: Duration::ZERO,
                slowest,
                failed,
                failures,
                hung: false,
                notes: scratch.notes,
            })
        })
        .map_err(|e| e.to_string())?;
    loop {
        if worker.is_finished() {
            let report = worker
                .join()
                .map_err(|_| format!("{name}: the fuzz worker itself panicked"))??;
            return Ok(Report {
                elapsed: clock.elapsed(),
                ..report
            });
        }
        std::thread::sleep(Duration::from_millis(20));
        let started = progress.started_micros.load(Ordering::Acquire);
        if started != 0 {
            let running = clock
                .elapsed()
                .saturating_sub(Duration::from_micros(started - 1));
            if running > bound {
                // The worker cannot be stopped; it is left behind and the run ends here.
                let input = progress
                    .input
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let index = progress.index.load(Ordering::Relaxed);
                return Ok(Report {
                    inputs: index,
                    elapsed: clock.elapsed(),
                    slowest: running,
                    failed: 1,
                    failures: vec![Failure {
                        index,
                        input,
                        problem: format!("still running after {running:?}: a hang"),
                    }],
                    hung: true,
                    notes: Default::default(),
                });
            }
        }
    }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Where a failing input is saved: `dir/<target>-<index>.bin`.
pub fn save_failure(dir: &Path, target: &str, failure: &Failure) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{target}-{}.bin", failure.index));
    std::fs::write(&path, &failure.input)?;
    Ok(path)
}

/// Runs one saved input through `target` (for a failure found earlier).
pub fn replay(target: &Target, input: &[u8]) -> Result<(), String> {
    quiet_panics_on_fuzz_threads();
    let run = target.run;
    let input = input.to_vec();
    std::thread::Builder::new()
        .name(format!("fuzz-replay-{}", target.name))
        .stack_size(8 << 20)
        .spawn(move || {
            let mut scratch = Scratch::new()?;
            catch_unwind(AssertUnwindSafe(|| run(&mut scratch, &input)))
                .unwrap_or_else(|_| Err("panicked".into()))
        })
        .map_err(|e| e.to_string())?
        .join()
        .unwrap_or_else(|_| Err("panicked".into()))
}
