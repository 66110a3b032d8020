//! The derived index of one kind of record (notes or routes): a segment written at once and
//! read in place (`segment`), plus the changes since (`delta`), both under `.memloop/cache/`.
//! It is never the source of truth: the record files are, and the index follows them.
//!
//! Cost model: a reader opens the segment's header and the delta (at most [`DELTA_MAX`] lines),
//! then reads only what a query or the session index needs, so every hook costs the same at
//! 100 and at 100,000 notes. Whether the folder changed behind memloop's back (an editor, `git
//! pull`, a branch switch) is one `stat` of the folder, compared with the stamp memloop recorded
//! after its own last change; only when they differ is the folder listed and the changed files
//! read (a reconcile), and the result is written back so the next reader starts from it. A cold
//! start (no index at all, as after `git clone`) is a reconcile of everything, bounded by the
//! caller's deadline: what was read by then is written as a partial segment that the next call
//! completes.
//!
//! Writers hold the repository's write lock (`super::store`); readers take none.

pub mod delta;
pub mod doc;
pub mod segment;

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use delta::{Change, Delta, Log, Was};
use doc::{Doc, DocMeta, Stamp};
use segment::{Posting, Segment, Writer};

use super::record::Record;
use super::search::{Terms, bm25, idf, relevance};

/// Changes the delta holds before they are merged into a new segment: enough that a merge (a
/// rewrite of the segment) is rare, few enough that every reader parses the delta quickly.
pub const DELTA_MAX: usize = 256;

/// How many of the delta's postings a merge sorts at once (about 24 MiB): a larger delta (a
/// hook's cold start) is sorted in several ranges of term hashes, a pass over its records
/// each, so the ranges are few.
const FRESH_POSTINGS_PER_RANGE: usize = 1 << 20;

/// Record files a reconcile without a deadline reads before it saves them (a merge), so a cold
/// start of 100,000 notes holds about 8 MiB of records at a time, for a dozen merges.
const COLD_BATCH: usize = 8_192;

/// A record file that is not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: PathBuf,
    pub why: String,
}

/// How far a reconcile got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Record files still to be read (the deadline came first).
    pub pending: usize,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    /// BM25 times the record's boost.
    pub score: f64,
    /// How much of the query it matched, from 0 to 1 (`search::relevance`).
    pub relevance: f64,
    pub at_ms: i64,
}

/// A record as the session index sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: String,
    pub meta: DocMeta,
}

/// The session index's view of one kind of record.
pub struct Candidates {
    /// Enough of the best records to fill any index: every record that could rank above the
    /// ones left out. `complete` says whether it is all of them.
    pub records: Vec<Candidate>,
    /// Searchable records in all.
    pub total: usize,
    /// Per importance level: how many searchable records are not in `records`.
    pub left_out: HashMap<u8, usize>,
}

pub struct Index<T: Record> {
    /// The folder of record files (`.memloop/memory/notes`).
    folder: PathBuf,
    segment_path: PathBuf,
    log: Log,
    segment: Option<Segment>,
    delta: Delta,
    /// Files reported as skipped, with the stamp they had, so each is reported once.
    skipped: HashMap<String, Stamp>,
    /// Whether this view has changes that could not be written (a read-only checkout).
    unsaved: bool,
    /// [`COLD_BATCH`] and [`FRESH_POSTINGS_PER_RANGE`], smaller in tests.
    cold_batch: usize,
    postings_per_range: usize,
    kind: PhantomData<T>,
}

impl<T: Record> Index<T> {
    /// Opens the index of the records in `folder`, kept in `cache`. Reads no record file: see
    /// [`Index::reconcile`].
    pub fn open(folder: PathBuf, cache: &Path) -> Index<T> {
        let mut index = Index {
            folder,
            segment_path: cache.join(format!("{}.seg", T::FOLDER)),
            log: Log::new(cache.join(format!("{}.delta", T::FOLDER))),
            segment: None,
            delta: Delta::default(),
            skipped: HashMap::new(),
            unsaved: false,
            cold_batch: COLD_BATCH,
            postings_per_range: FRESH_POSTINGS_PER_RANGE,
            kind: PhantomData,
        };
        index.reload();
        index
    }

    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// Reads the segment and its delta again; a missing, foreign or torn one leaves the index
    /// empty, to be rebuilt from the files by the next reconcile.
    fn reload(&mut self) {
        self.unsaved = false;
        // A merge replaces the segment, then the delta: a reader between the two sees a delta
        // of another segment and looks again.
        for _ in 0..3 {
            self.segment = Segment::open(&self.segment_path, T::FOLDER).ok();
            self.delta = Delta::new(self.segment.as_ref().map_or(0, Segment::id));
            let Some(_) = &self.segment else { return };
            match self.log.catch_up(&mut self.delta) {
                Ok(true) => return,
                Ok(false) => std::thread::sleep(std::time::Duration::from_millis(2)),
                Err(_) => break,
            }
        }
        // No usable delta for this segment: what it held is found again by listing the folder.
        self.delta = Delta::new(self.segment.as_ref().map_or(0, Segment::id));
        self.unsaved = true;
    }

    /// Takes in what other writers appended since the last look; reopens after a merge.
    pub fn catch_up(&mut self) {
        if self.unsaved || self.segment.is_none() {
            self.reload();
            return;
        }
        if !matches!(self.log.catch_up(&mut self.delta), Ok(true)) {
            self.reload();
        }
    }

    /// The folder's stamp memloop last saw it at, `None` when the index does not cover it.
    fn seen(&self) -> Option<Stamp> {
        if self.unsaved {
            return None;
        }
        self.delta
            .folder
            .or_else(|| self.segment.as_ref().and_then(Segment::folder))
    }

    fn folder_stamp(&self) -> Option<Stamp> {
        std::fs::metadata(&self.folder).ok().map(|m| Stamp::of(&m))
    }

    /// Whether the index covers the folder as it is now (one `stat`).
    pub fn is_current(&self) -> bool {
        let now = self.folder_stamp();
        match now {
            // No folder: current only when the index holds nothing either (a forgotten note
            // is not searchable, yet still held, and must go with its file).
            None => self.is_empty_view(),
            Some(now) => self.seen() == Some(now),
        }
    }

    /// Whether the view holds no record at all, searchable or not: every segment slot
    /// replaced and every change a removal.
    fn is_empty_view(&self) -> bool {
        let held = self.segment.as_ref().map_or(0, |s| s.docs() as usize);
        let gone = self
            .delta
            .replaced
            .keys()
            .filter(|slot| (**slot as usize) < held)
            .count();
        gone == held && self.delta.docs.values().all(Option::is_none)
    }

    /// The current stamp and view of every record: the segment's, with the delta over it.
    pub fn all(&self) -> anyhow::Result<Vec<(String, Stamp, DocMeta)>> {
        let mut out = Vec::new();
        self.each(|id, stamp, meta| {
            out.push((id.to_owned(), stamp, meta.clone()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` with every record of the current view, in id order, holding one chunk of the
    /// segment at a time: the segment's records (in id order by construction) merged with the
    /// delta's.
    fn each(
        &self,
        mut f: impl FnMut(&str, Stamp, &DocMeta) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut fresh = self.delta.docs.values().flatten().peekable();
        if let Some(segment) = &self.segment {
            let mut last: Option<String> = None;
            for item in segment.docs_in_order() {
                let (slot, id, stamp, meta) = item?;
                if last.as_ref().is_some_and(|last| *last >= id) {
                    anyhow::bail!("the index segment's records are out of order");
                }
                while let Some(doc) = fresh.next_if(|doc| doc.id < id) {
                    f(&doc.id, doc.stamp, &doc.meta)?;
                }
                if !self.delta.replaced.contains_key(&slot) && !self.delta.docs.contains_key(&id) {
                    f(&id, stamp, &meta)?;
                }
                last = Some(id);
            }
        }
        for doc in fresh {
            f(&doc.id, doc.stamp, &doc.meta)?;
        }
        Ok(())
    }

    /// The stamp of record `id` as indexed, `None` when the index does not hold it.
    pub fn stamp(&self, id: &str) -> anyhow::Result<Option<(Stamp, DocMeta)>> {
        if let Some(now) = self.delta.docs.get(id) {
            return Ok(now.as_ref().map(|d| (d.stamp, d.meta.clone())));
        }
        let Some(segment) = &self.segment else {
            return Ok(None);
        };
        match segment.find(id)? {
            Some(slot) if !self.delta.replaced.contains_key(&slot) => {
                let (_, stamp, meta) = segment.doc(slot)?;
                Ok(Some((stamp, meta)))
            }
            _ => Ok(None),
        }
    }

    /// Searchable records.
    pub fn total(&self) -> usize {
        self.live().0 as usize
    }

    /// BM25's statistics over the current view: searchable records and their total length.
    fn live(&self) -> (u64, u64) {
        let (mut n, mut len) = self
            .segment
            .as_ref()
            .map_or((0, 0), |s| (u64::from(s.live().0), s.live().1));
        for was in self.delta.replaced.values().filter(|w| w.searchable) {
            n = n.saturating_sub(1);
            len = len.saturating_sub(u64::from(was.len));
        }
        for doc in self.delta.docs.values().flatten() {
            if doc.meta.searchable {
                n += 1;
                len += u64::from(doc.meta.len);
            }
        }
        (n, len)
    }

    /// The file sizes of the searchable records, summed (what `[memory] max_bytes` limits),
    /// from the segment's header and the delta: no record file and no docs table is read.
    pub fn live_bytes(&self) -> u64 {
        let mut bytes = self.segment.as_ref().map_or(0, Segment::live_bytes);
        for was in self.delta.replaced.values().filter(|w| w.searchable) {
            bytes = bytes.saturating_sub(was.bytes);
        }
        for doc in self.delta.docs.values().flatten() {
            if doc.meta.searchable {
                bytes += doc.stamp.size;
            }
        }
        bytes
    }

    /// About how many searchable records hold the term `hash` (the segment's count, which
    /// records replaced since may still be in, plus the delta's): enough to tell a rare word
    /// from a common one without reading postings.
    pub fn df(&self, hash: u64) -> anyhow::Result<usize> {
        let stored = match &self.segment {
            Some(segment) => segment.count(hash)? as usize,
            None => 0,
        };
        let fresh = self
            .delta
            .docs
            .values()
            .flatten()
            .filter(|d| d.meta.searchable && d.terms.iter().any(|(h, _)| *h == hash))
            .count();
        Ok(stored + fresh)
    }

    /// The ids of the searchable records that hold the term `hash` (a key's term, which only
    /// a few records hold).
    pub fn holding(&self, hash: u64) -> anyhow::Result<Vec<String>> {
        let mut ids = Vec::new();
        if let Some(segment) = &self.segment {
            for posting in segment.postings(hash)? {
                if !self.delta.replaced.contains_key(&posting.slot) {
                    ids.push(segment.doc(posting.slot)?.0);
                }
            }
        }
        for doc in self.delta.docs.values().flatten() {
            if doc.meta.searchable && doc.terms.iter().any(|(h, _)| *h == hash) {
                ids.push(doc.id.clone());
            }
        }
        Ok(ids)
    }

    /// The best `limit` searchable records for the query terms `hashes` (the first `asked` of
    /// them what the query asked, the rest what synonyms added), by BM25 times the
    /// record's boost, plus any tied with the last of them, best first (ties: newer, then id).
    pub fn search(&self, hashes: &[u64], asked: usize, limit: usize) -> anyhow::Result<Vec<Hit>> {
        let (n, total_len) = self.live();
        if n == 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let n = n as f64;
        let avg_len = total_len as f64 / n;
        // Dense, as in any BM25 engine: a broad query touches a good share of the records, and
        // a hash map per touched record costs more than zeroing one number per record.
        let slots = self.segment.as_ref().map_or(0, Segment::docs) as usize;
        let mut slot_scores = vec![0.0f64; slots];
        let mut touched: Vec<u32> = Vec::new();
        let mut doc_scores: HashMap<&str, f64> = HashMap::new();
        // What a record holding every asked word once would score (words the memory lacks
        // count too: a query half made of unknown words is half matched at best).
        let mut ideal = 0.0;
        for (i, &hash) in hashes.iter().enumerate() {
            let postings = match &self.segment {
                Some(segment) => segment.postings(hash)?,
                None => Vec::new(),
            };
            let live: Vec<_> = postings
                .into_iter()
                .filter(|p| !self.delta.replaced.contains_key(&p.slot))
                .collect();
            let fresh: Vec<(&Doc, u32)> = self
                .delta
                .docs
                .values()
                .flatten()
                .filter(|d| d.meta.searchable)
                .filter_map(|d| {
                    d.terms
                        .iter()
                        .find(|(h, _)| *h == hash)
                        .map(|(_, tf)| (d, *tf))
                })
                .collect();
            let df = (live.len() + fresh.len()) as f64;
            let idf = idf(n, df);
            // The words the synonym table added score, but are no part of what was asked.
            if i < asked {
                ideal += idf;
            }
            if df == 0.0 {
                continue;
            }
            for p in live {
                let Some(total) = slot_scores.get_mut(p.slot as usize) else {
                    anyhow::bail!("index posting out of range");
                };
                // Every part is positive, so zero means "not touched yet".
                if *total == 0.0 {
                    touched.push(p.slot);
                }
                let score = bm25(idf, f64::from(p.tf), f64::from(p.len), avg_len);
                *total += score * T::boost_of(p.importance);
            }
            for (doc, tf) in fresh {
                let score = bm25(idf, f64::from(tf), f64::from(doc.meta.len), avg_len);
                *doc_scores.entry(&doc.id).or_default() += score * T::boost_of(doc.meta.importance);
            }
        }
        enum Key<'a> {
            Slot(u32),
            Doc(&'a str),
        }
        let mut scored: Vec<(Key, f64)> = touched
            .into_iter()
            .map(|slot| (Key::Slot(slot), slot_scores[slot as usize]))
            .chain(doc_scores.into_iter().map(|(id, s)| (Key::Doc(id), s)))
            .collect();
        if scored.len() > limit {
            scored.select_nth_unstable_by(limit - 1, |a, b| b.1.total_cmp(&a.1));
            let last = scored[limit - 1].1;
            let mut kept = limit;
            for i in limit..scored.len() {
                if scored[i].1 == last {
                    scored.swap(kept, i);
                    kept += 1;
                }
            }
            scored.truncate(kept);
        }
        let mut hits = Vec::with_capacity(scored.len());
        for (key, score) in scored {
            let (id, meta) = match key {
                Key::Slot(slot) => {
                    let segment = self.segment.as_ref().context("index segment vanished")?;
                    let (id, _, meta) = segment.doc(slot)?;
                    (id, meta)
                }
                Key::Doc(id) => {
                    let doc = self.delta.docs.get(id).and_then(Option::as_ref);
                    (
                        id.to_owned(),
                        doc.context("index delta vanished")?.meta.clone(),
                    )
                }
            };
            let relevance = relevance(score / T::boost_of(meta.importance), ideal);
            hits.push(Hit {
                id,
                score,
                relevance,
                at_ms: meta.at_ms,
            });
        }
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| b.at_ms.cmp(&a.at_ms))
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(hits)
    }

    /// The records the session index chooses from: the segment's short region and the delta,
    /// or every record when the short region cannot vouch for the head of the ranking.
    pub fn candidates(&self, full: bool) -> anyhow::Result<Candidates> {
        let total = self.total();
        if full || self.segment.is_none() {
            let mut records = Vec::new();
            self.each(|id, _, meta| {
                if meta.searchable {
                    records.push(Candidate {
                        id: id.to_owned(),
                        meta: meta.clone(),
                    });
                }
                Ok(())
            })?;
            return Ok(Candidates {
                records,
                total,
                left_out: HashMap::new(),
            });
        }
        let segment = self.segment.as_ref().context("index segment vanished")?;
        let short = segment.short()?;
        let mut left_out: HashMap<u8, usize> = HashMap::new();
        let mut kept_per_level: HashMap<u8, usize> = HashMap::new();
        let mut records = Vec::new();
        for record in short.records {
            *kept_per_level.entry(record.meta.importance).or_default() += 1;
            if self.delta.replaced.contains_key(&record.slot)
                || self.delta.docs.contains_key(&record.id)
            {
                continue;
            }
            records.push(Candidate {
                id: record.id,
                meta: record.meta,
            });
        }
        for (level, count) in short.per_level.iter().enumerate() {
            let kept = kept_per_level.get(&(level as u8)).copied().unwrap_or(0);
            if (*count as usize) > kept {
                left_out.insert(level as u8, *count as usize - kept);
            }
        }
        for doc in self.delta.docs.values().flatten() {
            if doc.meta.searchable {
                records.push(Candidate {
                    id: doc.id.clone(),
                    meta: doc.meta.clone(),
                });
            }
        }
        Ok(Candidates {
            records,
            total,
            left_out,
        })
    }

    /// Brings the index in line with the folder: lists it when its stamp moved (or always, with
    /// `verify`, which also compares each file's stamp to catch edits made in place), reads the
    /// new and changed files newest first until `deadline`, and, when `writable`, saves what it
    /// found for the next reader (the caller holds the write lock). Files that cannot be read
    /// are reported through `warn` once each and left out.
    pub fn reconcile(
        &mut self,
        verify: bool,
        deadline: Option<Instant>,
        writable: bool,
        warn: &mut dyn FnMut(Skipped),
    ) -> anyhow::Result<Progress> {
        let before = self.folder_stamp();
        if !verify && before.is_some() && before == self.seen() {
            return Ok(Progress::default());
        }
        let mut listing = match before {
            Some(_) => list(&self.folder, verify, writable)?,
            None => Vec::new(),
        };
        // In id order, to walk beside the index's records (also in id order) without holding
        // either as a map.
        listing.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let skipped = &self.skipped;
        let needs_reading = |entry: &Listed, known: Option<Stamp>| {
            let same = match (known, entry.stamp()) {
                (Some(known), Some(stamp)) => known == stamp,
                (Some(known), None) => Some(known.ino) == entry.ino,
                (None, _) => false,
            };
            let reported = match (skipped.get(&*entry.id), entry.ino) {
                (Some(stamp), Some(ino)) => {
                    stamp.ino == ino && entry.stamp().is_none_or(|s| s == *stamp)
                }
                _ => false,
            };
            !same && !reported
        };
        let mut to_read: Vec<&Listed> = Vec::new();
        let mut known: HashSet<&str> = HashSet::new();
        let mut changes: Vec<Change> = Vec::new();
        let mut next = 0;
        let walked = self.each(|id, stamp, _| {
            while let Some(entry) = listing.get(next).filter(|e| &*e.id < id) {
                if needs_reading(entry, None) {
                    to_read.push(entry);
                }
                next += 1;
            }
            match listing.get(next).filter(|e| &*e.id == id) {
                Some(entry) => {
                    if needs_reading(entry, Some(stamp)) {
                        to_read.push(entry);
                        known.insert(&*entry.id);
                    }
                    next += 1;
                }
                None => changes.push(Change::Del(id.to_owned())),
            }
            Ok(())
        });
        for entry in &listing[next.min(listing.len())..] {
            if needs_reading(entry, None) {
                to_read.push(entry);
            }
        }
        if walked.is_err() {
            // An index that cannot be read through is not trusted: rebuilt from the files.
            self.segment = None;
            self.delta = Delta::new(0);
            self.unsaved = true;
            known.clear();
            changes.clear();
            to_read = listing.iter().filter(|e| needs_reading(e, None)).collect();
        }
        // Newest first: ids start with their creation time, and a cut-short cold start should
        // give the most recent knowledge first.
        to_read.reverse();
        let folder_real = std::fs::canonicalize(&self.folder).ok();
        // Without a deadline (a server's start, the command line) a cold start reads every
        // file: it is saved a batch at a time, so what it holds stays a batch, not the index.
        let batch = if deadline.is_none() && writable {
            self.cold_batch
        } else {
            to_read.len().max(1)
        };
        let mut pending = to_read.len();
        let mut batches = to_read.chunks(batch).peekable();
        loop {
            let entries = batches.next().unwrap_or(&[]);
            let read = read_all::<T>(&self.folder, folder_real.as_deref(), entries, deadline);
            pending -= read.len();
            let last = batches.peek().is_none() || read.len() < entries.len();
            for (entry, result) in entries.iter().zip(read) {
                match result {
                    Ok(doc) => {
                        self.skipped.remove(&*entry.id);
                        changes.push(Change::Put(doc));
                    }
                    Err((stamp, skipped)) => {
                        if let Some(stamp) = stamp {
                            self.skipped.insert(entry.id.to_string(), stamp);
                        }
                        if known.contains(&*entry.id) {
                            changes.push(Change::Del(entry.id.to_string()));
                        }
                        warn(skipped);
                    }
                }
            }
            // The stamp taken before listing: a change made during the listing moves the
            // folder again, and the next look lists once more.
            let folder = if last && pending == 0 { before } else { None };
            self.commit(std::mem::take(&mut changes), folder, writable)?;
            if last {
                break;
            }
        }
        Ok(Progress { pending })
    }

    /// Records `changes` (and the folder's stamp after them, when the index then covers the
    /// whole folder): in the delta, or by merging into a new segment when the delta would grow
    /// past [`DELTA_MAX`]; only in memory when not `writable`.
    pub fn commit(
        &mut self,
        changes: Vec<Change>,
        folder: Option<Stamp>,
        writable: bool,
    ) -> anyhow::Result<()> {
        if changes.is_empty() && folder.is_none_or(|f| Some(f) == self.seen()) {
            return Ok(());
        }
        let mut with_was = Vec::with_capacity(changes.len());
        for change in changes {
            let was = self.was(change.id())?;
            with_was.push((change, was));
        }
        if !writable {
            for (change, was) in with_was {
                self.delta.apply_change(change, was);
            }
            self.unsaved = true;
            return Ok(());
        }
        if self.segment.is_none() || self.unsaved || self.delta.lines + with_was.len() > DELTA_MAX {
            for (change, was) in with_was {
                self.delta.apply_change(change, was);
            }
            return self.merge(folder);
        }
        self.log.append(&mut self.delta, with_was, folder)
    }

    /// What of the segment a change to `id` replaces.
    fn was(&self, id: &str) -> anyhow::Result<Option<Was>> {
        let Some(segment) = &self.segment else {
            return Ok(None);
        };
        let Some(slot) = segment.find(id)? else {
            return Ok(None);
        };
        let (_, stamp, meta) = segment.doc(slot)?;
        Ok(Some(Was {
            slot,
            len: meta.len,
            searchable: meta.searchable,
            bytes: stamp.size,
        }))
    }

    /// Writes the current view as a new segment with an empty delta, streaming: the old
    /// segment's records and postings are read a chunk or a term at a time and written
    /// straight out, so a merge at 100,000 notes holds a few megabytes, not the index.
    fn merge(&mut self, folder: Option<Stamp>) -> anyhow::Result<()> {
        let fresh = std::mem::take(&mut self.delta.docs);
        let written = self.write_segment(fresh, folder);
        // Whatever happened, what this view holds is read again; after a failure the folder
        // is listed again at the next look, so nothing taken from the delta is lost.
        self.reload();
        if written.is_err() {
            self.unsaved = true;
        }
        written
    }

    fn write_segment(
        &mut self,
        fresh: std::collections::BTreeMap<String, Option<Doc>>,
        folder: Option<Stamp>,
    ) -> anyhow::Result<()> {
        let mut writer = Writer::new(&self.segment_path, T::FOLDER)?;
        let old = self.segment.as_ref();
        // Old slot -> new slot, `u32::MAX` for a record left out.
        let mut remap = vec![u32::MAX; old.map_or(0, |s| s.docs() as usize)];
        // The delta's records in id order, and the slot each gets.
        let fresh_docs: Vec<&Doc> = fresh.values().flatten().collect();
        let mut fresh_slots: Vec<u32> = Vec::with_capacity(fresh_docs.len());
        let mut next_fresh = fresh_docs.iter().peekable();
        if let Some(old) = old {
            for item in old.docs_in_order() {
                let (slot, id, stamp, meta) = item?;
                while let Some(doc) = next_fresh.next_if(|doc| doc.id < id) {
                    fresh_slots.push(writer.doc(&doc.id, doc.stamp, &doc.meta)?);
                }
                if !self.delta.replaced.contains_key(&slot) && !fresh.contains_key(&id) {
                    remap[slot as usize] = writer.doc(&id, stamp, &meta)?;
                }
            }
        }
        for doc in next_fresh {
            fresh_slots.push(writer.doc(&doc.id, doc.stamp, &doc.meta)?);
        }
        let mut old_terms = match old {
            Some(old) => old.terms()?,
            None => Vec::new(),
        }
        .into_iter()
        .peekable();
        // The delta's postings are sorted by term in ranges of hashes, one range at a time, so
        // a large delta (a cold start) holds a part of its postings beside its records, never
        // a second copy of all of them.
        let fresh_terms: usize = fresh_docs.iter().map(|d| d.terms.len()).sum();
        let ranges = (fresh_terms / self.postings_per_range.max(1) + 1).next_power_of_two() as u128;
        let mut list: Vec<Posting> = Vec::new();
        let mut in_range: Vec<(u64, Posting)> = Vec::new();
        for range in 0..ranges {
            // Hashes in [low, high).
            let (low, high) = ((range << 64) / ranges, ((range + 1) << 64) / ranges);
            in_range.clear();
            for (doc, &slot) in fresh_docs.iter().zip(&fresh_slots) {
                if !doc.meta.searchable {
                    continue;
                }
                for &(hash, tf) in &doc.terms {
                    let hash = segment::nonzero(hash);
                    if (low..high).contains(&u128::from(hash)) {
                        in_range.push((
                            hash,
                            Posting {
                                slot,
                                len: doc.meta.len,
                                tf: tf.min(u32::from(u16::MAX)) as u16,
                                importance: doc.meta.importance,
                            },
                        ));
                    }
                }
            }
            // Stable: within a term, the postings stay in slot order.
            in_range.sort_by_key(|(hash, _)| *hash);
            let mut fresh_postings = in_range.iter().peekable();
            loop {
                // The next term of the range, from the old segment or the delta, whichever
                // hash is lower.
                let old_next = old_terms
                    .peek()
                    .map(|t| t.0)
                    .filter(|h| u128::from(*h) < high);
                let hash = match (old_next, fresh_postings.peek()) {
                    (Some(o), Some(f)) => o.min(f.0),
                    (Some(o), None) => o,
                    (None, Some(f)) => f.0,
                    (None, None) => break,
                };
                list.clear();
                if let (Some(old), Some((_, first, count))) =
                    (old, old_terms.next_if(|(h, _, _)| *h == hash))
                {
                    old.postings_at(first, count, &mut list)?;
                    list.retain_mut(|posting| match remap.get(posting.slot as usize) {
                        Some(&slot) if slot != u32::MAX => {
                            posting.slot = slot;
                            true
                        }
                        _ => false,
                    });
                }
                while let Some((_, posting)) = fresh_postings.next_if(|(h, _)| *h == hash) {
                    list.push(*posting);
                }
                writer.term(hash, &list)?;
            }
        }
        let id = writer.finish(folder)?;
        self.log.reset(id)
    }
}

/// What reading one record file gave: its doc, or why it was left out (with its stamp).
type Read = Result<Doc, (Option<Stamp>, Skipped)>;

/// Reads and indexes the files of `entries` in order, on as many threads as the machine has
/// (at most 4), until `deadline`: the results are a prefix of `entries`, so a cold start cut
/// short keeps the newest notes and the next call reads on from there.
fn read_all<T: Record>(
    folder: &Path,
    folder_real: Option<&Path>,
    entries: &[&Listed],
    deadline: Option<Instant>,
) -> Vec<Read> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(entries.len().div_ceil(64).max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, Read)>> = Mutex::new(Vec::with_capacity(entries.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut terms = Terms::default();
                let mut mine = Vec::new();
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(entry) = entries.get(i) else { break };
                    // The first few are read whatever the clock says: every call makes progress.
                    if i > 0
                        && i.is_multiple_of(16)
                        && deadline.is_some_and(|d| Instant::now() >= d)
                    {
                        stop.store(true, Ordering::Relaxed);
                        // Left to the next call, with everything after it.
                        next.fetch_min(i, Ordering::Relaxed);
                        break;
                    }
                    let path = folder.join(format!("{}.md", entry.id));
                    let result = match read_listed::<T>(&path, folder_real, entry.regular) {
                        Ok((stamp, record)) => Ok(Doc::of(&entry.id, stamp, &record, &mut terms)),
                        Err(why) => Err((
                            std::fs::symlink_metadata(&path).ok().map(|m| Stamp::of(&m)),
                            Skipped { file: path, why },
                        )),
                    };
                    mine.push((i, result));
                }
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .extend(mine);
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    // Only the unbroken prefix counts: what a thread read past another's stop is read again.
    let prefix = results
        .iter()
        .enumerate()
        .take_while(|(at, (i, _))| at == i)
        .count();
    results.truncate(prefix);
    results.into_iter().map(|(_, r)| r).collect()
}

/// A record file as the folder lists it. Packed (64 bytes, not 112): a server's start holds
/// one per note.
struct Listed {
    id: Box<str>,
    /// The listing says it is a regular file (no symlink, FIFO, device or folder).
    regular: bool,
    /// With `verify`: the other fields hold its stamp (a `stat` per file).
    stamped: bool,
    ino: Option<u64>,
    stamp_ino: u64,
    mtime_ns: i64,
    size: u64,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Listed>() <= 64);

impl Listed {
    fn stamp(&self) -> Option<Stamp> {
        self.stamped.then_some(Stamp {
            ino: self.stamp_ino,
            mtime_ns: i128::from(self.mtime_ns),
            size: self.size,
        })
    }
}

/// Lists the record files of `folder`; `clean` (the caller holds the write lock) removes temp
/// files, which only a writer that crashed can have left, since writers hold the lock while
/// theirs exists.
fn list(folder: &Path, verify: bool, clean: bool) -> anyhow::Result<Vec<Listed>> {
    let listing = match std::fs::read_dir(folder) {
        Ok(listing) => listing,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(err).with_context(|| format!("could not list {}", folder.display()));
        }
    };
    let mut out = Vec::new();
    for entry in listing {
        let entry = entry.with_context(|| format!("could not list {}", folder.display()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if crate::files::is_temp_name(name) {
            if clean {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        let Some(id) = name.strip_suffix(".md") else {
            continue;
        };
        if id.is_empty() || id.starts_with('.') {
            continue;
        }
        let stamp = if verify {
            std::fs::symlink_metadata(entry.path())
                .ok()
                .map(|m| Stamp::of(&m))
        } else {
            None
        };
        let Stamp {
            ino: stamp_ino,
            mtime_ns,
            size,
        } = stamp.unwrap_or_default();
        out.push(Listed {
            id: id.into(),
            regular: entry.file_type().is_ok_and(|t| t.is_file()),
            stamped: stamp.is_some(),
            ino: entry_inode(&entry).or(stamp.map(|s| s.ino)),
            stamp_ino,
            // `Stamp::of` keeps nanoseconds in 64 bits.
            mtime_ns: mtime_ns as i64,
            size,
        });
    }
    Ok(out)
}

/// Without a stat call where the platform gives the inode in the directory listing.
fn entry_inode(entry: &std::fs::DirEntry) -> Option<u64> {
    #[cfg(unix)]
    {
        Some(std::os::unix::fs::DirEntryExt::ino(entry))
    }
    #[cfg(not(unix))]
    {
        let _ = entry;
        None
    }
}

/// The largest record file read: a note is a few hundred bytes; anything near this is not one.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;

/// Reads one record file, or says why it is left out: not a regular file (a FIFO, a device, a
/// folder), a symlink to anything outside the records folder, larger than
/// [`MAX_RECORD_BYTES`], not text, or not a record. Its stamp is the link's own for a symlink,
/// so a retargeted link counts as changed.
pub fn read_record<T: Record>(
    path: &Path,
    folder_real: Option<&Path>,
) -> Result<(Stamp, T), String> {
    read_listed(path, folder_real, false)
}

/// [`read_record`]; `regular` says the folder's listing named it a regular file, which allows
/// the common case in four calls (open, fstat, read, close): opened without following a link
/// and without blocking, so a FIFO swapped in meanwhile cannot hold the read. Anything else is
/// looked at before it is opened, so a device is never opened at all.
fn read_listed<T: Record>(
    path: &Path,
    folder_real: Option<&Path>,
    regular: bool,
) -> Result<(Stamp, T), String> {
    #[cfg(unix)]
    if regular && let Ok((file, meta)) = crate::files::open_listed_regular(path) {
        return read_open::<T>(file, &meta);
    }
    let link =
        std::fs::symlink_metadata(path).map_err(|err| format!("could not read it: {err}"))?;
    if link.file_type().is_symlink() {
        let target = std::fs::canonicalize(path)
            .map_err(|err| format!("a symlink that does not resolve ({err})"))?;
        if folder_real.is_none_or(|folder| !target.starts_with(folder)) {
            return Err(format!(
                "a symlink to {}, outside the notes folder; memloop reads only notes inside it",
                target.display()
            ));
        }
    }
    let meta = std::fs::metadata(path).map_err(|err| format!("could not read it: {err}"))?;
    if !meta.is_file() {
        return Err(format!(
            "{}, not a note file",
            crate::files::describe_kind(&meta.file_type())
        ));
    }
    if meta.len() > MAX_RECORD_BYTES {
        return Err(too_large(meta.len()));
    }
    let file =
        crate::files::open_regular(path).map_err(|err| format!("could not open it: {err}"))?;
    let meta = file
        .metadata()
        .map_err(|err| format!("could not read it: {err}"))?;
    let (_, record) = read_open::<T>(file, &meta)?;
    // A link's own stamp: a retargeted link counts as changed.
    Ok((Stamp::of(&link), record))
}

fn too_large(bytes: u64) -> String {
    format!("{bytes} bytes, more than the {MAX_RECORD_BYTES} a note may have")
}

/// Reads a record from an open regular file whose metadata is `meta`.
fn read_open<T: Record>(
    file: std::fs::File,
    meta: &std::fs::Metadata,
) -> Result<(Stamp, T), String> {
    use std::io::Read as _;
    if meta.len() > MAX_RECORD_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("could not read it: {err}"))?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    if bytes.contains(&0) {
        return Err("binary, not a note".into());
    }
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let record = T::parse(&text).map_err(|err| format!("{err:#}"))?;
    Ok((Stamp::of(meta), record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::record::Note;
    use crate::memory::search::query_hashes;

    const WORDS: &[&str] = &[
        "cache", "lock", "retry", "queue", "worker", "deploy", "parser", "config", "hook", "gate",
        "branch", "merge", "release", "binary", "vat", "invoice",
    ];

    /// `count` notes by hand in a fresh folder, a few forgotten.
    fn folder_of_notes(count: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("notes");
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        for i in 0..count {
            let words: Vec<&str> = (0..6)
                .map(|k| WORDS[(i * 7 + k * (i % 5 + 1)) % WORDS.len()])
                .collect();
            let note = Note {
                content: format!("{} sentinel{i}", words.join(" ")),
                category: "gotchas".into(),
                importance: (i % 10 + 1) as u8,
                tags: vec!["hand".into(), WORDS[i % WORDS.len()].into()],
                task_id: None,
                created: format!(
                    "2026-11-{:02}T10:{:02}:{:02}.000Z",
                    i % 28 + 1,
                    i / 60 % 60,
                    i % 60
                ),
                forgotten: (i % 13 == 0).then(|| "true".to_owned()),
                about: Vec::new(),
                commit: None,
                key: None,
                updated: None,
                extra: Vec::new(),
            };
            std::fs::write(notes.join(format!("n-{i:05}.md")), note.render()).unwrap();
        }
        dir
    }

    /// Builds the index of `dir`'s notes from nothing, with the given batch and range sizes.
    fn built(dir: &Path, cache: &str, cold_batch: usize, per_range: usize) -> Index<Note> {
        let cache = dir.join(cache);
        std::fs::create_dir_all(&cache).unwrap();
        let mut index = Index::<Note>::open(dir.join("notes"), &cache);
        index.cold_batch = cold_batch;
        index.postings_per_range = per_range;
        let progress = index
            .reconcile(true, None, true, &mut |s| panic!("skipped {s:?}"))
            .unwrap();
        assert_eq!(progress.pending, 0);
        index
    }

    /// Every record, and each query's answers as (id, score).
    type View = (Vec<(String, Stamp, DocMeta)>, Vec<Vec<(String, u64)>>);

    fn view(index: &Index<Note>) -> View {
        let mut queries: Vec<String> = WORDS.iter().map(|w| (*w).to_owned()).collect();
        queries.push("cache lock retry deploy".into());
        queries.push("sentinel77".into());
        let answers = queries
            .iter()
            .map(|q| {
                let hashes = query_hashes(q);
                index
                    .search(&hashes.hashes, hashes.asked, 10)
                    .unwrap()
                    .into_iter()
                    .map(|h| (h.id, h.score.to_bits()))
                    .collect()
            })
            .collect();
        (index.all().unwrap(), answers)
    }

    #[test]
    fn a_build_saved_in_batches_and_merged_in_hash_ranges_equals_one_built_at_once() {
        let dir = folder_of_notes(300);
        let at_once = built(dir.path(), "once", usize::MAX, usize::MAX);
        let in_parts = built(dir.path(), "parts", 37, 50);
        let (records, answers) = view(&at_once);
        assert_eq!(records.len(), 300);
        assert!(answers.iter().all(|a| !a.is_empty()));
        assert_eq!(view(&in_parts), (records, answers));
        // Batches of 37 out of 300: eight merges, the last four records in the delta.
        assert_eq!(in_parts.segment.as_ref().map(Segment::docs), Some(296));
        assert_eq!(in_parts.delta.docs.len(), 4);
        // And again after changes merged through the delta, in ranges.
        let mut in_parts = in_parts;
        let notes = dir.path().join("notes");
        for i in (0..300).step_by(3) {
            std::fs::remove_file(notes.join(format!("n-{i:05}.md"))).unwrap();
        }
        in_parts.reconcile(true, None, true, &mut |_| {}).unwrap();
        let rebuilt = built(dir.path(), "again", usize::MAX, usize::MAX);
        assert_eq!(view(&in_parts), view(&rebuilt));
        assert_eq!(in_parts.all().unwrap().len(), 200);
    }

    #[test]
    fn a_missing_folder_is_current_only_for_an_index_that_holds_nothing() {
        let dir = folder_of_notes(3);
        let mut index = built(dir.path(), "cache", usize::MAX, usize::MAX);
        assert!(index.is_current());
        // Every note forgotten: none searchable, all still held.
        let notes = dir.path().join("notes");
        let forgotten: Vec<Change> = index
            .all()
            .unwrap()
            .into_iter()
            .map(|(id, stamp, meta)| {
                Change::Put(Doc {
                    id,
                    stamp,
                    meta: DocMeta {
                        searchable: false,
                        ..meta
                    },
                    terms: Vec::new(),
                })
            })
            .collect();
        index.commit(forgotten, None, true).unwrap();
        assert_eq!(index.total(), 0);
        std::fs::remove_dir_all(&notes).unwrap();
        assert!(!index.is_current(), "it still holds three forgotten notes");
        index.reconcile(false, None, true, &mut |_| {}).unwrap();
        assert!(index.all().unwrap().is_empty());
        assert!(index.is_current());
    }
}
