//! Merging duplicate notes, the second part of `cargo xtask bench memory`'s quality figures
//! (`--quality-only` includes it): the restatements and near misses of
//! tests/duplicates/set.json asked of a store holding the 91 real notes of
//! tests/retrieval/projects.json, the way `memory_store` asks.
//!
//! Targets (issue 23 §2): at least 95% of the restatements merged into the note they restate,
//! and no two different facts ever merged (near misses, and every pair of two stored notes).

use anyhow::ensure;

#[path = "../../tests/duplicates/eval.rs"]
mod eval;

/// Prints the figures; fails when a target is missed.
pub fn report() -> anyhow::Result<()> {
    let report = eval::run();
    println!(
        "\nmerging duplicates (tests/duplicates/set.json over the notes of tests/retrieval/projects.json)\n"
    );
    println!(
        "restatements merged into their note   {:>3} of {:<4} recall {:.3}",
        report.merged,
        report.duplicates,
        report.recall()
    );
    println!(
        "restatements merged into another note {:>3}",
        report.merged_elsewhere.len()
    );
    println!(
        "near misses merged                    {:>3} of {}",
        report.near_merged.len(),
        report.near_misses
    );
    println!(
        "pairs of two stored notes merged      {:>3} of {}",
        report.distinct_merged.len(),
        report.distinct_pairs
    );
    println!(
        "stored notes merged while filling     {:>3}",
        report.merged_at_load.len()
    );
    println!(
        "merge precision                       {:.3}",
        report.precision()
    );
    for (note, went) in &report.contradictions {
        println!(
            "contradiction of {note}: {}",
            match went {
                Some(into) => format!("merged into {into} (the newer text replaces it)"),
                None => "kept as a note of its own".into(),
            }
        );
    }
    if !report.missed.is_empty() {
        println!("\nrestatements kept as notes of their own:");
        for miss in &report.missed {
            println!("  {miss}");
        }
    }
    for wrong in report
        .merged_elsewhere
        .iter()
        .chain(&report.near_merged)
        .chain(&report.distinct_merged)
        .chain(&report.merged_at_load)
    {
        println!("  WRONG MERGE {wrong}");
    }
    ensure!(
        report.recall() >= 0.95 && report.false_merges() == 0,
        "duplicate merging targets missed: recall {:.3} (at least 0.95), {} wrong merges (0)",
        report.recall(),
        report.false_merges()
    );
    println!("\nduplicate merging targets met");
    Ok(())
}
