//! Writing a plan as one transaction: lock, check nothing changed since it was read, write each
//! file atomically (temporary file + rename, permissions kept), checking again at the last moment
//! before each rename, and roll back on any failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::state::InstallState;
use super::{Change, Content, read};
use crate::files::{
    CHANGED, FileLock, Guard, Was, create_private_dir, process_note, real_path, remove_guarded,
    replace_guarded,
};
use crate::instructions::make_symlink;

/// How long a command waits for another memloop working on the same repository.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Held while a command writes; released on drop.
pub struct Lock {
    _held: FileLock,
    /// Who held the lock when this command had to wait for it (another memloop).
    pub waited_for: Option<String>,
}

impl Lock {
    /// One writer per repository: two memloop runs never interleave their writes. Waits at most
    /// [`LOCK_WAIT`], then names the holder.
    pub fn acquire(root: &Path) -> anyhow::Result<Lock> {
        let path = InstallState::path_for(root)?.with_extension("lock");
        if let Some(dir) = path.parent() {
            create_private_dir(dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
        }
        let (held, waited_for) = FileLock::acquire_bounded(&path, LOCK_WAIT, &process_note())?;
        Ok(Lock {
            _held: held,
            waited_for,
        })
    }
}

impl Lock {
    /// Who holds the repository's lock right now, if anyone does (without taking it).
    pub fn holder(root: &Path) -> Option<String> {
        let path = InstallState::path_for(root).ok()?.with_extension("lock");
        FileLock::holder(&path)
    }
}

/// Stamps `path` and checks it still holds `expected` (see `files::Guard`).
fn guard(path: &Path, display: &str, expected: &Content) -> anyhow::Result<Guard> {
    let was = match expected {
        Content::Missing => Was::Missing,
        Content::File { text } => Was::File(text.as_bytes()),
        Content::Link { .. } => Was::Other,
    };
    let guard = Guard::take(path, display, was)?;
    if let Content::Link { .. } = expected
        && read(path, display).ok().as_ref() != Some(expected)
    {
        bail!("{display} {CHANGED} (another program changed it after memloop read it)");
    }
    Ok(guard)
}

/// Paths the install state must record are checked before the first write: a path it cannot
/// hold (not UTF-8) would leave files written and no state for uninstall to undo them.
fn check_recordable(changes: &[&Change], state: &InstallState) -> anyhow::Result<()> {
    let paths = std::iter::once(&state.root).chain(changes.iter().map(|c| &c.write_path));
    for path in paths {
        if path.to_str().is_none() {
            bail!(
                "{} is not valid UTF-8, and memloop's install state (JSON) cannot record such a path, \
                 so uninstall could not undo the install; nothing was written. Rename the folder to a UTF-8 name",
                path.display()
            );
        }
    }
    Ok(())
}

/// Applies every change that is not a no-op, and records it in `state`.
pub fn apply(changes: &[Change], state: &mut InstallState) -> anyhow::Result<()> {
    let pending: Vec<&Change> = changes.iter().filter(|c| !c.is_noop()).collect();
    check_recordable(&pending, state)?;
    for change in &pending {
        guard(&change.write_path, &change.target.display, &change.before).map_err(|_| {
            anyhow::anyhow!(
                "{} {CHANGED} (it changed after memloop read it, perhaps an agent rewriting its \
                 config); nothing was written",
                change.target.display
            )
        })?;
    }
    let mut done: Vec<&Change> = Vec::new();
    for change in pending {
        let display = &change.target.display;
        let written = guard(&change.write_path, display, &change.before)
            .and_then(|guard| put(&change.write_path, &change.after, state, guard));
        if let Err(err) = written {
            // Only what still holds memloop's bytes is put back: a file someone changed since
            // memloop wrote it keeps their change.
            let rollback: Vec<String> = done
                .iter()
                .rev()
                .filter_map(|c| {
                    guard(&c.write_path, &c.target.display, &c.after)
                        .and_then(|guard| put(&c.write_path, &c.before, state, guard))
                        .err()
                        .map(|e| format!("{}: {e:#}", c.target.display))
                })
                .collect();
            let mut message = format!("writing {display} failed: {err:#}; ");
            if done.is_empty() {
                message.push_str("nothing was written");
            } else if rollback.is_empty() {
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
        let path = &change.write_path;
        if let Some(original) = state.original(path)
            && !state.unchanged_since_write(path, &change.before)
        {
            state.rebase(
                path,
                super::rebased_original(&change.target, &change.before, Some(original)),
            );
        }
        state.record(path, &change.before, &change.after, &change.target.desired);
    }
    Ok(())
}

/// Puts `content` at `path` atomically, as long as `guard` finds the file still as memloop read
/// it right before the rename (or the removal), and reports a write that slipped in right after.
fn put(
    path: &Path,
    content: &Content,
    state: &mut InstallState,
    guard: Guard,
) -> anyhow::Result<()> {
    match content {
        Content::Missing => remove_guarded(guard),
        Content::File { text } => {
            create_parents(path, state)?;
            replace_guarded(guard, text.as_bytes(), true)
        }
        Content::Link { target } => {
            create_parents(path, state)?;
            let dir = path.parent().context("a link needs a parent folder")?;
            let temp = unique_sibling(dir, path)?;
            make_symlink(target, &temp)
                .with_context(|| format!("cannot create the symlink {}", path.display()))?;
            let renamed = guard
                .check()
                .and_then(|()| Ok(fs_err::rename(&temp, path)?));
            if renamed.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            renamed
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

/// Removes folders memloop created that are empty now, deepest first. A folder whose path now
/// passes through a symlink is somewhere else than the one memloop created: it stays.
pub fn remove_created_dirs(state: &mut InstallState) {
    let mut dirs = std::mem::take(&mut state.created_dirs);
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in dirs {
        if real_path(&dir).is_ok_and(|real| real != dir) {
            continue;
        }
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
                .contains("changed while memloop was writing; run again"),
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
