//! An agent removed from memloop.toml: sync takes its fragments back (user-scope files only with
//! consent, as for writing), and diff shows it.

use std::path::PathBuf;
use std::process::{Command, Output};

struct Repo {
    _temp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let (repo, home) = (root.join("repo"), root.join("home"));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Repo {
            _temp: temp,
            root: repo,
            home,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memloop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn agents(&self, agents: &str) {
        let path = self.root.join("memloop.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("agents ="))
            .unwrap()
            .to_owned();
        std::fs::write(path, text.replace(&line, &format!("agents = {agents}"))).unwrap();
    }

    fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(rel)).is_ok()
    }
}

#[test]
fn sync_takes_back_what_a_removed_agent_had_and_diff_shows_it_first() {
    let repo = Repo::new();
    std::fs::write(
        repo.root.join("opencode.json"),
        "{\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n",
    )
    .unwrap();
    repo.ok(&["init", "--yes", "--agents", "claude,opencode"]);
    repo.agents("[\"claude\"]");

    let diff = repo.run(&["diff"]);
    assert_eq!(diff.status.code(), Some(1), "diff must report the drift");
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert!(shown.contains("opencode.json"), "{shown}");
    assert!(shown.contains("memloop.js"), "{shown}");

    repo.ok(&["sync"]);
    // The file that existed gets its bytes back; the plugin memloop created goes.
    assert_eq!(
        std::fs::read_to_string(repo.root.join("opencode.json")).unwrap(),
        "{\n  \"model\": \"anthropic/claude-sonnet-4-5\"\n}\n"
    );
    assert!(!repo.exists(".opencode/plugins/memloop.js"));
    assert!(!repo.exists("AGENTS.md"), "no agent left reads AGENTS.md");
    assert!(repo.exists("CLAUDE.md") && repo.exists(".mcp.json"));
    assert_eq!(repo.run(&["diff"]).status.code(), Some(0));
    // Sync is idempotent from here, and uninstall still removes Claude's files.
    repo.ok(&["sync"]);
    repo.ok(&["uninstall", "--yes"]);
    assert!(!repo.exists("CLAUDE.md") && !repo.exists(".mcp.json"));
    assert!(repo.exists("opencode.json"));
}

#[test]
fn a_removed_agents_user_scope_hook_goes_only_with_consent() {
    let repo = Repo::new();
    repo.ok(&["init", "--yes", "--agents", "claude,kimi", "--user-scope"]);
    let config = repo.home.join(".kimi-code/config.toml");
    let hook = std::fs::read_to_string(&config).unwrap();
    assert!(hook.contains("memloop hook stop --agent kimi"));

    // Consent given on this machine before: remembered, so sync takes the hook back.
    repo.agents("[\"claude\"]");
    repo.ok(&["sync"]);
    assert!(!config.exists(), "the config memloop created is gone");
    assert!(!repo.exists(".kimi-code/mcp.json"));

    // Another machine without consent: the hook stays, and sync says how to remove it.
    std::fs::remove_dir_all(repo.home.join("state/memloop/installs")).unwrap();
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, &hook).unwrap();
    let said = repo.ok(&["sync"]);
    assert!(said.contains("still holds memloop's Stop hook"), "{said}");
    assert!(said.contains("--user-scope"), "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), hook);
    repo.ok(&["sync", "--user-scope"]);
    assert!(!config.exists());
}

#[cfg(unix)]
#[test]
fn an_agents_md_leaving_the_repository_does_not_stop_a_claude_only_sync() {
    let repo = Repo::new();
    let elsewhere = repo.home.join("shared-agents.md");
    std::fs::write(&elsewhere, "# shared\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.root.join("AGENTS.md")).unwrap();
    repo.ok(&["init", "--yes", "--agents", "claude"]);
    repo.ok(&["sync"]);
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "# shared\n");
}
