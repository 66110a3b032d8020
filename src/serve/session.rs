//! The session-start text: what a new session is told about the repository's memory before its
//! first prompt, so the lookup half of the loop no longer rests on the model remembering a rule.
//!
//! It is the lookup rule line, then one line per note or route worth knowing up front, ranked
//! by importance and recency, under a hard byte cap. A line is whole or absent, and whatever did
//! not fit is counted in a closing line that fits inside the cap too: an agent must never work
//! from an index it does not know was cut (seed 003 rejects an over-size index for that reason).

use std::path::Path;

use super::record::{Note, Route};
use super::store::Store;
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
/// A route saves a search of the tree: ranked like a note a little above the usual 4 to 6.
const ROUTE_IMPORTANCE: f64 = 6.0;
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
    let store = Store::open_unsearchable(root)?;
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

enum Kind<'a> {
    Note(&'a Note),
    Route(&'a Route),
}

struct Candidate<'a> {
    id: &'a str,
    rank: f64,
    /// Days since the epoch of `at`, when it reads as a date.
    day: Option<i64>,
    /// The time it was written (a route: last updated); newer wins a tie.
    at: &'a str,
    kind: Kind<'a>,
}

/// The index of `store` in at most `cap` bytes (the reminder alone when nothing is stored or
/// not even one line fits).
pub fn index(store: &Store, cap: usize) -> SessionText {
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for (id, note) in store.notes.iter() {
        if note.forgotten.is_none() {
            candidates.push(Candidate {
                id,
                rank: f64::from(note.importance),
                day: days(&note.created),
                at: &note.created,
                kind: Kind::Note(note),
            });
        }
    }
    for (id, route) in store.routes.iter() {
        let at = route.updated.as_deref().unwrap_or(&route.created);
        candidates.push(Candidate {
            id,
            rank: ROUTE_IMPORTANCE,
            day: days(at),
            at,
            kind: Kind::Route(route),
        });
    }
    if candidates.is_empty() {
        return reminder_only();
    }
    // Ages count from the newest record, not the clock, so the same files give the same text.
    let newest = candidates.iter().filter_map(|c| c.day).max();
    for candidate in &mut candidates {
        let age = match (newest, candidate.day) {
            (Some(newest), Some(day)) => (newest - day).max(0) as f64,
            _ => f64::INFINITY,
        };
        candidate.rank += RECENCY_POINTS * 0.5f64.powf(age / HALF_LIFE_DAYS);
    }
    let order = |a: &Candidate<'_>, b: &Candidate<'_>| {
        b.rank
            .total_cmp(&a.rank)
            .then_with(|| b.at.cmp(a.at))
            .then_with(|| a.id.cmp(b.id))
    };
    // Only the head that can fit needs sorting, whatever the size of the store: a line is
    // rarely shorter than 32 bytes, and should the head run out, the rest is sorted after it.
    let head = (cap / 32).min(candidates.len());
    if head < candidates.len() {
        candidates.select_nth_unstable_by(head, order);
    }
    candidates[..head].sort_unstable_by(order);
    let mut sorted = head;

    let notes = candidates
        .iter()
        .filter(|c| matches!(c.kind, Kind::Note(_)))
        .count();
    let routes = candidates.len() - notes;
    let mut text = format!(
        "{}\nMemory index, most important and recent first ({}, {}):\n",
        reminder(),
        counted(notes, "note"),
        counted(routes, "route"),
    );
    let (mut notes_left, mut routes_left) = (notes, routes);
    let mut shown = 0;
    while shown < candidates.len() {
        if shown == sorted {
            candidates[sorted..].sort_unstable_by(order);
            sorted = candidates.len();
        }
        let candidate = &candidates[shown];
        let line = crate::text::printable(&line(candidate), crate::text::Lines::One).into_owned();
        let (n, r) = match candidate.kind {
            Kind::Note(_) => (notes_left - 1, routes_left),
            Kind::Route(_) => (notes_left, routes_left - 1),
        };
        let closing = closing(n, r).map_or(0, |c| c.len() + 1);
        if text.len() + line.len() + 1 + closing > cap {
            break;
        }
        text.push_str(&line);
        text.push('\n');
        (notes_left, routes_left) = (n, r);
        shown += 1;
    }
    if shown == 0 {
        return reminder_only();
    }
    if let Some(closing) = closing(notes_left, routes_left) {
        text.push_str(&closing);
        text.push('\n');
    }
    SessionText {
        text,
        source: Source::Index,
        shown,
        more: notes_left + routes_left,
    }
}

fn line(candidate: &Candidate<'_>) -> String {
    match candidate.kind {
        Kind::Note(note) => {
            let category = note.category.strip_suffix('s').unwrap_or(&note.category);
            format!("- {category}: {} [{}]", title(&note.content), candidate.id)
        }
        Kind::Route(route) => {
            let mut paths = String::new();
            if let Some(first) = route.paths.first() {
                paths = format!(": {first}");
                if route.paths.len() > 1 {
                    paths.push_str(&format!(" +{}", route.paths.len() - 1));
                }
            }
            format!("- route: {}{paths} [{}]", title(&route.title), candidate.id)
        }
    }
}

/// The first clause of `text` on one line, at most [`TITLE_BYTES`] long.
pub fn title(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
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

/// Days since the Unix epoch of a `YYYY-MM-DD...` timestamp.
fn days(timestamp: &str) -> Option<i64> {
    // Fixed positions rather than split and parse: this runs once per record.
    let bytes = timestamp.as_bytes();
    if bytes.len() < 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| {
        bytes[range].iter().try_fold(0i64, |n, b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Howard Hinnant's days-from-civil, the inverse of the one in `files`.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_count_from_the_epoch() {
        assert_eq!(days("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(days("2000-03-01"), Some(11_017));
        assert_eq!(days("2026-11-30T09:55:01.123Z"), Some(20_787));
        assert_eq!(days("2026-13-01"), None);
        assert_eq!(days("soon"), None);
    }

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
        let store = Store::open_unsearchable(dir.path()).unwrap();
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
