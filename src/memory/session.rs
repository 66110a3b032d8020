//! The session-start text: what a new session is told about the repository's memory before its
//! first prompt, so the lookup half of the loop no longer rests on the model remembering a rule.
//!
//! It is the lookup rule line, then one line per note or route worth knowing up front, ranked
//! by importance and recency, under a hard byte cap. A line is whole or absent, and whatever did
//! not fit is counted in a closing line that fits inside the cap too: an agent must never work
//! from an index it does not know was cut (seed 003 rejects an over-size index for that reason).

use std::path::Path;

use super::index::Candidate;
use super::store::{Opening, Store};
use crate::config::Config;

/// The lookup rule, the first of the two rule lines: alone it is the session-start text when no
/// index can be read (a remote or third-party server, an empty store).
pub fn reminder() -> &'static str {
    include_str!("../../assets/rules.md")
        .lines()
        .next()
        .expect("the rules file holds the lookup rule first")
}

/// Recency is worth up to this many importance points: today's note gets all of them, and the
/// bonus halves every [`HALF_LIFE_DAYS`], so a fresh 7 outranks a 9 from last quarter.
const RECENCY_POINTS: f64 = 3.0;
const HALF_LIFE_DAYS: f64 = 30.0;
/// How long a session start may spend reading note files when there is no index yet (a fresh
/// clone): what it read by then is shown and kept, and the next start reads the rest.
const COLD_START_BUDGET: std::time::Duration = std::time::Duration::from_millis(1500);
/// A title longer than this is shortened at a word boundary (the full text is a query away).
const TITLE_BYTES: usize = 100;
/// A clause shorter than this is not a title yet ("Note: ..."), so the cut looks further.
const MIN_CLAUSE_BYTES: usize = 24;

/// What a session is given, and how much of the memory it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionText {
    /// Empty when session-start text is switched off.
    pub text: String,
    pub source: Source,
    /// Notes and routes with a line in the text.
    pub shown: usize,
    /// Notes and routes that did not fit.
    pub more: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `[memory] session_start = false`: nothing is given.
    Off,
    /// No index to read (remote server, empty store): the lookup rule alone.
    Reminder,
    /// The embedded store's index under the cap.
    Index,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Off => "off",
            Source::Reminder => "reminder",
            Source::Index => "index",
        }
    }
}

/// The session-start text for the repository at `root` as `config` asks for it: the index of
/// the embedded store, or the lookup rule alone when the memory lives on another server.
pub fn session_text(root: &Path, config: &Config) -> anyhow::Result<SessionText> {
    if !config.memory.session_start {
        return Ok(SessionText {
            text: String::new(),
            source: Source::Off,
            shown: 0,
            more: 0,
        });
    }
    if !config.server()?.is_embedded() {
        return Ok(reminder_only());
    }
    let store = Store::open_with(
        root,
        Opening {
            verify: false,
            deadline: Some(std::time::Instant::now() + COLD_START_BUDGET),
        },
    )?;
    Ok(index(&store, config.memory.index_bytes as usize))
}

fn reminder_only() -> SessionText {
    SessionText {
        text: format!("{}\n", reminder()),
        source: Source::Reminder,
        shown: 0,
        more: 0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Note,
    Route,
}

struct Ranked {
    kind: Kind,
    candidate: Candidate,
    rank: f64,
}

/// The index of `store` in at most `cap` bytes (the reminder alone when nothing is stored or
/// not even one line fits).
pub fn index(store: &Store, cap: usize) -> SessionText {
    // The short lists first; all of a kind only when a level it left out could have ranked.
    let mut full = (false, false);
    loop {
        match index_from(store, cap, full) {
            Ok((text, None)) => return with_pending(text, store.pending),
            Ok((_, Some(Kind::Note))) if !full.0 => full.0 = true,
            Ok((_, Some(Kind::Route))) if !full.1 => full.1 = true,
            Ok((text, Some(_))) => return with_pending(text, store.pending),
            Err(err) => {
                eprintln!(
                    "memloop: the memory index could not be read ({err:#}); giving the lookup \
                     rule alone"
                );
                return reminder_only();
            }
        }
    }
}

/// Says that the index is still being built, when a cold start ran out of time: the lines
/// shown are true, and the rest follows at the next start.
fn with_pending(mut text: SessionText, pending: usize) -> SessionText {
    if pending > 0 && text.source != Source::Off {
        text.text.push_str(&format!(
            "(memloop is still indexing {} more; the next session has the whole index)\n",
            counted(pending, "note file")
        ));
    }
    text
}

/// The index from the candidates of each kind (`full`: every record of notes, of routes), and
/// the kind whose short list could not vouch for the lines chosen, if any.
fn index_from(
    store: &Store,
    cap: usize,
    full: (bool, bool),
) -> anyhow::Result<(SessionText, Option<Kind>)> {
    let notes = store.notes.index().candidates(full.0)?;
    let routes = store.routes.index().candidates(full.1)?;
    let mut candidates: Vec<Ranked> = Vec::new();
    for (kind, list) in [(Kind::Note, &notes), (Kind::Route, &routes)] {
        for candidate in &list.records {
            candidates.push(Ranked {
                kind,
                rank: f64::from(candidate.meta.importance),
                candidate: candidate.clone(),
            });
        }
    }
    if candidates.is_empty() {
        return Ok((reminder_only(), None));
    }
    // Ages count from the newest record, not the clock, so the same files give the same text.
    let newest = candidates.iter().map(|c| c.candidate.meta.day).max();
    for ranked in &mut candidates {
        let age = match newest {
            Some(newest) => f64::from((newest - ranked.candidate.meta.day).max(0)),
            None => f64::INFINITY,
        };
        ranked.rank += RECENCY_POINTS * 0.5f64.powf(age / HALF_LIFE_DAYS);
    }
    let order = |a: &Ranked, b: &Ranked| {
        b.rank
            .total_cmp(&a.rank)
            .then_with(|| b.candidate.meta.at_ms.cmp(&a.candidate.meta.at_ms))
            .then_with(|| a.candidate.id.cmp(&b.candidate.id))
    };
    // Only the head that can fit needs sorting: a line is rarely shorter than 32 bytes, and
    // should the head run out, the rest is sorted after it.
    let head = (cap / 32).min(candidates.len());
    if head < candidates.len() {
        candidates.select_nth_unstable_by(head, order);
    }
    candidates[..head].sort_unstable_by(order);
    let mut sorted = head;

    let mut text = format!(
        "{}\nMemory index, most important and recent first ({}, {}):\n",
        reminder(),
        counted(notes.total, "note"),
        counted(routes.total, "route"),
    );
    let (mut notes_left, mut routes_left) = (notes.total, routes.total);
    let mut shown = 0;
    // Only the notes shown are looked at: a few file reads, whatever the number of notes.
    let mut stale = store.stale_checker();
    let mut shown_per_level: std::collections::HashMap<(Kind, u8), usize> = Default::default();
    while shown < candidates.len() {
        if shown == sorted {
            candidates[sorted..].sort_unstable_by(order);
            sorted = candidates.len();
        }
        let ranked = &candidates[shown];
        let mark = match ranked.kind {
            Kind::Note => store
                .notes
                .get(&ranked.candidate.id)
                .and_then(|note| stale.check(&note))
                .map(|stale| format!(" ({})", stale.mark()))
                .unwrap_or_default(),
            Kind::Route => String::new(),
        };
        let line = format!(
            "- {} [{}]{mark}",
            ranked.candidate.meta.line, ranked.candidate.id
        );
        let line = crate::text::printable(&line, crate::text::Lines::One).into_owned();
        let (n, r) = match ranked.kind {
            Kind::Note => (notes_left.saturating_sub(1), routes_left),
            Kind::Route => (notes_left, routes_left.saturating_sub(1)),
        };
        let closing = closing(n, r).map_or(0, |c| c.len() + 1);
        if text.len() + line.len() + 1 + closing > cap {
            break;
        }
        text.push_str(&line);
        text.push('\n');
        (notes_left, routes_left) = (n, r);
        *shown_per_level
            .entry((ranked.kind, ranked.candidate.meta.importance))
            .or_default() += 1;
        shown += 1;
    }
    // A level whose short list was shown to its end may hold more records that rank as high.
    for (kind, list) in [(Kind::Note, &notes), (Kind::Route, &routes)] {
        let exhausted = list.left_out.keys().any(|level| {
            let available = list
                .records
                .iter()
                .filter(|c| c.meta.importance == *level)
                .count();
            let shown = shown_per_level.get(&(kind, *level)).copied().unwrap_or(0);
            shown >= available
        });
        if exhausted {
            return Ok((reminder_only(), Some(kind)));
        }
    }
    if shown == 0 {
        return Ok((reminder_only(), None));
    }
    if let Some(closing) = closing(notes_left, routes_left) {
        text.push_str(&closing);
        text.push('\n');
    }
    Ok((
        SessionText {
            text,
            source: Source::Index,
            shown,
            more: notes_left + routes_left,
        },
        None,
    ))
}

/// The first clause of `text` on one line, at most [`TITLE_BYTES`] long.
pub fn title(text: &str) -> String {
    // The title lies in the first few hundred bytes: a clause found later is cut to
    // TITLE_BYTES all the same, so the rest of a long note is never looked at.
    let mut flat = String::new();
    for word in text.split_whitespace() {
        if flat.len() > 4 * TITLE_BYTES {
            break;
        }
        if !flat.is_empty() {
            flat.push(' ');
        }
        flat.push_str(word);
    }
    let flat = flat.trim_start_matches(['#', '-', '*', '>', ' ']);
    let mut end = flat.len();
    for boundary in ["; ", ". ", ": ", " - ", " (", "? ", "! "] {
        let mut from = 0;
        while let Some(at) = flat[from..].find(boundary) {
            let at = from + at;
            if at >= MIN_CLAUSE_BYTES {
                end = end.min(at);
                break;
            }
            from = at + boundary.len();
        }
    }
    let clause = flat[..end].trim_end_matches(['.', ';', ':', ',', ' ']);
    if clause.len() <= TITLE_BYTES {
        return clause.to_owned();
    }
    let mut cut = TITLE_BYTES - "…".len();
    while !clause.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = &clause[..cut];
    let head = head.rfind(' ').map_or(head, |space| &head[..space]);
    format!("{}…", head.trim_end_matches(['.', ';', ':', ',', ' ']))
}

fn closing(notes: usize, routes: usize) -> Option<String> {
    let more = |n: usize, noun: &str| counted(n, noun).replacen(' ', " more ", 1);
    match (notes, routes) {
        (0, 0) => None,
        (n, 0) => Some(format!("{}: context_query to find them", more(n, "note"))),
        (0, r) => Some(format!("{}: route_query to find them", more(r, "route"))),
        (n, r) => Some(format!(
            "{} and {}: context_query to find them",
            more(n, "note"),
            counted(r, "route")
        )),
    }
}

fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_the_first_clause_on_one_line() {
        assert_eq!(
            title(
                "Spanish VAT rounds per line, not per order total; rounding the\ntotal is off \
                 by a cent on multi-item orders."
            ),
            "Spanish VAT rounds per line, not per order total"
        );
        assert_eq!(
            title("Note: the build needs protoc on PATH. Install it first."),
            "Note: the build needs protoc on PATH"
        );
        assert_eq!(title("## Short."), "Short");
        let long = "word ".repeat(40);
        let cut = title(&long);
        assert!(cut.len() <= TITLE_BYTES && cut.ends_with("word…"), "{cut}");
        let wide = "ä".repeat(80);
        assert!(title(&wide).len() <= TITLE_BYTES);
    }

    /// Under every cap: never over it, whole lines only, and every record either shown or counted.
    #[test]
    fn no_cap_is_ever_exceeded_and_nothing_is_dropped_silently() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join(".memloop/memory/notes");
        let routes = dir.path().join(".memloop/memory/routes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::create_dir_all(&routes).unwrap();
        for i in 0..150 {
            let words = "long words here ".repeat(i % 9);
            std::fs::write(
                notes.join(format!("n-{i:03}.md")),
                format!(
                    "---\ncategory: patterns\nimportance: {}\ntags: [a, b]\ncreated: \
                     2026-{:02}-01T00:00:00.000Z\n---\nPattern {i} {words}\n",
                    1 + i % 10,
                    1 + i % 12
                ),
            )
            .unwrap();
        }
        for i in 0..7 {
            std::fs::write(
                routes.join(format!("r-{i}.md")),
                format!("---\ntitle: Route {i}\npaths: [src/{i}.rs]\ncreated: 2026-06-01T00:00:00.000Z\n---\nx\n"),
            )
            .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let searchable = Store::open(dir.path()).unwrap();
        assert_eq!(index(&searchable, 2048), index(&store, 2048));
        let ids = |text: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| {
                    l.strip_prefix("- ")?
                        .rsplit_once('[')
                        .map(|(_, id)| id.to_owned())
                })
                .collect()
        };
        let widest = ids(&index(&store, 10_000).text);
        for cap in (512..6000).step_by(97) {
            let given = index(&store, cap);
            // A smaller cap shows a prefix of the same ranking, however much had to be sorted.
            let shown = ids(&given.text);
            assert_eq!(shown[..], widest[..shown.len()], "cap {cap}");
            assert!(given.text.len() <= cap, "cap {cap}: {}", given.text.len());
            assert_eq!(given.source, Source::Index);
            let lines: Vec<&str> = given.text.lines().collect();
            let entries = lines.iter().filter(|l| l.starts_with("- ")).count();
            assert_eq!(entries, given.shown, "cap {cap}");
            assert_eq!(given.shown + given.more, 157, "cap {cap}");
            let closes = lines.last().unwrap().contains("more");
            assert_eq!(closes, given.more > 0, "cap {cap}");
            for line in lines.iter().filter(|l| l.starts_with("- ")) {
                assert!(line.ends_with(']'), "cap {cap}: {line}");
            }
        }
    }

    #[test]
    fn the_closing_line_counts_what_is_left() {
        assert_eq!(closing(0, 0), None);
        assert_eq!(
            closing(1, 0).unwrap(),
            "1 more note: context_query to find them"
        );
        assert_eq!(
            closing(16, 2).unwrap(),
            "16 more notes and 2 routes: context_query to find them"
        );
        assert_eq!(
            closing(0, 1).unwrap(),
            "1 more route: route_query to find them"
        );
    }

    #[test]
    fn the_reminder_is_the_lookup_rule() {
        assert!(reminder().starts_with("Before exploring"), "{}", reminder());
        assert!(reminder().ends_with("skip the lookup."));
    }
}
