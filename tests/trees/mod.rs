//! File trees for the data-driven tests (tests/cases.rs, tests/upgrade.rs): snapshot a folder,
//! copy one, show how two differ, and run memloop in a throw-away repository and home.
//! Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(Vec<u8>),
    Link(PathBuf),
    /// A FIFO, a device or a socket: recorded, never opened (reading a FIFO blocks).
    Special,
}

pub type Tree = BTreeMap<PathBuf, Entry>;

/// Every file and symlink under `dir` by relative path (skipping `.git` and the state in `.local`).
pub fn snapshot(dir: &Path) -> Tree {
    let mut out = BTreeMap::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out
}

fn walk(base: &Path, dir: &Path, out: &mut Tree) {
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
        } else if !meta.is_file() {
            out.insert(rel, Entry::Special);
        } else {
            out.insert(rel, Entry::File(std::fs::read(&path).unwrap()));
        }
    }
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (rel, entry) in snapshot(from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        match entry {
            Entry::File(bytes) => std::fs::write(&dest, bytes).unwrap(),
            Entry::Link(target) => std::os::unix::fs::symlink(target, &dest).unwrap(),
            Entry::Special => make_fifo(&dest),
        }
    }
}

/// A FIFO at `path` (git cannot hold one, so tests make them).
pub fn make_fifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {} failed", path.display());
}

/// Trees hold this line instead of the OpenCode plugin, which has tests of its own.
pub const PLUGIN_MARKER: &[u8] = b"[the OpenCode gate plugin from assets/]\n";
/// And this one instead of Kilo's (the OpenCode plugin calling memloop as `--agent kilo`).
pub const KILO_PLUGIN_MARKER: &[u8] =
    b"[the Kilo gate plugin: the OpenCode plugin as --agent kilo]\n";

/// And this one instead of Pi's extension (for the embedded server).
pub const PI_EXTENSION_MARKER: &[u8] = b"[the Pi extension from assets/ (embedded server)]\n";

/// Each plugin marker with the plugin it stands for.
fn plugins() -> [(&'static [u8], Vec<u8>); 3] {
    [
        (
            PLUGIN_MARKER,
            memloop::gate::OPENCODE_PLUGIN.as_bytes().to_vec(),
        ),
        (
            KILO_PLUGIN_MARKER,
            memloop::agents::kilo::plugin().into_bytes(),
        ),
        (
            PI_EXTENSION_MARKER,
            memloop::agents::pi::EXTENSION.as_bytes().to_vec(),
        ),
    ]
}

pub fn expand_plugin(tree: &mut Tree) {
    let plugins = plugins();
    for entry in tree.values_mut() {
        if let Entry::File(bytes) = entry
            && let Some((_, plugin)) = plugins.iter().find(|(marker, _)| bytes == marker)
        {
            *entry = Entry::File(plugin.clone());
        }
    }
}

/// Writes the current plugin over every marker file under `dir`: an `in/` tree that starts from
/// memloop's own plugin holds the marker, so it never goes stale when the plugin changes.
pub fn write_plugin(dir: &Path) {
    let plugins = plugins();
    for (rel, entry) in snapshot(dir) {
        if let Entry::File(bytes) = &entry
            && let Some((_, plugin)) = plugins.iter().find(|(marker, _)| bytes == marker)
        {
            std::fs::write(dir.join(rel), plugin).unwrap();
        }
    }
}

/// The reverse of `write_plugin`, for blessing: the plugins become their markers.
pub fn collapse_plugin(dir: &Path) {
    let plugins = plugins();
    for (rel, entry) in snapshot(dir) {
        if let Entry::File(bytes) = &entry
            && let Some((marker, _)) = plugins.iter().find(|(_, plugin)| bytes == plugin)
        {
            std::fs::write(dir.join(rel), marker).unwrap();
        }
    }
}

/// Expected trees spell the sandbox repository's real path (in a user config's trust entries,
/// say) as this marker.
pub const REPO_MARKER: &str = "@REPO@";

fn real(repo: &Path) -> String {
    repo.canonicalize()
        .unwrap_or_else(|_| repo.to_path_buf())
        .display()
        .to_string()
}

pub fn expand_repo(tree: &mut Tree, repo: &Path) {
    let path = real(repo);
    for entry in tree.values_mut() {
        if let Entry::File(bytes) = entry
            && let Ok(text) = std::str::from_utf8(bytes)
            && text.contains(REPO_MARKER)
        {
            *bytes = text.replace(REPO_MARKER, &path).into_bytes();
        }
    }
}

/// Writes the repository's real path for the marker in every file under `dir` (a case's `in/`).
pub fn spell_repo(dir: &Path, repo: &Path) {
    let path = real(repo);
    for (rel, entry) in snapshot(dir) {
        if let Entry::File(bytes) = entry
            && let Ok(text) = String::from_utf8(bytes)
            && text.contains(REPO_MARKER)
        {
            std::fs::write(dir.join(rel), text.replace(REPO_MARKER, &path)).unwrap();
        }
    }
}

/// Writes the marker for the repository's real path in every file under `dir` (when blessing).
pub fn collapse_repo(dir: &Path, repo: &Path) {
    let path = real(repo);
    for (rel, entry) in snapshot(dir) {
        if let Entry::File(bytes) = entry
            && let Ok(text) = String::from_utf8(bytes)
            && text.contains(&path)
        {
            std::fs::write(dir.join(rel), text.replace(&path, REPO_MARKER)).unwrap();
        }
    }
}

/// How `got` differs from `want`, file by file, with both texts.
pub fn describe(got: &Tree, want: &Tree) -> String {
    let show = |e: &Entry| match e {
        Entry::File(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Entry::Link(target) => format!("(symlink to {})", target.display()),
        Entry::Special => "(a FIFO, device or socket)".into(),
    };
    let mut lines = Vec::new();
    for (path, entry) in got {
        match want.get(path) {
            None => lines.push(format!("  only in actual: {}", path.display())),
            Some(w) if w != entry => lines.push(format!(
                "  differs: {}\n--- expected\n{}\n--- actual\n{}",
                path.display(),
                show(w),
                show(entry)
            )),
            _ => {}
        }
    }
    for path in want.keys().filter(|p| !got.contains_key(*p)) {
        lines.push(format!("  missing from actual: {}", path.display()));
    }
    lines.join("\n")
}

/// How long one memloop run in a test may take before it counts as hung.
pub const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `command` to the end with its output captured, killing it after [`RUN_LIMIT`].
pub fn run_bounded(command: &mut Command) -> Output {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not end within {RUN_LIMIT:?}: it hangs");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// A repository, a home and a PATH folder in a temporary directory.
pub struct Sandbox {
    _temp: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub bin: PathBuf,
}

impl Sandbox {
    /// A repository and home from `from/{repo,home}`, the PATH folder from `bin_from/bin`
    /// (fake agent programs printing a version).
    pub fn new(from: &Path, bin_from: &Path) -> Sandbox {
        let temp = tempfile::tempdir().unwrap();
        let (repo, home, bin) = (
            temp.path().join("repo"),
            temp.path().join("home"),
            temp.path().join("bin"),
        );
        copy_tree(&from.join("repo"), &repo);
        copy_tree(&from.join("home"), &home);
        write_plugin(&repo);
        write_plugin(&home);
        spell_repo(&home, &repo);
        copy_tree(&bin_from.join("bin"), &bin);
        std::fs::create_dir_all(repo.join(".git")).unwrap();
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

    /// Runs memloop in the repository with only this sandbox's environment (plus `env`).
    /// A run that does not end within [`RUN_LIMIT`] is killed and fails the test: a hang
    /// (memloop blocked on a FIFO, say) is a failure, not a stuck test.
    pub fn run_with<A: AsRef<OsStr>>(&self, args: &[A], env: &BTreeMap<String, String>) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_memloop"));
        command
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", &self.bin)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1")
            .envs(env);
        run_bounded(&mut command)
    }

    pub fn run<A: AsRef<OsStr>>(&self, args: &[A]) -> Output {
        self.run_with(args, &BTreeMap::new())
    }

    /// An empty repository (only `.git/`) and an empty home.
    pub fn empty() -> Sandbox {
        Sandbox::new(Path::new("/nonexistent"), Path::new("/nonexistent"))
    }

    /// `memloop ARGS`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "memloop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A file of the repository, as text ("" when there is none).
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.repo.join(rel)).unwrap_or_default()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.repo.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Whether the repository holds `rel` (a dangling link counts).
    pub fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.repo.join(rel)).is_ok()
    }

    /// Where memloop keeps what it installed, for this sandbox's user.
    pub fn installs(&self) -> PathBuf {
        self.home.join(".local/state/memloop/installs")
    }

    /// Another machine, or a fresh clone: nothing recorded about this install.
    pub fn forget_install(&self) {
        std::fs::remove_dir_all(self.installs()).unwrap();
    }

    /// Sets `key = value` in memloop.toml's section `section` (`""` for the top), keeping the rest.
    pub fn set_config(&self, section: &str, key: &str, value: &str) {
        let path = self.repo.join("memloop.toml");
        let mut doc: toml_edit::DocumentMut =
            std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let table = if section.is_empty() {
            doc.as_table_mut()
        } else {
            doc.entry(section)
                .or_insert(toml_edit::table())
                .as_table_mut()
                .unwrap()
        };
        table.insert(
            key,
            toml_edit::value(toml_edit::Value::from_str(value).unwrap()),
        );
        std::fs::write(path, doc.to_string()).unwrap();
    }

    pub fn trees(&self) -> (Tree, Tree) {
        (snapshot(&self.repo), snapshot(&self.home))
    }
}
