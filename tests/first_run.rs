//! The first run as a new user meets it: memloop not on PATH after `npx memloop init`, one
//! person's approval kept out of git, and uninstall naming only what it did.

mod trees;

use trees::Sandbox;

const NOT_ON_PATH: &str =
    "memloop is not on PATH, and the agents' hooks and memory server run it from there";

#[test]
fn sync_says_when_the_hooks_cannot_find_memloop_and_how_to_fix_it() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    let out = sandbox.ok(&["sync"]);
    assert!(out.contains(NOT_ON_PATH), "{out}");
    // This memloop is a build in a checkout: the fix installs that checkout.
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        out.contains(&format!(
            "install it with `cargo install --locked --path {}`",
            checkout.display()
        )),
        "{out}"
    );
    // The doctor keeps its error.
    let doctor = sandbox.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("`memloop` is not on PATH"));

    // With memloop on PATH, not a word about it.
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memloop"), sandbox.bin.join("memloop")).unwrap();
    let out = sandbox.ok(&["sync"]);
    assert!(!out.contains("not on PATH"), "{out}");
}

#[test]
fn one_persons_approval_is_git_ignored_and_revoking_takes_the_line_back() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    let exclude = sandbox.repo.join(".git/info/exclude");
    let before = "# the user's own\n*.swp\n";
    std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
    std::fs::write(&exclude, before).unwrap();

    let out = sandbox.ok(&["trust", "--yes"]);
    assert!(sandbox.exists(".claude/settings.local.json"), "{out}");
    assert!(
        out.contains("git-ignored: .claude/settings.local.json"),
        "{out}"
    );
    let listed = std::fs::read_to_string(&exclude).unwrap();
    assert!(listed.starts_with(before), "{listed}");
    assert!(
        listed.ends_with("\n/.claude/settings.local.json\n"),
        "{listed}"
    );
    // Once: trusting again adds nothing.
    sandbox.ok(&["sync"]);
    assert_eq!(std::fs::read_to_string(&exclude).unwrap(), listed);

    sandbox.ok(&["trust", "--revoke", "--yes"]);
    assert!(!sandbox.exists(".claude/settings.local.json"));
    assert_eq!(std::fs::read_to_string(&exclude).unwrap(), before);
}

#[test]
fn uninstall_names_only_what_it_removed_and_says_the_notes_stay() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    sandbox.write(".memloop/memory/note.md", "a note\n");

    let first = sandbox.ok(&["uninstall", "--yes"]);
    assert!(
        first.contains("removed") || first.contains("deleted"),
        "{first}"
    );
    assert!(first.contains(".mcp.json"), "{first}");
    // Trust was never given: its files are not named.
    assert!(!first.contains(".claude.json"), "{first}");
    assert!(!first.contains("settings.local.json"), "{first}");
    assert!(!first.contains("unchanged"), "{first}");
    assert!(
        first.contains("The notes under .memloop/ are kept") && first.contains("`rm -r .memloop`"),
        "{first}"
    );
    assert!(sandbox.exists(".memloop/memory/note.md"));

    let second = sandbox.ok(&["uninstall", "--yes"]);
    assert!(
        second.contains("nothing of memloop's to remove"),
        "{second}"
    );
    assert!(!second.contains("unchanged"), "{second}");
    assert!(!second.contains(".mcp.json"), "{second}");
}
