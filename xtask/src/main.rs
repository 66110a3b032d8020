//! Maintainer tasks: `cargo xtask <task>`. Each task lives in its own module.

use std::process::ExitCode;

mod action_install;
mod bench_cli;
mod bench_duplicates;
mod bench_gate;
mod bench_memory;
mod bench_retrieval;
mod bench_serve;
mod corpus;
mod e2e;
mod fuzz;
mod fuzz_targets;
mod man;
mod npm;
mod release;

const USAGE: &str = "usage: cargo xtask <task> [args]

tasks:
  e2e                 drive the pinned real agents against memloop's output (loopback only)
  bench cli|doctor    memloop sync, diff and doctor on an installed repository, whole process
                      (target: each median under 20 ms)
  bench gate          the Stop gate against a Python re-read baseline, whole process
  bench memory        search quality on notes cut from public projects' docs (tests/retrieval/
                      projects.json: recall@1, recall@5, MRR per kind of query against a textbook
                      BM25, the share answered `nothing matched well`; --quality-only stops there),
                      then the memory at 10,000 and 100,000 notes: session start warm and cold,
                      context_query, memory_store and the server's memory, against memloop --version
  bench serve         the embedded memory server at 10,000 notes (and 100,000: --large N, 0 skips):
                      broad and narrow context_query, memory_store, start, memory, session-start
                      index, recall@5 on tests/retrieval/set.json
  fuzz [target...]    every parser of a user's file under generated inputs (1,200,000 by default;
                      --quick, --inputs N, --seed S, --bound-ms MS, --trace, --replay FILE, --list)
  corpus [dir]        sync/uninstall round trips over the real-world corpus (default ../shared/corpus)
  man [dir]           write the man pages (memloop.1, memloop-<command>.1; default target/man)
  npm test|pack       the npm packages: `test` packs this machine's from the local release build,
                      installs them offline and runs npx memloop init and doctor; `pack` builds
                      the tarballs for the release workflow
  package             cargo package --locked, then check the .crate: licences in, tests out,
                      under crates.io's 10 MB
  set-repository URL  write the package's `repository` into Cargo.toml (the release workflow,
                      before it publishes)
  schema              write assets/memloop.schema.json from the config types";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    let result = match (
        args.first().map(String::as_str),
        rest.first().map(String::as_str),
    ) {
        (Some("schema"), _) => write_schema(),
        (Some("corpus"), _) => corpus::run(rest),
        (Some("e2e"), _) => e2e::run(rest),
        (Some("fuzz"), _) => fuzz::run(rest),
        (Some("man"), _) => man::run(rest),
        (Some("npm"), _) => npm::run(rest),
        (Some("package"), _) => release::package(rest),
        (Some("set-repository"), _) => release::set_repository(rest),
        (Some("bench"), Some("cli" | "doctor")) => bench_cli::run(&rest[1..]),
        (Some("bench"), Some("gate")) => bench_gate::run(&rest[1..]),
        (Some("bench"), Some("serve")) => bench_serve::run(&rest[1..]),
        (Some("bench"), Some("memory")) => bench_memory::run(&rest[1..]),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn write_schema() -> anyhow::Result<()> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/memloop.schema.json");
    std::fs::write(&path, memloop::config::json_schema())?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Builds the memloop binary (debug) and returns its path.
pub fn build_memloop() -> anyhow::Result<std::path::PathBuf> {
    build_memloop_with("debug")
}

/// Builds the memloop binary with the release profile and returns its path.
pub fn build_memloop_release() -> anyhow::Result<std::path::PathBuf> {
    build_memloop_with("release")
}

fn build_memloop_with(profile: &str) -> anyhow::Result<std::path::PathBuf> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = std::process::Command::new(cargo);
    build
        .args([
            "build",
            "--quiet",
            "--package",
            "memloop",
            "--bin",
            "memloop",
        ])
        .current_dir(&workspace);
    if profile == "release" {
        build.arg("--release");
    }
    anyhow::ensure!(
        build.status()?.success(),
        "cargo build ({profile}) of memloop failed"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), std::path::PathBuf::from);
    Ok(target.join(profile).join("memloop"))
}
