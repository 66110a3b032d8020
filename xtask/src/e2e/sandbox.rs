//! One throw-away world per scenario: a git repo plus a private HOME, XDG dirs, Claude and Kimi
//! config homes, and an environment that keeps every agent quiet, un-updating and on loopback.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::proc::{self, Output};
use super::tools::{QUIET_ENV, Tools};

/// A dead loopback address: anything that tries to leave the machine (a proxy-aware HTTP client,
/// an `npm install`) fails fast here instead of reaching the internet.
const DEAD_END: &str = "http://127.0.0.1:9";

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub struct Sandbox {
    pub root: PathBuf,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub xdg_config: PathBuf,
    pub xdg_data: PathBuf,
    pub xdg_state: PathBuf,
    pub xdg_cache: PathBuf,
    pub claude_config: PathBuf,
    pub kimi_home: PathBuf,
    path: OsString,
    extra_env: Vec<(String, String)>,
    keep: bool,
}

impl Sandbox {
    /// A fresh sandbox for `name`, with PATH = memloop's dir, the pinned tools, then the host PATH.
    pub fn new(name: &str, tools: &Tools, memloop_dir: &Path, keep: bool) -> Result<Sandbox> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let base =
            std::env::temp_dir().join(format!("memloop-e2e-{}-{}-{name}", std::process::id(), n));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base)
            .with_context(|| format!("creating the sandbox {}", base.display()))?;
        // Absolute, symlink-free paths: Kimi's trust key and Claude's project keys hash them.
        let root = base.canonicalize()?;
        let dir = |p: &str| -> Result<PathBuf> {
            let d = root.join(p);
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            Ok(d)
        };
        let mut host_path = vec![memloop_dir.to_path_buf(), tools.bin.clone()];
        if let Some(p) = std::env::var_os("PATH") {
            host_path.extend(std::env::split_paths(&p));
        }
        let sandbox = Sandbox {
            repo: dir("repo")?,
            home: dir("home")?,
            xdg_config: dir("home/.config")?,
            xdg_data: dir("home/.local/share")?,
            xdg_state: dir("home/.local/state")?,
            xdg_cache: dir("home/.cache")?,
            claude_config: dir("home/.claude")?,
            kimi_home: dir("home/.kimi-code")?,
            path: std::env::join_paths(host_path)?,
            // Copilot runs its unpacked copy from the cache instead of unpacking ~235 MB here.
            extra_env: vec![(
                "COPILOT_CLI_DIST_DIR".into(),
                tools.copilot_dist.to_string_lossy().into_owned(),
            )],
            keep,
            root,
        };
        sandbox.init_repo()?;
        Ok(sandbox)
    }

    /// Keep the sandbox on disk (for a failed scenario).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Extra variables for every later command of this sandbox.
    pub fn set_env(&mut self, key: &str, value: impl Into<String>) {
        self.extra_env.retain(|(k, _)| k != key);
        self.extra_env.push((key.to_string(), value.into()));
    }

    /// A command with the sandbox environment (host environment cleared), run in the repo.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().current_dir(&self.repo);
        cmd.env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("USER", "e2e")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("XDG_CONFIG_HOME", &self.xdg_config)
            .env("XDG_DATA_HOME", &self.xdg_data)
            .env("XDG_STATE_HOME", &self.xdg_state)
            .env("XDG_CACHE_HOME", &self.xdg_cache)
            .env("CLAUDE_CONFIG_DIR", &self.claude_config)
            .env("KIMI_CODE_HOME", &self.kimi_home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // Loopback only: proxy-aware clients send anything non-local into a dead port,
            // npm is pointed at one too.
            .env("HTTP_PROXY", DEAD_END)
            .env("HTTPS_PROXY", DEAD_END)
            .env("http_proxy", DEAD_END)
            .env("https_proxy", DEAD_END)
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env("NODE_USE_ENV_PROXY", "1")
            .env("npm_config_registry", DEAD_END)
            .env("npm_config_offline", "true");
        if let Some(tmp) = std::env::var_os("TMPDIR") {
            cmd.env("TMPDIR", tmp);
        }
        for (k, v) in QUIET_ENV {
            cmd.env(k, v);
        }
        if is_root() {
            // bypassPermissions refuses to run as root otherwise (e2e-findings.md).
            cmd.env("IS_SANDBOX", "1");
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Run `program args` in the sandbox with a timeout.
    pub fn run(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Output> {
        let mut cmd = self.command(program);
        cmd.args(args);
        proc::run(cmd, timeout, None)
    }

    fn init_repo(&self) -> Result<()> {
        std::fs::write(
            self.repo.join("README.md"),
            "# e2e fixture\n\nA throw-away repository for memloop's end-to-end tests.\n",
        )?;
        std::fs::write(
            self.home.join(".gitconfig"),
            "[user]\n\tname = memloop e2e\n\temail = e2e@127.0.0.1\n[init]\n\tdefaultBranch = main\n",
        )?;
        for args in [
            &["init", "-q"][..],
            &["add", "README.md"],
            &["commit", "-q", "-m", "fixture"],
        ] {
            let out = self.run("git", args, Duration::from_secs(30))?;
            if !out.success() {
                bail!("git setup of the sandbox repo failed:\n{}", out.report());
            }
        }
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.keep {
            println!("      (kept sandbox {})", self.root.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
