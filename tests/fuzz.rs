//! The short fuzz run in `cargo test`: every target of `cargo xtask fuzz`, a few thousand
//! inputs in all with a fixed seed, so a failure reproduces. The long run is
//! `cargo xtask fuzz` (a million inputs and more).

// Shared with `cargo xtask fuzz`, which uses the parts this test does not (replay, timings).
#[allow(dead_code)]
#[path = "../xtask/src/fuzz_targets.rs"]
mod fuzz_targets;

use std::path::Path;
use std::time::Duration;

use fuzz_targets::{Seeds, Target, campaign, save_failure, targets};

const INPUTS_PER_TARGET: u64 = 400;
const SEED: u64 = 9;

#[test]
fn every_parser_of_a_users_file_survives_generated_inputs() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let seeds = Seeds::load(workspace);
    let out = workspace.join("target/fuzz-test");
    let mut problems = Vec::new();
    for target in targets() {
        assert!(seeds.count(&target) > 0, "{}: no seeds", target.name);
        // Debug builds are slow; the bound catches hangs, not slowness.
        let report = campaign(
            &target,
            &seeds,
            INPUTS_PER_TARGET,
            SEED,
            Duration::from_secs(20),
            None,
        )
        .unwrap();
        assert!(report.hung || report.inputs == INPUTS_PER_TARGET);
        for failure in &report.failures {
            let saved = save_failure(&out, target.name, failure).unwrap();
            problems.push(format!(
                "{} #{}: {}\n  input saved to {} (replay: cargo xtask fuzz {} --replay <file>)",
                target.name,
                failure.index,
                failure.problem,
                saved.display(),
                target.name
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The harness itself: a parser that panics, breaks its promise or hangs is caught, with the
/// input that did it; and the same seed gives the same inputs.
#[test]
fn the_harness_catches_panics_broken_promises_and_hangs() {
    let seeds = Seeds::load(Path::new(env!("CARGO_MANIFEST_DIR")));
    let bound = Duration::from_millis(300);
    let run = |target| campaign(&target, &seeds, 50, SEED, bound, None).unwrap();

    let panics = run(Target::probe("panics", |_, input| {
        if input.contains(&b'{') {
            panic!("a brace");
        }
        Ok(())
    }));
    assert!(panics.failed > 0 && !panics.hung);
    let failure = &panics.failures[0];
    assert!(failure.problem.contains("a brace"), "{}", failure.problem);
    assert!(failure.input.contains(&b'{'));

    let broken = run(Target::probe("broken", |_, _| Err("promise broken".into())));
    assert_eq!(broken.failed, 50);

    let hangs = run(Target::probe("hangs", |_, input| {
        if input.len() > 10 {
            std::thread::sleep(Duration::from_secs(3));
        }
        Ok(())
    }));
    assert!(hangs.hung);
    assert!(hangs.failures[0].problem.contains("hang"));
    assert!(hangs.failures[0].input.len() > 10);

    // Same seed, same inputs: a failure found once is found again.
    let again = run(Target::probe("panics", |_, input| {
        if input.contains(&b'{') {
            panic!("a brace");
        }
        Ok(())
    }));
    let indices = |report: &fuzz_targets::Report| -> Vec<u64> {
        report.failures.iter().map(|f| f.index).collect()
    };
    assert_eq!(indices(&panics), indices(&again));
}

/// Inputs the long run found, kept in `tests/fuzz_cases/<target>/`, one file each: every one
/// must hold its target's promises from now on.
#[test]
fn inputs_the_fuzzer_found_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_cases");
    let all = targets();
    let mut replayed = 0;
    let mut problems = Vec::new();
    for folder in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = folder.file_name().to_string_lossy().into_owned();
        let target = all
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("tests/fuzz_cases/{name}: no fuzz target of that name"));
        for file in std::fs::read_dir(folder.path()).unwrap().flatten() {
            let input = std::fs::read(file.path()).unwrap();
            replayed += 1;
            if let Err(problem) = fuzz_targets::replay(target, &input) {
                problems.push(format!("{}: {problem}", file.path().display()));
            }
        }
    }
    assert!(replayed > 0, "no kept inputs under {}", dir.display());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
