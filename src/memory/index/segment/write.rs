//! Writing a segment: in one pass, holding neither the postings nor the strings.

use std::fs::File;
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::Path;

use anyhow::{Context, bail};

use super::{
    BUCKET, DOC, DocMeta, HEADER, LEVELS, MAGIC, POSTING, Posting, SHORT_PER_LEVEL, Stamp, VERSION,
    clip, kind_tag, nonzero, term_hash, u64_at,
};

/// A record of the short region, as the writer keeps it until the end.
struct ShortEntry {
    slot: u32,
    id: String,
    meta: DocMeta,
}

/// Writes a segment in one pass, in memory that does not grow with the postings or the
/// strings: records first ([`Writer::doc`], in id order; a record's slot is its position),
/// then the terms ([`Writer::term`], in hash order), then [`Writer::finish`]. The records
/// table goes straight into the new file; the postings and the strings, whose place in the
/// file is known only at the end, go through two unnamed spill files beside it.
pub struct Writer {
    path: std::path::PathBuf,
    kind: u32,
    tmp: tempfile::NamedTempFile,
    out: std::io::BufWriter<File>,
    strings: std::io::BufWriter<File>,
    strings_len: u64,
    postings: std::io::BufWriter<File>,
    n_postings: u32,
    /// The id hash of each slot, for the id table written at the end.
    id_hashes: Vec<u64>,
    last_id: Option<String>,
    n_live: u32,
    total_len: u64,
    /// The searchable records' file bytes, for the notes' budget.
    live_bytes: u64,
    /// Per importance level, the newest searchable records seen so far (at most twice
    /// [`SHORT_PER_LEVEL`] between trims).
    short: Vec<Vec<ShortEntry>>,
    per_level: Vec<u32>,
    /// (hash, first posting, posting count) of each term written, in hash order.
    terms: Vec<(u64, u32, u32)>,
}

impl Writer {
    /// Starts a segment of `kind` records, to replace `path` at [`Writer::finish`].
    pub fn new(path: &Path, kind: &str) -> anyhow::Result<Writer> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let context = || format!("could not create the index segment in {}", dir.display());
        let tmp = tempfile::NamedTempFile::new_in(dir).with_context(context)?;
        let file = tmp.as_file().try_clone().with_context(context)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
        // The header, written last, once every region's place is known.
        out.write_all(&[0u8; HEADER as usize])
            .with_context(context)?;
        let spill = || -> anyhow::Result<std::io::BufWriter<File>> {
            Ok(std::io::BufWriter::with_capacity(
                1 << 16,
                tempfile::tempfile_in(dir).with_context(context)?,
            ))
        };
        Ok(Writer {
            path: path.to_path_buf(),
            kind: kind_tag(kind),
            tmp,
            out,
            strings: spill()?,
            strings_len: 0,
            postings: spill()?,
            n_postings: 0,
            id_hashes: Vec::new(),
            last_id: None,
            n_live: 0,
            total_len: 0,
            live_bytes: 0,
            short: (0..LEVELS).map(|_| Vec::new()).collect(),
            per_level: vec![0; LEVELS],
            terms: Vec::new(),
        })
    }

    /// Adds a record after every record added so far (ids strictly increase); returns its slot.
    pub fn doc(&mut self, id: &str, stamp: Stamp, meta: &DocMeta) -> anyhow::Result<u32> {
        if self.last_id.as_deref().is_some_and(|last| last >= id) {
            bail!("index records out of order at {id}");
        }
        if !self.terms.is_empty() {
            bail!("an index record after the terms");
        }
        let slot = u32::try_from(self.id_hashes.len())
            .ok()
            .filter(|s| *s < u32::MAX)
            .context("too many records for one segment")?;
        let id_off = self.push_string(id)?;
        let line = clip(&meta.line);
        let line_off = self.push_string(line)?;
        let mut raw = [0u8; DOC as usize];
        raw[0..4].copy_from_slice(&id_off.to_le_bytes());
        raw[4..6].copy_from_slice(&(id.len() as u16).to_le_bytes());
        raw[6..8].copy_from_slice(&(line.len() as u16).to_le_bytes());
        raw[8..12].copy_from_slice(&line_off.to_le_bytes());
        raw[12..16].copy_from_slice(&meta.len.to_le_bytes());
        raw[16..24].copy_from_slice(&meta.at_ms.to_le_bytes());
        raw[24..32].copy_from_slice(&stamp.ino.to_le_bytes());
        raw[32..40].copy_from_slice(&(stamp.mtime_ns as i64).to_le_bytes());
        raw[40..48].copy_from_slice(&stamp.size.to_le_bytes());
        raw[48..52].copy_from_slice(&meta.day.to_le_bytes());
        raw[52] = meta.importance;
        raw[53] = u8::from(meta.searchable);
        self.out
            .write_all(&raw)
            .context("could not write the index segment")?;
        self.id_hashes.push(term_hash(id));
        self.last_id = Some(id.to_owned());
        if meta.searchable {
            self.n_live += 1;
            self.total_len += u64::from(meta.len);
            self.live_bytes += stamp.size;
            let level = meta.importance as usize;
            self.per_level[level] += 1;
            self.short[level].push(ShortEntry {
                slot,
                id: clip(id).to_owned(),
                meta: DocMeta {
                    line: line.to_owned(),
                    ..meta.clone()
                },
            });
            if self.short[level].len() >= 2 * SHORT_PER_LEVEL {
                trim_short(&mut self.short[level]);
            }
        }
        Ok(slot)
    }

    fn push_string(&mut self, text: &str) -> anyhow::Result<u32> {
        let at = u32::try_from(self.strings_len).context("index strings too large")?;
        if text.len() > u16::MAX as usize {
            bail!("index string too long");
        }
        self.strings
            .write_all(text.as_bytes())
            .context("could not write the index segment")?;
        self.strings_len += text.len() as u64;
        Ok(at)
    }

    /// Adds the postings of the term with hash `hash`, after every record and after every term
    /// of a lower hash; a term without postings is left out.
    pub fn term(&mut self, hash: u64, postings: &[Posting]) -> anyhow::Result<()> {
        if postings.is_empty() {
            return Ok(());
        }
        let hash = nonzero(hash);
        if self.terms.last().is_some_and(|last| last.0 >= hash) {
            bail!("index terms out of order");
        }
        let n_docs = self.id_hashes.len();
        if postings.iter().any(|p| p.slot as usize >= n_docs) {
            bail!("a posting names a record the segment does not hold");
        }
        let count = u32::try_from(postings.len()).context("too many postings for one segment")?;
        for p in postings {
            self.postings
                .write_all(&p.encode())
                .context("could not write the index segment")?;
        }
        self.terms.push((hash, self.n_postings, count));
        self.n_postings = self
            .n_postings
            .checked_add(count)
            .context("too many postings for one segment")?;
        Ok(())
    }

    /// Writes the tables and the header and puts the segment in place of the old one,
    /// atomically; `folder` is the records folder's stamp it reflects, if it covers all of it.
    /// Returns the new segment's id.
    pub fn finish(self, folder: Option<Stamp>) -> anyhow::Result<u64> {
        let Writer {
            path,
            kind,
            tmp,
            mut out,
            strings,
            strings_len,
            postings,
            n_postings,
            id_hashes,
            n_live,
            total_len,
            live_bytes,
            mut short,
            per_level,
            terms,
            ..
        } = self;
        let failed = || "could not write the index segment";
        let n_docs = id_hashes.len() as u32;
        let id_buckets = (id_hashes.len() * 2 + 2).next_power_of_two();
        let mut ids = vec![0u32; id_buckets];
        let mask = id_buckets as u64 - 1;
        for (slot, hash) in id_hashes.into_iter().enumerate() {
            let mut at = hash & mask;
            while ids[at as usize] != 0 {
                at = (at + 1) & mask;
            }
            ids[at as usize] = slot as u32 + 1;
        }
        let term_buckets = (terms.len() * 2 + 2).next_power_of_two();
        let mut table = vec![0u8; term_buckets * BUCKET as usize];
        let mask = term_buckets as u64 - 1;
        for (hash, first, count) in terms {
            let mut at = hash & mask;
            while u64_at(&table, (at * BUCKET) as usize) != 0 {
                at = (at + 1) & mask;
            }
            let b = (at * BUCKET) as usize;
            table[b..b + 8].copy_from_slice(&hash.to_le_bytes());
            table[b + 8..b + 12].copy_from_slice(&first.to_le_bytes());
            table[b + 12..b + 16].copy_from_slice(&count.to_le_bytes());
        }
        let mut short_bytes = Vec::with_capacity(LEVELS * 4);
        for count in &per_level {
            short_bytes.extend_from_slice(&count.to_le_bytes());
        }
        let mut n_short = 0u32;
        for level in &mut short {
            trim_short(level);
            for entry in level.iter() {
                let meta = &entry.meta;
                short_bytes.extend_from_slice(&entry.slot.to_le_bytes());
                short_bytes.extend_from_slice(&meta.len.to_le_bytes());
                short_bytes.extend_from_slice(&meta.at_ms.to_le_bytes());
                short_bytes.extend_from_slice(&meta.day.to_le_bytes());
                short_bytes.push(meta.importance);
                short_bytes.push(0);
                short_bytes.extend_from_slice(&(entry.id.len() as u16).to_le_bytes());
                short_bytes.extend_from_slice(&(meta.line.len() as u16).to_le_bytes());
                short_bytes.extend_from_slice(entry.id.as_bytes());
                short_bytes.extend_from_slice(meta.line.as_bytes());
                n_short += 1;
            }
        }

        let off_docs = HEADER;
        let off_ids = off_docs + u64::from(n_docs) * DOC;
        let off_terms = off_ids + id_buckets as u64 * 4;
        let off_postings = off_terms + table.len() as u64;
        let off_short = off_postings + u64::from(n_postings) * POSTING;
        let off_strings = off_short + short_bytes.len() as u64;
        let file_len = off_strings + strings_len;

        for entry in &ids {
            out.write_all(&entry.to_le_bytes()).with_context(failed)?;
        }
        drop(ids);
        out.write_all(&table).with_context(failed)?;
        drop(table);
        let copy = |spill: std::io::BufWriter<File>, out: &mut std::io::BufWriter<File>| {
            let mut spill = spill.into_inner().map_err(|err| err.into_error())?;
            spill.seek(SeekFrom::Start(0))?;
            std::io::copy(&mut spill, out).map(drop)
        };
        copy(postings, &mut out).with_context(failed)?;
        out.write_all(&short_bytes).with_context(failed)?;
        copy(strings, &mut out).with_context(failed)?;

        let id: u64 = crate::memory::ids::random_u64();
        let mut header = [0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&kind.to_le_bytes());
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
        out.seek(SeekFrom::Start(0)).with_context(failed)?;
        out.write_all(&header).with_context(failed)?;
        out.flush().with_context(failed)?;
        drop(out);
        let written = tmp.as_file().metadata().with_context(failed)?.len();
        if written != file_len {
            bail!("the index segment came out {written} bytes long, not {file_len}");
        }
        tmp.persist(&path)
            .map_err(|err| err.error)
            .with_context(|| format!("could not replace {}", path.display()))?;
        Ok(id)
    }
}

/// Keeps a level's [`SHORT_PER_LEVEL`] newest records (ties: the smaller id), newest first:
/// the session index ranks by importance plus a recency bonus that only grows with the date,
/// so within a level a newer record always ranks higher, and the top of the whole index is
/// among these.
fn trim_short(level: &mut Vec<ShortEntry>) {
    level.sort_by(|a, b| {
        b.meta
            .at_ms
            .cmp(&a.meta.at_ms)
            .then_with(|| a.id.cmp(&b.id))
    });
    level.truncate(SHORT_PER_LEVEL);
}
