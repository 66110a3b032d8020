//! Uninstall after the user kept working: their later edits stay, memloop's fragments go.

mod trees;

use std::path::Path;
use std::process::Command;

use trees::Sandbox;

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[test]
fn later_edits_are_kept_and_only_memloops_fragments_go() {
    let sandbox = Sandbox::empty();
    sandbox.write("CLAUDE.md", "# Project\n");
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);

    // The user keeps working: a second server, a note under the managed block.
    let mcp = sandbox.read(".mcp.json").replace(
        "\"mcpServers\": {\n",
        "\"mcpServers\": {\n    \"github\": { \"type\": \"http\", \"url\": \"https://example.test/mcp\" },\n",
    );
    sandbox.write(".mcp.json", &mcp);
    sandbox.write(
        "CLAUDE.md",
        &format!("{}\n## Added later\n", sandbox.read("CLAUDE.md")),
    );

    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".mcp.json"),
        "{\n  \"mcpServers\": {\n    \"github\": { \"type\": \"http\", \"url\": \"https://example.test/mcp\" }\n  }\n}\n"
    );
    assert_eq!(sandbox.read("CLAUDE.md"), "# Project\n\n## Added later\n");
    assert!(
        !exists(&sandbox.repo.join(".claude/settings.json")),
        "the settings file memloop created goes"
    );
    assert!(
        !exists(&sandbox.repo.join(".claude")),
        "and so does the folder it created"
    );
}

#[test]
fn a_file_rewritten_by_the_user_then_synced_comes_back_as_the_user_left_it() {
    let sandbox = Sandbox::empty();
    sandbox.write("opencode.json", "{\n  \"theme\": \"dark\"\n}\n");
    sandbox.ok(&["init", "--yes", "--agents", "opencode"]);

    // The user replaces the file wholesale (another tool, a checkout); sync puts memloop's
    // entries back into the new file. The bytes from before the first install are stale now.
    sandbox.write("opencode.json", "{\n  \"model\": \"local/qwen\"\n}\n");
    sandbox.ok(&["sync"]);
    // And a file deleted since memloop wrote it stays deleted after uninstall.
    std::fs::remove_file(sandbox.repo.join("AGENTS.md")).unwrap();
    sandbox.write("CLAUDE.md", "# Rewritten\n");
    sandbox.ok(&["sync"]);

    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read("opencode.json"),
        "{\n  \"model\": \"local/qwen\"\n}\n"
    );
    assert_eq!(sandbox.read("CLAUDE.md"), "# Rewritten\n");
}

#[test]
fn user_scope_files_need_consent_to_be_removed() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "kimi", "--user-scope"]);
    let config = sandbox.home.join(".kimi-code/config.toml");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("memloop hook stop --agent kimi")
    );

    // No terminal and no --yes: the repository is cleaned, the user's config is not touched.
    let out = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .arg("uninstall")
        .current_dir(&sandbox.repo)
        .env_clear()
        .env("HOME", &sandbox.home)
        .env("XDG_STATE_HOME", sandbox.home.join(".local/state"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("kept      ~/.kimi-code/config.toml"),
        "{stdout}"
    );
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("memloop hook stop --agent kimi")
    );
    assert!(!exists(&sandbox.repo.join(".kimi-code/mcp.json")));

    sandbox.ok(&["uninstall", "--yes"]);
    assert!(
        !exists(&config),
        "the config memloop created is gone with --yes"
    );
}

#[test]
fn an_edited_plugin_file_is_left_to_its_owner() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "opencode"]);
    sandbox.write(".opencode/plugins/memloop.js", "// my own changes\n");
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".opencode/plugins/memloop.js"),
        "// my own changes\n"
    );
    assert!(!exists(&sandbox.repo.join("opencode.json")));
}

#[test]
fn a_server_replaced_by_force_comes_back_after_later_edits() {
    let sandbox = Sandbox::empty();
    let mine = "{\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"npx\", \"args\": [\"-y\", \"@me/memory\"] }\n  }\n}\n";
    sandbox.write(".mcp.json", mine);
    sandbox.ok(&["init", "--yes", "--agents", "claude", "--force"]);
    assert!(sandbox.read(".mcp.json").contains("\"memloop\""));

    // Later, the user adds a server next to it: the file is no longer what memloop wrote.
    let edited = sandbox.read(".mcp.json").replace(
        "\"mcpServers\": {\n",
        "\"mcpServers\": {\n    \"docs\": { \"type\": \"http\", \"url\": \"https://docs.test/mcp\" },\n",
    );
    sandbox.write(".mcp.json", &edited);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".mcp.json"),
        "{\n  \"mcpServers\": {\n    \"docs\": { \"type\": \"http\", \"url\": \"https://docs.test/mcp\" },\n    \"memory\": { \"command\": \"npx\", \"args\": [\"-y\", \"@me/memory\"] }\n  }\n}\n"
    );
}

#[test]
fn a_second_uninstall_keeps_the_users_files_even_when_they_look_like_memloops() {
    let sandbox = Sandbox::empty();
    // Laid out exactly as memloop lays out the files it creates.
    let kimi = "{\n  \"mcpServers\": {}\n}\n";
    let settings = "{\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n";
    let opencode = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {}\n}\n";
    sandbox.write(".kimi-code/mcp.json", kimi);
    sandbox.write(".claude/settings.json", settings);
    sandbox.write("opencode.json", opencode);
    sandbox.ok(&["init", "--yes", "--agents", "claude,opencode,kimi"]);
    for _ in 0..2 {
        sandbox.ok(&["uninstall", "--yes"]);
        assert_eq!(sandbox.read(".kimi-code/mcp.json"), kimi);
        assert_eq!(sandbox.read(".claude/settings.json"), settings);
        assert_eq!(sandbox.read("opencode.json"), opencode);
    }
    // Installed again, the second round behaves the same.
    sandbox.ok(&["sync"]);
    assert!(sandbox.read(".kimi-code/mcp.json").contains("memloop"));
    sandbox.ok(&["uninstall", "--yes"]);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(sandbox.read(".kimi-code/mcp.json"), kimi);
}

#[test]
fn without_state_only_memloops_exact_entries_and_files_go() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"theirs\" }\n  },\n  \"x-mine\": 1\n}\n",
    );
    sandbox.ok(&["init", "--yes", "--agents", "claude,opencode", "--force"]);
    sandbox.forget_install();
    // The user's server was replaced on a machine that is gone: memloop's entry goes, and the
    // `mcpServers` it sat in stays (it may have been the user's).
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".mcp.json"),
        "{\n  \"mcpServers\": {},\n  \"x-mine\": 1\n}\n"
    );
    // Files memloop created from nothing go, and so does the AGENTS.md link to the CLAUDE.md
    // that went with them.
    for gone in [
        "CLAUDE.md",
        "AGENTS.md",
        "opencode.json",
        ".claude/settings.json",
    ] {
        assert!(!exists(&sandbox.repo.join(gone)), "{gone} is left");
    }
}

#[test]
fn without_state_an_entry_that_differs_from_memloops_is_the_users() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    sandbox.forget_install();
    let theirs = "{\n  \"mcpServers\": {\n    \"memory\": { \"type\": \"stdio\", \"command\": \"theirs\" }\n  }\n}\n";
    sandbox.write(".mcp.json", theirs);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(sandbox.read(".mcp.json"), theirs);
}

#[cfg(unix)]
#[test]
fn a_link_that_was_there_stays_while_its_claude_md_stays() {
    let sandbox = Sandbox::empty();
    sandbox.write("CLAUDE.md", "# Mine\n");
    std::os::unix::fs::symlink("CLAUDE.md", sandbox.repo.join("AGENTS.md")).unwrap();
    sandbox.ok(&["init", "--yes", "--agents", "claude,opencode"]);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(sandbox.read("CLAUDE.md"), "# Mine\n");
    assert_eq!(
        std::fs::read_link(sandbox.repo.join("AGENTS.md")).unwrap(),
        Path::new("CLAUDE.md")
    );
}

#[cfg(unix)]
#[test]
fn a_dangling_agents_md_link_goes() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude,opencode"]);
    // The install is recorded, but CLAUDE.md went (deleted by hand): the link would dangle.
    std::fs::remove_file(sandbox.repo.join("CLAUDE.md")).unwrap();
    sandbox.write("README.md", "x\n");
    sandbox.ok(&["uninstall", "--yes"]);
    assert!(!exists(&sandbox.repo.join("AGENTS.md")));
}

// ---- another machine: no install state, a real git history ----------------------------------

/// Runs git in the sandbox's repository (an identity of its own, no user config read).
fn git(sandbox: &Sandbox, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.test"])
        .args(args)
        .current_dir(&sandbox.repo)
        .env("HOME", &sandbox.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A sandbox whose repository is a real git repository (the harness makes an empty `.git/`).
fn git_sandbox() -> Sandbox {
    let sandbox = Sandbox::empty();
    std::fs::remove_dir_all(sandbox.repo.join(".git")).unwrap();
    git(&sandbox, &["init", "-q", "."]);
    sandbox
}

/// memloop with git on PATH, as on a developer's machine.
fn with_git(sandbox: &Sandbox, args: &[&str]) -> String {
    let env = std::collections::BTreeMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]);
    let out = sandbox.run_with(args, &env);
    assert!(
        out.status.success(),
        "memloop {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tree(sandbox: &Sandbox) -> trees::Tree {
    let mut tree = trees::snapshot(&sandbox.repo);
    tree.remove(Path::new("memloop.toml"));
    tree
}

#[test]
fn uninstall_without_state_keeps_files_git_tracks_that_it_has_no_record_of_creating() {
    let sandbox = git_sandbox();
    // The user's own committed settings, byte for byte what memloop writes from nothing, and
    // the same for files of other agents: another machine cannot tell them from memloop's.
    let mine = Sandbox::empty();
    mine.ok(&["init", "--yes", "--agents", "claude,opencode,kimi,codex"]);
    for rel in [
        ".claude/settings.json",
        "opencode.json",
        ".mcp.json",
        ".kimi-code/mcp.json",
        ".codex/hooks.json",
    ] {
        if mine.exists(rel) {
            sandbox.write(rel, &mine.read(rel));
        }
    }
    git(&sandbox, &["add", "-A"]);
    git(&sandbox, &["commit", "-qm", "the user's files"]);
    let committed = tree(&sandbox);
    assert!(committed.len() >= 4, "{committed:?}");
    with_git(
        &sandbox,
        &["init", "--yes", "--agents", "claude,opencode,kimi,codex"],
    );
    sandbox.forget_install();
    let out = with_git(&sandbox, &["uninstall", "--yes"]);
    for (rel, entry) in &committed {
        assert_eq!(
            tree(&sandbox).get(rel),
            Some(entry),
            "{} was committed and is gone or changed:\n{out}",
            rel.display()
        );
        assert!(
            out.contains(&format!("kept      {}", rel.display())),
            "{}:\n{out}",
            rel.display()
        );
    }
}

#[test]
fn uninstall_on_another_machine_leaves_the_tree_as_it_was_before_memloop() {
    let sandbox = git_sandbox();
    sandbox.write(".claude/settings.json", "{\n  \"model\": \"opus\"\n}\n");
    sandbox.write("opencode.json", "{\n  \"theme\": \"dark\"\n}\n");
    sandbox.write(
        ".gemini/settings.json",
        "{\"ui\": {\"theme\": \"GitHub\"}}\n",
    );
    sandbox.write("README.md", "# Project\n");
    git(&sandbox, &["add", "-A"]);
    git(&sandbox, &["commit", "-qm", "before memloop"]);
    let before = tree(&sandbox);
    // Machine A installs and commits; machine B (no state) uninstalls.
    with_git(
        &sandbox,
        &[
            "init",
            "--yes",
            "--agents",
            "claude,opencode,gemini,qwen,codex",
        ],
    );
    // The plugin is left out of the commit: deleting it must not leave `.opencode/plugins/`.
    std::fs::write(sandbox.repo.join(".git/info/exclude"), ".opencode/\n").unwrap();
    git(&sandbox, &["add", "-A"]);
    git(&sandbox, &["commit", "-qm", "memloop"]);
    sandbox.forget_install();
    with_git(&sandbox, &["uninstall", "--yes"]);
    let after = tree(&sandbox);
    for (rel, entry) in &before {
        assert_eq!(after.get(rel), Some(entry), "{}", rel.display());
    }
    for text in [
        sandbox.read(".claude/settings.json"),
        sandbox.read("opencode.json"),
    ] {
        assert!(
            !text.contains("$schema") && !text.contains("hooks") && !text.contains("mcp"),
            "{text}"
        );
    }
    assert!(
        !sandbox.repo.join(".opencode").exists(),
        "an empty .opencode/plugins/ was left"
    );
}

#[test]
fn uninstall_without_state_or_history_removes_the_folders_it_emptied() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "opencode,gemini,qwen"]);
    sandbox.forget_install();
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        tree(&sandbox).keys().collect::<Vec<_>>(),
        Vec::<&std::path::PathBuf>::new(),
        "left behind"
    );
    for dir in [".opencode", ".gemini", ".qwen"] {
        assert!(!sandbox.repo.join(dir).exists(), "{dir} left behind");
    }
}
