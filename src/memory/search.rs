//! BM25 over an incrementally maintained inverted index.
//!
//! Scores depend only on the set of searchable records, never on the order they were added or
//! removed in: a long-running server and a fresh one rank the same notes the same way. Removal
//! therefore updates document frequencies and the total length at once, and only the postings
//! keep dead entries until the next compaction.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

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

/// Lucene's idf of a term found in `df` of `live` documents: never negative, so a common word
/// cannot push a match below zero, and largest for a term no document holds.
pub fn idf(live: f64, df: f64) -> f64 {
    (1.0 + (live - df + 0.5) / (df + 0.5)).ln()
}

/// How well a hit matched, in [0, 1]: its BM25 text score (before the importance boost) over
/// the score a note reaches that holds each asked term once at the average length, which is
/// the sum of the terms' idfs (`asked_idfs`, a term no note holds included). A note that holds
/// every asked word scores about 1; one that holds only the commonest of them, little.
pub fn relevance(score: f64, asked_idfs: &[f64]) -> f64 {
    let reachable: f64 = asked_idfs.iter().sum();
    if reachable <= 0.0 || !score.is_finite() {
        return 0.0;
    }
    (score / reachable).clamp(0.0, 1.0)
}

/// Below this relevance the best hit is reported as "nothing matched well": tuned on
/// tests/retrieval/projects.json (`cargo xtask bench memory` prints the trade-off).
pub const MATCHED_WELL: f64 = 0.3;

/// Whether an answer whose best hit has this relevance matched anything well.
pub fn matched_well(best_relevance: f64) -> bool {
    best_relevance >= MATCHED_WELL
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
        // A note written in one word is found by a query in the other.
        let mut index = Index::default();
        index.insert(
            "auth",
            &[("authentication tokens expire after an hour", 1)],
            1.0,
        );
        index.insert("other", &[("checkout page layout", 1)], 1.0);
        let hits = index.top(&query_terms("why does sign-in stop working"), 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(index.key(hits[0].0), "auth");
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
    fn relevance_is_the_share_of_the_reachable_score() {
        // A note that holds each asked word once at the average length scores the idfs' sum.
        assert_eq!(relevance(7.0, &[3.0, 4.0]), 1.0);
        assert_eq!(relevance(3.5, &[3.0, 4.0]), 0.5);
        assert_eq!(relevance(9.0, &[3.0, 4.0]), 1.0);
        assert_eq!(relevance(1.0, &[]), 0.0);
        assert_eq!(relevance(f64::NAN, &[1.0]), 0.0);
        assert!(matched_well(MATCHED_WELL) && !matched_well(MATCHED_WELL - 0.01));
        // On an index: the words of a note match well, words no note holds do not, and one
        // common word among unknown ones does not either.
        let notes = [
            "checkout vat rounding per line",
            "stripe webhooks need the raw body",
            "the label template lives in templates/labels",
            "shipping is its own line",
        ];
        let mut index = Index::default();
        for (i, text) in notes.iter().enumerate() {
            index.insert(&i.to_string(), &[(text, 1)], 1.0);
        }
        let best = |query: &str| {
            let idfs: Vec<f64> = asked_terms(query)
                .iter()
                .map(|t| {
                    let df = notes.iter().filter(|n| terms_of(n).contains(t)).count();
                    idf(notes.len() as f64, df as f64)
                })
                .collect();
            let top = index.top(&query_terms(query), 1);
            top.first().map_or(0.0, |(_, s)| relevance(*s, &idfs))
        };
        assert!(
            matched_well(best("vat rounding")),
            "{}",
            best("vat rounding")
        );
        assert_eq!(best("sourdough bread starter"), 0.0);
        let weak = best("medieval castle siege line");
        assert!(weak > 0.0 && !matched_well(weak), "{weak}");
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
