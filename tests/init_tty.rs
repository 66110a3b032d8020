//! `memloop init` on a terminal: the prompts are real (dialoguer on a pseudo-terminal made by
//! util-linux `script`), and the answers become memloop.toml.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Runs `memloop init` in a fresh repository on a pseudo-terminal, typing `keys`.
fn init_on_a_terminal(keys: &str) -> (String, tempfile::TempDir) {
    init_on_a_terminal_with(keys, &[])
}

/// Runs `memloop init` on a pseudo-terminal in a repository holding `files` (path, text).
fn init_on_a_terminal_with(keys: &str, files: &[(&str, &str)]) -> (String, tempfile::TempDir) {
    let temp = tempfile::tempdir().unwrap();
    let (repo, home) = (temp.path().join("repo"), temp.path().join("home"));
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    for (path, text) in files {
        std::fs::write(repo.join(path), text).unwrap();
    }
    let mut child = Command::new("script")
        .args([
            "-qec",
            &format!("{} init", env!("CARGO_BIN_EXE_memloop")),
            "/dev/null",
        ])
        .current_dir(&repo)
        .env_clear()
        .env("HOME", &home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("PATH", "/usr/bin:/bin")
        .env("TERM", "xterm")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux `script` provides the pseudo-terminal for this test");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(keys.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), temp)
}

#[test]
fn prompts_become_the_desired_state() {
    // Agents (none preselected, none being installed): toggle all but opencode; then a URL
    // server and its name, the import layout, yes to writing Kimi's user config, and yes to
    // the trust entries shown at the end.
    let keys = " \x1b[B\x1b[B \x1b[B \x1b[B \x1b[B \x1b[B \r\x1b[B\rhttps://memory.example.test/mcp\rteam\r\x1b[B\ryy";
    let (screen, temp) = init_on_a_terminal(keys);
    assert!(
        screen.contains("Which agents should use the memory loop?"),
        "{screen}"
    );
    assert!(screen.contains("Add the Stop gate there?"), "{screen}");
    let config = std::fs::read_to_string(temp.path().join("repo/memloop.toml")).unwrap();
    assert!(
        config.contains(
            "agents = [\"claude\", \"kimi\", \"codex\", \"gemini\", \"qwen\", \"copilot\"]"
        ),
        "{config}"
    );
    assert!(config.contains("layout = \"import\""), "{config}");
    assert!(
        config.contains("name = \"team\"\nurl = \"https://memory.example.test/mcp\""),
        "{config}"
    );
    let hooks = std::fs::read_to_string(temp.path().join("home/.kimi-code/config.toml")).unwrap();
    assert!(
        hooks.contains("command = \"memloop hook stop --agent kimi\""),
        "{hooks}"
    );
    assert!(
        screen.contains("only once it is trusted on this machine"),
        "{screen}"
    );
    let codex = std::fs::read_to_string(temp.path().join("home/.codex/config.toml")).unwrap();
    assert!(codex.contains("trust_level = \"trusted\""), "{codex}");
}

#[test]
fn declining_user_scope_writes_only_the_repository() {
    // Toggle kimi and codex; no to Kimi's user config and to trust.
    let (screen, temp) = init_on_a_terminal("\x1b[B\x1b[B \x1b[B \r\r\r\rnn");
    assert!(
        screen.contains("skipped: Kimi's Stop hook lives in your user config"),
        "{screen}"
    );
    assert!(temp.path().join("repo/.kimi-code/mcp.json").exists());
    assert!(!temp.path().join("home/.kimi-code").exists());
}

#[test]
fn enter_at_the_home_folder_question_keeps_to_the_repository() {
    // Kimi; the embedded server, its name and the layout by Enter; Enter at the question about
    // Kimi's user config and at the trust question: the home folder is written only on a yes.
    let (screen, temp) = init_on_a_terminal("\x1b[B\x1b[B \r\r\r\r\r\r");
    assert!(screen.contains("Write to your home folder?"), "{screen}");
    assert!(
        temp.path().join("repo/memloop.toml").exists(),
        "no memloop.toml:\n{screen}"
    );
    assert!(temp.path().join("repo/.kimi-code/mcp.json").exists());
    assert!(
        !temp.path().join("home/.kimi-code").exists(),
        "Enter wrote into the home folder:\n{screen}"
    );
}

#[test]
fn with_no_agent_found_nothing_is_guessed_and_the_question_comes_again() {
    // Enter with nothing picked: asked again; then claude, and Enter for the rest (no to trust).
    let (screen, temp) = init_on_a_terminal("\r \r\r\r\r\r");
    assert!(
        screen.contains("No agent was found on PATH or in this repository"),
        "{screen}"
    );
    assert!(
        screen.contains("No agent picked: toggle at least one with space"),
        "{screen}"
    );
    let config = std::fs::read_to_string(temp.path().join("repo/memloop.toml"))
        .unwrap_or_else(|_| panic!("no memloop.toml:\n{screen}"));
    assert!(config.contains("agents = [\"claude\"]"), "{config}");
    assert!(
        screen.contains("run `memloop trust` when you want them"),
        "{screen}"
    );
    assert!(!temp.path().join("home/.claude.json").exists());
}

#[test]
fn a_taken_server_name_is_said_and_a_free_one_offered() {
    // The reference memory server many people have under the default name `memory`.
    let mcp = r#"{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}"#;
    // .mcp.json makes claude the detected agent: Enter for it, the embedded server, the name
    // `memory`, then Enter on the offered free name and on the layout, and no to trust.
    let (screen, temp) = init_on_a_terminal_with("\r\r\r\r\rn", &[(".mcp.json", mcp)]);
    assert!(
        screen.contains("`memory` is taken by a server memloop did not write"),
        "{screen}"
    );
    let config = std::fs::read_to_string(temp.path().join("repo/memloop.toml"))
        .unwrap_or_else(|_| panic!("no memloop.toml:\n{screen}"));
    assert!(config.contains("name = \"memloop\""), "{config}");
    let written = std::fs::read_to_string(temp.path().join("repo/.mcp.json")).unwrap();
    assert!(
        written.contains("@modelcontextprotocol/server-memory") && written.contains("\"memloop\""),
        "{written}"
    );
}

/// A tmux session of `columns` columns running `memloop init` in a fresh repository: what a
/// person sees (`capture-pane`), not the bytes written, so a line drawn twice shows twice.
struct Screen {
    socket: String,
    temp: tempfile::TempDir,
}

impl Screen {
    fn start(columns: u16) -> Screen {
        let temp = tempfile::tempdir().unwrap();
        let (repo, home) = (temp.path().join("repo"), temp.path().join("home"));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let socket = format!("memloop-test-{}-{columns}", std::process::id());
        let command = format!(
            "cd '{}' && env -i HOME='{}' XDG_STATE_HOME='{}' PATH=/usr/bin:/bin TERM=xterm '{}' init; echo INIT-ENDED; sleep 60",
            repo.display(),
            home.display(),
            home.join("state").display(),
            env!("CARGO_BIN_EXE_memloop")
        );
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &columns.to_string(), "-y", "50", &command])
            .env_remove("TMUX")
            .status()
            .expect("tmux runs this test's terminal");
        assert!(status.success());
        Screen { socket, temp }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen and its scrollback.
    fn text(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-S", "-200"])
    }

    /// Waits (bounded) until the screen shows `expected`.
    fn wait_for(&self, expected: &str) -> String {
        for _ in 0..200 {
            let text = self.text();
            if text.contains(expected) {
                return text;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the screen never showed {expected:?}:\n{}", self.text());
    }

    fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-l", keys]);
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

#[test]
fn the_trust_question_is_on_screen_once_after_the_answer() {
    for columns in [80, 120] {
        let screen = Screen::start(columns);
        screen.wait_for("Which agents should use the memory loop?");
        // Claude Code; the embedded server, its name and the layout by Enter.
        screen.keys(" \r");
        screen.wait_for("Which memory server?");
        screen.keys("\r");
        screen.wait_for("Server name");
        screen.keys("\r");
        screen.wait_for("How should AGENTS.md share the rules?");
        screen.keys("\r");
        screen.wait_for("Write them?");
        screen.keys("y");
        let text = screen.wait_for("INIT-ENDED");
        for line in ["These approvals go to", "Write them?"] {
            assert_eq!(
                text.matches(line).count(),
                1,
                "{columns} columns: {line:?} should be on screen once:\n{text}"
            );
        }
        // The approval is one person's: kept out of git in this clone.
        assert!(
            text.contains("git-ignored: .claude/settings.local.json"),
            "{columns} columns:\n{text}"
        );
        let exclude =
            std::fs::read_to_string(screen.temp.path().join("repo/.git/info/exclude")).unwrap();
        assert!(
            exclude.contains("\n/.claude/settings.local.json\n"),
            "{exclude}"
        );
    }
}
