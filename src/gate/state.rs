//! Per-session gate state in the user's state directory.
//!
//! `$XDG_STATE_HOME/memloop/gate` (default `~/.local/state/memloop/gate`), mode 0700: never a
//! shared temp dir, where another user could plant or read a session's counter. File names are
//! a hash of the agent and session id, so a session id is never used as a path:
//! `<hash>.0.state` and `<hash>.1.state` for the state, `<hash>.ledger` for OpenCode's
//! recorded calls, `<hash>.start` and `<hash>.compact` for Kimi's session start (an empty file
//! each). Files untouched for seven days are pruned at the first stop or first prompt of every
//! session.
//!
//! The state is written atomically without any rename: saves alternate between the two slot
//! files, each record carries a sequence number, its length and a SHA-256 of its body, and a
//! load takes the newest record that checks out. A torn write leaves the previous record in the
//! other slot. This costs a few microseconds, where create-and-rename costs hundreds on ext4
//! (and more while other processes keep the journal busy), more than the whole check.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::jsonl::{Cursor, Resume};
use super::rules::Session;

const VERSION: u32 = 1;
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
const HASH_HEX: usize = 32;
/// A state record is a few KiB; anything far larger is not one.
const MAX_STATE: u64 = 16 << 20;

/// What one session's file holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub session: Session,
    /// One cursor per log read (Kimi has one per agent of the session).
    pub cursors: Vec<Cursor>,
    /// Claude splits one assistant message over rows sharing `message.id`; the last id seen
    /// keeps a message split across two checks from counting twice.
    pub last_message_id: Option<String>,
    /// Tool-use ids of that message already counted.
    pub last_message_tools: Vec<String>,
    /// The previous stop was blocked (Kimi's loop guard).
    pub blocked_last: bool,
    /// Claude: the key ([`super::claude::TextKey`]) of the newest assistant content read, when
    /// it is a text; what `last_assistant_message` is compared with.
    #[serde(default)]
    pub tail_text: Option<u64>,
    /// Kimi: the session's log has step markers (`step.begin`); until one shows, each tool call
    /// counts as an assistant entry.
    #[serde(default)]
    pub step_markers: bool,
    /// The worktree at the last check whose window held a shell call.
    #[serde(default)]
    pub worktree: Option<super::worktree::Snapshot>,
    /// When the last recorded check began (ms since the Unix epoch).
    #[serde(default)]
    pub checked_at_ms: Option<u64>,
}

impl State {
    pub fn fresh() -> State {
        State {
            version: VERSION,
            ..State::default()
        }
    }

    /// Since when worktree changes belong to the current window: the start of the last recorded
    /// check, else the creation of the session's (first) log.
    pub fn window_start(&self) -> Option<SystemTime> {
        if let Some(ms) = self.checked_at_ms {
            return Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
        }
        let log = &self.cursors.first()?.path;
        fs::metadata(log).ok()?.created().ok()
    }

    /// Forgets everything read from the logs: they are read again from byte 0.
    pub fn start_over(&mut self) {
        let blocked_last = self.blocked_last;
        *self = State::fresh();
        self.blocked_last = blocked_last;
    }

    /// Where to go on reading a session's only log: the saved offset and the cursor that
    /// confirmed it, or byte 0 (everything forgotten) when the log is new, truncated or replaced.
    pub fn resume_single(
        &mut self,
        path: &Path,
        file: &mut File,
    ) -> anyhow::Result<(u64, Option<Cursor>)> {
        let resume = Cursor::resume(self.cursors.first(), path, file)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(match resume {
            Resume::At(offset) => (offset, self.cursors.first().cloned()),
            Resume::New | Resume::Restart => {
                self.start_over();
                (0, None)
            }
        })
    }
}

/// Where a loaded state lives, so saving writes its successor.
pub struct Slot {
    key: String,
    /// Sequence number of the record loaded; 0 when there was none.
    seq: u64,
}

/// The state directory, created on first use.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// `$XDG_STATE_HOME/memloop/gate`, else `$HOME/.local/state/memloop/gate`.
    pub fn locate() -> anyhow::Result<PathBuf> {
        Ok(crate::files::state_dir()?.join("gate"))
    }

    pub fn open() -> anyhow::Result<Store> {
        let dir = Store::locate()?;
        crate::files::create_private_dir(&dir).with_context(|| {
            format!(
                "cannot create the state directory {}; make it writable or set XDG_STATE_HOME",
                dir.display()
            )
        })?;
        Ok(Store { dir })
    }

    pub fn ledger_path(&self, agent: &str, session_id: &str) -> PathBuf {
        self.dir
            .join(format!("{}.ledger", session_key(agent, session_id)))
    }

    fn slot_path(&self, key: &str, slot: u64) -> PathBuf {
        self.dir.join(format!("{key}.{}.state", slot % 2))
    }

    /// The session's state. A fresh state when there is none (old files are pruned then) or it
    /// was written by another version: reading the logs again from the start is always correct.
    pub fn load(&self, agent: &str, session_id: &str) -> anyhow::Result<(State, Slot)> {
        let key = session_key(agent, session_id);
        let mut newest: Option<(u64, Vec<u8>)> = None;
        for slot in 0..2 {
            let path = self.slot_path(&key, slot);
            let bytes = match read_regular(&path, MAX_STATE) {
                Ok(bytes) => bytes,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    return Err(err).with_context(|| format!("cannot read {}", path.display()));
                }
            };
            if let Some((seq, body)) = decode(&bytes)
                && newest.as_ref().is_none_or(|(best, _)| seq > *best)
            {
                newest = Some((seq, body.to_vec()));
            }
        }
        let Some((seq, body)) = newest else {
            // Pruning once per new session keeps the directory small without listing it at
            // every stop.
            self.prune(&key);
            return Ok((State::fresh(), Slot { key, seq: 0 }));
        };
        let state = serde_json::from_slice::<State>(&body)
            .ok()
            .filter(|state| state.version == VERSION)
            .unwrap_or_else(State::fresh);
        Ok((state, Slot { key, seq }))
    }

    /// Writes the state as the next record, into the slot not holding the current one.
    pub fn save(&self, slot: &Slot, state: &State) -> anyhow::Result<()> {
        let seq = slot.seq + 1;
        let path = self.slot_path(&slot.key, seq);
        let body = serde_json::to_vec(state).context("cannot serialize the gate state")?;
        let record = encode(seq, &body);
        let mut options = OpenOptions::new();
        // No truncation: a longer old record's tail stays behind its length and is ignored.
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        options
            .open(&path)
            .and_then(|mut file| file.write_all(&record))
            .with_context(|| {
                format!(
                    "cannot write {}; check that {} is writable",
                    path.display(),
                    self.dir.display()
                )
            })
    }

    /// Claims the verdict on the stop `stop` of an agent (`Reader::stop_id`): true for the first
    /// hook run that asks, false for every later one, even one running at the same time (the
    /// claim is a file created exclusively). Claims are pruned with the sessions' files.
    pub fn claim_stop(&self, agent: &str, stop: &str) -> anyhow::Result<bool> {
        let name = format!("{}.stop", session_key(agent, stop));
        let path = self.dir.join(name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&path) {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(err) => {
                Err(err).with_context(|| format!("cannot write the stop claim {}", path.display()))
            }
        }
    }

    /// Removes files of other sessions untouched for seven days, and temp files left by older
    /// memloop versions. Best effort: what cannot be removed now is tried at the next stop.
    fn prune(&self, keep: &str) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_ours(name) && !name.starts_with(keep) && is_old(&entry, now) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Appends one line to a session's ledger. One `write` call per line with `O_APPEND`, so
    /// concurrent recorders do not interleave within a line.
    pub fn append(&self, path: &Path, line: &[u8]) -> anyhow::Result<()> {
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        options
            .open(path)
            .and_then(|mut file| file.write_all(&buf))
            .with_context(|| format!("cannot append to {}", path.display()))
    }
}

/// Kimi Code's session start (`agents::kimi::start`): its only event whose output reaches the
/// model fires on every prompt, so the index goes out on a session's first prompt and on the
/// first one after each compaction. Two empty files per session say which: `<key>.start` (the
/// index was given) and `<key>.compact` (a compaction began since). Each claim is a create or a
/// remove, so two runs at once never both win, and no file ever grows.
impl Store {
    fn marker(&self, agent: &str, session_id: &str, kind: &str) -> PathBuf {
        self.dir
            .join(format!("{}.{kind}", session_key(agent, session_id)))
    }

    /// True for the first run that asks about `session_id`, false for every later one. A new
    /// session prunes old files, as the first stop of a session does.
    pub fn claim_start(&self, agent: &str, session_id: &str) -> anyhow::Result<bool> {
        let key = session_key(agent, session_id);
        let path = self.marker(agent, session_id, "start");
        let claimed = create_new(&path)
            .with_context(|| format!("cannot write the session marker {}", path.display()))?;
        if claimed {
            self.prune(&key);
        }
        Ok(claimed)
    }

    /// Gives a claimed start back (the index could not be given after all).
    pub fn release_start(&self, agent: &str, session_id: &str) {
        let _ = fs::remove_file(self.marker(agent, session_id, "start"));
    }

    /// Notes that `session_id` is about to be compacted.
    pub fn mark_compaction(&self, agent: &str, session_id: &str) -> anyhow::Result<()> {
        let path = self.marker(agent, session_id, "compact");
        create_new(&path)
            .map(|_| ())
            .with_context(|| format!("cannot write the compaction marker {}", path.display()))
    }

    /// True when a compaction was noted since the last call, taking the note.
    pub fn take_compaction(&self, agent: &str, session_id: &str) -> anyhow::Result<bool> {
        let path = self.marker(agent, session_id, "compact");
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(err).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
}

/// Recall (`crate::hook::prompt`): `<key>.given` lists the fingerprints of what the session was
/// handed (notes recalled for its prompts, notes its session-start index held whole), one per
/// line, so a note is not given twice unless it changed; `<key>.recalled` (empty) says a prompt
/// of the session was given notes, which the gate may count as its lookup.
impl Store {
    /// What `session_id` was given so far (nothing when none or unreadable: at worst a note
    /// comes twice).
    pub fn given(&self, agent: &str, session_id: &str) -> HashSet<String> {
        let path = self.marker(agent, session_id, "given");
        read_regular(&path, MAX_GIVEN)
            .map(|bytes| {
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|line| !line.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Adds `fingerprints` to what `session_id` was given.
    pub fn note_given(
        &self,
        agent: &str,
        session_id: &str,
        fingerprints: &[String],
    ) -> anyhow::Result<()> {
        if fingerprints.is_empty() {
            return Ok(());
        }
        let path = self.marker(agent, session_id, "given");
        let lines = fingerprints.join("\n");
        self.append(&path, lines.as_bytes())
    }

    /// The session's context is being summarised: what it was given is gone from it.
    pub fn forget_given(&self, agent: &str, session_id: &str) {
        let _ = fs::remove_file(self.marker(agent, session_id, "given"));
    }

    /// Notes that a prompt of `session_id` was given notes.
    pub fn mark_recalled(&self, agent: &str, session_id: &str) -> anyhow::Result<()> {
        let path = self.marker(agent, session_id, "recalled");
        create_new(&path)
            .map(|_| ())
            .with_context(|| format!("cannot write the recall marker {}", path.display()))
    }

    /// Whether a prompt of the session in `slot` was given notes.
    pub fn recalled(&self, slot: &Slot) -> bool {
        self.dir.join(format!("{}.recalled", slot.key)).exists()
    }
}

/// A session's `given` list is a few dozen bytes a prompt; past this it is not one.
const MAX_GIVEN: u64 = 1 << 20;

/// Creates an empty private file; false when it was there already.
fn create_new(path: &Path) -> io::Result<bool> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    }
}

/// The gate's debug log in the state directory; started afresh past this size.
pub const DEBUG_LOG: &str = "debug.log";
const DEBUG_LOG_MAX: u64 = 1 << 20;

impl Store {
    pub fn debug_log_path(&self) -> PathBuf {
        self.dir.join(DEBUG_LOG)
    }

    /// Appends one line (with the Unix time) to the debug log. Best effort: the log never
    /// changes a verdict, so a failure to write it is ignored.
    pub fn debug(&self, line: &str) {
        let path = self.debug_log_path();
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let Ok(mut file) = options.open(&path) else {
            return;
        };
        if file.metadata().is_ok_and(|meta| meta.len() > DEBUG_LOG_MAX) {
            let _ = file.set_len(0);
        }
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let one_line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = file.write_all(
            format!("{}.{:03} {one_line}\n", now.as_secs(), now.subsec_millis()).as_bytes(),
        );
    }
}

/// The hash naming a session's files.
pub fn session_key(agent: &str, session_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"memloop-gate\0");
    hasher.update(agent.as_bytes());
    hasher.update(b"\0");
    hasher.update(session_id.as_bytes());
    let digest = hasher.finalize();
    digest
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>()[..HASH_HEX]
        .to_owned()
}

const MAGIC: &str = "memloop-gate-state";

fn encode(seq: u64, body: &[u8]) -> Vec<u8> {
    let mut record = format!(
        "{MAGIC} {seq} {} {}\n",
        body.len(),
        hex(&Sha256::digest(body))
    )
    .into_bytes();
    record.extend_from_slice(body);
    record
}

/// The sequence number and body of a slot file, when its record is whole.
fn decode(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let newline = bytes.iter().position(|b| *b == b'\n')?;
    let header = std::str::from_utf8(&bytes[..newline]).ok()?;
    let mut fields = header.split(' ');
    if fields.next()? != MAGIC {
        return None;
    }
    let seq: u64 = fields.next()?.parse().ok()?;
    let len: usize = fields.next()?.parse().ok()?;
    let sum = fields.next()?;
    let body = bytes.get(newline + 1..)?.get(..len)?;
    (fields.next().is_none() && hex(&Sha256::digest(body)) == sum).then_some((seq, body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Slot files (`<key>.0.state`, `<key>.1.state`), ledgers (`<key>.ledger`) and temp files.
fn is_ours(name: &str) -> bool {
    if name.starts_with(".tmp-") {
        return true;
    }
    let Some((key, rest)) = name.split_once('.') else {
        return false;
    };
    key.len() == HASH_HEX
        && key.bytes().all(|b| b.is_ascii_hexdigit())
        && matches!(
            rest,
            "ledger" | "0.state" | "1.state" | "stop" | "start" | "compact" | "given" | "recalled"
        )
}

fn is_old(entry: &fs::DirEntry, now: SystemTime) -> bool {
    entry
        .metadata()
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| now.duration_since(modified).ok())
        .is_some_and(|age| age > MAX_AGE)
}

/// Opens a log for reading, saying which file could not be read.
pub fn open_log(path: &Path) -> anyhow::Result<File> {
    open_regular(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Opens `path` for reading only when it is a regular file: a FIFO or a device (`/dev/zero`)
/// could block or never end (`files::open_regular`).
pub use crate::files::open_regular;

/// Reads a whole regular file of at most `max` bytes (`files::read_at_most`).
pub use crate::files::read_at_most as read_regular;

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> Store {
        let dir = dir.join("memloop/gate");
        crate::files::create_private_dir(&dir).unwrap();
        Store { dir }
    }

    #[test]
    fn session_key_is_a_fixed_length_hash_and_separates_agents() {
        let key = session_key("claude", "../../etc/passwd");
        assert_eq!(key.len(), HASH_HEX);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(key, session_key("kimi", "../../etc/passwd"));
        assert!(is_ours(&format!("{key}.0.state")));
        assert!(is_ours(&format!("{key}.1.state")));
        assert!(is_ours(&format!("{key}.ledger")));
        assert!(!is_ours(&format!("{key}.2.state")));
        assert!(!is_ours("notes.json"));
    }

    #[test]
    fn save_then_load_round_trips_and_garbage_reads_as_fresh() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let mut state = State::fresh();
        state.session.tool_calls = 7;
        state.blocked_last = true;
        state.last_message_tools = vec!["x".repeat(500)];
        let (loaded, slot) = store.load("claude", "s1").unwrap();
        assert_eq!(loaded, State::fresh());
        store.save(&slot, &state).unwrap();
        let (loaded, slot) = store.load("claude", "s1").unwrap();
        assert_eq!(loaded, state);
        // A shorter record over a longer one: the old tail is ignored.
        let mut shorter = State::fresh();
        shorter.session.tool_calls = 8;
        store.save(&slot, &shorter).unwrap();
        let (loaded, slot) = store.load("claude", "s1").unwrap();
        assert_eq!(loaded, shorter);
        store.save(&slot, &shorter).unwrap();
        assert_eq!(store.load("claude", "s1").unwrap().0, shorter);
        assert_eq!(fs::read_dir(&store.dir).unwrap().count(), 2);
        assert_eq!(store.load("claude", "s2").unwrap().0, State::fresh());
        let key = session_key("claude", "s3");
        fs::write(store.slot_path(&key, 0), b"{not a record").unwrap();
        assert_eq!(store.load("claude", "s3").unwrap().0, State::fresh());
    }

    #[test]
    fn a_torn_record_falls_back_to_the_other_slot() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let mut first = State::fresh();
        first.session.checks = 1;
        let (_, slot) = store.load("kimi", "s").unwrap();
        store.save(&slot, &first).unwrap();
        let (_, slot) = store.load("kimi", "s").unwrap();
        let mut second = first.clone();
        second.session.checks = 2;
        store.save(&slot, &second).unwrap();
        assert_eq!(store.load("kimi", "s").unwrap().0, second);
        // Cut the newest record short, as a crash during its write would.
        let key = session_key("kimi", "s");
        let newest = store.slot_path(&key, 2);
        let bytes = fs::read(&newest).unwrap();
        fs::write(&newest, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(store.load("kimi", "s").unwrap().0, first);
    }

    #[test]
    fn a_session_start_is_claimed_once_and_again_after_each_compaction() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        assert!(store.claim_start("kimi", "s").unwrap());
        assert!(!store.claim_start("kimi", "s").unwrap());
        assert!(store.claim_start("kimi", "other").unwrap());
        assert!(!store.take_compaction("kimi", "s").unwrap());
        store.mark_compaction("kimi", "s").unwrap();
        store.mark_compaction("kimi", "s").unwrap();
        assert!(store.take_compaction("kimi", "s").unwrap());
        assert!(!store.take_compaction("kimi", "s").unwrap());
        store.release_start("kimi", "s");
        assert!(store.claim_start("kimi", "s").unwrap());
        // Empty files of ours, pruned with the rest.
        for entry in fs::read_dir(&store.dir).unwrap() {
            let entry = entry.unwrap();
            assert!(is_ours(entry.file_name().to_str().unwrap()));
            assert_eq!(entry.metadata().unwrap().len(), 0);
        }
    }

    #[test]
    fn records_decode_only_when_whole() {
        let record = encode(5, b"{\"a\":1}");
        assert_eq!(decode(&record), Some((5, &b"{\"a\":1}"[..])));
        let mut longer = record.clone();
        longer.extend_from_slice(b"old tail");
        assert_eq!(decode(&longer), Some((5, &b"{\"a\":1}"[..])));
        let mut flipped = record.clone();
        *flipped.last_mut().unwrap() = b']';
        assert_eq!(decode(&flipped), None);
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"memloop-gate-state 1 999 00\n{}"), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("memloop/gate");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        crate::files::create_private_dir(&dir).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn loading_prunes_only_old_files_of_ours() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let old = store.slot_path(&session_key("claude", "old"), 1);
        let new = store.slot_path(&session_key("claude", "new"), 1);
        let foreign = store.dir.join("README");
        for path in [&old, &new, &foreign] {
            fs::write(path, b"{}").unwrap();
        }
        let long_ago = SystemTime::now() - Duration::from_secs(8 * 24 * 60 * 60);
        for path in [&old, &foreign] {
            File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
        }
        store.load("claude", "other").unwrap();
        assert!(!old.exists());
        assert!(new.exists());
        assert!(foreign.exists());
    }

    #[test]
    fn only_regular_files_are_opened() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("t.jsonl");
        fs::write(&file, b"{}\n").unwrap();
        assert!(open_regular(&file).is_ok());
        assert_eq!(read_regular(&file, 3).unwrap(), b"{}\n");
        assert_eq!(
            read_regular(&file, 2).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let err = open_regular(temp.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        #[cfg(unix)]
        {
            let err = open_regular(Path::new("/dev/null")).unwrap_err();
            assert!(err.to_string().contains("character device"), "{err}");
        }
        assert_eq!(
            open_regular(&temp.path().join("missing"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }
}
