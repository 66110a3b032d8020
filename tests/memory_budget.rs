//! The notes' budget in the memory library (issue 23 §3): the index keeps the searchable notes'
//! total exactly as the files have it, through the delta, merges, reopening and a rebuild of a
//! segment of another version, so a store checks the budget without reading the notes; a store
//! past it is refused and leaves every file as it was.

use std::fs;
use std::path::Path;

use memloop::memory::budget::Budget;
use memloop::memory::store::{NewNote, Opening, Store};

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(".git")).unwrap();
    dir
}

/// What the files say: the bytes of every note that is not forgotten.
fn searchable_bytes(root: &Path) -> u64 {
    let Ok(dir) = fs::read_dir(root.join(".memloop/memory/notes")) else {
        return 0;
    };
    dir.map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| fs::read_to_string(p).unwrap())
        .filter(|text| !text.contains("\nforgotten:"))
        .map(|text| text.len() as u64)
        .sum()
}

fn note(seed: usize) -> NewNote {
    NewNote {
        content: format!(
            "Fact {seed}: {} ends here.",
            "the checkout rounds value ".repeat(seed % 7 + 1)
        ),
        category: "context".into(),
        importance: (seed % 10 + 1) as u8,
        tags: vec!["budget".into(), format!("fact{seed}")],
        task_id: None,
        key: None,
        paths: Vec::new(),
    }
}

#[test]
fn the_index_total_follows_the_files_through_delta_merges_and_rebuilds() {
    let dir = repo();
    let root = dir.path();
    let mut store = Store::open(root).unwrap();
    let mut ids = Vec::new();
    // Past the delta's limit (a merge) with forgets and restores between.
    for seed in 0..400 {
        ids.push(store.store_note(note(seed)).unwrap());
        if seed % 9 == 4 {
            store.set_forgotten(&ids[seed / 2], true).unwrap();
        }
        if seed % 27 == 13 {
            store.set_forgotten(&ids[seed / 3], false).unwrap();
        }
        if seed % 50 == 0 {
            assert_eq!(store.notes.index().live_bytes(), searchable_bytes(root));
        }
    }
    let expected = searchable_bytes(root);
    assert!(expected > 10_000);
    assert_eq!(store.notes.index().live_bytes(), expected);
    drop(store);
    // Read back by another process's view: the segment's header and the delta.
    assert_eq!(
        Store::open(root).unwrap().notes.index().live_bytes(),
        expected
    );
    // A segment of the previous format (no total in its header) is not trusted: rebuilt.
    let segment = root.join(".memloop/cache/notes.seg");
    let mut raw = fs::read(&segment).unwrap();
    raw[8..12].copy_from_slice(&1u32.to_le_bytes());
    fs::write(&segment, raw).unwrap();
    assert_eq!(
        Store::open(root).unwrap().notes.index().live_bytes(),
        expected
    );
    // A note edited by hand in place counts at its new size once the store looks at each file
    // (as `memloop serve` does when it starts).
    let first = root.join(format!(".memloop/memory/notes/{}.md", ids[399]));
    let mut text = fs::read_to_string(&first).unwrap();
    text.push_str("A line a reviewer added.\n");
    fs::write(&first, text).unwrap();
    let store = Store::open_with(
        root,
        Opening {
            verify: true,
            deadline: None,
        },
    )
    .unwrap();
    assert_eq!(store.notes.index().live_bytes(), searchable_bytes(root));
}

#[test]
fn a_refused_store_changes_no_file_and_forgetting_makes_room() {
    let dir = repo();
    let root = dir.path();
    let mut store = Store::open(root).unwrap();
    let first = store.store_note(note(0)).unwrap();
    let size = searchable_bytes(root);
    store.budget = Budget {
        max_bytes: size * 3 + size / 2,
        max_note_bytes: 4096,
    };
    store.store_note(note(7)).unwrap();
    store.store_note(note(14)).unwrap();
    let files = |root: &Path| -> Vec<(String, String)> {
        let mut all: Vec<_> = fs::read_dir(root.join(".memloop/memory/notes"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    fs::read_to_string(p).unwrap(),
                )
            })
            .collect();
        all.sort();
        all
    };
    let before = files(root);
    let err = store.store_note(note(21)).unwrap_err().to_string();
    assert!(err.starts_with("refused, nothing was stored"), "{err}");
    assert!(
        err.contains(&first),
        "the old unimportant note is named: {err}"
    );
    assert_eq!(files(root), before);
    assert_eq!(store.notes.count(), 3);
    store.set_forgotten(&first, true).unwrap();
    store.store_note(note(21)).unwrap();
    assert_eq!(store.notes.count(), 3);
    assert!(searchable_bytes(root) <= store.budget.max_bytes);
}
