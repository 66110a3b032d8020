//! Duplicates merged, corrections kept, through the real `memloop serve` (issue 23 §2): the tool
//! answer names the note it updated, the files hold one note per fact, and a correction under a
//! key replaces the old text.

mod serve_support;

use std::fs;

use serde_json::json;
use serve_support::*;

const TAGS: [&str; 2] = ["tokio", "tests"];

#[tokio::test]
async fn storing_a_fact_again_updates_its_note_and_says_which() {
    let repo = Repo::new();
    let server = connect(repo.path()).await;
    let first = ok(
        &server,
        "memory_store",
        json!({"content": "Documentation tests are run with `cargo test --doc`. The example should be written from the point of view of a user of the `tokio` crate, via the facade.",
               "category": "patterns", "importance": 6, "tags": TAGS}),
    )
    .await;
    let id = first["id"].as_str().unwrap().to_owned();
    assert!(first.get("updated").is_none(), "{first}");

    let again = ok(
        &server,
        "memory_store",
        json!({"content": "Documentation tests run with `cargo test --doc`; write each example from the point of view of a user of the `tokio` crate, through the facade.",
               "category": "patterns", "importance": 5, "tags": ["doctest", "tokio"]}),
    )
    .await;
    assert_eq!(again["id"], json!(id), "{again}");
    assert_eq!(again["updated"], json!(id), "{again}");
    let note = again["note"].as_str().unwrap();
    assert!(
        note.contains(&id) && note.contains("no second note"),
        "{note}"
    );
    assert_eq!(repo.note_files().len(), 1);

    // A different fact in many of the same words is a note of its own.
    let other = ok(
        &server,
        "memory_store",
        json!({"content": "Unit tests are run with `cargo test --lib`; they test private functions the public API cannot reach.",
               "category": "patterns", "importance": 5, "tags": TAGS}),
    )
    .await;
    assert_ne!(other["id"], json!(id));
    assert!(other.get("updated").is_none(), "{other}");
    assert_eq!(repo.note_files().len(), 2);

    let found = ok(
        &server,
        "context_query",
        json!({"query": "documentation tests facade"}),
    )
    .await;
    assert_eq!(found["notes"][0]["id"], json!(id), "{found}");
    assert!(
        found["notes"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Documentation tests run with"),
        "{found}"
    );
    assert!(found["notes"][0]["updated"].is_string(), "{found}");
    assert_eq!(found["notes"][0]["importance"], json!(6), "{found}");
    close(server).await;
}

#[tokio::test]
async fn a_correction_under_the_same_key_replaces_the_note() {
    let repo = Repo::new();
    let server = connect(repo.path()).await;
    let first = ok(
        &server,
        "memory_store",
        json!({"content": "Spanish VAT rounds per order total.", "category": "gotchas",
               "importance": 7, "tags": ["vat", "checkout"], "key": "vat-rounding"}),
    )
    .await;
    let id = first["id"].as_str().unwrap().to_owned();
    let fixed = "Spanish VAT rounds per line, not per order total: rounding the total is a cent off on multi-item orders.";
    let again = ok(
        &server,
        "memory_store",
        json!({"content": fixed, "category": "gotchas", "importance": 7,
               "tags": ["vat", "rounding"], "key": "VAT rounding"}),
    )
    .await;
    assert_eq!(again["replaced"], json!(id), "{again}");
    let note = again["note"].as_str().unwrap();
    assert!(note.contains(&id) && note.contains("git history"), "{note}");
    let files = repo.note_files();
    assert_eq!(files.len(), 1);
    let text = fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains(fixed) && !text.contains("per order total.\n"),
        "{text}"
    );
    assert!(text.contains("key: VAT rounding\n"), "{text}");
    let found = ok(
        &server,
        "context_query",
        json!({"query": "spanish vat rounding"}),
    )
    .await;
    assert_eq!(found["notes"].as_array().unwrap().len(), 1, "{found}");
    assert_eq!(found["notes"][0]["key"], json!("VAT rounding"), "{found}");
    // A person sees the key and when the note was rewritten.
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(["memory", "show", &id])
        .current_dir(repo.path())
        .env_remove("MEMLOOP_ROOT")
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("key:        VAT rounding\n"), "{shown}");
    assert!(shown.contains("\nupdated:    2"), "{shown}");

    let message = err(
        &server,
        "memory_store",
        json!({"content": "x", "category": "gotchas", "importance": 5, "tags": ["a", "b"], "key": "--"}),
    )
    .await;
    assert!(
        message.contains("key: \"--\" has no letter or digit"),
        "{message}"
    );
    close(server).await;
}

#[tokio::test]
async fn a_merge_at_the_budget_gives_the_old_bytes_back_first() {
    let repo = Repo::new();
    fs::write(
        repo.path().join("memloop.toml"),
        "[memory]\nmax_bytes = 4096\n",
    )
    .unwrap();
    let server = connect(repo.path()).await;
    // A long note: more than half the budget, so a second one of its size cannot fit.
    let details: Vec<String> = (0..260).map(|i| format!("case{i}")).collect();
    let details = details.join(" ");
    let first = format!(
        "Loom tests run from the tokio crate with `LOOM_MAX_PREEMPTIONS=1 cargo test --lib \
         --release --features full`; the models it checks: {details}."
    );
    let id = ok(
        &server,
        "memory_store",
        json!({"content": first, "category": "patterns", "importance": 5, "tags": TAGS}),
    )
    .await["id"]
        .clone();
    let size = fs::metadata(&repo.note_files()[0]).unwrap().len();
    assert!(size > 2100, "{size} bytes");
    let refused = err(
        &server,
        "memory_store",
        json!({"content": format!("Unrelated: {}", "y".repeat(size as usize - 150)),
               "category": "context", "importance": 5, "tags": ["a", "b"]}),
    )
    .await;
    assert!(refused.contains("refused"), "{refused}");
    // The same fact again: the old note's bytes are given back before the budget is checked.
    let again = ok(
        &server,
        "memory_store",
        json!({"content": format!(
            "You can run loom tests from the tokio crate with `LOOM_MAX_PREEMPTIONS=1 cargo test \
             --lib --release --features full`, checking these models: {details}."
        ), "category": "patterns", "importance": 5, "tags": TAGS}),
    )
    .await;
    assert_eq!(again["updated"], id, "{again}");
    assert_eq!(repo.note_files().len(), 1);
    close(server).await;
}
