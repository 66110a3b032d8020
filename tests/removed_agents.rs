//! An agent removed from memloop.toml: sync takes its fragments back (user-scope files only with
//! consent, as for writing), and diff shows it.

mod trees;

use trees::Sandbox;

#[test]
fn sync_takes_back_what_a_removed_agent_had_and_diff_shows_it_first() {
    let sandbox = Sandbox::empty();
    std::fs::write(
        sandbox.repo.join("opencode.json"),
        "{\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n",
    )
    .unwrap();
    sandbox.ok(&["init", "--yes", "--agents", "claude,opencode"]);
    sandbox.set_config("", "agents", "[\"claude\"]");

    let diff = sandbox.run(&["diff"]);
    assert_eq!(diff.status.code(), Some(1), "diff must report the drift");
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert!(shown.contains("opencode.json"), "{shown}");
    assert!(shown.contains("memloop.js"), "{shown}");

    sandbox.ok(&["sync"]);
    // The file that existed gets its bytes back; the plugin memloop created goes.
    assert_eq!(
        std::fs::read_to_string(sandbox.repo.join("opencode.json")).unwrap(),
        "{\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n"
    );
    assert!(!sandbox.exists(".opencode/plugins/memloop.js"));
    assert!(
        !sandbox.exists("AGENTS.md"),
        "no agent left reads AGENTS.md"
    );
    assert!(sandbox.exists("CLAUDE.md") && sandbox.exists(".mcp.json"));
    assert_eq!(sandbox.run(&["diff"]).status.code(), Some(0));
    // Sync is idempotent from here, and uninstall still removes Claude's files.
    sandbox.ok(&["sync"]);
    sandbox.ok(&["uninstall", "--yes"]);
    assert!(!sandbox.exists("CLAUDE.md") && !sandbox.exists(".mcp.json"));
    assert!(sandbox.exists("opencode.json"));
}

#[test]
fn a_removed_agents_user_scope_hook_goes_only_with_consent() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude,kimi", "--user-scope"]);
    let config = sandbox.home.join(".kimi-code/config.toml");
    let hook = std::fs::read_to_string(&config).unwrap();
    assert!(hook.contains("memloop hook stop --agent kimi"));

    // Consent given on this machine before: remembered, so sync takes the hook back.
    sandbox.set_config("", "agents", "[\"claude\"]");
    sandbox.ok(&["sync"]);
    assert!(!config.exists(), "the config memloop created is gone");
    assert!(!sandbox.exists(".kimi-code/mcp.json"));

    // Another machine without consent: the hook stays, and sync says how to remove it.
    std::fs::remove_dir_all(sandbox.installs()).unwrap();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, &hook).unwrap();
    let said = sandbox.ok(&["sync"]);
    assert!(said.contains("still holds memloop's Stop hook"), "{said}");
    assert!(said.contains("--user-scope"), "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), hook);
    sandbox.ok(&["sync", "--user-scope"]);
    assert!(!config.exists());
}

#[cfg(unix)]
#[test]
fn an_agents_md_leaving_the_repository_does_not_stop_a_claude_only_sync() {
    let sandbox = Sandbox::empty();
    let elsewhere = sandbox.home.join("shared-agents.md");
    std::fs::write(&elsewhere, "# shared\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, sandbox.repo.join("AGENTS.md")).unwrap();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    sandbox.ok(&["sync"]);
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "# shared\n");
}
