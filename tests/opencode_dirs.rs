#![cfg(unix)]

//! A repository keeping its OpenCode config in `.opencode/` (`opencode.json` or `opencode.jsonc`):
//! memloop writes its server there, never a second root `opencode.json`, and doctor, diff and
//! uninstall look at the same file. (The bytes written are in `tests/cases/opencode-dot-*`.)

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn memloop(root: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(args)
        .current_dir(root)
        .env_clear()
        .env("HOME", home)
        .env("PATH", home.join("bin"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn check(name: &str, text: &str) {
    let temp = tempfile::tempdir().unwrap();
    let (root, home) = (temp.path().join("repo"), temp.path().join("home"));
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join(".opencode")).unwrap();
    std::fs::create_dir_all(home.join("bin")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memloop"), home.join("bin/memloop")).unwrap();
    let config = root.join(".opencode").join(name);
    std::fs::write(&config, text).unwrap();

    let init = memloop(&root, &home, &["init", "--yes", "--agents", "opencode"]);
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    assert!(
        !root.join("opencode.json").exists(),
        "a root opencode.json was created"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.contains("\"memory\""), "{written}");

    let doctor = memloop(&root, &home, &["doctor", "--verbose"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(
        report.contains(&format!(".opencode/{name}:"))
            && report.contains("`mcp.memory` is current"),
        "{report}"
    );
    let diff = memloop(&root, &home, &["diff"]);
    assert!(
        diff.status.success(),
        "diff found drift: {}",
        String::from_utf8_lossy(&diff.stdout)
    );

    // The entry taken out by hand is drift, reported against the same file.
    std::fs::write(&config, text).unwrap();
    let diff = memloop(&root, &home, &["diff"]);
    assert_eq!(diff.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&diff.stdout).contains(&format!(".opencode/{name}")));
    let sync = memloop(&root, &home, &["sync"]);
    assert!(sync.status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), written);

    let uninstall = memloop(&root, &home, &["uninstall", "--yes"]);
    assert!(uninstall.status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    assert!(!root.join("opencode.json").exists());
}

#[test]
fn dot_opencode_json_is_the_file_memloop_keeps() {
    check(
        "opencode.json",
        "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"model\": \"openai/gpt-5\"\n}\n",
    );
}

#[test]
fn dot_opencode_jsonc_is_the_file_memloop_keeps() {
    check(
        "opencode.jsonc",
        "// team config\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"theme\": \"dark\", // mine\n}\n",
    );
}
