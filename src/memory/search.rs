//! What a query and a note are matched on: words, stemmed, without stop words, and BM25's
//! formula over them. The index (`super::index`) keeps the terms as hashes.

use std::borrow::Cow;
use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use super::index::doc::term_hash;

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

/// Turns texts into the index's terms, stemming each distinct word once: the stemmer is the
/// costliest step of building an index, and a note's words repeat across notes.
#[derive(Default)]
pub struct Terms {
    /// Word as written -> its term's hash.
    stems: HashMap<String, u64, std::hash::BuildHasherDefault<WordHasher>>,
}

/// A multiply-rotate hash (as in rustc's FxHash) for the stem cache: the keys are short words
/// of the repository's own notes, not chosen by an attacker, and SipHash showed in the profile
/// of a cold start.
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(n)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Terms {
    /// The (term hash, weighted frequency) pairs of weighted `texts`, and their weighted length.
    pub fn count(&mut self, texts: &[(&str, u32)]) -> (Vec<(u64, u32)>, u32) {
        let mut counts: Vec<(u64, u32)> = Vec::new();
        let mut len = 0u32;
        for &(text, weight) in texts {
            words(text, |word| {
                let hash = match self.stems.get(word) {
                    Some(&hash) => hash,
                    None => {
                        let hash = term_hash(&stem(word));
                        // Bounded: a huge vocabulary only costs the stemmer again.
                        if self.stems.len() < 1 << 20 {
                            self.stems.insert(word.to_owned(), hash);
                        }
                        hash
                    }
                };
                len = len.saturating_add(weight);
                match counts.iter_mut().find(|(h, _)| *h == hash) {
                    Some((_, tf)) => *tf = tf.saturating_add(weight),
                    None => counts.push((hash, weight)),
                }
            });
        }
        (counts, len)
    }
}

/// The hashes of the distinct query terms, in the order given.
pub fn query_hashes(query: &str) -> Vec<u64> {
    query_terms(query).iter().map(|t| term_hash(t)).collect()
}

/// BM25's k1 and b, for the index's scoring.
pub const BM25: (f64, f64) = (K1, B);

/// Lucene's idf: never negative, so a common word cannot push a match below zero.
pub fn idf(live: f64, df: f64) -> f64 {
    (1.0 + (live - df + 0.5) / (df + 0.5)).ln()
}

/// How much of a query a record matched, from 0 to 1: its BM25 score (without its boost) over
/// `ideal`, the sum of the query words' idf, which is what a record of average length holding
/// each word once would score. A word the memory does not hold adds to `ideal` and to no score.
pub fn relevance(score: f64, ideal: f64) -> f64 {
    if ideal <= 0.0 {
        return 0.0;
    }
    (score / ideal).clamp(0.0, 1.0)
}

/// One term's BM25 contribution to one document.
pub fn bm25(idf: f64, tf: f64, len: f64, avg_len: f64) -> f64 {
    let norm = K1 * (1.0 - B + B * len / avg_len);
    idf * tf * (K1 + 1.0) / (tf + norm)
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
}
