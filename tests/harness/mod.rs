//! One named test per case folder (libtest-mimic), so `cargo test claude-md-crlf` runs that one
//! case and a failure names it. The data-driven test files (`cases`, `upgrade`, `doctor`) run
//! with `harness = false` and hand their case runner and plain tests to `run`.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Trial};

/// The case folders under `tests/<dir>` (those holding `case.toml`), sorted.
fn case_dirs(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.toml").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Runs the plain `tests` (each as `#[test]` would: a panic fails it), one test per case folder
/// under `tests/<dir>` named after the folder (`case`'s error is the failure message), and a
/// check that at least `min` folders were found.
pub fn run(
    dir: &'static str,
    min: usize,
    case: fn(&Path) -> Result<(), String>,
    tests: &[(&'static str, fn())],
) -> ! {
    let dirs = case_dirs(dir);
    let found = dirs.len();
    let mut trials: Vec<Trial> = tests
        .iter()
        .map(|&(name, body)| {
            Trial::test(name, move || {
                body();
                Ok(())
            })
        })
        .collect();
    trials.push(Trial::test(
        format!("tests/{dir} holds at least {min} cases"),
        move || {
            if found >= min {
                Ok(())
            } else {
                Err(
                    format!("expected at least {min} case folders in tests/{dir}, found {found}")
                        .into(),
                )
            }
        },
    ));
    for path in dirs {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        trials.push(Trial::test(name, move || case(&path).map_err(Into::into)));
    }
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}
