//! Search quality on a labelled set (tests/retrieval/set.json): the notes and routes of one
//! made-up repository, stored through a real `memloop serve`, and queries that should find
//! them in `context_query`'s answer. `cargo xtask bench serve` reports the same recall@5.

mod serve_support;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use serve_support::*;

const SET: &str = include_str!("retrieval/set.json");

#[tokio::test]
async fn labelled_queries_find_their_notes_and_routes() {
    let set: Value = serde_json::from_str(SET).expect("the set is JSON");
    let repo = Repo::new();
    let client = connect(repo.path()).await;
    let mut ids: HashMap<String, String> = HashMap::new();
    for note in set["notes"].as_array().unwrap() {
        let answer = ok(
            &client,
            "memory_store",
            json!({"content": note["content"], "category": note["category"],
                   "importance": note["importance"], "tags": note["tags"]}),
        )
        .await;
        ids.insert(
            note["key"].as_str().unwrap().to_owned(),
            answer["id"].as_str().unwrap().to_owned(),
        );
    }
    for route in set["routes"].as_array().unwrap() {
        let answer = ok(
            &client,
            "create_route",
            json!({"title": route["title"], "description": route["description"],
                   "paths": route["paths"]}),
        )
        .await;
        ids.insert(
            route["key"].as_str().unwrap().to_owned(),
            answer["id"].as_str().unwrap().to_owned(),
        );
    }

    // kind -> (sum of per-query recall, queries)
    let mut by_kind: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for query in set["queries"].as_array().unwrap() {
        let text = query["query"].as_str().unwrap();
        let answer = ok(&client, "context_query", json!({"query": text})).await;
        let found: Vec<String> = ids_of(&answer, "notes")
            .into_iter()
            .chain(ids_of(&answer, "routes"))
            .collect();
        let expect: Vec<&str> = query["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|key| key.as_str().unwrap())
            .collect();
        let hit = expect
            .iter()
            .filter(|key| found.contains(&ids[**key]))
            .count();
        if hit < expect.len() {
            misses.push(format!("{text:?} ({})", query["kind"]));
        }
        let entry = by_kind
            .entry(query["kind"].as_str().unwrap().to_owned())
            .or_default();
        entry.0 += hit as f64 / expect.len() as f64;
        entry.1 += 1;
    }
    close(client).await;

    let recall = |kind: &str| by_kind.get(kind).map_or(0.0, |(sum, n)| sum / *n as f64);
    let total: (f64, usize) = by_kind
        .values()
        .fold((0.0, 0), |acc, (sum, n)| (acc.0 + sum, acc.1 + n));
    let overall = total.0 / total.1 as f64;
    let report = format!(
        "recall@5 overall {overall:.3}; {}; missed: {}",
        by_kind
            .keys()
            .map(|kind| format!("{kind} {:.3}", recall(kind)))
            .collect::<Vec<_>>()
            .join(", "),
        misses.join(", ")
    );
    eprintln!("{report}");
    assert_eq!(recall("seed"), 1.0, "{report}");
    assert_eq!(recall("exact"), 1.0, "{report}");
    assert!(recall("stem") >= 0.95, "{report}");
    assert!(overall >= 0.85, "{report}");
}

fn ids_of(answer: &Value, list: &str) -> Vec<String> {
    ids(answer, list)
}
