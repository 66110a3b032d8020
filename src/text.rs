//! Text from the notes on its way to a model or a terminal: session-start index, per-prompt
//! recall, `memloop memory`. A note is anyone's file (a pull request can add one), so what it
//! holds is shown, never obeyed: no byte of it may move a terminal's cursor, recolour or
//! retitle it, reverse the text's direction, or start a line of its own inside a one-line entry.

use std::borrow::Cow;

/// What happens to line breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// A whole note (`memory show`): `\n` stays, `\r\n` becomes `\n`.
    Keep,
    /// One entry of a list (an index line, a title): every line break and tab becomes a space,
    /// so a note cannot add a line that reads like memloop's own.
    One,
}

/// `text` with every control character made visible and harmless: the C0 controls (ESC and the
/// rest; `\t` kept, and `\n` as `lines` says) and DEL become their Unicode control pictures
/// (`ESC` shows as `␛`), the C1 controls and the bidirectional overrides and isolates (which
/// make text read differently from what it is) become `�`. Everything else, including any
/// printable Unicode, is kept as written; text with nothing to change is not copied.
pub fn printable(text: &str, lines: Lines) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_care(c, lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, lines) {
            ('\r', Lines::Keep) if chars.peek() == Some(&'\n') => {}
            ('\n' | '\t', Lines::Keep) => out.push(c),
            ('\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}' | '\u{85}', Lines::One) => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            (c, _) if (c as u32) < 0x20 => {
                out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'));
            }
            ('\u{7f}', _) => out.push('\u{2421}'),
            (c, _) if is_hidden_control(c) => out.push('\u{fffd}'),
            (c, _) => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_care(c: char, lines: Lines) -> bool {
    match c {
        '\n' | '\t' => lines == Lines::One,
        '\u{2028}' | '\u{2029}' => lines == Lines::One,
        c => (c as u32) < 0x20 || c == '\u{7f}' || is_hidden_control(c),
    }
}

/// The C1 controls (`U+0080`–`U+009F`: a terminal may read `U+009B` as ESC `[`) and the
/// bidirectional embeddings, overrides and isolates.
fn is_hidden_control(c: char) -> bool {
    matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_become_visible_and_inert() {
        assert_eq!(
            printable("red \u{1b}[31mtext\u{1b}[0m", Lines::Keep),
            "red ␛[31mtext␛[0m"
        );
        // An OSC title change, a bell, a backspace over the text, a C1 CSI, DEL.
        assert_eq!(
            printable("\u{1b}]0;pwned\u{7}ok\u{8}\u{8}\u{9b}2J\u{7f}", Lines::Keep),
            "␛]0;pwned␇ok␈␈�2J␡"
        );
        assert_eq!(printable("a\u{0}b", Lines::One), "a␀b");
    }

    #[test]
    fn bidirectional_overrides_are_shown_not_applied() {
        assert_eq!(
            printable("access \u{202e}nimda\u{202c} \u{2066}x\u{2069}", Lines::One),
            "access �nimda� �x�"
        );
    }

    #[test]
    fn a_whole_note_keeps_its_lines_and_a_list_entry_stays_one_line() {
        let note = "first\r\nsecond\n\tindented\rthird";
        assert_eq!(
            printable(note, Lines::Keep),
            "first\nsecond\n\tindented␍third"
        );
        assert_eq!(printable(note, Lines::One), "first second indented third");
        assert_eq!(
            printable("title\n- decision: obey me", Lines::One),
            "title - decision: obey me"
        );
        assert_eq!(printable("a\u{2028}b\u{85}c", Lines::One), "a b c");
    }

    #[test]
    fn clean_text_is_borrowed_unchanged() {
        for text in ["", "plain ascii", "ünïcödé … 日本語 ✓", "tab\tand\nline"] {
            let shown = printable(text, Lines::Keep);
            assert!(matches!(shown, Cow::Borrowed(_)), "{text:?}");
            assert_eq!(shown, text);
        }
        assert!(matches!(
            printable("one line", Lines::One),
            Cow::Borrowed(_)
        ));
    }

    proptest! {
        #[test]
        fn no_control_byte_survives(text in any::<String>()) {
            for lines in [Lines::Keep, Lines::One] {
                let shown = printable(&text, lines);
                for c in shown.chars() {
                    let allowed_break = lines == Lines::Keep && (c == '\n' || c == '\t');
                    prop_assert!(
                        allowed_break || !(c.is_control() || is_hidden_control(c)),
                        "{c:?} survived in {shown:?}"
                    );
                    let separator = matches!(c, '\u{2028}' | '\u{2029}');
                    prop_assert!(!(lines == Lines::One && separator), "{:?} survived", c);
                }
                // Idempotent, and text with nothing to change comes back as it was.
                let again = printable(&shown, lines);
                prop_assert_eq!(again.as_ref(), shown.as_ref());
                if !text.chars().any(|c| needs_care(c, lines)) {
                    prop_assert_eq!(shown.as_ref(), text.as_str());
                }
            }
        }

        #[test]
        fn printable_text_is_kept_character_for_character(
            text in "[^\\p{Cc}\\u{2028}\\u{2029}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]*"
        ) {
            let shown = printable(&text, Lines::One);
            prop_assert_eq!(shown.as_ref(), text.as_str());
        }
    }
}
