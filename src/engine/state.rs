//! What memloop remembers on this machine about what it wrote: each file's bytes before memloop
//! first touched it and a fingerprint of what memloop last wrote. Uninstall uses it to give back
//! the original bytes. It lives in the user's state directory, never in the repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::Content;
use crate::target::Desired;

const STATE_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InstallState {
    pub version: u32,
    pub root: PathBuf,
    /// The user agreed to let memloop write agent files outside the repository.
    #[serde(default)]
    pub user_scope: bool,
    /// The user gave this repository the agents' per-machine trust (`memloop trust`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trusted: bool,
    #[serde(default)]
    pub files: BTreeMap<PathBuf, FileRecord>,
    /// Folders memloop created (removed again by uninstall when empty), deepest last.
    #[serde(default)]
    pub created_dirs: Vec<PathBuf>,
    /// What uninstall left at each path it changed (a fingerprint): a second uninstall finds
    /// the same and leaves it alone, whatever the user's own files hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub released: BTreeMap<PathBuf, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRecord {
    pub original: Content,
    pub written: String,
    /// What memloop wanted in the file when it last wrote it (a fingerprint of the target's
    /// fragments): when it still wants the same, an owned entry that differs now was changed
    /// by someone else, not by a new memloop.toml. Absent in states of older memloops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wanted: Option<String>,
}

/// A stable fingerprint of what memloop wants in a file.
fn wanted_fingerprint(desired: &Desired) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(format!("{desired:?}").as_bytes())
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl InstallState {
    /// The state file of the repository at `root`.
    pub fn path_for(root: &Path) -> anyhow::Result<PathBuf> {
        use sha2::{Digest, Sha256};
        let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let digest = Sha256::digest(canonical.to_string_lossy().as_bytes());
        let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        Ok(crate::files::state_dir()?
            .join("installs")
            .join(format!("{name}.json")))
    }

    pub fn load(root: &Path) -> anyhow::Result<InstallState> {
        let path = InstallState::path_for(root)?;
        match crate::files::read_regular(&path) {
            Ok(bytes) => {
                let state: InstallState = serde_json::from_slice(&bytes).with_context(|| {
                    format!("{} is damaged; delete it to start afresh", path.display())
                })?;
                Ok(state)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(InstallState {
                version: STATE_VERSION,
                root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
                ..InstallState::default()
            }),
            Err(err) => {
                Err(anyhow::Error::new(err).context(format!("cannot read {}", path.display())))
            }
        }
    }

    pub fn save(&self, root: &Path) -> anyhow::Result<()> {
        let path = InstallState::path_for(root)?;
        let mut text = serde_json::to_vec_pretty(self)?;
        text.push(b'\n');
        // What memloop wrote where, and the user's original bytes: for the user's eyes only.
        crate::files::write_private(&path, &text)
    }

    pub fn original(&self, path: &Path) -> Option<Content> {
        self.files.get(path).map(|record| record.original.clone())
    }

    /// Notes a write: the first one keeps the original, every one updates the fingerprint.
    pub fn record(&mut self, path: &Path, before: &Content, after: &Content, wanted: &Desired) {
        self.released.remove(path);
        let written = after.fingerprint();
        let wanted = Some(wanted_fingerprint(wanted));
        self.files
            .entry(path.to_path_buf())
            .and_modify(|record| {
                record.written = written.clone();
                record.wanted = wanted.clone();
            })
            .or_insert_with(|| FileRecord {
                original: before.clone(),
                written,
                wanted,
            });
    }

    /// Whether memloop last wrote `path` wanting exactly `desired` there, and the file changed
    /// since: whatever differs from `desired` in it now, someone else changed.
    pub fn changed_by_someone_else(
        &self,
        path: &Path,
        current: &Content,
        desired: &Desired,
    ) -> bool {
        self.files.get(path).is_some_and(|record| {
            record.written != current.fingerprint()
                && record.wanted.as_deref() == Some(wanted_fingerprint(desired).as_str())
        })
    }

    /// Replaces what `path` is known to have held before memloop.
    pub fn rebase(&mut self, path: &Path, original: Content) {
        if let Some(record) = self.files.get_mut(path) {
            record.original = original;
        }
    }

    /// Notes what uninstall left at `path`: nothing of memloop's is there any more.
    pub fn release(&mut self, path: &Path, left: &Content) {
        self.files.remove(path);
        self.released.insert(path.to_path_buf(), left.fingerprint());
    }

    /// Whether `path` still holds what the last uninstall left there.
    pub fn untouched_since_release(&self, path: &Path, current: &Content) -> bool {
        self.released
            .get(path)
            .is_some_and(|left| *left == current.fingerprint())
    }

    /// Whether the file still holds exactly what memloop last wrote.
    pub fn unchanged_since_write(&self, path: &Path, current: &Content) -> bool {
        self.files
            .get(path)
            .is_some_and(|record| record.written == current.fingerprint())
    }
}
