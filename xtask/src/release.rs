//! `cargo xtask package` and `cargo xtask set-repository URL`: the crate as crates.io gets it.
//!
//! `package` runs `cargo package --locked` (which builds the packed sources on their own) and
//! checks what it made: the licence files and the README are in, the tests and their fixtures
//! are not, and the `.crate` stays under crates.io's upload limit. `.ci/run` runs it.
//!
//! `set-repository` writes the package's `repository` into Cargo.toml, in place, before the
//! release workflow publishes: the address is the repository the workflow runs in, so nothing is
//! invented here (`cargo binstall` finds the release archives through it).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// crates.io refuses a `.crate` above 10 MB.
const CRATES_IO_LIMIT: u64 = 10 * 1024 * 1024;

/// What a user of the crate needs besides the sources: the licences `license` declares.
const REQUIRED: [&str; 5] = [
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace());
    cmd
}

pub fn package(args: &[String]) -> Result<()> {
    ensure!(
        args.is_empty(),
        "usage: cargo xtask package (takes no arguments)"
    );
    let listed = cargo()
        .args(["package", "--locked", "--list", "--package", "memloop"])
        .output()
        .context("cannot run cargo package --list")?;
    ensure!(
        listed.status.success(),
        "cargo package --list failed:\n{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let files: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    check_files(&files)?;

    let status = cargo()
        .args(["package", "--locked", "--package", "memloop"])
        .status()
        .context("cannot run cargo package")?;
    ensure!(status.success(), "cargo package --locked failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from);
    let version = crate_version()?;
    let path = target.join(format!("package/memloop-{version}.crate"));
    let size = std::fs::metadata(&path)
        .with_context(|| format!("cargo package made no {}", path.display()))?
        .len();
    ensure!(
        size < CRATES_IO_LIMIT,
        "{} is {size} bytes; crates.io takes at most {CRATES_IO_LIMIT}: leave more out with \
         `include` in Cargo.toml",
        path.display()
    );
    println!(
        "package: {} ({} files, {:.1} KiB of crates.io's {} KiB)",
        path.display(),
        files.len(),
        size as f64 / 1024.0,
        CRATES_IO_LIMIT / 1024
    );
    Ok(())
}

/// The crate holds the required files, and no test or fixture.
fn check_files(files: &[String]) -> Result<()> {
    for required in REQUIRED {
        ensure!(
            files.iter().any(|f| f == required),
            "the crate does not hold {required}: add it to `include` in Cargo.toml"
        );
    }
    let stray: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("tests/") || f.starts_with("xtask/") || f.starts_with(".github/"))
        .collect();
    ensure!(
        stray.is_empty(),
        "the crate holds files only the repository needs ({} of them, first {}): keep them out \
         with `include` in Cargo.toml",
        stray.len(),
        stray[..stray.len().min(3)]
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

fn crate_version() -> Result<String> {
    let text = std::fs::read_to_string(workspace().join("Cargo.toml"))?;
    let doc: toml_edit::DocumentMut = text.parse().context("Cargo.toml is not valid TOML")?;
    doc["package"]["version"]
        .as_str()
        .map(str::to_owned)
        .context("Cargo.toml has no [package] version")
}

pub fn set_repository(args: &[String]) -> Result<()> {
    let [url] = args else {
        bail!("usage: cargo xtask set-repository URL (e.g. https://github.com/owner/memloop)");
    };
    let path = workspace().join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let updated = with_repository(&text, url)?;
    std::fs::write(&path, updated).with_context(|| format!("cannot write {}", path.display()))?;
    println!("Cargo.toml: repository = {:?}", url.trim_end_matches('/'));
    Ok(())
}

/// `manifest` with `repository = url` in its `[package]` table, set after `license` when new;
/// everything else as it was.
fn with_repository(manifest: &str, url: &str) -> Result<String> {
    let url = url.trim_end_matches('/');
    ensure!(
        url.starts_with("https://") && url.split('/').count() >= 5,
        "{url:?} is not a repository address like https://github.com/owner/name"
    );
    let mut doc: toml_edit::DocumentMut =
        manifest.parse().context("Cargo.toml is not valid TOML")?;
    let package = doc["package"]
        .as_table_mut()
        .context("Cargo.toml has no [package] table")?;
    if let Some(existing) = package.get_mut("repository") {
        *existing = toml_edit::value(url);
    } else {
        let order: Vec<String> = package.iter().map(|(key, _)| key.to_owned()).collect();
        let after = order.iter().position(|key| key == "license");
        package.insert("repository", toml_edit::value(url));
        // Where a reader looks for it: right after `license` (else last); the rest keeps its order.
        let rank = |key: &str| match (order.iter().position(|k| k == key), after) {
            (Some(i), _) => 2 * i,
            (None, Some(license)) => 2 * license + 1,
            (None, None) => usize::MAX,
        };
        package.sort_values_by(|a, _, b, _| rank(a.get()).cmp(&rank(b.get())));
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[package]\nname = \"memloop\" # the crate\nversion = \"0.1.0\"\n\
        license.workspace = true\ndefault-run = \"memloop\"\n\n[dependencies]\nanyhow = \"1\"\n";

    #[test]
    fn repository_goes_after_license_and_nothing_else_moves() {
        let out = with_repository(MANIFEST, "https://github.com/someone/memloop/").unwrap();
        assert_eq!(
            out,
            MANIFEST.replace(
                "license.workspace = true\n",
                "license.workspace = true\nrepository = \"https://github.com/someone/memloop\"\n"
            )
        );
        // Again: replaced, not added twice.
        let again = with_repository(&out, "https://github.com/other/memloop").unwrap();
        assert_eq!(again.matches("repository").count(), 1);
        assert!(again.contains("repository = \"https://github.com/other/memloop\""));
    }

    #[test]
    fn an_address_that_is_not_a_repository_is_refused() {
        for url in [
            "",
            "github.com/a/b",
            "https://github.com",
            "http://github.com/a/b",
        ] {
            assert!(with_repository(MANIFEST, url).is_err(), "{url:?}");
        }
    }

    #[test]
    fn the_crate_must_hold_the_licences_and_no_tests() {
        let good: Vec<String> = REQUIRED
            .iter()
            .map(|s| s.to_string())
            .chain(["src/main.rs".to_owned()])
            .collect();
        check_files(&good).unwrap();
        let without_licence: Vec<String> = good
            .iter()
            .filter(|f| *f != "LICENSE-MIT")
            .cloned()
            .collect();
        assert!(check_files(&without_licence).is_err());
        let mut with_fixture = good.clone();
        with_fixture.push("tests/cases/x/in/repo/AGENTS.md".to_owned());
        assert!(check_files(&with_fixture).is_err());
    }
}
