//! Exit 2 from `memloop hook` means "block" to every agent, so every failure under `hook`,
//! clap's usage errors included, must exit 1 with one `memloop hook:` line. Other commands keep
//! clap's exit 2 for usage errors. Drives the real binary.

use std::ffi::OsString;
use std::process::{Command, Output, Stdio};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn memloop(args: &[OsString]) -> Run {
    let state = tempfile::tempdir().unwrap();
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(args)
        .current_dir(state.path())
        .env("XDG_STATE_HOME", state.path())
        .env("KIMI_CODE_HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn words(line: &str) -> Vec<OsString> {
    line.split_whitespace().map(OsString::from).collect()
}

fn assert_fails_open(args: &[OsString], mentions: &str) {
    let run = memloop(args);
    assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
    assert!(
        run.stderr.starts_with("memloop hook: "),
        "{args:?}: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the stop was not blocked"),
        "{args:?}: {}",
        run.stderr
    );
    assert!(run.stderr.contains(mentions), "{args:?}: {}", run.stderr);
    assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
}

#[test]
fn usage_errors_under_hook_exit_1_never_2() {
    for (line, mentions) in [
        ("hook stop --agent", "a value is required for '--agent"),
        ("hook record --agent", "a value is required for '--agent"),
        ("hook --bogus", "'--bogus'"),
        ("hook stop --bogus", "--bogus"),
        ("hook stop -x --agent claude", "-x"),
        (
            "hook stop --agent claude --agent kimi",
            "cannot be used multiple times",
        ),
        (
            "hook stop --agent=claude --agent=claude",
            "cannot be used multiple times",
        ),
        ("hook", "missing hook command"),
        ("hook frobnicate", "unknown hook command"),
        ("hook stop", "missing --agent"),
        ("hook stop --agent cursor", "unknown agent"),
        ("hook stop --agent claude stray", "unexpected argument"),
        (
            "hook record --agent claude",
            "is for agents whose plugin reports each call",
        ),
        // An option before the command still belongs to a `hook` call.
        ("--bogus hook stop --agent claude", "'--bogus'"),
    ] {
        assert_fails_open(&words(line), mentions);
    }
}

#[cfg(unix)]
#[test]
fn a_non_utf8_argument_under_hook_exits_1() {
    use std::os::unix::ffi::OsStringExt;
    let bad = || OsString::from_vec(vec![b'c', 0xff, b'x']);
    let mut flag = b"--agent=".to_vec();
    flag.push(0xff);
    for args in [
        vec!["hook".into(), "stop".into(), "--agent".into(), bad()],
        vec!["hook".into(), "stop".into(), OsString::from_vec(flag)],
        vec!["hook".into(), bad()],
        vec!["hook".into(), "stop".into(), bad()],
    ] {
        assert_fails_open(&args, "invalid UTF-8");
    }
}

#[test]
fn a_failing_gate_exits_1() {
    // No input on stdin: the gate itself fails, it does not block.
    assert_fails_open(&words("hook stop --agent claude"), "no hook input on stdin");
}

#[test]
fn help_and_version_under_hook_exit_0() {
    for line in [
        "hook --help",
        "hook stop --help",
        "hook stop -h",
        "hook help stop",
    ] {
        let run = memloop(&words(line));
        assert_eq!(run.code, 0, "{line}: {}", run.stderr);
        assert!(
            run.stdout.contains("Usage: memloop hook"),
            "{line}: {}",
            run.stdout
        );
    }
    let run = memloop(&words("hook --version"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(env!("CARGO_PKG_VERSION")),
        "{}",
        run.stdout
    );
}

#[test]
fn other_commands_keep_exit_2_for_usage_errors() {
    for line in [
        "sync --bogus",
        "diff --bogus",
        "bogus",
        "serve --root",
        "completions",
        "--bogus",
        // `hook` as a value, not as the command.
        "init --agents hook --bogus",
    ] {
        let run = memloop(&words(line));
        assert_eq!(run.code, 2, "{line}: {}", run.stderr);
        assert!(run.stderr.contains("error:"), "{line}: {}", run.stderr);
    }
}

/// The session-start hooks name what the agent goes on without when their time runs out: the
/// session starts without the index (not "the stop was not blocked", which is the gate's).
#[test]
fn a_session_start_out_of_time_says_the_session_starts_without_the_index() {
    let state = tempfile::tempdir().unwrap();
    for event in ["session-start", "pre-compact"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(["hook", event, "--agent", "claude"])
            .current_dir(state.path())
            .env("XDG_STATE_HOME", state.path())
            .env("MEMLOOP_GATE_BUDGET_MS", "50")
            // A pipe nobody writes to or closes: the wait for the input outlasts the budget.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{event}: {stderr}");
        assert!(
            stderr.starts_with("memloop hook: gave up after 50 ms while ")
                && stderr
                    .trim_end()
                    .ends_with("the session starts without the memory index"),
            "{event}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{event}");
    }
}
