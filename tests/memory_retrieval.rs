//! Search quality on text nobody here wrote (tests/retrieval/projects.json): memloop's search
//! holds the floors on it, and beats a textbook BM25 run on the same notes.
//! `cargo xtask bench memory` prints the same figures in full.

#[path = "retrieval/eval.rs"]
mod eval;

const SET: &str = include_str!("retrieval/projects.json");

#[test]
fn notes_from_real_projects_are_found_in_the_words_an_agent_asks_with() {
    let set = eval::Set::parse(SET);
    let ours = eval::memloop(&set);
    let book = eval::textbook(&set);
    let report = format!("missed: {:#?}", ours.misses);
    assert!(ours.get("overall").recall_5 >= 0.95, "{report}");
    assert!(ours.get("paraphrase").recall_5 >= 0.85, "{report}");
    assert!(
        ours.get("paraphrase").recall_5 > book.get("paraphrase").recall_5,
        "{report}"
    );
    for kind in ["exact", "code", "paraphrase"] {
        let (a, b) = (ours.get(kind), book.get(kind));
        assert!(a.recall_5 >= b.recall_5, "{kind}: {report}");
        assert!(a.queries > 10, "{kind}: too few queries to measure");
    }
    assert!(ours.weak_share("nonsense") >= 0.9, "{report}");
    // A query that finds its note is told so.
    for kind in ["exact", "code"] {
        assert_eq!(ours.weak_share(kind), 0.0, "{kind}: {report}");
    }
    assert!(ours.weak_share("paraphrase") <= 0.05, "{report}");
}

#[test]
fn every_expected_note_exists_and_every_source_is_recorded() {
    let json: serde_json::Value = serde_json::from_str(SET).unwrap();
    let projects: Vec<&str> = json["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["project"].as_str().unwrap())
        .collect();
    assert!(projects.len() >= 5, "several projects in one store");
    for note in json["notes"].as_array().unwrap() {
        let source = note["source"].as_str().unwrap();
        assert!(projects.contains(&source), "{note}: unknown source");
    }
    let set = eval::Set::parse(SET);
    for query in &set.queries {
        for key in &query.expect {
            assert!(set.notes.iter().any(|(k, _)| k == key), "{key}");
        }
        assert_eq!(
            query.expect.is_empty(),
            query.kind == "nonsense",
            "{}",
            query.text
        );
    }
}
