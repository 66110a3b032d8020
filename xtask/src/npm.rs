//! `cargo xtask npm pack OUT_DIR [--repository URL] TARGET=BINARY...` and `cargo xtask npm test [--debug | --memloop PATH]`.
//!
//! memloop ships on npm as a launcher package `memloop` (npm/memloop: a Node script without
//! dependencies) plus one package per platform carrying the binary, which the launcher lists as
//! optional dependencies with `os`/`cpu` fields so npm installs only the one matching the machine.
//! `pack` builds those tarballs (the release workflow publishes them); `test` packs them for this
//! machine from the local binary, installs them offline into a temporary prefix, and runs
//! `npx memloop init` and `memloop doctor` in a sandbox git repository with its own HOME; on Linux
//! x86_64 it also runs the GitHub Action's installer against a loopback release.
//! npm is pointed at a closed loopback port and kept offline: nothing is fetched from anywhere.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use crate::e2e::proc::{self, Output};

/// One prebuilt binary: the Rust target it is built for and the npm package carrying it.
pub struct Platform {
    pub target: &'static str,
    pub package: &'static str,
    /// Node's `process.platform` and `process.arch` on machines that can run it.
    pub os: &'static str,
    pub cpu: &'static str,
}

impl Platform {
    pub fn exe(&self) -> &'static str {
        if self.os == "win32" {
            "memloop.exe"
        } else {
            "memloop"
        }
    }
}

/// Every platform the release builds. Keep in step with `PACKAGES` in npm/memloop/bin/memloop.js,
/// `optionalDependencies` in npm/memloop/package.json, the matrix in .github/workflows/release.yml
/// and the runner table in .github/install-memloop.sh; `cargo xtask npm test` checks that they agree.
pub const PLATFORMS: [Platform; 5] = [
    Platform {
        target: "x86_64-unknown-linux-musl",
        package: "memloop-linux-x64",
        os: "linux",
        cpu: "x64",
    },
    Platform {
        target: "aarch64-unknown-linux-musl",
        package: "memloop-linux-arm64",
        os: "linux",
        cpu: "arm64",
    },
    Platform {
        target: "x86_64-apple-darwin",
        package: "memloop-darwin-x64",
        os: "darwin",
        cpu: "x64",
    },
    Platform {
        target: "aarch64-apple-darwin",
        package: "memloop-darwin-arm64",
        os: "darwin",
        cpu: "arm64",
    },
    Platform {
        target: "x86_64-pc-windows-msvc",
        package: "memloop-win32-x64",
        os: "win32",
        cpu: "x64",
    },
];

const USAGE: &str = "usage:
  cargo xtask npm pack OUT_DIR [--repository URL] TARGET=BINARY...
                                                  the launcher tarball and one platform tarball per
                                                  TARGET (a Rust target triple, see PLATFORMS);
                                                  URL goes into every package.json (npm provenance
                                                  checks it against the publishing repository)
  cargo xtask npm test [--debug | --memloop PATH] [--keep]
                                                  pack for this machine from the local release build
                                                  (--debug: the dev build), install offline into a
                                                  temporary prefix, run npx memloop init and doctor";

const TIMEOUT: Duration = Duration::from_secs(120);

pub fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("pack") => pack_command(&args[1..]),
        Some("test") => test_command(&args[1..]),
        _ => bail!("{USAGE}"),
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn launcher_dir() -> PathBuf {
    workspace().join("npm/memloop")
}

/// The `version` of the memloop package in the workspace Cargo.toml.
fn cargo_version() -> Result<String> {
    let path = workspace().join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("version") {
            let value = rest.trim_start().strip_prefix('=').map(str::trim);
            if let Some(version) = value.and_then(|v| v.strip_prefix('"')?.strip_suffix('"')) {
                return Ok(version.to_owned());
            }
        }
    }
    bail!(
        "no `version = \"...\"` in the [package] table of {}",
        path.display()
    )
}

fn platform(target: &str) -> Result<&'static Platform> {
    PLATFORMS
        .iter()
        .find(|p| p.target == target)
        .with_context(|| {
            let known: Vec<&str> = PLATFORMS.iter().map(|p| p.target).collect();
            format!(
                "no npm package for target {target}; known: {}",
                known.join(", ")
            )
        })
}

fn host_platform() -> Result<&'static Platform> {
    let (os, cpu) = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("linux", "x64"),
        ("linux", "aarch64") => ("linux", "arm64"),
        ("macos", "x86_64") => ("darwin", "x64"),
        ("macos", "aarch64") => ("darwin", "arm64"),
        ("windows", "x86_64") => ("win32", "x64"),
        (os, arch) => bail!("no memloop npm package for this machine ({os} {arch})"),
    };
    Ok(PLATFORMS
        .iter()
        .find(|p| p.os == os && p.cpu == cpu)
        .expect("every host above has a platform"))
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

/// The launcher's package.json and script agree with `PLATFORMS` and with Cargo.toml's version.
fn check_launcher_sources(version: &str) -> Result<()> {
    let manifest_path = launcher_dir().join("package.json");
    let manifest = read_json(&manifest_path)?;
    let declared = manifest["version"].as_str().unwrap_or_default();
    ensure!(
        declared == version,
        "{} has version {declared:?} but Cargo.toml has {version:?}: give both the same version",
        manifest_path.display()
    );
    let optional = manifest["optionalDependencies"]
        .as_object()
        .with_context(|| format!("{} has no optionalDependencies", manifest_path.display()))?;
    let mut listed: Vec<&str> = optional.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = PLATFORMS.iter().map(|p| p.package).collect();
    listed.sort_unstable();
    expected.sort_unstable();
    ensure!(
        listed == expected,
        "{}: optionalDependencies {listed:?}, but PLATFORMS (xtask/src/npm.rs) has {expected:?}",
        manifest_path.display()
    );
    for (name, spec) in optional {
        ensure!(
            spec.as_str() == Some(version),
            "{}: optionalDependencies.{name} is {spec}, not exactly {version:?}: the launcher must \
             start the binary of its own version",
            manifest_path.display()
        );
    }
    let script_path = launcher_dir().join("bin/memloop.js");
    let script = std::fs::read_to_string(&script_path)
        .with_context(|| format!("cannot read {}", script_path.display()))?;
    for p in &PLATFORMS {
        let entry = format!("\"{}-{}\": \"{}\"", p.os, p.cpu, p.package);
        ensure!(
            script.contains(&entry),
            "{} does not map {}-{} to {} (expected `{entry}` in PACKAGES)",
            script_path.display(),
            p.os,
            p.cpu,
            p.package
        );
    }
    Ok(())
}

/// The release workflow, the GitHub Action's installer and the binstall metadata know every
/// platform's target and name the release archives alike.
fn check_release_files() -> Result<()> {
    let files = [
        (".github/workflows/release.yml", "memloop-$TARGET-v$VERSION"),
        (".github/install-memloop.sh", "memloop-$target-v$version"),
        ("Cargo.toml", "{ name }-{ target }-v{ version }"),
    ];
    for (file, archive_name) in files {
        let path = workspace().join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        ensure!(
            text.contains(archive_name),
            "{file} does not name the release archives `{archive_name}` (memloop-<target>-v<version>)"
        );
        if file == "Cargo.toml" {
            continue;
        }
        for p in &PLATFORMS {
            ensure!(
                text.contains(p.target),
                "{file} never names the target {}, which PLATFORMS (xtask/src/npm.rs) ships",
                p.target
            );
        }
    }
    Ok(())
}

/// A packed tarball and the files npm put into it (path in the package, mode).
struct Tarball {
    path: PathBuf,
    files: Vec<(String, u32)>,
}

fn npm_pack(dir: &Path, out: &Path) -> Result<Tarball> {
    let mut cmd = Command::new("npm");
    cmd.args(["pack", "--json", "--pack-destination"])
        .arg(out)
        .current_dir(dir);
    let output = must_succeed(cmd, None)?;
    // npm prints notices on stderr; stdout is the JSON array, one entry per package.
    let report: Value = serde_json::from_str(&output.stdout)
        .with_context(|| format!("npm pack did not print JSON:\n{}", output.report()))?;
    let entry = &report[0];
    let filename = entry["filename"]
        .as_str()
        .with_context(|| format!("npm pack printed no filename:\n{}", output.report()))?;
    let files = entry["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    let path = f["path"].as_str().unwrap_or_default().to_owned();
                    let mode = f["mode"].as_u64().unwrap_or_default() as u32;
                    (path, mode)
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Tarball {
        path: out.join(filename),
        files,
    })
}

/// The licence files of `license` ("MIT OR Apache-2.0"), from the workspace root into each package.
const LICENCES: [&str; 2] = ["LICENSE-APACHE", "LICENSE-MIT"];

fn copy_licences(dir: &Path) -> Result<()> {
    for file in LICENCES {
        std::fs::copy(workspace().join(file), dir.join(file))
            .with_context(|| format!("cannot copy {file} into the npm package"))?;
    }
    Ok(())
}

/// The source repository, as npm's `repository` field.
fn repository_field(url: &str) -> Value {
    json!({"type": "git", "url": format!("git+{url}.git")})
}

fn pack_launcher(
    version: &str,
    repository: Option<&str>,
    stage: &Path,
    out: &Path,
) -> Result<Tarball> {
    check_launcher_sources(version)?;
    let dir = stage.join("memloop");
    std::fs::create_dir_all(dir.join("bin"))?;
    for file in ["README.md", "bin/memloop.js"] {
        std::fs::copy(launcher_dir().join(file), dir.join(file))
            .with_context(|| format!("cannot copy npm/memloop/{file}"))?;
    }
    copy_licences(&dir)?;
    let mut manifest = read_json(&launcher_dir().join("package.json"))?;
    if let Some(url) = repository {
        manifest["repository"] = repository_field(url);
    }
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    npm_pack(&dir, out)
}

fn pack_platform(
    platform: &Platform,
    binary: &Path,
    version: &str,
    repository: Option<&str>,
    stage: &Path,
    out: &Path,
) -> Result<Tarball> {
    let dir = stage.join(platform.package);
    std::fs::create_dir_all(dir.join("bin"))?;
    let mut manifest = json!({
        "name": platform.package,
        "version": version,
        "description": format!("The memloop binary for {} (used by the npm package memloop)", platform.target),
        "license": "MIT OR Apache-2.0",
        "os": [platform.os],
        "cpu": [platform.cpu],
        "files": ["bin", LICENCES[0], LICENCES[1]],
        // Yarn PnP: a binary must be on disk to be executed.
        "preferUnplugged": true,
    });
    if let Some(url) = repository {
        manifest["repository"] = repository_field(url);
    }
    std::fs::write(
        dir.join("package.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    copy_licences(&dir)?;
    let dest = dir.join("bin").join(platform.exe());
    std::fs::copy(binary, &dest)
        .with_context(|| format!("cannot copy the binary {}", binary.display()))?;
    set_executable(&dest)?;
    npm_pack(&dir, out)
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> Result<()> {
    Ok(())
}

fn pack_command(args: &[String]) -> Result<()> {
    let (out, mut binaries) = args.split_first().with_context(|| USAGE.to_owned())?;
    let mut repository = None;
    if let [flag, url, rest @ ..] = binaries
        && flag == "--repository"
    {
        repository = Some(url.trim_end_matches('/').to_owned());
        binaries = rest;
    }
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let out = out.canonicalize()?;
    let version = cargo_version()?;
    let stage = tempfile::tempdir()?;
    let mut tarballs = Vec::new();
    for spec in binaries {
        let (target, binary) = spec
            .split_once('=')
            .with_context(|| format!("`{spec}` is not TARGET=BINARY\n{USAGE}"))?;
        let platform = platform(target)?;
        tarballs.push(pack_platform(
            platform,
            Path::new(binary),
            &version,
            repository.as_deref(),
            stage.path(),
            &out,
        )?);
    }
    tarballs.push(pack_launcher(
        &version,
        repository.as_deref(),
        stage.path(),
        &out,
    )?);
    for tarball in &tarballs {
        println!("{}", tarball.path.display());
    }
    Ok(())
}

/// A sandbox for npm: its own prefix, cache and config, offline, with a registry on a closed
/// loopback port so that even a request npm should not make goes nowhere.
struct NpmEnv {
    root: PathBuf,
    home: PathBuf,
    path: std::ffi::OsString,
}

impl NpmEnv {
    fn new(root: &Path) -> Result<NpmEnv> {
        let home = root.join("home");
        std::fs::create_dir_all(&home)?;
        std::fs::write(root.join("npmrc"), "")?;
        std::fs::write(root.join("npmrc-global"), "")?;
        let mut dirs = vec![root.join("prefix/bin")];
        // node, npm and git from this machine; nothing else, so no other `memloop` (a cargo
        // install) and no agent program stands in for what the packages installed.
        for program in ["node", "npm", "git"] {
            let found = which(program)?;
            let dir = found.parent().expect("a file has a parent").to_path_buf();
            ensure!(
                !dir.join("memloop").exists(),
                "{} holds a `memloop` as well as {program}: the test cannot keep it off PATH",
                dir.display()
            );
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        Ok(NpmEnv {
            root: root.to_path_buf(),
            home,
            path: std::env::join_paths(dirs)?,
        })
    }

    fn prefix(&self) -> PathBuf {
        self.root.join("prefix")
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(cwd).env_clear();
        for (key, value) in std::env::vars_os() {
            // Locale and terminal settings only; no npm_config_* or HOME from outside.
            let keep = key
                .to_str()
                .is_some_and(|k| k.starts_with("LC_") || matches!(k, "LANG" | "TERM" | "TMPDIR"));
            if keep {
                cmd.env(key, value);
            }
        }
        cmd.env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("NO_COLOR", "1")
            .env("npm_config_userconfig", self.root.join("npmrc"))
            .env("npm_config_globalconfig", self.root.join("npmrc-global"))
            .env("npm_config_prefix", self.prefix())
            .env("npm_config_cache", self.root.join("npm-cache"))
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("npm_config_offline", "true")
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false")
            .env("npm_config_update_notifier", "false");
        cmd
    }

    fn npm(&self, cwd: &Path, args: &[&str]) -> Command {
        let mut cmd = self.command(which("npm").unwrap_or_else(|_| "npm".into()), cwd);
        cmd.args(args);
        cmd
    }
}

fn which(program: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .with_context(|| format!("`{program}` is not on PATH; the npm package test needs it"))
}

fn must_succeed(cmd: Command, input: Option<&str>) -> Result<Output> {
    let output = proc::run(cmd, TIMEOUT, input)?;
    ensure!(output.success(), "command failed:\n{}", output.report());
    Ok(output)
}

fn exit_code(output: &Output) -> Option<i32> {
    output.status.and_then(|s| s.code())
}

fn test_command(args: &[String]) -> Result<()> {
    let mut binary = None;
    let mut debug = false;
    let mut keep = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--debug" => debug = true,
            "--keep" => keep = true,
            "--memloop" => {
                binary = Some(PathBuf::from(it.next().context("--memloop needs a path")?))
            }
            other => bail!("unknown option {other}\n{USAGE}"),
        }
    }
    let started = Instant::now();
    let version = cargo_version()?;
    check_launcher_sources(&version)?;
    check_release_files()?;
    let binary = match binary {
        Some(path) => path,
        None if debug => crate::build_memloop()?,
        None => crate::build_memloop_release()?,
    };
    let built = started.elapsed();
    let platform = host_platform()?;
    let dir = tempfile::Builder::new().prefix("memloop-npm-").tempdir()?;
    let root = dir.path().canonicalize()?;
    let result = test_packages(&root, platform, &binary, &version);
    if keep {
        let kept = dir.keep();
        println!("kept {}", kept.display());
    }
    result?;
    println!(
        "npm: ok ({} and memloop {version}, tested in {:.1?}; build {:.1?})",
        platform.package,
        started.elapsed() - built,
        built
    );
    Ok(())
}

fn test_packages(root: &Path, platform: &Platform, binary: &Path, version: &str) -> Result<()> {
    let dist = root.join("dist");
    let stage = root.join("stage");
    std::fs::create_dir_all(&dist)?;
    let native = pack_platform(platform, binary, version, None, &stage, &dist)?;
    let launcher = pack_launcher(version, None, &stage, &dist)?;
    check_tarball_files(
        &native,
        &[
            (LICENCES[0].into(), 0o644),
            (LICENCES[1].into(), 0o644),
            ("bin/".to_owned() + platform.exe(), 0o755),
        ],
    )?;
    check_tarball_files(
        &launcher,
        &[
            (LICENCES[0].into(), 0o644),
            (LICENCES[1].into(), 0o644),
            ("README.md".into(), 0o644),
            ("bin/memloop.js".into(), 0o755),
        ],
    )?;
    println!("npm: packed {}", native.path.display());
    println!("npm: packed {}", launcher.path.display());

    let env = NpmEnv::new(root)?;
    let tarballs = [&launcher.path, &native.path].map(|p| p.to_string_lossy().into_owned());
    let mut install = vec!["install", "--global"];
    install.extend(tarballs.iter().map(String::as_str));
    must_succeed(env.npm(root, &install), None)?;
    let installed = env.prefix().join("bin/memloop");
    ensure!(
        installed.exists(),
        "npm install put no memloop into {}",
        installed.display()
    );

    check_version(&env, &installed, root, version)?;

    let repo = root.join("repo");
    std::fs::create_dir_all(&repo)?;
    let mut git_init = env.command("git", &repo);
    git_init.args(["init", "-q"]);
    must_succeed(git_init, None)?;
    check_init(&env, &repo)?;
    check_doctor(&env, &installed, &repo, version)?;
    check_exit_codes(&env, &installed, &repo)?;
    check_stdio(&env, &installed, &repo, None)?;
    if let Some(node) = execve_node() {
        // The launcher replaces itself with the binary where Node has process.execve (22.15+),
        // and spawns it elsewhere (this machine's Node); run both ways.
        let script = env.prefix().join("lib/node_modules/memloop/bin/memloop.js");
        check_stdio(&env, &script, &repo, Some(&node))?;
        println!(
            "npm: the launcher also ran under {} (process.execve)",
            node.display()
        );
    }
    check_missing_platform(root, platform, &launcher.path)?;
    if platform.os == "linux" && platform.cpu == "x64" {
        crate::action_install::check(root, &workspace(), binary, version)?;
    }
    Ok(())
}

fn check_tarball_files(tarball: &Tarball, expected: &[(String, u32)]) -> Result<()> {
    let mut actual: Vec<(String, u32)> = tarball
        .files
        .iter()
        .filter(|(path, _)| path != "package.json")
        .map(|(path, mode)| (path.clone(), mode & 0o777))
        .collect();
    actual.sort();
    ensure!(
        actual == expected,
        "{} holds {actual:?} besides package.json, expected {expected:?}",
        tarball.path.display()
    );
    Ok(())
}

fn check_version(env: &NpmEnv, program: &Path, cwd: &Path, version: &str) -> Result<()> {
    let mut cmd = env.command(program, cwd);
    cmd.arg("--version");
    let output = must_succeed(cmd, None)?;
    ensure!(
        output.stdout.trim() == format!("memloop {version}"),
        "the installed memloop says {:?}, expected \"memloop {version}\"",
        output.stdout.trim()
    );
    Ok(())
}

/// `npx memloop init` finds the installed package (offline: a fetch would fail) and writes the
/// loop, with the hooks and the server running `memloop` from PATH.
fn check_init(env: &NpmEnv, repo: &Path) -> Result<()> {
    // --no: never install; a memloop npx does not find installed fails instead of being fetched.
    let mut cmd = env.command(which("npx")?, repo);
    cmd.args([
        "--no",
        "memloop",
        "init",
        "--yes",
        "--agents",
        "claude,opencode",
    ]);
    let output = must_succeed(cmd, None)?;
    ensure!(
        output.stdout.contains("memloop init:")
            && output.stdout.contains("Next: run `memloop doctor`"),
        "npx memloop init printed no plan:\n{}",
        output.report()
    );
    for file in [
        "memloop.toml",
        "CLAUDE.md",
        "AGENTS.md",
        ".claude/settings.json",
        "opencode.json",
        ".opencode/plugins/memloop.js",
    ] {
        ensure!(
            repo.join(file).symlink_metadata().is_ok(),
            "npx memloop init wrote no {file}:\n{}",
            output.report()
        );
    }
    let mcp = read_json(&repo.join(".mcp.json"))?;
    let server = &mcp["mcpServers"]["memory"];
    ensure!(
        server["command"] == "memloop" && server["args"] == json!(["serve"]),
        ".mcp.json's memory server is {server}, expected `memloop serve`"
    );
    let settings = std::fs::read_to_string(repo.join(".claude/settings.json"))?;
    ensure!(
        settings.contains("memloop hook stop --agent claude"),
        ".claude/settings.json has no Stop hook running `memloop hook stop`:\n{settings}"
    );
    println!(
        "npm: npx memloop init wrote the loop into {}",
        repo.display()
    );
    Ok(())
}

/// Doctor through the launcher finds no error, and its PATH check finds the npm-installed
/// `memloop` (the hooks' command) answering with this version.
fn check_doctor(env: &NpmEnv, installed: &Path, repo: &Path, version: &str) -> Result<()> {
    let mut cmd = env.command(installed, repo);
    cmd.args(["doctor", "--format", "json"]);
    let output = proc::run(cmd, TIMEOUT, None)?;
    let report: Value = serde_json::from_str(&output.stdout)
        .with_context(|| format!("memloop doctor printed no JSON:\n{}", output.report()))?;
    ensure!(
        exit_code(&output) == Some(0) && report["summary"]["error"] == 0,
        "memloop doctor found errors after npx memloop init:\n{}",
        output.report()
    );
    let on_path = report["findings"]
        .as_array()
        .and_then(|findings| findings.iter().find(|f| f["id"] == "memloop.on-path"))
        .with_context(|| format!("doctor made no memloop.on-path check:\n{}", output.report()))?;
    let message = on_path["message"].as_str().unwrap_or_default();
    ensure!(
        on_path["severity"] == "ok"
            && message.contains(&installed.display().to_string())
            && message.contains(version),
        "doctor's PATH check is not the npm launcher answering {version}: {on_path}"
    );
    println!("npm: memloop doctor: 0 errors; {message}");
    Ok(())
}

/// Exit codes pass through the launcher: 1 for drift, 2 for a usage error.
fn check_exit_codes(env: &NpmEnv, installed: &Path, repo: &Path) -> Result<()> {
    let mut diff = env.command(installed, repo);
    diff.arg("diff");
    must_succeed(diff, None)?;
    std::fs::remove_file(repo.join(".opencode/plugins/memloop.js"))?;
    let mut diff = env.command(installed, repo);
    diff.arg("diff");
    let drift = proc::run(diff, TIMEOUT, None)?;
    ensure!(
        exit_code(&drift) == Some(1),
        "memloop diff with a deleted plugin should exit 1 through the launcher:\n{}",
        drift.report()
    );
    let mut sync = env.command(installed, repo);
    sync.arg("sync");
    must_succeed(sync, None)?;
    let mut usage = env.command(installed, repo);
    usage.arg("no-such-command");
    let usage = proc::run(usage, TIMEOUT, None)?;
    ensure!(
        exit_code(&usage) == Some(2),
        "an unknown command should exit 2 through the launcher:\n{}",
        usage.report()
    );
    Ok(())
}

/// `memloop serve` speaks MCP over the launcher's stdin and stdout, as the agents start it.
fn check_stdio(env: &NpmEnv, program: &Path, repo: &Path, node: Option<&Path>) -> Result<()> {
    let mut cmd = match node {
        Some(node) => {
            let mut cmd = env.command(node, repo);
            cmd.arg(program);
            cmd
        }
        None => env.command(program, repo),
    };
    cmd.arg("serve");
    let mut server = proc::Proc::spawn(cmd)?;
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "xtask-npm", "version": "0"}
        }
    });
    server.write_stdin(&format!("{initialize}\n"))?;
    let reply = server.wait_line(Instant::now() + Duration::from_secs(30), |line| {
        line.contains("\"id\":1")
    });
    server.close_stdin();
    let output = server.finish(Instant::now() + Duration::from_secs(10));
    let reply = reply.with_context(|| {
        format!(
            "memloop serve did not answer initialize through the launcher:\n{}",
            output.report()
        )
    })?;
    let reply: Value = serde_json::from_str(&reply)?;
    ensure!(
        reply["result"]["serverInfo"]["name"].is_string(),
        "memloop serve answered initialize without serverInfo: {reply}"
    );
    ensure!(
        exit_code(&output) == Some(0),
        "memloop serve did not exit 0 when its stdin closed:\n{}",
        output.report()
    );
    Ok(())
}

/// The e2e tool cache's Node (22.x has process.execve), if a previous e2e run installed it.
fn execve_node() -> Option<PathBuf> {
    let cache = match std::env::var_os("MEMLOOP_E2E_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::home_dir().map(|home| home.join(".cache")))?
            .join("memloop-e2e"),
    };
    let node = cache.join("bin/node");
    let answers = Command::new(&node)
        .args([
            "-e",
            "process.exit(typeof process.execve === 'function' ? 0 : 1)",
        ])
        .status()
        .is_ok_and(|status| status.success());
    answers.then_some(node)
}

/// Without the platform package (optional dependencies skipped), the launcher says which package
/// is missing and how to get it, and exits 1.
fn check_missing_platform(root: &Path, platform: &Platform, launcher: &Path) -> Result<()> {
    let bare = root.join("bare");
    std::fs::create_dir_all(&bare)?;
    let env = NpmEnv::new(&bare)?;
    let launcher = launcher.to_string_lossy().into_owned();
    must_succeed(env.npm(&bare, &["install", "--global", &launcher]), None)?;
    let mut cmd = env.command(env.prefix().join("bin/memloop"), &bare);
    cmd.arg("--version");
    let output = proc::run(cmd, TIMEOUT, None)?;
    ensure!(
        exit_code(&output) == Some(1)
            && output.stderr.contains(platform.package)
            && output.stderr.contains("npm install -g memloop"),
        "without {} the launcher should exit 1 naming the package and the fix:\n{}",
        platform.package,
        output.report()
    );
    println!("npm: without {} the launcher says so", platform.package);
    Ok(())
}
