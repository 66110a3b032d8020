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
    // Agents (all pre-selected, none being installed): go down and untoggle opencode; then a URL
    // server and its name, the import layout, yes to writing Kimi's user config, and yes to
    // the trust entries shown at the end.
    let keys = "\x1b[B \r\x1b[B\rhttps://memory.example.test/mcp\rteam\r\x1b[B\ryy";
    let (screen, temp) = init_on_a_terminal(keys);
    assert!(
        screen.contains("Which agents should use the memory loop?"),
        "{screen}"
    );
    assert!(screen.contains("Add the Stop gate there?"), "{screen}");
    let config = std::fs::read_to_string(temp.path().join("repo/memloop.toml")).unwrap();
    assert!(
        config.contains(
            "agents = [\"claude\", \"kimi\", \"codex\", \"gemini\", \"qwen\", \"copilot\", \"kilo\"]"
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
    // Untoggle claude and opencode: kimi and codex; no to Kimi's user config and to trust.
    let (screen, temp) = init_on_a_terminal(" \x1b[B \x1b[B\r\r\r\rnn");
    assert!(
        screen.contains("skipped: Kimi's Stop hook lives in your user config"),
        "{screen}"
    );
    assert!(temp.path().join("repo/.kimi-code/mcp.json").exists());
    assert!(!temp.path().join("home/.kimi-code").exists());
}

#[test]
fn enter_alone_sets_up_every_agent_when_none_is_found() {
    // Agents, server, name and layout by Enter; no to Kimi's user config and to trust.
    let (screen, temp) = init_on_a_terminal("\r\r\r\rnn");
    let config = std::fs::read_to_string(temp.path().join("repo/memloop.toml"))
        .unwrap_or_else(|_| panic!("no memloop.toml:\n{screen}"));
    assert!(
        config.contains(
            "agents = [\"claude\", \"opencode\", \"kimi\", \"codex\", \"gemini\", \"qwen\", \"copilot\", \"kilo\"]"
        ),
        "{config}"
    );
    assert!(
        screen.contains("run `memloop trust` when you want them"),
        "{screen}"
    );
    assert!(!temp.path().join("home/.codex").exists());
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
