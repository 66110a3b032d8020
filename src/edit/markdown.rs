//! Markdown instruction files: memloop owns one block between marker comments. Everything
//! above and below it stays byte-identical; the block is updated in place.

use super::Refusal;

/// Version of the block format, carried in the begin marker so later releases can migrate it.
pub const BLOCK_VERSION: u32 = 1;
const BEGIN: &str = "<!-- memloop:begin";
const END: &str = "<!-- memloop:end -->";

fn begin_line() -> String {
    format!(
        "{BEGIN} v{BLOCK_VERSION} (managed by memloop: edit memloop.toml, then run memloop sync) -->"
    )
}

/// The managed block holding `body`, without a trailing newline.
pub fn block(body: &str) -> String {
    format!("{}\n{}\n{END}", begin_line(), body.trim_end_matches('\n'))
}

/// Where a managed block sits in a text: byte range of its lines (end includes the newline
/// after the end marker, when there is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub version: Option<u32>,
}

/// Every managed block in `text`, in order. An unterminated block is refused.
///
/// Only whole marker lines outside fenced code count: a README showing the markers in a
/// ```` ``` ```` or `~~~` example keeps its example, and a line that merely starts like a marker is
/// the user's text.
pub fn find(text: &str, display: &str) -> Result<Vec<Span>, Refusal> {
    let scan = scan(text);
    if let Some(line) = scan.open_marker {
        return Err(Refusal::at(
            display,
            line,
            1,
            "a memloop begin marker has no end marker",
            format!("add `{END}` after the block or delete the begin line, then run memloop again"),
        ));
    }
    Ok(scan.spans)
}

/// What a pass over the lines found: the blocks, a begin marker left open, and the line of a
/// code fence that is never closed (it runs to the end of the file).
struct Scan {
    spans: Vec<Span>,
    open_marker: Option<usize>,
    open_fence: Option<usize>,
}

fn scan(text: &str) -> Scan {
    let mut spans = Vec::new();
    let mut open: Option<(usize, usize, Option<u32>)> = None;
    let mut fence: Option<(Fence, usize)> = None;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        if let Some((current, _)) = fence {
            if current.is_closed_by(line) {
                fence = None;
            }
            continue;
        }
        if let Some(opened) = Fence::opened_by(line) {
            fence = Some((opened, index + 1));
            continue;
        }
        let trimmed = line.trim_end();
        if let Some(version) = begin_marker(trimmed) {
            if open.is_none() {
                open = Some((start, index + 1, version));
            }
        } else if trimmed == END
            && let Some((begin, _, version)) = open.take()
        {
            spans.push(Span {
                start: begin,
                end: offset,
                version,
            });
        }
    }
    Scan {
        spans,
        open_marker: open.map(|(_, line, _)| line),
        open_fence: fence.map(|(_, line)| line),
    }
}

/// `Some(version)` when `line` is a whole begin marker: `<!-- memloop:begin`, optionally ` vN`
/// and a note, then `-->` ending the line.
fn begin_marker(line: &str) -> Option<Option<u32>> {
    let rest = line.strip_prefix(BEGIN)?;
    let inner = rest.strip_suffix("-->")?;
    if !(inner.is_empty() || inner.starts_with(' ')) || inner.contains("-->") {
        return None;
    }
    let version = inner.trim_start().strip_prefix('v').and_then(|v| {
        v.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|digits| digits.parse().ok())
    });
    Some(version)
}

/// An open fenced code block (CommonMark): its character and length.
#[derive(Debug, Clone, Copy)]
struct Fence {
    mark: u8,
    len: usize,
}

impl Fence {
    /// A fence opens with up to three spaces, then three or more backticks or tildes (a backtick
    /// fence's info string holds no backtick).
    fn opened_by(line: &str) -> Option<Fence> {
        let rest = strip_fence_indent(line)?;
        let mark = *rest.as_bytes().first()?;
        if mark != b'`' && mark != b'~' {
            return None;
        }
        let len = rest.bytes().take_while(|b| *b == mark).count();
        if len < 3 || (mark == b'`' && rest[len..].contains('`')) {
            return None;
        }
        Some(Fence { mark, len })
    }

    /// It closes with up to three spaces, at least as many of the same character, and nothing
    /// but spaces after them.
    fn is_closed_by(self, line: &str) -> bool {
        let Some(rest) = strip_fence_indent(line) else {
            return false;
        };
        let len = rest.bytes().take_while(|b| *b == self.mark).count();
        len >= self.len && rest[len..].trim().is_empty()
    }
}

/// The line after at most three leading spaces; `None` when it is indented further (an
/// indented code line, never a fence).
fn strip_fence_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|b| *b == b' ').count();
    let rest = &line[spaces..];
    (spaces <= 3 && !rest.starts_with('\t')).then_some(rest)
}

/// The text with exactly one managed block holding `body`: replaced in place when present,
/// appended after a blank line otherwise.
pub fn upsert(text: &str, body: &str, display: &str) -> Result<String, Refusal> {
    let spans = find(text, display)?;
    let wanted = block(body);
    let Some(first) = spans.first() else {
        // Appended after a fence that is never closed, the block would be code, and never
        // found again.
        if let Some(line) = scan(text).open_fence {
            return Err(Refusal::at(
                display,
                line,
                1,
                "this code fence is never closed, so a block appended at the end would be inside it",
                "close the fence (a line of the same ``` or ~~~), then run memloop again",
            ));
        }
        return Ok(append(text, &wanted));
    };
    let mut out = String::with_capacity(text.len() + wanted.len());
    out.push_str(&text[..first.start]);
    out.push_str(&wanted);
    if text[..first.end].ends_with('\n') {
        out.push('\n');
    }
    let mut cursor = first.end;
    for span in &spans[1..] {
        out.push_str(&text[cursor..span.start]);
        cursor = span.end;
    }
    out.push_str(&text[cursor..]);
    Ok(out)
}

/// Appends so that `remove` gives back the original exactly: a file without a final newline
/// gets the block without one too.
fn append(text: &str, block: &str) -> String {
    if text.is_empty() {
        format!("{block}\n")
    } else if text.ends_with('\n') {
        format!("{text}\n{block}\n")
    } else {
        format!("{text}\n\n{block}")
    }
}

/// The text without any managed block, undoing `append`'s separator.
pub fn remove(text: &str, display: &str) -> Result<String, Refusal> {
    let spans = find(text, display)?;
    let mut out = text.to_owned();
    for span in spans.iter().rev() {
        let (mut start, end) = (span.start, span.end);
        let before = &out[..start];
        if end == out.len() && !out.ends_with('\n') {
            // Appended to a file without a final newline: drop "\n\n" too.
            if before.ends_with("\n\n") {
                start -= 2;
            }
        } else if before.ends_with("\n\n") || before == "\n" {
            start -= 1;
        }
        out.replace_range(start..end, "");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "Rule one.\nRule two.";

    #[test]
    fn append_and_remove_round_trip_for_every_ending() {
        for original in [
            "",
            "# Title\n",
            "# Title\n\ntext",
            "text\n\n",
            "a\n<!-- other:begin -->\nb\n<!-- other:end -->\n",
        ] {
            let added = upsert(original, BODY, "CLAUDE.md").unwrap();
            assert!(added.contains(BODY), "{added:?}");
            assert_eq!(
                upsert(&added, BODY, "CLAUDE.md").unwrap(),
                added,
                "idempotent for {original:?}"
            );
            assert_eq!(
                remove(&added, "CLAUDE.md").unwrap(),
                original,
                "round trip for {original:?}"
            );
        }
    }

    #[test]
    fn block_is_updated_in_place() {
        let text = "top\n\n<!-- memloop:begin v0 -->\nold\n<!-- memloop:end -->\n\nbottom\n";
        let updated = upsert(text, BODY, "CLAUDE.md").unwrap();
        assert_eq!(updated, format!("top\n\n{}\n\nbottom\n", block(BODY)));
    }

    #[test]
    fn duplicates_collapse_into_the_first() {
        let one = block(BODY);
        let text = format!("a\n{one}\nb\n{one}\n");
        assert_eq!(upsert(&text, BODY, "f").unwrap(), format!("a\n{one}\nb\n"));
    }

    #[test]
    fn unterminated_block_is_refused() {
        let err = upsert("x\n<!-- memloop:begin v1 -->\nrule\n", BODY, "AGENTS.md").unwrap_err();
        assert!(err.to_string().starts_with("AGENTS.md:2:1:"), "{err}");
    }

    #[test]
    fn version_is_read_from_the_marker() {
        let spans = find(&format!("{}\n", block(BODY)), "f").unwrap();
        assert_eq!(spans[0].version, Some(BLOCK_VERSION));
    }

    #[test]
    fn markers_inside_fenced_examples_are_the_users_text() {
        let example = format!("{}\n", block("example rule"));
        for (open, close) in [
            ("```", "```"),
            ("~~~", "~~~"),
            ("````markdown", "````"),
            ("   ```md", "```"),
            ("```", "  `````"),
            ("~~~~", "~~~~~ "),
        ] {
            let text = format!("# Readme\n\n{open}\n{example}{close}\n\nafter\n");
            assert_eq!(find(&text, "f").unwrap(), vec![], "{open:?}/{close:?}");
            let added = upsert(&text, BODY, "f").unwrap();
            assert!(added.starts_with(&text), "the example is kept: {added}");
            assert_eq!(remove(&added, "f").unwrap(), text);
            assert_eq!(remove(&text, "f").unwrap(), text);
        }
    }

    #[test]
    fn a_fence_stays_open_until_a_matching_close() {
        // A shorter fence or another character does not close it, nor does an info string.
        for close in ["``", "~~~", "```rust", "    ```"] {
            let text = format!("````\n{}\n{close}\n{}\n````\n", block("x"), block("y"));
            assert_eq!(find(&text, "f").unwrap(), vec![], "{close:?}");
        }
        // A fence never closed runs to the end of the file.
        let text = format!("```\n{}\n", block("x"));
        assert_eq!(find(&text, "f").unwrap(), vec![]);
        // An unterminated begin marker inside a fence is not refused.
        find("~~~\n<!-- memloop:begin v1 -->\n~~~\n", "f").unwrap();
    }

    #[test]
    fn appending_after_a_fence_never_closed_is_refused() {
        let err = upsert("# Title\n\n```sh\nmake\n", BODY, "CLAUDE.md").unwrap_err();
        assert!(err.to_string().starts_with("CLAUDE.md:3:1:"), "{err}");
        // A block before the open fence is still updated in place.
        let text = format!("{}\n```\n", block("old"));
        assert_eq!(
            upsert(&text, BODY, "f").unwrap(),
            format!("{}\n```\n", block(BODY))
        );
    }

    #[test]
    fn indented_or_inline_backticks_do_not_open_a_fence() {
        let real = block(BODY);
        for not_a_fence in ["    ```", "\t```", "``` a ` b", "``x``", "text ```"] {
            let text = format!("{not_a_fence}\n{real}\n");
            let spans = find(&text, "f").unwrap();
            assert_eq!(spans.len(), 1, "{not_a_fence:?}");
        }
    }

    #[test]
    fn only_whole_marker_lines_count() {
        for line in [
            "<!-- memloop:begin v1 --> and more",
            "<!-- memloop:beginning -->",
            "  <!-- memloop:begin v1 -->",
            "> <!-- memloop:begin v1 -->",
            "<!-- memloop:begin v1 --> -->",
            "<!-- memloop:begin v1",
        ] {
            let text = format!("{line}\nmine\n{END}\n");
            assert_eq!(find(&text, "f").unwrap(), vec![], "{line:?}");
            assert_eq!(remove(&text, "f").unwrap(), text);
        }
        let spans = find("<!-- memloop:begin -->\nx\n<!-- memloop:end -->\n", "f").unwrap();
        assert_eq!(spans.len(), 1);
    }

    #[test]
    fn a_real_block_after_a_closed_fence_is_found() {
        let text = format!("```\n{}\n```\n\n{}\n", block("example"), block("old"));
        let updated = upsert(&text, BODY, "f").unwrap();
        assert_eq!(
            updated,
            format!("```\n{}\n```\n\n{}\n", block("example"), block(BODY))
        );
    }
}
