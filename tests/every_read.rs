//! Every path memloop reads, as the agents list them (`agents::wanted` with user scope and trust:
//! each agent's targets and trust entries, and the shared rules files), replaced in turn with a
//! FIFO, a folder, a device and a symlink leading out of its place, under every command. Each
//! run must end within a bounded time (a blocking open of a FIFO would hang), exit as the
//! contract says, name the file when it refuses, and write nothing.

mod trees;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use memloop::config::{AgentId, Config};
use trees::{Tree, make_fifo, snapshot};

/// A run that takes longer hangs: memloop's own waits (the lock, an agent's rewrite settling)
/// are far shorter.
const LIMIT: Duration = Duration::from_secs(10);

/// The agents' programs and what their `--version` prints (pinned versions of the e2e runs).
const AGENT_VERSIONS: [(&str, &str); 7] = [
    ("claude", "2.1.328 (Claude Code)"),
    ("opencode", "1.2.27"),
    ("kimi", "2.1.0"),
    ("codex", "codex-cli 0.171.0"),
    ("gemini", "0.61.0"),
    ("qwen", "0.24.4"),
    ("copilot", "GitHub Copilot CLI 1.0.102."),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Fifo,
    Folder,
    Device,
    OutsideLink,
}

struct World {
    _temp: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    home: PathBuf,
}

impl World {
    fn new() -> World {
        let temp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(temp.path()).unwrap();
        let (root, home) = (base.join("repo"), base.join("home"));
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        // memloop itself on PATH, as the agents' hooks need it (the doctor checks).
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memloop"), home.join("bin/memloop"))
            .unwrap();
        // Every agent installed (a program printing its version), so the doctor checks the
        // user's files too, as it does where the agents run.
        for (program, version) in AGENT_VERSIONS {
            use std::os::unix::fs::PermissionsExt;
            let path = home.join("bin").join(program);
            std::fs::write(&path, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        World {
            _temp: temp,
            base,
            root,
            home,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memloop"));
        command
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1");
        command
    }

    /// Runs memloop with `stdin`, killed (and the test failed) past [`LIMIT`].
    fn run(&self, args: &[&str], stdin: &str, planted: &str) -> (Output, Duration) {
        use std::io::Read as _;
        let mut command = self.command(args);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stdout = drain(Box::new(child.stdout.take().unwrap()));
        let stderr = drain(Box::new(child.stderr.take().unwrap()));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("memloop {args:?} with {planted} did not end within {LIMIT:?}: it hangs");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = started.elapsed();
        let output = Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        };
        (output, took)
    }

    /// Everything memloop could write: the repository, the home (without memloop's own state)
    /// and the folder outside both that the links lead to.
    fn tree(&self) -> Tree {
        let mut tree = snapshot(&self.base);
        tree.retain(|path, _| !path.starts_with("home/.local"));
        tree
    }
}

/// A path memloop reads, how it is shown, and what reads it.
#[derive(Debug, Clone)]
struct Read {
    path: PathBuf,
    display: String,
    /// A per-machine approval (`memloop trust`), not part of the install.
    trust: bool,
    /// Not a file memloop writes, but one its checks read (an agent's other MCP configs): it
    /// may well be missing.
    checked_only: bool,
    agents: Vec<AgentId>,
}

/// The agents' own list of files for this repository: what sync, diff, doctor and uninstall
/// read, and what trust reads.
fn reads(world: &World) -> Vec<Read> {
    let config = Config::load(&world.root).unwrap().unwrap();
    let ctx = memloop::repo::Context {
        root: &world.root,
        config: &config,
        server: config.server().unwrap(),
        home: world.home.clone(),
        user_scope: true,
        trusted: false,
    };
    let install = memloop::agents::wanted(&ctx).unwrap().targets;
    let trust = memloop::agents::trust(&ctx).unwrap();
    let mut reads: Vec<Read> = Vec::new();
    for (target, trust) in install
        .iter()
        .map(|t| (t, false))
        .chain(trust.iter().map(|t| (t, true)))
    {
        if reads.iter().any(|r| r.path == target.path) {
            continue;
        }
        reads.push(Read {
            path: target.path.clone(),
            display: target.display.clone(),
            trust,
            checked_only: false,
            agents: target.agents.clone(),
        });
    }
    for agent in AgentId::ALL {
        for file in memloop::agents::of(agent).mcp_files() {
            let path = world.root.join(file.name);
            if !reads.iter().any(|r| r.path == path) {
                reads.push(Read {
                    path,
                    display: file.name.to_owned(),
                    trust: false,
                    checked_only: true,
                    agents: vec![agent],
                });
            }
        }
    }
    reads.push(Read {
        path: world.root.join("memloop.toml"),
        display: "memloop.toml".into(),
        trust: false,
        checked_only: false,
        agents: Vec::new(),
    });
    reads
}

/// What was at a path before something else was planted there.
enum Saved {
    Missing,
    File(Vec<u8>, std::fs::Permissions),
    Link(PathBuf),
}

fn save(path: &Path) -> Saved {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Saved::Missing;
    };
    if meta.file_type().is_symlink() {
        Saved::Link(std::fs::read_link(path).unwrap())
    } else {
        Saved::File(std::fs::read(path).unwrap(), meta.permissions())
    }
}

fn remove(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        std::fs::remove_dir_all(path).unwrap();
    } else {
        std::fs::remove_file(path).unwrap();
    }
}

fn restore(path: &Path, saved: &Saved) {
    remove(path);
    match saved {
        Saved::Missing => {}
        Saved::File(bytes, permissions) => {
            std::fs::write(path, bytes).unwrap();
            std::fs::set_permissions(path, permissions.clone()).unwrap();
        }
        Saved::Link(target) => std::os::unix::fs::symlink(target, path).unwrap(),
    }
}

/// Whether this process may make device nodes (root, outside a user namespace that forbids it).
fn can_mknod(dir: &Path) -> bool {
    let probe = dir.join("probe-device");
    let made = Command::new("mknod")
        .arg(&probe)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _ = std::fs::remove_file(&probe);
    made
}

/// Puts `kind` at `path`; false when this machine cannot make it.
fn plant(world: &World, path: &Path, kind: Kind, saved: &Saved) {
    remove(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    match kind {
        Kind::Fifo => make_fifo(path),
        Kind::Folder => std::fs::create_dir(path).unwrap(),
        Kind::Device => {
            let made = Command::new("mknod")
                .arg(path)
                .args(["c", "1", "3"])
                .status()
                .unwrap();
            assert!(made.success(), "mknod {}", path.display());
        }
        Kind::OutsideLink => {
            // The same bytes, outside the repository and the agent's folder: only the place is
            // wrong, so a reader that follows the link would see a perfectly good file.
            let outside = world.base.join("outside").join(path.file_name().unwrap());
            match saved {
                Saved::File(bytes, _) => std::fs::write(&outside, bytes).unwrap(),
                Saved::Link(_) | Saved::Missing => std::fs::write(&outside, "{}\n").unwrap(),
            }
            std::os::unix::fs::symlink(&outside, path).unwrap();
        }
    }
}

/// The Stop input of a hook run whose transcript (or log) is `path`.
fn hook_input(world: &World, path: &Path) -> String {
    serde_json::json!({
        "session_id": "every-read",
        "sessionId": "every-read",
        "transcript_path": path,
        "transcriptPath": path,
        "cwd": world.root,
        "hook_event_name": "Stop",
        "stop_hook_active": false,
    })
    .to_string()
}

struct Case<'a> {
    world: &'a World,
    read: &'a Read,
    kind: Kind,
    runs: &'a std::cell::Cell<usize>,
}

impl Case<'_> {
    fn output(&self, out: &Output) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn names_file(&self, text: &str) -> bool {
        let absolute = self.read.path.display().to_string();
        text.contains(&self.read.display) || text.contains(&absolute)
    }

    /// Runs `args`; checks the time, that nothing was written, and returns the output.
    fn run(&self, args: &[&str], stdin: &str) -> (Option<i32>, String) {
        let before = self.world.tree();
        self.runs.set(self.runs.get() + 1);
        let planted = format!("{:?} at {}", self.kind, self.read.display);
        let (out, took) = self.world.run(args, stdin, &planted);
        let text = self.output(&out);
        let after = self.world.tree();
        assert!(
            after == before,
            "memloop {args:?} with {:?} at {} wrote:\n{}\n{text}",
            self.kind,
            self.read.display,
            trees::describe(&after, &before)
        );
        assert!(
            took < LIMIT,
            "memloop {args:?} took {took:?} with {:?} at {}",
            self.kind,
            self.read.display
        );
        (out.status.code(), text)
    }

    /// A command that reads the file: refused (exit `code`), the file named.
    fn refuses(&self, args: &[&str], codes: &[i32]) {
        let (code, text) = self.run(args, "");
        assert!(
            code.is_some_and(|c| codes.contains(&c)) && self.names_file(&text),
            "memloop {args:?} with {:?} at {}: exit {code:?}, expected one of {codes:?} naming the file:\n{text}",
            self.kind,
            self.read.display
        );
    }

    /// A command that may not need the file: any exit of the contract; a refusal names it.
    fn contract(&self, args: &[&str], stdin: &str, codes: &[i32]) {
        let (code, text) = self.run(args, stdin);
        assert!(
            code.is_some_and(|c| codes.contains(&c)),
            "memloop {args:?} with {:?} at {}: exit {code:?}, expected one of {codes:?}:\n{text}",
            self.kind,
            self.read.display
        );
        if code == Some(2) && !args.contains(&"hook") {
            assert!(
                self.names_file(&text),
                "memloop {args:?} with {:?} at {} refused without naming the file:\n{text}",
                self.kind,
                self.read.display
            );
        }
    }
}

fn sweep(kind: Kind) -> (usize, usize) {
    let world = World::new();
    let agents: Vec<&str> = AgentId::ALL.iter().map(|a| a.as_str()).collect();
    let (init, _) = world.run(
        &[
            "init",
            "--yes",
            "--agents",
            &agents.join(","),
            "--user-scope",
            "--trust",
        ],
        "",
        "nothing planted",
    );
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let installed = world.tree();
    let reads = reads(&world);
    assert!(reads.len() > 15, "only {} paths: {reads:?}", reads.len());
    let runs = std::cell::Cell::new(0);
    for read in &reads {
        let saved = save(&read.path);
        plant(&world, &read.path, kind, &saved);
        let case = Case {
            world: &world,
            read,
            kind,
            runs: &runs,
        };
        let config = read.display == "memloop.toml";
        let installs = !read.trust && !read.checked_only;
        // Commands of the install: each reads every file of it, and refuses one it cannot.
        if installs || config {
            case.refuses(&["sync"], &[2]);
            case.refuses(&["sync", "--dry-run"], &[2]);
            case.refuses(&["diff"], &[2]);
            case.refuses(&["uninstall", "--dry-run"], &[2]);
            case.refuses(&["uninstall", "--yes"], &[2]);
        } else {
            case.contract(&["sync"], "", &[0, 2]);
            case.contract(&["diff"], "", &[0, 1, 2]);
            case.contract(&["uninstall", "--dry-run"], "", &[0, 2]);
        }
        if read.checked_only {
            case.contract(&["doctor"], "", &[0, 1, 2]);
        } else {
            case.refuses(&["doctor"], &[1, 2]);
        }
        case.contract(&["upgrade"], "", &[0, 2]);
        case.contract(&["upgrade", "--dry-run"], "", &[0, 1, 2]);
        if read.trust || config {
            case.refuses(&["trust", "--dry-run"], &[2]);
            case.refuses(&["trust", "--yes"], &[2]);
            case.refuses(&["trust", "--revoke", "--yes"], &[2]);
        } else {
            case.contract(&["trust", "--dry-run"], "", &[0, 2]);
            case.contract(&["trust", "--revoke", "--dry-run"], "", &[0, 2]);
        }
        // The gate, with the file as its transcript: it never blocks on it, never exits 2
        // (that would send the agent back) for anything but a verdict.
        let input = hook_input(&world, &read.path);
        let hook_agents = if read.agents.is_empty() {
            vec![AgentId::Claude]
        } else {
            read.agents.clone()
        };
        for agent in hook_agents {
            case.contract(
                &["hook", "stop", "--agent", agent.as_str()],
                &input,
                &[0, 1],
            );
        }
        restore(&read.path, &saved);
        let _ = std::fs::remove_file(
            world
                .base
                .join("outside")
                .join(read.path.file_name().unwrap()),
        );
        let now = world.tree();
        assert!(
            now == installed,
            "after {:?} at {}:\n{}",
            kind,
            read.display,
            trees::describe(&now, &installed)
        );
    }
    (reads.len(), runs.get())
}

#[test]
fn every_path_memloop_reads_as_a_fifo_a_folder_a_device_and_an_outside_link() {
    let probe = tempfile::tempdir().unwrap();
    let mut kinds = vec![Kind::Fifo, Kind::Folder, Kind::OutsideLink];
    if can_mknod(probe.path()) {
        kinds.push(Kind::Device);
    } else {
        eprintln!(
            "skipping devices: this process cannot make device nodes (mknod needs root); \
             FIFOs, folders and outside links are still planted"
        );
    }
    let threads: Vec<_> = kinds
        .into_iter()
        .map(|kind| std::thread::spawn(move || (kind, sweep(kind))))
        .collect();
    let mut failed = BTreeMap::new();
    for thread in threads {
        match thread.join() {
            Ok((kind, (paths, runs))) => eprintln!("{kind:?}: {paths} paths, {runs} runs"),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.insert(failed.len(), message);
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The door is the only way in: no code outside `src/files/` opens a file for reading by
/// itself (tests inside a source file may). The memory's files (`src/serve/`,
/// `src/commands/memory.rs`, `src/memory/`) are being moved and routed through the door in
/// their own change, and are left to it.
#[test]
fn no_reader_opens_a_file_past_the_door() {
    const OWN_DOOR: &[&str] = &["src/files/", "src/files.rs"];
    const ROUTED_SEPARATELY: &[&str] = &[];
    const PATTERNS: &[&str] = &[
        "fs::read(",
        "fs::read_to_string(",
        "File::open(",
        "fs_err::read(",
        "fs_err::read_to_string(",
        ".read(true)",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stack = vec![root.join("src")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            // Test modules in files of their own (`#[cfg(test)] mod tests;`).
            if !rel.ends_with(".rs")
                || rel.ends_with("/tests.rs")
                || OWN_DOOR
                    .iter()
                    .chain(ROUTED_SEPARATELY)
                    .any(|p| rel.starts_with(p))
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            for (number, line) in code.lines().enumerate() {
                if PATTERNS.iter().any(|p| line.contains(p)) {
                    found.push(format!("{rel}:{}: {}", number + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "reads past the door (use memloop::files::{{read_text, read_optional, read_within, read_regular, open_regular}}):\n{}",
        found.join("\n")
    );
}
