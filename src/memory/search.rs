//! BM25 over an incrementally maintained inverted index.
//!
//! Scores depend only on the set of searchable records, never on the order they were added or
//! removed in: a long-running server and a fresh one rank the same notes the same way. Removal
//! therefore updates document frequencies and the total length at once, and only the postings
//! keep dead entries until the next compaction.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use rust_stemmers::{Algorithm, Stemmer};

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words that match nearly every note and would only add noise to a score.
fn is_stop_word(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "by"
            | "for"
            | "from"
            | "in"
            | "is"
            | "it"
            | "of"
            | "on"
            | "or"
            | "that"
            | "the"
            | "this"
            | "to"
            | "was"
            | "were"
            | "will"
            | "with"
    )
}

/// Splits text into lowercase words, leaving out stop words. Paths split at `/`, `.`, `_` and
/// `-` the same way, so `shop/checkout/tax.py` meets a query for "checkout tax".
fn words(text: &str, mut sink: impl FnMut(&str)) {
    let mut word = String::new();
    let mut flush = |word: &mut String| {
        if !word.is_empty() && !is_stop_word(word) {
            sink(word);
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() {
            word.push(ch.to_ascii_lowercase());
        } else if ch.is_alphanumeric() {
            word.extend(ch.to_lowercase());
        } else {
            flush(&mut word);
        }
    }
    flush(&mut word);
}

/// Snowball's English stemmer (Porter2), so "rounds", "rounding" and "rounded" meet "round" and
/// "migrating" meets "migrations".
fn stem(word: &str) -> Cow<'_, str> {
    Stemmer::create(Algorithm::English).stem(word)
}

/// The terms of a text as the index holds them: words, stemmed.
pub fn tokenize(text: &str, mut sink: impl FnMut(&str)) {
    words(text, |word| sink(&stem(word)));
}

/// The distinct query words, in the order given, so a score is summed in a fixed order.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    tokenize(query, |t| {
        if !terms.iter().any(|have| have == t) {
            terms.push(t.to_owned());
        }
    });
    terms
}

/// A multiply-rotate hash (as in rustc's FxHash): the keys are short words from the repository's
/// own notes, not attacker-chosen, and SipHash showed up in the load profile.
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

#[derive(Default)]
struct Term {
    /// Searchable documents holding the term.
    df: u32,
    /// (slot, term frequency); dead slots stay until compaction.
    postings: Vec<(u32, u32)>,
}

struct Doc {
    key: String,
    len: u32,
    terms: Vec<(u32, u32)>,
    /// Multiplies the text score (the record's importance).
    boost: f64,
    live: bool,
}

#[derive(Default)]
pub struct Index {
    /// Stem -> term id.
    vocab: FastMap<String, u32>,
    /// Word as written -> term id: the stemmer runs once per distinct word, not per occurrence.
    surface: FastMap<String, u32>,
    terms: Vec<Term>,
    docs: Vec<Doc>,
    live: u32,
    total_len: u64,
}

pub type Slot = u32;

impl Index {
    /// Adds a document made of weighted texts, its score multiplied by `boost`; returns its slot.
    pub fn insert(&mut self, key: &str, texts: &[(&str, u32)], boost: f64) -> Slot {
        let slot = self.docs.len() as Slot;
        let mut counts: Vec<(u32, u32)> = Vec::new();
        let mut len = 0u32;
        for &(text, weight) in texts {
            words(text, |word| {
                let id = match self.surface.get(word) {
                    Some(&id) => id,
                    None => {
                        let stemmed = stem(word);
                        let id = match self.vocab.get(stemmed.as_ref()) {
                            Some(&id) => id,
                            None => {
                                let id = self.terms.len() as u32;
                                self.vocab.insert(stemmed.into_owned(), id);
                                self.terms.push(Term::default());
                                id
                            }
                        };
                        self.surface.insert(word.to_owned(), id);
                        id
                    }
                };
                len += weight;
                match counts.iter_mut().find(|(t, _)| *t == id) {
                    Some((_, tf)) => *tf += weight,
                    None => counts.push((id, weight)),
                }
            });
        }
        for &(id, tf) in &counts {
            let term = &mut self.terms[id as usize];
            term.df += 1;
            term.postings.push((slot, tf));
        }
        self.docs.push(Doc {
            key: key.to_owned(),
            len,
            terms: counts,
            boost,
            live: true,
        });
        self.live += 1;
        self.total_len += u64::from(len);
        slot
    }

    pub fn remove(&mut self, slot: Slot) {
        let doc = &mut self.docs[slot as usize];
        if !doc.live {
            return;
        }
        doc.live = false;
        for &(id, _) in &doc.terms {
            self.terms[id as usize].df -= 1;
        }
        self.live -= 1;
        self.total_len -= u64::from(doc.len);
        doc.terms = Vec::new();
    }

    pub fn key(&self, slot: Slot) -> &str {
        &self.docs[slot as usize].key
    }

    /// Dead slots worth a rebuild: more than half the index and more than a few hundred.
    pub fn wants_compaction(&self) -> bool {
        let dead = self.docs.len() - self.live as usize;
        dead > 512 && dead > self.live as usize
    }

    /// The best `limit` live documents matching at least one term, by BM25 times their boost,
    /// plus any tied with the last of them, in no particular order: the caller breaks ties.
    /// Scores accumulate in a dense array and only the winners are selected, never all sorted.
    pub fn top(&self, terms: &[String], limit: usize) -> Vec<(Slot, f64)> {
        if self.live == 0 || limit == 0 {
            return Vec::new();
        }
        let n = f64::from(self.live);
        let avg_len = self.total_len as f64 / n;
        let mut scores = vec![0.0f64; self.docs.len()];
        let mut touched: Vec<Slot> = Vec::new();
        for word in terms {
            let Some(&id) = self.vocab.get(word) else {
                continue;
            };
            let term = &self.terms[id as usize];
            if term.df == 0 {
                continue;
            }
            let df = f64::from(term.df);
            // Lucene's idf: never negative, so a common word cannot push a match below zero.
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(slot, tf) in &term.postings {
                let doc = &self.docs[slot as usize];
                if !doc.live {
                    continue;
                }
                let tf = f64::from(tf);
                let norm = K1 * (1.0 - B + B * f64::from(doc.len) / avg_len);
                let score = &mut scores[slot as usize];
                // Every part is positive, so zero means "not touched yet".
                if *score == 0.0 {
                    touched.push(slot);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut hits: Vec<(Slot, f64)> = touched
            .into_iter()
            .map(|slot| (slot, scores[slot as usize] * self.docs[slot as usize].boost))
            .collect();
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, |a, b| b.1.total_cmp(&a.1));
            let last = hits[limit - 1].1;
            let mut kept = limit;
            for i in limit..hits.len() {
                if hits[i].1 == last {
                    hits.swap(kept, i);
                    kept += 1;
                }
            }
            hits.truncate(kept);
        }
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms_of(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokenize(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn tokens_meet_across_inflections_and_paths() {
        assert_eq!(
            terms_of("Rounds rounding ROUNDED"),
            ["round", "round", "round"]
        );
        assert_eq!(
            terms_of("shop/checkout/tax.py"),
            ["shop", "checkout", "tax", "py"]
        );
        assert_eq!(terms_of("the class of gotchas"), ["class", "gotcha"]);
        assert_eq!(terms_of("Größe über"), ["größe", "über"]);
        assert_eq!(terms_of("entries entry this"), ["entri", "entri"]);
        // What the suffix stripper it replaced missed: derivations, irregular "-ied", "-ing".
        assert_eq!(terms_of("migrating migrations"), ["migrat", "migrat"]);
        assert_eq!(terms_of("retried retry"), ["retri", "retri"]);
        assert_eq!(terms_of("stored store"), ["store", "store"]);
    }

    #[test]
    fn rarer_and_denser_matches_rank_higher() {
        let mut index = Index::default();
        index.insert("common", &[("checkout page layout", 1)], 1.0);
        index.insert("vat", &[("checkout vat rounding per line", 1)], 1.0);
        index.insert("other", &[("checkout button colour", 1)], 1.0);
        let hits = index.top(&query_terms("vat checkout"), usize::MAX);
        let best = hits
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(slot, _)| index.key(*slot));
        assert_eq!(best, Some("vat"));
        assert_eq!(hits.len(), 3);
        assert!(index.top(&query_terms("unrelated"), 5).is_empty());
    }

    #[test]
    fn scores_depend_only_on_the_live_set() {
        let mut churned = Index::default();
        let gone = churned.insert("gone", &[("vat vat vat totally different", 1)], 1.0);
        churned.insert("a", &[("vat rounding per line", 1)], 1.0);
        churned.insert("b", &[("shipping is its own line", 1)], 1.0);
        churned.remove(gone);
        let mut fresh = Index::default();
        fresh.insert("a", &[("vat rounding per line", 1)], 1.0);
        fresh.insert("b", &[("shipping is its own line", 1)], 1.0);
        let terms = query_terms("vat line");
        let score = |index: &Index| {
            let mut hits: Vec<(String, f64)> = index
                .top(&terms, usize::MAX)
                .into_iter()
                .map(|(slot, s)| (index.key(slot).to_owned(), s))
                .collect();
            hits.sort_by(|a, b| a.0.cmp(&b.0));
            hits
        };
        assert_eq!(score(&churned), score(&fresh));
        assert_eq!(churned.live, 2);
    }

    /// The selection gives what a full sort would give first, ties at the edge included.
    #[test]
    fn top_k_is_the_head_of_a_full_sort() {
        let mut index = Index::default();
        for i in 0..300u32 {
            let text = format!(
                "common word{} word{} filler {}",
                i % 7,
                i % 13,
                "pad ".repeat((i % 5) as usize)
            );
            index.insert(
                &format!("d{i}"),
                &[(&text, 1)],
                0.8 + f64::from(i % 3) / 10.0,
            );
        }
        let terms = query_terms("common word3 word5");
        let mut all = index.top(&terms, usize::MAX);
        assert_eq!(all.len(), 300);
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for k in [1, 5, 20, 299] {
            let mut top = index.top(&terms, k);
            top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let edge = all[k - 1].1;
            let expected: Vec<_> = all.iter().filter(|h| h.1 >= edge).copied().collect();
            assert_eq!(top, expected, "k = {k}");
            assert!(top.len() >= k);
        }
    }
}
