//! The delta: what changed since the segment was written, one JSON line per change, appended
//! under the repository's write lock. Readers take no lock: they read the lines that are whole
//! (a line still being appended has no newline yet) and apply the later line over the earlier.
//! The first line names the segment the delta belongs to; after a merge the segment and an
//! empty delta replace both files, so a reader that finds a delta of another segment reopens.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::doc::{Doc, DocMeta, Stamp};

/// A segment record that a later change replaced, with what BM25's statistics must give back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Was {
    pub slot: u32,
    pub len: u32,
    pub searchable: bool,
    /// Its file's size, which the budget's total gives back.
    #[serde(default)]
    pub bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct Head {
    segment: String,
}

#[derive(Serialize, Deserialize)]
struct DocLine {
    id: String,
    stamp: Stamp,
    meta: DocMeta,
    terms: Vec<(u64, u32)>,
}

#[derive(Serialize, Deserialize, Default)]
struct Line {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    put: Option<DocLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    del: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    was: Option<Was>,
    /// The records folder's stamp right after this change: memloop's own writes move it, and
    /// a reader that sees the folder at this stamp knows nobody else changed it since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    folder: Option<Stamp>,
}

/// The changes since the segment, as read so far.
#[derive(Default)]
pub struct Delta {
    /// The segment these changes apply to.
    pub segment: u64,
    /// The record now, by id; `None` where it was removed.
    pub docs: BTreeMap<String, Option<Doc>>,
    /// Segment slots a change replaced.
    pub replaced: HashMap<u32, Was>,
    /// The folder's stamp after the newest change that recorded one.
    pub folder: Option<Stamp>,
    /// Whole lines read, and the bytes they span (where the next read starts).
    pub lines: usize,
    offset: u64,
}

/// One change, for [`Log::append`].
pub enum Change {
    Put(Doc),
    Del(String),
}

impl Change {
    pub fn id(&self) -> &str {
        match self {
            Change::Put(doc) => &doc.id,
            Change::Del(id) => id,
        }
    }
}

pub struct Log {
    path: PathBuf,
}

impl Log {
    pub fn new(path: PathBuf) -> Log {
        Log { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts an empty delta for `segment` (atomically: a reader sees the old or the new one).
    pub fn reset(&self, segment: u64) -> anyhow::Result<()> {
        let head = serde_json::to_string(&Head {
            segment: format!("{segment:016x}"),
        })?;
        crate::files::write_atomic_with(&self.path, format!("{head}\n").as_bytes(), false)
    }

    /// Reads the lines written since `delta` was last brought up to date. `Ok(false)` when the
    /// delta belongs to another segment than `delta.segment` (the caller reopens both).
    pub fn catch_up(&self, delta: &mut Delta) -> anyhow::Result<bool> {
        let mut file = match crate::files::open_regular(&self.path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(err) => {
                return Err(err).with_context(|| format!("could not open {}", self.path.display()));
            }
        };
        let size = file.metadata()?.len();
        if size < delta.offset {
            // Replaced by a merge meanwhile.
            return Ok(false);
        }
        file.seek(SeekFrom::Start(delta.offset))?;
        let mut bytes = Vec::new();
        file.take(size - delta.offset).read_to_end(&mut bytes)?;
        let whole = bytes
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |at| at + 1);
        for raw in bytes[..whole]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            if delta.offset == 0 && delta.lines == 0 {
                let head: Head =
                    serde_json::from_slice(raw).context("the index delta has no head")?;
                let segment = u64::from_str_radix(&head.segment, 16)
                    .context("the index delta names no segment")?;
                if segment != delta.segment {
                    return Ok(false);
                }
                delta.lines = 1;
                continue;
            }
            let line: Line = serde_json::from_slice(raw).context("the index delta is corrupt")?;
            apply(delta, line)?;
            delta.lines += 1;
        }
        if delta.lines == 0 && whole > 0 {
            bail!("the index delta is corrupt");
        }
        delta.offset += whole as u64;
        Ok(delta.lines > 0)
    }

    /// Appends `changes` (with the folder's stamp after them), then reads them back into
    /// `delta`, as any reader would.
    pub fn append(
        &self,
        delta: &mut Delta,
        changes: Vec<(Change, Option<Was>)>,
        folder: Option<Stamp>,
    ) -> anyhow::Result<()> {
        let mut text = String::new();
        let count = changes.len();
        for (i, (change, was)) in changes.into_iter().enumerate() {
            let folder = if i + 1 == count { folder } else { None };
            let line = match change {
                Change::Put(doc) => Line {
                    put: Some(DocLine {
                        id: doc.id,
                        stamp: doc.stamp,
                        meta: doc.meta,
                        terms: doc.terms,
                    }),
                    was,
                    folder,
                    ..Line::default()
                },
                Change::Del(id) => Line {
                    del: Some(id),
                    was,
                    folder,
                    ..Line::default()
                },
            };
            text.push_str(&serde_json::to_string(&line)?);
            text.push('\n');
        }
        if count == 0 {
            let line = Line {
                folder,
                ..Line::default()
            };
            text.push_str(&serde_json::to_string(&line)?);
            text.push('\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .with_context(|| format!("could not open {}", self.path.display()))?;
        file.write_all(text.as_bytes())
            .with_context(|| format!("could not write {}", self.path.display()))?;
        if !self.catch_up(delta)? {
            bail!("the index delta was replaced while memloop held the write lock");
        }
        Ok(())
    }
}

/// One line read back: the same change a writer applies in memory, plus the folder's stamp.
fn apply(delta: &mut Delta, line: Line) -> anyhow::Result<()> {
    let change = match (line.put, line.del) {
        (Some(put), None) => Some(Change::Put(Doc {
            id: put.id,
            stamp: put.stamp,
            meta: put.meta,
            terms: put.terms,
        })),
        (None, Some(id)) => Some(Change::Del(id)),
        (None, None) => None,
        (Some(_), Some(_)) => bail!("the index delta is corrupt"),
    };
    match change {
        Some(change) => delta.apply_change(change, line.was),
        None => {
            if let Some(was) = line.was {
                delta.replaced.insert(was.slot, was);
            }
        }
    }
    if line.folder.is_some() {
        delta.folder = line.folder;
    }
    Ok(())
}

impl Delta {
    /// No changes yet, for `segment`.
    pub fn new(segment: u64) -> Delta {
        Delta {
            segment,
            ..Delta::default()
        }
    }

    /// Applies one change in memory only (a checkout memloop cannot write to).
    pub fn apply_change(&mut self, change: Change, was: Option<Was>) {
        if let Some(was) = was {
            self.replaced.insert(was.slot, was);
        }
        match change {
            Change::Put(doc) => {
                self.docs.insert(doc.id.clone(), Some(doc));
            }
            Change::Del(id) => {
                self.docs.insert(id, None);
            }
        }
    }
}
