//! The notes and routes of one repository: the files under `.memloop/memory/`, an index over
//! them in memory, and a derived cache under `.memloop/cache/` that makes a restart cheap.
//!
//! Writers (this process or another agent's server) take the repository's write lock, bring
//! their view up to date, write one file atomically and bump a generation counter. Readers take
//! no lock: before each query they compare a cheap signature (the counter plus the folders'
//! modification times) and rescan only when it moved.

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File, Metadata};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::ids::{new_id, now_millis, timestamp};
use super::record::{Note, Record, Route};
use super::search::{Index, Slot, query_terms};
use crate::files::{FileLock, is_temp_name, write_atomic_with as write_atomic};

pub const MEMLOOP_DIR: &str = ".memloop";
const CACHE_VERSION: u32 = 1;
const GITIGNORE: &str = "\
# Written by memloop serve. memory/ holds the notes: commit them.
# cache/ is derived from memory/ and rebuilt when missing; leftover .tmp files come from a crash.
cache/
.*.tmp
";

/// Identifies one version of a file cheaply: an atomic replace gives a new inode, an edit in
/// place a new modification time or size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    ino: u64,
    mtime_ns: i128,
    size: u64,
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        Stamp {
            ino: inode(meta),
            mtime_ns,
            size: meta.len(),
        }
    }
}

#[cfg(unix)]
fn inode(meta: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_meta: &Metadata) -> u64 {
    0
}

/// Without a stat call where the platform gives the inode in the directory listing.
fn entry_inode(entry: &fs::DirEntry) -> Option<u64> {
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

struct Entry<T> {
    stamp: Stamp,
    record: T,
    slot: Option<Slot>,
}

/// All records of one kind, keyed by id (the file name without `.md`).
pub struct Collection<T: Record> {
    dir: PathBuf,
    entries: BTreeMap<String, Entry<T>>,
    /// Files that failed to parse, by inode, so each is reported once rather than on every scan.
    broken: BTreeMap<String, Stamp>,
    index: Index,
    /// Whether records go into the search index; listing the memory does without it.
    indexed: bool,
}

impl<T: Record> Collection<T> {
    fn new(dir: PathBuf, indexed: bool) -> Self {
        Collection {
            dir,
            entries: BTreeMap::new(),
            broken: BTreeMap::new(),
            index: Index::default(),
            indexed,
        }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.md"))
    }

    pub fn get(&self, id: &str) -> Option<&T> {
        self.entries.get(id).map(|e| &e.record)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every record, forgotten ones included, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.entries.iter().map(|(id, e)| (id.as_str(), &e.record))
    }

    fn put(&mut self, id: String, stamp: Stamp, record: T) {
        self.drop_entry(&id);
        let slot = (self.indexed && record.searchable()).then(|| {
            self.index
                .insert(&id, &record.index_texts(), record.boost())
        });
        self.broken.remove(&id);
        self.entries.insert(
            id,
            Entry {
                stamp,
                record,
                slot,
            },
        );
    }

    fn drop_entry(&mut self, id: &str) {
        if let Some(old) = self.entries.remove(id)
            && let Some(slot) = old.slot
        {
            self.index.remove(slot);
        }
    }

    /// Brings the collection in line with its folder. `verify` also compares modification time
    /// and size (a stat per file), which catches edits made in place; otherwise the inode from
    /// the listing decides, which catches every atomic replace, including other servers' writes.
    fn scan(&mut self, verify: bool, clean_temps: bool) -> anyhow::Result<bool> {
        let listing = match fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(err) if err.kind() == ErrorKind::NotFound => {
                let changed = !self.entries.is_empty();
                self.entries.clear();
                self.broken.clear();
                self.index = Index::default();
                return Ok(changed);
            }
            Err(err) => {
                return Err(err).with_context(|| format!("could not list {}", self.dir.display()));
            }
        };
        let mut present: HashSet<String> = HashSet::with_capacity(self.entries.len());
        let mut changed = false;
        for entry in listing {
            let entry = entry.with_context(|| format!("could not list {}", self.dir.display()))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_temp_name(name) {
                if clean_temps {
                    // Writers hold the lock while their temp file exists, and so do we: this
                    // one belongs to a writer that crashed.
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            let Some(id) = name.strip_suffix(".md") else {
                continue;
            };
            if id.is_empty() || id.starts_with('.') {
                continue;
            }
            present.insert(id.to_owned());
            let known = self
                .entries
                .get(id)
                .map(|e| e.stamp)
                .or_else(|| self.broken.get(id).copied());
            if let Some(known) = known {
                let same = match (verify, entry_inode(&entry)) {
                    (false, Some(ino)) => ino == known.ino,
                    _ => entry.metadata().map(|m| Stamp::of(&m)).ok() == Some(known),
                };
                if same {
                    continue;
                }
            }
            changed = true;
            let path = entry.path();
            match load::<T>(&path) {
                Ok((stamp, record)) => self.put(id.to_owned(), stamp, record),
                Err(err) => {
                    eprintln!(
                        "memloop serve: skipping {}: {err:#}; fix the file or delete it",
                        path.display()
                    );
                    self.drop_entry(id);
                    let stamp = entry.metadata().map(|m| Stamp::of(&m));
                    if let Ok(stamp) = stamp {
                        self.broken.insert(id.to_owned(), stamp);
                    }
                }
            }
        }
        let gone: Vec<String> = self
            .entries
            .keys()
            .chain(self.broken.keys())
            .filter(|id| !present.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            changed = true;
            self.drop_entry(&id);
            self.broken.remove(&id);
        }
        self.compact_if_worth_it();
        Ok(changed)
    }

    fn compact_if_worth_it(&mut self) {
        if !self.index.wants_compaction() {
            return;
        }
        let entries = std::mem::take(&mut self.entries);
        self.index = Index::default();
        for (id, entry) in entries {
            self.put(id, entry.stamp, entry.record);
        }
    }

    /// `ranked`, with every answer checked against its file first. An edit made in place keeps
    /// the inode, so the listing cannot see it; a stat of the few files answered can. When one
    /// changed, it is reloaded and the ranking runs again on the current text.
    pub fn answer(&mut self, query: &str, limit: usize) -> Vec<(String, T)> {
        let ids: Vec<String> = self
            .ranked(query, limit)
            .into_iter()
            .map(|(id, _)| id.to_owned())
            .collect();
        let mut changed = false;
        for id in &ids {
            let known = self.entries.get(id).map(|e| e.stamp);
            let path = self.path(id);
            let now = fs::metadata(&path).ok().map(|m| Stamp::of(&m));
            if now == known {
                continue;
            }
            changed = true;
            match load::<T>(&path) {
                Ok((stamp, record)) => self.put(id.clone(), stamp, record),
                Err(_) => self.drop_entry(id),
            }
        }
        let hits = if changed {
            self.ranked(query, limit)
        } else {
            ids.iter()
                .filter_map(|id| self.entries.get_key_value(id))
                .map(|(id, e)| (id.as_str(), &e.record))
                .collect()
        };
        hits.into_iter()
            .map(|(id, record)| (id.to_owned(), record.clone()))
            .collect()
    }

    /// The best searchable records for `query`: BM25 times the record's boost, newer first on
    /// equal scores, then by id, so the same files always give the same answer.
    fn ranked(&self, query: &str, limit: usize) -> Vec<(&str, &T)> {
        let terms = query_terms(query);
        let mut hits: Vec<(f64, &str, &T)> = self
            .index
            .top(&terms, limit)
            .into_iter()
            .filter_map(|(slot, score)| {
                let id = self.index.key(slot);
                let entry = self.entries.get(id)?;
                Some((score, id, &entry.record))
            })
            .collect();
        hits.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| b.2.created().cmp(a.2.created()))
                .then_with(|| a.1.cmp(b.1))
        });
        hits.into_iter()
            .take(limit)
            .map(|(_, id, record)| (id, record))
            .collect()
    }

    fn write(&mut self, id: String, record: T) -> anyhow::Result<()> {
        let path = self.path(&id);
        write_atomic(&path, record.render().as_bytes(), true)?;
        let meta =
            fs::metadata(&path).with_context(|| format!("could not read {}", path.display()))?;
        self.put(id, Stamp::of(&meta), record);
        // A long session of forgets leaves dead slots behind; keep them bounded.
        self.compact_if_worth_it();
        Ok(())
    }

    fn fresh_id(&self) -> String {
        loop {
            let id = new_id(T::PREFIX, now_millis());
            if !self.entries.contains_key(&id) && !self.path(&id).exists() {
                return id;
            }
        }
    }
}

fn load<T: Record>(path: &Path) -> anyhow::Result<(Stamp, T)> {
    let mut file = File::open(path).context("could not open")?;
    let meta = file.metadata().context("could not read its metadata")?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .context("could not read it as UTF-8 text")?;
    Ok((Stamp::of(&meta), T::parse(&text)?))
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

pub struct NewNote {
    pub content: String,
    pub category: String,
    pub importance: u8,
    pub tags: Vec<String>,
    pub task_id: Option<String>,
}

pub struct Store {
    base: PathBuf,
    pub notes: Collection<Note>,
    pub routes: Collection<Route>,
    seen: Signature,
    cache_dirty: bool,
    /// `.memloop/` and its folders were made (or found) by this process.
    laid_out: bool,
}

#[derive(Serialize)]
struct CacheOut<'a> {
    version: u32,
    notes: Vec<(&'a str, &'a Stamp, &'a Note)>,
    routes: Vec<(&'a str, &'a Stamp, &'a Route)>,
}

#[derive(Deserialize)]
struct CacheIn {
    version: u32,
    notes: Vec<(String, Stamp, Note)>,
    routes: Vec<(String, Stamp, Route)>,
}

impl Store {
    /// Loads the repository's memory: from the cache where its stamps still match the files,
    /// from the files where they do not. Writes nothing unless there are notes to cache.
    pub fn open(root: &Path) -> anyhow::Result<Store> {
        Store::open_with(root, true)
    }

    /// Like [`Store::open`], without the search index: for reading the records in full (the
    /// session-start index, listings) and for forgets, at half the cost of a searchable store.
    /// Its queries find nothing.
    pub fn open_unsearchable(root: &Path) -> anyhow::Result<Store> {
        Store::open_with(root, false)
    }

    fn open_with(root: &Path, indexed: bool) -> anyhow::Result<Store> {
        let base = root.join(MEMLOOP_DIR);
        let memory = base.join("memory");
        let mut store = Store {
            notes: Collection::new(memory.join(Note::FOLDER), indexed),
            routes: Collection::new(memory.join(Route::FOLDER), indexed),
            base,
            seen: Signature::default(),
            cache_dirty: false,
            laid_out: false,
        };
        let cached = store.read_cache();
        let had_cache = cached.is_some();
        if let Some(cache) = cached {
            for (id, stamp, note) in cache.notes {
                store.notes.put(id, stamp, note);
            }
            for (id, stamp, route) in cache.routes {
                store.routes.put(id, stamp, route);
            }
        }
        store.seen = store.signature();
        // With the lock free, any temp file is a crashed writer's leftover: clear it now. A
        // repository without notes gets no `.memloop/` from merely being read.
        // A read-only checkout still answers queries: failing to lay out or lock only skips that.
        let lock = if store.notes.dir.is_dir() || store.routes.dir.is_dir() {
            let lock_path = store.lock_path();
            match store
                .ensure_layout()
                .and_then(|()| FileLock::try_acquire(&lock_path))
            {
                Ok(lock) => lock,
                Err(err) => {
                    eprintln!("memloop serve: {err:#}; reading the notes without cleaning up");
                    None
                }
            }
        } else {
            None
        };
        let clean = lock.is_some();
        let changed = store.notes.scan(true, clean)? | store.routes.scan(true, clean)?;
        drop(lock);
        store.cache_dirty = changed || !had_cache;
        let has_records = !store.notes.is_empty() || !store.routes.is_empty();
        if has_records && let Err(err) = store.save_cache() {
            eprintln!(
                "memloop serve: the cache was not written ({err:#}); every start reads all note \
                 files until it can be"
            );
        }
        Ok(store)
    }

    fn cache_dir(&self) -> PathBuf {
        self.base.join("cache")
    }

    fn cache_path(&self) -> PathBuf {
        self.cache_dir().join("index.json")
    }

    fn read_cache(&self) -> Option<CacheIn> {
        let bytes = fs::read(self.cache_path()).ok()?;
        // A cache from another build or a torn copy is simply rebuilt from the files.
        let cache: CacheIn = serde_json::from_slice(&bytes).ok()?;
        (cache.version == CACHE_VERSION).then_some(cache)
    }

    /// Writes the derived cache when it is behind the files; a failure only costs speed.
    pub fn save_cache(&mut self) -> anyhow::Result<()> {
        if !self.cache_dirty {
            return Ok(());
        }
        self.ensure_layout()?;
        let out = CacheOut {
            version: CACHE_VERSION,
            notes: self
                .notes
                .entries
                .iter()
                .map(|(id, e)| (id.as_str(), &e.stamp, &e.record))
                .collect(),
            routes: self
                .routes
                .entries
                .iter()
                .map(|(id, e)| (id.as_str(), &e.stamp, &e.record))
                .collect(),
        };
        let bytes = serde_json::to_vec(&out).context("could not encode the cache")?;
        write_atomic(&self.cache_path(), &bytes, false)?;
        self.cache_dirty = false;
        Ok(())
    }

    /// Creates `.memloop/` with its folders and its `.gitignore`, so the cache and crash
    /// leftovers never reach a commit.
    fn ensure_layout(&mut self) -> anyhow::Result<()> {
        // `git clean -X` may have taken the ignored cache folder away meanwhile.
        if self.laid_out && self.cache_dir().is_dir() && self.notes.dir.is_dir() {
            return Ok(());
        }
        self.write_layout()?;
        self.laid_out = true;
        Ok(())
    }

    fn write_layout(&self) -> anyhow::Result<()> {
        for dir in [&self.notes.dir, &self.routes.dir, &self.cache_dir()] {
            fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        let ignore = self.base.join(".gitignore");
        match fs::read_to_string(&ignore) {
            Ok(text) if text.lines().any(|l| l.trim() == "cache/") => Ok(()),
            Ok(text) => {
                let sep = if text.is_empty() || text.ends_with('\n') {
                    ""
                } else {
                    "\n"
                };
                write_atomic(&ignore, format!("{text}{sep}{GITIGNORE}").as_bytes(), true)
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
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
        let stamp = |dir: &Path| fs::metadata(dir).ok().map(|m| Stamp::of(&m));
        Signature {
            generation: fs::read_to_string(self.generation_path())
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0),
            notes: stamp(&self.notes.dir),
            routes: stamp(&self.routes.dir),
        }
    }

    /// Picks up what other processes (or git, or a reviewer) changed since the last look.
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        self.refresh_with(false)
    }

    fn refresh_with(&mut self, locked: bool) -> anyhow::Result<()> {
        let now = self.signature();
        if now == self.seen {
            return Ok(());
        }
        // Taken before the scan: whatever changes during it moves the signature again.
        self.seen = now;
        let changed = self.notes.scan(false, locked)? | self.routes.scan(false, locked)?;
        self.cache_dirty |= changed;
        Ok(())
    }

    /// Runs one change under the repository's write lock, on an up-to-date view, and tells
    /// the other servers about it through the generation counter.
    fn write_with<R>(
        &mut self,
        op: impl FnOnce(&mut Store) -> anyhow::Result<R>,
    ) -> anyhow::Result<R> {
        self.ensure_layout()?;
        let _lock = FileLock::acquire(&self.lock_path())?;
        self.refresh_with(true)?;
        let out = op(self)?;
        let generation = self.signature().generation.wrapping_add(1);
        write_atomic(
            &self.generation_path(),
            format!("{generation}\n").as_bytes(),
            false,
        )?;
        self.seen = self.signature();
        self.cache_dirty = true;
        Ok(out)
    }

    pub fn store_note(&mut self, new: NewNote) -> anyhow::Result<String> {
        self.write_with(|store| {
            let id = store.notes.fresh_id();
            let note = Note {
                content: new.content,
                category: new.category,
                importance: new.importance,
                tags: new.tags,
                task_id: new.task_id,
                created: timestamp(now_millis()),
                forgotten: None,
                extra: Vec::new(),
            };
            store.notes.write(id.clone(), note)?;
            Ok(id)
        })
    }

    /// Forgets (`forget = true`) or restores a note; the file stays either way.
    pub fn set_forgotten(&mut self, id: &str, forget: bool) -> anyhow::Result<Change> {
        self.write_with(|store| {
            let Some(note) = store.notes.get(id) else {
                bail!("{}", unknown_id::<Note>(id, store.routes.get(id).is_some()));
            };
            if note.forgotten.is_some() == forget {
                return Ok(Change::AlreadyThatWay);
            }
            let mut note = note.clone();
            note.forgotten = forget.then(|| timestamp(now_millis()));
            store.notes.write(id.to_owned(), note)?;
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
            store.routes.write(id.clone(), route)?;
            Ok(id)
        })
    }

    pub fn update_route(&mut self, id: &str, fields: RouteFields) -> anyhow::Result<Route> {
        self.write_with(|store| {
            let Some(route) = store.routes.get(id) else {
                bail!("{}", unknown_id::<Route>(id, store.notes.get(id).is_some()));
            };
            let mut route = route.clone();
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
            store.routes.write(id.to_owned(), route.clone())?;
            Ok(route)
        })
    }

    /// Where a record's file lives, relative to the repository, for answers a human may follow.
    pub fn relative_path<T: Record>(id: &str) -> String {
        format!("{MEMLOOP_DIR}/memory/{}/{id}.md", T::FOLDER)
    }
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
