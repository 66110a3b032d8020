//! The GitHub Action's installer (.github/install-memloop.sh) against a release on loopback:
//! archives named and checksummed as .github/workflows/release.yml makes them, served by a small
//! HTTP server on 127.0.0.1. It must install a matching binary, refuse one whose checksum does
//! not match, and, only when the release has no asset (404), leave the build to the action with
//! the key it caches the build under.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use crate::e2e::http;
use crate::e2e::proc::{self, Output};

const TIMEOUT: Duration = Duration::from_secs(60);
const TARGET: &str = "x86_64-unknown-linux-musl";

/// Runs the three cases with `binary` as the release's Linux x86_64 binary. `root` is scratch.
pub fn check(root: &Path, workspace: &Path, binary: &Path, version: &str) -> Result<()> {
    let release = root.join("release");
    let name = format!("memloop-{TARGET}-v{version}");
    let archive_dir = release.join(&name);
    std::fs::create_dir_all(&archive_dir)?;
    std::fs::copy(binary, archive_dir.join("memloop"))?;
    std::fs::copy(workspace.join("README.md"), archive_dir.join("README.md"))?;
    // As the release workflow does: tar czf, then sha256sum into <asset>.sha256.
    let asset = format!("{name}.tar.gz");
    shell(
        &release,
        &format!("tar czf {asset} {name} && sha256sum {asset} > {asset}.sha256"),
    )?;
    std::fs::remove_dir_all(&archive_dir)?;

    let port = serve(release.clone())?;
    let base = format!("http://127.0.0.1:{port}");
    let installer = workspace.join(".github/install-memloop.sh");

    let good = run(&installer, root, workspace, &format!("{base}/"), "good")?;
    ensure!(
        good.success()
            && good
                .stdout
                .contains(&format!("installed memloop {version}")),
        "the action's installer did not install the release binary:\n{}",
        good.report()
    );
    let github_path = std::fs::read_to_string(root.join("good/github_path"))?;
    let bin_dir = PathBuf::from(github_path.trim());
    ensure!(
        bin_dir.join("memloop").is_file(),
        "the installer added {} to GITHUB_PATH, which holds no memloop",
        bin_dir.display()
    );

    let checksum = release.join(format!("{asset}.sha256"));
    let honest = std::fs::read_to_string(&checksum)?;
    let forged = format!("{}{}", "0".repeat(64), &honest[64..]);
    std::fs::write(&checksum, forged)?;
    let tampered = run(&installer, root, workspace, &base, "tampered")?;
    std::fs::write(&checksum, honest)?;
    ensure!(
        tampered.status.and_then(|s| s.code()) == Some(1)
            && tampered.stderr.contains("not installing it")
            && !root.join("tampered/github_path").exists(),
        "the installer should refuse an archive whose sha256 does not match:\n{}",
        tampered.report()
    );

    // No asset: the build is left to the action, named once, with a cache key and its place.
    let missing = run(
        &installer,
        root,
        workspace,
        &format!("{base}/no-such-release"),
        "missing",
    )?;
    let outputs = std::fs::read_to_string(root.join("missing/github_output")).unwrap_or_default();
    let build_root = root.join("missing/tool-cache/memloop-build");
    let github_path = std::fs::read_to_string(root.join("missing/github_path")).unwrap_or_default();
    ensure!(
        missing.success()
            && missing
                .stdout
                .matches(&format!("no release asset {asset}"))
                .count()
                == 1
            && missing.stdout.contains("building memloop")
            && outputs.contains("build=true\n")
            && outputs.contains(&format!("root={}\n", build_root.display()))
            && outputs.contains(&format!("cache-key=memloop-Linux-X64-v{version}-"))
            && github_path.trim() == build_root.join("bin").display().to_string(),
        "without a release asset the installer should leave the build to the action, once, with \
         a cache key:\n{}\nGITHUB_OUTPUT:\n{outputs}\nGITHUB_PATH:\n{github_path}",
        missing.report()
    );
    // The key follows the source: the same source gives the same key.
    let again = run(
        &installer,
        root,
        workspace,
        &format!("{base}/no-such-release"),
        "missing-again",
    )?;
    let key = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("cache-key="))
            .map(str::to_owned)
    };
    let outputs_again =
        std::fs::read_to_string(root.join("missing-again/github_output")).unwrap_or_default();
    ensure!(
        again.success() && key(&outputs).is_some() && key(&outputs) == key(&outputs_again),
        "the cache key should be the same for the same source: {:?} and {:?}",
        key(&outputs),
        key(&outputs_again)
    );
    println!(
        "npm: the action's installer installs a release binary, refuses a bad checksum, leaves a cached build to the action on 404"
    );
    Ok(())
}

fn shell(cwd: &Path, script: &str) -> Result<()> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(cwd);
    let output = proc::run(cmd, TIMEOUT, None)?;
    ensure!(output.success(), "{}", output.report());
    Ok(())
}

/// Runs the installer as a runner would, with its own RUNNER_TEMP and GITHUB_PATH under `case`.
fn run(installer: &Path, root: &Path, workspace: &Path, url: &str, case: &str) -> Result<Output> {
    let dir = root.join(case);
    std::fs::create_dir_all(dir.join("temp"))?;
    let mut cmd = Command::new("bash");
    cmd.arg(installer)
        .current_dir(&dir)
        .env_clear()
        // System tools only: no memloop, and no cargo to build with.
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &dir)
        .env("MEMLOOP_SOURCE", workspace)
        .env("MEMLOOP_REPOSITORY", "example/memloop")
        .env("MEMLOOP_RELEASE_URL", url)
        .env("RUNNER_OS", "Linux")
        .env("RUNNER_ARCH", "X64")
        .env("RUNNER_TEMP", dir.join("temp"))
        .env("RUNNER_TOOL_CACHE", dir.join("tool-cache"))
        .env("GITHUB_PATH", dir.join("github_path"))
        .env("GITHUB_OUTPUT", dir.join("github_output"));
    for tool in ["bash", "curl", "tar", "sha256sum"] {
        ensure!(
            ["/usr/bin", "/bin"]
                .iter()
                .any(|d| Path::new(d).join(tool).exists()),
            "the installer test needs {tool} in /usr/bin or /bin"
        );
    }
    proc::run(cmd, TIMEOUT, None)
}

/// Serves the files of `dir` on 127.0.0.1 (404 for anything else) until the process ends.
fn serve(dir: PathBuf) -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot listen on 127.0.0.1")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let Ok(request) = http::read_request(&stream) else {
                continue;
            };
            let name = request.path().trim_start_matches('/');
            let file = (!name.contains("..") && !name.contains('/'))
                .then(|| std::fs::read(dir.join(name)).ok())
                .flatten();
            let _ = match file {
                Some(bytes) => http::respond(&mut stream, 200, "application/octet-stream", &bytes),
                None => http::respond(&mut stream, 404, "text/plain", b"not found"),
            };
        }
    });
    Ok(port)
}
