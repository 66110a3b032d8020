//! Whether two notes say the same thing: a later session that learns a fact again should update
//! the note that holds it, not add a second one (Knecht's rule: rewrite notes, don't append),
//! while two different facts that share most of their words (another command, flag, number or
//! component, or the opposite advice) must stay two notes.
//!
//! Merging the wrong pair loses a fact, keeping a duplicate costs a few bytes, so every test
//! here leans towards "different":
//!
//! - anchors: what names one thing exactly (a code span, a path, a flag, a number, an
//!   identifier, a name written with a capital inside a sentence). When each text has an
//!   anchor the other lacks, one thing was swapped for another: different facts. One side
//!   alone having more (a detail added or left out) is still the same fact.
//! - negation: a text that says "not", "never", "don't" or "avoid" against one that does not
//!   gives the opposite advice.
//! - words: the share of their stemmed words (synonyms as one word; generic verbs and
//!   quantifiers weigh little) the two hold in common, both ways (Dice), must reach
//!   [`SAME_WORDS`].
//!
//! Measured on tests/duplicates/set.json by `cargo xtask bench memory` and
//! tests/memory_duplicates.rs.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use super::search::tokenize;
use super::synonyms::GROUPS;

/// The weighted share of words two texts must hold in common to say the same thing. On
/// tests/duplicates/set.json the restatements score from 0.62 (the lowest three under 0.70,
/// the rest from 0.80) and the different facts that pass the anchor and negation tests up to
/// 0.73: the threshold sits in that gap.
pub const SAME_WORDS: f64 = 0.76;

/// What a text is made of, for comparing.
pub struct Profile {
    anchors: Vec<String>,
    /// The text lowercased with code quotes gone and whitespace collapsed: where the other
    /// text's anchors are looked for.
    flat: String,
    negated: bool,
    words: HashMap<String, f64>,
}

impl Profile {
    pub fn of(text: &str) -> Profile {
        let mut words = HashMap::new();
        tokenize(text, |term| {
            let term = canonical(term);
            let weight = if is_generic(&term) { 0.25 } else { 1.0 };
            words.insert(term, weight);
        });
        Profile {
            anchors: anchors(text),
            flat: flatten(text),
            negated: negated(text),
            words,
        }
    }
}

/// Why two texts are not the same fact, or `None` when they are.
pub fn difference(a: &Profile, b: &Profile) -> Option<String> {
    if a.negated != b.negated {
        return Some("one says not to".into());
    }
    let only_a: Vec<&String> = a.anchors.iter().filter(|x| !holds(&b.flat, x)).collect();
    let only_b: Vec<&String> = b.anchors.iter().filter(|x| !holds(&a.flat, x)).collect();
    if !only_a.is_empty() && !only_b.is_empty() {
        return Some(format!("{} against {}", only_a[0], only_b[0]));
    }
    let dice = words_in_common(a, b);
    (dice < SAME_WORDS).then(|| format!("{:.0}% of their words in common", dice * 100.0))
}

/// The weighted share of their words two texts hold in common, from 0 to 1 (Dice).
pub fn words_in_common(a: &Profile, b: &Profile) -> f64 {
    let shared: f64 = a
        .words
        .iter()
        .filter_map(|(word, weight)| b.words.get(word).map(|other| weight.min(*other)))
        .sum();
    let total: f64 = a.words.values().sum::<f64>() + b.words.values().sum::<f64>();
    if total > 0.0 {
        2.0 * shared / total
    } else {
        0.0
    }
}

/// Whether `text` and `other` say the same thing.
pub fn same_fact(text: &str, other: &str) -> bool {
    difference(&Profile::of(text), &Profile::of(other)).is_none()
}

/// Words that say little about which fact a note holds: a paraphrase swaps them freely.
fn is_generic(term: &str) -> bool {
    matches!(
        term,
        "use"
            | "make"
            | "go"
            | "put"
            | "add"
            | "set"
            | "allow"
            | "keep"
            | "take"
            | "give"
            | "work"
            | "tri"
            | "same"
            | "other"
            | "all"
            | "each"
            | "everi"
            | "mani"
            | "most"
            | "onli"
            | "new"
            | "first"
            | "one"
            | "two"
            | "like"
            | "via"
            | "e"
            | "g"
            | "eg"
            | "i"
            | "instead"
            | "default"
            | "alway"
            | "automat"
            | "specif"
            | "certain"
            | "probabl"
            | "simpli"
            | "realli"
            | "much"
            | "lot"
            | "way"
            | "thing"
            | "state"
            | "abl"
            | "requir"
            | "show"
            | "see"
    )
}

/// A stem in a synonym group stands for the group (its first word's stem).
fn canonical(term: &str) -> String {
    static TABLE: OnceLock<HashMap<String, String>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for group in GROUPS {
            let mut first = None;
            for word in *group {
                let mut stem = String::new();
                tokenize(word, |t| {
                    if stem.is_empty() {
                        stem = t.to_owned();
                    }
                });
                if stem.is_empty() {
                    continue;
                }
                let head = first.get_or_insert_with(|| stem.clone()).clone();
                table.entry(stem).or_insert(head);
            }
        }
        table
    });
    table.get(term).cloned().unwrap_or_else(|| term.to_owned())
}

/// "not", "never", "don't", "avoid" and the like, as words.
fn negated(text: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '\u{2019}'))
        .map(|w| w.to_lowercase().replace('\u{2019}', "'"))
        .any(|w| {
            matches!(
                w.as_str(),
                "not"
                    | "no"
                    | "never"
                    | "nothing"
                    | "none"
                    | "cannot"
                    | "without"
                    | "avoid"
                    | "avoids"
                    | "avoiding"
            ) || w.ends_with("n't")
        })
}

fn flatten(text: &str) -> String {
    let lower = text.to_lowercase().replace('`', " ");
    lower.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `flat` holds `anchor` as a whole (not inside a longer word; a plural "s" may follow).
fn holds(flat: &str, anchor: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    flat.match_indices(anchor).any(|(at, _)| {
        let before = flat[..at].chars().next_back();
        let rest = &flat[at + anchor.len()..];
        let rest = match rest.strip_prefix('s') {
            Some(plural) if !word(plural.chars().next()) => plural,
            _ => rest,
        };
        let after = rest.chars().next();
        let starts_word = anchor.chars().next().is_some_and(|c| c.is_alphanumeric());
        let ends_word = anchor
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric());
        !((starts_word && word(before)) || (ends_word && word(after)))
    })
}

/// The exact names in a text, lowercased: code spans, and words that are code (a digit, a
/// separator inside, a leading dash, a capital inside) or a name (a capital inside a sentence).
fn anchors(text: &str) -> Vec<String> {
    let mut out: HashSet<String> = HashSet::new();
    let mut prose = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let span = flatten(part);
            if !span.is_empty() {
                out.insert(span);
            }
        } else {
            prose.push_str(part);
            prose.push(' ');
        }
    }
    let mut sentence_start = true;
    for raw in prose.split_whitespace() {
        let word = raw.trim_matches(|c: char| {
            matches!(
                c,
                '"' | '\'' | '(' | ')' | '[' | ']' | '{' | '}' | ',' | ';' | ':' | '!' | '?' | '*'
            )
        });
        let word = word.trim_end_matches('.');
        let starts = sentence_start;
        sentence_start = raw.ends_with(['.', '!', '?', ':']);
        if word.is_empty() {
            continue;
        }
        let chars: Vec<char> = word.chars().collect();
        let inner_capital = chars
            .windows(2)
            .any(|w| w[0].is_lowercase() && w[1].is_uppercase());
        let code = chars.iter().any(char::is_ascii_digit)
            || chars[1..chars.len().saturating_sub(1).max(1)]
                .iter()
                .any(|c| matches!(c, '_' | '.' | '/' | ':' | '=' | '@' | '#' | '$' | '<' | '>'))
            || (word.starts_with('-')
                && word
                    .trim_start_matches('-')
                    .starts_with(char::is_alphabetic))
            || inner_capital;
        let name = !starts && chars[0].is_uppercase() && chars.len() > 1;
        if code {
            out.insert(word.to_lowercase());
        } else if name {
            // "PRs" names what "PR" does.
            let one = match word.strip_suffix('s') {
                Some(stem) if stem.len() > 1 && stem.chars().all(|c| c.is_uppercase()) => stem,
                _ => word,
            };
            out.insert(one.to_lowercase());
        }
    }
    let mut out: Vec<String> = out.into_iter().collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_code_numbers_and_names() {
        assert_eq!(
            anchors("Run `cargo test --doc` in CI, see PEP8 and go to Vim. Rust is fine."),
            ["cargo test --doc", "ci", "pep8", "vim"]
        );
        assert_eq!(
            anchors("wrap at 72 characters, use --check"),
            ["--check", "72"]
        );
        assert_eq!(
            anchors("the shop/checkout/tax.py file"),
            ["shop/checkout/tax.py"]
        );
    }

    #[test]
    fn a_restatement_is_the_same_fact() {
        assert!(same_fact(
            "Use `cargo doc --open` for API documentation as well as dependency documentation.",
            "For API and dependency documentation use `cargo doc --open`."
        ));
        assert!(same_fact(
            "Avoid @mentioning people in commit messages, as such messages create a lot of \
             duplicate notification traffic during rebases.",
            "Don't @mention people in commit messages: during rebases they create a lot of \
             duplicate notification traffic."
        ));
        // A detail added to the same command is still the same fact.
        assert!(same_fact(
            "Run valgrind locally with `VALGRIND=1 make test`.",
            "To run valgrind locally: `VALGRIND=1 make test`."
        ));
    }

    #[test]
    fn another_command_number_or_the_opposite_is_another_fact() {
        let base = "Documentation tests are run with `cargo test --doc`.";
        assert!(!same_fact(
            base,
            "Unit tests are run with `cargo test --lib`."
        ));
        assert!(!same_fact(
            "The commit subject has at most 72 characters.",
            "The commit subject has at most 50 characters."
        ));
        assert!(!same_fact(
            "Do not rebase the commits once the PR is open.",
            "Rebase the commits once the PR is open."
        ));
        assert!(!same_fact(
            "Vimscript files are maintained by Vim.",
            "Lua files are maintained by Nvim."
        ));
    }
}
