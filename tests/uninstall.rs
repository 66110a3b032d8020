//! Uninstall after the user kept working: their later edits stay, memloop's fragments go.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Repo {
    _temp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let temp = tempfile::tempdir().unwrap();
        let (root, home) = (temp.path().join("repo"), temp.path().join("home"));
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Repo {
            _temp: temp,
            root,
            home,
        }
    }

    fn memloop(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "memloop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[test]
fn later_edits_are_kept_and_only_memloops_fragments_go() {
    let repo = Repo::new();
    repo.write("CLAUDE.md", "# Project\n");
    repo.memloop(&["init", "--yes", "--agents", "claude"]);

    // The user keeps working: a second server, a note under the managed block.
    let mcp = repo.read(".mcp.json").replace(
        "\"mcpServers\": {\n",
        "\"mcpServers\": {\n    \"github\": { \"type\": \"http\", \"url\": \"https://example.test/mcp\" },\n",
    );
    repo.write(".mcp.json", &mcp);
    repo.write(
        "CLAUDE.md",
        &format!("{}\n## Added later\n", repo.read("CLAUDE.md")),
    );

    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(
        repo.read(".mcp.json"),
        "{\n  \"mcpServers\": {\n    \"github\": { \"type\": \"http\", \"url\": \"https://example.test/mcp\" }\n  }\n}\n"
    );
    assert_eq!(repo.read("CLAUDE.md"), "# Project\n\n## Added later\n");
    assert!(
        !exists(&repo.root.join(".claude/settings.json")),
        "the settings file memloop created goes"
    );
    assert!(
        !exists(&repo.root.join(".claude")),
        "and so does the folder it created"
    );
}

#[test]
fn a_file_rewritten_by_the_user_then_synced_comes_back_as_the_user_left_it() {
    let repo = Repo::new();
    repo.write("opencode.json", "{\n  \"theme\": \"dark\"\n}\n");
    repo.memloop(&["init", "--yes", "--agents", "opencode"]);

    // The user replaces the file wholesale (another tool, a checkout); sync puts memloop's
    // entries back into the new file. The bytes from before the first install are stale now.
    repo.write("opencode.json", "{\n  \"model\": \"local/qwen\"\n}\n");
    repo.memloop(&["sync"]);
    // And a file deleted since memloop wrote it stays deleted after uninstall.
    std::fs::remove_file(repo.root.join("AGENTS.md")).unwrap();
    repo.write("CLAUDE.md", "# Rewritten\n");
    repo.memloop(&["sync"]);

    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(
        repo.read("opencode.json"),
        "{\n  \"model\": \"local/qwen\"\n}\n"
    );
    assert_eq!(repo.read("CLAUDE.md"), "# Rewritten\n");
}

#[test]
fn user_scope_files_need_consent_to_be_removed() {
    let repo = Repo::new();
    repo.memloop(&["init", "--yes", "--agents", "kimi", "--user-scope"]);
    let config = repo.home.join(".kimi-code/config.toml");
    assert!(
        std::fs::read_to_string(&config)
            .unwrap()
            .contains("memloop hook stop --agent kimi")
    );

    // No terminal and no --yes: the repository is cleaned, the user's config is not touched.
    let out = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .arg("uninstall")
        .current_dir(&repo.root)
        .env_clear()
        .env("HOME", &repo.home)
        .env("XDG_STATE_HOME", repo.home.join("state"))
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
    assert!(!exists(&repo.root.join(".kimi-code/mcp.json")));

    repo.memloop(&["uninstall", "--yes"]);
    assert!(
        !exists(&config),
        "the config memloop created is gone with --yes"
    );
}

#[test]
fn an_edited_plugin_file_is_left_to_its_owner() {
    let repo = Repo::new();
    repo.memloop(&["init", "--yes", "--agents", "opencode"]);
    repo.write(".opencode/plugins/memloop.js", "// my own changes\n");
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(
        repo.read(".opencode/plugins/memloop.js"),
        "// my own changes\n"
    );
    assert!(!exists(&repo.root.join("opencode.json")));
}

impl Repo {
    /// Another machine, or a fresh clone: nothing recorded about this install.
    fn forget_install(&self) {
        std::fs::remove_dir_all(self.home.join("state/memloop/installs")).unwrap();
    }
}

#[test]
fn a_server_replaced_by_force_comes_back_after_later_edits() {
    let repo = Repo::new();
    let mine = "{\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"npx\", \"args\": [\"-y\", \"@me/memory\"] }\n  }\n}\n";
    repo.write(".mcp.json", mine);
    repo.memloop(&["init", "--yes", "--agents", "claude", "--force"]);
    assert!(repo.read(".mcp.json").contains("\"memloop\""));

    // Later, the user adds a server next to it: the file is no longer what memloop wrote.
    let edited = repo.read(".mcp.json").replace(
        "\"mcpServers\": {\n",
        "\"mcpServers\": {\n    \"docs\": { \"type\": \"http\", \"url\": \"https://docs.test/mcp\" },\n",
    );
    repo.write(".mcp.json", &edited);
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(
        repo.read(".mcp.json"),
        "{\n  \"mcpServers\": {\n    \"docs\": { \"type\": \"http\", \"url\": \"https://docs.test/mcp\" },\n    \"memory\": { \"command\": \"npx\", \"args\": [\"-y\", \"@me/memory\"] }\n  }\n}\n"
    );
}

#[test]
fn a_second_uninstall_keeps_the_users_files_even_when_they_look_like_memloops() {
    let repo = Repo::new();
    // Laid out exactly as memloop lays out the files it creates.
    let kimi = "{\n  \"mcpServers\": {}\n}\n";
    let settings = "{\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n";
    let opencode = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {}\n}\n";
    repo.write(".kimi-code/mcp.json", kimi);
    repo.write(".claude/settings.json", settings);
    repo.write("opencode.json", opencode);
    repo.memloop(&["init", "--yes", "--agents", "claude,opencode,kimi"]);
    for _ in 0..2 {
        repo.memloop(&["uninstall", "--yes"]);
        assert_eq!(repo.read(".kimi-code/mcp.json"), kimi);
        assert_eq!(repo.read(".claude/settings.json"), settings);
        assert_eq!(repo.read("opencode.json"), opencode);
    }
    // Installed again, the second round behaves the same.
    repo.memloop(&["sync"]);
    assert!(repo.read(".kimi-code/mcp.json").contains("memloop"));
    repo.memloop(&["uninstall", "--yes"]);
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(repo.read(".kimi-code/mcp.json"), kimi);
}

#[test]
fn without_state_only_memloops_exact_entries_and_files_go() {
    let repo = Repo::new();
    repo.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"memory\": { \"command\": \"theirs\" }\n  },\n  \"x-mine\": 1\n}\n",
    );
    repo.memloop(&["init", "--yes", "--agents", "claude,opencode", "--force"]);
    repo.forget_install();
    // The user's server was replaced on a machine that is gone: memloop's entry goes, and the
    // `mcpServers` it sat in stays (it may have been the user's).
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(
        repo.read(".mcp.json"),
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
        assert!(!exists(&repo.root.join(gone)), "{gone} is left");
    }
}

#[test]
fn without_state_an_entry_that_differs_from_memloops_is_the_users() {
    let repo = Repo::new();
    repo.memloop(&["init", "--yes", "--agents", "claude"]);
    repo.forget_install();
    let theirs = "{\n  \"mcpServers\": {\n    \"memory\": { \"type\": \"stdio\", \"command\": \"theirs\" }\n  }\n}\n";
    repo.write(".mcp.json", theirs);
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(repo.read(".mcp.json"), theirs);
}

#[cfg(unix)]
#[test]
fn a_link_that_was_there_stays_while_its_claude_md_stays() {
    let repo = Repo::new();
    repo.write("CLAUDE.md", "# Mine\n");
    std::os::unix::fs::symlink("CLAUDE.md", repo.root.join("AGENTS.md")).unwrap();
    repo.memloop(&["init", "--yes", "--agents", "claude,opencode"]);
    repo.memloop(&["uninstall", "--yes"]);
    assert_eq!(repo.read("CLAUDE.md"), "# Mine\n");
    assert_eq!(
        std::fs::read_link(repo.root.join("AGENTS.md")).unwrap(),
        Path::new("CLAUDE.md")
    );
}

#[cfg(unix)]
#[test]
fn a_dangling_agents_md_link_goes() {
    let repo = Repo::new();
    repo.memloop(&["init", "--yes", "--agents", "claude,opencode"]);
    // The install is recorded, but CLAUDE.md went (deleted by hand): the link would dangle.
    std::fs::remove_file(repo.root.join("CLAUDE.md")).unwrap();
    repo.write("README.md", "x\n");
    repo.memloop(&["uninstall", "--yes"]);
    assert!(!exists(&repo.root.join("AGENTS.md")));
}
