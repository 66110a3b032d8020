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

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail};

use super::doc::{DocMeta, Stamp, term_hash};

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

/// What [`Segment::write`] needs of each record; slots are given in this order.
pub struct Entry<'a> {
    pub id: &'a str,
    pub doc: &'a DocMeta,
    pub stamp: Stamp,
}

/// Postings by term hash, as a segment is written from them.
pub type ByTerm = std::collections::HashMap<u64, Vec<Posting>>;

/// Adds the postings of the record in `slot` with `meta` and `terms` (nothing for a record
/// that is not searchable).
pub fn add_postings(by_term: &mut ByTerm, slot: u32, meta: &DocMeta, terms: &[(u64, u32)]) {
    if !meta.searchable {
        return;
    }
    for &(hash, tf) in terms {
        by_term.entry(nonzero(hash)).or_default().push(Posting {
            slot,
            len: meta.len,
            tf: tf.min(u32::from(u16::MAX)) as u16,
            importance: meta.importance,
        });
    }
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

    fn string(&self, strings: Option<&[u8]>, off: u32, len: u16) -> anyhow::Result<String> {
        let bytes = match strings {
            Some(all) => all
                .get(off as usize..off as usize + len as usize)
                .context("index string out of range")?
                .to_vec(),
            None => self.read(self.header.off_strings + u64::from(off), u64::from(len))?,
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
        strings: Option<&[u8]>,
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

    /// Every record, in slot order: for reconciling with the folder and for merging.
    pub fn all_docs(&self) -> anyhow::Result<Vec<(String, Stamp, DocMeta)>> {
        let h = &self.header;
        let table = self.read(h.off_docs, u64::from(h.n_docs) * DOC)?;
        let strings = self.read(h.off_strings, h.file_len - h.off_strings)?;
        table
            .chunks_exact(DOC as usize)
            .map(|raw| self.decode_doc(raw, Some(&strings)))
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
                let (first, count) = (u64::from(u32_at(&raw, 8)), u64::from(u32_at(&raw, 12)));
                let start = h.off_postings + first * POSTING;
                if start + count * POSTING > h.off_short {
                    bail!("index postings out of range");
                }
                let raw = self.read(start, count * POSTING)?;
                return Ok(raw
                    .chunks_exact(POSTING as usize)
                    .map(Posting::decode)
                    .collect());
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

    /// Every posting by term hash, for merging.
    pub fn all_postings(&self) -> anyhow::Result<Vec<(u64, Vec<Posting>)>> {
        let h = &self.header;
        let table = self.read(h.off_terms, u64::from(h.term_buckets) * BUCKET)?;
        let mut out = Vec::new();
        for raw in table.chunks_exact(BUCKET as usize) {
            let hash = u64_at(raw, 0);
            if hash == 0 {
                continue;
            }
            // Term by term, so the raw postings are never all in memory beside the decoded ones.
            let (first, count) = (u64::from(u32_at(raw, 8)), u64::from(u32_at(raw, 12)));
            let start = h.off_postings + first * POSTING;
            if start + count * POSTING > h.off_short {
                bail!("index postings out of range");
            }
            let list = self
                .read(start, count * POSTING)?
                .chunks_exact(POSTING as usize)
                .map(Posting::decode)
                .collect();
            out.push((hash, list));
        }
        Ok(out)
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

    /// Writes a segment of `entries` (their order gives the slots) to `path`, atomically.
    pub fn write(
        path: &Path,
        kind: &str,
        entries: &[Entry<'_>],
        by_term: &ByTerm,
        folder: Option<Stamp>,
    ) -> anyhow::Result<u64> {
        let n_docs = u32::try_from(entries.len()).context("too many records for one segment")?;
        let id_buckets = (entries.len() * 2 + 2).next_power_of_two();
        let mut strings: Vec<u8> = Vec::new();
        let mut docs: Vec<u8> = Vec::with_capacity(entries.len() * DOC as usize);
        let mut ids = vec![0u32; id_buckets];
        let (mut n_live, mut total_len, mut live_bytes) = (0u32, 0u64, 0u64);
        for (slot, entry) in entries.iter().enumerate() {
            let slot = slot as u32;
            let meta = entry.doc;
            let id_off = push_string(&mut strings, entry.id)?;
            let line = clip(&meta.line);
            let line_off = push_string(&mut strings, line)?;
            let mut raw = [0u8; DOC as usize];
            raw[0..4].copy_from_slice(&id_off.to_le_bytes());
            raw[4..6].copy_from_slice(&(entry.id.len() as u16).to_le_bytes());
            raw[6..8].copy_from_slice(&(line.len() as u16).to_le_bytes());
            raw[8..12].copy_from_slice(&line_off.to_le_bytes());
            raw[12..16].copy_from_slice(&meta.len.to_le_bytes());
            raw[16..24].copy_from_slice(&meta.at_ms.to_le_bytes());
            raw[24..32].copy_from_slice(&entry.stamp.ino.to_le_bytes());
            raw[32..40].copy_from_slice(&(entry.stamp.mtime_ns as i64).to_le_bytes());
            raw[40..48].copy_from_slice(&entry.stamp.size.to_le_bytes());
            raw[48..52].copy_from_slice(&meta.day.to_le_bytes());
            raw[52] = meta.importance;
            raw[53] = u8::from(meta.searchable);
            docs.extend_from_slice(&raw);
            let mask = id_buckets as u64 - 1;
            let mut at = term_hash(entry.id) & mask;
            while ids[at as usize] != 0 {
                at = (at + 1) & mask;
            }
            ids[at as usize] = slot + 1;
            if meta.searchable {
                n_live += 1;
                total_len += u64::from(meta.len);
                live_bytes += entry.stamp.size;
            }
        }
        let term_buckets = (by_term.len() * 2 + 2).next_power_of_two();
        for list in by_term.values() {
            if list.iter().any(|p| p.slot >= n_docs) {
                bail!("a posting names a record the segment does not hold");
            }
        }
        let mut terms = vec![0u8; term_buckets * BUCKET as usize];
        let mut hashes: Vec<u64> = by_term
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(hash, _)| *hash)
            .collect();
        hashes.sort_unstable();
        let mut first = 0u32;
        for &hash in &hashes {
            let list = &by_term[&hash];
            let mask = term_buckets as u64 - 1;
            let mut at = hash & mask;
            while u64_at(&terms, (at * BUCKET) as usize) != 0 {
                at = (at + 1) & mask;
            }
            let b = (at * BUCKET) as usize;
            terms[b..b + 8].copy_from_slice(&hash.to_le_bytes());
            terms[b + 8..b + 12].copy_from_slice(&first.to_le_bytes());
            terms[b + 12..b + 16].copy_from_slice(&(list.len() as u32).to_le_bytes());
            first = first
                .checked_add(list.len() as u32)
                .context("too many postings for one segment")?;
        }
        let (short, n_short) = short_region(entries);

        let off_docs = HEADER;
        let off_ids = off_docs + docs.len() as u64;
        let off_terms = off_ids + ids.len() as u64 * 4;
        let off_postings = off_terms + terms.len() as u64;
        // The postings are written straight from `by_term` below, never copied into one buffer:
        // at 100,000 notes they are tens of megabytes.
        let off_short = off_postings + u64::from(first) * POSTING;
        let off_strings = off_short + short.len() as u64;
        let file_len = off_strings + strings.len() as u64;
        let id: u64 = crate::memory::ids::random_u64();
        let mut header = [0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&kind_tag(kind).to_le_bytes());
        header[16..24].copy_from_slice(&id.to_le_bytes());
        header[24..28].copy_from_slice(&n_docs.to_le_bytes());
        header[28..32].copy_from_slice(&n_live.to_le_bytes());
        header[32..40].copy_from_slice(&total_len.to_le_bytes());
        header[40..44].copy_from_slice(&(term_buckets as u32).to_le_bytes());
        header[44..48].copy_from_slice(&(id_buckets as u32).to_le_bytes());
        for (at, value) in [
            (48, off_docs),
            (56, off_ids),
            (64, off_terms),
            (72, off_postings),
            (80, off_short),
            (88, off_strings),
            (104, file_len),
        ] {
            header[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        header[96..100].copy_from_slice(&n_short.to_le_bytes());
        if let Some(stamp) = folder {
            header[100] = 1;
            header[112..120].copy_from_slice(&stamp.ino.to_le_bytes());
            header[120..128].copy_from_slice(&(stamp.mtime_ns as i64).to_le_bytes());
        }
        header[128..136].copy_from_slice(&live_bytes.to_le_bytes());

        let mut tmp = tempfile::NamedTempFile::new_in(path.parent().unwrap_or(Path::new(".")))
            .context("could not create the index segment")?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
        let mut write = |bytes: &[u8]| {
            out.write_all(bytes)
                .context("could not write the index segment")
        };
        write(&header)?;
        write(&docs)?;
        for entry in &ids {
            write(&entry.to_le_bytes())?;
        }
        write(&terms)?;
        for hash in &hashes {
            for p in &by_term[hash] {
                write(&p.encode())?;
            }
        }
        write(&short)?;
        write(&strings)?;
        out.flush().context("could not write the index segment")?;
        drop(out);
        debug_assert_eq!(
            tmp.as_file().metadata().map(|m| m.len()).ok(),
            Some(file_len)
        );
        tmp.persist(path)
            .map_err(|err| err.error)
            .with_context(|| format!("could not replace {}", path.display()))?;
        Ok(id)
    }
}

/// Importance levels a record can have (its rank is one byte).
const LEVELS: usize = 256;

/// The newest [`SHORT_PER_LEVEL`] searchable records of each importance level: the session
/// index ranks by importance plus a recency bonus that only grows with the date, so within a
/// level a newer record always ranks higher, and the top of the whole index is among these.
fn short_region(entries: &[Entry<'_>]) -> (Vec<u8>, u32) {
    let mut levels: Vec<Vec<(usize, &Entry<'_>)>> = vec![Vec::new(); LEVELS];
    for (slot, entry) in entries.iter().enumerate() {
        if entry.doc.searchable {
            levels[entry.doc.importance as usize].push((slot, entry));
        }
    }
    let mut out = Vec::with_capacity(LEVELS * 4);
    for level in &levels {
        out.extend_from_slice(&(level.len() as u32).to_le_bytes());
    }
    let mut count = 0u32;
    for level in &mut levels {
        level.sort_by(|a, b| {
            b.1.doc
                .at_ms
                .cmp(&a.1.doc.at_ms)
                .then_with(|| a.1.id.cmp(b.1.id))
        });
        for (slot, entry) in level.iter().take(SHORT_PER_LEVEL) {
            let meta = entry.doc;
            let line = clip(&meta.line);
            let id = clip(entry.id);
            out.extend_from_slice(&(*slot as u32).to_le_bytes());
            out.extend_from_slice(&meta.len.to_le_bytes());
            out.extend_from_slice(&meta.at_ms.to_le_bytes());
            out.extend_from_slice(&meta.day.to_le_bytes());
            out.push(meta.importance);
            out.push(0);
            out.extend_from_slice(&(id.len() as u16).to_le_bytes());
            out.extend_from_slice(&(line.len() as u16).to_le_bytes());
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(line.as_bytes());
            count += 1;
        }
    }
    (out, count)
}

/// The session-index line, at most what the format's 16-bit length holds, cut at a character.
fn clip(line: &str) -> &str {
    let mut end = line.len().min(u16::MAX as usize);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

fn push_string(strings: &mut Vec<u8>, text: &str) -> anyhow::Result<u32> {
    let at = u32::try_from(strings.len()).context("index strings too large")?;
    if text.len() > u16::MAX as usize {
        bail!("index string too long");
    }
    strings.extend_from_slice(text.as_bytes());
    Ok(at)
}

/// Which kind of record a segment holds, as a tag in its header.
fn kind_tag(kind: &str) -> u32 {
    term_hash(kind) as u32
}

/// 0 marks an empty bucket.
fn nonzero(hash: u64) -> u64 {
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
