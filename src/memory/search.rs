//! What a query and a note are matched on: words, stemmed, without stop words, and BM25's
//! formula over them. The index (`super::index`) keeps the terms as hashes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use super::index::doc::term_hash;
use super::synonyms::GROUPS;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words that match nearly every note, and the words a question is made of ("how do I", "can
/// you", "don't"): they would only add noise to a score.
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
            // Question words, and the verbs and pronouns a question is built with.
            | "how"
            | "what"
            | "where"
            | "when"
            | "which"
            | "who"
            | "whom"
            | "whose"
            | "why"
            | "do"
            | "does"
            | "did"
            | "can"
            | "could"
            | "should"
            | "would"
            | "shall"
            | "may"
            | "might"
            | "must"
            | "need"
            | "have"
            | "has"
            | "had"
            | "been"
            | "being"
            | "am"
            | "i"
            | "me"
            | "my"
            | "we"
            | "us"
            | "our"
            | "you"
            | "your"
            | "they"
            | "them"
            | "their"
            | "its"
            | "there"
            | "here"
            | "if"
            | "so"
            | "than"
            | "then"
            | "into"
            | "about"
            | "any"
            | "some"
            | "just"
            | "also"
            | "get"
            | "want"
            // Contractions, as `words` joins them ("don't" is "dont").
            | "dont"
            | "doesnt"
            | "didnt"
            | "isnt"
            | "arent"
            | "wasnt"
            | "cant"
            | "couldnt"
            | "shouldnt"
            | "wouldnt"
            | "wont"
            | "im"
            | "ive"
            | "youre"
            | "youve"
            | "weve"
            | "theyre"
            | "lets"
            | "thats"
            | "whats"
    )
}

/// Characters that end a run of code-like text (`shop/checkout/tax.py`, `--all-features`,
/// `RUN_SLOW_TESTS`, `document.selection()`): whitespace, quotes, brackets and separators.
fn ends_chunk(ch: char) -> bool {
    ch.is_whitespace()
        || matches!(
            ch,
            '`' | '"'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | ','
                | ';'
                | '='
                | '*'
                | '|'
                | '$'
        )
}

fn is_apostrophe(ch: char) -> bool {
    ch == '\'' || ch == '\u{2019}'
}

/// Splits text into lowercase words, leaving out stop words. Code splits into its words too:
/// paths at `/`, `.`, `_` and `-`, identifiers at a change of case (`withSysroot`, `XMLHttp`),
/// so `shop/checkout/tax.py` meets a query for "checkout tax" and `AsyncHook` one for "async
/// hook". A token of several words is also kept whole (lowercased, its `-`, `_`, `.` and `/`
/// kept), and so is each such segment of a path, so `RUN_SLOW_TESTS` or `gen_vimdoc.py` meets
/// itself before every note that says "run" or "tests". An apostrophe inside a word joins it
/// ("don't" is "dont", a stop word) and a final "'s" goes ("uv's" is "uv").
fn words(text: &str, mut sink: impl FnMut(&str)) {
    let mut emit = |word: &str| {
        if !word.is_empty() && !is_stop_word(word) {
            sink(word);
        }
    };
    let mut word = String::new();
    for chunk in text.split(ends_chunk) {
        let chunk = chunk.trim_matches(|c: char| !c.is_alphanumeric());
        if chunk.is_empty() {
            continue;
        }
        let chars: Vec<char> = chunk.chars().collect();
        // How many words the chunk holds, and whether one is longer than a letter ("e.g").
        let mut parts = 0usize;
        let mut long_part = false;
        let mut flush = |word: &mut String| {
            if !word.is_empty() {
                parts += 1;
                long_part |= word.chars().nth(1).is_some();
                emit(word);
                word.clear();
            }
        };
        let mut i = 0;
        while i < chars.len() {
            let ch = chars[i];
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1).copied();
            if ch.is_alphanumeric() {
                let camel_break = ch.is_uppercase()
                    && prev.is_some_and(|p| {
                        p.is_lowercase()
                            || p.is_ascii_digit()
                            || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
                    });
                if camel_break {
                    flush(&mut word);
                }
                word.extend(ch.to_lowercase());
            } else if is_apostrophe(ch)
                && prev.is_some_and(char::is_alphabetic)
                && next.is_some_and(char::is_alphabetic)
            {
                let possessive = matches!(next, Some('s' | 'S'))
                    && !chars.get(i + 2).is_some_and(|c| c.is_alphanumeric());
                if possessive {
                    i += 1;
                }
            } else {
                flush(&mut word);
            }
            i += 1;
        }
        flush(&mut word);
        if parts > 1 && long_part {
            let whole = chunk.to_lowercase();
            emit(&whole);
            if whole.contains('/') {
                for segment in whole.split('/') {
                    let segment = segment.trim_matches(|c: char| !c.is_alphanumeric());
                    if segment.contains(|c: char| !c.is_alphanumeric()) {
                        emit(segment);
                    }
                }
            }
        }
    }
}

/// Snowball's English stemmer (Porter2), so "rounds", "rounding" and "rounded" meet "round" and
/// "migrating" meets "migrations". A token kept whole (`run_slow_tests`) stays as it is.
fn stem(word: &str) -> Cow<'_, str> {
    if !word.chars().all(char::is_alphanumeric) {
        return Cow::Borrowed(word);
    }
    Stemmer::create(Algorithm::English).stem(word)
}

/// The terms of a text as the index holds them: words, stemmed.
pub fn tokenize(text: &str, mut sink: impl FnMut(&str)) {
    words(text, |word| sink(&stem(word)));
}

/// The terms a query looks up: its own distinct terms in the order given (so a score is summed
/// in a fixed order), then the words the synonym table adds for them.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms = asked_terms(query);
    let table = synonyms();
    words(query, |word| {
        let more = table.get(word).or_else(|| table.get(&singular(word)?));
        for term in more.into_iter().flatten() {
            if !terms.contains(term) {
                terms.push(term.clone());
            }
        }
    });
    terms
}

/// "dependencies" -> "dependency", "fixtures" -> "fixture": enough for a synonym table that
/// lists the singular, without a stemmer's conflations ("setting" and "set").
fn singular(word: &str) -> Option<String> {
    if let Some(stem) = word.strip_suffix("ies") {
        return Some(format!("{stem}y"));
    }
    let stem = word.strip_suffix('s')?;
    (!stem.ends_with('s')).then(|| stem.to_owned())
}

/// The query's own distinct terms, without the words the synonym table adds: what `relevance`
/// measures a hit against.
pub fn asked_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    tokenize(query, |t| {
        if !terms.iter().any(|have| have == t) {
            terms.push(t.to_owned());
        }
    });
    terms
}

/// Word as written (lowercase) -> the stems of the other words of its synonym groups. Keyed by
/// the word, not its stem: "setting" and "set" stem alike and mean different things.
fn synonyms() -> &'static HashMap<String, Vec<String>> {
    static TABLE: OnceLock<HashMap<String, Vec<String>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: HashMap<String, Vec<String>> = HashMap::new();
        for group in GROUPS {
            for from in *group {
                let own = stem(from);
                let others = table.entry((*from).to_owned()).or_default();
                for to in *group {
                    let to = stem(to);
                    if to != own && !others.iter().any(|have| *have == to) {
                        others.push(to.into_owned());
                    }
                }
            }
        }
        table
    })
}

/// Below this relevance the best hit is reported as "nothing matched well": tuned on
/// tests/retrieval/projects.json (`cargo xtask bench memory` prints the trade-off).
pub const MATCHED_WELL: f64 = 0.3;

/// Whether an answer whose best hit has this relevance matched anything well.
pub fn matched_well(best_relevance: f64) -> bool {
    best_relevance >= MATCHED_WELL
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

/// The hashes of the terms a query looks up (`query_terms`): the asked ones first, then what
/// the synonym table adds. Relevance is measured against the first `asked` only.
pub struct QueryHashes {
    pub hashes: Vec<u64>,
    pub asked: usize,
}

pub fn query_hashes(query: &str) -> QueryHashes {
    let terms = query_terms(query);
    QueryHashes {
        asked: asked_terms(query).len(),
        hashes: terms.iter().map(|t| term_hash(t)).collect(),
    }
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
            [
                "shop",
                "checkout",
                "tax",
                "py",
                "shop/checkout/tax.py",
                "tax.py"
            ]
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
    fn code_splits_into_words_and_stays_whole() {
        assert_eq!(
            terms_of("RUN_SLOW_TESTS"),
            ["run", "slow", "test", "run_slow_tests"]
        );
        assert_eq!(terms_of("withSysroot"), ["sysroot", "withsysroot"]);
        assert_eq!(
            terms_of("XMLHttpRequest"),
            ["xml", "http", "request", "xmlhttprequest"]
        );
        assert_eq!(
            terms_of("`--all-features`"),
            ["all", "featur", "all-features"]
        );
        assert_eq!(
            terms_of("document.selection() takes a ViewId."),
            [
                "document",
                "select",
                "document.selection",
                "take",
                "view",
                "id",
                "viewid"
            ]
        );
        // Sentence ends and abbreviations are no tokens of their own.
        assert_eq!(terms_of("the end. e.g. this"), ["end", "e", "g"]);
        assert_eq!(terms_of("v1.2"), ["v1", "2", "v1.2"]);
    }

    #[test]
    fn questions_lose_their_question_words_and_contractions() {
        assert_eq!(
            terms_of("How do I start it locally? Don't rebuild"),
            ["start", "local", "rebuild"]
        );
        assert_eq!(
            terms_of("uv's tests aren\u{2019}t slow"),
            ["uv", "test", "slow"]
        );
        assert_eq!(terms_of("what's where"), Vec::<String>::new());
    }

    #[test]
    fn synonyms_widen_the_query_only() {
        let terms = query_terms("sign-in is slow");
        assert_eq!(terms[..3], ["sign", "sign-in", "slow"]);
        assert!(terms.contains(&"authent".to_owned()), "{terms:?}");
        assert!(terms.contains(&"perform".to_owned()), "{terms:?}");
        assert_eq!(asked_terms("sign-in is slow"), ["sign", "sign-in", "slow"]);
        assert_eq!(terms_of("sign-in"), ["sign", "sign-in"]);
        // Keyed by the word as written: "set" is no "setting", though both stem to "set".
        assert_eq!(query_terms("set up"), ["set", "up"]);
        assert!(query_terms("settings").contains(&"config".to_owned()));
        assert!(query_terms("dependencies").contains(&"dep".to_owned()));
    }

    #[test]
    fn every_synonym_group_is_reachable_and_narrow() {
        for group in GROUPS {
            assert!(group.len() >= 2, "{group:?}");
            for word in *group {
                assert_eq!(*word, word.to_lowercase(), "{group:?}");
                assert!(!is_stop_word(word), "{word} is a stop word");
                assert!(synonyms().contains_key(*word), "{word} cannot be looked up");
            }
        }
    }

    #[test]
    fn relevance_is_the_share_of_the_ideal_score() {
        // A note that holds each asked word once at the average length scores the idfs' sum.
        assert_eq!(relevance(7.0, 7.0), 1.0);
        assert_eq!(relevance(3.5, 7.0), 0.5);
        assert_eq!(relevance(9.0, 7.0), 1.0);
        assert_eq!(relevance(1.0, 0.0), 0.0);
        assert!(matched_well(MATCHED_WELL) && !matched_well(MATCHED_WELL - 0.01));
        // One word of four, held once by an average note, the other three unknown: weak.
        let (n, idf_known) = (100.0, idf(100.0, 1.0));
        let ideal = idf_known + 3.0 * idf(n, 0.0);
        assert!(!matched_well(relevance(
            bm25(idf_known, 1.0, 10.0, 10.0),
            ideal
        )));
        // Both words of a two-word query, once each: well.
        let ideal = idf(n, 3.0) + idf(n, 20.0);
        let score = bm25(idf(n, 3.0), 1.0, 12.0, 10.0) + bm25(idf(n, 20.0), 1.0, 12.0, 10.0);
        assert!(matched_well(relevance(score, ideal)));
    }
}
