//! The end of `init` and `sync`: the hooks memloop writes (and its embedded memory server) run
//! `memloop` by name, so where it does not resolve on PATH the gate is silently off (typical
//! after `npx memloop init`). Say so, with the command that fixes it for the way this memloop
//! was installed; `memloop doctor` reports the same as an error.

use std::path::Path;

/// The note to print, or `None` when `memloop` resolves on PATH.
pub fn note() -> Option<String> {
    if which::which("memloop").is_ok() {
        return None;
    }
    let exe = std::env::current_exe().ok();
    Some(format!(
        "memloop is not on PATH, and the agents' hooks and memory server run it from there (until it is, \
         the gate is off): {}, then run `memloop doctor`.",
        fix(exe.as_deref())
    ))
}

/// The command that puts this memloop's version on PATH, for how `exe` was installed.
fn fix(exe: Option<&Path>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let Some(exe) = exe else {
        return format!("install it with `npm install -g memloop@{version}`");
    };
    // npx and npm run the binary out of a `node_modules` folder.
    if exe.components().any(|c| c.as_os_str() == "node_modules") {
        return format!("install it with `npm install -g memloop@{version}`");
    }
    // A build in a checkout: <checkout>/target/<profile>/memloop.
    if let Some(checkout) = exe.parent().and_then(Path::parent).and_then(Path::parent)
        && exe
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            == Some("target".as_ref())
        && checkout.join("Cargo.toml").is_file()
    {
        return format!(
            "install it with `cargo install --locked --path {}`",
            checkout.display()
        );
    }
    match exe.parent() {
        Some(dir) => format!(
            "add {} to PATH, or install it with `npm install -g memloop@{version}` or `cargo install --locked memloop`",
            dir.display()
        ),
        None => format!("install it with `npm install -g memloop@{version}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_by_npx_the_fix_is_npm() {
        let exe = Path::new("/home/u/.npm/_npx/1a2b/node_modules/memloop-linux-x64/bin/memloop");
        assert_eq!(
            fix(Some(exe)),
            format!(
                "install it with `npm install -g memloop@{}`",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn built_in_a_checkout_the_fix_is_cargo_install_from_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
        let exe = dir.path().join("target/release/memloop");
        assert_eq!(
            fix(Some(&exe)),
            format!(
                "install it with `cargo install --locked --path {}`",
                dir.path().display()
            )
        );
    }

    #[test]
    fn elsewhere_the_fix_names_its_folder() {
        let fix = fix(Some(Path::new("/opt/tools/memloop")));
        assert!(
            fix.starts_with("add /opt/tools to PATH, or install it with `npm install -g memloop@"),
            "{fix}"
        );
        assert!(fix.ends_with("`cargo install --locked memloop`"), "{fix}");
    }
}
