//! Copilot CLI's index after a compaction through the real binary: `memloop hook pre-compact
//! --agent copilot` (preCompact) leaves a note for the input's `sessionId`, and `memloop hook
//! session-start --agent copilot --after-compaction` (userPromptSubmitted, every prompt) gives
//! the index on the first prompt after it only, deciding before it reads the repository;
//! the sessionStart hook gives it at the start and takes a note left before it.

mod hook_world;

use std::process::Command;

use hook_world::{TITLE, World};

/// Copilot's hooks, called the way Copilot calls them.
trait Copilot {
    fn start(&self, session: &str) -> String;
    fn prompt(&self, session: &str) -> String;
    fn compact(&self, session: &str);
}

impl Copilot for World {
    /// What Copilot's sessionStart hook prints for `session`.
    fn start(&self, session: &str) -> String {
        let input = serde_json::json!({"sessionId": session, "timestamp": 1764582000000u64,
            "cwd": self.repo, "source": "new", "initialPrompt": "hello"});
        self.ok(&["session-start", "--agent", "copilot"], &input)
    }

    /// What one prompt of `session` is given by the userPromptSubmitted hook.
    fn prompt(&self, session: &str) -> String {
        let input = serde_json::json!({"sessionId": session, "timestamp": 1764582000000u64,
            "cwd": self.repo, "prompt": "hello"});
        self.ok(
            &["session-start", "--agent", "copilot", "--after-compaction"],
            &input,
        )
    }

    fn compact(&self, session: &str) {
        let input = serde_json::json!({"sessionId": session, "timestamp": 1764582000000u64,
            "cwd": self.repo, "trigger": "auto"});
        let out = self.ok(&["pre-compact", "--agent", "copilot"], &input);
        assert_eq!(out, "", "Copilot has no output type for preCompact");
    }
}

/// The index in the one shape Copilot reads from both hooks: top-level `additionalContext`.
fn index_of(out: &str) -> String {
    let value: serde_json::Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let text = value["additionalContext"].as_str().unwrap().to_owned();
    assert!(
        text.contains("Memory index") && text.contains(TITLE),
        "{text}"
    );
    text
}

#[test]
fn the_prompt_hook_gives_the_index_after_each_compaction_only() {
    let world = World::new();
    let first = index_of(&world.start("s-1"));
    assert_eq!(
        world.prompt("s-1"),
        "",
        "the first prompt: sessionStart gave it"
    );
    assert_eq!(world.prompt("s-1"), "");

    world.compact("s-1");
    world.compact("s-1"); // two compactions before the next prompt give the index once
    assert_eq!(
        index_of(&world.prompt("s-1")),
        first,
        "the first prompt after it"
    );
    assert_eq!(world.prompt("s-1"), "");
    assert_eq!(world.prompt("s-2"), "", "a note is per session");

    // A resumed session starts with the index again: a note left before is taken with it.
    world.compact("s-1");
    index_of(&world.start("s-1"));
    assert_eq!(world.prompt("s-1"), "", "not a second time");
    assert!(world.state_files().is_empty(), "{:?}", world.state_files());
}

/// The prompt hook also gives the notes that match each prompt, so every prompt reads the
/// repository: a memloop.toml it cannot parse fails the run (exit 1, one line), and the
/// compaction note stays for the next prompt.
#[test]
fn a_broken_config_fails_a_prompt_without_losing_the_note() {
    let world = World::new();
    index_of(&world.start("s"));
    std::fs::write(world.repo.join("memloop.toml"), "[memory\n").unwrap();
    world.compact("s");
    let input = serde_json::json!({"sessionId": "s", "cwd": world.repo, "prompt": "hello"});
    let failed = world.hook(
        &["session-start", "--agent", "copilot", "--after-compaction"],
        &input.to_string(),
    );
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("memloop hook:") && stderr.contains("memloop.toml"),
        "{stderr}"
    );
    // The failed run left the note: once the file is fixed, the index comes.
    std::fs::write(world.repo.join("memloop.toml"), "").unwrap();
    index_of(&world.prompt("s"));
    assert_eq!(world.prompt("s"), "");
}

#[test]
fn without_a_session_id_the_prompt_hook_gives_nothing_and_the_others_print_as_before() {
    let world = World::new();
    for input in ["", "{}", "not json", "{\"sessionId\": \"\"}"] {
        let prompt = world.hook(
            &["session-start", "--agent", "copilot", "--after-compaction"],
            input,
        );
        assert!(prompt.status.success(), "{input:?}");
        assert_eq!(prompt.stdout, b"", "{input:?}");
        let start = world.hook(&["session-start", "--agent", "copilot"], input);
        assert!(start.status.success(), "{input:?}");
        index_of(&String::from_utf8_lossy(&start.stdout));
    }
    let pre = world.hook(&["pre-compact", "--agent", "copilot"], "");
    assert!(
        String::from_utf8_lossy(&pre.stdout).contains("older turns are about to be summarised")
    );
    assert!(world.state_files().is_empty());
}

#[test]
fn after_compaction_is_refused_for_other_agents() {
    let world = World::new();
    let out = world.hook(
        &["session-start", "--agent", "claude", "--after-compaction"],
        "{}",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--agent copilot only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn switched_off_it_prints_nothing_even_after_a_compaction() {
    let world = World::new();
    std::fs::write(
        world.repo.join("memloop.toml"),
        "[memory]\nsession_start = false\n",
    )
    .unwrap();
    assert_eq!(world.start("s"), "");
    world.compact("s");
    assert_eq!(world.prompt("s"), "");
}

/// The three pieces are owned fragments of memloop's hooks file: `session_start = false` shows
/// as drift in diff and doctor until sync takes them out (the gate stays), on again puts them
/// back byte for byte, and uninstall removes the file memloop made.
#[test]
fn the_pieces_follow_session_start_through_sync_diff_doctor_and_uninstall() {
    let world = World::new();
    let home = world.repo.parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&world.repo)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/nonexistent")
            .env("XDG_STATE_HOME", &world.state)
            .output()
            .unwrap()
    };
    let ok = |args: &[&str]| {
        let out = run(args);
        assert!(
            out.status.success(),
            "memloop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let pieces = [
        "\"memloop hook session-start --agent copilot\"",
        "\"memloop hook pre-compact --agent copilot\"",
        "\"memloop hook session-start --agent copilot --after-compaction\"",
    ];
    let hooks = world.repo.join(".github/hooks/memloop.json");
    ok(&["init", "--yes", "--agents", "copilot"]);
    let installed = std::fs::read_to_string(&hooks).unwrap();
    assert!(pieces.iter().all(|p| installed.contains(p)), "{installed}");

    let toml = world.repo.join("memloop.toml");
    let on = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{on}\n[memory]\nsession_start = false\nrecall = false\n"),
    )
    .unwrap();
    assert_eq!(run(&["diff"]).status.code(), Some(1));
    let doctor = run(&["doctor", "--format", "json"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    let switched_off = report
        .lines()
        .filter(|l| l.contains("switched off by [memory] session_start = false"))
        .count();
    assert_eq!(switched_off, 3, "{report}");
    ok(&["sync"]);
    let off = std::fs::read_to_string(&hooks).unwrap();
    assert!(pieces.iter().all(|p| !off.contains(p)), "{off}");
    assert!(off.contains("memloop hook stop --agent copilot"), "{off}");
    assert_eq!(run(&["diff"]).status.code(), Some(0));

    std::fs::write(&toml, &on).unwrap();
    ok(&["sync"]);
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), installed);
    ok(&["uninstall", "--yes"]);
    assert!(!hooks.exists(), "memloop made the file, uninstall takes it");
}
