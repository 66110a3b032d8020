//! `cargo xtask bench cli` (also `bench doctor`): `memloop sync`, `memloop diff` and `memloop
//! doctor` (without `--live`) on an already installed repository, whole process, release build.
//! Target: each median under 20 ms. The anchor, measured in the same run, is `memloop --version`
//! (process start and exit only), so the ratio shows the work itself.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

const RUNS: usize = 40;
const TARGET: Duration = Duration::from_millis(20);

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    let memloop = crate::build_memloop_release()?;
    let bin_dir = memloop
        .parent()
        .context("the binary has a folder")?
        .to_path_buf();
    let temp = tempfile::tempdir()?;
    let (repo, home) = (temp.path().join("repo"), temp.path().join("home"));
    std::fs::create_dir_all(repo.join(".git"))?;
    std::fs::create_dir_all(&home)?;
    std::fs::write(repo.join("CLAUDE.md"), "# Project\n\nSome instructions.\n")?;
    // The hooks need `memloop` on PATH, as on a developer's machine (doctor checks it).
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    let command = |args: &[&str]| {
        let mut cmd = Command::new(&memloop);
        cmd.args(args)
            .current_dir(&repo)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .env("XDG_STATE_HOME", home.join("state"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    let init = command(&[
        "init",
        "--yes",
        "--agents",
        "claude,opencode,kimi",
        "--user-scope",
    ])
    .output()?;
    ensure!(
        init.status.success(),
        "memloop init failed: {}",
        String::from_utf8_lossy(&init.stderr)
    );

    let anchor = measure(|| command(&["--version"]))?;
    let measured = [
        ("memloop sync", measure(|| command(&["sync"]))?),
        ("memloop diff", measure(|| command(&["diff"]))?),
        ("memloop doctor", measure(|| command(&["doctor"]))?),
        (
            "memloop doctor --format json",
            measure(|| command(&["doctor", "--format", "json"]))?,
        ),
    ];
    println!(
        "{:<32} {:>9} {:>9} {:>9} {:>8}",
        "command (installed repo)", "min", "median", "max", "÷anchor"
    );
    let rows = std::iter::once(("memloop --version (anchor)", &anchor))
        .chain(measured.iter().map(|(n, t)| (*n, t)));
    for (name, times) in rows {
        println!(
            "{name:<32} {:>9} {:>9} {:>9} {:>7.1}x",
            ms(times[0]),
            ms(median(times)),
            ms(times[times.len() - 1]),
            median(times).as_secs_f64() / median(&anchor).as_secs_f64()
        );
    }
    let slow: Vec<&str> = measured
        .iter()
        .filter(|(_, t)| median(t) >= TARGET)
        .map(|(n, _)| *n)
        .collect();
    if !slow.is_empty() {
        bail!(
            "median over {} ms for: {}",
            TARGET.as_millis(),
            slow.join(", ")
        );
    }
    println!("every median is under {} ms", TARGET.as_millis());
    Ok(())
}

/// Runs the command `RUNS` times (after one warm-up, which also fills the version cache) and
/// returns the sorted wall times; every run must succeed.
fn measure(make: impl Fn() -> Command) -> anyhow::Result<Vec<Duration>> {
    make().status().context("warm-up run")?;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = make().output()?;
        times.push(start.elapsed());
        ensure!(
            out.status.success(),
            "exit {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    times.sort();
    Ok(times)
}

fn median(times: &[Duration]) -> Duration {
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
