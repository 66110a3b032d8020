//! `memloop trust` and `memloop trust --revoke` for each agent, with HOME in a temporary folder:
//! what it writes where, that a second run changes nothing, that revoking gives back exactly the
//! bytes from before (the user's own entries stay), and that it never writes without consent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

struct World {
    _temp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
}

impl World {
    /// A repository set up for `agents` (without trust) and an empty home.
    fn new(agents: &str) -> World {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let (root, home) = (base.join("repo"), base.join("home"));
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let world = World {
            _temp: temp,
            root,
            home,
        };
        world.ok(&["init", "--yes", "--agents", agents]);
        world
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memloop {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every file under the home folder but memloop's own state, with its bytes.
    fn home_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.home.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let rel = path.strip_prefix(&self.home).unwrap().to_path_buf();
                if rel.starts_with(".local") {
                    continue;
                }
                if path.is_dir() {
                    stack.push(path);
                } else {
                    files.insert(rel, std::fs::read(&path).unwrap());
                }
            }
        }
        files
    }

    fn home_text(&self, rel: &str) -> String {
        std::fs::read_to_string(self.home.join(rel)).unwrap()
    }

    fn write_home(&self, rel: &str, text: &str) {
        let path = self.home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn root_str(&self) -> String {
        self.root.display().to_string()
    }
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

const CODEX_CONFIG: &str = ".codex/config.toml";

#[test]
fn codex_trust_writes_project_and_hook_trust_once() {
    let world = World::new("codex");
    assert!(
        world.home_files().is_empty(),
        "init without --trust wrote home files"
    );
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.codex/config.toml"), "{out}");
    let text = world.home_text(CODEX_CONFIG);
    let root = world.root_str();
    assert!(
        text.contains(&format!("[projects.\"{root}\"]\ntrust_level = \"trusted\"")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "[hooks.state.\"{root}/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:"
        )),
        "{text}"
    );
    let once = world.home_files();
    let again = world.ok(&["trust", "--yes"]);
    assert!(again.contains("nothing to change"), "{again}");
    world.ok(&["sync"]);
    assert_eq!(
        world.home_files(),
        once,
        "a second trust or a sync changed the home folder"
    );
}

/// memloop's Stop group moves to index 1 when the user puts a group of their own first: the trust
/// entry follows it, and the one at the old key goes (a hook put there later would run trusted).
#[test]
fn codex_trust_follows_memloops_group_when_it_moves() {
    let world = World::new("codex");
    world.ok(&["trust", "--yes"]);
    let root = world.root_str();
    let hooks = world.root.join(".codex/hooks.json");
    let text = std::fs::read_to_string(&hooks).unwrap();
    let moved = text.replacen(
        "\"Stop\": [",
        "\"Stop\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"./lint.sh\"}]},",
        1,
    );
    assert_ne!(moved, text);
    std::fs::write(&hooks, moved).unwrap();
    world.ok(&["sync"]);
    let config = world.home_text(CODEX_CONFIG);
    assert!(
        config.contains(&format!("{root}/.codex/hooks.json:stop:1:0")),
        "{config}"
    );
    assert!(
        !config.contains(&format!("{root}/.codex/hooks.json:stop:0:0")),
        "{config}"
    );
    let doctor = String::from_utf8(world.run(&["doctor", "--format", "json"]).stdout).unwrap();
    assert!(!doctor.contains("hook-trust-left"), "{doctor}");
    world.ok(&["trust", "--revoke", "--yes"]);
    assert!(
        !exists(&world.home.join(CODEX_CONFIG)),
        "revoke left the file memloop created"
    );
}

/// The prompt hook (recall) is trusted like the others: trust writes its entry; when the user puts
/// a UserPromptSubmit group of their own first, doctor names the missing trust and the one left
/// behind, and the next sync moves the entry to the group's new place.
#[test]
fn codex_prompt_hook_trust_follows_its_group_and_doctor_names_it_until_then() {
    let world = World::new("codex");
    // Doctor reads Codex's user config only where Codex is installed.
    let codex = world.home.join("bin/codex");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(&codex, "#!/bin/sh\necho 'codex-cli 0.171.0'\n").unwrap();
    let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&codex, executable).unwrap();
    world.ok(&["trust", "--yes"]);
    let root = world.root_str();
    let at = |group: usize| format!("{root}/.codex/hooks.json:user_prompt_submit:{group}:0");
    assert!(world.home_text(CODEX_CONFIG).contains(&at(0)));
    let hooks = world.root.join(".codex/hooks.json");
    let text = std::fs::read_to_string(&hooks).unwrap();
    let moved = text.replacen(
        "\"UserPromptSubmit\": [",
        "\"UserPromptSubmit\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"./log.sh\"}]},",
        1,
    );
    assert_ne!(moved, text);
    std::fs::write(&hooks, moved).unwrap();
    let doctor = String::from_utf8(world.run(&["doctor"]).stdout).unwrap();
    assert!(
        doctor.contains("has no trusted_hash for memloop's UserPromptSubmit hook"),
        "{doctor}"
    );
    assert!(doctor.contains(&at(0)), "{doctor}");
    world.ok(&["sync"]);
    let config = world.home_text(CODEX_CONFIG);
    assert!(config.contains(&at(1)), "{config}");
    assert!(!config.contains(&at(0)), "{config}");
    let doctor = String::from_utf8(world.run(&["doctor", "--verbose"]).stdout).unwrap();
    assert!(
        doctor.contains("trusts memloop's UserPromptSubmit hook by its current hash"),
        "{doctor}"
    );
}

#[test]
fn codex_session_start_off_takes_back_its_trust_wherever_the_group_had_moved() {
    let world = World::new("codex");
    world.ok(&["trust", "--yes"]);
    let root = world.root_str();
    let hooks = world.root.join(".codex/hooks.json");
    let text = std::fs::read_to_string(&hooks).unwrap();
    // The user puts a SessionStart group before memloop's and turns session start off before
    // any sync has moved the trust entry: it still sits at memloop's old group.
    let moved = text.replacen(
        "\"SessionStart\": [",
        "\"SessionStart\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"./warm.sh\"}]},",
        1,
    );
    assert_ne!(moved, text);
    std::fs::write(&hooks, moved).unwrap();
    let config = world.root.join("memloop.toml");
    let toml = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{toml}\n[memory]\nsession_start = false\n"),
    )
    .unwrap();
    world.ok(&["sync"]);
    let user = world.home_text(CODEX_CONFIG);
    assert!(
        !user.contains(&format!("{root}/.codex/hooks.json:session_start:")),
        "{user}"
    );
    assert!(
        user.contains(&format!("{root}/.codex/hooks.json:stop:0:0")),
        "{user}"
    );
    assert!(
        std::fs::read_to_string(&hooks)
            .unwrap()
            .contains("./warm.sh")
    );
}

#[test]
fn codex_revoke_gives_back_the_bytes_from_before() {
    let world = World::new("codex");
    let mine = "\u{feff}# my own settings\r\nmodel = \"o3\"\r\n\r\n[projects.\"/elsewhere\"]\r\ntrust_level = \"trusted\"";
    world.write_home(CODEX_CONFIG, mine);
    world.ok(&["trust", "--yes"]);
    let trusted = world.home_text(CODEX_CONFIG);
    assert!(
        trusted.starts_with("\u{feff}# my own settings\r\n"),
        "{trusted:?}"
    );
    assert!(
        !trusted.replace("\r\n", "").contains('\n'),
        "line endings mixed: {trusted:?}"
    );
    let out = world.ok(&["trust", "--revoke", "--yes"]);
    assert!(out.contains("~/.codex/config.toml"), "{out}");
    assert_eq!(world.home_text(CODEX_CONFIG), mine);
    // Revoked means revoked: sync does not write the entries again.
    world.ok(&["sync"]);
    assert_eq!(world.home_text(CODEX_CONFIG), mine);
    let twice = world.ok(&["trust", "--revoke", "--yes"]);
    assert!(twice.contains("nothing to change"), "{twice}");
}

#[test]
fn codex_revoke_after_codex_rewrote_the_file_keeps_the_users_own_trust() {
    let world = World::new("codex");
    let root = world.root_str();
    // The user trusted the project by hand before memloop came; memloop adds the hook's hash.
    world.write_home(
        CODEX_CONFIG,
        &format!("[projects.\"{root}\"]\ntrust_level = \"trusted\"\n"),
    );
    world.ok(&["trust", "--yes"]);
    // Codex (or the user) adds something afterwards.
    let mut text = world.home_text(CODEX_CONFIG);
    text.push_str("\n[tui]\ntheme = \"dark\"\n");
    std::fs::write(world.home.join(CODEX_CONFIG), &text).unwrap();
    world.ok(&["trust", "--revoke", "--yes"]);
    let after = world.home_text(CODEX_CONFIG);
    assert!(
        after.contains(&format!("[projects.\"{root}\"]\ntrust_level = \"trusted\"")),
        "the user's own trust went:\n{after}"
    );
    assert!(after.contains("[tui]\ntheme = \"dark\""), "{after}");
    assert!(
        !after.contains("trusted_hash"),
        "memloop's hook trust stayed:\n{after}"
    );
}

#[test]
fn revoke_leaves_trust_memloop_did_not_write() {
    let world = World::new("codex");
    let root = world.root_str();
    let theirs = format!(
        "[projects.\"{root}\"]\ntrust_level = \"trusted\"\n\n[hooks.state.\"{root}/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:00\"\n"
    );
    world.write_home(CODEX_CONFIG, &theirs);
    let out = world.ok(&["trust", "--revoke", "--yes"]);
    assert!(out.contains("nothing to change"), "{out}");
    assert_eq!(world.home_text(CODEX_CONFIG), theirs);
}

#[test]
fn off_a_terminal_trust_needs_yes_and_writes_nothing() {
    let world = World::new("codex");
    let out = world.run(&["trust"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("memloop trust --yes"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    // The plan was shown, so the refusal can be read and answered.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("trust_level"),
        "no plan shown"
    );
    assert!(world.home_files().is_empty());

    world.ok(&["trust", "--yes"]);
    let trusted = world.home_files();
    let out = world.run(&["trust", "--revoke"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("memloop trust --revoke --yes"));
    assert_eq!(world.home_files(), trusted);
}

#[test]
fn dry_run_shows_the_plan_and_writes_nothing() {
    let world = World::new("codex");
    let out = world.ok(&["trust", "--dry-run"]);
    assert!(out.contains("+trust_level = \"trusted\""), "{out}");
    assert!(out.contains("nothing written"), "{out}");
    assert!(world.home_files().is_empty());
    world.ok(&["trust", "--yes"]);
    let trusted = world.home_files();
    let out = world.ok(&["trust", "--revoke", "--dry-run"]);
    assert!(out.contains("-trust_level = \"trusted\""), "{out}");
    assert_eq!(world.home_files(), trusted);
}

#[test]
fn init_with_trust_flag_trusts_and_without_names_the_command() {
    let world = World::new("codex");
    assert!(!exists(&world.home.join(CODEX_CONFIG)));
    let temp = tempfile::tempdir().unwrap();
    let other = World {
        root: std::fs::canonicalize(temp.path()).unwrap().join("repo"),
        home: world.home.clone(),
        _temp: temp,
    };
    std::fs::create_dir_all(other.root.join(".git")).unwrap();
    let out = other.ok(&["init", "--yes", "--agents", "codex", "--trust"]);
    assert!(out.contains("~/.codex/config.toml"), "{out}");
    assert!(
        other
            .home_text(CODEX_CONFIG)
            .contains(&format!("[projects.\"{}\"]", other.root_str()))
    );
    // The first repository, set up with --yes alone, was told how to trust it.
    let third = tempfile::tempdir().unwrap();
    let third_root = std::fs::canonicalize(third.path()).unwrap().join("repo");
    std::fs::create_dir_all(third_root.join(".git")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(["init", "--yes", "--agents", "codex"])
        .current_dir(&third_root)
        .env_clear()
        .env("HOME", &world.home)
        .env("PATH", world.home.join("bin"))
        .env("XDG_STATE_HOME", world.home.join(".local/state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("run `memloop trust`"), "{stdout}");
}

#[test]
fn uninstall_takes_trust_back_too() {
    let world = World::new("codex");
    let mine = "model = \"o3\"\n";
    world.write_home(CODEX_CONFIG, mine);
    world.ok(&["trust", "--yes"]);
    world.ok(&["uninstall", "--yes"]);
    assert_eq!(world.home_text(CODEX_CONFIG), mine);
}

#[test]
fn claude_trust_accepts_the_folder_and_approves_memloops_server_only() {
    let world = World::new("claude");
    let root = world.root_str();
    // Claude Code's own config, with another project and the user's approval of their own server.
    let global = "{\n  \"numStartups\": 3,\n  \"projects\": {\n    \"/elsewhere\": {\n      \"hasTrustDialogAccepted\": true\n    }\n  }\n}\n";
    world.write_home(".claude.json", global);
    let local = world.root.join(".claude/settings.local.json");
    let mine =
        "{\n  \"enabledMcpjsonServers\": [\"github\"],\n  \"permissions\": {\"allow\": []}\n}\n";
    std::fs::write(&local, mine).unwrap();
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.claude.json"), "{out}");
    assert!(out.contains(".claude/settings.local.json"), "{out}");
    let config: serde_json::Value = serde_json::from_str(&world.home_text(".claude.json")).unwrap();
    assert_eq!(
        config["projects"][&root]["hasTrustDialogAccepted"],
        serde_json::json!(true)
    );
    assert_eq!(config["numStartups"], serde_json::json!(3));
    let approved = std::fs::read_to_string(&local).unwrap();
    assert!(
        approved.contains("\"enabledMcpjsonServers\": [\"github\", \"memory\"]"),
        "{approved}"
    );
    let doctor = String::from_utf8(world.run(&["doctor", "--verbose"]).stdout).unwrap();
    assert!(
        doctor.contains("the project server `memory` is approved"),
        "{doctor}"
    );
    let once = (world.home_files(), std::fs::read(&local).unwrap());
    assert!(world.ok(&["trust", "--yes"]).contains("nothing to change"));
    world.ok(&["sync"]);
    assert_eq!((world.home_files(), std::fs::read(&local).unwrap()), once);

    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_text(".claude.json"), global);
    assert_eq!(std::fs::read_to_string(&local).unwrap(), mine);
}

#[test]
fn claude_revoke_after_claude_rewrote_its_config_keeps_its_own_keys() {
    let world = World::new("claude");
    let root = world.root_str();
    world.ok(&["trust", "--yes"]);
    assert!(!world.root.join(".claude/settings.local.json.bak").exists());
    // Claude Code adds its per-project state next to memloop's key, and approves by hand too.
    let mut config: serde_json::Value =
        serde_json::from_str(&world.home_text(".claude.json")).unwrap();
    config["projects"][&root]["allowedTools"] = serde_json::json!([]);
    config["userID"] = serde_json::json!("u1");
    std::fs::write(
        world.home.join(".claude.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    world.ok(&["trust", "--revoke", "--yes"]);
    let after: serde_json::Value = serde_json::from_str(&world.home_text(".claude.json")).unwrap();
    assert_eq!(after["userID"], serde_json::json!("u1"));
    assert_eq!(
        after["projects"][&root]["allowedTools"],
        serde_json::json!([])
    );
    assert!(
        after["projects"][&root]
            .get("hasTrustDialogAccepted")
            .is_none(),
        "{after}"
    );
    // memloop created settings.local.json for its approval alone: it goes.
    assert!(!exists(&world.root.join(".claude/settings.local.json")));
}

#[test]
fn claude_approval_the_user_gave_stays_after_revoke() {
    let world = World::new("claude");
    let local = world.root.join(".claude/settings.local.json");
    let mine = "{\"enabledMcpjsonServers\": [\"memory\"]}\n";
    std::fs::write(&local, mine).unwrap();
    world.ok(&["trust", "--yes"]);
    assert_eq!(std::fs::read_to_string(&local).unwrap(), mine);
    std::fs::write(
        &local,
        "{\"enabledMcpjsonServers\": [\"memory\"], \"x\": 1}\n",
    )
    .unwrap();
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(
        std::fs::read_to_string(&local).unwrap(),
        "{\"enabledMcpjsonServers\": [\"memory\"], \"x\": 1}\n"
    );
}

fn kimi_trust_files(world: &World) -> Vec<PathBuf> {
    let dir = world.home.join(".kimi-code/workspace-trust");
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn kimi_trust_writes_the_folder_record_kimi_reads() {
    let world = World::new("kimi");
    world.ok(&["trust", "--yes"]);
    let files = kimi_trust_files(&world);
    let [file] = files.as_slice() else {
        panic!("expected one trust record: {files:?}")
    };
    let name = file.file_name().unwrap().to_str().unwrap();
    assert_eq!(name, memloop::agents::kimi::trust_key(&world.root));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(record["root"], serde_json::json!(world.root_str()));
    assert!(
        record["trustedAt"].as_u64().is_some_and(|t| t > 0),
        "{record}"
    );
    // (doctor checks Kimi's trust only where Kimi Code is installed; its key is `trust_key`'s.)
    let once = world.home_files();
    assert!(world.ok(&["trust", "--yes"]).contains("nothing to change"));
    world.ok(&["sync"]);
    assert_eq!(world.home_files(), once);
    world.ok(&["trust", "--revoke", "--yes"]);
    assert!(kimi_trust_files(&world).is_empty());
}

#[test]
fn kimi_trust_the_user_gave_is_left_alone() {
    let world = World::new("kimi");
    let key = memloop::agents::kimi::trust_key(&world.root);
    let rel = format!(".kimi-code/workspace-trust/{key}");
    let theirs = format!("{{\"root\":\"{}\",\"trustedAt\":1}}", world.root_str());
    world.write_home(&rel, &theirs);
    assert!(world.ok(&["trust", "--yes"]).contains("nothing to change"));
    world.ok(&["trust", "--revoke", "--yes"]);
    world.ok(&["uninstall", "--yes"]);
    assert_eq!(world.home_text(&rel), theirs);
}

#[test]
fn every_agent_at_once_and_back() {
    let world = World::new("claude,opencode,kimi,codex");
    world.write_home(".claude.json", "{}\n");
    let before = world.home_files();
    let out = world.ok(&["trust", "--yes"]);
    for shown in [
        "~/.claude.json",
        "~/.codex/config.toml",
        "~/.kimi-code/workspace-trust/",
    ] {
        assert!(out.contains(shown), "{shown} not in\n{out}");
    }
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_files(), before);
    assert!(!exists(&world.root.join(".claude/settings.local.json")));
}

const GEMINI_FOLDERS: &str = ".gemini/trustedFolders.json";

#[test]
fn gemini_trust_writes_folder_trust_once_and_revoke_gives_back_the_bytes() {
    let world = World::new("gemini");
    assert!(
        world.home_files().is_empty(),
        "init without --trust wrote home files"
    );
    let mine = "{\r\n  // mine\r\n  \"/elsewhere\": \"DO_NOT_TRUST\"\r\n}";
    world.write_home(GEMINI_FOLDERS, mine);
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.gemini/trustedFolders.json"), "{out}");
    let text = world.home_text(GEMINI_FOLDERS);
    let root = world.root_str();
    assert!(
        text.contains(&format!("\"{root}\": \"TRUST_FOLDER\"")),
        "{text}"
    );
    assert!(text.contains("// mine\r\n"), "{text:?}");
    let once = world.home_files();
    let again = world.ok(&["trust", "--yes"]);
    assert!(again.contains("nothing to change"), "{again}");
    world.ok(&["sync"]);
    assert_eq!(
        world.home_files(),
        once,
        "a second trust or a sync changed it"
    );
    let out = world.ok(&["trust", "--revoke", "--yes"]);
    assert!(out.contains("~/.gemini/trustedFolders.json"), "{out}");
    assert_eq!(world.home_text(GEMINI_FOLDERS), mine);
    world.ok(&["sync"]);
    assert_eq!(world.home_text(GEMINI_FOLDERS), mine);
}

const QWEN_APPROVALS: &str = ".qwen/mcpApprovals.json";

/// The approval record of `memory` for the repository, and the entry it must match.
fn qwen_approval(world: &World) -> (serde_json::Value, serde_json::Value) {
    let approvals: serde_json::Value =
        serde_json::from_str(&world.home_text(QWEN_APPROVALS)).unwrap();
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(world.root.join(".qwen/settings.json")).unwrap(),
    )
    .unwrap();
    (
        approvals[world.root_str()]["memory"].clone(),
        settings["mcpServers"]["memory"].clone(),
    )
}

#[test]
fn qwen_trust_approves_the_server_and_sync_keeps_its_hash_current() {
    let world = World::new("qwen");
    assert!(
        world.home_files().is_empty(),
        "init without --trust wrote home files"
    );
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.qwen/mcpApprovals.json"), "{out}");
    assert!(
        !exists(&world.home.join(".qwen/trustedFolders.json")),
        "folder trust is off by default, yet memloop wrote it"
    );
    let (record, entry) = qwen_approval(&world);
    assert_eq!(record["status"], "approved");
    assert_eq!(
        record["hash"],
        memloop::agents::qwen::trust::server_hash(&entry)
    );
    let once = world.home_files();
    world.ok(&["sync"]);
    assert_eq!(world.home_files(), once, "a sync changed the approval");
    // The entry changes: sync binds the approval to it again, since trust was given.
    let config = world.root.join("memloop.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        "name = \"memory\"\n",
        "name = \"memory\"\nurl = \"http://127.0.0.1:9/mcp\"\n",
    );
    std::fs::write(&config, text).unwrap();
    world.ok(&["sync"]);
    let (record, entry) = qwen_approval(&world);
    assert_eq!(entry["httpUrl"], "http://127.0.0.1:9/mcp");
    assert_eq!(
        record["hash"],
        memloop::agents::qwen::trust::server_hash(&entry)
    );
    world.ok(&["trust", "--revoke", "--yes"]);
    assert!(
        !exists(&world.home.join(QWEN_APPROVALS)),
        "revoke left the file memloop created"
    );
    world.ok(&["sync"]);
    assert!(
        !exists(&world.home.join(QWEN_APPROVALS)),
        "sync trusted again"
    );
}

#[test]
fn qwen_trust_writes_folder_trust_where_it_is_on_and_revoke_keeps_the_users_settings() {
    let world = World::new("qwen");
    let settings = "{\"security\": {\"folderTrust\": {\"enabled\": true}}}\n";
    world.write_home(".qwen/settings.json", settings);
    let folders = "{\n  \"/elsewhere\": \"TRUST_FOLDER\"\n}\n";
    world.write_home(".qwen/trustedFolders.json", folders);
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.qwen/trustedFolders.json"), "{out}");
    let text = world.home_text(".qwen/trustedFolders.json");
    assert!(
        text.contains(&format!("\"{}\": \"TRUST_FOLDER\"", world.root_str())),
        "{text}"
    );
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_text(".qwen/trustedFolders.json"), folders);
    assert_eq!(world.home_text(".qwen/settings.json"), settings);
    assert!(!exists(&world.home.join(QWEN_APPROVALS)));
}

#[test]
fn qwen_trust_leaves_an_approval_the_user_rejected() {
    let world = World::new("qwen");
    let rejected = format!(
        "{{\"{}\": {{\"memory\": {{\"hash\": \"00\", \"status\": \"rejected\"}}}}}}\n",
        world.root_str()
    );
    world.write_home(QWEN_APPROVALS, &rejected);
    let out = world.run(&["trust", "--yes"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rejected"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(world.home_text(QWEN_APPROVALS), rejected);
}

#[test]
fn gemini_trust_leaves_a_folder_the_user_distrusted() {
    let world = World::new("gemini");
    let mine = format!("{{\"{}\": \"DO_NOT_TRUST\"}}\n", world.root_str());
    world.write_home(GEMINI_FOLDERS, &mine);
    let out = world.run(&["trust", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DO_NOT_TRUST"), "{stderr}");
    assert!(stderr.contains("leaves that entry alone"), "{stderr}");
    assert_eq!(world.home_text(GEMINI_FOLDERS), mine);
}

#[test]
fn init_with_trust_over_a_rejected_approval_installs_the_repository_and_writes_no_trust() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(temp.path()).unwrap();
    let world = World {
        root: base.join("repo"),
        home: base.join("home"),
        _temp: temp,
    };
    std::fs::create_dir_all(world.root.join(".git")).unwrap();
    let rejected = format!(
        "{{\"{}\": {{\"memory\": {{\"hash\": \"00\", \"status\": \"rejected\"}}}}}}\n",
        world.root_str()
    );
    world.write_home(QWEN_APPROVALS, &rejected);
    let out = world.run(&["init", "--yes", "--agents", "qwen", "--trust"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no trust entry was written"), "{stderr}");
    assert!(world.root.join(".qwen/settings.json").exists());
    assert_eq!(world.home_text(QWEN_APPROVALS), rejected);
    // Not trusted: sync leaves the user's rejection alone too.
    world.ok(&["sync"]);
    assert_eq!(world.home_text(QWEN_APPROVALS), rejected);
}

const COPILOT_CONFIG: &str = ".copilot/config.json";

#[test]
fn copilot_trust_writes_trusted_folders_once_and_revoke_gives_back_the_bytes() {
    let world = World::new("copilot");
    assert!(
        world.home_files().is_empty(),
        "init without --trust wrote home files"
    );
    let mine = "{\r\n  // mine\r\n  \"trustedFolders\": [\"/elsewhere\",],\r\n  \"firstLaunchAt\": \"2026-01-01\"\r\n}\r\n";
    world.write_home(COPILOT_CONFIG, mine);
    let dry = world.ok(&["trust", "--dry-run"]);
    assert!(dry.contains("~/.copilot/config.json"), "{dry}");
    assert_eq!(world.home_text(COPILOT_CONFIG), mine, "--dry-run wrote");
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.copilot/config.json"), "{out}");
    let text = world.home_text(COPILOT_CONFIG);
    let config: serde_json::Value =
        serde_json::from_str(&text.replace("// mine\r\n", "").replace(",]", "]")).unwrap();
    assert_eq!(
        config["trustedFolders"],
        serde_json::json!(["/elsewhere", world.root_str()]),
        "{text}"
    );
    assert!(text.contains("// mine\r\n"), "{text:?}");
    let once = world.home_files();
    let again = world.ok(&["trust", "--yes"]);
    assert!(again.contains("nothing to change"), "{again}");
    world.ok(&["sync"]);
    assert_eq!(
        world.home_files(),
        once,
        "a second trust or a sync changed it"
    );
    let out = world.ok(&["trust", "--revoke", "--yes"]);
    assert!(out.contains("~/.copilot/config.json"), "{out}");
    assert_eq!(world.home_text(COPILOT_CONFIG), mine);
    world.ok(&["sync"]);
    assert_eq!(
        world.home_text(COPILOT_CONFIG),
        mine,
        "sync wrote trust after revoke"
    );
}

#[test]
fn copilot_revoke_after_copilot_rewrote_its_config_keeps_its_own_keys() {
    let world = World::new("copilot");
    world.ok(&["trust", "--yes"]);
    let text = world.home_text(COPILOT_CONFIG);
    // Copilot records its own state in the same file, and the user trusts another folder.
    let rewritten = text.replacen("{", "{\n  \"firstLaunchAt\": \"2026-12-01T00:00:00Z\",", 1);
    let rewritten = rewritten.replacen("[", "[\"/srv/other\", ", 1);
    world.write_home(COPILOT_CONFIG, &rewritten);
    world.ok(&["trust", "--revoke", "--yes"]);
    let config: serde_json::Value = serde_json::from_str(&world.home_text(COPILOT_CONFIG)).unwrap();
    assert_eq!(config["trustedFolders"], serde_json::json!(["/srv/other"]));
    assert_eq!(config["firstLaunchAt"], "2026-12-01T00:00:00Z");
}

/// The install state file of `world`'s repository (the only one under its state dir).
fn state_file(world: &World) -> PathBuf {
    let dir = world.home.join(".local/state/memloop/installs");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

/// What an older memloop left after `init --user-scope` wrote Copilot's trust as one of sync's
/// files: the same entry and the same record of the file, with the consent for the user scope
/// and without memloop trust's.
fn as_an_older_memloop_left_it(world: &World) {
    world.ok(&["trust", "--yes"]);
    let path = state_file(world);
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let record = world.home.join(COPILOT_CONFIG).display().to_string();
    assert!(state["files"].get(&record).is_some(), "{state}");
    state.as_object_mut().unwrap().remove("trusted");
    state["user_scope"] = serde_json::json!(true);
    std::fs::write(&path, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
}

fn trusted_in_state(world: &World) -> bool {
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state_file(world)).unwrap()).unwrap();
    state["trusted"] == serde_json::json!(true)
}

#[test]
fn upgrade_hands_copilots_trust_written_through_user_scope_over_to_memloop_trust() {
    let world = World::new("copilot");
    let mine = "{\n  \"trustedFolders\": [\"/srv/other\"]\n}\n";
    world.write_home(COPILOT_CONFIG, mine);
    as_an_older_memloop_left_it(&world);
    // Doctor checks Copilot's trust only where Copilot is installed.
    let bin = world.home.join("bin/copilot");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(&bin, "#!/bin/sh\necho 'GitHub Copilot CLI 1.0.102.'\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let trust_owner = |world: &World| {
        let out = world.run(&["doctor", "--format", "json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "copilot.trust-owner")
            .map(|f| f["fix"].as_str().unwrap_or_default().to_owned())
    };
    let fix = trust_owner(&world).expect("doctor names the entry an older memloop wrote");
    assert!(fix.contains("memloop upgrade"), "{fix}");
    let written = world.home_files();
    let dry = world.ok(&["upgrade", "--dry-run"]);
    assert!(dry.contains("copilot-trust-owner"), "{dry}");
    assert!(
        !trusted_in_state(&world),
        "upgrade --dry-run changed the state"
    );
    let out = world.ok(&["upgrade"]);
    assert!(out.contains("copilot-trust-owner"), "{out}");
    assert!(out.contains("~/.copilot/config.json"), "{out}");
    assert!(trusted_in_state(&world));
    assert_eq!(world.home_files(), written, "the handover rewrote a file");
    assert_eq!(trust_owner(&world), None, "doctor still points at upgrade");
    let again = world.ok(&["upgrade"]);
    assert!(again.contains("nothing to upgrade"), "{again}");
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_text(COPILOT_CONFIG), mine);
}

/// With another agent whose trust is not given yet, the handover would count as consent for
/// that agent's entries too: upgrade holds it and names `memloop trust`, which shows them.
#[test]
fn upgrade_holds_the_handover_while_another_agents_trust_is_missing() {
    let world = World::new("claude,copilot");
    world.write_home(".claude.json", "{}\n");
    let before = world.home_files();
    as_an_older_memloop_left_it(&world);
    // The older memloop wrote Copilot's entry alone: Claude's are not there.
    world.write_home(".claude.json", "{}\n");
    std::fs::remove_file(world.root.join(".claude/settings.local.json")).unwrap();
    let out = world.run(&["upgrade"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("held: memloop trust would also write ~/.claude.json"),
        "{stdout}"
    );
    assert!(!trusted_in_state(&world));
    assert_eq!(world.home_text(".claude.json"), "{}\n");
    let out = world.ok(&["trust", "--yes"]);
    assert!(out.contains("~/.claude.json"), "{out}");
    assert!(trusted_in_state(&world));
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_files(), before);
    assert!(!exists(&world.root.join(".claude/settings.local.json")));
}

const COPILOT_APPROVALS: &str = ".copilot/permissions-config.json";

/// Copilot's saved "approve for this location" answers for memloop's own two tools: written by
/// `memloop trust` under this repository's key only, beside the person's own approvals there and
/// elsewhere; `[memory] approve_tools = false` takes them back at the next sync, and revoke gives
/// the file back as it was.
#[test]
fn copilot_trust_approves_memloops_two_tools_for_this_repository_only() {
    let world = World::new("copilot");
    // Laid out as Copilot writes the file (two-space indentation, one element per line).
    let mine = format!(
        "{{\n  \"locations\": {{\n    \"{}\": {{\n      \"tool_approvals\": [\n        {{\n          \"kind\": \"write\"\n        }}\n      ]\n    }},\n    \"/elsewhere\": {{\n      \"tool_approvals\": [\n        {{\n          \"kind\": \"mcp\",\n          \"serverName\": \"memory\",\n          \"toolName\": null\n        }}\n      ]\n    }}\n  }}\n}}\n",
        world.root_str()
    );
    world.write_home(COPILOT_APPROVALS, &mine);
    world.ok(&["trust", "--yes"]);
    let config: serde_json::Value =
        serde_json::from_str(&world.home_text(COPILOT_APPROVALS)).unwrap();
    let approval =
        |tool: &str| serde_json::json!({"kind": "mcp", "serverName": "memory", "toolName": tool});
    assert_eq!(
        config["locations"][world.root_str()]["tool_approvals"],
        serde_json::json!([{"kind": "write"}, approval("context_query"), approval("memory_store")])
    );
    assert_eq!(
        config["locations"]["/elsewhere"]["tool_approvals"],
        serde_json::json!([{"kind": "mcp", "serverName": "memory", "toolName": null}]),
        "another location is the person's"
    );

    let toml_path = world.root.join("memloop.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    std::fs::write(
        &toml_path,
        format!("{toml}\n[memory]\napprove_tools = false\n"),
    )
    .unwrap();
    world.ok(&["sync"]);
    assert_eq!(world.home_text(COPILOT_APPROVALS), mine);

    std::fs::write(&toml_path, &toml).unwrap();
    world.ok(&["sync"]);
    assert!(world.home_text(COPILOT_APPROVALS).contains("memory_store"));
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_text(COPILOT_APPROVALS), mine);
}

#[test]
fn copilot_trust_without_a_config_creates_one_and_revoke_removes_it() {
    let world = World::new("copilot");
    world.ok(&["trust", "--yes"]);
    assert!(
        world
            .home_text(COPILOT_APPROVALS)
            .contains("\"toolName\": \"context_query\"")
    );
    world.ok(&["trust", "--revoke", "--yes"]);
    assert!(
        !world.home.join(COPILOT_APPROVALS).exists(),
        "revoke left the file memloop created"
    );
}

#[test]
fn copilot_trust_with_approve_tools_off_writes_no_approvals_file() {
    let world = World::new("copilot");
    let toml_path = world.root.join("memloop.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    std::fs::write(
        &toml_path,
        format!("{toml}\n[memory]\napprove_tools = false\n"),
    )
    .unwrap();
    world.ok(&["trust", "--yes"]);
    assert!(
        world.home.join(COPILOT_CONFIG).exists(),
        "the folder trust is written"
    );
    assert!(
        !world.home.join(COPILOT_APPROVALS).exists(),
        "an approvals file with nothing in it was created"
    );
}

/// An install whose `memloop trust` came from a memloop that approved no Copilot tools yet:
/// `memloop upgrade` names both missing approvals and holds them without consent to write
/// outside the repository; with `--user-scope` it writes them as trust does, a second upgrade
/// finds nothing, and revoke takes them back with the trust.
#[test]
fn copilot_upgrade_approves_the_two_tools_where_trust_came_before_approvals() {
    let world = World::new("copilot");
    let toml_path = world.root.join("memloop.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap();
    // What an older memloop left: the folder trust, and no approvals file at all.
    std::fs::write(
        &toml_path,
        format!("{toml}\n[memory]\napprove_tools = false\n"),
    )
    .unwrap();
    world.ok(&["trust", "--yes"]);
    assert!(!world.home.join(COPILOT_APPROVALS).exists());
    std::fs::write(&toml_path, &toml).unwrap();

    let out = world.run(&["upgrade"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("copilot-approve-tools"), "{stdout}");
    assert_eq!(
        stdout
            .matches("is not approved for this repository")
            .count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("held: changes ~/.copilot/permissions-config.json outside the repository"),
        "{stdout}"
    );
    assert!(
        !world.home.join(COPILOT_APPROVALS).exists(),
        "held, yet written"
    );

    world.ok(&["upgrade", "--user-scope"]);
    let config: serde_json::Value =
        serde_json::from_str(&world.home_text(COPILOT_APPROVALS)).unwrap();
    let approval =
        |tool: &str| serde_json::json!({"kind": "mcp", "serverName": "memory", "toolName": tool});
    assert_eq!(
        config["locations"][world.root_str()]["tool_approvals"],
        serde_json::json!([approval("context_query"), approval("memory_store")])
    );
    let again = world.ok(&["upgrade"]);
    assert!(!again.contains("copilot-approve-tools"), "{again}");
    let sync = world.ok(&["sync", "--dry-run"]);
    assert!(sync.contains("nothing written"), "{sync}");

    world.ok(&["trust", "--revoke", "--yes"]);
    assert!(
        !world.home.join(COPILOT_APPROVALS).exists(),
        "revoke left the approvals upgrade wrote"
    );
}

/// Where memloop trust was never given, the approvals are not upgrade's to add.
#[test]
fn copilot_upgrade_adds_no_approvals_without_trust() {
    let world = World::new("copilot");
    let out = world.ok(&["upgrade", "--user-scope"]);
    assert!(!out.contains("copilot-approve-tools"), "{out}");
    assert!(!world.home.join(COPILOT_APPROVALS).exists());
}

/// In a linked worktree (`git worktree add`) Copilot looks approvals up under the main
/// worktree's root (e2e connected-copilot-approved-tools-worktree): trust writes them there and
/// takes back the ones an earlier memloop wrote under the worktree's own path, while the folder
/// trust stays the worktree's own; revoke gives the file back as trust found it.
#[test]
fn copilot_trust_in_a_linked_worktree_approves_under_the_main_worktrees_key() {
    let world = World::new("copilot");
    let main = world.root.parent().unwrap().join("main");
    let wt_git = main.join(".git/worktrees/repo");
    std::fs::create_dir_all(&wt_git).unwrap();
    std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
    std::fs::remove_dir_all(world.root.join(".git")).unwrap();
    std::fs::write(
        world.root.join(".git"),
        format!("gitdir: {}\n", wt_git.display()),
    )
    .unwrap();
    // What an earlier memloop wrote there: the approvals under the worktree's own path.
    let approval =
        |tool: &str| serde_json::json!({"kind": "mcp", "serverName": "memory", "toolName": tool});
    let earlier = serde_json::json!({"locations": {world.root_str(): {"tool_approvals":
        [approval("context_query"), approval("memory_store")]}}});
    let earlier = serde_json::to_string_pretty(&earlier).unwrap();
    world.write_home(COPILOT_APPROVALS, &earlier);
    world.ok(&["trust", "--yes"]);
    let config: serde_json::Value =
        serde_json::from_str(&world.home_text(COPILOT_APPROVALS)).unwrap();
    assert!(
        config["locations"][world.root_str()].is_null(),
        "the approvals under the worktree's own path are taken back: {config}"
    );
    assert_eq!(
        config["locations"][main.display().to_string()]["tool_approvals"],
        serde_json::json!([approval("context_query"), approval("memory_store")])
    );
    let locations = config["locations"].as_object().unwrap();
    assert_eq!(locations.len(), 1, "{config}");
    assert!(world.home_text(COPILOT_CONFIG).contains(&world.root_str()));
    // Revoke gives the file back as trust found it.
    world.ok(&["trust", "--revoke", "--yes"]);
    assert_eq!(world.home_text(COPILOT_APPROVALS), earlier);
}

/// Without the install state, Copilot's own `trustedFolders` shows whether memloop trust was
/// given: its entry for the repository itself counts, a folder above it (the person's own
/// trust of a parent) does not.
#[test]
fn copilot_upgrade_counts_trusts_own_entry_not_a_parent_folders() {
    let world = World::new("copilot");
    let parent = world.root.parent().unwrap().display().to_string();
    world.write_home(
        COPILOT_CONFIG,
        &format!("{{\n  \"trustedFolders\": [\"{parent}\"]\n}}\n"),
    );
    let out = world.ok(&["upgrade", "--user-scope"]);
    assert!(!out.contains("copilot-approve-tools"), "{out}");
    assert!(!world.home.join(COPILOT_APPROVALS).exists());

    world.write_home(
        COPILOT_CONFIG,
        &format!("{{\n  \"trustedFolders\": [\"{}\"]\n}}\n", world.root_str()),
    );
    let out = world.ok(&["upgrade", "--user-scope"]);
    assert!(out.contains("copilot-approve-tools"), "{out}");
    assert!(
        world
            .home_text(COPILOT_APPROVALS)
            .contains("\"toolName\": \"memory_store\"")
    );
}
