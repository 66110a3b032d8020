//! Scores the merge of duplicate notes on a labelled set (tests/duplicates/set.json) through the
//! memory's own store: the 91 real notes of tests/retrieval/projects.json in a throw-away
//! repository, then each labelled text asked where it belongs, the way `memory_store` asks
//! (`Store::duplicate_of`: the note's rarest words find candidates, `memory::duplicate`
//! decides). Shared by `cargo xtask bench memory` (which prints the figures) and
//! tests/memory_duplicates.rs (which holds them to the targets).

// The bench prints what the test does not check.
#![allow(dead_code)]

use std::collections::HashMap;

use memloop::memory::duplicate::same_fact;
use memloop::memory::store::{NewNote, Store, Stored};
use serde_json::Value;

pub const NOTES: &str = include_str!("../retrieval/projects.json");
pub const SET: &str = include_str!("set.json");

#[derive(Default, Debug)]
pub struct Report {
    pub duplicates: usize,
    /// Duplicates merged into the note they restate.
    pub merged: usize,
    /// Duplicates merged into another note (a wrong merge).
    pub merged_elsewhere: Vec<String>,
    /// Duplicates left as notes of their own.
    pub missed: Vec<String>,
    pub near_misses: usize,
    /// Near misses merged into any note.
    pub near_merged: Vec<String>,
    /// Texts that contradict a stored note in its words, and where each went (`None`: a note
    /// of its own); either outcome is acceptable.
    pub contradictions: Vec<(String, Option<String>)>,
    /// Pairs of two different stored notes, and how many of them `same_fact` calls one.
    pub distinct_pairs: usize,
    pub distinct_merged: Vec<String>,
    /// Stored notes that a store merged into another while the store was filled.
    pub merged_at_load: Vec<String>,
}

impl Report {
    /// Share of the duplicates merged into their own note.
    pub fn recall(&self) -> f64 {
        self.merged as f64 / self.duplicates.max(1) as f64
    }

    /// Share of all merges that were right.
    pub fn precision(&self) -> f64 {
        let wrong = self.merged_elsewhere.len()
            + self.near_merged.len()
            + self.distinct_merged.len()
            + self.merged_at_load.len();
        let all = self.merged + wrong;
        if all == 0 {
            1.0
        } else {
            self.merged as f64 / all as f64
        }
    }

    /// Merges of two different facts, of every kind.
    pub fn false_merges(&self) -> usize {
        self.merged_elsewhere.len()
            + self.near_merged.len()
            + self.distinct_merged.len()
            + self.merged_at_load.len()
    }
}

fn new_note(content: &str) -> NewNote {
    NewNote {
        content: content.to_owned(),
        category: "context".into(),
        importance: 5,
        tags: vec!["again".into(), "stored".into()],
        task_id: None,
        key: None,
        paths: Vec::new(),
    }
}

pub fn run() -> Report {
    let notes: Value = serde_json::from_str(NOTES).expect("the notes are JSON");
    let set: Value = serde_json::from_str(SET).expect("the set is JSON");
    let repo = tempfile::Builder::new()
        .prefix("memloop-duplicates-")
        .tempdir()
        .expect("a temporary folder");
    std::fs::create_dir(repo.path().join(".git")).expect("a repository");
    let mut store = Store::open(repo.path()).expect("the store opens");
    let mut report = Report::default();
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut keys: HashMap<String, String> = HashMap::new();
    let mut texts: Vec<(String, String)> = Vec::new();
    for note in notes["notes"].as_array().expect("notes") {
        let key = note["key"].as_str().expect("key").to_owned();
        let content = note["content"].as_str().expect("content").to_owned();
        match store.store(new_note(&content)).expect("stored") {
            Stored::Added(id) => {
                ids.insert(key.clone(), id.clone());
                keys.insert(id, key.clone());
            }
            other => report
                .merged_at_load
                .push(format!("{key} into {}", keys[other.id()])),
        }
        texts.push((key, content));
    }
    for (i, (key_a, a)) in texts.iter().enumerate() {
        for (key_b, b) in &texts[i + 1..] {
            report.distinct_pairs += 1;
            if same_fact(a, b) {
                report.distinct_merged.push(format!("{key_a} = {key_b}"));
            }
        }
    }
    let asked = |store: &Store, text: &str| -> Option<String> {
        store
            .duplicate_of(&new_note(text))
            .expect("the store answers")
            .filter(|(_, _, same)| *same)
            .map(|(id, _, _)| keys[&id].clone())
    };
    for pair in set["duplicates"].as_array().expect("duplicates") {
        let note = pair["note"].as_str().expect("note");
        assert!(ids.contains_key(note), "no stored note {note}");
        let text = pair["text"].as_str().expect("text");
        report.duplicates += 1;
        match asked(&store, text) {
            Some(found) if found == note => report.merged += 1,
            Some(found) => report
                .merged_elsewhere
                .push(format!("{note}: into {found}: {text}")),
            None => report.missed.push(format!("{note}: {text}")),
        }
    }
    for pair in set["near_misses"].as_array().expect("near misses") {
        let note = pair["note"].as_str().expect("note");
        assert!(ids.contains_key(note), "no stored note {note}");
        let text = pair["text"].as_str().expect("text");
        report.near_misses += 1;
        if let Some(found) = asked(&store, text) {
            report
                .near_merged
                .push(format!("{note} ({}): into {found}: {text}", pair["why"]));
        }
    }
    for pair in set["contradictions"].as_array().expect("contradictions") {
        let note = pair["note"].as_str().expect("note");
        let text = pair["text"].as_str().expect("text");
        report
            .contradictions
            .push((note.to_owned(), asked(&store, text)));
    }
    report
}
