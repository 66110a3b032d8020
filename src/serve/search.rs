//! BM25 over an incrementally maintained inverted index.
//!
//! Scores depend only on the set of searchable records, never on the order they were added or
//! removed in: a long-running server and a fresh one rank the same notes the same way. Removal
//! therefore updates document frequencies and the total length at once, and only the postings
//! keep dead entries until the next compaction.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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

/// Splits text into lowercase words and reduces simple English inflections, so "rounds",
/// "rounding" and "rounded" meet "round". Paths split at `/`, `.`, `_` and `-` the same way.
pub fn tokenize(text: &str, mut sink: impl FnMut(&str)) {
    let mut word = String::new();
    let mut flush = |word: &mut String| {
        if !word.is_empty() && !is_stop_word(word) {
            stem(word);
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

fn stem(word: &mut String) {
    // Bytes, not chars: the suffixes are ASCII, and a longer non-ASCII word only stems sooner.
    let chars = word.len();
    let cut = |word: &mut String, suffix: &str| word.truncate(word.len() - suffix.len());
    if chars > 5 && word.ends_with("ing") {
        cut(word, "ing");
    } else if chars > 4 && word.ends_with("ed") {
        cut(word, "ed");
    } else if chars > 4 && word.ends_with("ies") {
        cut(word, "ies");
        word.push('y');
    } else if chars > 3 && word.ends_with('s') && !word.ends_with("ss") {
        cut(word, "s");
    }
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
    live: bool,
}

#[derive(Default)]
pub struct Index {
    vocab: FastMap<String, u32>,
    terms: Vec<Term>,
    docs: Vec<Doc>,
    live: u32,
    total_len: u64,
}

pub type Slot = u32;

impl Index {
    /// Adds a document made of weighted texts; returns its slot.
    pub fn insert(&mut self, key: &str, texts: &[(&str, u32)]) -> Slot {
        let slot = self.docs.len() as Slot;
        let mut counts: Vec<(u32, u32)> = Vec::new();
        let mut len = 0u32;
        for &(text, weight) in texts {
            tokenize(text, |token| {
                let id = match self.vocab.get(token) {
                    Some(&id) => id,
                    None => {
                        let id = self.terms.len() as u32;
                        self.vocab.insert(token.to_owned(), id);
                        self.terms.push(Term::default());
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

    /// Every live document matching at least one term, with its BM25 score.
    pub fn search(&self, terms: &[String]) -> Vec<(Slot, f64)> {
        if self.live == 0 {
            return Vec::new();
        }
        let n = f64::from(self.live);
        let avg_len = self.total_len as f64 / n;
        let mut scores: FastMap<Slot, f64> = FastMap::default();
        let mut order: Vec<Slot> = Vec::new();
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
                let part = idf * tf * (K1 + 1.0) / (tf + norm);
                let score = scores.entry(slot).or_insert_with(|| {
                    order.push(slot);
                    0.0
                });
                *score += part;
            }
        }
        order
            .into_iter()
            .map(|slot| (slot, scores[&slot]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        tokenize(text, |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn tokens_meet_across_inflections_and_paths() {
        assert_eq!(
            words("Rounds rounding ROUNDED"),
            ["round", "round", "round"]
        );
        assert_eq!(
            words("shop/checkout/tax.py"),
            ["shop", "checkout", "tax", "py"]
        );
        assert_eq!(words("the class of gotchas"), ["class", "gotcha"]);
        assert_eq!(words("Größe über"), ["größe", "über"]);
        assert_eq!(words("entries entry this"), ["entry", "entry"]);
    }

    #[test]
    fn rarer_and_denser_matches_rank_higher() {
        let mut index = Index::default();
        index.insert("common", &[("checkout page layout", 1)]);
        index.insert("vat", &[("checkout vat rounding per line", 1)]);
        index.insert("other", &[("checkout button colour", 1)]);
        let hits = index.search(&query_terms("vat checkout"));
        let best = hits
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(slot, _)| index.key(*slot));
        assert_eq!(best, Some("vat"));
        assert_eq!(hits.len(), 3);
        assert!(index.search(&query_terms("unrelated")).is_empty());
    }

    #[test]
    fn scores_depend_only_on_the_live_set() {
        let mut churned = Index::default();
        let gone = churned.insert("gone", &[("vat vat vat totally different", 1)]);
        churned.insert("a", &[("vat rounding per line", 1)]);
        churned.insert("b", &[("shipping is its own line", 1)]);
        churned.remove(gone);
        let mut fresh = Index::default();
        fresh.insert("a", &[("vat rounding per line", 1)]);
        fresh.insert("b", &[("shipping is its own line", 1)]);
        let terms = query_terms("vat line");
        let score = |index: &Index| {
            let mut hits: Vec<(String, f64)> = index
                .search(&terms)
                .into_iter()
                .map(|(slot, s)| (index.key(slot).to_owned(), s))
                .collect();
            hits.sort_by(|a, b| a.0.cmp(&b.0));
            hits
        };
        assert_eq!(score(&churned), score(&fresh));
        assert_eq!(churned.live, 2);
    }
}
