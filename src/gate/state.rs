//! Per-session gate state in the user's state directory.
//!
//! `$XDG_STATE_HOME/memloop/gate` (default `~/.local/state/memloop/gate`), mode 0700: never a
//! shared temp dir, where another user could plant or read a session's counter. File names are
//! a hash of the agent and session id, so a session id is never used as a path. Files untouched
//! for seven days are pruned at every stop.

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

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, agent: &str, session_id: &str, ext: &str) -> PathBuf {
        self.dir
            .join(format!("{}.{ext}", session_key(agent, session_id)))
    }

    pub fn ledger_path(&self, agent: &str, session_id: &str) -> PathBuf {
        self.path(agent, session_id, "ledger")
    }

    /// The session's state; a fresh one when there is none or it was written by another
    /// version (reading the logs again from the start is always correct).
    pub fn load(&self, agent: &str, session_id: &str) -> anyhow::Result<State> {
        let path = self.path(agent, session_id, "json");
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(State::fresh()),
            Err(err) => {
                return Err(err).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        Ok(serde_json::from_slice::<State>(&text)
            .ok()
            .filter(|state| state.version == VERSION)
            .unwrap_or_else(State::fresh))
    }

    /// Writes the state atomically (temp file in the same dir, then rename).
    pub fn save(&self, agent: &str, session_id: &str, state: &State) -> anyhow::Result<()> {
        let path = self.path(agent, session_id, "json");
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
        })
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

    /// Removes state files and ledgers untouched for seven days, and stale temp files. Best
    /// effort: a file that cannot be removed now is tried again at the next stop.
    pub fn prune(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !is_ours(name) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .is_some_and(|age| age > MAX_AGE);
            if old {
                let _ = fs::remove_file(entry.path());
            }
        }
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

fn is_ours(name: &str) -> bool {
    if name.starts_with(".tmp-") {
        return true;
    }
    let Some((stem, ext)) = name.split_once('.') else {
        return false;
    };
    matches!(ext, "json" | "ledger")
        && stem.len() == HASH_HEX
        && stem.bytes().all(|b| b.is_ascii_hexdigit())
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
        assert!(is_ours(&format!("{key}.json")));
        assert!(!is_ours("notes.json"));
    }

    #[test]
    fn save_then_load_round_trips_and_garbage_reads_as_fresh() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let mut state = State::fresh();
        state.session.tool_calls = 7;
        state.blocked_last = true;
        store.save("claude", "s1", &state).unwrap();
        assert_eq!(store.load("claude", "s1").unwrap(), state);
        assert_eq!(store.load("claude", "s2").unwrap(), State::fresh());
        fs::write(store.path("claude", "s3", "json"), b"{not json").unwrap();
        assert_eq!(store.load("claude", "s3").unwrap(), State::fresh());
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
    fn prune_removes_only_old_files_of_ours() {
        let temp = tempfile::tempdir().unwrap();
        let store = store(temp.path());
        let old = store.path("claude", "old", "json");
        let new = store.path("claude", "new", "json");
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
        store.prune();
        assert!(!old.exists());
        assert!(new.exists());
        assert!(foreign.exists());
    }
}
