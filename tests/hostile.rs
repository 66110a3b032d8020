//! memloop against hostile trees and racing writers, with the real binary: links swapped in
//! after an install, an agent rewriting its config during many syncs, other memloops holding the
//! lock, a umask of 077, a repository path that is not UTF-8.

mod trees;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use trees::{Sandbox, run_bounded, snapshot};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn run(sandbox: &Sandbox, list: &[&str]) -> Output {
    sandbox.run(&args(list))
}

fn ok(sandbox: &Sandbox, list: &[&str]) -> Output {
    let out = run(sandbox, list);
    assert!(
        out.status.success(),
        "memloop {list:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// memloop's command for `sandbox`, for tests that spawn it themselves.
fn command(sandbox: &Sandbox, list: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memloop"));
    command
        .args(list)
        .current_dir(&sandbox.repo)
        .env_clear()
        .env("HOME", &sandbox.home)
        .env("PATH", &sandbox.bin)
        .env("XDG_STATE_HOME", sandbox.home.join(".local/state"))
        .env("NO_COLOR", "1");
    command
}

fn quiet(mut command: Command) -> Command {
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

fn lock_file(sandbox: &Sandbox) -> PathBuf {
    let installs = sandbox.home.join(".local/state/memloop/installs");
    std::fs::read_dir(&installs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "lock"))
        .expect("a lock file after a sync")
}

// ---- class 1: links swapped in after the install -------------------------------------------

#[test]
fn uninstall_never_deletes_through_a_folder_link_swapped_in_after_install() {
    let s = Sandbox::empty();
    ok(&s, &["init", "--yes", "--agents", "claude,opencode"]);
    // The user moves .claude and .opencode out of the repository and links them back.
    let outside = s.home.join("moved");
    std::fs::create_dir_all(&outside).unwrap();
    for name in [".claude", ".opencode"] {
        std::fs::rename(s.repo.join(name), outside.join(name)).unwrap();
        std::os::unix::fs::symlink(outside.join(name), s.repo.join(name)).unwrap();
    }
    let before = snapshot(&outside);
    let out = run(&s, &["uninstall", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("leaves the repository"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        snapshot(&outside),
        before,
        "uninstall touched files outside"
    );

    // The same when memloop.toml no longer names the agent: the forgotten file stays.
    write(&s.repo.join("memloop.toml"), "agents = [\"claude\"]\n");
    std::fs::remove_file(s.repo.join(".claude")).unwrap();
    std::fs::rename(outside.join(".claude"), s.repo.join(".claude")).unwrap();
    let before = snapshot(&outside);
    let out = ok(&s, &["uninstall", "--yes"]);
    assert!(stderr(&out).contains("left as it is"), "{}", stderr(&out));
    assert_eq!(
        snapshot(&outside),
        before,
        "uninstall touched files outside"
    );
    assert!(!s.repo.join(".claude/settings.json").exists());
}

// ---- class 2: an agent rewriting its config while memloop works ----------------------------

const FOREIGN: [&str; 3] = ["model", "permissions", "env"];

/// The agent's rewrite: read, change one value, write back (keeping memloop's hook when there).
fn agent_version(current: &str, counter: usize) -> String {
    let mut value: serde_json::Value = serde_json::from_str(current).unwrap_or_else(
        |_| serde_json::json!({"model": "opus", "permissions": {"allow": ["Bash(ls)"]}, "env": {}}),
    );
    value["env"]["REWRITES"] = serde_json::json!(counter.to_string());
    let mut text = serde_json::to_string_pretty(&value).unwrap();
    text.push('\n');
    text
}

#[test]
fn syncs_racing_an_agent_that_rewrites_its_settings_never_lose_its_keys() {
    let s = Sandbox::empty();
    write(&s.repo.join("memloop.toml"), "agents = [\"claude\"]\n");
    let settings = s.repo.join(".claude/settings.json");
    write(&settings, &agent_version("", 0));
    let stop = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(Mutex::new(Vec::<String>::new()));
    let rewrites = Arc::new(AtomicUsize::new(0));

    let writer = {
        let (stop, path, rewrites) = (stop.clone(), settings.clone(), rewrites.clone());
        std::thread::spawn(move || {
            use std::io::Write as _;
            let mut counter = 0;
            while !stop.load(Ordering::Relaxed) {
                counter += 1;
                let current = std::fs::read_to_string(&path).unwrap_or_default();
                let next = agent_version(&current, counter);
                if counter % 2 == 0 {
                    // Atomic replace: a temporary file renamed over the settings.
                    let temp = path.with_file_name(format!(".settings.json.agent{counter}"));
                    std::fs::write(&temp, &next).unwrap();
                    std::fs::rename(&temp, &path).unwrap();
                } else {
                    // In place: truncate, a moment of an empty file, then write.
                    let mut file = std::fs::File::create(&path).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    file.write_all(next.as_bytes()).unwrap();
                }
                rewrites.fetch_add(1, Ordering::Relaxed);
                // Agents write in bursts: the quiet spells let some syncs through however
                // slow a loaded machine makes them, so both outcomes are exercised.
                let pause = if counter % 8 == 0 { 80 } else { 3 };
                std::thread::sleep(std::time::Duration::from_millis(pause));
            }
        })
    };
    // Every complete version of the file anyone can see must hold the agent's keys; the empty
    // moments of the agent's own in-place writes are not versions.
    let observer = {
        let (stop, path, violations) = (stop.clone(), settings.clone(), violations.clone());
        std::thread::spawn(move || {
            let mut seen = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let Ok(serde_json::Value::Object(map)) = serde_json::from_str(&text) else {
                    continue;
                };
                seen += 1;
                if let Some(key) = FOREIGN.iter().find(|k| !map.contains_key(**k)) {
                    violations
                        .lock()
                        .unwrap()
                        .push(format!("`{key}` missing from:\n{text}"));
                }
            }
            seen
        })
    };

    let (mut succeeded, mut lost, mut empty) = (0, 0, 0);
    for _ in 0..60 {
        let out = run(&s, &["sync"]);
        let err = stderr(&out);
        match out.status.code() {
            Some(0) => succeeded += 1,
            Some(2) if err.contains("changed while memloop was writing; run again") => lost += 1,
            Some(2) if err.contains("is empty; memloop never takes an empty file") => empty += 1,
            code => panic!("sync exited {code:?}:\n{err}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let versions_seen = observer.join().unwrap();
    let violations = violations.lock().unwrap();
    assert!(
        violations.is_empty(),
        "{} versions lost the agent's keys; the first: {}",
        violations.len(),
        violations[0]
    );
    eprintln!(
        "60 syncs against {} rewrites: {succeeded} wrote, {lost} lost the race, {empty} saw an empty file; {versions_seen} versions checked",
        rewrites.load(Ordering::Relaxed)
    );
    assert!(
        succeeded > 0,
        "no sync got through: the test proves nothing"
    );
    // Once the agent is quiet, a sync completes with every key and memloop's hook.
    ok(&s, &["sync"]);
    let text = std::fs::read_to_string(&settings).unwrap();
    for key in FOREIGN {
        assert!(text.contains(&format!("\"{key}\"")), "{text}");
    }
    assert!(text.contains("memloop hook stop --agent claude"), "{text}");
}

// ---- class 3: the lock ----------------------------------------------------------------------

#[test]
fn a_lock_held_too_long_is_a_clear_error_naming_its_holder() {
    use std::io::Write as _;
    let s = Sandbox::empty();
    ok(&s, &["init", "--yes", "--agents", "claude"]);
    let path = lock_file(&s);
    let mut held = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    held.lock().unwrap();
    held.set_len(0).unwrap();
    held.write_all(b"pid 4242: memloop sync --user-scope\n")
        .unwrap();
    let started = std::time::Instant::now();
    let out = run(&s, &["sync"]);
    let waited = started.elapsed();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "another memloop is working on this repository (pid 4242: memloop sync --user-scope)"
        ),
        "{err}"
    );
    assert!(
        waited >= std::time::Duration::from_secs(4),
        "gave up after {waited:?}"
    );
    // The read-only commands do not wait for it.
    assert_eq!(run(&s, &["diff"]).status.code(), Some(0));
    drop(held);
    ok(&s, &["sync"]);
}

#[test]
fn parallel_inits_name_the_other_memloop_and_leave_one_install() {
    for _ in 0..3 {
        let s = Sandbox::empty();
        let children: Vec<_> = (0..4)
            .map(|_| {
                command(&s, &["init", "--yes", "--agents", "claude,opencode"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let winners = outputs.iter().filter(|o| o.status.success()).count();
        assert_eq!(winners, 1, "exactly one init sets the repository up");
        for out in outputs.iter().filter(|o| !o.status.success()) {
            let err = stderr(out);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(!err.contains("changed while memloop"), "{err}");
            assert!(
                err.contains("another memloop") || err.contains("exists already"),
                "{err}"
            );
        }
        let settings = std::fs::read_to_string(s.repo.join(".claude/settings.json")).unwrap();
        assert_eq!(
            settings.matches("memloop hook stop").count(),
            1,
            "{settings}"
        );
        ok(&s, &["diff"]);
    }
}

#[test]
fn a_sync_and_an_uninstall_queued_behind_one_lock_each_see_the_others_state() {
    let s = Sandbox::empty();
    write(
        &s.repo.join("memloop.toml"),
        "agents = [\"claude\", \"opencode\", \"kimi\"]\n",
    );
    write(
        &s.repo.join(".claude/settings.json"),
        "{\"model\": \"opus\", \"permissions\": {\"allow\": [\"Bash(ls)\"]}}\n",
    );
    let pristine = snapshot(&s.repo);
    ok(&s, &["sync"]);
    let installed = snapshot(&s.repo);
    ok(&s, &["uninstall", "--yes"]);
    assert_eq!(snapshot(&s.repo), pristine);

    let path = lock_file(&s);
    for _ in 0..3 {
        let held = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        held.lock().unwrap();
        let mut sync = quiet(command(&s, &["sync"])).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut uninstall = quiet(command(&s, &["uninstall", "--yes"])).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(held);
        assert!(sync.wait().unwrap().success());
        assert!(uninstall.wait().unwrap().success());
        let now = snapshot(&s.repo);
        assert!(
            now == pristine || now == installed,
            "the queued commands left a tree that is neither installed nor pristine:\n{}",
            trees::describe(&now, &pristine)
        );
        if now == installed {
            ok(&s, &["uninstall", "--yes"]);
        }
        assert_eq!(snapshot(&s.repo), pristine);
    }
}

// ---- class 12: modes ------------------------------------------------------------------------

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn under_umask(s: &Sandbox, umask: &str, list: &[&str]) -> Output {
    let mut shell = Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_memloop"))
        .args(list)
        .current_dir(&s.repo)
        .env_clear()
        .env("HOME", &s.home)
        .env("PATH", &s.bin)
        .env("XDG_STATE_HOME", s.home.join(".local/state"))
        .env("NO_COLOR", "1");
    run_bounded(&mut shell)
}

#[test]
fn created_files_follow_the_umask_and_state_is_private() {
    for (umask, file, dir) in [("077", 0o600, 0o700), ("022", 0o644, 0o755)] {
        let s = Sandbox::empty();
        let out = under_umask(&s, umask, &["init", "--yes", "--agents", "claude,opencode"]);
        assert!(out.status.success(), "{}", stderr(&out));
        for rel in [
            "memloop.toml",
            "CLAUDE.md",
            ".mcp.json",
            ".claude/settings.json",
            "opencode.json",
            ".opencode/plugins/memloop.js",
        ] {
            assert_eq!(mode(&s.repo.join(rel)), file, "{rel} under umask {umask}");
        }
        for rel in [".claude", ".opencode", ".opencode/plugins"] {
            assert_eq!(mode(&s.repo.join(rel)), dir, "{rel} under umask {umask}");
        }
        let state = s.home.join(".local/state/memloop");
        for dir in [state.clone(), state.join("installs")] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        for entry in std::fs::read_dir(state.join("installs")).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
}

#[test]
fn loose_state_left_by_someone_else_is_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let s = Sandbox::empty();
    ok(&s, &["init", "--yes", "--agents", "claude"]);
    let state = s.home.join(".local/state/memloop");
    let installs = state.join("installs");
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    set(&state, 0o755);
    set(&installs, 0o777);
    let files: Vec<PathBuf> = std::fs::read_dir(&installs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for file in &files {
        set(file, 0o644);
    }
    // An edit makes sync write the state again.
    write(&s.repo.join("CLAUDE.md"), "# Mine\n");
    ok(&s, &["sync"]);
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&installs), 0o700);
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
}

// ---- class 11: a repository path that is not UTF-8 ------------------------------------------

#[test]
fn a_repository_path_that_is_not_utf8_is_refused_before_the_first_write() {
    use std::os::unix::ffi::OsStrExt;
    let temp = tempfile::tempdir().unwrap();
    let repo = temp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"repo-\xff-latin1"));
    let home = temp.path().join("home");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_memloop"));
    command
        .args(["init", "--yes", "--agents", "claude,opencode"])
        .current_dir(&repo)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", home.join("bin"))
        .env("XDG_STATE_HOME", home.join(".local/state"));
    let out = run_bounded(&mut command);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not valid UTF-8"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("nothing was written"),
        "{}",
        stderr(&out)
    );
    let written: BTreeMap<_, _> = snapshot(&repo);
    assert!(written.is_empty(), "init wrote {:?}", written.keys());
}
