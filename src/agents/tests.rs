//! The upgrade runner over the agents' real migrations: what applies, what waits for consent,
//! and what is refused.

use crate::agents::migrations;
use crate::upgrade::tests::{env, world};
use crate::upgrade::{Applied, pending_in, plan};

const LEGACY_KIMI: &str = "# mine\ndefault_model = \"k\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n";
const FLAT_STOP: &str = "{\"hooks\": {\"Stop\": [{\"type\": \"command\", \"command\": \"memloop hook stop --agent claude\"}]}}\n";

#[test]
fn pending_lists_what_applies_and_writes_nothing() {
    let (dir, repo) = world(&[
        ("home/.kimi/config.toml", LEGACY_KIMI),
        ("repo/.claude/settings.json", FLAT_STOP),
    ]);
    let home = dir.path().join("home");
    let ids = pending_in(&env(&home, &repo, true), &migrations()).unwrap();
    // The Stop hook moved over to Kimi Code gets its session-start pair there; Claude's
    // reshaped Stop hook gets the approvals of memloop's own tools beside it.
    assert_eq!(
        ids,
        [
            "claude-hook-shape",
            "claude-approve-tools",
            "kimi-legacy-to-code",
            "kimi-session-start"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".kimi/config.toml")).unwrap(),
        LEGACY_KIMI
    );
    assert!(!home.join(".kimi-code").exists());
}

#[test]
fn pending_is_empty_when_nothing_applies() {
    let (dir, repo) = world(&[(
        "home/.kimi-code/config.toml",
        "[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n\n\
         [[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"memloop hook session-start --agent kimi\"\n\
         timeout = 10\n\n[[hooks]]\nevent = \"PreCompact\"\ncommand = \"memloop hook pre-compact --agent kimi\"\n\
         timeout = 10\n",
    )]);
    let ids = pending_in(&env(&dir.path().join("home"), &repo, true), &migrations()).unwrap();
    assert!(ids.is_empty(), "{ids:?}");
}

#[test]
fn user_files_without_consent_are_held_not_applied() {
    let (dir, repo) = world(&[
        ("home/.kimi/config.toml", LEGACY_KIMI),
        ("repo/.claude/settings.json", FLAT_STOP),
    ]);
    let plan = plan(&env(&dir.path().join("home"), &repo, false), &migrations()).unwrap();
    let ids = |list: &[Applied]| list.iter().map(|a| a.id).collect::<Vec<_>>();
    assert_eq!(
        ids(&plan.applied),
        ["claude-hook-shape", "claude-approve-tools"]
    );
    assert_eq!(ids(&plan.held), ["kimi-legacy-to-code"]);
    let changed: Vec<String> = plan
        .files
        .changes()
        .into_iter()
        .map(|(c, _, _)| c.target.display)
        .collect();
    assert_eq!(changed, [".claude/settings.json"]);
}

#[test]
fn an_unparsable_file_is_refused_with_its_position() {
    let (dir, repo) = world(&[("home/.kimi/config.toml", "[[hooks]\nevent = 1\n")]);
    let err = pending_in(&env(&dir.path().join("home"), &repo, true), &migrations()).unwrap_err();
    assert!(
        err.to_string().starts_with("~/.kimi/config.toml:1:"),
        "{err}"
    );
}
