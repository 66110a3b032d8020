//! `cargo xtask bench cli`: `memloop sync` and `memloop diff` on an already installed repository,
//! whole process, release build. Target: median under 20 ms. The anchor, measured in the same
//! run, is `memloop --version` (process start and exit only), so the ratio shows the work itself.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};

const RUNS: usize = 40;
const TARGET: Duration = Duration::from_millis(20);

pub fn run(_args: &[String]) -> anyhow::Result<()> {
    let memloop = crate::build_memloop_release()?;
    let temp = tempfile::tempdir()?;
    let (repo, home) = (temp.path().join("repo"), temp.path().join("home"));
    std::fs::create_dir_all(repo.join(".git"))?;
    std::fs::create_dir_all(&home)?;
    std::fs::write(repo.join("CLAUDE.md"), "# Project\n\nSome instructions.\n")?;
    let command = |args: &[&str]| {
        let mut cmd = Command::new(&memloop);
        cmd.args(args)
            .current_dir(&repo)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("XDG_STATE_HOME", home.join("state"))
            .stdout(Stdio::null())
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

    let anchor = measure(|| command(&["--version"]), 0)?;
    let sync = measure(|| command(&["sync"]), 0)?;
    let diff = measure(|| command(&["diff"]), 0)?;
    println!(
        "{:<28} {:>9} {:>9} {:>9} {:>8}",
        "command (installed repo)", "min", "median", "max", "÷anchor"
    );
    for (name, times) in [
        ("memloop --version (anchor)", &anchor),
        ("memloop sync", &sync),
        ("memloop diff", &diff),
    ] {
        println!(
            "{name:<28} {:>9} {:>9} {:>9} {:>7.1}x",
            ms(times[0]),
            ms(median(times)),
            ms(times[times.len() - 1]),
            median(times).as_secs_f64() / median(&anchor).as_secs_f64()
        );
    }
    let slow: Vec<&str> = [("sync", &sync), ("diff", &diff)]
        .into_iter()
        .filter(|(_, t)| median(t) >= TARGET)
        .map(|(n, _)| n)
        .collect();
    if !slow.is_empty() {
        bail!(
            "median over {} ms for: {}",
            TARGET.as_millis(),
            slow.join(", ")
        );
    }
    println!("sync and diff medians are under {} ms", TARGET.as_millis());
    Ok(())
}

/// Runs the command `RUNS` times (after one warm-up) and returns the sorted wall times.
fn measure(make: impl Fn() -> Command, expected_code: i32) -> anyhow::Result<Vec<Duration>> {
    make().status().context("warm-up run")?;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = make().output()?;
        times.push(start.elapsed());
        ensure!(
            out.status.code() == Some(expected_code),
            "exit {:?}: {}",
            out.status.code(),
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
