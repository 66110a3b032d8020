//! Per-person files memloop writes inside a repository (`.claude/settings.local.json` from
//! `memloop trust`: one person's approval) stay out of git. Claude Code, when it first writes
//! that file itself, adds it to the user's global git excludes; memloop keeps to the repository
//! and lists each such file in the clone's own `.git/info/exclude`, which git reads like a
//! `.gitignore` but never commits, under a comment naming memloop. `memloop trust --revoke` and
//! `memloop uninstall` take the lines back once the file is gone.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The comment above each line memloop adds; the pair is what `forget` takes back.
const MARKER: &str = "# memloop: per-person file (memloop trust), this clone only";

/// The clone's `info/exclude`: `.git/info/exclude`, or for a worktree (`.git` is a file
/// `gitdir: <dir>`) the one of the repository it belongs to. `None` outside a git repository.
fn exclude_file(root: &Path) -> Option<PathBuf> {
    Some(common_dir(root)?.join("info").join("exclude"))
}

/// The git folder the clone's worktrees share: `.git`, or for a linked worktree the folder its
/// `commondir` names. `None` outside a git repository.
pub fn common_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else {
        let text = crate::files::read_text(&dot_git).ok()?;
        let dir = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
        let dir = if dir.is_absolute() {
            dir
        } else {
            root.join(dir)
        };
        // A worktree's own folder names the shared one in `commondir`.
        match crate::files::read_text(&dir.join("commondir")) {
            Ok(common) => {
                let common = PathBuf::from(common.trim());
                if common.is_absolute() {
                    common
                } else {
                    dir.join(common)
                }
            }
            Err(_) => dir,
        }
    };
    Some(git_dir)
}

/// The main worktree of the clone `root` is a linked worktree of (`git worktree add`); `None`
/// when `root` is not a linked worktree, or the clone has no main worktree (a bare one).
pub fn main_worktree(root: &Path) -> Option<PathBuf> {
    if !std::fs::symlink_metadata(root.join(".git")).ok()?.is_file() {
        return None;
    }
    let common = common_dir(root)?.canonicalize().ok()?;
    if common.file_name()? != ".git" {
        return None;
    }
    let main = common.parent()?.to_path_buf();
    (main != root.canonicalize().ok()?).then_some(main)
}

/// The pattern for `rel` (a path relative to the repository root, `/` separated), anchored.
fn pattern(rel: &str) -> String {
    format!("/{}", rel.trim_start_matches('/'))
}

/// Lists `rel` in the clone's excludes unless memloop already did. Returns the file written.
pub fn remember(root: &Path, rel: &str) -> anyhow::Result<Option<PathBuf>> {
    let Some(path) = exclude_file(root) else {
        return Ok(None);
    };
    let before = crate::files::read_optional(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .unwrap_or_default();
    let pattern = pattern(rel);
    if before.lines().any(|line| line.trim_end() == pattern) {
        return Ok(None);
    }
    let mut after = before.clone();
    if !after.is_empty() && !after.ends_with('\n') {
        after.push('\n');
    }
    after.push_str(&format!("{MARKER}\n{pattern}\n"));
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    fs_err::write(&path, after)?;
    Ok(Some(path))
}

/// Takes back the lines `remember` added for `rel`, when the file itself is gone; a line the
/// user wrote (without memloop's comment above it) stays.
pub fn forget(root: &Path, rel: &str) -> anyhow::Result<Option<PathBuf>> {
    if std::fs::symlink_metadata(root.join(rel)).is_ok() {
        return Ok(None);
    }
    let Some(path) = exclude_file(root) else {
        return Ok(None);
    };
    let Ok(Some(before)) = crate::files::read_optional(&path) else {
        return Ok(None);
    };
    let block = format!("{MARKER}\n{}\n", pattern(rel));
    let Some(at) = before.find(&block) else {
        return Ok(None);
    };
    let after = format!("{}{}", &before[..at], &before[at + block.len()..]);
    fs_err::write(&path, after)?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REL: &str = ".claude/settings.local.json";

    #[test]
    fn the_file_is_listed_once_and_taken_back_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        let users = "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp";
        std::fs::write(root.join(".git/info/exclude"), users).unwrap();

        let written = remember(root, REL).unwrap();
        assert_eq!(written, Some(root.join(".git/info/exclude")));
        assert_eq!(remember(root, REL).unwrap(), None, "listed once");
        let text = std::fs::read_to_string(root.join(".git/info/exclude")).unwrap();
        assert_eq!(
            text,
            format!("{users}\n{MARKER}\n/.claude/settings.local.json\n")
        );

        // While the file exists, its line stays.
        std::fs::create_dir_all(root.join(".claude")).unwrap();
        std::fs::write(root.join(REL), "{}").unwrap();
        assert_eq!(forget(root, REL).unwrap(), None);
        std::fs::remove_file(root.join(REL)).unwrap();
        forget(root, REL).unwrap();
        let text = std::fs::read_to_string(root.join(".git/info/exclude")).unwrap();
        assert_eq!(text, format!("{users}\n"));
    }

    #[test]
    fn a_line_the_user_wrote_is_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        let users = "/.claude/settings.local.json\n";
        std::fs::write(root.join(".git/info/exclude"), users).unwrap();
        assert_eq!(remember(root, REL).unwrap(), None);
        assert_eq!(forget(root, REL).unwrap(), None);
        assert_eq!(
            std::fs::read_to_string(root.join(".git/info/exclude")).unwrap(),
            users
        );
    }

    #[test]
    fn a_worktree_uses_the_excludes_of_its_repository() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let wt_git = main.join(".git/worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        remember(&wt, REL).unwrap();
        let text = std::fs::read_to_string(main.join(".git/info/exclude")).unwrap();
        assert!(text.ends_with("/.claude/settings.local.json\n"), "{text}");
    }

    #[test]
    fn a_linked_worktree_names_its_main_worktree_and_the_main_one_none() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let main = base.join("main");
        let wt_git = main.join(".git/worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let wt = base.join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        assert_eq!(main_worktree(&wt), Some(main.clone()));
        assert_eq!(main_worktree(&main), None);
        assert_eq!(main_worktree(&base), None, "not a repository");
        // A worktree of a bare clone has no main worktree to name.
        let bare = base.join("bare.git");
        let bare_wt_git = bare.join("worktrees/b");
        std::fs::create_dir_all(&bare_wt_git).unwrap();
        std::fs::write(bare_wt_git.join("commondir"), "../..\n").unwrap();
        let b = base.join("b");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(
            b.join(".git"),
            format!("gitdir: {}\n", bare_wt_git.display()),
        )
        .unwrap();
        assert_eq!(main_worktree(&b), None);
    }

    #[test]
    fn outside_a_git_repository_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(remember(dir.path(), REL).unwrap(), None);
        assert!(!dir.path().join(".git").exists());
    }
}
