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
