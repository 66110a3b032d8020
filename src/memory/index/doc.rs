//! What the index knows of one record: enough to rank it, print its session-index line and
//! notice that its file changed, without reading the file again.

use std::fs::Metadata;

use serde::{Deserialize, Serialize};

use crate::memory::record::Record;
use crate::memory::search::Terms;

/// Identifies one version of a file cheaply: an atomic replace gives a new inode, an edit in
/// place a new modification time or size. A folder's stamp leaves the size out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Stamp {
    pub ino: u64,
    pub mtime_ns: i128,
    pub size: u64,
}

impl Stamp {
    pub fn of(meta: &Metadata) -> Stamp {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        Stamp {
            ino: inode(meta),
            // The index keeps nanoseconds in 64 bits (good until 2262).
            mtime_ns: i128::from(mtime_ns as i64),
            size: if meta.is_dir() { 0 } else { meta.len() },
        }
    }
}

#[cfg(unix)]
pub fn inode(meta: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
pub fn inode(_meta: &Metadata) -> u64 {
    0
}

/// The parts of a record the index ranks and prints by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocMeta {
    /// BM25's document length (weighted words).
    pub len: u32,
    /// When it was written (a route: last updated), for recency and ties.
    pub at_ms: i64,
    /// Days since the epoch of `at_ms`.
    pub day: i32,
    /// The session index's rank (a route ranks as a 6).
    pub importance: u8,
    /// Whether queries and the session index may show it (a forgotten note may not).
    pub searchable: bool,
    /// Its session-index line, without the id.
    pub line: String,
}

/// A record ready for the index.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub id: String,
    pub stamp: Stamp,
    pub meta: DocMeta,
    /// (term hash, weighted frequency)
    pub terms: Vec<(u64, u32)>,
}

impl Doc {
    pub fn of<T: Record>(id: &str, stamp: Stamp, record: &T, terms: &mut Terms) -> Doc {
        let at_ms = crate::memory::ids::parse_millis(record.at()).unwrap_or(0);
        let (mut counts, len) = if record.searchable() {
            terms.count(&record.index_texts())
        } else {
            (Vec::new(), 0)
        };
        // Found by its key, which no query can ask for (`key_term` is no word) and which adds
        // nothing to its length.
        if record.searchable()
            && let Some(key) = record.key()
        {
            counts.push((key_term(key), 1));
        }
        Doc {
            id: id.to_owned(),
            stamp,
            meta: DocMeta {
                len,
                at_ms,
                day: at_ms.div_euclid(86_400_000) as i32,
                importance: record.rank(),
                searchable: record.searchable(),
                line: record.index_line(),
            },
            terms: counts,
        }
    }
}

/// The index term of a record's key: the same for `VAT rounding` and `vat-rounding`, and never
/// a word's (a word holds no control character).
pub fn key_term(key: &str) -> u64 {
    let mut normal = String::from("\u{1}key\u{1}");
    let mut gap = false;
    for ch in key.chars().flat_map(char::to_lowercase) {
        if ch.is_alphanumeric() {
            if gap && !normal.ends_with('\u{1}') {
                normal.push('-');
            }
            gap = false;
            normal.push(ch);
        } else {
            gap = true;
        }
    }
    term_hash(&normal)
}

/// A stable 64-bit hash (FNV-1a, then a SplitMix64 finish to spread the bits): the index files
/// keep these, so it must not change between builds or machines.
pub fn term_hash(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_hashes_are_stable() {
        // Written into every index file: a change here must bump the segment version.
        assert_eq!(term_hash("vat"), 0x617c_fa2c_27bd_2b33);
        assert_eq!(term_hash("round"), 0xa152_6e89_7160_1973);
        assert_ne!(term_hash("vat"), term_hash("tav"));
    }

    #[test]
    fn keys_match_whatever_their_case_and_separators() {
        assert_eq!(key_term("VAT rounding"), key_term("vat-rounding"));
        assert_eq!(key_term(" vat_rounding! "), key_term("vat-rounding"));
        assert_ne!(key_term("vat-rounding"), key_term("vatrounding"));
        assert_ne!(key_term("vat"), term_hash("vat"));
    }
}
