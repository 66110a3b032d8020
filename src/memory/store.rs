//! The notes and routes of one repository: the files under `.memloop/memory/` (the source of
//! truth) and their derived index under `.memloop/cache/` (`super::index`).
//!
//! Writers (this process, another agent's server, `memloop memory forget`) take the
//! repository's write lock, bring their view up to date, write one file atomically, record the
//! change in the index and bump a generation counter. Readers take no lock: before each query
//! they compare a cheap signature (the counter plus the folders' stamps) and look again only
//! when it moved.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};

use super::budget::{Budget, refusal};
use super::duplicate::{Profile, difference, same_fact};
use super::ids::{new_id, now_millis, timestamp};
use super::index::delta::Change as IndexChange;
use super::index::doc::{Doc, DocMeta, Stamp, key_term, term_hash};
use super::index::{Index, Skipped, read_record};
use super::record::{Note, Record, Route};
use super::search::{Terms, asked_terms, query_hashes};
use super::stale;
use crate::files::{FileLock, write_atomic_with as write_atomic};

pub const MEMLOOP_DIR: &str = ".memloop";
/// What a forgotten note's `forgotten` field says (older notes hold the time instead).
pub const FORGOTTEN: &str = "true";
const GITIGNORE: &str = "\
# Written by memloop serve. memory/ holds the notes: commit them.
# cache/ is derived from memory/ and rebuilt when missing; leftover .tmp files come from a crash.
cache/
.*.tmp
";

/// All records of one kind: their folder and its index.
pub struct Collection<T: Record> {
    index: Index<T>,
}

impl<T: Record> Collection<T> {
    fn path(&self, id: &str) -> PathBuf {
        self.index.folder().join(format!("{id}.md"))
    }

    /// The record `id`, read from its file; `None` when there is none (or the id could not
    /// name a file in the folder).
    pub fn get(&self, id: &str) -> Option<T> {
        if !is_plain_id(id) {
            return None;
        }
        let folder = std::fs::canonicalize(self.index.folder()).ok();
        read_record::<T>(&self.path(id), folder.as_deref())
            .ok()
            .map(|(_, record)| record)
    }

    /// Searchable records in all.
    pub fn count(&self) -> usize {
        self.index.total()
    }

    /// Every record the index holds, forgotten ones included, by id, with what the index knows
    /// of it (its file is read only by [`Collection::get`]).
    pub fn list(&self) -> anyhow::Result<Vec<(String, DocMeta)>> {
        Ok(self
            .index
            .all()?
            .into_iter()
            .map(|(id, _, meta)| (id, meta))
            .collect())
    }

    pub fn index(&self) -> &Index<T> {
        &self.index
    }

    /// The best searchable records for `query`, each checked against its file first: an edit
    /// made in place keeps the inode, so the folder's stamp cannot see it; a stat of the few
    /// files answered can. When one changed, it is indexed again (saved when `writable`) and
    /// the ranking runs again.
    fn answer(&mut self, query: &str, limit: usize, writable: bool) -> Vec<Found<T>> {
        let hashes = query_hashes(query);
        for _ in 0..3 {
            let Ok(hits) = self.index.search(&hashes.hashes, hashes.asked, limit) else {
                return Vec::new();
            };
            let mut answers = Vec::new();
            let mut changes = Vec::new();
            let folder = std::fs::canonicalize(self.index.folder()).ok();
            for hit in hits.into_iter().take(limit) {
                let path = self.path(&hit.id);
                let known = self.index.stamp(&hit.id).ok().flatten().map(|(s, _)| s);
                match read_record::<T>(&path, folder.as_deref()) {
                    Ok((stamp, record)) if Some(stamp) == known => answers.push(Found {
                        id: hit.id,
                        record,
                        score: hit.score,
                        relevance: hit.relevance,
                    }),
                    Ok((stamp, record)) => changes.push(IndexChange::Put(Doc::of(
                        &hit.id,
                        stamp,
                        &record,
                        &mut Terms::default(),
                    ))),
                    Err(_) => changes.push(IndexChange::Del(hit.id)),
                }
            }
            if changes.is_empty() || self.index.commit(changes, None, writable).is_err() {
                return answers;
            }
        }
        Vec::new()
    }

    fn write(&mut self, id: &str, record: &T) -> anyhow::Result<()> {
        self.write_text(id, record, &record.render())
    }

    /// Writes `record`, already rendered as `text`.
    fn write_text(&mut self, id: &str, record: &T, text: &str) -> anyhow::Result<()> {
        // Only a view that covered the whole folder before may claim to cover it after.
        let current = self.index.is_current();
        let path = self.path(id);
        write_atomic(&path, text.as_bytes(), true)?;
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("could not read {}", path.display()))?;
        let folder = current
            .then(|| std::fs::metadata(self.index.folder()).ok())
            .flatten()
            .map(|m| Stamp::of(&m));
        let doc = Doc::of(id, Stamp::of(&meta), record, &mut Terms::default());
        self.index.commit(vec![IndexChange::Put(doc)], folder, true)
    }

    /// Writes `record` as `id` when the budget allows it, else refuses and touches nothing.
    fn write_within(&mut self, id: &str, record: &T, budget: &Budget) -> anyhow::Result<()> {
        let text = record.render();
        let replaced = match self.index.stamp(id)? {
            Some((stamp, meta)) if meta.searchable => stamp.size,
            _ => 0,
        };
        let size = if record.searchable() {
            text.len() as u64
        } else {
            0
        };
        if let Some(why) = refusal(budget, size, self.index.live_bytes(), replaced, || {
            self.index.all()
        }) {
            bail!("{why}");
        }
        self.write_text(id, record, &text)
    }

    fn fresh_id(&self) -> String {
        loop {
            let id = new_id(T::PREFIX, now_millis());
            if !self.path(&id).exists() {
                return id;
            }
        }
    }
}

/// A record a query found.
pub struct Found<T> {
    pub id: String,
    pub record: T,
    /// BM25 times the record's boost: orders the answers.
    pub score: f64,
    /// How much of the query it matched, from 0 to 1: says how good the match is.
    pub relevance: f64,
}

/// What a memloop id or a hand-named note file can be called: one file name in the folder.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('.') && id.len() <= 200 && !id.contains(['/', '\\', '\0'])
}

/// Whether anything changed since the last look, without listing the folders.
#[derive(Debug, Clone, PartialEq, Default)]
struct Signature {
    generation: u64,
    notes: Option<Stamp>,
    routes: Option<Stamp>,
}

/// What a forget or restore did.
pub enum Change {
    Done,
    AlreadyThatWay,
}

/// What a new route or a route update holds; `None` keeps the current value.
#[derive(Debug, Default)]
pub struct RouteFields {
    pub title: Option<String>,
    pub description: Option<String>,
    pub paths: Option<Vec<String>>,
}

#[derive(Debug, Default)]
pub struct NewNote {
    pub content: String,
    pub category: String,
    pub importance: u8,
    pub tags: Vec<String>,
    pub task_id: Option<String>,
    /// What the note is about (`vat-rounding`): a note stored under a key replaces the note
    /// that has it.
    pub key: Option<String>,
    /// Files the note is about, besides those its text names (see [`super::stale::about`]).
    pub paths: Vec<String>,
}

/// What a store did with a new note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Nothing said it yet: a note of its own.
    Added(String),
    /// The note `0` said the same (near-identical text, or the same key and the same fact): it
    /// now holds the new text, and no second note was added.
    Merged(String),
    /// The note `0` had the same key and said something else: the new text replaced it (the
    /// old one stays in git history).
    Replaced(String),
}

impl Stored {
    pub fn id(&self) -> &str {
        match self {
            Stored::Added(id) | Stored::Merged(id) | Stored::Replaced(id) => id,
        }
    }
}

/// How many tags a merged note keeps at most (the tool takes two to five per store).
const MERGED_TAGS: usize = 8;
/// How many of the best matches a store compares its text with.
const DUPLICATE_CANDIDATES: usize = 5;
/// How many of a new note's rarest words look for those matches: what it shares with a note
/// that says the same.
const DUPLICATE_WORDS: usize = 10;

/// How a store is opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opening {
    /// Compare every file's stamp, not only the folders': catches edits made in place (a stat
    /// per file, for a long-running server's start).
    pub verify: bool,
    /// Stop reading files then (a hook's budget); what was read is kept for the next call.
    pub deadline: Option<Instant>,
}

pub struct Store {
    base: PathBuf,
    pub notes: Collection<Note>,
    pub routes: Collection<Route>,
    seen: Signature,
    /// `.memloop/` and its folders were made (or found) by this process.
    laid_out: bool,
    /// Record files the last look could not read yet (a cold start cut short by its deadline).
    pub pending: usize,
    /// Record files left out, and why.
    pub skipped: Vec<Skipped>,
    /// What the notes may take (`[memory]` in memloop.toml; its defaults until a caller sets
    /// the repository's).
    pub budget: Budget,
}

impl Store {
    /// Opens the repository's memory, bringing the index up to date with the files.
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        Store::open_with(root, Opening::default())
    }

    pub fn open_with(root: &Path, opening: Opening) -> anyhow::Result<Store> {
        let base = root.join(MEMLOOP_DIR);
        let memory = base.join("memory");
        refuse_outside(root, &memory)?;
        let cache = base.join("cache");
        let mut store = Store {
            notes: Collection {
                index: Index::open(memory.join(Note::FOLDER), &cache),
            },
            routes: Collection {
                index: Index::open(memory.join(Route::FOLDER), &cache),
            },
            base,
            seen: Signature::default(),
            laid_out: false,
            pending: 0,
            skipped: Vec::new(),
            budget: Budget::default(),
        };
        store.seen = store.signature();
        store.look(opening)?;
        Ok(store)
    }

    /// Brings both indexes in line with their folders, saving what was found when the write
    /// lock is free (a read-only checkout or a busy writer: in memory only).
    fn look(&mut self, opening: Opening) -> anyhow::Result<()> {
        let current = self.notes.index.is_current() && self.routes.index.is_current();
        if current && !opening.verify {
            self.pending = 0;
            return Ok(());
        }
        // A repository without notes gets no `.memloop/` from merely being read.
        let lock = if self.notes.index.folder().is_dir() || self.routes.index.folder().is_dir() {
            let lock_path = self.lock_path();
            self.ensure_layout()
                .and_then(|()| FileLock::try_acquire(&lock_path))
                .unwrap_or_else(|err| {
                    eprintln!("memloop: {err:#}; reading the notes without saving the index");
                    None
                })
        } else {
            None
        };
        let writable = lock.is_some();
        if writable {
            self.notes.index.catch_up();
            self.routes.index.catch_up();
        }
        self.scan(opening, writable)?;
        drop(lock);
        self.seen = self.signature();
        Ok(())
    }

    fn scan(&mut self, opening: Opening, writable: bool) -> anyhow::Result<()> {
        let mut skipped = Vec::new();
        let mut warn = |s: Skipped| {
            eprintln!(
                "memloop: skipping {}: {}; fix the file or delete it",
                s.file.display(),
                s.why
            );
            skipped.push(s);
        };
        let notes =
            self.notes
                .index
                .reconcile(opening.verify, opening.deadline, writable, &mut warn)?;
        let routes =
            self.routes
                .index
                .reconcile(opening.verify, opening.deadline, writable, &mut warn)?;
        self.pending = notes.pending + routes.pending;
        self.skipped.extend(skipped);
        Ok(())
    }

    /// Creates `.memloop/` with its folders and its `.gitignore`, so the cache and crash
    /// leftovers never reach a commit.
    fn ensure_layout(&mut self) -> anyhow::Result<()> {
        // `git clean -X` may have taken the ignored cache folder away meanwhile.
        if self.laid_out && self.cache_dir().is_dir() && self.notes.index.folder().is_dir() {
            return Ok(());
        }
        self.write_layout()?;
        self.laid_out = true;
        Ok(())
    }

    fn cache_dir(&self) -> PathBuf {
        self.base.join("cache")
    }

    fn write_layout(&self) -> anyhow::Result<()> {
        for dir in [
            self.notes.index.folder(),
            self.routes.index.folder(),
            &self.cache_dir(),
        ] {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        let ignore = self.base.join(".gitignore");
        match crate::files::read_regular(&ignore) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                if text.lines().any(|l| l.trim() == "cache/") {
                    return Ok(());
                }
                let sep = if text.is_empty() || text.ends_with('\n') {
                    ""
                } else {
                    "\n"
                };
                write_atomic(&ignore, format!("{text}{sep}{GITIGNORE}").as_bytes(), true)
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                write_atomic(&ignore, GITIGNORE.as_bytes(), true)
            }
            Err(err) => Err(err).with_context(|| format!("could not read {}", ignore.display())),
        }
    }

    fn lock_path(&self) -> PathBuf {
        self.cache_dir().join("lock")
    }

    fn generation_path(&self) -> PathBuf {
        self.cache_dir().join("generation")
    }

    fn signature(&self) -> Signature {
        let stamp = |dir: &Path| std::fs::metadata(dir).ok().map(|m| Stamp::of(&m));
        Signature {
            generation: crate::files::read_regular(&self.generation_path())
                .ok()
                .and_then(|t| String::from_utf8(t).ok())
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0),
            notes: stamp(self.notes.index.folder()),
            routes: stamp(self.routes.index.folder()),
        }
    }

    /// The notes that best match `query`, best first.
    pub fn answer_notes(&mut self, query: &str, limit: usize) -> Vec<Found<Note>> {
        let lock = self.try_lock();
        self.notes.answer(query, limit, lock.is_some())
    }

    /// The routes that best match `query`, best first.
    pub fn answer_routes(&mut self, query: &str, limit: usize) -> Vec<Found<Route>> {
        let lock = self.try_lock();
        self.routes.answer(query, limit, lock.is_some())
    }

    /// The write lock when it is free at once (a query may then save what it corrected).
    fn try_lock(&mut self) -> Option<FileLock> {
        if !self.laid_out && !self.cache_dir().is_dir() {
            return None;
        }
        FileLock::try_acquire(&self.lock_path()).ok().flatten()
    }

    /// Picks up what other processes (or git, or a reviewer) changed since the last look.
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        let now = self.signature();
        if now == self.seen {
            return Ok(());
        }
        self.notes.index.catch_up();
        self.routes.index.catch_up();
        self.look(Opening::default())
    }

    /// Runs one change under the repository's write lock, on an up-to-date view, and tells
    /// the other servers about it through the generation counter.
    fn write_with<R>(
        &mut self,
        op: impl FnOnce(&mut Store) -> anyhow::Result<R>,
    ) -> anyhow::Result<R> {
        self.ensure_layout()?;
        let _lock = FileLock::acquire(&self.lock_path())?;
        self.notes.index.catch_up();
        self.routes.index.catch_up();
        self.scan(Opening::default(), true)?;
        let out = op(self)?;
        let generation = self.signature().generation.wrapping_add(1);
        write_atomic(
            &self.generation_path(),
            format!("{generation}\n").as_bytes(),
            false,
        )?;
        self.seen = self.signature();
        Ok(out)
    }

    /// Stores a new note and returns the id of the note that holds it (see [`Store::store`]).
    pub fn store_note(&mut self, new: NewNote) -> anyhow::Result<String> {
        self.store(new).map(|stored| stored.id().to_owned())
    }

    /// Stores a new note: into the note that already says it (or has its key) when there is
    /// one, else as a note of its own; refused, touching nothing, when it would pass the
    /// budget.
    pub fn store(&mut self, new: NewNote) -> anyhow::Result<Stored> {
        // Read before the lock: the files' fingerprints, and git for the commit (one call, only
        // for a note about files). A rewritten note is about the files as they are now.
        let about = stale::about(self.root(), &new.content, &new.paths).map_err(|e| anyhow!(e))?;
        let commit = if about.is_empty() {
            None
        } else {
            stale::head_commit(self.root())
        };
        self.write_with(|store| {
            let budget = store.budget;
            let now = timestamp(now_millis());
            let (id, note, stored) = match store.duplicate_of(&new)? {
                Some((id, old, same_fact)) => {
                    let (mut about, mut commit) = (about, commit);
                    // The same fact keeps the files its note was about (those still there),
                    // looked at again now: the merged note is fresh.
                    let missing: Vec<&str> = old
                        .about
                        .iter()
                        .map(|(path, _)| path.as_str())
                        .filter(|path| !about.iter().any(|(p, _)| p == path))
                        .collect();
                    if same_fact
                        && !missing.is_empty()
                        && let Ok(more) = stale::about(store.root(), &missing.join(" "), &[])
                    {
                        about.extend(more);
                        about.truncate(stale::MAX_PATHS);
                        if commit.is_none() && !about.is_empty() {
                            commit = stale::head_commit(store.root());
                        }
                    }
                    let mut note = rewritten(old, new, same_fact, now);
                    note.about = about;
                    note.commit = commit;
                    let stored = if same_fact {
                        Stored::Merged(id.clone())
                    } else {
                        Stored::Replaced(id.clone())
                    };
                    (id, note, stored)
                }
                None => {
                    let id = store.notes.fresh_id();
                    let note = Note {
                        content: new.content,
                        category: new.category,
                        importance: new.importance,
                        tags: new.tags,
                        key: new.key,
                        task_id: new.task_id,
                        created: now,
                        updated: None,
                        forgotten: None,
                        about,
                        commit,
                        extra: Vec::new(),
                    };
                    (id.clone(), note, Stored::Added(id))
                }
            };
            store.notes.write_within(&id, &note, &budget)?;
            Ok(stored)
        })
    }

    /// The searchable note a new note belongs in, and whether it says the same fact: the note
    /// with its key (any content), else the first of the best matches of its rarest words
    /// that says the same (`super::duplicate`). A note with another key is never chosen.
    pub fn duplicate_of(&self, new: &NewNote) -> anyhow::Result<Option<(String, Note, bool)>> {
        if let Some(key) = &new.key {
            let mut keyed: Vec<(String, Note)> = self
                .notes
                .index
                .holding(key_term(key))?
                .into_iter()
                .filter_map(|id| self.notes.get(&id).map(|note| (id, note)))
                .filter(|(_, note)| note.searchable())
                .collect();
            // Two notes with one key (a merge of two branches): the newest is the one to keep.
            keyed.sort_by(|a, b| b.1.at().cmp(a.1.at()).then_with(|| b.0.cmp(&a.0)));
            if let Some((id, note)) = keyed.into_iter().next() {
                let same = same_fact(&new.content, &note.content);
                return Ok(Some((id, note, same)));
            }
        }
        let mut words: Vec<(usize, u64)> = Vec::new();
        for term in asked_terms(&new.content) {
            let hash = term_hash(&term);
            let df = self.notes.index.df(hash)?;
            if df > 0 {
                words.push((df, hash));
            }
        }
        words.sort_unstable();
        words.truncate(DUPLICATE_WORDS);
        let hashes: Vec<u64> = words.into_iter().map(|(_, hash)| hash).collect();
        if hashes.is_empty() {
            return Ok(None);
        }
        let profile = Profile::of(&new.content);
        let hits = self
            .notes
            .index
            .search(&hashes, hashes.len(), DUPLICATE_CANDIDATES)?;
        for hit in hits.into_iter().take(DUPLICATE_CANDIDATES) {
            let Some(note) = self.notes.get(&hit.id) else {
                continue;
            };
            let other_key =
                matches!((&new.key, &note.key), (Some(a), Some(b)) if key_term(a) != key_term(b));
            if note.searchable()
                && !other_key
                && difference(&profile, &Profile::of(&note.content)).is_none()
            {
                return Ok(Some((hit.id, note, true)));
            }
        }
        Ok(None)
    }

    /// Forgets (`forget = true`) or restores a note; the file stays either way. A restore that
    /// would pass the budget is refused.
    pub fn set_forgotten(&mut self, id: &str, forget: bool) -> anyhow::Result<Change> {
        self.write_with(|store| {
            let Some(note) = store.notes.get(id) else {
                bail!("{}", unknown_id::<Note>(id, store.routes.get(id).is_some()));
            };
            if note.forgotten.is_some() == forget {
                return Ok(Change::AlreadyThatWay);
            }
            let mut note = note;
            // The same bytes whenever and wherever it is forgotten: two branches that forget
            // the same note merge without a conflict (a time would differ).
            note.forgotten = forget.then(|| FORGOTTEN.to_owned());
            let budget = store.budget;
            store.notes.write_within(id, &note, &budget)?;
            Ok(Change::Done)
        })
    }

    pub fn create_route(
        &mut self,
        title: String,
        description: String,
        paths: Vec<String>,
    ) -> anyhow::Result<String> {
        self.write_with(|store| {
            let id = store.routes.fresh_id();
            let route = Route {
                title,
                description,
                paths,
                created: timestamp(now_millis()),
                updated: None,
                extra: Vec::new(),
            };
            store.routes.write(&id, &route)?;
            Ok(id)
        })
    }

    pub fn update_route(&mut self, id: &str, fields: RouteFields) -> anyhow::Result<Route> {
        self.write_with(|store| {
            let Some(mut route) = store.routes.get(id) else {
                bail!("{}", unknown_id::<Route>(id, store.notes.get(id).is_some()));
            };
            if let Some(title) = fields.title {
                route.title = title;
            }
            if let Some(description) = fields.description {
                route.description = description;
            }
            if let Some(paths) = fields.paths {
                route.paths = paths;
            }
            route.updated = Some(timestamp(now_millis()));
            store.routes.write(id, &route)?;
            Ok(route)
        })
    }

    /// The repository whose memory this is.
    pub fn root(&self) -> &Path {
        self.base.parent().unwrap_or(&self.base)
    }

    /// What changed among the files of each note since it was written, one look per file.
    pub fn stale_checker(&self) -> stale::Checker<'_> {
        stale::Checker::new(self.root())
    }

    /// Where a record's file lives, relative to the repository, for answers a human may follow.
    pub fn relative_path<T: Record>(id: &str) -> String {
        format!("{MEMLOOP_DIR}/memory/{}/{id}.md", T::FOLDER)
    }
}

/// The note `old` rewritten with what `new` says, written `now`. The same fact keeps what the
/// old note knew too (the higher importance, its tags); a correction under the same key takes
/// the new note's. Either way the note keeps its id, its creation time and a reviewer's extra
/// lines.
fn rewritten(old: Note, new: NewNote, same_fact: bool, now: String) -> Note {
    let (importance, tags) = if same_fact {
        let mut tags = old.tags.clone();
        for tag in new.tags {
            if !tags.iter().any(|t| t.eq_ignore_ascii_case(&tag)) {
                tags.push(tag);
            }
        }
        tags.truncate(MERGED_TAGS.max(old.tags.len()));
        (old.importance.max(new.importance), tags)
    } else {
        (new.importance, new.tags)
    };
    Note {
        content: new.content,
        category: new.category,
        importance,
        tags,
        key: new.key.or(old.key),
        task_id: new.task_id.or(old.task_id),
        created: old.created,
        updated: Some(now),
        forgotten: None,
        about: Vec::new(),
        commit: None,
        extra: old.extra,
    }
}

/// Refuses a memory folder that is, or sits behind, a symlink out of the repository: its notes
/// would be served to every agent as this repository's.
fn refuse_outside(root: &Path, memory: &Path) -> anyhow::Result<()> {
    let Ok(real_root) = std::fs::canonicalize(root) else {
        return Ok(());
    };
    for dir in [
        memory.to_path_buf(),
        memory.join(Note::FOLDER),
        memory.join(Route::FOLDER),
    ] {
        if let Ok(real) = std::fs::canonicalize(&dir)
            && !real.starts_with(&real_root)
        {
            bail!(
                "{} leads to {}, outside the repository; memloop reads notes only from inside \
                 it: replace the link with the folder itself",
                dir.display(),
                real.display()
            );
        }
    }
    Ok(())
}

fn unknown_id<T: Record>(id: &str, is_other_kind: bool) -> String {
    if is_other_kind {
        let other = if T::KIND == "note" { "route" } else { "note" };
        return format!("id: {id} is a {other}, not a {}", T::KIND);
    }
    format!(
        "id: no {} has the id {id:?}; ids look like {}-20261130-095501-7f3a9c and come from \
         the answers of memory_store, create_route, context_query and route_query",
        T::KIND,
        T::PREFIX
    )
}
