//! Notes about code that changed since they were written: the real server records the files a
//! note is about, and every place that shows the note (context_query, the session-start index,
//! the prompt recall, `memloop memory`) marks it until it is stored again.

mod serve_support;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use serve_support::*;

const NOTE: &str = "Checkout VAT rounds per line in shop/tax.py, not per order total; the \
                    fixture in tests/test_tax.py pins it.";

fn memloop(cwd: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_memloop"))
        .args(args)
        .current_dir(cwd)
        .env_remove("MEMLOOP_ROOT")
        .stdin(Stdio::null())
        .output()
        .expect("run memloop");
    assert!(
        output.status.success(),
        "memloop {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn write(repo: &Repo, path: &str, text: &str) {
    let file = repo.path().join(path);
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(file, text).unwrap();
}

async fn stored(server: &Client, content: &str, paths: Value) -> String {
    let answer = ok(
        server,
        "memory_store",
        json!({"content": content, "category": "gotchas", "importance": 7,
               "tags": ["vat", "checkout"], "paths": paths}),
    )
    .await;
    answer["id"].as_str().unwrap().to_owned()
}

async fn first_hit(server: &Client) -> Value {
    let answer = ok(
        server,
        "context_query",
        json!({"query": "checkout vat rounding"}),
    )
    .await;
    answer["notes"][0].clone()
}

#[tokio::test]
async fn a_note_whose_files_changed_is_marked_everywhere_until_stored_again() {
    let repo = Repo::new();
    write(
        &repo,
        "shop/tax.py",
        "def vat(line): return round(line * 0.21, 2)\n",
    );
    write(&repo, "tests/test_tax.py", "assert vat(1) == 0.21\n");
    write(&repo, "docs/vat.md", "VAT\n");
    let server = connect(repo.path()).await;
    let id = stored(&server, NOTE, json!(["docs/vat.md"])).await;

    // The files it names and the one given, with their fingerprints, are in the note's file.
    let file = fs::read_to_string(repo.notes_dir().join(format!("{id}.md"))).unwrap();
    assert!(file.contains("\nabout:\n  docs/vat.md: "), "{file}");
    assert!(file.contains("\n  shop/tax.py: "), "{file}");
    assert!(file.contains("\n  tests/test_tax.py: "), "{file}");
    let hit = first_hit(&server).await;
    assert_eq!(hit["id"], id.as_str());
    assert_eq!(hit["stale"], Value::Null, "{hit}");
    assert_eq!(
        hit["paths"],
        json!(["docs/vat.md", "shop/tax.py", "tests/test_tax.py"])
    );
    let fresh_index = memloop(repo.path(), &["memory", "index"]);
    assert!(!fresh_index.contains("stale"), "{fresh_index}");

    // The code changes (not committed: the working tree counts) and a file goes away.
    write(
        &repo,
        "shop/tax.py",
        "def vat(order): return round(sum(order) * 0.21, 2)\n",
    );
    fs::remove_file(repo.path().join("docs/vat.md")).unwrap();

    let hit = first_hit(&server).await;
    let said = hit["stale"].as_str().expect("marked stale");
    assert!(
        said.starts_with("possibly stale: `shop/tax.py` changed, `docs/vat.md` is gone since this note was written ("),
        "{said}"
    );
    assert!(said.contains("check it against the code"), "{said}");

    let index = memloop(repo.path(), &["memory", "index"]);
    let line = index.lines().find(|l| l.contains(&id)).expect("indexed");
    assert!(
        line.ends_with("(possibly stale: `shop/tax.py` changed, `docs/vat.md` is gone)"),
        "{index}"
    );

    let recall = memloop(
        repo.path(),
        &[
            "memory",
            "recall",
            "why does checkout vat rounding differ per line",
        ],
    );
    assert!(recall.contains(&format!("[{id}]")), "{recall}");
    assert!(
        recall.contains("(possibly stale: `shop/tax.py` changed"),
        "{recall}"
    );

    let listed = memloop(repo.path(), &["memory", "list", "--stale"]);
    assert!(
        listed.contains(&id) && listed.contains("[possibly stale]"),
        "{listed}"
    );
    let shown: Value = serde_json::from_str(&memloop(
        repo.path(),
        &["memory", "show", &id, "--format", "json"],
    ))
    .unwrap();
    assert!(
        shown["stale"]
            .as_str()
            .unwrap()
            .contains("`shop/tax.py` changed")
    );

    // Stored again (corrected), it is fresh: the new note is about the files as they are now.
    let again = stored(
        &server,
        "Checkout VAT rounds the order total once in shop/tax.py, since the refactor.",
        json!([]),
    )
    .await;
    ok(&server, "memory_forget", json!({"id": id})).await;
    let hit = first_hit(&server).await;
    assert_eq!(hit["id"], again.as_str());
    assert_eq!(hit["stale"], Value::Null, "{hit}");
    let listed = memloop(repo.path(), &["memory", "list", "--stale"]);
    assert_eq!(listed, "no notes or routes\n");
    close(server).await;
}

#[tokio::test]
async fn paths_outside_the_repository_or_missing_are_refused_and_nothing_is_stored() {
    let repo = Repo::new();
    let server = connect(repo.path()).await;
    for (paths, said) in [
        (
            json!(["../elsewhere.rs"]),
            "is not a path inside the repository",
        ),
        (
            json!(["/etc/passwd"]),
            "is not a path inside the repository",
        ),
        (
            json!(["src/missing.rs"]),
            "`src/missing.rs` is not in the repository",
        ),
    ] {
        let message = err(
            &server,
            "memory_store",
            json!({"content": "x", "category": "gotchas", "importance": 5,
                   "tags": ["a", "b"], "paths": paths}),
        )
        .await;
        assert!(message.contains(said), "{message}");
    }
    assert!(repo.note_files().is_empty());
    // A note that names no file has no `about`, and no git call is made for it.
    let id = stored(
        &server,
        "Prefer small commits with honest messages.",
        json!([]),
    )
    .await;
    let file = fs::read_to_string(repo.notes_dir().join(format!("{id}.md"))).unwrap();
    assert!(
        !file.contains("about:") && !file.contains("commit:"),
        "{file}"
    );
    close(server).await;
}

#[test]
fn a_note_edited_by_hand_reads_its_files_as_written() {
    let repo = Repo::new();
    write(&repo, "Makefile", "run:\n\tcargo run\n");
    fs::create_dir_all(repo.notes_dir()).unwrap();
    fs::write(
        repo.notes_dir().join("n-1.md"),
        "---\ncategory: patterns\nimportance: 5\ntags: [run, local]\ncreated: 2026-11-30T09:55:01.123Z\n\
         commit: 3074b62c1d2e\nabout:\n  Makefile: 000000000000   # a fingerprint that no longer matches\n---\n\
         Start it locally with `make run`.\n",
    )
    .unwrap();
    let shown: Value = serde_json::from_str(&memloop(
        repo.path(),
        &["memory", "show", "n-1", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(shown["paths"], json!(["Makefile"]));
    assert_eq!(shown["commit"], "3074b62c1d2e");
    assert_eq!(
        shown["stale"].as_str().unwrap(),
        "possibly stale: `Makefile` changed since this note was written (2026-11-30 at commit \
         3074b62c1d2e); check it against the code before relying on it, then store it again \
         (corrected) or forget it"
    );
}
