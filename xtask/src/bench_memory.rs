//! `cargo xtask bench memory`: search quality first (`crate::bench_retrieval`, then merging
//! duplicates: `crate::bench_duplicates`), then what the memory costs at 10,000 and 100,000 notes (generated in
//! the real note format), each figure beside `memloop --version` measured in the same run, so
//! the ratios hold on a loaded machine too.
//!
//! Targets (issue "Memory as a library with a persistent index"):
//!
//! | work | target |
//! |---|---|
//! | session-start hook, warm | median at most 3 ms over `memloop --version`, at 100,000 notes |
//! | session-start hook, cold (no derived files) | exit 0 with an index; 2 s at 100,000, 300 ms at 10,000; the next call warm |
//! | `context_query` over MCP stdio, broad queries | p95 at most 5 ms at 100,000 |
//! | `memory_store` | p95 at most 5 ms at 100,000 |
//! | `memloop serve` peak resident memory | at most 64 MiB at 100,000 |
//! | prompt hook (recall, issue 22), warm | median at most 5 ms over `memloop --version` at 10,000, 10 ms at 100,000 |

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use crate::bench_serve::{Rng, Server, Words, build_release, ms, write_notes};

const USAGE: &str =
    "usage: cargo xtask bench memory [--sizes N,N...] [--keep] [--quality-only] [--relevances]";
const HOOK_RUNS: usize = 30;
const COLD_RUNS: usize = 3;
const QUERIES: usize = 300;
const STORES: usize = 300;

struct Row {
    name: String,
    figure: String,
    target: String,
    ok: bool,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut sizes = vec![10_000usize, 100_000];
    let mut keep = false;
    let mut quality_only = false;
    let mut relevances = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--quality-only" => quality_only = true,
            "--relevances" => relevances = true,
            "--sizes" => {
                sizes = rest
                    .next()
                    .context(USAGE)?
                    .split(',')
                    .map(|n| n.parse().context(USAGE))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--keep" => keep = true,
            _ => bail!("{USAGE}"),
        }
    }
    // Search quality first: in process, a second, and its own verdict.
    let quality = crate::bench_retrieval::report(relevances).and(crate::bench_duplicates::report());
    if quality_only {
        return quality;
    }
    let binary = build_release()?;
    let words = Words::new();
    let mut rows = Vec::new();
    for &size in &sizes {
        let repo = tempfile::Builder::new()
            .prefix("memloop-bench-memory-")
            .tempdir()?;
        std::fs::create_dir(repo.path().join(".git"))?;
        eprintln!("writing {size} notes into {}", repo.path().display());
        write_notes(repo.path(), size, &words)?;
        measure(&binary, repo.path(), size, &words, &mut rows)?;
        if keep {
            println!("repository kept at {}", repo.keep().display());
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nmemloop's memory, release build {}\nload average at the end: {}\n",
        binary.display(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for row in &rows {
        println!(
            "{:<58} {:<34} {:<22} {}",
            row.name,
            row.figure,
            row.target,
            if row.ok { "ok" } else { "MISSED" }
        );
    }
    let missed: Vec<&str> = rows
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.name.as_str())
        .collect();
    if !missed.is_empty() {
        bail!("targets missed: {}", missed.join(", "));
    }
    quality
}

fn measure(
    binary: &Path,
    repo: &Path,
    size: usize,
    words: &Words,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let k = size / 1000;
    let large = size >= 100_000;
    let cache = repo.join(".memloop/cache");

    // Cold: nothing derived, as after `git clone`.
    let cold_limit = if large { 2000.0 } else { 300.0 };
    let mut cold = Vec::new();
    let mut next = Vec::new();
    for _ in 0..COLD_RUNS {
        let _ = std::fs::remove_dir_all(&cache);
        let (took, out) = session_start(binary, repo)?;
        ensure!(
            out.contains("Memory index"),
            "a cold session start gave no index:\n{out}"
        );
        cold.push(took);
        // The next call: warm, or finishing what the cold one left.
        next.push(session_start(binary, repo)?.0);
    }
    let cold_median = median(&mut cold);
    rows.push(Row {
        name: format!("session-start hook, cold, {k}k notes (median of {COLD_RUNS})"),
        figure: format!("{:>9.1} ms", ms(cold_median)),
        target: format!("<= {cold_limit:.0} ms"),
        ok: ms(cold_median) <= cold_limit,
    });
    rows.push(Row {
        name: format!("  the call after it, {k}k"),
        figure: format!("{:>9.1} ms", ms(median(&mut next))),
        target: "info".into(),
        ok: true,
    });

    // Warm, interleaved with `memloop --version` so both see the same machine. The notes are
    // about source files, a third of them changed since: the index checks each shown note.
    let (_, out) = session_start(binary, repo)?;
    ensure!(
        out.contains("(possibly stale: `src/area"),
        "the session start marked no note stale, so its checks are not measured:\n{out}"
    );
    let mut hook = Vec::new();
    let mut version = Vec::new();
    for _ in 0..HOOK_RUNS {
        hook.push(session_start(binary, repo)?.0);
        version.push(version_run(binary)?);
    }
    let (hook_median, version_median) = (median(&mut hook), median(&mut version));
    let over = ms(hook_median) - ms(version_median);
    rows.push(Row {
        name: format!("session-start hook, warm, {k}k (median of {HOOK_RUNS})"),
        figure: format!(
            "{:>7.2} ms ({:+.2} ms over --version {:.2} ms)",
            ms(hook_median),
            over,
            ms(version_median)
        ),
        target: if large {
            "<= 3 ms over".into()
        } else {
            "info".into()
        },
        ok: !large || over <= 3.0,
    });

    prompt_hook_rows(binary, repo, size, words, rows)?;

    let mut server = Server::start(binary, repo)?;
    server.first_query_after_start(words)?;
    let (mut broad, _) = server.queries(words, QUERIES)?;
    let mut rng = Rng(11);
    let mut stores = Vec::new();
    for i in 0..STORES {
        let (took, answer) = server.timed_call("memory_store", words.note(&mut rng, size + i))?;
        ensure!(answer["isError"] == false, "memory_store failed: {answer}");
        stores.push(took);
    }
    let rss_kib = server.peak_rss_kib()?;
    server.close()?;
    let broad_p95 = p95(&mut broad);
    let store_p95 = p95(&mut stores);
    rows.push(Row {
        name: format!("context_query broad, MCP stdio, {k}k ({QUERIES})"),
        figure: format!("p95 {:>7.2} ms", ms(broad_p95)),
        target: if large {
            "p95 <= 5 ms".into()
        } else {
            "info".into()
        },
        ok: !large || ms(broad_p95) <= 5.0,
    });
    rows.push(Row {
        name: format!("memory_store, MCP stdio, {k}k ({STORES})"),
        figure: format!("p95 {:>7.2} ms", ms(store_p95)),
        target: if large {
            "p95 <= 5 ms".into()
        } else {
            "info".into()
        },
        ok: !large || ms(store_p95) <= 5.0,
    });
    rows.push(Row {
        name: format!("memloop serve peak resident memory, {k}k"),
        figure: format!("{:>9.1} MiB", rss_kib as f64 / 1024.0),
        target: if large {
            "<= 64 MiB".into()
        } else {
            "info".into()
        },
        ok: !large || rss_kib <= 64 * 1024,
    });
    Ok(())
}

/// `memloop hook prompt --agent claude` as Claude Code runs it on each prompt (its input on
/// stdin, each run the first prompt of a new session, so the search and the session's state are
/// both paid for), interleaved with `memloop --version`.
fn prompt_hook_rows(
    binary: &Path,
    repo: &Path,
    size: usize,
    words: &Words,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let k = size / 1000;
    let limit = if size >= 100_000 { 10.0 } else { 5.0 };
    let state = tempfile::Builder::new()
        .prefix("memloop-bench-state-")
        .tempdir()?;
    let mut rng = Rng(23);
    let notes: Vec<std::path::PathBuf> = std::fs::read_dir(repo.join(".memloop/memory/notes"))?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .collect();
    ensure!(!notes.is_empty(), "no notes to take prompts from");
    let (mut hook, mut version) = (Vec::new(), Vec::new());
    let mut given = 0;
    for run in 0..HOOK_RUNS {
        // Every other prompt asks about a stored note in its own words (the hook reads and hands
        // on notes), the others in words of the vocabulary's common part (it searches and gives
        // little or nothing).
        let about = if run % 2 == 0 {
            let note = std::fs::read_to_string(&notes[rng.below(notes.len())])?;
            let body = note.rsplit("---\n").next().unwrap_or_default();
            body.split_whitespace()
                .take(8)
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            words.sentence(&mut rng, 6)
        };
        let prompt = format!("Why does {about} fail? Please fix it.");
        let (took, out) =
            prompt_hook(binary, repo, state.path(), &format!("bench-{run}"), &prompt)?;
        given += usize::from(out.contains("memloop recall"));
        hook.push(took);
        version.push(version_run(binary)?);
    }
    let (hook_median, version_median) = (median(&mut hook), median(&mut version));
    let over = ms(hook_median) - ms(version_median);
    rows.push(Row {
        name: format!("prompt hook, warm, {k}k (median of {HOOK_RUNS}, {given} gave notes)"),
        figure: format!(
            "{:>7.2} ms ({:+.2} ms over --version {:.2} ms)",
            ms(hook_median),
            over,
            ms(version_median)
        ),
        target: format!("<= {limit:.0} ms over"),
        ok: over <= limit,
    });
    Ok(())
}

fn prompt_hook(
    binary: &Path,
    repo: &Path,
    state: &Path,
    session: &str,
    prompt: &str,
) -> anyhow::Result<(Duration, String)> {
    use std::io::Write as _;
    let input = serde_json::json!({
        "session_id": session, "cwd": repo, "hook_event_name": "UserPromptSubmit", "prompt": prompt,
    });
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(["hook", "prompt", "--agent", "claude"])
        .current_dir(repo)
        .env_remove("MEMLOOP_ROOT")
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("the hook's stdin")?
        .write_all(input.to_string().as_bytes())?;
    let output = child.wait_with_output()?;
    let took = started.elapsed();
    ensure!(
        output.status.success(),
        "memloop hook prompt failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((took, String::from_utf8_lossy(&output.stdout).into_owned()))
}

/// One `memloop hook session-start --agent text` in `repo`: its wall time and its output.
fn session_start(binary: &Path, repo: &Path) -> anyhow::Result<(Duration, String)> {
    let started = Instant::now();
    let output = Command::new(binary)
        .args(["hook", "session-start", "--agent", "text"])
        .current_dir(repo)
        .env_remove("MEMLOOP_ROOT")
        .stdin(Stdio::null())
        .output()?;
    let took = started.elapsed();
    ensure!(
        output.status.success(),
        "memloop hook session-start failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((took, String::from_utf8_lossy(&output.stdout).into_owned()))
}

fn version_run(binary: &Path) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let status = Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .status()?;
    ensure!(status.success(), "memloop --version failed");
    Ok(started.elapsed())
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn p95(times: &mut [Duration]) -> Duration {
    times.sort();
    times[(times.len() * 95 / 100).min(times.len() - 1)]
}
