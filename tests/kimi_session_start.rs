//! Kimi Code's session start through the real binary: `memloop hook session-start --agent kimi`
//! runs on every prompt (UserPromptSubmit) and gives the index on a session's first prompt and
//! on the first one after each compaction (noted by `memloop hook pre-compact --agent kimi`),
//! deciding that from the hook input before it reads the repository.

mod hook_world;

use std::process::{Command, Output};

use hook_world::{TITLE, World};

/// Kimi's hooks, called the way Kimi Code calls them.
trait Kimi {
    fn kimi(&self, event: &str, input: &str) -> Output;
    fn prompt(&self, session: &str) -> String;
    fn compact(&self, session: &str);
}

impl Kimi for World {
    /// `memloop hook EVENT --agent kimi` with `input` on stdin.
    fn kimi(&self, event: &str, input: &str) -> Output {
        self.hook(&[event, "--agent", "kimi"], input)
    }

    /// What one prompt of `session` is given (the hook must succeed).
    fn prompt(&self, session: &str) -> String {
        let input = serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": session,
            "cwd": self.repo, "prompt": "hello", "is_steer": false, "client_type": "cli"});
        self.ok(&["session-start", "--agent", "kimi"], &input)
    }

    fn compact(&self, session: &str) {
        let input = serde_json::json!({"hook_event_name": "PreCompact", "session_id": session,
            "cwd": self.repo, "trigger": "manual", "token_count": 1200});
        let out = self.ok(&["pre-compact", "--agent", "kimi"], &input);
        assert_eq!(out, "", "Kimi discards what PreCompact prints");
    }
}

fn holds_index(text: &str) -> bool {
    text.contains("Memory index") && text.contains(TITLE)
}

#[test]
fn the_index_comes_on_the_first_prompt_and_after_each_compaction_only() {
    let world = World::new();
    let first = world.prompt("s-1");
    assert!(holds_index(&first), "{first}");
    assert_eq!(world.prompt("s-1"), "", "the second prompt of a session");
    assert_eq!(world.prompt("s-1"), "");

    world.compact("s-1");
    world.compact("s-1"); // two compactions before the next prompt give the index once
    assert_eq!(
        world.prompt("s-1"),
        first,
        "the first prompt after a compaction"
    );
    assert_eq!(world.prompt("s-1"), "");

    assert_eq!(
        world.prompt("s-2"),
        first,
        "another session starts with it too"
    );
    assert_eq!(world.prompt("s-1"), "");

    // A handful of empty files, one or two per session: nothing grows with the prompts.
    let files = world.state_files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files
            .iter()
            .all(|(name, len)| name.ends_with(".start") && *len == 0)
    );
    // And what each session was given, for recall: the index's one short note, once per index.
    let given = world.given_files();
    assert_eq!(given.len(), 2, "{given:?}");
    assert!(given.iter().all(|(_, len)| *len <= 2 * 25), "{given:?}");
}

/// The prompt hook also gives the notes that match each prompt, so every prompt reads the
/// repository: a memloop.toml it cannot parse fails the run (exit 1, one line, never the 2 that
/// would block the prompt), and a compaction noted meanwhile is not lost.
#[test]
fn a_broken_config_fails_a_prompt_without_losing_its_turn() {
    let world = World::new();
    assert!(holds_index(&world.prompt("s")));
    std::fs::write(world.repo.join("memloop.toml"), "[memory\n").unwrap();
    world.compact("s");
    let input = serde_json::json!({"session_id": "s", "cwd": world.repo, "prompt": "hello"});
    let failed = world.kimi("session-start", &input.to_string());
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("memloop hook:") && stderr.contains("memloop.toml"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // Once the file is fixed, the index the compaction took away comes back.
    std::fs::write(world.repo.join("memloop.toml"), "").unwrap();
    assert!(holds_index(&world.prompt("s")));
    assert_eq!(world.prompt("s"), "");
}

#[test]
fn a_failed_first_prompt_leaves_the_index_for_the_next() {
    let world = World::new();
    std::fs::write(world.repo.join("memloop.toml"), "[memory\n").unwrap();
    let input = serde_json::json!({"session_id": "s", "cwd": world.repo});
    assert_eq!(
        world
            .kimi("session-start", &input.to_string())
            .status
            .code(),
        Some(1)
    );
    std::fs::remove_file(world.repo.join("memloop.toml")).unwrap();
    assert!(holds_index(&world.prompt("s")));
}

#[test]
fn without_a_session_id_it_prints_every_time_as_for_any_agent() {
    let world = World::new();
    for input in ["", "{}", "not json", "{\"session_id\": \"\"}"] {
        let out = world.kimi("session-start", input);
        assert!(out.status.success());
        assert!(
            holds_index(&String::from_utf8_lossy(&out.stdout)),
            "{input:?}"
        );
    }
    let pre = world.kimi("pre-compact", "");
    assert!(
        String::from_utf8_lossy(&pre.stdout).contains("older turns are about to be summarised")
    );
    assert!(world.state_files().is_empty());
}

#[test]
fn switched_off_it_prints_nothing() {
    let world = World::new();
    std::fs::write(
        world.repo.join("memloop.toml"),
        "[memory]\nsession_start = false\n",
    )
    .unwrap();
    assert_eq!(world.prompt("s"), "");
}

/// Kimi's pair is an owned fragment in the user's config like the gate: `session_start = false`
/// shows as drift in diff and doctor until sync takes it out, on again puts it back, and
/// uninstall leaves the user's file without any of memloop's entries.
#[test]
fn the_pair_follows_session_start_through_sync_diff_doctor_and_uninstall() {
    let world = World::new();
    let home = world.repo.parent().unwrap().join("home");
    std::fs::create_dir_all(home.join(".kimi-code")).unwrap();
    let config = home.join(".kimi-code/config.toml");
    let mine = "# mine\n[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"./lint.sh\"\n";
    std::fs::write(&config, mine).unwrap();
    // Kimi Code on PATH, so doctor reads the user's files too.
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("kimi"), "#!/bin/sh\necho 2.1.0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("kimi"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&world.repo)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &bin)
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
    let pair = [
        "memloop hook session-start --agent kimi",
        "memloop hook pre-compact --agent kimi",
    ];
    ok(&["init", "--yes", "--agents", "kimi", "--user-scope"]);
    let installed = std::fs::read_to_string(&config).unwrap();
    assert!(pair.iter().all(|p| installed.contains(p)), "{installed}");
    assert!(installed.starts_with(mine), "{installed}");

    let toml = world.repo.join("memloop.toml");
    let on = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        format!("{on}\n[memory]\nsession_start = false\nrecall = false\n"),
    )
    .unwrap();
    assert_eq!(run(&["diff", "--user-scope"]).status.code(), Some(1));
    let doctor = run(&["doctor", "--format", "json"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    let switched_off = report
        .lines()
        .filter(|l| l.contains("switched off by [memory] session_start = false"))
        .count();
    assert_eq!(switched_off, 2, "{report}");
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    ok(&["sync", "--user-scope"]);
    let off = std::fs::read_to_string(&config).unwrap();
    assert!(pair.iter().all(|p| !off.contains(p)), "{off}");
    assert!(off.contains("memloop hook stop --agent kimi"), "{off}");
    assert_eq!(run(&["diff", "--user-scope"]).status.code(), Some(0));

    std::fs::write(&toml, &on).unwrap();
    ok(&["sync", "--user-scope"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), installed);
    ok(&["uninstall", "--yes"]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), mine);
}
