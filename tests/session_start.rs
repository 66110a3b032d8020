//! The session-start pieces (the memory index at session start, the reminder before a
//! compaction) are owned fragments like the rest: `[memory] session_start = false` takes them
//! out on the next sync, diff and doctor report them until then, and uninstall leaves nothing.

use std::path::PathBuf;
use std::process::{Command, Output};

struct Repo {
    _temp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let (repo, home) = (root.join("repo"), root.join("home"));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Repo {
            _temp: temp,
            root: repo,
            home,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memloop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap_or_default()
    }

    fn session_start(&self, on: bool) {
        let path = self.root.join("memloop.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.split("\n[memory]\n").next().unwrap().to_owned();
        std::fs::write(path, format!("{text}\n[memory]\nsession_start = {on}\n")).unwrap();
    }
}

/// Each agent with the file its session-start pieces live in and what marks them there.
const PIECES: &[(&str, &str, &[&str])] = &[
    (
        "claude",
        ".claude/settings.json",
        &[
            "\"SessionStart\"",
            "memloop hook session-start --agent claude",
            "startup|resume|clear|compact",
            "\"PreCompact\"",
            "memloop hook pre-compact --agent claude",
        ],
    ),
    (
        "codex",
        ".codex/hooks.json",
        &[
            "\"SessionStart\"",
            "memloop hook session-start --agent codex",
            "startup|resume|clear|compact",
        ],
    ),
    (
        "gemini",
        ".gemini/settings.json",
        &[
            "\"SessionStart\"",
            "memloop hook session-start --agent gemini",
            "memloop-session-start",
        ],
    ),
    (
        "qwen",
        ".qwen/settings.json",
        &[
            "\"SessionStart\"",
            "memloop hook session-start --agent qwen",
            "\"PreCompact\"",
            "memloop hook pre-compact --agent qwen",
        ],
    ),
];

#[test]
fn session_start_off_takes_the_pieces_out_and_on_puts_them_back() {
    for (agent, file, marks) in PIECES {
        let repo = Repo::new();
        repo.ok(&["init", "--yes", "--agents", agent]);
        let installed = repo.read(file);
        for mark in *marks {
            assert!(
                installed.contains(mark),
                "{agent}: {mark} missing in {installed}"
            );
        }

        repo.session_start(false);
        let diff = repo.run(&["diff"]);
        assert_eq!(
            diff.status.code(),
            Some(1),
            "{agent}: diff must report the drift"
        );
        let doctor = repo.run(&["doctor", "--format", "json"]);
        let report = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            report.contains("switched off by [memory] session_start = false"),
            "{report}"
        );
        assert_eq!(doctor.status.code(), Some(1), "{agent}: {report}");

        repo.ok(&["sync"]);
        let off = repo.read(file);
        for mark in *marks {
            assert!(!off.contains(mark), "{agent}: {mark} left in {off}");
        }
        assert_eq!(repo.run(&["diff"]).status.code(), Some(0), "{agent}");
        let stop = format!("memloop hook stop --agent {agent}");
        assert!(off.contains(&stop), "{agent}: the gate stays: {off}");

        repo.session_start(true);
        repo.ok(&["sync"]);
        assert_eq!(
            repo.read(file),
            installed,
            "{agent}: on again, as installed"
        );
        repo.ok(&["uninstall", "--yes"]);
        assert!(
            !repo.root.join(file).exists(),
            "{agent}: {file} was memloop's alone"
        );
    }
}
