//! Edits made through a shell (`sed -i`, a heredoc, a script, `apply_patch`): the gate counts the
//! files that changed in the git worktree since the previous check.
//!
//! Git's view of the worktree is taken with `git status --porcelain=v2 -z --untracked-files=all
//! --no-renames --ignore-submodules=all` (tracked changes and untracked files, without what
//! `.gitignore` ignores; `GIT_OPTIONAL_LOCKS=0`, so the gate never takes the index lock from
//! under the agent). Each entry is fingerprinted with its status line and the worktree file's
//! size, mtime, ctime and inode, so a file edited again while already dirty, or edited twice
//! across checks, changes its fingerprint; one whose edit was undone leaves the list.
//!
//! A check compares with the snapshot saved at the previous check. When there is none (that
//! window had no shell call, so no snapshot was taken), an entry counts when its file changed
//! (mtime or ctime; for a deleted file, its directory) at or after the previous check, or after
//! the session's log was created at the first check. Outside a git repository, or when git
//! cannot run, nothing is counted and the tool count alone applies.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// More dirty entries than this are counted but not kept for the next check (the time rule
/// applies then): the state stays small.
const MAX_KEPT: usize = 5000;

/// The worktree as git saw it at one check: one fingerprint per dirty path, sorted by path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The recorded check this snapshot was taken at (`Session::checks` after it).
    pub check: u64,
    pub entries: Vec<(String, u64)>,
}

/// One dirty path now, with what the time rule needs.
#[derive(Debug, Clone)]
struct Entry {
    path: String,
    fingerprint: u64,
    /// The newest of mtime and ctime of the file, or of its directory when it is gone.
    changed: Option<SystemTime>,
}

/// The repository holding `dir`: the nearest ancestor with a `.git` (directory or file).
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The worktree's dirty entries, or `None` when git cannot tell (not a repository, no git).
fn status(root: &Path) -> Option<Vec<Entry>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=all",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(parse(root, &out.stdout))
}

/// Parses `git status --porcelain=v2 -z` output into fingerprinted entries.
fn parse(root: &Path, output: &[u8]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut fields = output.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        let Ok(line) = std::str::from_utf8(field) else {
            continue;
        };
        // The path is the last of a fixed number of space-separated fields.
        let (head, path) = match line.as_bytes().first() {
            Some(b'1') => split_path(line, 8),
            Some(b'u') => split_path(line, 10),
            Some(b'2') => {
                // A rename carries its original path as the next field.
                fields.next();
                split_path(line, 9)
            }
            Some(b'?') => split_path(line, 1),
            _ => None,
        }
        .unwrap_or((line, ""));
        if path.is_empty() {
            continue;
        }
        entries.push(fingerprint(root, head, path));
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries
}

fn split_path(line: &str, fields_before: usize) -> Option<(&str, &str)> {
    let mut at = 0;
    for _ in 0..fields_before {
        at += line[at..].find(' ')? + 1;
    }
    Some((&line[..at], &line[at..]))
}

fn fingerprint(root: &Path, head: &str, path: &str) -> Entry {
    let file = root.join(path);
    let mut hasher = DefaultHasher::new();
    head.hash(&mut hasher);
    let changed = match std::fs::symlink_metadata(&file) {
        Ok(meta) => {
            meta.len().hash(&mut hasher);
            stat_times(&meta).hash(&mut hasher);
            newest_change(&meta)
        }
        Err(_) => {
            "gone".hash(&mut hasher);
            file.parent()
                .and_then(|dir| std::fs::metadata(dir).ok())
                .and_then(|meta| newest_change(&meta))
        }
    };
    Entry {
        path: path.to_owned(),
        fingerprint: hasher.finish(),
        changed,
    }
}

#[cfg(unix)]
fn stat_times(meta: &std::fs::Metadata) -> (i64, i64, i64, i64, u64) {
    use std::os::unix::fs::MetadataExt;
    (
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.ino(),
    )
}

#[cfg(not(unix))]
fn stat_times(meta: &std::fs::Metadata) -> (i64, i64, i64, i64, u64) {
    let nanos = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    (nanos, 0, 0, 0, 0)
}

fn newest_change(meta: &std::fs::Metadata) -> Option<SystemTime> {
    let modified = meta.modified().ok();
    #[cfg(unix)]
    let changed = {
        use std::os::unix::fs::MetadataExt;
        u64::try_from(meta.ctime()).ok().map(|secs| {
            SystemTime::UNIX_EPOCH
                + Duration::from_secs(secs)
                + Duration::from_nanos(meta.ctime_nsec().max(0) as u64)
        })
    };
    #[cfg(not(unix))]
    let changed: Option<SystemTime> = None;
    modified.max(changed)
}

/// What one check found in the worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count {
    /// Paths changed since the previous check.
    pub changed: u64,
    /// The snapshot to keep for the next check, when small enough.
    pub keep: Option<Snapshot>,
}

/// Counts the files changed in the worktree holding `dir` since the previous check.
///
/// `previous` is the snapshot saved at an earlier check; it is compared entry by entry only
/// when it was taken at the check just before this one (`previous_check`). Otherwise entries
/// changed at or after `since` count. `check` is the number this check gets.
pub fn count(
    dir: &Path,
    previous: Option<&Snapshot>,
    previous_check: u64,
    since: Option<SystemTime>,
    check: u64,
) -> Option<Count> {
    let root = repo_root(dir)?;
    let now = status(&root)?;
    Some(compare(&now, previous, previous_check, since, check))
}

fn compare(
    now: &[Entry],
    previous: Option<&Snapshot>,
    previous_check: u64,
    since: Option<SystemTime>,
    check: u64,
) -> Count {
    let changed = match previous.filter(|snap| snap.check == previous_check) {
        Some(snap) => differing(&snap.entries, now),
        None => match since {
            Some(since) => now
                .iter()
                .filter(|entry| entry.changed.is_some_and(|at| at >= since))
                .count() as u64,
            None => 0,
        },
    };
    let keep = (now.len() <= MAX_KEPT).then(|| Snapshot {
        check,
        entries: now
            .iter()
            .map(|entry| (entry.path.clone(), entry.fingerprint))
            .collect(),
    });
    Count { changed, keep }
}

/// Paths in one sorted list and not the other, or in both with another fingerprint.
fn differing(before: &[(String, u64)], now: &[Entry]) -> u64 {
    let (mut i, mut j, mut changed) = (0, 0, 0);
    while i < before.len() || j < now.len() {
        match (before.get(i), now.get(j)) {
            (Some((path, print)), Some(entry)) => match path.as_str().cmp(entry.path.as_str()) {
                std::cmp::Ordering::Less => {
                    changed += 1;
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    changed += 1;
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    changed += u64::from(*print != entry.fingerprint);
                    i += 1;
                    j += 1;
                }
            },
            (Some(_), None) => {
                changed += 1;
                i += 1;
            }
            (None, Some(_)) => {
                changed += 1;
                j += 1;
            }
            (None, None) => break,
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@127.0.0.1")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@127.0.0.1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "b\n").unwrap();
        git(dir.path(), &["add", "."]);
        git(dir.path(), &["commit", "-qm", "init"]);
        dir
    }

    /// Writes with a fresh mtime even on coarse-clock file systems.
    fn edit(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        let file = std::fs::File::options().write(true).open(path).unwrap();
        let later = SystemTime::now() + Duration::from_secs(1);
        file.set_modified(later).unwrap();
    }

    #[test]
    fn changes_since_the_previous_snapshot_count_per_file() {
        let dir = repo();
        let root = dir.path();
        // Dirty before the session: a.txt edited, an untracked note.
        edit(&root.join("a.txt"), "a, dirty before\n");
        std::fs::write(root.join("note.md"), "x\n").unwrap();
        let first = count(root, None, 0, None, 1).unwrap();
        assert_eq!(first.changed, 0, "no baseline, no time: nothing counted");
        let snap = first.keep.unwrap();
        assert_eq!(snap.entries.len(), 2);

        // Through a shell: the dirty file edited again, a new file, a deletion, an ignored
        // build output.
        edit(&root.join("a.txt"), "a, edited again\n");
        std::fs::write(root.join("new.txt"), "n\n").unwrap();
        std::fs::remove_file(root.join("b.txt")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/out.o"), "o\n").unwrap();
        let second = count(root, Some(&snap), 1, None, 2).unwrap();
        assert_eq!(second.changed, 3);

        // The same file edited once more: it counts again; unchanged dirty files do not.
        let snap = second.keep.unwrap();
        edit(&root.join("new.txt"), "n, twice\n");
        let third = count(root, Some(&snap), 2, None, 3).unwrap();
        assert_eq!(third.changed, 1);

        // An edit undone (back to HEAD) is a change too.
        let snap = third.keep.unwrap();
        git(root, &["checkout", "--", "a.txt"]);
        assert_eq!(count(root, Some(&snap), 3, None, 4).unwrap().changed, 1);
    }

    #[test]
    fn without_a_current_snapshot_files_changed_since_the_window_began_count() {
        let dir = repo();
        let root = dir.path();
        std::fs::write(root.join("old-note.md"), "before\n").unwrap();
        let old = std::fs::File::options()
            .write(true)
            .open(root.join("old-note.md"))
            .unwrap();
        old.set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
        let since = SystemTime::now() - Duration::from_secs(60);
        edit(&root.join("a.txt"), "sed -i\n");
        // A snapshot from an older check does not count as the previous one.
        let stale = Snapshot {
            check: 1,
            entries: Vec::new(),
        };
        let counted = count(root, Some(&stale), 4, Some(since), 5).unwrap();
        // set_modified gave old-note.md an old mtime but a new ctime: a change (chmod, touch)
        // after the window began counts, whichever time shows it.
        assert_eq!(counted.changed, 2, "{counted:?}");
        assert_eq!(counted.keep.unwrap().check, 5);
        // Far in the future: nothing changed since.
        let future = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(count(root, None, 0, Some(future), 1).unwrap().changed, 0);
    }

    #[test]
    fn outside_git_nothing_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(count(dir.path(), None, 0, None, 1), None);
    }

    #[test]
    fn porcelain_v2_entries_are_parsed_with_their_paths() {
        let out = b"1 .M N... 100644 100644 100644 aaa aaa sub/a b.txt\0u UU N... 100644 100644 100644 100644 h1 h2 h3 conflict.txt\0? new file.txt\0";
        let entries = parse(Path::new("/nonexistent"), out);
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["conflict.txt", "new file.txt", "sub/a b.txt"]);
    }
}
