//! The notes' budget through the real `memloop serve` (issue 23 §3): a store past
//! `[memory] max_bytes` or `max_note_bytes` is refused with what to do, and nothing already
//! stored is lost or cut.

mod serve_support;

use std::collections::BTreeMap;
use std::fs;

use serde_json::{Value, json};
use serve_support::*;

/// Every note file's bytes, by name.
fn snapshot(repo: &Repo) -> BTreeMap<String, Vec<u8>> {
    repo.note_files()
        .into_iter()
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&path).unwrap(),
            )
        })
        .collect()
}

fn total(repo: &Repo) -> u64 {
    snapshot(repo).values().map(|b| b.len() as u64).sum()
}

fn note(i: usize, importance: u8, words: usize) -> Value {
    let filler = [
        "ledger", "invoice", "rounding", "currency", "refund", "receipt",
    ];
    let text: Vec<String> = (0..words)
        .map(|w| format!("{}{}", filler[(i + w) % filler.len()], (i * 31 + w) % 97))
        .collect();
    json!({
        "content": format!("Fact {i}: {}.", text.join(" ")),
        "category": "context",
        "importance": importance,
        "tags": ["budget", format!("fact{i}")],
    })
}

#[tokio::test]
async fn a_store_past_the_budget_is_refused_whole_and_names_what_to_tidy() {
    let repo = Repo::new();
    fs::write(
        repo.path().join("memloop.toml"),
        "[memory]\nmax_bytes = 4096\nmax_note_bytes = 1024\n",
    )
    .unwrap();
    let server = connect(repo.path()).await;

    // Fill the budget: the first note is old and unimportant, the third the largest.
    let mut ids = Vec::new();
    let mut refused = None;
    for i in 0..40 {
        let (importance, words) = match i {
            0 => (2, 10),
            2 => (6, 60),
            _ => (5, 12),
        };
        let result = call(&server, "memory_store", note(i, importance, words)).await;
        if result.is_error == Some(true) {
            refused = Some((i, text(&result)));
            break;
        }
        ids.push(
            result.structured_content.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let (at, message) = refused.expect("the budget of 4096 bytes refuses a store");
    assert!(ids.len() >= 5, "{} notes before the refusal", ids.len());
    let before = snapshot(&repo);
    assert!(total(&repo) <= 4096, "{} bytes stored", total(&repo));
    assert!(
        message.starts_with("memory_store: refused, nothing was stored"),
        "{message}"
    );
    assert!(
        message.contains("budget of 4096 bytes ([memory] max_bytes"),
        "{message}"
    );
    assert!(
        message.contains("consolidate") && message.contains("memory_forget"),
        "{message}"
    );
    assert!(
        message.contains(&format!("Largest: {} (", ids[2])),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "Oldest of low importance (3 or less): {} (importance 2",
            ids[0]
        )),
        "{message}"
    );

    // The same store again changes nothing either, and every note still answers, whole.
    let again = err(&server, "memory_store", note(at, 5, 12)).await;
    assert!(again.contains("refused"), "{again}");
    assert_eq!(snapshot(&repo), before);
    for (i, id) in ids.iter().enumerate() {
        let answer = ok(
            &server,
            "context_query",
            json!({"query": format!("fact{i}")}),
        )
        .await;
        let found = &answer["notes"][0];
        assert_eq!(found["id"], json!(id), "{answer}");
        let file = before[&format!("{id}.md")].clone();
        let content = found["content"].as_str().unwrap();
        assert!(
            String::from_utf8(file).unwrap().contains(content),
            "note {id} answered cut: {content}"
        );
    }

    // A restore that would pass the budget is refused too; forgetting makes room.
    ok(&server, "memory_forget", json!({"id": ids[2]})).await;
    ok(&server, "memory_forget", json!({"id": ids[1]})).await;
    ok(&server, "memory_store", note(at, 5, 12)).await;
    ok(&server, "memory_store", note(at + 1, 5, 12)).await;
    let restore = err(&server, "memory_restore", json!({"id": ids[2]})).await;
    assert!(restore.contains("refused"), "{restore}");
    assert!(total_searchable(&repo) <= 4096);

    // A person raises the budget: the running server reads it at the next store.
    fs::write(
        repo.path().join("memloop.toml"),
        "[memory]\nmax_bytes = 65536\nmax_note_bytes = 1024\n",
    )
    .unwrap();
    ok(&server, "memory_restore", json!({"id": ids[2]})).await;
    ok(&server, "memory_store", note(at + 2, 5, 12)).await;
    close(server).await;
}

/// The bytes of the notes that are not forgotten.
fn total_searchable(repo: &Repo) -> u64 {
    snapshot(repo)
        .values()
        .filter(|b| !String::from_utf8_lossy(b).contains("\nforgotten:"))
        .map(|b| b.len() as u64)
        .sum()
}

#[tokio::test]
async fn a_note_over_its_own_cap_is_refused_not_cut() {
    let repo = Repo::new();
    fs::write(
        repo.path().join("memloop.toml"),
        "[memory]\nmax_note_bytes = 600\n",
    )
    .unwrap();
    let server = connect(repo.path()).await;
    ok(&server, "memory_store", note(1, 5, 10)).await;
    let before = snapshot(&repo);
    let message = err(&server, "memory_store", note(2, 5, 80)).await;
    assert!(
        message.contains("over the cap of 600 bytes a note may have"),
        "{message}"
    );
    assert!(
        message.contains("max_note_bytes") && message.contains("split it"),
        "{message}"
    );
    assert_eq!(snapshot(&repo), before);
    close(server).await;
}

#[tokio::test]
async fn an_unusable_config_stores_nothing_and_says_where() {
    let repo = Repo::new();
    fs::write(
        repo.path().join("memloop.toml"),
        "[memory]\nmax_bytes = \"lots\"\n",
    )
    .unwrap();
    let server = connect(repo.path()).await;
    let message = err(&server, "memory_store", note(1, 5, 10)).await;
    assert!(message.contains("nothing was stored"), "{message}");
    assert!(message.contains("memloop.toml:2:"), "{message}");
    assert!(repo.note_files().is_empty());
    close(server).await;
}

#[tokio::test]
async fn the_default_budget_holds_without_a_config() {
    let repo = Repo::new();
    let server = connect(repo.path()).await;
    // 4,000 bytes of text is the largest a note may say; with its front matter it fits the
    // default per-note cap.
    let content = "x".repeat(3990);
    ok(
        &server,
        "memory_store",
        json!({"content": content, "category": "context", "importance": 5, "tags": ["a", "b"]}),
    )
    .await;
    close(server).await;
}
