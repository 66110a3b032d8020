//! Recall: the notes that match a prompt, chosen for the agent to be handed with the prompt, so
//! the lookup half of the loop happens without the model's obedience.
//!
//! A prompt gives at most [`MAX_NOTES`] notes, each above a relevance threshold (a prompt that
//! matches nothing well gives nothing), none the session was already given in the same words
//! (by an earlier prompt, or whole in its session-start index), under a hard byte cap: whole
//! notes, or the last note cut at a line end with a mark that says where the rest is. The text
//! is plain and safe to put before a model: no terminal escapes, no other control bytes.
//!
//! What a session was given lives with the caller (the hook keeps it in the gate's per-user
//! state folder); here it is a set of [`fingerprint`]s, so a note that changed since is given
//! again.

use std::collections::HashSet;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use super::record::Note;
use super::search::query_terms;
use super::store::Store;

/// The most notes one prompt is given.
pub const MAX_NOTES: usize = 3;
/// A note is given only when its relevance (BM25 score over what the prompt's words could reach,
/// `search::relevance`) is at least this. On the prompt set of `cargo xtask bench memory`
/// (tests/retrieval/prompts.json) the notes prompts about nothing in the store reached stay
/// under 0.25 and every expected note is above 0.3: this is halfway between.
pub const THRESHOLD: f64 = 0.275;
/// Only the start of a prompt is searched: a question comes first, and a pasted log of
/// megabytes would make the search cost what the log costs.
pub const QUERY_BYTES: usize = 2_000;
/// Candidates read from the index before the threshold and the session's filter.
const CANDIDATES: usize = 12;

/// What [`recall`] is asked for.
pub struct Options<'a> {
    /// Hard cap of [`Recall::text`] in bytes (`[memory] recall_bytes`).
    pub cap: usize,
    /// Fingerprints of what the session was already given.
    pub given: &'a HashSet<String>,
}

/// One note chosen for the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Recalled {
    pub id: String,
    /// Where it lives, relative to the repository.
    pub file: String,
    pub fingerprint: String,
    pub relevance: f64,
    /// Whether the text holds it whole (false: cut at a line end, the mark says so).
    pub whole: bool,
}

/// What a prompt is given: the notes and the text that carries them (empty when none).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recall {
    pub text: String,
    pub notes: Vec<Recalled>,
    /// Matches above the threshold left out because the session has them already.
    pub already_given: usize,
}

/// The notes of `store` that match `prompt`, under `opts.cap` bytes.
pub fn recall(store: &mut Store, prompt: &str, opts: &Options) -> Recall {
    let query = clean(cut_at_char(prompt, QUERY_BYTES));
    let terms = weighed_terms(&query);
    if terms.is_empty() {
        return Recall::default();
    }
    // The prompt's own words, not the terms: the search stems them and adds their synonyms
    // itself, and counts only the words asked towards what a full match is.
    let asked: Vec<&str> = query
        .split_whitespace()
        .filter(|word| {
            let mut stemmed = query_terms(word);
            stemmed.truncate(1);
            stemmed.first().is_none_or(|t| !is_phrasing(t))
        })
        .collect();
    let hits = store.answer_notes(&asked.join(" "), CANDIDATES);
    let mut recall = Recall::default();
    let mut chosen: Vec<(String, Note, f64, String)> = Vec::new();
    for found in hits {
        let (id, note, relevance) = (found.id, found.record, found.relevance);
        if relevance < THRESHOLD {
            continue;
        }
        let fingerprint = fingerprint(&note.content);
        if opts.given.contains(&fingerprint) {
            recall.already_given += 1;
            continue;
        }
        chosen.push((id, note, relevance, fingerprint));
        if chosen.len() == MAX_NOTES {
            break;
        }
    }
    if chosen.is_empty() {
        return recall;
    }
    let mut text = String::from(HEADER);
    let mut stale = store.stale_checker();
    for (id, note, relevance, fingerprint) in chosen {
        let file = Store::relative_path::<Note>(&id);
        let mut head = format!("\n{} [{id}] in {file}:\n", category(&note.category));
        if let Some(stale) = stale.check(&note) {
            head.push_str(&format!("({})\n", clean(&stale.describe())));
        }
        let body = clean(&note.content);
        let body = body.trim_end();
        let room = opts.cap.saturating_sub(text.len() + head.len());
        let whole = body.len() < room;
        let shown = if whole {
            format!("{body}\n")
        } else {
            match cut(body, room) {
                Some(cut) => cut,
                None => break,
            }
        };
        text.push_str(&head);
        text.push_str(&shown);
        recall.notes.push(Recalled {
            id,
            file,
            fingerprint,
            relevance,
            whole,
        });
        if !whole {
            break;
        }
    }
    if !recall.notes.is_empty() {
        recall.text = text;
    }
    recall
}

/// What opens the text: what the notes are and what to do with them.
const HEADER: &str = "memloop recall: notes from this repository's memory that match the prompt:\n";

/// Ends a note that did not fit; its file is named on the line above it.
const CUT_MARK: &str = "[cut here: the rest is in its file]\n";

/// `body` cut to whole lines within `room` bytes (with the mark), else at a word when not even
/// its first line fits; `None` when nothing useful fits.
fn cut(body: &str, room: usize) -> Option<String> {
    let room = room.checked_sub(CUT_MARK.len())?;
    let head = cut_at_char(body, room);
    let kept = match head.rfind('\n') {
        Some(end) if end > 0 => &head[..end],
        _ => match head.rfind(char::is_whitespace) {
            Some(end) if end > 0 => &head[..end],
            _ => return None,
        },
    };
    let kept = kept.trim_end();
    (!kept.is_empty()).then(|| format!("{kept}\n{CUT_MARK}"))
}

fn category(name: &str) -> &str {
    name.strip_suffix('s').unwrap_or(name)
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
fn cut_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Words a prompt is phrased with rather than about: they match notes by accident.
fn is_phrasing(term: &str) -> bool {
    matches!(
        term,
        "i" | "me"
            | "my"
            | "we"
            | "our"
            | "us"
            | "you"
            | "your"
            | "can"
            | "could"
            | "would"
            | "should"
            | "do"
            | "doe"
            | "did"
            | "how"
            | "what"
            | "whi"
            | "why"
            | "when"
            | "where"
            | "who"
            | "pleas"
            | "need"
            | "want"
            | "have"
            | "has"
            | "get"
            | "make"
            | "there"
            | "here"
            | "so"
            | "if"
            | "not"
            | "no"
            | "some"
            | "ani"
            | "all"
            | "just"
            | "now"
            | "then"
            | "into"
            | "about"
            | "which"
            | "they"
            | "them"
            | "its"
            | "but"
            | "also"
            | "again"
            | "let"
            | "thing"
            | "use"
            | "work"
            | "way"
            | "s"
            | "t"
            | "m"
    )
}

/// The prompt's distinct terms (stemmed), each with a weight: words that carry the prompt's
/// subject weigh 1; numbers and one-letter leftovers are left out.
fn weighed_terms(query: &str) -> Vec<(String, f64)> {
    query_terms(query)
        .into_iter()
        .filter(|t| {
            !is_phrasing(t) && t.chars().count() > 1 && !t.bytes().all(|b| b.is_ascii_digit())
        })
        .map(|t| (t, 1.0))
        .collect()
}

/// Names a note's text as given: the same words give the same fingerprint, an edit a new one.
/// The session-start index gives a short note whole as its line's title, so a title whose
/// fingerprint equals a note's means the session has that note already.
pub fn fingerprint(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // What a title leaves off a whole note: list and heading marks, the closing punctuation.
    let flat = flat
        .trim_start_matches(['#', '-', '*', '>', ' '])
        .trim_end_matches(['.', ';', ':', ',', ' ']);
    let digest = Sha256::digest(flat.as_bytes());
    digest[..12].iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// The fingerprints of the titles of the session-start index `text` (lines
/// `- <category>: <title> [<id>]`), for [`Options::given`].
pub fn index_fingerprints(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- ")?;
            let (_, rest) = rest.split_once(": ")?;
            let (title, id) = rest.rsplit_once(" [")?;
            id.ends_with(']').then(|| fingerprint(title))
        })
        .collect()
}

/// `text` without terminal escape sequences or other control characters (newlines and tabs
/// stay), safe to put before a model or on a terminal.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\n' | '\t' => out.push(ch),
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            // ESC: skip the whole sequence (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ST`,
            // or a two-character escape).
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || c == '\u{9c}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            },
            // The C1 CSI introducer: the same sequence with one character.
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // Bidirectional overrides and isolates reorder what a reader sees.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::store::NewNote;

    fn store_with(notes: &[(&str, &[&str])]) -> (tempfile::TempDir, Store, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let ids = notes
            .iter()
            .map(|(content, tags)| {
                store
                    .store_note(NewNote {
                        content: (*content).to_owned(),
                        category: "gotchas".to_owned(),
                        importance: 7,
                        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
                        task_id: None,
                        key: None,
                        paths: Vec::new(),
                    })
                    .unwrap()
            })
            .collect();
        (dir, store, ids)
    }

    const VAT: &str = "Spanish VAT is rounded per line, not per invoice: the checkout total \
                       differs by a cent otherwise.";
    const RELEASE: &str = "Release builds need the vendored OpenSSL: the system one lacks the \
                           legacy provider the signing step loads.";

    fn ask(store: &mut Store, prompt: &str, given: &HashSet<String>, cap: usize) -> Recall {
        recall(store, prompt, &Options { cap, given })
    }

    #[test]
    fn a_matching_prompt_gets_the_note_with_its_id_and_file() {
        let (_dir, mut store, ids) =
            store_with(&[(VAT, &["vat", "checkout"]), (RELEASE, &["release"])]);
        let got = ask(
            &mut store,
            "Why is the checkout VAT off by a cent?",
            &HashSet::new(),
            1500,
        );
        assert_eq!(got.notes.len(), 1, "{got:?}");
        assert_eq!(got.notes[0].id, ids[0]);
        assert!(got.text.contains(VAT.split_whitespace().next().unwrap()));
        assert!(got.text.contains(&format!("[{}]", ids[0])));
        assert!(
            got.text
                .contains(&format!(".memloop/memory/notes/{}.md", ids[0]))
        );
        assert!(!got.text.contains("OpenSSL"));
        assert!(got.notes[0].whole);
    }

    #[test]
    fn nonsense_and_empty_prompts_get_nothing() {
        let (_dir, mut store, _) = store_with(&[(VAT, &["vat"]), (RELEASE, &["release"])]);
        for prompt in [
            "",
            "   ",
            "purple elephants juggle quietly",
            "\u{1b}[2J",
            "how do I?",
            "12345",
        ] {
            let got = ask(&mut store, prompt, &HashSet::new(), 1500);
            assert_eq!(got, Recall::default(), "{prompt:?}");
        }
        // One word of a long unrelated prompt is not a match.
        let got = ask(
            &mut store,
            "Write a haiku about autumn leaves falling on a quiet lake, then translate it to French line by line",
            &HashSet::new(),
            1500,
        );
        assert!(got.notes.is_empty(), "{got:?}");
    }

    #[test]
    fn what_the_session_has_is_not_given_again_unless_it_changed() {
        let (_dir, mut store, _) = store_with(&[(VAT, &["vat"])]);
        let first = ask(&mut store, "checkout vat rounding", &HashSet::new(), 1500);
        assert_eq!(first.notes.len(), 1);
        let given: HashSet<String> = first.notes.iter().map(|n| n.fingerprint.clone()).collect();
        let second = ask(
            &mut store,
            "vat rounding in the checkout again",
            &given,
            1500,
        );
        assert!(second.notes.is_empty());
        assert_eq!(second.already_given, 1);
        // The same words in other whitespace are the same note; other words are not.
        assert!(given.contains(&fingerprint(&VAT.replace(' ', "\n"))));
        assert!(!given.contains(&fingerprint(&VAT.replace("cent", "euro"))));
    }

    #[test]
    fn a_short_note_given_whole_by_the_index_is_not_given_again() {
        let short = "Checkout VAT is rounded per line.";
        let index = format!("rule line\nMemory index (1 note):\n- gotcha: {short} [n-1]\n");
        let given: HashSet<String> = index_fingerprints(&index).into_iter().collect();
        let (_dir, mut store, _) = store_with(&[(short, &["vat"])]);
        let got = ask(&mut store, "checkout vat rounding", &given, 1500);
        assert!(got.notes.is_empty() && got.already_given == 1, "{got:?}");
        // A long note's index line is only its title: the note itself is still given.
        let index = "- gotcha: Spanish VAT is rounded per line, not per invoice [n-2]\n";
        let given: HashSet<String> = index_fingerprints(index).into_iter().collect();
        let (_dir, mut store, _) = store_with(&[(VAT, &["vat"])]);
        assert_eq!(
            ask(&mut store, "checkout vat rounding", &given, 1500)
                .notes
                .len(),
            1
        );
    }

    #[test]
    fn the_cap_holds_whole_lines_and_a_cut_says_where_the_rest_is() {
        let long: String = (0..60)
            .map(|i| format!("Checkout VAT fact number {i} about rounding per line.\n"))
            .collect();
        let (_dir, mut store, ids) = store_with(&[(&long, &["vat"])]);
        for cap in [256, 700, 1500] {
            let got = ask(&mut store, "checkout vat rounding", &HashSet::new(), cap);
            assert!(got.text.len() <= cap, "{cap}: {} bytes", got.text.len());
            assert_eq!(got.notes.len(), 1);
            assert!(!got.notes[0].whole);
            assert!(
                got.text
                    .contains(&format!("[{}] in .memloop/memory/notes/{0}.md:\n", ids[0]))
            );
            assert!(got.text.ends_with(CUT_MARK), "{:?}", got.text);
            for line in got.text.lines().filter(|l| l.starts_with("Checkout")) {
                assert!(line.ends_with("per line."), "broken line {line:?}");
            }
        }
    }

    #[test]
    fn at_most_three_notes_and_never_over_the_cap() {
        let notes: Vec<String> = (0..6)
            .map(|i| format!("Checkout VAT rounding detail {i}: lines round on their own."))
            .collect();
        let refs: Vec<(&str, &[&str])> = notes.iter().map(|n| (n.as_str(), &["vat"][..])).collect();
        let (_dir, mut store, _) = store_with(&refs);
        let got = ask(&mut store, "checkout vat rounding", &HashSet::new(), 1500);
        assert_eq!(got.notes.len(), MAX_NOTES);
        let tight = ask(&mut store, "checkout vat rounding", &HashSet::new(), 400);
        assert!(tight.text.len() <= 400 && !tight.notes.is_empty());
    }

    #[test]
    fn what_is_given_holds_no_escapes_or_control_bytes() {
        let hostile = "Checkout VAT \u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7} bell\u{7} del\u{7f} \
                       bidi\u{202e}x \u{9b}2J done\r\nnext line";
        let (_dir, mut store, _) = store_with(&[(hostile, &["vat"])]);
        let got = ask(&mut store, "checkout vat \u{1b}[2J", &HashSet::new(), 1500);
        assert_eq!(got.notes.len(), 1);
        assert!(
            !got.text.chars().any(|c| c.is_control() && c != '\n'),
            "{:?}",
            got.text
        );
        assert!(
            got.text
                .contains("Checkout VAT red  bell del bidix  done\nnext line"),
            "{:?}",
            got.text
        );
    }

    #[test]
    fn a_huge_prompt_is_searched_by_its_start_only() {
        let (_dir, mut store, _) = store_with(&[(VAT, &["vat"])]);
        let prompt = format!("checkout vat rounding {}", "x".repeat(10 << 20));
        let got = ask(&mut store, &prompt, &HashSet::new(), 1500);
        assert_eq!(got.notes.len(), 1);
        let binary = String::from_utf8_lossy(&[0xff, 0, 1, 2, 0xfe, 0x1b, b'[']).into_owned();
        assert!(
            ask(&mut store, &binary, &HashSet::new(), 1500)
                .notes
                .is_empty()
        );
    }
}
