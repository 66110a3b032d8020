//! Byte-level conventions of a text file that every edit must keep: BOM, line endings, and
//! whether the file ends with a newline (the latter is kept by each editor).

use super::Refusal;

const BOM: &str = "\u{feff}";

/// How a file stores its text, so an edited version can be written back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Encoding {
    pub bom: bool,
    /// Every line ends with CRLF. Files that mix endings are edited as they are, with LF for
    /// inserted lines, so no existing byte changes.
    pub crlf: bool,
}

impl Encoding {
    /// Splits raw bytes into editable text (LF line endings, no BOM) and the encoding to restore.
    pub fn decode(bytes: &[u8], display: &str) -> Result<(String, Encoding), Refusal> {
        let text = std::str::from_utf8(bytes).map_err(|err| {
            let valid = &bytes[..err.valid_up_to()];
            let valid = std::str::from_utf8(valid).unwrap_or_default();
            let (line, col) = crate::position::line_col(valid, valid.len());
            Refusal::at(
                display,
                line,
                col,
                "the file is not UTF-8 text",
                "save it as UTF-8 and run memloop again",
            )
        })?;
        let (bom, text) = match text.strip_prefix(BOM) {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let newlines = text.matches('\n').count();
        let crlf = newlines > 0 && text.matches("\r\n").count() == newlines;
        let text = if crlf {
            text.replace("\r\n", "\n")
        } else {
            text.to_owned()
        };
        Ok((text, Encoding { bom, crlf }))
    }

    /// The bytes to write for `text` (LF line endings) in this encoding.
    pub fn encode(self, text: &str) -> Vec<u8> {
        let mut out = String::with_capacity(text.len() + 8);
        if self.bom {
            out.push_str(BOM);
        }
        if self.crlf {
            out.push_str(&text.replace('\n', "\r\n"));
        } else {
            out.push_str(text);
        }
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_and_bom_round_trip() {
        let raw = "\u{feff}{\r\n  \"a\": 1\r\n}\r\n".as_bytes();
        let (text, encoding) = Encoding::decode(raw, "f").unwrap();
        assert_eq!(text, "{\n  \"a\": 1\n}\n");
        assert_eq!(
            encoding,
            Encoding {
                bom: true,
                crlf: true
            }
        );
        assert_eq!(encoding.encode(&text), raw);
    }

    #[test]
    fn mixed_line_endings_are_left_alone() {
        let raw = b"a\r\nb\nc\r\n";
        let (text, encoding) = Encoding::decode(raw, "f").unwrap();
        assert!(!encoding.crlf);
        assert_eq!(encoding.encode(&text), raw);
    }

    #[test]
    fn invalid_utf8_is_refused_with_position() {
        let err = Encoding::decode(b"ok\nab\xff", "notes.md").unwrap_err();
        assert!(err.to_string().starts_with("notes.md:2:3:"), "{err}");
    }
}
