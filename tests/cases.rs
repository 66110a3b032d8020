//! Installer cases as data, in the style of cargo-add's tests: each folder in `tests/cases/`
//! holds `case.toml` (the command and its expected exit code), `in/` (the starting files:
//! `repo/` and optionally `home/`) and `out/` (the expected files afterwards; absent when the
//! command must leave everything untouched).
//!
//! Every successful case also checks two properties: a second `memloop sync` changes nothing,
//! and `memloop uninstall --yes` gives back the `in/` tree byte for byte.
//!
//! `MEMLOOP_BLESS=1 cargo test --test cases` rewrites `out/` from the actual result; review the diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File(Vec<u8>),
    Link(PathBuf),
}

/// Every file and symlink under `dir`, by relative path (skipping `.git` and memloop's state).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(base).unwrap().to_path_buf();
        if rel == Path::new(".git") || rel == Path::new(".local") {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            out.insert(rel, Entry::Link(std::fs::read_link(&path).unwrap()));
        } else if meta.is_dir() {
            walk(base, &path, out);
        } else {
            out.insert(rel, Entry::File(std::fs::read(&path).unwrap()));
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (rel, entry) in snapshot(from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        match entry {
            Entry::File(bytes) => std::fs::write(&dest, bytes).unwrap(),
            Entry::Link(target) => std::os::unix::fs::symlink(target, &dest).unwrap(),
        }
    }
}

struct Sandbox {
    _temp: tempfile::TempDir,
    repo: PathBuf,
    home: PathBuf,
    bin: PathBuf,
}

impl Sandbox {
    fn new(case: &Path) -> Sandbox {
        let temp = tempfile::tempdir().unwrap();
        let (repo, home, bin) = (
            temp.path().join("repo"),
            temp.path().join("home"),
            temp.path().join("bin"),
        );
        copy_tree(&case.join("in/repo"), &repo);
        copy_tree(&case.join("in/home"), &home);
        copy_tree(&case.join("in/bin"), &bin);
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        #[cfg(unix)]
        for entry in std::fs::read_dir(&bin).unwrap() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                entry.unwrap().path(),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap();
        }
        Sandbox {
            _temp: temp,
            repo,
            home,
            bin,
        }
    }

    fn run(&self, args: &[String], env: &BTreeMap<String, String>) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_memloop"))
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.bin)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1")
            .envs(env)
            .output()
            .unwrap()
    }
}

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
}

fn describe(map: &BTreeMap<PathBuf, Entry>, other: &BTreeMap<PathBuf, Entry>) -> String {
    let mut lines = Vec::new();
    for (path, entry) in map {
        match (entry, other.get(path)) {
            (_, None) => lines.push(format!("  only in actual: {}", path.display())),
            (a, Some(b)) if a != b => {
                let show = |e: &Entry| match e {
                    Entry::File(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                    Entry::Link(target) => format!("(symlink to {})", target.display()),
                };
                lines.push(format!(
                    "  differs: {}\n--- expected\n{}\n--- actual\n{}",
                    path.display(),
                    show(b),
                    show(a)
                ));
            }
            _ => {}
        }
    }
    for path in other.keys().filter(|p| !map.contains_key(*p)) {
        lines.push(format!("  missing from actual: {}", path.display()));
    }
    lines.join("\n")
}

/// `out/` trees hold this line instead of the OpenCode plugin, which has its own tests.
const PLUGIN_MARKER: &[u8] = b"[the OpenCode gate plugin from assets/]\n";

fn expand_plugin(tree: &mut BTreeMap<PathBuf, Entry>) {
    for entry in tree.values_mut() {
        if matches!(entry, Entry::File(bytes) if bytes == PLUGIN_MARKER) {
            *entry = Entry::File(memloop::gate::OPENCODE_PLUGIN.as_bytes().to_vec());
        }
    }
}

fn check_tree(label: &str, actual: &Path, expected: &Path, failures: &mut Vec<String>) {
    let (got, mut want) = (snapshot(actual), snapshot(expected));
    expand_plugin(&mut want);
    if got != want {
        failures.push(format!("{label}:\n{}", describe(&got, &want)));
    }
}

fn run_case(case: &Path) -> Vec<String> {
    let spec: CaseFile =
        toml_edit::de::from_str(&std::fs::read_to_string(case.join("case.toml")).unwrap()).unwrap();
    let sandbox = Sandbox::new(case);
    let output = sandbox.run(&spec.args, &spec.env);
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
        let plugin = case.join("out/repo/.opencode/plugins/memloop.js");
        if plugin.exists() {
            std::fs::write(plugin, PLUGIN_MARKER).unwrap();
        }
        let mut home = snapshot(&sandbox.home);
        home.retain(|rel, _| !rel.starts_with(".local"));
        if !home.is_empty() {
            copy_tree(&sandbox.home, &case.join("out/home"));
            let _ = std::fs::remove_dir_all(case.join("out/home/.local"));
        }
        return failures;
    }
    check_tree(
        "repo after the command",
        &sandbox.repo,
        &out_dir.join("repo"),
        &mut failures,
    );
    check_tree(
        "home after the command",
        &sandbox.home,
        &out_dir.join("home"),
        &mut failures,
    );
    if spec.status != 0 || !failures.is_empty() || !case.join("out").exists() {
        return failures;
    }

    let again = sandbox.run(&["sync".into()], &spec.env);
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
        &mut failures,
    );
    check_tree(
        "home after a second sync",
        &sandbox.home,
        &out_dir.join("home"),
        &mut failures,
    );

    if spec.uninstall_without_state {
        std::fs::remove_dir_all(sandbox.home.join(".local/state/memloop/installs")).unwrap();
    }
    let removed = sandbox.run(&["uninstall".into(), "--yes".into()], &spec.env);
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
        &mut failures,
    );
    failures
}

#[test]
fn cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.toml").exists())
        .collect();
    names.sort();
    assert!(
        names.len() >= 30,
        "expected at least 30 cases, found {}",
        names.len()
    );
    let mut report = Vec::new();
    for case in &names {
        let failures = run_case(case);
        if !failures.is_empty() {
            report.push(format!(
                "=== {}\n{}",
                case.file_name().unwrap().to_string_lossy(),
                failures.join("\n")
            ));
        }
    }
    assert!(
        report.is_empty(),
        "{} of {} cases failed:\n{}",
        report.len(),
        names.len(),
        report.join("\n\n")
    );
}
