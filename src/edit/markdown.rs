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
pub fn find(text: &str, display: &str) -> Result<Vec<Span>, Refusal> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, usize, Option<u32>)> = None;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end();
        if let Some(rest) = trimmed.strip_prefix(BEGIN) {
            if open.is_none() {
                let version = rest.trim_start().strip_prefix('v').and_then(|v| {
                    v.split(|c: char| !c.is_ascii_digit())
                        .next()
                        .and_then(|digits| digits.parse().ok())
                });
                open = Some((offset, index + 1, version));
            }
        } else if trimmed == END
            && let Some((start, _, version)) = open.take()
        {
            spans.push(Span {
                start,
                end: offset + line.len(),
                version,
            });
        }
        offset += line.len();
    }
    if let Some((_, line, _)) = open {
        return Err(Refusal::at(
            display,
            line,
            1,
            "a memloop begin marker has no end marker",
            format!("add `{END}` after the block or delete the begin line, then run memloop again"),
        ));
    }
    Ok(spans)
}

/// The text with exactly one managed block holding `body`: replaced in place when present,
/// appended after a blank line otherwise.
pub fn upsert(text: &str, body: &str, display: &str) -> Result<String, Refusal> {
    let spans = find(text, display)?;
    let wanted = block(body);
    let Some(first) = spans.first() else {
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
}
