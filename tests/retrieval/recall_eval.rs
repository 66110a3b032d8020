//! Scores recall (`memloop::memory::recall`, what `memloop hook prompt` gives) on prompts as a
//! person sends them (tests/retrieval/prompts.json) against the notes of
//! tests/retrieval/projects.json, all in one store. Each prompt is the first of its session,
//! under the default byte cap. Shared by `cargo xtask bench memory` (which prints the figures)
//! and tests/memory_retrieval.rs (which holds them to the targets).

// The bench prints what the test does not check.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

use memloop::config::MemoryConfig;
use memloop::memory::recall::{self, Options};
use memloop::memory::store::{NewNote, Store};
use serde_json::Value;

use super::eval::Set;

pub struct Prompt {
    pub kind: String,
    pub text: String,
    /// The keys of the notes the prompt should be given (empty: none at all).
    pub expect: Vec<String>,
}

pub fn parse(json: &str) -> Vec<Prompt> {
    let set: Value = serde_json::from_str(json).expect("the prompts are JSON");
    set["prompts"]
        .as_array()
        .expect("the file lists prompts")
        .iter()
        .map(|p| Prompt {
            kind: p["kind"].as_str().expect("kind").to_owned(),
            text: p["prompt"].as_str().expect("prompt").to_owned(),
            expect: p["expect"]
                .as_array()
                .expect("expect")
                .iter()
                .map(|k| k.as_str().expect("a key").to_owned())
                .collect(),
        })
        .collect()
}

/// Figures of one kind of prompt.
#[derive(Default, Clone)]
pub struct Figures {
    pub prompts: usize,
    /// Mean share of the expected notes among those given (at most three).
    pub recall_3: f64,
    /// Prompts given no note at all.
    pub nothing: usize,
    /// Notes given, over all prompts of the kind.
    pub given: usize,
}

/// One prompt's relevances: kind, prompt, the relevance of each note given and whether it was
/// expected.
pub type Relevances = (String, String, Vec<(f64, bool)>);

/// kind -> figures, plus "labelled" over the kinds with expected notes.
pub struct Report {
    pub by_kind: BTreeMap<String, Figures>,
    /// One line per prompt that missed a note it should have had, or got one it should not.
    pub misses: Vec<String>,
    pub relevances: Vec<Relevances>,
}

impl Report {
    pub fn get(&self, kind: &str) -> Figures {
        self.by_kind.get(kind).cloned().unwrap_or_default()
    }

    /// Share of the kind's prompts given no note at all.
    pub fn nothing_share(&self, kind: &str) -> f64 {
        let f = self.get(kind);
        f.nothing as f64 / f.prompts.max(1) as f64
    }
}

/// Each prompt's recall from a store holding the set's notes.
pub fn run(set: &Set, prompts: &[Prompt]) -> Report {
    let repo = tempfile::Builder::new()
        .prefix("memloop-recall-")
        .tempdir()
        .expect("a temporary folder");
    std::fs::create_dir(repo.path().join(".git")).expect("a repository");
    let mut store = Store::open(repo.path()).expect("the store opens");
    let mut keys: HashMap<String, String> = HashMap::new();
    for (key, note) in &set.notes {
        let id = store
            .store_note(NewNote {
                content: note.content.clone(),
                category: note.category.clone(),
                importance: note.importance,
                tags: note.tags.clone(),
                ..Default::default()
            })
            .expect("the note is stored");
        keys.insert(id, key.clone());
    }
    let cap = MemoryConfig::default().recall_bytes as usize;
    let given = HashSet::new();
    let mut sums: BTreeMap<String, Figures> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut relevances = Vec::new();
    for prompt in prompts {
        let got = recall::recall(&mut store, &prompt.text, &Options { cap, given: &given });
        relevances.push((
            prompt.kind.clone(),
            prompt.text.clone(),
            got.notes
                .iter()
                .map(|n| (n.relevance, prompt.expect.contains(&keys[&n.id])))
                .collect(),
        ));
        let got: Vec<&str> = got.notes.iter().map(|n| keys[&n.id].as_str()).collect();
        let found = prompt
            .expect
            .iter()
            .filter(|e| got.contains(&e.as_str()))
            .count();
        let share = found as f64 / prompt.expect.len().max(1) as f64;
        if (prompt.expect.is_empty() && !got.is_empty()) || found < prompt.expect.len() {
            misses.push(format!(
                "{} {:?}: expected {:?}, given {:?}",
                prompt.kind, prompt.text, prompt.expect, got
            ));
        }
        let mut kinds = vec![prompt.kind.clone()];
        if !prompt.expect.is_empty() {
            kinds.push("labelled".into());
        }
        for kind in kinds {
            let f = sums.entry(kind).or_default();
            f.prompts += 1;
            f.recall_3 += share;
            f.nothing += usize::from(got.is_empty());
            f.given += got.len();
        }
    }
    for f in sums.values_mut() {
        f.recall_3 /= f.prompts.max(1) as f64;
    }
    Report {
        by_kind: sums,
        misses,
        relevances,
    }
}
