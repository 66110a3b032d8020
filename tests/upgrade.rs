//! `memloop upgrade` cases as data: each folder in `tests/upgrade/` holds `case.toml`, `in/`
//! (`repo/`, optionally `home/` and `bin/` with fake agent programs printing a version) and
//! `out/` (the expected files; absent when the upgrade must change nothing).
//!
//! Every case also checks, in order:
//! - idempotent: a second `memloop upgrade` finds nothing and changes nothing;
//! - already applied: `memloop upgrade` on a fresh copy of `out/` finds nothing;
//! - sync agrees (unless `sync_agrees = false`): `memloop sync` afterwards leaves every file the
//!   upgrade wrote as it is (it may add files of its own), so the two never undo each other.
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
        let mut sync = vec!["sync".to_owned()];
        if spec.args.iter().any(|a| a == "--user-scope") {
            sync.push("--user-scope".into());
        }
        let out = sandbox.run(&sync);
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
    if spec.uninstall {
        let out = sandbox.run(&["uninstall".into(), "--yes".into()]);
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

/// Every migration id has at least one case that applies it (named in `stdout_contains`).
fn every_migration_has_a_case_that_applies_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade");
    let mut specs = String::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.join("out").exists() {
            specs.push_str(&std::fs::read_to_string(path.join("case.toml")).unwrap());
        }
    }
    for migration in memloop::agents::migrations() {
        assert!(
            specs.contains(&format!("\"{}\"", migration.id)),
            "no case in tests/upgrade/ applies {}",
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
