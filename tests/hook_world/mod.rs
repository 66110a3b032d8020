//! A repository whose memory holds one note, for the tests that run `memloop hook` as an agent
//! would (its input on stdin) and read what the hook prints and the notes it leaves in the
//! gate's state folder (tests/kimi_session_start.rs, tests/copilot_session_start.rs).
#![allow(dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub const NOTE: &str =
    "Release builds need the vendored OpenSSL: the system one lacks the legacy provider.";
/// The index line the note gives.
pub const TITLE: &str = "Release builds need the vendored OpenSSL";

pub struct World {
    _temp: tempfile::TempDir,
    pub repo: PathBuf,
    pub state: PathBuf,
}

impl World {
    pub fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let (repo, state) = (root.join("repo"), root.join("state"));
        let notes = repo.join(".memloop/memory/notes");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(
            notes.join("n-20261130-095501-aaaaaa.md"),
            format!(
                "---\ncategory: gotchas\nimportance: 8\ntags: [release, openssl]\ncreated: \
                 2026-11-30T09:55:01.123Z\n---\n{NOTE}\n"
            ),
        )
        .unwrap();
        World {
            _temp: temp,
            repo,
            state,
        }
    }

    /// `memloop hook ARGS` with `input` on stdin.
    pub fn hook(&self, args: &[&str], input: &str) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memloop"))
            .arg("hook")
            .args(args)
            .current_dir(&self.repo)
            .env_remove("MEMLOOP_ROOT")
            .env("XDG_STATE_HOME", &self.state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// What `memloop hook ARGS` prints for `input`; the hook must succeed.
    pub fn ok(&self, args: &[&str], input: &serde_json::Value) -> String {
        let out = self.hook(args, &input.to_string());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The gate's state files, by name, with their sizes.
    /// The state files of session start (markers), without recall's `.given` lists, which
    /// [`World::given_files`] shows.
    pub fn state_files(&self) -> Vec<(String, u64)> {
        let mut files = self.all_state_files();
        files.retain(|(name, _)| !name.ends_with(".given"));
        files
    }

    /// Recall's lists of what each session was given: the session-start index noted its notes.
    pub fn given_files(&self) -> Vec<(String, u64)> {
        let mut files = self.all_state_files();
        files.retain(|(name, _)| name.ends_with(".given"));
        files
    }

    fn all_state_files(&self) -> Vec<(String, u64)> {
        let dir = self.state.join("memloop/gate");
        let mut files: Vec<(String, u64)> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let len = e.metadata().unwrap().len();
                        (e.file_name().to_string_lossy().into_owned(), len)
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }
}
