//! Installer cases as data, in the style of cargo-add's tests: each folder in `tests/cases/`
//! holds `case.toml` (the command and its expected exit code), `in/` (the starting files:
//! `repo/` and optionally `home/`) and `out/` (the expected files afterwards; absent when the
//! command must leave everything untouched). With `setup`, commands run first and `edit/` is
//! written over their result (a user's change after an install) before the command.
//!
//! Every successful case also checks three properties: a second `memloop sync` changes nothing,
//! `memloop uninstall --yes` gives back the `in/` tree byte for byte, and a second uninstall
//! changes nothing.
//!
//! `MEMLOOP_BLESS=1 cargo test --test cases` rewrites `out/` from the actual result; review the diff.

mod harness;
mod trees;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trees::{Sandbox, collapse_plugin, copy_tree, describe, expand_plugin, snapshot};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    args: Vec<String>,
    #[serde(default)]
    status: i32,
    #[serde(default)]
    stdout_contains: Vec<String>,
    #[serde(default)]
    stderr_contains: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Forget what memloop recorded on this machine before uninstalling, so it must remove its
    /// fragments surgically (a fresh clone, another machine).
    #[serde(default)]
    uninstall_without_state: bool,
    /// FIFOs to make before the run, relative to `in/` (`repo/.mcp.json`): git cannot hold them.
    #[serde(default)]
    fifos: Vec<String>,
    /// Commands run first (each must succeed), after which the files in `edit/` (`repo/`,
    /// `home/`) are written over the result: what a user changed after an install.
    #[serde(default)]
    setup: Vec<Vec<String>>,
}

/// `specials` are the FIFOs the case made under `actual` (relative paths): expected to stay.
fn check_tree(
    label: &str,
    actual: &Path,
    expected: &Path,
    specials: &[PathBuf],
    failures: &mut Vec<String>,
) {
    let (got, mut want) = (snapshot(actual), snapshot(expected));
    expand_plugin(&mut want);
    if let Some(repo) = actual.parent().map(|p| p.join("repo")) {
        trees::expand_repo(&mut want, &repo);
    }
    for special in specials {
        want.insert(special.clone(), trees::Entry::Special);
    }
    if got != want {
        failures.push(format!("{label}:\n{}", describe(&got, &want)));
    }
}

fn run_case(case: &Path) -> Vec<String> {
    let spec: CaseFile =
        toml_edit::de::from_str(&std::fs::read_to_string(case.join("case.toml")).unwrap()).unwrap();
    let sandbox = Sandbox::new(&case.join("in"), &case.join("in"));
    let (mut repo_fifos, mut home_fifos) = (Vec::new(), Vec::new());
    for fifo in &spec.fifos {
        let (scope, rel) = fifo
            .split_once('/')
            .expect("a fifo path starts with repo/ or home/");
        let (base, list) = match scope {
            "repo" => (&sandbox.repo, &mut repo_fifos),
            "home" => (&sandbox.home, &mut home_fifos),
            other => panic!("a fifo path starts with repo/ or home/, not {other}/"),
        };
        trees::make_fifo(&base.join(rel));
        list.push(PathBuf::from(rel));
    }
    for step in &spec.setup {
        let out = sandbox.run_with(step, &spec.env);
        if !out.status.success() {
            return vec![format!(
                "setup step {step:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )];
        }
    }
    if case.join("edit").exists() {
        for (scope, base) in [("repo", &sandbox.repo), ("home", &sandbox.home)] {
            let from = case.join("edit").join(scope);
            if from.exists() {
                copy_tree(&from, base);
            }
        }
    }
    let output = sandbox.run_with(&spec.args, &spec.env);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
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
    for needle in &spec.stderr_contains {
        if !stderr.contains(needle.as_str()) {
            failures.push(format!("stderr lacks {needle:?}:\n{stderr}"));
        }
    }
    let out_dir = if case.join("out").exists() {
        case.join("out")
    } else {
        case.join("in")
    };
    if std::env::var_os("MEMLOOP_BLESS").is_some() && case.join("out").exists() {
        std::fs::remove_dir_all(case.join("out")).unwrap();
        copy_tree(&sandbox.repo, &case.join("out/repo"));
        collapse_plugin(&case.join("out/repo"));
        let mut home = snapshot(&sandbox.home);
        home.retain(|rel, _| !rel.starts_with(".local"));
        if !home.is_empty() {
            copy_tree(&sandbox.home, &case.join("out/home"));
            let _ = std::fs::remove_dir_all(case.join("out/home/.local"));
            trees::collapse_repo(&case.join("out/home"), &sandbox.repo);
        }
        return failures;
    }
    check_tree(
        "repo after the command",
        &sandbox.repo,
        &out_dir.join("repo"),
        &repo_fifos,
        &mut failures,
    );
    check_tree(
        "home after the command",
        &sandbox.home,
        &out_dir.join("home"),
        &home_fifos,
        &mut failures,
    );
    if spec.status != 0 || !failures.is_empty() || !case.join("out").exists() {
        return failures;
    }

    let again = sandbox.run_with(&["sync"], &spec.env);
    if !again.status.success() {
        failures.push(format!(
            "second sync failed: {}",
            String::from_utf8_lossy(&again.stderr)
        ));
    }
    check_tree(
        "repo after a second sync",
        &sandbox.repo,
        &out_dir.join("repo"),
        &repo_fifos,
        &mut failures,
    );
    check_tree(
        "home after a second sync",
        &sandbox.home,
        &out_dir.join("home"),
        &home_fifos,
        &mut failures,
    );

    if spec.uninstall_without_state {
        std::fs::remove_dir_all(sandbox.home.join(".local/state/memloop/installs")).unwrap();
    }
    let removed = sandbox.run_with(&["uninstall", "--yes"], &spec.env);
    if !removed.status.success() {
        failures.push(format!(
            "uninstall failed: {}",
            String::from_utf8_lossy(&removed.stderr)
        ));
    }
    let mut repo_after = snapshot(&sandbox.repo);
    repo_after.remove(Path::new("memloop.toml"));
    // An install that memloop did not record on this machine is removed surgically; such cases
    // say what is left in `after-uninstall/` (absent: nothing is left).
    let restored = if spec.uninstall_without_state {
        case.join("after-uninstall")
    } else {
        case.join("in")
    };
    let mut repo_before = snapshot(&restored.join("repo"));
    repo_before.remove(Path::new("memloop.toml"));
    if repo_after != repo_before {
        failures.push(format!(
            "uninstall did not restore the files:\n{}",
            describe(&repo_after, &repo_before)
        ));
    }
    check_tree(
        "home after uninstall",
        &sandbox.home,
        &restored.join("home"),
        &home_fifos,
        &mut failures,
    );

    // A second uninstall on the same machine finds nothing of memloop's: it changes nothing,
    // whatever the user's own files hold.
    let (repo_once, home_once) = (snapshot(&sandbox.repo), snapshot(&sandbox.home));
    let twice = sandbox.run_with(&["uninstall", "--yes"], &spec.env);
    if !twice.status.success() {
        failures.push(format!(
            "second uninstall failed: {}",
            String::from_utf8_lossy(&twice.stderr)
        ));
    }
    if snapshot(&sandbox.repo) != repo_once {
        failures.push(format!(
            "a second uninstall changed the repository:\n{}",
            describe(&snapshot(&sandbox.repo), &repo_once)
        ));
    }
    let mut home_twice = snapshot(&sandbox.home);
    let mut home_once = home_once;
    // memloop's own state may note the second run; the user's files may not change.
    home_twice.retain(|rel, _| !rel.starts_with(".local"));
    home_once.retain(|rel, _| !rel.starts_with(".local"));
    if home_twice != home_once {
        failures.push(format!(
            "a second uninstall changed the home folder:\n{}",
            describe(&home_twice, &home_once)
        ));
    }
    failures
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
    harness::run("cases", 30, case, &[]);
}
