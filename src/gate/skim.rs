//! A forward-only walk over one JSON text that decodes only the keys and values its caller asks
//! for and passes over the rest.
//!
//! A first check of a long session reads tens of megabytes of agent log rows, of which the gate
//! needs a handful of short strings per row; a full parse spends most of its time on what is then
//! thrown away (every key decoded and matched, every long text validated character by
//! character). Here a skipped string costs a `memchr2` for its closing quote or next backslash,
//! and a skipped container a scan for its brackets.
//!
//! What is decoded is checked as serde_json checks it (UTF-8, escapes, no raw control
//! characters), so a value read here equals what a parse would give; a string kept as written
//! ([`RawString`]) is checked when it is decoded. Skipped parts are only
//! checked for their shape: the walk accepts some malformed texts a parser would refuse (a bad
//! number, a stray control character inside a skipped string), which is harmless for the logs it
//! reads, written by the agents' own JSON encoders.

use std::borrow::Cow;

/// A string as it appears between its quotes, escapes not yet resolved.
#[derive(Debug, Clone, Copy)]
pub struct RawStr<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> RawStr<'a> {
    /// The string's text, or `None` when it is not valid (bad UTF-8, a bad escape, a raw control
    /// character), as a JSON parser would refuse it.
    pub fn decode(&self) -> Option<Cow<'a, str>> {
        decode(self.raw, self.escaped)
    }

    /// A copy kept past the text it was read from, to decode later or never.
    pub fn to_owned(&self) -> RawString {
        RawString {
            raw: self.raw.to_vec(),
            escaped: self.escaped,
        }
    }

    /// Whether the string's text is `text` (a key compared with a field's name).
    pub fn is(&self, text: &str) -> bool {
        match self.escaped {
            false => self.raw == text.as_bytes(),
            true => self.decode().is_some_and(|decoded| decoded == text),
        }
    }
}

/// A string copied as written, decoded when it is needed: most texts a log holds are passed
/// and never looked at again.
#[derive(Debug, Clone)]
pub struct RawString {
    raw: Vec<u8>,
    escaped: bool,
}

impl RawString {
    /// See [`RawStr::decode`].
    pub fn decode(&self) -> Option<Cow<'_, str>> {
        decode(&self.raw, self.escaped)
    }
}

fn decode(raw: &[u8], escaped: bool) -> Option<Cow<'_, str>> {
    if !escaped {
        if raw.iter().any(|&b| b < 0x20) {
            return None;
        }
        return std::str::from_utf8(raw).ok().map(Cow::Borrowed);
    }
    // Escapes are resolved by the parser itself, so they mean exactly what they mean there.
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted)
        .ok()
        .map(Cow::Owned)
}

/// The kind of the value at the walk's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    Array,
    String,
    Null,
    /// A number, `true` or `false`.
    Scalar,
}

/// The walk's position in one JSON text.
pub struct Skim<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Skim<'a> {
    pub fn new(text: &'a [u8]) -> Skim<'a> {
        Skim { text, at: 0 }
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.text.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// The kind of the next value, without moving past it.
    pub fn kind(&mut self) -> Option<Kind> {
        self.space();
        match self.text.get(self.at)? {
            b'{' => Some(Kind::Object),
            b'[' => Some(Kind::Array),
            b'"' => Some(Kind::String),
            b'n' => Some(Kind::Null),
            b't' | b'f' | b'-' | b'0'..=b'9' => Some(Kind::Scalar),
            _ => None,
        }
    }

    /// Whether only whitespace is left: a text with anything after its value is not JSON.
    pub fn finished(&mut self) -> bool {
        self.space();
        self.at == self.text.len()
    }

    /// The next value, a string.
    pub fn string(&mut self) -> Option<RawStr<'a>> {
        self.eat(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            let rest = &self.text[self.at..];
            let i = memchr::memchr2(b'"', b'\\', rest)?;
            if rest[i] == b'"' {
                let raw = &self.text[start..self.at + i];
                self.at += i + 1;
                return Some(RawStr { raw, escaped });
            }
            // A backslash and the character it escapes; the escape itself is checked on decode.
            escaped = true;
            self.at += i + 2;
            if self.at > self.text.len() {
                return None;
            }
        }
    }

    /// Passes over the next value, whatever it is.
    pub fn skip(&mut self) -> Option<()> {
        match self.kind()? {
            Kind::String => self.string().map(drop),
            Kind::Null => self.literal(b"null"),
            Kind::Scalar => self.scalar(),
            Kind::Object | Kind::Array => self.container(),
        }
    }

    /// `null`, when that is the next value.
    pub fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.space();
        let end = self.at + word.len();
        (self.text.get(self.at..end) == Some(word)).then(|| self.at = end)
    }

    fn scalar(&mut self) -> Option<()> {
        self.space();
        let start = self.at;
        while let Some(b) = self.text.get(self.at) {
            if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.at += 1;
        }
        let word = &self.text[start..self.at];
        let number = word.iter().all(|b| b"+-.eE0123456789".contains(b));
        (number || word == b"true" || word == b"false").then_some(())
    }

    /// Passes over an object or array by its brackets, strings passed over whole.
    fn container(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            let b = *self.text.get(self.at)?;
            match b {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.at += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
    }

    /// Walks the object at the position: `field` is called with each key and must take its value
    /// (read it or [`Skim::skip`] it).
    pub fn object(
        &mut self,
        mut field: impl FnMut(RawStr<'a>, &mut Skim<'a>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            field(key, self)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }

    /// Walks the array at the position: `item` is called at each element and must take it.
    pub fn array(&mut self, mut item: impl FnMut(&mut Skim<'a>) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if self.eat(b',').is_none() {
                return self.eat(b']');
            }
        }
    }

    /// A value that is a string or `null`, as serde reads an `Option<String>`: anything else is
    /// an error.
    pub fn optional_string(&mut self) -> Option<Option<String>> {
        match self.kind()? {
            Kind::Null => self.null().map(|()| None),
            Kind::String => Some(Some(self.string()?.decode()?.into_owned())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> Option<usize> {
        let mut skim = Skim::new(text.as_bytes());
        skim.skip()?;
        Some(skim.at)
    }

    #[test]
    fn skipping_takes_exactly_one_value() {
        assert_eq!(skipped(r#"{"a":[1,{"b":"}]"}],"c":null} ,"#), Some(29));
        assert_eq!(skipped(r#""a\"b\\" x"#), Some(8));
        assert_eq!(skipped("  -12.5e3,"), Some(9));
        assert_eq!(skipped("true]"), Some(4));
        assert_eq!(skipped("null"), Some(4));
    }

    #[test]
    fn unfinished_or_foreign_values_are_refused() {
        for text in [r#"{"a":"b"#, r#""abc\"#, "[1,2", "nul", "truth", "?", ""] {
            assert_eq!(skipped(text), None, "{text:?}");
        }
    }

    #[test]
    fn strings_decode_as_a_parser_reads_them() {
        let decode = |text: &'static str| Skim::new(text.as_bytes()).string()?.decode();
        assert_eq!(decode(r#""plain""#).as_deref(), Some("plain"));
        assert_eq!(
            decode(r#""a\n\u00e9\ud83d\ude00""#).as_deref(),
            Some("a\né😀")
        );
        assert_eq!(decode(r#""bad \q escape""#), None);
        assert_eq!(decode("\"raw \u{1} control\""), None);
        assert!(Skim::new(b"\"\xff\"").string().unwrap().decode().is_none());
    }

    #[test]
    fn keys_match_by_their_text_escaped_or_not() {
        let mut keys = Vec::new();
        Skim::new(br#"{"type":1,"typ\u0065":2, "other" : [] }"#)
            .object(|key, skim| {
                keys.push(key.is("type"));
                skim.skip()
            })
            .unwrap();
        assert_eq!(keys, [true, true, false]);
    }

    #[test]
    fn optional_strings_take_null_or_a_string_only() {
        let read = |text: &str| Skim::new(text.as_bytes()).optional_string();
        assert_eq!(read("null"), Some(None));
        assert_eq!(read(r#""x""#), Some(Some("x".to_owned())));
        assert_eq!(read("1"), None);
        assert_eq!(read("{}"), None);
    }
}
