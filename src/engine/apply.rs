//! Writing a plan as one transaction: lock, check nothing changed since it was read, write each
//! file atomically (temporary file + rename, permissions kept), roll back on any failure.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::state::InstallState;
use super::{Change, Content, read};
use crate::files::{FileLock, create_private_dir, write_atomic};
use crate::instructions::make_symlink;

/// Held while a command writes; released on drop.
pub struct Lock {
    _held: FileLock,
}

impl Lock {
    /// One writer per repository: two memloop runs never interleave their writes.
    pub fn acquire(root: &Path) -> anyhow::Result<Lock> {
        let path = InstallState::path_for(root)?.with_extension("lock");
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        Ok(Lock {
            _held: FileLock::acquire(&path)?,
        })
    }
}

/// Applies every change that is not a no-op, and records it in `state`.
pub fn apply(changes: &[Change], state: &mut InstallState) -> anyhow::Result<()> {
    for change in changes.iter().filter(|c| !c.is_noop()) {
        let now = read(&change.write_path, &change.target.display).map_err(|err| match err {
            super::PlanError::Refused(r) => anyhow::anyhow!("{}", r[0]),
            super::PlanError::Other(e) => e,
        })?;
        if now != change.before {
            bail!(
                "{} changed while memloop was working (an agent may be rewriting it); nothing was written. \
                 Run the command again",
                change.target.display
            );
        }
    }
    let mut done: Vec<&Change> = Vec::new();
    for change in changes.iter().filter(|c| !c.is_noop()) {
        if let Err(err) = put(&change.write_path, &change.after, state) {
            let rollback: Vec<String> = done
                .iter()
                .rev()
                .filter_map(|c| {
                    put(&c.write_path, &c.before, state)
                        .err()
                        .map(|e| format!("{}: {e:#}", c.target.display))
                })
                .collect();
            let mut message = format!("writing {} failed: {err:#}; ", change.target.display);
            if rollback.is_empty() {
                message.push_str("every file written before it was restored");
            } else {
                message.push_str(&format!(
                    "restoring failed too, check by hand: {}",
                    rollback.join("; ")
                ));
            }
            bail!(message);
        }
        done.push(change);
    }
    for change in done {
        state.record(&change.write_path, &change.before, &change.after);
    }
    Ok(())
}

/// Puts `content` at `path` atomically.
fn put(path: &Path, content: &Content, state: &mut InstallState) -> anyhow::Result<()> {
    match content {
        Content::Missing => match fs_err::remove_file(path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err.into()),
            _ => Ok(()),
        },
        Content::File { text } => {
            create_parents(path, state)?;
            write_atomic(path, text.as_bytes())
        }
        Content::Link { target } => {
            create_parents(path, state)?;
            let dir = path.parent().context("a link needs a parent folder")?;
            let temp = unique_sibling(dir, path)?;
            make_symlink(target, &temp)
                .with_context(|| format!("cannot create the symlink {}", path.display()))?;
            fs_err::rename(&temp, path).inspect_err(|_| {
                let _ = std::fs::remove_file(&temp);
            })?;
            Ok(())
        }
    }
}

fn unique_sibling(dir: &Path, path: &Path) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for attempt in 0..100 {
        let candidate = dir.join(format!(".{name}.memloop-{}-{attempt}", std::process::id()));
        if std::fs::symlink_metadata(&candidate).is_err() {
            return Ok(candidate);
        }
    }
    bail!(
        "cannot find a free temporary name next to {}",
        path.display()
    )
}

fn create_parents(path: &Path, state: &mut InstallState) -> anyhow::Result<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let missing: Vec<PathBuf> = parent
        .ancestors()
        .take_while(|dir| !dir.exists())
        .map(Path::to_path_buf)
        .collect();
    fs_err::create_dir_all(parent)?;
    for dir in missing.into_iter().rev() {
        if !state.created_dirs.contains(&dir) {
            state.created_dirs.push(dir);
        }
    }
    Ok(())
}

/// Removes folders memloop created that are empty now, deepest first.
pub fn remove_created_dirs(state: &mut InstallState) {
    let mut dirs = std::mem::take(&mut state.created_dirs);
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in dirs {
        if std::fs::remove_dir(&dir).is_err() && dir.exists() {
            state.created_dirs.push(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{Desired, Scope, Target};

    fn change(path: &Path, before: Content, after: Content) -> Change {
        Change {
            target: Target {
                path: path.to_path_buf(),
                display: path.display().to_string(),
                scope: Scope::Project,
                agents: Vec::new(),
                desired: Desired::Whole {
                    content: String::new(),
                },
                note: None,
            },
            write_path: path.to_path_buf(),
            before,
            after,
        }
    }

    fn file(text: &str) -> Content {
        Content::File { text: text.into() }
    }

    #[test]
    fn a_file_changed_since_planning_aborts_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs_err::write(&a, "a0").unwrap();
        fs_err::write(&b, "b0").unwrap();
        let plan = [
            change(&a, file("a0"), file("a1")),
            change(&b, file("b0"), file("b1")),
        ];
        fs_err::write(&b, "b-edited-by-an-agent").unwrap();
        let err = apply(&plan, &mut InstallState::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("changed while memloop was working"),
            "{err}"
        );
        assert_eq!(fs_err::read_to_string(&a).unwrap(), "a0");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_write_rolls_back_the_files_written_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        fs_err::write(&a, "a0").unwrap();
        // Nobody can create files in /proc, not even root: the second write fails.
        let proc_file = Path::new("/proc/version");
        let current = file(&fs_err::read_to_string(proc_file).unwrap());
        let plan = [
            change(&a, file("a0"), file("a1")),
            change(proc_file, current, file("x")),
        ];
        let mut state = InstallState::default();
        let err = apply(&plan, &mut state).unwrap_err();
        assert!(
            err.to_string()
                .contains("every file written before it was restored"),
            "{err}"
        );
        assert_eq!(fs_err::read_to_string(&a).unwrap(), "a0");
        assert!(state.files.is_empty());
    }
}
