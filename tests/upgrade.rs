//! `memloop upgrade` cases as data: each folder in `tests/upgrade/` holds `case.toml`, `in/`
//! (`repo/`, optionally `home/` and `bin/` with fake agent programs printing a version) and
//! `out/` (the expected files; absent when the upgrade must change nothing).
//!
//! Every case also checks, in order:
//! - idempotent: a second `memloop upgrade` finds nothing and changes nothing;
//! - already applied: `memloop upgrade` on a fresh copy of `out/` finds nothing;
//! - sync agrees (unless `sync_agrees = false`): `memloop sync` afterwards leaves every file the
//!   upgrade wrote as it is (it may add files of its own), so the two never undo each other;
//! - doctor is clean: in a fresh copy of `in/`, after the upgrade and what completes the install
//!   (`memloop sync`, `memloop trust --yes`, every agent installed), `memloop doctor` reports no
//!   error, so nothing a migration found is left for doctor to complain about. An error upgrade
//!   cannot fix (a user's entry it must not guess at) is named in `doctor_errors`, and must then
//!   be reported.
//!
//! (tests/cases.rs does not fit: its `in/` trees are pre-memloop states that uninstall must give
//! back, while an upgrade's `in/` is an older memloop's output, which must not come back.)
//!
//! `MEMLOOP_BLESS=1 cargo test --test upgrade` rewrites existing `out/` folders from the actual
//! result; review the diff before committing it.

mod harness;
mod trees;

use std::path::Path;
use std::process::{Command, Output};

use trees::{Entry, Sandbox, Tree, collapse_plugin, copy_tree, describe, expand_plugin, snapshot};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    #[serde(default = "default_args")]
    args: Vec<String>,
    #[serde(default)]
    status: i32,
    #[serde(default)]
    stdout_contains: Vec<String>,
    #[serde(default)]
    stdout_lacks: Vec<String>,
    #[serde(default)]
    stderr_contains: Vec<String>,
    #[serde(default = "yes")]
    sync_agrees: bool,
    /// The ids of the errors `memloop doctor` still reports after the upgrade and sync.
    #[serde(default)]
    doctor_errors: Vec<String>,
    /// After the upgrade (and sync), `memloop uninstall --yes` leaves `after-uninstall/`:
    /// memloop's parts go, the user's bytes stay, and no older memloop's output comes back.
    #[serde(default)]
    uninstall: bool,
    /// Where the expected output comes from when no real program could be run (OpenCode 2).
    #[serde(default)]
    #[allow(dead_code)]
    based_on: Option<String>,
}

fn default_args() -> Vec<String> {
    vec!["upgrade".into()]
}

fn yes() -> bool {
    true
}

fn check(label: &str, got: &Tree, want: &Tree, failures: &mut Vec<String>) {
    if got != want {
        failures.push(format!("{label}:\n{}", describe(got, want)));
    }
}

fn expected(dir: &Path, sandbox_repo: &Path) -> (Tree, Tree) {
    let mut repo = snapshot(&dir.join("repo"));
    expand_plugin(&mut repo);
    let mut home = snapshot(&dir.join("home"));
    trees::expand_repo(&mut home, sandbox_repo);
    (repo, home)
}

fn output_text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `memloop upgrade` again and expects it to find and change nothing.
fn expect_nothing(label: &str, sandbox: &Sandbox, args: &[String], failures: &mut Vec<String>) {
    let before = sandbox.trees();
    let out = sandbox.run(args);
    let (stdout, stderr) = output_text(&out);
    if !out.status.success() || !stdout.contains("nothing to upgrade") {
        failures.push(format!(
            "{label}: expected `nothing to upgrade` and exit 0, got {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status.code()
        ));
    }
    let after = sandbox.trees();
    check(&format!("{label} (repo)"), &after.0, &before.0, failures);
    check(&format!("{label} (home)"), &after.1, &before.1, failures);
}

fn run_case(case: &Path) -> Vec<String> {
    let spec: CaseFile =
        toml_edit::de::from_str(&std::fs::read_to_string(case.join("case.toml")).unwrap())
            .unwrap_or_else(|err| panic!("{}: {err}", case.display()));
    let sandbox = Sandbox::new(&case.join("in"), &case.join("in"));
    let before = sandbox.trees();
    let output = sandbox.run(&spec.args);
    let (stdout, stderr) = output_text(&output);
    let mut failures = Vec::new();
    if output.status.code() != Some(spec.status) {
        failures.push(format!(
            "exit code {:?}, expected {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            output.status.code(),
            spec.status
        ));
    }
    for needle in &spec.stdout_contains {
        if !stdout.contains(needle.as_str()) {
            failures.push(format!("stdout lacks {needle:?}:\n{stdout}"));
        }
    }
    for needle in &spec.stdout_lacks {
        if stdout.contains(needle.as_str()) {
            failures.push(format!("stdout has {needle:?}:\n{stdout}"));
        }
    }
    for needle in &spec.stderr_contains {
        if !stderr.contains(needle.as_str()) {
            failures.push(format!("stderr lacks {needle:?}:\n{stderr}"));
        }
    }
    let has_out = case.join("out").exists();
    if std::env::var_os("MEMLOOP_BLESS").is_some() && has_out {
        std::fs::remove_dir_all(case.join("out")).unwrap();
        copy_tree(&sandbox.repo, &case.join("out/repo"));
        collapse_plugin(&case.join("out/repo"));
        if !snapshot(&sandbox.home).is_empty() {
            copy_tree(&sandbox.home, &case.join("out/home"));
            trees::collapse_repo(&case.join("out/home"), &sandbox.repo);
        }
    }
    let after = sandbox.trees();
    let (want_repo, want_home) = if has_out {
        expected(&case.join("out"), &sandbox.repo)
    } else {
        before.clone()
    };
    check("repo after upgrade", &after.0, &want_repo, &mut failures);
    check("home after upgrade", &after.1, &want_home, &mut failures);
    if spec.status != 0 || !failures.is_empty() {
        return failures;
    }

    if spec.args.iter().any(|a| a == "--dry-run") {
        return failures;
    }
    expect_nothing("a second upgrade", &sandbox, &spec.args, &mut failures);
    if has_out {
        let applied = Sandbox::new(&case.join("out"), &case.join("in"));
        let mut repo = snapshot(&applied.repo);
        expand_plugin(&mut repo);
        for (rel, entry) in repo {
            if let Entry::File(bytes) = entry {
                std::fs::write(applied.repo.join(rel), bytes).unwrap();
            }
        }
        expect_nothing(
            "upgrade of out/ (already applied)",
            &applied,
            &spec.args,
            &mut failures,
        );
    }

    if spec.sync_agrees && has_out {
        let out = sandbox.run(&sync_args(&spec));
        if !out.status.success() {
            let (stdout, stderr) = output_text(&out);
            failures.push(format!(
                "sync after the upgrade failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
            ));
        }
        let synced = sandbox.trees();
        for (label, upgraded, original, now) in [
            ("repo", &after.0, &before.0, &synced.0),
            ("home", &after.1, &before.1, &synced.1),
        ] {
            for (path, entry) in upgraded {
                if original.get(path) != Some(entry) && now.get(path) != Some(entry) {
                    failures.push(format!(
                        "sync changed {label}/{} after the upgrade wrote it:\n{}",
                        path.display(),
                        describe(now, upgraded)
                    ));
                }
            }
            for path in original.keys() {
                if !upgraded.contains_key(path) && now.contains_key(path) {
                    failures.push(format!(
                        "sync brought back {label}/{}, which the upgrade removed",
                        path.display()
                    ));
                }
            }
        }
    }
    doctor_is_clean(case, &spec, &mut failures);
    if spec.uninstall {
        let out = sandbox.run(&["uninstall", "--yes"]);
        if !out.status.success() {
            let (stdout, stderr) = output_text(&out);
            failures.push(format!(
                "uninstall after the upgrade failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
            ));
        }
        let dir = case.join("after-uninstall");
        if std::env::var_os("MEMLOOP_BLESS").is_some() {
            let _ = std::fs::remove_dir_all(&dir);
            copy_tree(&sandbox.repo, &dir.join("repo"));
            copy_tree(&sandbox.home, &dir.join("home"));
        } else {
            let (repo, home) = sandbox.trees();
            check(
                "repo after uninstall",
                &repo,
                &snapshot(&dir.join("repo")),
                &mut failures,
            );
            check(
                "home after uninstall",
                &home,
                &snapshot(&dir.join("home")),
                &mut failures,
            );
        }
    }
    failures
}

/// `memloop sync`, with the user scope when the upgrade had it.
fn sync_args(spec: &CaseFile) -> Vec<String> {
    let mut sync = vec!["sync".to_owned()];
    if spec.args.iter().any(|a| a == "--user-scope") {
        sync.push("--user-scope".into());
    }
    sync
}

/// What the agents' programs answer to `--version` at the versions the e2e pins
/// (xtask/src/e2e/tools.rs, AGENTS).
const CURRENT_AGENTS: [(&str, &str); 7] = [
    ("claude", "2.1.332 (Claude Code)"),
    ("opencode", "1.18.33"),
    ("kimi", "2.1.0"),
    ("codex", "codex-cli 0.171.0"),
    ("gemini", "0.61.0"),
    ("qwen", "0.24.4"),
    ("copilot", "GitHub Copilot CLI 1.0.102."),
];

/// In a fresh copy of the case's `in/`: the upgrade, then what completes the install (`memloop
/// sync`, `memloop trust --yes`), then `memloop doctor` reports exactly the errors the case
/// names in `doctor_errors`.
fn doctor_is_clean(case: &Path, spec: &CaseFile, failures: &mut Vec<String>) {
    let sandbox = Sandbox::new(&case.join("in"), &case.join("in"));
    // Doctor checks that the hooks' `memloop` is on PATH: the one under test is. It reads an
    // agent's user files only when the agent is installed: one the case has no program for is
    // added after the upgrade, at a current version, which is what upgrade assumed for it (a
    // missing agent counts as the newest for every migration but opencode-v2-config, which
    // then does not apply on 1.x).
    let mut steps = vec![spec.args.clone()];
    steps.push(sync_args(spec));
    steps.push(vec!["trust".into(), "--yes".into()]);
    for (index, args) in steps.iter().enumerate() {
        if index == 1 {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memloop"), sandbox.bin.join("memloop"))
                .unwrap();
            for (program, version) in CURRENT_AGENTS {
                let path = sandbox.bin.join(program);
                if !path.exists() {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::write(&path, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                }
            }
        }
        let out = sandbox.run(args);
        if !out.status.success() {
            let (stdout, stderr) = output_text(&out);
            failures.push(format!(
                "`memloop {}` on the way to doctor failed:\nstdout:\n{stdout}\nstderr:\n{stderr}",
                args.join(" ")
            ));
            return;
        }
    }
    let out = sandbox.run(&["doctor", "--format", "json"]);
    let report: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(report) => report,
        Err(err) => {
            let (stdout, stderr) = output_text(&out);
            failures.push(format!(
                "doctor after the upgrade gave no JSON report ({err}):\nstdout:\n{stdout}\nstderr:\n{stderr}"
            ));
            return;
        }
    };
    let errors: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] == "error")
        .collect();
    for error in &errors {
        let id = error["id"].as_str().unwrap_or_default();
        if !spec.doctor_errors.iter().any(|e| e == id) {
            failures.push(format!(
                "doctor reports an error after the upgrade, sync and trust: {id} {}: {}",
                error["file"], error["message"]
            ));
        }
    }
    for id in &spec.doctor_errors {
        if !errors.iter().any(|e| e["id"] == id.as_str()) {
            failures.push(format!(
                "doctor_errors names {id}, but doctor no longer reports it after the upgrade: remove it from case.toml"
            ));
        }
    }
}

/// Every migration id has at least one case that applies it (named in `stdout_contains`) and
/// writes, so the doctor-is-clean step has run after it.
fn every_migration_has_a_case_that_applies_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade");
    let mut specs = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if !path.join("out").exists() {
            continue;
        }
        let spec: CaseFile =
            toml_edit::de::from_str(&std::fs::read_to_string(path.join("case.toml")).unwrap())
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        if spec.status == 0 && !spec.args.iter().any(|a| a == "--dry-run") {
            specs.push(spec.stdout_contains.join("\n"));
        }
    }
    for migration in memloop::agents::migrations() {
        assert!(
            specs.iter().any(|s| s.lines().any(|l| l == migration.id)),
            "no case in tests/upgrade/ applies {} (and writes, so doctor runs after it)",
            migration.id
        );
    }
}

fn list_names_every_migration_with_its_range() {
    let out = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(["upgrade", "--list"])
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    for migration in memloop::agents::migrations() {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(migration.id))
            .unwrap_or_else(|| panic!("--list lacks {}:\n{stdout}", migration.id));
        assert!(line.contains(&migration.range.to_string()), "{line}");
    }
}

/// One case: its failures joined, if any.
fn case(dir: &Path) -> Result<(), String> {
    let failures = run_case(dir);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

fn main() {
    harness::run(
        "upgrade",
        20,
        case,
        &[
            (
                "every_migration_has_a_case_that_applies_it",
                every_migration_has_a_case_that_applies_it,
            ),
            (
                "list_names_every_migration_with_its_range",
                list_names_every_migration_with_its_range,
            ),
        ],
    );
}
