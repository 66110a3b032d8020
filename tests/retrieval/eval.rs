//! Scores memloop's ranking and a textbook BM25 on a labelled set (tests/retrieval/projects.json),
//! in process, on the same notes. Shared by `cargo xtask bench memory` (which prints the figures)
//! and tests/memory_retrieval.rs (which holds them to their floors).
//!
//! memloop's side is the memory's own store and search, relevance and all, in a throw-away
//! repository. The textbook side is BM25 as a textbook
//! has it: k1 1.2, b 0.75, the note's texts lowercased and split at anything not a letter or a
//! digit, no stemming, no stop words, no boost.

// The bench prints what the test does not check.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

use memloop::memory::record::Note;
use memloop::memory::search;
use memloop::memory::store::{NewNote, Store};
use serde_json::Value;

/// How many hits an answer holds (context_query's default).
pub const ANSWER: usize = 5;

pub struct Query {
    pub kind: String,
    pub text: String,
    pub expect: Vec<String>,
}

pub struct Set {
    pub notes: Vec<(String, Note)>,
    pub queries: Vec<Query>,
}

impl Set {
    pub fn parse(json: &str) -> Set {
        let set: Value = serde_json::from_str(json).expect("the set is JSON");
        let notes = set["notes"]
            .as_array()
            .expect("the set lists notes")
            .iter()
            .map(|n| {
                let text = |k: &str| n[k].as_str().expect("a string field").to_owned();
                let note = Note {
                    content: text("content"),
                    category: text("category"),
                    importance: n["importance"].as_u64().expect("importance") as u8,
                    tags: n["tags"]
                        .as_array()
                        .expect("tags")
                        .iter()
                        .map(|t| t.as_str().expect("a tag").to_owned())
                        .collect(),
                    key: None,
                    task_id: None,
                    created: "2026-12-01T00:00:00.000Z".into(),
                    updated: None,
                    forgotten: None,
                    about: Vec::new(),
                    commit: None,
                    extra: Vec::new(),
                };
                (text("key"), note)
            })
            .collect();
        let queries = set["queries"]
            .as_array()
            .expect("the set lists queries")
            .iter()
            .map(|q| Query {
                kind: q["kind"].as_str().expect("kind").to_owned(),
                text: q["query"].as_str().expect("query").to_owned(),
                expect: q["expect"]
                    .as_array()
                    .expect("expect")
                    .iter()
                    .map(|k| k.as_str().expect("a key").to_owned())
                    .collect(),
            })
            .collect();
        Set { notes, queries }
    }
}

/// One ranker's answer to one query: keys best first, and whether it said "nothing matched well".
pub struct Answer {
    pub keys: Vec<String>,
    pub weak: bool,
    /// The best hit's relevance, where the ranker has one.
    pub relevance: Option<f64>,
}

/// Figures of one kind of query.
#[derive(Default, Clone)]
pub struct Figures {
    pub queries: usize,
    pub recall_1: f64,
    pub recall_5: f64,
    pub mrr: f64,
    /// Queries answered "nothing matched well".
    pub weak: usize,
}

/// kind -> figures, plus "overall" over the kinds with expected notes.
pub struct Report {
    pub by_kind: BTreeMap<String, Figures>,
    pub misses: Vec<String>,
    /// (kind, query, best relevance) of every query, to tune the threshold by.
    pub relevances: Vec<(String, String, f64)>,
}

impl Report {
    pub fn get(&self, kind: &str) -> Figures {
        self.by_kind.get(kind).cloned().unwrap_or_default()
    }

    /// Share of the kind's queries answered "nothing matched well".
    pub fn weak_share(&self, kind: &str) -> f64 {
        let f = self.get(kind);
        f.weak as f64 / f.queries.max(1) as f64
    }
}

fn score(set: &Set, mut answer: impl FnMut(&str) -> Answer) -> Report {
    let mut sums: BTreeMap<String, Figures> = BTreeMap::new();
    let mut misses = Vec::new();
    let mut relevances = Vec::new();
    for query in &set.queries {
        let got = answer(&query.text);
        relevances.push((
            query.kind.clone(),
            query.text.clone(),
            got.relevance.unwrap_or(f64::NAN),
        ));
        let mut kinds = vec![query.kind.clone()];
        if !query.expect.is_empty() {
            kinds.push("overall".into());
        }
        let within = |k: usize| {
            let top = &got.keys[..got.keys.len().min(k)];
            query.expect.iter().filter(|e| top.contains(e)).count() as f64
                / query.expect.len().max(1) as f64
        };
        let rank = got.keys.iter().position(|k| query.expect.contains(k));
        let first = rank == Some(0);
        if !query.expect.is_empty() && (within(ANSWER) < 1.0 || got.weak || !first) {
            misses.push(format!(
                "{}{} {:?}: got {:?}{}",
                query.kind,
                if within(ANSWER) < 1.0 {
                    " MISS"
                } else if first {
                    ""
                } else {
                    " not first"
                },
                query.text,
                &got.keys[..got.keys.len().min(3)],
                if got.weak { " (weak)" } else { "" }
            ));
        }
        for kind in kinds {
            let f = sums.entry(kind).or_default();
            f.queries += 1;
            if !query.expect.is_empty() {
                f.recall_1 += within(1);
                f.recall_5 += within(ANSWER);
                f.mrr += rank.map_or(0.0, |r| 1.0 / (r + 1) as f64);
            }
            f.weak += usize::from(got.weak);
        }
    }
    for f in sums.values_mut() {
        let n = f.queries.max(1) as f64;
        f.recall_1 /= n;
        f.recall_5 /= n;
        f.mrr /= n;
    }
    Report {
        by_kind: sums,
        misses,
        relevances,
    }
}

/// memloop's search over the set's notes: stored through the memory's own store in a throw-away
/// repository, queried the way `context_query` queries it.
pub fn memloop(set: &Set) -> Report {
    let repo = tempfile::Builder::new()
        .prefix("memloop-retrieval-")
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
                task_id: None,
                key: None,
                paths: Vec::new(),
            })
            .expect("the note is stored");
        keys.insert(id, key.clone());
    }
    score(set, |text| {
        let found = store.answer_notes(text, ANSWER);
        let best = found.first().map_or(0.0, |f| f.relevance);
        Answer {
            keys: found.iter().map(|f| keys[&f.id].clone()).collect(),
            weak: !search::matched_well(best),
            relevance: Some(best),
        }
    })
}

/// BM25 as a textbook has it, over the same notes.
pub fn textbook(set: &Set) -> Report {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    fn split(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    }
    let docs: Vec<(String, Vec<String>)> = set
        .notes
        .iter()
        .map(|(key, note)| {
            let mut words = split(&note.content);
            words.extend(split(&note.category));
            for tag in &note.tags {
                words.extend(split(tag));
            }
            (key.clone(), words)
        })
        .collect();
    let n = docs.len() as f64;
    let avg = docs.iter().map(|(_, w)| w.len()).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, f64> = HashMap::new();
    for (_, words) in &docs {
        let distinct: HashSet<&str> = words.iter().map(String::as_str).collect();
        for w in distinct {
            *df.entry(w).or_default() += 1.0;
        }
    }
    score(set, |text| {
        let mut seen = HashSet::new();
        let terms: Vec<String> = split(text)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .collect();
        let mut hits: Vec<(String, f64)> = docs
            .iter()
            .filter_map(|(key, words)| {
                let len = words.len() as f64;
                let s: f64 = terms
                    .iter()
                    .filter_map(|t| {
                        let tf = words.iter().filter(|w| *w == t).count() as f64;
                        let df = df.get(t.as_str()).copied()?;
                        (tf > 0.0).then(|| {
                            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg))
                        })
                    })
                    .sum();
                (s > 0.0).then(|| (key.clone(), s))
            })
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(ANSWER);
        Answer {
            weak: hits.is_empty(),
            keys: hits.into_iter().map(|(k, _)| k).collect(),
            relevance: None,
        }
    })
}
