//! The seed's Monday/Tuesday story end to end, two agents writing at once, and what a crash,
//! a reviewer or git can leave behind: each against fresh `memloop serve` processes.

mod serve_support;

use std::fs;

use serde_json::json;
use serve_support::*;

const MONDAY: &str = "Spanish VAT rounds per line, not per order total; rounding the total is off \
                      by a cent on multi-item orders.";
const TUESDAY: &str = "Spanish VAT rounds per line; gift wrap and shipping each count as a line \
                       of their own.";

#[tokio::test]
async fn monday_tuesday_the_lesson_survives_the_session_and_the_refined_note_replaces_it() {
    let repo = Repo::new();

    // Monday: nothing known yet; the agent fixes the rounding and stores the gotcha and a route.
    let monday = connect(repo.path()).await;
    let first = ok(
        &monday,
        "context_query",
        json!({"query": "spanish vat checkout rounding"}),
    )
    .await;
    assert_eq!(first["notes"], json!([]));
    let old = ok(
        &monday,
        "memory_store",
        json!({"content": MONDAY, "category": "gotchas", "importance": 7,
               "tags": ["shop", "checkout", "vat"], "task_id": "cf-131"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(
        &monday,
        "create_route",
        json!({"title": "VAT rounding", "description": "VAT rounding lives in shop/checkout/tax.py",
               "paths": ["shop/checkout/tax.py", "tests/test_tax.py"]}),
    )
    .await;
    close(monday).await;

    // Tuesday: a new process with nothing in memory gets Monday's lesson and its route back.
    let tuesday = connect(repo.path()).await;
    let lookup = ok(
        &tuesday,
        "context_query",
        json!({"query": "vat gift wrap checkout"}),
    )
    .await;
    assert_eq!(ids(&lookup, "notes"), [old.as_str()]);
    assert_eq!(lookup["notes"][0]["content"], MONDAY);
    assert_eq!(lookup["routes"][0]["paths"][0], "shop/checkout/tax.py");

    let refined = ok(
        &tuesday,
        "memory_store",
        json!({"content": TUESDAY, "category": "gotchas", "importance": 7,
               "tags": ["shop", "checkout", "vat", "gift-wrap"], "task_id": "cf-140"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&tuesday, "memory_forget", json!({"id": old})).await;
    let after = ok(
        &tuesday,
        "context_query",
        json!({"query": "vat gift wrap checkout"}),
    )
    .await;
    assert_eq!(ids(&after, "notes"), [refined.as_str()]);
    close(tuesday).await;

    // And the next session, in yet another process, sees only the refined note.
    let wednesday = connect(repo.path()).await;
    let next = ok(
        &wednesday,
        "context_query",
        json!({"query": "spanish vat rounding"}),
    )
    .await;
    assert_eq!(ids(&next, "notes"), [refined]);
    assert_eq!(next["notes"][0]["content"], TUESDAY);
    close(wednesday).await;
    assert_eq!(
        repo.note_files().len(),
        2,
        "the forgotten note stays on disk, reversible"
    );
}

async fn burst(client: &Client, agent: &str, count: usize) -> Vec<String> {
    let mut stored = Vec::new();
    for i in 0..count {
        let answer = ok(
            client,
            "memory_store",
            json!({"content": format!("{agent} learned fact{agent}{i} while working."),
                   "category": "context", "importance": 5, "tags": [agent, format!("n{i}")]}),
        )
        .await;
        stored.push(answer["id"].as_str().unwrap().to_owned());
    }
    stored
}

#[tokio::test]
async fn two_agents_storing_at_once_lose_nothing_and_see_each_other() {
    const EACH: usize = 25;
    let repo = Repo::new();
    let claude = connect(repo.path()).await;
    let opencode = connect(repo.path()).await;

    let (from_claude, from_opencode) = tokio::join!(
        burst(&claude, "claude", EACH),
        burst(&opencode, "opencode", EACH)
    );

    let mut all: Vec<String> = from_claude.iter().chain(&from_opencode).cloned().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 2 * EACH, "every store got its own id");
    let on_disk: Vec<String> = repo
        .note_files()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(on_disk, all, "one complete file per note, nothing else");

    // Each server answers with what the other one wrote.
    let seen = ok(&claude, "context_query", json!({"query": "factopencode7"})).await;
    assert_eq!(ids(&seen, "notes"), [from_opencode[7].clone()]);
    let seen = ok(&opencode, "context_query", json!({"query": "factclaude19"})).await;
    assert_eq!(ids(&seen, "notes"), [from_claude[19].clone()]);
    // A forget in one is honoured by the other.
    ok(&opencode, "memory_forget", json!({"id": from_claude[3]})).await;
    let gone = ok(&claude, "context_query", json!({"query": "factclaude3"})).await;
    assert_eq!(gone["notes"], json!([]));
    close(claude).await;
    close(opencode).await;

    let fresh = connect(repo.path()).await;
    for (agent, ids_of) in [("claude", &from_claude), ("opencode", &from_opencode)] {
        for (i, id) in ids_of.iter().enumerate() {
            let found = ok(
                &fresh,
                "context_query",
                json!({"query": format!("fact{agent}{i}")}),
            )
            .await;
            let expected: Vec<String> = if agent == "claude" && i == 3 {
                vec![]
            } else {
                vec![id.clone()]
            };
            assert_eq!(ids(&found, "notes"), expected, "{agent} {i}");
        }
    }
    close(fresh).await;
}

/// A crash mid-write leaves at most a dot-file ending in `.tmp`; a damaged or hand-broken note
/// is reported and skipped. Neither stops the store, and the next server to start clears the
/// leftover.
#[tokio::test]
async fn crash_leftovers_and_broken_files_do_not_break_the_store() {
    let repo = Repo::new();
    let client = connect(repo.path()).await;
    let good = ok(
        &client,
        "memory_store",
        json!({"content": MONDAY, "category": "gotchas", "importance": 7, "tags": ["vat", "checkout"]}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    close(client).await;

    let notes = repo.notes_dir();
    let leftover = notes.join(".n-20261130-000000-aaaaaa.md.4242.tmp");
    fs::write(
        &leftover,
        "---\ncategory: gotchas\nimportance: 7\ntags: [vat, che",
    )
    .unwrap();
    fs::write(
        notes.join("n-20261130-000000-bbbbbb.md"),
        "vat checkout, no front matter",
    )
    .unwrap();

    let client = connect(repo.path()).await;
    let answer = ok(&client, "context_query", json!({"query": "vat checkout"})).await;
    assert_eq!(ids(&answer, "notes"), [good.as_str()]);
    assert!(!leftover.exists(), "cleared while no writer held the lock");
    ok(
        &client,
        "memory_store",
        json!({"content": "Another fact.", "category": "context", "importance": 3, "tags": ["a", "b"]}),
    )
    .await;
    assert!(
        !leftover.exists(),
        "the writer holding the lock removes a crashed writer's temp file"
    );
    close(client).await;
}

/// The cache is derived: deleted, it is rebuilt; stale (a note edited while no server ran, or a
/// note arriving with `git pull` while one runs), the files win.
#[tokio::test]
async fn the_files_win_over_a_missing_or_stale_cache() {
    let repo = Repo::new();
    let client = connect(repo.path()).await;
    let id = ok(
        &client,
        "memory_store",
        json!({"content": MONDAY, "category": "gotchas", "importance": 7, "tags": ["vat", "checkout"]}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    close(client).await;
    let cache = repo.path().join(".memloop/cache/notes.seg");
    assert!(cache.is_file());

    // A reviewer rewrites the note in place while no server runs.
    let file = repo.notes_dir().join(format!("{id}.md"));
    let edited = fs::read_to_string(&file)
        .unwrap()
        .replace(MONDAY, "Rounding moved to invoice.py.");
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, edited.as_bytes()))
        .unwrap();
    let client = connect(repo.path()).await;
    let answer = ok(
        &client,
        "context_query",
        json!({"query": "rounding invoice"}),
    )
    .await;
    assert_eq!(
        answer["notes"][0]["content"],
        "Rounding moved to invoice.py."
    );

    // A note arrives from another branch while the server runs.
    let pulled = "---\ncategory: decisions\nimportance: 6\ntags: [invoices, pdf]\n\
                  created: 2026-11-29T08:00:00.000Z\n---\nInvoices are rendered with typst.\n";
    fs::write(repo.notes_dir().join("n-20261129-080000-cccccc.md"), pulled).unwrap();
    let answer = ok(&client, "context_query", json!({"query": "invoices typst"})).await;
    assert_eq!(ids(&answer, "notes")[0], "n-20261129-080000-cccccc");

    // An editor that writes in place keeps the inode; the answer is still the current text.
    let pulled_file = repo.notes_dir().join("n-20261129-080000-cccccc.md");
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&pulled_file)
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, pulled.replace("typst", "typst 0.13").as_bytes())
        })
        .unwrap();
    let answer = ok(&client, "context_query", json!({"query": "invoices typst"})).await;
    assert_eq!(
        answer["notes"][0]["content"],
        "Invoices are rendered with typst 0.13."
    );
    close(client).await;

    fs::remove_dir_all(repo.path().join(".memloop/cache")).unwrap();
    let client = connect(repo.path()).await;
    let answer = ok(
        &client,
        "context_query",
        json!({"query": "invoices typst rounding"}),
    )
    .await;
    assert_eq!(answer["notes"].as_array().unwrap().len(), 2);
    close(client).await;
    assert!(cache.is_file(), "rebuilt");
}
