//! The session-start pieces (the memory index at session start, the reminder before a
//! compaction) are owned fragments like the rest: `[memory] session_start = false` takes them
//! out on the next sync, diff and doctor report them until then, and uninstall leaves nothing.

mod trees;

use trees::Sandbox;

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
    (
        "copilot",
        ".github/hooks/memloop.json",
        &[
            "\"sessionStart\"",
            "memloop hook session-start --agent copilot",
        ],
    ),
];

#[test]
fn session_start_off_takes_the_pieces_out_and_on_puts_them_back() {
    for (agent, file, marks) in PIECES {
        let sandbox = Sandbox::empty();
        sandbox.ok(&["init", "--yes", "--agents", agent]);
        let installed = sandbox.read(file);
        for mark in *marks {
            assert!(
                installed.contains(mark),
                "{agent}: {mark} missing in {installed}"
            );
        }

        sandbox.set_config("memory", "session_start", &false.to_string());
        // Kimi's and Copilot's prompt hook also carries recall: off too, it goes with the pieces.
        sandbox.set_config("memory", "recall", &false.to_string());
        let diff = sandbox.run(&["diff"]);
        assert_eq!(
            diff.status.code(),
            Some(1),
            "{agent}: diff must report the drift"
        );
        let doctor = sandbox.run(&["doctor", "--format", "json"]);
        let report = String::from_utf8_lossy(&doctor.stdout);
        assert!(
            report.contains("switched off by [memory] session_start = false"),
            "{report}"
        );
        assert_eq!(doctor.status.code(), Some(1), "{agent}: {report}");

        sandbox.ok(&["sync"]);
        let off = sandbox.read(file);
        for mark in *marks {
            assert!(!off.contains(mark), "{agent}: {mark} left in {off}");
        }
        assert_eq!(sandbox.run(&["diff"]).status.code(), Some(0), "{agent}");
        let stop = format!("memloop hook stop --agent {agent}");
        assert!(off.contains(&stop), "{agent}: the gate stays: {off}");

        sandbox.set_config("memory", "session_start", &true.to_string());
        sandbox.set_config("memory", "recall", &true.to_string());
        sandbox.ok(&["sync"]);
        assert_eq!(
            sandbox.read(file),
            installed,
            "{agent}: on again, as installed"
        );
        sandbox.ok(&["uninstall", "--yes"]);
        assert!(
            !sandbox.repo.join(file).exists(),
            "{agent}: {file} was memloop's alone"
        );
    }
}
