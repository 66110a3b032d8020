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
use segment::{ByTerm, Entry, Segment};

use super::record::Record;
use super::search::{Terms, bm25, idf, relevance};

/// Changes the delta holds before they are merged into a new segment: enough that a merge (a
/// rewrite of the segment) is rare, few enough that every reader parses the delta quickly.
pub const DELTA_MAX: usize = 256;

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
            None => self.total() == 0 && self.segment.is_some() || self.is_empty_view(),
            Some(now) => self.seen() == Some(now),
        }
    }

    fn is_empty_view(&self) -> bool {
        self.segment.as_ref().is_none_or(|s| s.docs() == 0) && self.delta.docs.is_empty()
    }

    /// The current stamp and view of every record: the segment's, with the delta over it.
    pub fn all(&self) -> anyhow::Result<Vec<(String, Stamp, DocMeta)>> {
        let mut out: Vec<(String, Stamp, DocMeta)> = Vec::new();
        if let Some(segment) = &self.segment {
            for (slot, (id, stamp, meta)) in segment.all_docs()?.into_iter().enumerate() {
                if !self.delta.replaced.contains_key(&(slot as u32))
                    && !self.delta.docs.contains_key(&id)
                {
                    out.push((id, stamp, meta));
                }
            }
        }
        for doc in self.delta.docs.values().flatten() {
            out.push((doc.id.clone(), doc.stamp, doc.meta.clone()));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
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
            let records: Vec<Candidate> = self
                .all()?
                .into_iter()
                .filter(|(_, _, meta)| meta.searchable)
                .map(|(id, _, meta)| Candidate { id, meta })
                .collect();
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
        let known: HashMap<String, Stamp> = self
            .all()?
            .into_iter()
            .map(|(id, stamp, _)| (id, stamp))
            .collect();
        let listing = match before {
            Some(_) => list(&self.folder, verify, writable)?,
            None => Vec::new(),
        };
        let mut present: HashSet<&str> = HashSet::with_capacity(listing.len());
        let mut to_read: Vec<&Listed> = Vec::new();
        for entry in &listing {
            present.insert(&entry.id);
            let same = match (known.get(&entry.id), entry.stamp) {
                (Some(known), Some(stamp)) => *known == stamp,
                (Some(known), None) => Some(known.ino) == entry.ino,
                (None, _) => false,
            };
            let reported = match (self.skipped.get(&entry.id), entry.ino) {
                (Some(stamp), Some(ino)) => {
                    stamp.ino == ino && entry.stamp.is_none_or(|s| s == *stamp)
                }
                _ => false,
            };
            if !same && !reported {
                to_read.push(entry);
            }
        }
        let mut changes: Vec<Change> = known
            .keys()
            .filter(|id| !present.contains(id.as_str()))
            .map(|id| Change::Del(id.clone()))
            .collect();
        // Newest first: ids start with their creation time, and a cut-short cold start should
        // give the most recent knowledge first.
        to_read.sort_by(|a, b| b.id.cmp(&a.id));
        let folder_real = std::fs::canonicalize(&self.folder).ok();
        let read = read_all::<T>(&self.folder, folder_real.as_deref(), &to_read, deadline);
        let done = read.len();
        for (entry, result) in to_read.iter().zip(read) {
            match result {
                Ok(doc) => {
                    self.skipped.remove(&entry.id);
                    changes.push(Change::Put(doc));
                }
                Err((stamp, skipped)) => {
                    if let Some(stamp) = stamp {
                        self.skipped.insert(entry.id.clone(), stamp);
                    }
                    if known.contains_key(&entry.id) {
                        changes.push(Change::Del(entry.id.clone()));
                    }
                    warn(skipped);
                }
            }
        }
        let pending = to_read.len() - done;
        // The stamp taken before listing: a change made during the listing moves the folder
        // again, and the next look lists once more.
        let folder = if pending == 0 { before } else { None };
        self.commit(changes, folder, writable)?;
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

    /// Writes the current view as a new segment with an empty delta.
    fn merge(&mut self, folder: Option<Stamp>) -> anyhow::Result<()> {
        struct Kept {
            id: String,
            stamp: Stamp,
            meta: DocMeta,
            /// Its slot in the old segment, or its terms when it comes from the delta.
            from: Result<u32, Vec<(u64, u32)>>,
        }
        let mut kept: Vec<Kept> = Vec::new();
        let mut old_postings = Vec::new();
        if let Some(segment) = &self.segment {
            for (slot, (id, stamp, meta)) in segment.all_docs()?.into_iter().enumerate() {
                let slot = slot as u32;
                if !self.delta.replaced.contains_key(&slot) && !self.delta.docs.contains_key(&id) {
                    kept.push(Kept {
                        id,
                        stamp,
                        meta,
                        from: Ok(slot),
                    });
                }
            }
            old_postings = segment.all_postings()?;
        }
        for doc in std::mem::take(&mut self.delta.docs).into_values().flatten() {
            kept.push(Kept {
                id: doc.id,
                stamp: doc.stamp,
                meta: doc.meta,
                from: Err(doc.terms),
            });
        }
        kept.sort_by(|a, b| a.id.cmp(&b.id));
        let mut remap: HashMap<u32, u32> = HashMap::with_capacity(kept.len());
        let mut by_term = ByTerm::new();
        for (slot, record) in kept.iter().enumerate() {
            match &record.from {
                Ok(old) => {
                    remap.insert(*old, slot as u32);
                }
                Err(terms) => segment::add_postings(&mut by_term, slot as u32, &record.meta, terms),
            }
        }
        // In place: at 100,000 notes the postings are tens of megabytes, held once.
        for (hash, mut list) in old_postings {
            list.retain_mut(|posting| match remap.get(&posting.slot) {
                Some(&slot) => {
                    posting.slot = slot;
                    true
                }
                None => false,
            });
            match by_term.entry(hash) {
                std::collections::hash_map::Entry::Occupied(mut fresh) => {
                    list.append(fresh.get_mut());
                    *fresh.get_mut() = list;
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(list);
                }
            }
        }
        let entries: Vec<Entry<'_>> = kept
            .iter()
            .map(|k| Entry {
                id: &k.id,
                doc: &k.meta,
                stamp: k.stamp,
            })
            .collect();
        let id = Segment::write(&self.segment_path, T::FOLDER, &entries, &by_term, folder)?;
        self.log.reset(id)?;
        self.reload();
        Ok(())
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

/// A record file as the folder lists it.
struct Listed {
    id: String,
    /// The listing says it is a regular file (no symlink, FIFO, device or folder).
    regular: bool,
    ino: Option<u64>,
    /// With `verify`: its stamp (a `stat` per file).
    stamp: Option<Stamp>,
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
        out.push(Listed {
            id: id.to_owned(),
            regular: entry.file_type().is_ok_and(|t| t.is_file()),
            ino: entry_inode(&entry).or(stamp.map(|s| s.ino)),
            stamp,
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
