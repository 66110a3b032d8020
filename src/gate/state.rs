//! Per-session gate state in the user's state directory.
//!
//! `$XDG_STATE_HOME/memloop/gate` (default `~/.local/state/memloop/gate`), mode 0700: never a
//! shared temp dir, where another user could plant or read a session's counter. File names are
//! a hash of the agent and session id, so a session id is never used as a path:
//! `<hash>.<generation>.json` for the state, `<hash>.ledger` for OpenCode's recorded calls.
//! Files untouched for seven days are pruned at every stop, in the pass that finds the state.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::jsonl::Cursor;
use super::rules::Session;

const VERSION: u32 = 1;
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
const HASH_HEX: usize = 32;

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
}

impl State {
    pub fn fresh() -> State {
        State {
            version: VERSION,
            ..State::default()
        }
    }

    /// Forgets everything read from the logs: they are read again from byte 0.
    pub fn start_over(&mut self) {
        let blocked_last = self.blocked_last;
        *self = State::fresh();
        self.blocked_last = blocked_last;
    }
}

/// Where a loaded state lives, so saving writes its successor.
pub struct Slot {
    key: String,
    generation: u64,
}

/// The state directory, created on first use.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// `$XDG_STATE_HOME/memloop/gate`, else `$HOME/.local/state/memloop/gate`.
    pub fn locate() -> anyhow::Result<PathBuf> {
        let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
            // The XDG spec says relative values are invalid and must be ignored.
            Some(dir) if dir.is_absolute() => dir,
            _ => {
                let home = std::env::var_os("HOME")
                    .filter(|home| !home.is_empty())
                    .context("neither XDG_STATE_HOME nor HOME is set; set one so the gate can keep its state")?;
                PathBuf::from(home).join(".local/state")
            }
        };
        Ok(base.join("memloop").join("gate"))
    }

    pub fn open() -> anyhow::Result<Store> {
        let dir = Store::locate()?;
        create_private_dir(&dir).with_context(|| {
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

    fn state_path(&self, key: &str, generation: u64) -> PathBuf {
        self.dir.join(format!("{key}.{generation}.json"))
    }

    /// The session's state, and prunes the directory in the same pass. A fresh state when
    /// there is none or it was written by another version: reading the logs again from the
    /// start is always correct.
    pub fn load(&self, agent: &str, session_id: &str) -> anyhow::Result<(State, Slot)> {
        let key = session_key(agent, session_id);
        let entries = fs::read_dir(&self.dir)
            .with_context(|| format!("cannot list {}", self.dir.display()))?;
        let now = SystemTime::now();
        let mut current: Option<u64> = None;
        let mut superseded = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(generation) = generation_of(name, &key) {
                match current {
                    Some(newest) if newest >= generation => superseded.push(generation),
                    _ => superseded.extend(current.replace(generation)),
                }
            } else if is_ours(name) && is_old(&entry, now) {
                let _ = fs::remove_file(entry.path());
            }
        }
        // Left behind by a save interrupted between its rename and its removal.
        for generation in superseded {
            let _ = fs::remove_file(self.state_path(&key, generation));
        }
        let Some(generation) = current else {
            return Ok((State::fresh(), Slot { key, generation: 0 }));
        };
        let path = self.state_path(&key, generation);
        let text = fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let state = serde_json::from_slice::<State>(&text)
            .ok()
            .filter(|state| state.version == VERSION)
            .unwrap_or_else(State::fresh);
        Ok((state, Slot { key, generation }))
    }

    /// Writes the state atomically: a complete temp file renamed to the next generation's
    /// name, then the previous generation removed. Renaming onto a fresh name rather than
    /// over the old file keeps ext4 from flushing on every stop (its replace-by-rename
    /// heuristic), which would cost more than the whole check.
    pub fn save(&self, slot: &Slot, state: &State) -> anyhow::Result<()> {
        let path = self.state_path(&slot.key, slot.generation + 1);
        let text = serde_json::to_vec(state).context("cannot serialize the gate state")?;
        let write = || -> io::Result<()> {
            let mut temp = tempfile::Builder::new()
                .prefix(".tmp-")
                .tempfile_in(&self.dir)?;
            temp.write_all(&text)?;
            temp.persist(&path).map_err(|err| err.error)?;
            Ok(())
        };
        write().with_context(|| {
            format!(
                "cannot write {}; check that {} is writable",
                path.display(),
                self.dir.display()
            )
        })?;
        if slot.generation > 0 {
            let _ = fs::remove_file(self.state_path(&slot.key, slot.generation));
        }
        Ok(())
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

/// Which session file generation `name` is, when it is a state file of the session `key`.
fn generation_of(name: &str, key: &str) -> Option<u64> {
    let rest = name.strip_prefix(key)?.strip_prefix('.')?;
    let digits = rest.strip_suffix(".json")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// State files (`<key>.<generation>.json`), ledgers (`<key>.ledger`) and temp files.
fn is_ours(name: &str) -> bool {
    if name.starts_with(".tmp-") {
        return true;
    }
    let Some((key, rest)) = name.split_once('.') else {
        return false;
    };
    key.len() == HASH_HEX
        && key.bytes().all(|b| b.is_ascii_hexdigit())
        && (rest == "ledger" || generation_of(name, key).is_some())
}

fn is_old(entry: &fs::DirEntry, now: SystemTime) -> bool {
    entry
        .metadata()
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| now.duration_since(modified).ok())
        .is_some_and(|age| age > MAX_AGE)
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // An existing dir keeps its mode under create(); memloop owns this one, so tighten it.
        let mode = fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode != 0o700 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        fs::create_dir_all(dir)
    }
}

/// Opens a log for reading, saying which file could not be read.
pub fn open_log(path: &Path) -> anyhow::Result<File> {
    File::open(path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> Store {
        let dir = dir.join("memloop/gate");
        create_private_dir(&dir).unwrap();
        Store { dir }
    }

    #[test]
    fn session_key_is_a_fixed_length_hash_and_separates_agents() {
        let key = session_key("claude", "../../etc/passwd");
        assert_eq!(key.len(), HASH_HEX);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(key, session_key("kimi", "../../etc/passwd"));
        assert!(is_ours(&format!("{key}.12.json")));
        assert!(is_ours(&format!("{key}.ledger")));
        assert!(!is_ours(&format!("{key}.json")));
        assert!(!is_ours("notes.json"));
    }

    #[test]
    fn save_then_load_round_trips_and_garbage_reads_as_fresh() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let mut state = State::fresh();
        state.session.tool_calls = 7;
        state.blocked_last = true;
        let (loaded, slot) = store.load("claude", "s1").unwrap();
        assert_eq!(loaded, State::fresh());
        store.save(&slot, &state).unwrap();
        let (loaded, slot) = store.load("claude", "s1").unwrap();
        assert_eq!(loaded, state);
        state.session.tool_calls = 8;
        store.save(&slot, &state).unwrap();
        assert_eq!(store.load("claude", "s1").unwrap().0, state);
        // One generation on disk at a time.
        assert_eq!(fs::read_dir(&store.dir).unwrap().count(), 1);
        assert_eq!(store.load("claude", "s2").unwrap().0, State::fresh());
        let key = session_key("claude", "s3");
        fs::write(store.state_path(&key, 4), b"{not json").unwrap();
        assert_eq!(store.load("claude", "s3").unwrap().0, State::fresh());
    }

    #[test]
    fn the_newest_generation_wins_and_older_ones_go() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let key = session_key("kimi", "s");
        let mut newer = State::fresh();
        newer.session.checks = 3;
        fs::write(
            store.state_path(&key, 2),
            serde_json::to_vec(&State::fresh()).unwrap(),
        )
        .unwrap();
        fs::write(
            store.state_path(&key, 10),
            serde_json::to_vec(&newer).unwrap(),
        )
        .unwrap();
        assert_eq!(store.load("kimi", "s").unwrap().0, newer);
        assert!(!store.state_path(&key, 2).exists());
        assert!(store.state_path(&key, 10).exists());
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("memloop/gate");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&dir).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn loading_prunes_only_old_files_of_ours() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let old = store.state_path(&session_key("claude", "old"), 1);
        let new = store.state_path(&session_key("claude", "new"), 1);
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
}
