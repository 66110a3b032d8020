//! Duplicates merged, corrections kept (issue 23 §2), in the memory library: measured on a
//! labelled set of restatements and near misses of real notes (tests/duplicates/set.json), and
//! followed through the store's files.

#[path = "duplicates/eval.rs"]
mod eval;

use std::fs;
use std::path::Path;

use memloop::memory::record::{Note, Record};
use memloop::memory::store::{NewNote, Store, Stored};

#[test]
fn restatements_merge_and_different_facts_never_do() {
    let report = eval::run();
    let detail = format!("{report:#?}");
    assert!(report.duplicates >= 80, "{detail}");
    assert!(report.near_misses >= 50, "{detail}");
    // The targets: at least 95% of the duplicates merged, no two facts ever merged.
    assert!(
        report.recall() >= 0.95,
        "recall {:.3}: {detail}",
        report.recall()
    );
    assert_eq!(report.false_merges(), 0, "{detail}");
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    dir
}

fn note(content: &str, importance: u8, tags: &[&str], key: Option<&str>) -> NewNote {
    NewNote {
        content: content.to_owned(),
        category: "gotchas".into(),
        importance,
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        task_id: None,
        key: key.map(str::to_owned),
        paths: Vec::new(),
    }
}

fn files(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root.join(".memloop/memory/notes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn read(root: &Path, id: &str) -> Note {
    Note::parse(&fs::read_to_string(root.join(format!(".memloop/memory/notes/{id}.md"))).unwrap())
        .unwrap()
}

#[test]
fn a_restatement_updates_the_note_and_keeps_what_it_knew() {
    let dir = repo();
    let root = dir.path();
    let mut store = Store::open(root).unwrap();
    let first = store
        .store_note(note(
            "Documentation tests are run with `cargo test --doc`; examples use the `tokio` crate \
             through the facade.",
            7,
            &["tokio", "doctest"],
            None,
        ))
        .unwrap();
    let other = store
        .store_note(note(
            "Unit tests are run with `cargo test --lib`.",
            4,
            &["tokio", "unit"],
            None,
        ))
        .unwrap();
    let before = read(root, &first);
    let again = store
        .store(note(
            "Run the documentation tests with `cargo test --doc`; the examples go through the \
             facade of the `tokio` crate.",
            5,
            &["docs", "tests"],
            None,
        ))
        .unwrap();
    assert_eq!(again, Stored::Merged(first.clone()));
    assert_eq!(files(root).len(), 2);
    let after = read(root, &first);
    assert!(after.content.starts_with("Run the documentation tests"));
    assert_eq!(after.importance, 7, "the higher importance stays");
    assert_eq!(after.tags, ["tokio", "doctest", "docs", "tests"]);
    assert_eq!(after.created, before.created);
    assert!(after.updated.is_some());
    // The other note is untouched, and search finds the new text under the old id.
    assert_eq!(
        read(root, &other).content,
        "Unit tests are run with `cargo test --lib`."
    );
    let found = store.answer_notes("documentation tests facade", 1);
    assert_eq!(found[0].id, first);
    // A near miss stays a note of its own.
    let near = store
        .store(note(
            "Integration tests are run with `cargo test --test integration`.",
            5,
            &["tokio", "integration"],
            None,
        ))
        .unwrap();
    assert!(matches!(near, Stored::Added(_)), "{near:?}");
    assert_eq!(files(root).len(), 3);
}

#[test]
fn the_same_key_replaces_the_note_and_another_key_never_merges() {
    let dir = repo();
    let root = dir.path();
    let mut store = Store::open(root).unwrap();
    let vat = "Spanish VAT rounds per order total.";
    let first = store
        .store(note(vat, 6, &["vat", "checkout"], Some("vat-rounding")))
        .unwrap();
    let Stored::Added(id) = first else {
        panic!("{first:?}")
    };
    // A correction under the same key (any spelling of it) replaces the note's text.
    let fixed = "Spanish VAT rounds per line, not per order total: a cent off otherwise.";
    let again = store
        .store(note(fixed, 7, &["vat", "rounding"], Some("VAT rounding")))
        .unwrap();
    assert_eq!(again, Stored::Replaced(id.clone()));
    let now = read(root, &id);
    assert_eq!(now.content, fixed);
    assert_eq!(now.tags, ["vat", "rounding"]);
    assert_eq!(now.key.as_deref(), Some("VAT rounding"));
    assert_eq!(files(root).len(), 1);
    // The old text is in no answer.
    for found in store.answer_notes("spanish vat order total", 5) {
        assert_eq!(found.record.content, fixed);
    }
    // The same words under another key are another note.
    let other = store
        .store(note(fixed, 7, &["vat", "rounding"], Some("vat-invoices")))
        .unwrap();
    assert!(matches!(other, Stored::Added(_)), "{other:?}");
    // The same key and the same fact: merged.
    let same = store
        .store(note(
            "Spanish VAT rounds per line, not per order total (a cent off otherwise).",
            5,
            &["vat"],
            Some("vat-rounding"),
        ))
        .unwrap();
    assert_eq!(same, Stored::Merged(id.clone()));
    // A forgotten note's key is free again.
    store.set_forgotten(&id, true).unwrap();
    let fresh = store
        .store(note(vat, 6, &["vat", "checkout"], Some("vat-rounding")))
        .unwrap();
    assert!(matches!(fresh, Stored::Added(_)), "{fresh:?}");
    // The key is found through the index after a reopen too (segment or delta).
    drop(store);
    let mut store = Store::open(root).unwrap();
    let last = store
        .store(note(fixed, 7, &["vat"], Some("vat-rounding")))
        .unwrap();
    assert_eq!(last, Stored::Replaced(fresh.id().to_owned()));
    assert!(read(root, fresh.id()).at() > read(root, fresh.id()).created.as_str());
}

#[test]
fn a_merged_note_keeps_the_files_it_is_about_and_is_fresh_again() {
    let dir = repo();
    let root = dir.path();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::write(root.join("src/tax.py"), "def vat(line): ...\n").unwrap();
    let mut store = Store::open(root).unwrap();
    let id = store
        .store_note(note(
            "Spanish VAT is rounded per line in `src/tax.py`, not per order total: rounding the \
             total is a cent off on multi-item orders.",
            7,
            &["vat", "checkout"],
            None,
        ))
        .unwrap();
    let before = read(root, &id).about;
    assert_eq!(before.len(), 1, "{before:?}");
    fs::write(root.join("src/tax.py"), "def vat(line): round(line)\n").unwrap();
    let again = store
        .store(note(
            "Spanish VAT is rounded per line, not per order total: rounding the total is a cent \
             off on multi-item orders.",
            5,
            &["vat"],
            None,
        ))
        .unwrap();
    assert_eq!(again, Stored::Merged(id.clone()));
    let after = read(root, &id).about;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].0, "src/tax.py");
    assert_ne!(
        after[0].1, before[0].1,
        "the file is looked at again: the note is fresh"
    );
}
