//! Notes that may no longer be true: a note about code names the files it is about, each with a
//! fingerprint of its content when the note was written; when a file's content differs now (a
//! commit, a checkout, an edit not committed yet) or the file is gone, every place that shows
//! the note says so, naming the files, so the agent checks before building on it.
//!
//! Content fingerprints rather than git history: they need no git call at all when a note is
//! shown (a hook pays for a few small reads of the shown notes' files, whatever the number of
//! notes), see the working tree and the commits alike, and hold in a fresh clone, where file
//! times mean nothing. The commit a note was written at is recorded beside them, so the mark
//! can say since when. Line ends do not count: a Windows checkout of the same files is no change.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Component, Path};

use sha2::{Digest, Sha256};

use super::record::Note;

/// At most this many files per note: a note about more is about the project, not about files.
pub const MAX_PATHS: usize = 10;
/// A path longer than this is not one a note names.
const PATH_BYTES: usize = 300;
/// Of a larger file, the fingerprint covers its first bytes and its length.
const HASHED_BYTES: u64 = 8 << 20;
/// Hex digits kept of a fingerprint: 48 bits, far beyond what one file's edits could collide in.
const FINGERPRINT_HEX: usize = 12;

/// What the note's files look like now, against what they were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub changed: Vec<String>,
    pub gone: Vec<String>,
    /// The day the note was written (its `created`), and the commit then, if known.
    pub day: String,
    pub commit: Option<String>,
}

impl Stale {
    /// The files, as a person says them: `a.rs and b.rs changed, c.rs is gone`.
    fn files(&self) -> String {
        let list = |paths: &[String]| match paths {
            [one] => format!("`{one}`"),
            [init @ .., last] => format!(
                "{} and `{last}`",
                init.iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            [] => String::new(),
        };
        let mut parts = Vec::new();
        if !self.changed.is_empty() {
            parts.push(format!("{} changed", list(&self.changed)));
        }
        if !self.gone.is_empty() {
            let verb = if self.gone.len() == 1 { "is" } else { "are" };
            parts.push(format!("{} {verb} gone", list(&self.gone)));
        }
        parts.join(", ")
    }

    /// The whole warning, for an answer that shows the note.
    pub fn describe(&self) -> String {
        let commit = self
            .commit
            .as_deref()
            .map(|c| format!(" at commit {}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        format!(
            "possibly stale: {} since this note was written ({}{commit}); check it against \
             the code before relying on it, then store it again (corrected) or forget it",
            self.files(),
            self.day
        )
    }

    /// The short mark for a line of the session index.
    pub fn mark(&self) -> String {
        format!("possibly stale: {}", self.files())
    }
}

/// Compares notes' files with their fingerprints, each file read at most once.
pub struct Checker<'r> {
    root: &'r Path,
    now: HashMap<String, Option<String>>,
}

impl<'r> Checker<'r> {
    pub fn new(root: &'r Path) -> Self {
        Checker {
            root,
            now: HashMap::new(),
        }
    }

    /// What changed among the note's files since it was written; `None` when nothing did (or it
    /// names no file).
    pub fn check(&mut self, note: &Note) -> Option<Stale> {
        if note.about.is_empty() {
            return None;
        }
        let (mut changed, mut gone) = (Vec::new(), Vec::new());
        for (path, then) in &note.about {
            let root = self.root;
            let now = self
                .now
                .entry(path.clone())
                .or_insert_with(|| fingerprint(root, path));
            match now {
                None => gone.push(path.clone()),
                Some(now) if now != then => changed.push(path.clone()),
                Some(_) => {}
            }
        }
        if changed.is_empty() && gone.is_empty() {
            return None;
        }
        Some(Stale {
            changed,
            gone,
            day: note.created.get(..10).unwrap_or(&note.created).to_owned(),
            commit: note.commit.clone(),
        })
    }
}

/// The files a note is about, with their fingerprints now: the paths `given` (each must be in
/// the repository), then the paths its text names that exist in the repository, at most
/// [`MAX_PATHS`] in all.
pub fn about(root: &Path, text: &str, given: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut about: Vec<(String, String)> = Vec::new();
    for path in given {
        let Some(clean) = repository_path(path) else {
            return Err(format!(
                "paths: {path:?} is not a path inside the repository; give it relative to the \
                 repository's root, like `src/main.rs`"
            ));
        };
        let Some(print) = fingerprint(root, &clean) else {
            return Err(format!(
                "paths: `{clean}` is not in the repository (looked under {}); give files or \
                 folders that exist, relative to its root",
                root.display()
            ));
        };
        if !about.iter().any(|(p, _)| *p == clean) {
            about.push((clean, print));
        }
    }
    for word in text.split_whitespace() {
        if about.len() >= MAX_PATHS {
            break;
        }
        let Some(path) = named_path(word) else {
            continue;
        };
        if about.iter().any(|(p, _)| *p == path) {
            continue;
        }
        if let Some(print) = fingerprint(root, &path) {
            about.push((path, print));
        }
    }
    about.truncate(MAX_PATHS);
    Ok(about)
}

/// A word of prose that looks like a repository path (`src/gate/mod.rs`, `./Makefile.toml`,
/// `` `build.rs:42` ``), cleaned of what surrounds it; whether it exists is for the caller.
fn named_path(word: &str) -> Option<String> {
    let word = word.trim_matches(|c: char| {
        matches!(
            c,
            '`' | '"' | '\'' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | ',' | ';' | '*'
        )
    });
    let word = word.trim_end_matches(['.', ':', '!', '?']);
    // `file.rs:42` or `file.rs:42:7`: the file.
    let word = match word.split_once(':') {
        Some((file, rest)) if rest.split(':').all(|n| n.parse::<u32>().is_ok()) => file,
        Some(_) => return None,
        None => word,
    };
    if word.contains("://") || word.starts_with('-') || !word.contains(['/', '.']) {
        return None;
    }
    // A dotted word needs a letter after its last dot (`v1.2`, `e.g` are no files).
    let looks_like_file = word.contains('/')
        || word.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && ext.chars().any(|c| c.is_ascii_alphabetic()) && ext.len() <= 10
        });
    if !looks_like_file {
        return None;
    }
    repository_path(word)
}

/// `path` as a clean path relative to the repository's root (`./a//b/` is `a/b`), or `None` when
/// it leaves the repository, is absolute, or points into memloop's own folder.
fn repository_path(path: &str) -> Option<String> {
    if path.is_empty() || path.len() > PATH_BYTES || path.contains(['\\', '\0', '\n']) {
        return None;
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    if parts.is_empty() || parts[0] == ".memloop" || parts[0] == ".git" {
        return None;
    }
    Some(parts.join("/"))
}

/// A fingerprint of the file or folder at `path` under `root` now; `None` when there is none
/// (or it cannot be read, or a link on the way leads out of the repository).
fn fingerprint(root: &Path, path: &str) -> Option<String> {
    let full = root.join(path);
    crate::files::check_within(&full, root).ok()?;
    let meta = std::fs::metadata(&full).ok()?;
    let mut hash = Sha256::new();
    if meta.is_dir() {
        // A folder changes when what is in it does by name: files added, removed, renamed.
        let mut names: Vec<String> = std::fs::read_dir(&full)
            .ok()?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        hash.update(b"folder\0");
        for name in names {
            hash.update(name.as_bytes());
            hash.update([0]);
        }
    } else {
        let file = crate::files::open_regular(&full).ok()?;
        let mut reader = file.take(HASHED_BYTES);
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            // Line ends do not count: CRLF and LF checkouts of a file are the same file.
            for piece in chunk[..n].split(|b| *b == b'\r') {
                hash.update(piece);
            }
        }
        if meta.len() > HASHED_BYTES {
            hash.update(meta.len().to_le_bytes());
        }
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Some(hex[..FINGERPRINT_HEX].to_owned())
}

/// The commit checked out at `root`, for the record of when a note was written; `None` outside
/// git or before the first commit. One git call, made when a note is stored, never when shown.
pub fn head_commit(root: &Path) -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "--verify", "--quiet", "HEAD"])
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| commit[..commit.len().min(12)].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note_about(about: Vec<(String, String)>) -> Note {
        Note {
            content: "x".into(),
            category: "gotchas".into(),
            importance: 5,
            tags: vec![],
            key: None,
            task_id: None,
            created: "2026-11-30T09:55:01.123Z".into(),
            updated: None,
            forgotten: None,
            about,
            commit: Some("3074b62c1d2e".into()),
            extra: vec![],
        }
    }

    #[test]
    fn words_that_name_paths_are_found_and_the_rest_is_not() {
        for (word, path) in [
            ("src/gate/mod.rs", Some("src/gate/mod.rs")),
            ("`src/gate/mod.rs`,", Some("src/gate/mod.rs")),
            ("(./Makefile.toml)", Some("Makefile.toml")),
            ("build.rs:42", Some("build.rs")),
            ("build.rs:42:7.", Some("build.rs")),
            ("src/", Some("src")),
            ("Cargo.toml.", Some("Cargo.toml")),
            ("https://example.com/a.rs", None),
            ("v1.2", None),
            ("--flag=a/b", None),
            ("../outside.rs", None),
            ("/etc/passwd", None),
            (".memloop/memory/notes/n-1.md", None),
            ("key:value/x", None),
            ("words", None),
            // Whether a candidate is a file is for the repository to say (`e.g` is none).
            ("e.g.", Some("e.g")),
        ] {
            assert_eq!(named_path(word).as_deref(), path, "{word}");
        }
    }

    #[test]
    fn a_note_is_stale_when_a_file_changed_or_went_and_fresh_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/tax.py"), "round per line\n").unwrap();
        std::fs::write(root.join("README.md"), "shop\n").unwrap();
        let about = super::about(
            root,
            "VAT rounds per line in src/tax.py (see README.md and missing.rs)",
            &[],
        )
        .unwrap();
        let paths: Vec<&str> = about.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["src/tax.py", "README.md"]);
        let note = note_about(about);
        assert_eq!(Checker::new(root).check(&note), None);

        // CRLF is no change; an edit is, and a file gone too.
        std::fs::write(root.join("src/tax.py"), "round per line\r\n").unwrap();
        assert_eq!(Checker::new(root).check(&note), None);
        std::fs::write(root.join("src/tax.py"), "round per order\n").unwrap();
        std::fs::remove_file(root.join("README.md")).unwrap();
        let stale = Checker::new(root).check(&note).unwrap();
        assert_eq!(stale.changed, ["src/tax.py"]);
        assert_eq!(stale.gone, ["README.md"]);
        let said = stale.describe();
        assert!(
            said.starts_with(
                "possibly stale: `src/tax.py` changed, `README.md` is gone since this note was \
                 written (2026-11-30 at commit 3074b62c1d2e)"
            ),
            "{said}"
        );
        assert_eq!(
            stale.mark(),
            "possibly stale: `src/tax.py` changed, `README.md` is gone"
        );
    }

    #[test]
    fn given_paths_must_be_in_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        let about = super::about(root, "", &["./src/".into(), "src".into()]).unwrap();
        assert_eq!(about.len(), 1);
        assert_eq!(about[0].0, "src");
        let err = super::about(root, "", &["../x".into()]).unwrap_err();
        assert!(err.contains("not a path inside the repository"), "{err}");
        let err = super::about(root, "", &["nope.rs".into()]).unwrap_err();
        assert!(err.contains("`nope.rs` is not in the repository"), "{err}");
        // A folder changes when a file is added to it.
        let note = note_about(about);
        assert_eq!(Checker::new(root).check(&note), None);
        std::fs::write(root.join("src/new.rs"), "").unwrap();
        assert_eq!(Checker::new(root).check(&note).unwrap().changed, ["src"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_repository_is_not_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link.txt"))
            .unwrap();
        assert_eq!(fingerprint(dir.path(), "link.txt"), None);
        assert!(
            super::about(dir.path(), "see link.txt", &[])
                .unwrap()
                .is_empty()
        );
    }
}
