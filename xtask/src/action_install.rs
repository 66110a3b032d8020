//! The GitHub Action's installer (.github/install-memloop.sh) against a release on loopback:
//! archives named and checksummed as .github/workflows/release.yml makes them, served by a small
//! HTTP server on 127.0.0.1. It must install a matching binary, refuse one whose checksum does
//! not match, and fall back to `cargo install` only when the release has no asset (404).

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

    // No asset: the fallback is chosen. cargo is kept off PATH, so it stops there (no build).
    let missing = run(
        &installer,
        root,
        workspace,
        &format!("{base}/no-such-release"),
        "missing",
    )?;
    ensure!(
        missing
            .stdout
            .contains(&format!("no release asset {asset}"))
            && missing.stdout.contains("building memloop")
            && !root.join("missing/github_path").exists(),
        "without a release asset the installer should fall back to cargo install:\n{}",
        missing.report()
    );
    println!(
        "npm: the action's installer installs a release binary, refuses a bad checksum, falls back on 404"
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
        .env("GITHUB_PATH", dir.join("github_path"));
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
