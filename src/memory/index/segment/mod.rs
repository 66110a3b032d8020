//! The segment: one immutable file holding the search index and the catalogue of one kind of
//! record, read in place with positioned reads, so opening it costs the same at 100 notes and at
//! 100,000. A query reads the header, a few hash-table buckets and the postings of its words;
//! the session index reads one short region.
//!
//! ```text
//! header     136 bytes: magic, version, kind, segment id, counts, region offsets, the folder's
//!            stamp the segment reflects, the searchable records' file bytes (the budget's total)
//! docs       64 bytes per record, in id order (a record's slot is its position)
//! ids        hash table, id -> slot + 1 (0 is empty), linear probing
//! terms      hash table, 16 bytes a bucket: term hash, first posting, posting count
//! postings   12 bytes each: slot, document length, term frequency, importance
//! short      the session index's candidates: per importance level, the newest records, each
//!            with its id and line, so the index is read without touching the docs table
//! strings    ids and session-index lines
//! ```
//!
//! Every offset and length read from the file is checked against the file's size before use: a
//! torn, foreign or corrupt segment is an error (and rebuilt by the caller), never a panic.
//!
//! Records are in id order (a merge walks them beside the delta and a reconcile beside the
//! folder's listing, neither building a map); [`Writer`] (`write.rs`) refuses anything else.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, bail};

use super::doc::{DocMeta, Stamp, term_hash};

mod write;
pub use write::Writer;

const MAGIC: &[u8; 8] = b"MLSEG\0\0\x01";
/// 2: the header holds the searchable records' file bytes (`live_bytes`); a segment of another
/// version is not opened, so the next look rebuilds it from the files.
const VERSION: u32 = 2;
const HEADER: u64 = 136;
const DOC: u64 = 64;
const BUCKET: u64 = 16;
const POSTING: u64 = 12;
/// Per importance level, how many of the newest records the short region keeps: more lines than
/// the largest session index holds at any one level.
pub const SHORT_PER_LEVEL: usize = 64;

/// One posting: a searchable record holding a term.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Posting {
    pub slot: u32,
    pub len: u32,
    pub tf: u16,
    pub importance: u8,
}

impl Posting {
    fn decode(raw: &[u8]) -> Posting {
        Posting {
            slot: u32_at(raw, 0),
            len: u32_at(raw, 4),
            tf: u16_at(raw, 8),
            importance: raw[10],
        }
    }

    fn encode(&self) -> [u8; POSTING as usize] {
        let mut raw = [0u8; POSTING as usize];
        raw[0..4].copy_from_slice(&self.slot.to_le_bytes());
        raw[4..8].copy_from_slice(&self.len.to_le_bytes());
        raw[8..10].copy_from_slice(&self.tf.to_le_bytes());
        raw[10] = self.importance;
        raw
    }
}

/// A record of the short region: enough to rank and print its session-index line.
#[derive(Debug, Clone, PartialEq)]
pub struct Short {
    pub slot: u32,
    pub id: String,
    pub meta: DocMeta,
}

/// The short region: its records, and how many searchable records each importance level has
/// in the whole segment (so a reader knows when a level's list ran out before the level did).
pub struct ShortList {
    pub records: Vec<Short>,
    pub per_level: Vec<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Header {
    kind: u32,
    id: u64,
    n_docs: u32,
    n_live: u32,
    total_len: u64,
    /// The file sizes of the searchable records, summed: what `[memory] max_bytes` limits.
    live_bytes: u64,
    term_buckets: u32,
    id_buckets: u32,
    off_docs: u64,
    off_ids: u64,
    off_terms: u64,
    off_postings: u64,
    off_short: u64,
    off_strings: u64,
    n_short: u32,
    file_len: u64,
    /// The records folder's stamp when the segment was built, `None` when it covers only part
    /// of the folder (a cold build that ran out of time).
    folder: Option<Stamp>,
}

/// An open segment.
pub struct Segment {
    file: File,
    header: Header,
}

impl Segment {
    /// Opens and checks the segment at `path`; `kind` names the records it must hold.
    pub fn open(path: &Path, kind: &str) -> anyhow::Result<Segment> {
        let file = crate::files::open_regular(path)
            .with_context(|| format!("could not open {}", path.display()))?;
        let size = file
            .metadata()
            .with_context(|| format!("could not read {}", path.display()))?
            .len();
        let mut raw = [0u8; HEADER as usize];
        read_exact_at(&file, &mut raw, 0, size)?;
        if &raw[..8] != MAGIC || u32_at(&raw, 8) != VERSION {
            bail!("not a memloop index segment of this version");
        }
        let stamp_ino = u64_at(&raw, 112);
        let header = Header {
            kind: u32_at(&raw, 12),
            id: u64_at(&raw, 16),
            n_docs: u32_at(&raw, 24),
            n_live: u32_at(&raw, 28),
            total_len: u64_at(&raw, 32),
            live_bytes: u64_at(&raw, 128),
            term_buckets: u32_at(&raw, 40),
            id_buckets: u32_at(&raw, 44),
            off_docs: u64_at(&raw, 48),
            off_ids: u64_at(&raw, 56),
            off_terms: u64_at(&raw, 64),
            off_postings: u64_at(&raw, 72),
            off_short: u64_at(&raw, 80),
            off_strings: u64_at(&raw, 88),
            n_short: u32_at(&raw, 96),
            file_len: u64_at(&raw, 104),
            folder: (raw[100] == 1).then(|| Stamp {
                ino: stamp_ino,
                mtime_ns: i128::from(i64::from_le_bytes(
                    raw[120..128].try_into().unwrap_or_default(),
                )),
                size: 0,
            }),
        };
        let h = &header;
        let regions_in_order = h.off_docs == HEADER
            && h.off_ids == h.off_docs + u64::from(h.n_docs) * DOC
            && h.off_terms == h.off_ids + u64::from(h.id_buckets) * 4
            && h.off_postings == h.off_terms + u64::from(h.term_buckets) * BUCKET
            && h.off_postings <= h.off_short
            && h.off_short <= h.off_strings
            && h.off_strings <= h.file_len
            && h.file_len == size;
        let tables_sized = h.id_buckets.is_power_of_two()
            && h.term_buckets.is_power_of_two()
            && u64::from(h.id_buckets) > u64::from(h.n_docs)
            && (h.off_short - h.off_postings).is_multiple_of(POSTING)
            && h.n_live <= h.n_docs;
        if !regions_in_order || !tables_sized || h.kind != kind_tag(kind) {
            bail!("the index segment is torn or was written for something else");
        }
        Ok(Segment { file, header })
    }

    pub fn id(&self) -> u64 {
        self.header.id
    }

    pub fn docs(&self) -> u32 {
        self.header.n_docs
    }

    /// Searchable records and the sum of their lengths (BM25's collection statistics).
    pub fn live(&self) -> (u32, u64) {
        (self.header.n_live, self.header.total_len)
    }

    /// The file sizes of the searchable records, summed.
    pub fn live_bytes(&self) -> u64 {
        self.header.live_bytes
    }

    /// The folder stamp the segment reflects, `None` when it covers only part of the folder.
    pub fn folder(&self) -> Option<Stamp> {
        self.header.folder
    }

    fn read(&self, offset: u64, len: u64) -> anyhow::Result<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).context("index region too large")?];
        read_exact_at(&self.file, &mut buf, offset, self.header.file_len)?;
        Ok(buf)
    }

    /// The string at `off` (from the strings region's start), from `strings` when it holds
    /// it (a span of the region starting at `strings.0`), else read on its own.
    fn string(&self, strings: Option<(u32, &[u8])>, off: u32, len: u16) -> anyhow::Result<String> {
        let bytes = match strings {
            Some((base, span)) if off >= base => span
                .get((off - base) as usize..(off - base) as usize + len as usize)
                .context("index string out of range")?
                .to_vec(),
            _ => self.read(self.header.off_strings + u64::from(off), u64::from(len))?,
        };
        String::from_utf8(bytes).context("index string is not UTF-8")
    }

    /// The record in `slot`: its id, stamp and meta.
    pub fn doc(&self, slot: u32) -> anyhow::Result<(String, Stamp, DocMeta)> {
        if slot >= self.header.n_docs {
            bail!("index slot out of range");
        }
        let raw = self.read(self.header.off_docs + u64::from(slot) * DOC, DOC)?;
        self.decode_doc(&raw, None)
    }

    fn decode_doc(
        &self,
        raw: &[u8],
        strings: Option<(u32, &[u8])>,
    ) -> anyhow::Result<(String, Stamp, DocMeta)> {
        let id = self.string(strings, u32_at(raw, 0), u16_at(raw, 4))?;
        let line = self.string(strings, u32_at(raw, 8), u16_at(raw, 6))?;
        let stamp = Stamp {
            ino: u64_at(raw, 24),
            mtime_ns: i128::from(i64::from_le_bytes(
                raw[32..40].try_into().unwrap_or_default(),
            )),
            size: u64_at(raw, 40),
        };
        let meta = DocMeta {
            len: u32_at(raw, 12),
            at_ms: i64::from_le_bytes(raw[16..24].try_into().unwrap_or_default()),
            day: i32::from_le_bytes(raw[48..52].try_into().unwrap_or_default()),
            importance: raw[52],
            searchable: raw[53] & 1 == 1,
            line,
        };
        Ok((id, stamp, meta))
    }

    /// Every record, in slot order (which is id order), read a chunk at a time: for
    /// reconciling with the folder and for merging, in memory that does not grow with the
    /// number of records.
    pub fn docs_in_order(&self) -> DocsInOrder<'_> {
        DocsInOrder {
            segment: self,
            next: 0,
            chunk: Vec::new(),
        }
    }

    /// The records in slots `from..from + count`, reading their strings at once when they lie
    /// together (as this module writes them), each on its own otherwise.
    fn doc_chunk(&self, from: u32, count: u32) -> anyhow::Result<Vec<(String, Stamp, DocMeta)>> {
        let h = &self.header;
        let table = self.read(h.off_docs + u64::from(from) * DOC, u64::from(count) * DOC)?;
        let (mut low, mut high) = (u64::MAX, 0u64);
        for raw in table.chunks_exact(DOC as usize) {
            for (off, len) in [
                (u32_at(raw, 0), u16_at(raw, 4)),
                (u32_at(raw, 8), u16_at(raw, 6)),
            ] {
                low = low.min(u64::from(off));
                high = high.max(u64::from(off) + u64::from(len));
            }
        }
        let strings_len = h.file_len - h.off_strings;
        let span = if low < high && high <= strings_len && high - low <= MAX_STRING_SPAN {
            Some((low as u32, self.read(h.off_strings + low, high - low)?))
        } else {
            None
        };
        table
            .chunks_exact(DOC as usize)
            .map(|raw| self.decode_doc(raw, span.as_ref().map(|(base, bytes)| (*base, &bytes[..]))))
            .collect()
    }

    /// The slot of the record `id`.
    pub fn find(&self, id: &str) -> anyhow::Result<Option<u32>> {
        let h = &self.header;
        let mask = u64::from(h.id_buckets) - 1;
        let mut at = term_hash(id) & mask;
        for _ in 0..h.id_buckets {
            let raw = self.read(h.off_ids + at * 4, 4)?;
            let entry = u32_at(&raw, 0);
            if entry == 0 {
                return Ok(None);
            }
            let slot = entry - 1;
            let doc = self.read(h.off_docs + u64::from(slot) * DOC, DOC)?;
            if u16_at(&doc, 4) as usize == id.len()
                && self.string(None, u32_at(&doc, 0), u16_at(&doc, 4))? == id
            {
                return Ok(Some(slot));
            }
            at = (at + 1) & mask;
        }
        Ok(None)
    }

    /// The postings of the term with hash `hash`.
    pub fn postings(&self, hash: u64) -> anyhow::Result<Vec<Posting>> {
        let h = &self.header;
        let mask = u64::from(h.term_buckets) - 1;
        let hash = nonzero(hash);
        let mut at = hash & mask;
        for _ in 0..h.term_buckets {
            let raw = self.read(h.off_terms + at * BUCKET, BUCKET)?;
            let found = u64_at(&raw, 0);
            if found == 0 {
                return Ok(Vec::new());
            }
            if found == hash {
                let mut out = Vec::new();
                self.postings_at(u32_at(&raw, 8), u32_at(&raw, 12), &mut out)?;
                return Ok(out);
            }
            at = (at + 1) & mask;
        }
        Ok(Vec::new())
    }

    /// How many records hold the term with hash `hash`, without reading its postings.
    pub fn count(&self, hash: u64) -> anyhow::Result<u32> {
        let h = &self.header;
        let mask = u64::from(h.term_buckets) - 1;
        let hash = nonzero(hash);
        let mut at = hash & mask;
        for _ in 0..h.term_buckets {
            let raw = self.read(h.off_terms + at * BUCKET, BUCKET)?;
            match u64_at(&raw, 0) {
                0 => return Ok(0),
                found if found == hash => return Ok(u32_at(&raw, 12)),
                _ => at = (at + 1) & mask,
            }
        }
        Ok(0)
    }

    /// Every term with postings, as (hash, first posting, posting count), by hash: for
    /// merging, which then reads each term's postings with [`Segment::postings_at`].
    pub fn terms(&self) -> anyhow::Result<Vec<(u64, u32, u32)>> {
        let h = &self.header;
        let mut out = Vec::new();
        // A few thousand buckets at a time: the table is megabytes at 100,000 notes.
        let chunk = 4096u64;
        let mut at = 0u64;
        while at < u64::from(h.term_buckets) {
            let n = chunk.min(u64::from(h.term_buckets) - at);
            let table = self.read(h.off_terms + at * BUCKET, n * BUCKET)?;
            for raw in table.chunks_exact(BUCKET as usize) {
                let hash = u64_at(raw, 0);
                if hash != 0 {
                    out.push((hash, u32_at(raw, 8), u32_at(raw, 12)));
                }
            }
            at += n;
        }
        out.sort_unstable_by_key(|t| t.0);
        Ok(out)
    }

    /// Reads `count` postings from the `first` into `out` (cleared first).
    pub fn postings_at(
        &self,
        first: u32,
        count: u32,
        out: &mut Vec<Posting>,
    ) -> anyhow::Result<()> {
        let h = &self.header;
        let start = h.off_postings + u64::from(first) * POSTING;
        let len = u64::from(count) * POSTING;
        if start + len > h.off_short {
            bail!("index postings out of range");
        }
        out.clear();
        out.extend(
            self.read(start, len)?
                .chunks_exact(POSTING as usize)
                .map(Posting::decode),
        );
        Ok(())
    }

    /// The session index's candidates kept in the short region.
    pub fn short(&self) -> anyhow::Result<ShortList> {
        let h = &self.header;
        let raw = self.read(h.off_short, h.off_strings - h.off_short)?;
        let levels = raw.get(..LEVELS * 4).context("index short region torn")?;
        let per_level = levels.chunks_exact(4).map(|c| u32_at(c, 0)).collect();
        let mut records = Vec::with_capacity(h.n_short as usize);
        let mut at = LEVELS * 4;
        for _ in 0..h.n_short {
            let fixed = raw.get(at..at + 26).context("index short region torn")?;
            let id_len = u16_at(fixed, 22) as usize;
            let line_len = u16_at(fixed, 24) as usize;
            let text = |from: usize, len: usize| -> anyhow::Result<String> {
                let bytes = raw
                    .get(from..from + len)
                    .context("index short region torn")?;
                String::from_utf8(bytes.to_vec()).context("index text is not UTF-8")
            };
            let id = text(at + 26, id_len)?;
            let line = text(at + 26 + id_len, line_len)?;
            records.push(Short {
                slot: u32_at(fixed, 0),
                id,
                meta: DocMeta {
                    len: u32_at(fixed, 4),
                    at_ms: i64::from_le_bytes(fixed[8..16].try_into().unwrap_or_default()),
                    day: i32::from_le_bytes(fixed[16..20].try_into().unwrap_or_default()),
                    importance: fixed[20],
                    searchable: true,
                    line,
                },
            });
            at += 26 + id_len + line_len;
        }
        Ok(ShortList { records, per_level })
    }
}

/// Importance levels a record can have (its rank is one byte).
const LEVELS: usize = 256;

/// Records per read when walking the docs table in order.
const DOCS_CHUNK: u32 = 1024;
/// The most string bytes read at once for a chunk of records; a chunk whose strings lie
/// further apart (not as this module writes them) reads them one by one.
const MAX_STRING_SPAN: u64 = 1 << 20;

/// [`Segment::docs_in_order`]: each item is (slot, id, stamp, meta).
pub struct DocsInOrder<'a> {
    segment: &'a Segment,
    /// The slot of the next record given.
    next: u32,
    /// The rest of the current chunk, last record first.
    chunk: Vec<(String, Stamp, DocMeta)>,
}

impl Iterator for DocsInOrder<'_> {
    type Item = anyhow::Result<(u32, String, Stamp, DocMeta)>;

    fn next(&mut self) -> Option<Self::Item> {
        let n_docs = self.segment.header.n_docs;
        if self.chunk.is_empty() {
            if self.next >= n_docs {
                return None;
            }
            let count = DOCS_CHUNK.min(n_docs - self.next);
            match self.segment.doc_chunk(self.next, count) {
                Ok(mut chunk) => {
                    chunk.reverse();
                    self.chunk = chunk;
                }
                Err(err) => {
                    self.next = n_docs;
                    return Some(Err(err));
                }
            }
        }
        let (id, stamp, meta) = self.chunk.pop()?;
        let slot = self.next;
        self.next += 1;
        Some(Ok((slot, id, stamp, meta)))
    }
}

/// The session-index line, at most what the format's 16-bit length holds, cut at a character.
fn clip(line: &str) -> &str {
    let mut end = line.len().min(u16::MAX as usize);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Which kind of record a segment holds, as a tag in its header.
fn kind_tag(kind: &str) -> u32 {
    term_hash(kind) as u32
}

/// 0 marks an empty bucket.
pub(super) fn nonzero(hash: u64) -> u64 {
    hash.max(1)
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64, size: u64) -> anyhow::Result<()> {
    let end = offset
        .checked_add(buf.len() as u64)
        .context("index offset overflows")?;
    if end > size {
        bail!("the index segment is shorter than its header says");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
            .context("could not read the index segment")
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let mut done = 0;
        while done < buf.len() {
            let n = file
                .seek_read(&mut buf[done..], offset + done as u64)
                .context("could not read the index segment")?;
            if n == 0 {
                bail!("the index segment ended early");
            }
            done += n;
        }
        Ok(())
    }
}

fn u16_at(raw: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([raw[at], raw[at + 1]])
}

fn u32_at(raw: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(raw[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(raw: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(raw[at..at + 8].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(i: u32) -> DocMeta {
        DocMeta {
            len: 10 + i % 7,
            at_ms: 1_700_000_000_000 + i64::from(i % 500) * 1000,
            day: 19_675 + (i % 3) as i32,
            importance: (i % 4 + 1) as u8,
            searchable: !i.is_multiple_of(11),
            line: format!("line of record {i} é"),
        }
    }

    fn stamp(i: u32) -> Stamp {
        Stamp {
            ino: u64::from(i) + 1,
            mtime_ns: i128::from(i) * 1_000_003,
            size: u64::from(i) * 3,
        }
    }

    /// The postings of term `t` (1-based): every record whose slot `t` divides, if searchable.
    fn postings_of(t: u32, n: u32) -> Vec<Posting> {
        (0..n)
            .filter(|slot| slot % t == 0 && meta(*slot).searchable)
            .map(|slot| Posting {
                slot,
                len: meta(slot).len,
                tf: (slot % 5 + 1) as u16,
                importance: meta(slot).importance,
            })
            .collect()
    }

    #[test]
    fn a_segment_written_in_one_pass_reads_back_record_by_record_and_term_by_term() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.seg");
        // More records than one chunk of the in-order walk reads.
        let n = 2 * DOCS_CHUNK + 77;
        let mut writer = Writer::new(&path, "notes").unwrap();
        for i in 0..n {
            assert_eq!(
                writer
                    .doc(&format!("n-{i:06}"), stamp(i), &meta(i))
                    .unwrap(),
                i
            );
        }
        for t in 1..40u32 {
            writer.term(u64::from(t) << 40, &postings_of(t, n)).unwrap();
        }
        // A term without postings is left out.
        writer.term(u64::MAX, &[]).unwrap();
        let folder = Stamp {
            ino: 9,
            mtime_ns: 123_456_789,
            size: 0,
        };
        let id = writer.finish(Some(folder)).unwrap();
        // The spill files went with the writer: only the segment is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let segment = Segment::open(&path, "notes").unwrap();
        assert_eq!(segment.id(), id);
        assert_eq!(segment.docs(), n);
        assert_eq!(segment.folder(), Some(folder));
        let searchable: Vec<u32> = (0..n).filter(|i| meta(*i).searchable).collect();
        assert_eq!(
            segment.live(),
            (
                searchable.len() as u32,
                searchable.iter().map(|i| u64::from(meta(*i).len)).sum()
            )
        );
        let walked: Vec<(u32, String, Stamp, DocMeta)> =
            segment.docs_in_order().map(Result::unwrap).collect();
        assert_eq!(walked.len(), n as usize);
        for (i, (slot, id, st, m)) in walked.into_iter().enumerate() {
            let i = i as u32;
            assert_eq!(
                (slot, id, st, m),
                (i, format!("n-{i:06}"), stamp(i), meta(i))
            );
        }
        assert_eq!(segment.doc(1500).unwrap().0, "n-001500");
        assert_eq!(segment.find("n-001500").unwrap(), Some(1500));
        assert_eq!(segment.find("n-999999").unwrap(), None);
        let terms = segment.terms().unwrap();
        // Terms 11, 22 and 33 hold only records that are not searchable: left out.
        let kept: Vec<u32> = (1..40u32).filter(|t| t % 11 != 0).collect();
        assert_eq!(terms.len(), kept.len());
        let mut first = 0;
        for (t, (hash, at, count)) in kept.into_iter().zip(terms) {
            let expected = postings_of(t, n);
            assert_eq!(
                (hash, at, count),
                (u64::from(t) << 40, first, expected.len() as u32)
            );
            first += count;
            assert_eq!(segment.postings(hash).unwrap(), expected);
            let mut read = vec![Posting {
                slot: 0,
                len: 0,
                tf: 0,
                importance: 0,
            }];
            segment.postings_at(at, count, &mut read).unwrap();
            assert_eq!(read, expected);
        }
        assert!(segment.postings(u64::MAX).unwrap().is_empty());
        // The short region: per level, the newest searchable records (ties: the smaller id).
        let short = segment.short().unwrap();
        for level in 1..=4u8 {
            let mut expected: Vec<u32> = searchable
                .iter()
                .copied()
                .filter(|i| meta(*i).importance == level)
                .collect();
            assert_eq!(short.per_level[level as usize], expected.len() as u32);
            expected.sort_by(|a, b| meta(*b).at_ms.cmp(&meta(*a).at_ms).then(a.cmp(b)));
            expected.truncate(SHORT_PER_LEVEL);
            let kept: Vec<u32> = short
                .records
                .iter()
                .filter(|r| r.meta.importance == level)
                .map(|r| r.slot)
                .collect();
            assert_eq!(kept, expected);
        }
        for record in &short.records {
            assert_eq!(record.id, format!("n-{:06}", record.slot));
            assert_eq!(record.meta, meta(record.slot));
        }
    }

    #[test]
    fn a_writer_refuses_what_would_make_a_segment_misread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.seg");
        let mut writer = Writer::new(&path, "notes").unwrap();
        writer.doc("n-b", stamp(1), &meta(1)).unwrap();
        // Slots are in id order: readers walk them beside the folder's listing.
        assert!(writer.doc("n-a", stamp(2), &meta(2)).is_err());
        assert!(writer.doc("n-b", stamp(2), &meta(2)).is_err());
        let posting = |slot| Posting {
            slot,
            len: 3,
            tf: 1,
            importance: 2,
        };
        assert!(
            writer.term(5, &[posting(1)]).is_err(),
            "slot 1 is not written"
        );
        writer.term(5, &[posting(0)]).unwrap();
        assert!(
            writer.term(4, &[posting(0)]).is_err(),
            "terms go in hash order"
        );
        assert!(
            writer.doc("n-c", stamp(3), &meta(3)).is_err(),
            "records before terms"
        );
        drop(writer);
        assert!(!path.exists(), "an unfinished segment replaces nothing");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
