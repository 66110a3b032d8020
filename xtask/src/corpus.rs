//! `cargo xtask corpus <dir>`: the real-world config corpus (shared/corpus) as test input.
//!
//! Each file is placed where its agent reads it, in a throw-away repository, as it is and as
//! CRLF and BOM variants. Then `memloop sync` must keep every byte it does not own (the original
//! is the synced file minus inserted hunks), and `memloop uninstall` must give the original back
//! byte for byte: once with the install state of this machine, once without it (a fresh clone,
//! where memloop removes its fragments by parsing). Files an agent itself rejects must be
//! refused, untouched.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use similar::{DiffOp, capture_diff_slices};

/// Corpus files the agents themselves reject, which memloop must refuse rather than "fix".
const REJECTED_BY_AGENT: &[(&str, &str)] = &[(
    "claude-settings/Automaat__dotfiles__dot_claude_settings.json",
    "trailing comma in strict JSON",
)];

/// A server name no corpus file uses, so that every file takes the round trip (a taken name is
/// a conflict memloop refuses; tests/cases covers that).
const CONFIG: &str =
    "agents = [\"claude\", \"opencode\", \"kimi\"]\n[server]\nname = \"memloop-corpus\"\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Original,
    Crlf,
    Bom,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Original, Variant::Crlf, Variant::Bom];

    fn name(self) -> &'static str {
        match self {
            Variant::Original => "as is",
            Variant::Crlf => "CRLF",
            Variant::Bom => "BOM",
        }
    }

    fn apply(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Variant::Original => bytes.to_vec(),
            Variant::Crlf => String::from_utf8_lossy(bytes)
                .replace('\n', "\r\n")
                .into_bytes(),
            Variant::Bom => [b"\xef\xbb\xbf".as_slice(), bytes].concat(),
        }
    }
}

/// Where a corpus file goes: inside the repository or in the user's home.
fn placement(kind: &str, name: &str) -> Option<(bool, &'static str)> {
    Some(match kind {
        "claude-settings" => (false, ".claude/settings.json"),
        "mcp-json" => (false, ".mcp.json"),
        "opencode" if name.ends_with(".jsonc") => (false, "opencode.jsonc"),
        "opencode" => (false, "opencode.json"),
        "kimi" if name.ends_with("mcp.json") => (false, ".kimi-code/mcp.json"),
        "kimi" if name.ends_with(".kimi_config.toml") => (true, ".kimi-code/config.toml"),
        "kimi" => (true, ".kimi-code/config.toml"),
        "claude-md" => (false, "CLAUDE.md"),
        "agents-md" => (false, "AGENTS.md"),
        _ => return None,
    })
}

struct Tally {
    files: usize,
    runs: usize,
    refused_as_expected: usize,
    surgical_exact: usize,
    surgical_total: usize,
    surgical_kept: Vec<String>,
    failures: Vec<String>,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.first().map_or("../shared/corpus", String::as_str));
    if !dir.is_dir() {
        bail!(
            "{} is not a folder; pass the corpus folder: cargo xtask corpus ../shared/corpus",
            dir.display()
        );
    }
    let memloop = crate::build_memloop()?;
    let mut tally = Tally {
        files: 0,
        runs: 0,
        refused_as_expected: 0,
        surgical_exact: 0,
        surgical_total: 0,
        surgical_kept: Vec::new(),
        failures: Vec::new(),
    };
    let mut kinds: Vec<PathBuf> = fs_list(&dir)?.into_iter().filter(|p| p.is_dir()).collect();
    kinds.sort();
    for kind_dir in kinds {
        let kind = kind_dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files = fs_list(&kind_dir)?;
        files.sort();
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let Some((in_home, rel)) = placement(&kind, &name) else {
                continue;
            };
            tally.files += 1;
            let bytes = std::fs::read(&file)?;
            let id = format!("{kind}/{name}");
            let rejected = REJECTED_BY_AGENT.iter().any(|(f, _)| *f == id);
            for variant in Variant::ALL {
                tally.runs += 1;
                let label = format!("{id} ({})", variant.name());
                if let Err(err) = check(
                    &memloop,
                    &variant.apply(&bytes),
                    in_home,
                    rel,
                    rejected,
                    &mut tally,
                ) {
                    tally.failures.push(format!("{label}: {err:#}"));
                }
            }
        }
    }
    println!(
        "corpus: {} files, {} runs ({} variants each); {} refused as the agent would; \
         surgical uninstall (no install state) byte-identical in {} of {}",
        tally.files,
        tally.runs,
        Variant::ALL.len(),
        tally.refused_as_expected,
        tally.surgical_exact,
        tally.surgical_total
    );
    if std::env::var_os("MEMLOOP_CORPUS_VERBOSE").is_some() {
        for kept in &tally.surgical_kept {
            println!("surgical uninstall kept: {kept}");
        }
    }
    if !tally.failures.is_empty() {
        bail!(
            "{} corpus runs failed:\n{}",
            tally.failures.len(),
            tally.failures.join("\n")
        );
    }
    println!("{} passed, 0 failed", tally.runs);
    Ok(())
}

fn fs_list(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    Ok(std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?)
}

struct Sandbox {
    _temp: tempfile::TempDir,
    repo: PathBuf,
    home: PathBuf,
}

impl Sandbox {
    fn run(&self, memloop: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Command::new(memloop)
            .args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.home.join("bin"))
            .env("XDG_STATE_HOME", self.home.join("state"))
            .env("NO_COLOR", "1")
            .output()
            .context("cannot run memloop")
    }
}

/// Whether every byte of `original` is still in `after`, in order: sync only added. A diff's
/// count of deleted bytes is not exact here (Myers may pair an insertion of text like the
/// surrounding lines with a replacement), so the diff only describes a failure.
fn is_subsequence(original: &[u8], after: &[u8]) -> bool {
    let mut rest = after.iter();
    original.iter().all(|byte| rest.any(|b| b == byte))
}

fn check(
    memloop: &Path,
    original: &[u8],
    in_home: bool,
    rel: &str,
    rejected: bool,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let sandbox = Sandbox {
        repo: temp.path().join("repo"),
        home: temp.path().join("home"),
        _temp: temp,
    };
    std::fs::create_dir_all(sandbox.repo.join(".git"))?;
    std::fs::create_dir_all(sandbox.home.join("bin"))?;
    std::fs::write(sandbox.repo.join("memloop.toml"), CONFIG)?;
    let path = if in_home {
        sandbox.home.join(rel)
    } else {
        sandbox.repo.join(rel)
    };
    std::fs::create_dir_all(path.parent().unwrap())?;
    std::fs::write(&path, original)?;

    let synced = sandbox.run(memloop, &["sync", "--user-scope"])?;
    let stderr = String::from_utf8_lossy(&synced.stderr);
    if rejected {
        if synced.status.code() != Some(2) || std::fs::read(&path)? != original {
            bail!(
                "expected a clean refusal (exit 2, file untouched), got {:?}: {stderr}",
                synced.status.code()
            );
        }
        tally.refused_as_expected += 1;
        return Ok(());
    }
    if !synced.status.success() {
        bail!("sync failed ({:?}): {stderr}", synced.status.code());
    }
    let after = std::fs::read(&path)?;
    if !is_subsequence(original, &after) {
        let removed: usize = capture_diff_slices(similar::Algorithm::Myers, original, &after)
            .iter()
            .map(|op| match op {
                DiffOp::Delete { old_len, .. } | DiffOp::Replace { old_len, .. } => *old_len,
                _ => 0,
            })
            .sum();
        bail!(
            "sync changed {removed} byte(s) memloop does not own:\n{}",
            String::from_utf8_lossy(&after)
        );
    }
    let again = sandbox.run(memloop, &["diff"])?;
    if again.status.code() != Some(0) {
        bail!(
            "a second sync would still change files:\n{}",
            String::from_utf8_lossy(&again.stdout)
        );
    }

    // The same install, uninstalled once with and once without this machine's install state.
    let installed = std::fs::read(&path)?;
    uninstall(&sandbox, memloop)?;
    let restored = std::fs::read(&path).unwrap_or_default();
    if restored != original {
        bail!(
            "uninstall did not give the original bytes back:\n{}",
            String::from_utf8_lossy(&restored)
        );
    }
    let left: Vec<String> = leftovers(&sandbox.repo)?
        .into_iter()
        .filter(|file| in_home || file != rel)
        .collect();
    if !left.is_empty() {
        bail!("uninstall left files memloop created: {}", left.join(", "));
    }

    let redo = sandbox.run(memloop, &["sync", "--user-scope"])?;
    if !redo.status.success() || std::fs::read(&path)? != installed {
        bail!(
            "sync after uninstall did not reinstall the same bytes: {}",
            String::from_utf8_lossy(&redo.stderr)
        );
    }
    std::fs::remove_dir_all(sandbox.home.join("state"))?;
    uninstall(&sandbox, memloop)?;
    tally.surgical_total += 1;
    let left = std::fs::read(&path).unwrap_or_default();
    if left == original {
        tally.surgical_exact += 1;
    } else {
        let (before, after) = (
            String::from_utf8_lossy(original),
            String::from_utf8_lossy(&left),
        );
        let diff = similar::TextDiff::from_lines(before.as_ref(), after.as_ref())
            .unified_diff()
            .to_string();
        tally.surgical_kept.push(format!("{rel}:\n{diff}"));
    }
    Ok(())
}

fn uninstall(sandbox: &Sandbox, memloop: &Path) -> anyhow::Result<()> {
    let out = sandbox.run(memloop, &["uninstall", "--yes"])?;
    if !out.status.success() {
        bail!("uninstall failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Files in the repository other than memloop.toml and the ones the test put there.
fn leftovers(repo: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![repo.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let rel = path.strip_prefix(repo)?.to_string_lossy().into_owned();
            if rel == ".git" || rel == "memloop.toml" {
                continue;
            }
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else {
                out.push(rel);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::is_subsequence;

    #[test]
    fn only_additions_keep_the_original_as_a_subsequence() {
        assert!(is_subsequence(
            b"{\n  \"a\": [1]\n}",
            b"{\n  \"a\": [1, 2],\n  \"b\": 3\n}"
        ));
        assert!(!is_subsequence(b"{\"a\": 1, \"z\": 2}", b"{\"a\": 1}"));
        assert!(!is_subsequence(b"ab", b"ba"));
    }
}
