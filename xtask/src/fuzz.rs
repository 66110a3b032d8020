//! `cargo xtask fuzz [target ...] [--inputs N] [--seed S] [--bound-ms MS] [--quick] [--trace]
//! [--replay FILE] [--list]`: every parser that reads a user's file, fed generated and mutated
//! inputs (seeded from tests/cases, the corpus beside the checkout, and known bad inputs).
//!
//! Runs on an optimized build with debug assertions (`--profile fuzz`, built on first use);
//! `--debug` runs on the calling build instead. By default 1,200,000 inputs in all, split over the targets, with a fixed seed, so a run is
//! reproducible. Failing inputs are saved under target/fuzz-failures/ and can be replayed. `--trace`
//! writes each input to target/fuzz-failures/<target>-current.bin before running it: when an input
//! takes the whole process down (a stack overflow), that file holds it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::fuzz_targets::{Seeds, campaign, replay, save_failure, targets};

const DEFAULT_TOTAL: u64 = 1_200_000;
const QUICK_PER_TARGET: u64 = 2_000;
const DEFAULT_SEED: u64 = 20_261_201;

/// Set on the optimized build `run` hands over to.
const OPTIMIZED: &str = "MEMLOOP_FUZZ_OPTIMIZED";

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let in_place = args.iter().any(|a| a == "--debug" || a == "--list");
    if !in_place && std::env::var_os(OPTIMIZED).is_none() {
        // A debug build runs the parsers some ten times slower; a million inputs want the
        // optimized one.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "run",
                "--quiet",
                "--profile",
                "fuzz",
                "--package",
                "xtask",
                "--",
                "fuzz",
            ])
            .args(args)
            .current_dir(workspace())
            .env(OPTIMIZED, "1")
            .status()
            .context("cannot run cargo")?;
        if !status.success() {
            bail!("the fuzz run failed");
        }
        return Ok(());
    }
    let all = targets();
    let mut chosen: Vec<&str> = Vec::new();
    let mut total = None;
    let mut per_target = None;
    let mut seed = DEFAULT_SEED;
    let mut bound = Duration::from_secs(2);
    let mut trace = false;
    let mut replay_file = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let mut value = |flag: &str| {
            words
                .next()
                .with_context(|| format!("{flag} needs a value"))
                .cloned()
        };
        match word.as_str() {
            "--inputs" => total = Some(value("--inputs")?.replace('_', "").parse()?),
            "--seed" => seed = value("--seed")?.parse()?,
            "--bound-ms" => bound = Duration::from_millis(value("--bound-ms")?.parse()?),
            "--quick" => per_target = Some(QUICK_PER_TARGET),
            "--trace" => trace = true,
            "--debug" => {}
            "--replay" => replay_file = Some(PathBuf::from(value("--replay")?)),
            "--list" => {
                for target in &all {
                    println!("{:18} {}", target.name, target.about);
                }
                return Ok(());
            }
            name if all.iter().any(|t| t.name == name) => chosen.push(name),
            other => bail!(
                "unknown fuzz argument {other:?}; targets: {}",
                all.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    let selected: Vec<_> = all
        .iter()
        .filter(|t| chosen.is_empty() || chosen.contains(&t.name))
        .collect();
    let out = workspace().join("target/fuzz-failures");

    if let Some(file) = replay_file {
        let input =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let mut bad = 0;
        for target in &selected {
            match replay(target, &input) {
                Ok(()) => println!("{:18} ok", target.name),
                Err(problem) => {
                    bad += 1;
                    println!("{:18} FAILED: {problem}", target.name);
                }
            }
        }
        if bad > 0 {
            bail!("{bad} target(s) fail on {}", file.display());
        }
        return Ok(());
    }

    let per_target = per_target.unwrap_or_else(|| {
        total
            .unwrap_or(DEFAULT_TOTAL)
            .div_ceil(selected.len() as u64)
    });
    let seeds = Seeds::load(&workspace());
    println!(
        "fuzz: {} target(s), {per_target} inputs each, seed {seed}, bound {bound:?} per input",
        selected.len()
    );
    println!(
        "{:18} {:>6} {:>9} {:>8} {:>9} {:>9} {:>8}",
        "target", "seeds", "inputs", "secs", "inputs/s", "slowest", "failed"
    );
    let (mut inputs, mut failed, mut secs) = (0u64, 0u64, 0f64);
    let mut saved = Vec::new();
    for target in selected {
        let trace_file = trace.then(|| out.join(format!("{}-current.bin", target.name)));
        if let Some(file) = &trace_file {
            std::fs::create_dir_all(file.parent().unwrap_or(Path::new(".")))?;
        }
        let report = campaign(target, &seeds, per_target, seed, bound, trace_file)
            .map_err(|e| anyhow::anyhow!("{}: {e}", target.name))?;
        let elapsed = report.elapsed.as_secs_f64();
        println!(
            "{:18} {:>6} {:>9} {:>8.1} {:>9.0} {:>8.1}ms {:>8}",
            target.name,
            seeds.count(target),
            report.inputs,
            elapsed,
            report.inputs as f64 / elapsed.max(1e-9),
            report.slowest.as_secs_f64() * 1000.0,
            report.failed
        );
        for (what, count) in &report.notes {
            println!("{:18} note: {count} x {what}", "");
        }
        inputs += report.inputs;
        failed += report.failed;
        secs += elapsed;
        for failure in &report.failures {
            let path = save_failure(&out, target.name, failure)?;
            saved.push(format!(
                "{} #{}: {}\n    input: {} (replay: cargo xtask fuzz {} --replay {})",
                target.name,
                failure.index,
                failure.problem,
                path.display(),
                target.name,
                path.display()
            ));
        }
        if report.hung {
            // The hung worker cannot be stopped; later targets would share its core.
            saved.push(format!("{}: stopped at a hang", target.name));
            break;
        }
    }
    println!(
        "{:18} {:>6} {:>9} {:>8.1} {:>9.0} {:>9} {:>8}",
        "total",
        "",
        inputs,
        secs,
        inputs as f64 / secs.max(1e-9),
        "",
        failed
    );
    if !saved.is_empty() {
        for line in &saved {
            eprintln!("{line}");
        }
        bail!(
            "{failed} failing input(s); the first ones are saved under {}",
            out.display()
        );
    }
    Ok(())
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
