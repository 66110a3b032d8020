//! The files migrations read and rewrite, held in memory: each path is read once, every
//! migration sees the edits of the ones before it, and the result becomes one list of engine
//! `Change`s, written in one transaction (or shown as diffs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::edit::json::{Dialect, JsonDoc};
use crate::edit::text::Encoding;
use crate::edit::toml::TomlDoc;
use crate::engine::{Change, Content, PlanError};
use crate::instructions::{Found, inspect};
use crate::target::{Desired, Scope, Target};

#[derive(Debug, Clone)]
pub struct Slot {
    pub display: String,
    pub scope: Scope,
    pub before: Content,
    pub after: Content,
    /// The migrations that changed this file, in order.
    pub by: Vec<&'static str>,
    /// What the file was before any memloop touched it, when a migration knows (for uninstall).
    pub original: Option<Content>,
}

#[derive(Debug, Clone)]
pub struct Files {
    root: PathBuf,
    home: PathBuf,
    slots: BTreeMap<PathBuf, Slot>,
    running: Option<&'static str>,
}

impl Files {
    pub fn new(root: &Path, home: &Path) -> Files {
        Files {
            root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
            home: home.to_path_buf(),
            slots: BTreeMap::new(),
            running: None,
        }
    }

    /// Edits made from now on are credited to `id`.
    pub fn begin(&mut self, id: &'static str) {
        self.running = Some(id);
    }

    pub fn end(&mut self) {
        self.running = None;
    }

    fn scope_and_display(&self, path: &Path) -> (Scope, String) {
        let canonical_parent = path
            .parent()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .map(|p| p.join(path.file_name().unwrap_or_default()));
        for candidate in [Some(path.to_path_buf()), canonical_parent]
            .into_iter()
            .flatten()
        {
            if let Ok(rel) = candidate.strip_prefix(&self.root) {
                return (Scope::Project, rel.display().to_string());
            }
        }
        match path.strip_prefix(&self.home) {
            Ok(rel) => (Scope::User, format!("~/{}", rel.display())),
            Err(_) => (Scope::User, path.display().to_string()),
        }
    }

    /// The path whose bytes `path` stands for, every symlink on the way resolved. A project file
    /// never resolves outside the repository (or into .git), a user file never out of its agent's
    /// folder, and anything but a regular file is refused (`engine::place`).
    pub fn resolve(&self, path: &Path) -> Result<PathBuf, PlanError> {
        let (scope, display) = self.scope_and_display(path);
        Ok(crate::engine::place::confine(
            &self.root, path, scope, &display, false,
        )?)
    }

    /// The slot of exactly `path` (a symlink stays a link), read from disk on first use.
    fn slot(&mut self, path: &Path, display_as: &Path) -> Result<&mut Slot, PlanError> {
        if !self.slots.contains_key(path) {
            let (scope, display) = self.scope_and_display(display_as);
            let content = match inspect(path)? {
                Found::Missing => Content::Missing,
                Found::Link { target, .. } => Content::Link { target },
                Found::File { bytes } => match String::from_utf8(bytes) {
                    Ok(text) => Content::File { text },
                    Err(err) => {
                        return Err(Encoding::decode(err.as_bytes(), &display)
                            .err()
                            .map(PlanError::from)
                            .unwrap_or_else(|| anyhow::anyhow!("{display}: cannot read").into()));
                    }
                },
            };
            self.slots.insert(
                path.to_path_buf(),
                Slot {
                    display,
                    scope,
                    before: content.clone(),
                    after: content,
                    by: Vec::new(),
                    original: None,
                },
            );
        }
        Ok(self.slots.get_mut(path).expect("inserted above"))
    }

    /// What is at `path` now (after the edits so far), without following a final symlink.
    pub fn entry(&mut self, path: &Path) -> Result<Content, PlanError> {
        Ok(self.slot(path, path)?.after.clone())
    }

    /// The text behind `path` (following an in-repository symlink), decoded: no BOM, LF line
    /// endings. `None` when there is no file.
    pub fn text(&mut self, path: &Path) -> Result<Option<(String, Encoding)>, PlanError> {
        let real = self.resolve(path)?;
        let slot = self.slot(&real, path)?;
        match &slot.after {
            Content::File { text } => {
                let display = slot.display.clone();
                Ok(Some(Encoding::decode(text.as_bytes(), &display)?))
            }
            _ => Ok(None),
        }
    }

    /// How `path` is shown to the user.
    pub fn display(&self, path: &Path) -> String {
        self.scope_and_display(path).1
    }

    /// Puts `content` at exactly `path`.
    pub fn put(&mut self, path: &Path, content: Content) -> Result<(), PlanError> {
        let running = self.running;
        let slot = self.slot(path, path)?;
        if slot.after != content {
            slot.after = content;
            if let Some(id) = running
                && !slot.by.contains(&id)
            {
                slot.by.push(id);
            }
        }
        Ok(())
    }

    /// Notes what `path` was before any memloop touched it (`Content::Missing`: memloop made
    /// it), so uninstall can take memloop's part back.
    pub fn set_original(&mut self, path: &Path, original: Content) -> Result<(), PlanError> {
        self.slot(path, path)?.original = Some(original);
        Ok(())
    }

    /// Writes `text` (LF line endings) to the file behind `path`, in `encoding`.
    pub fn write_text(
        &mut self,
        path: &Path,
        text: &str,
        encoding: Encoding,
    ) -> Result<(), PlanError> {
        let real = self.resolve(path)?;
        self.slot(&real, path)?;
        let text = String::from_utf8(encoding.encode(text)).expect("encoding keeps UTF-8");
        self.put(&real, Content::File { text })
    }

    /// The JSON document behind `path`, or `None` when there is no file.
    pub fn json(
        &mut self,
        path: &Path,
        dialect: Dialect,
    ) -> Result<Option<(JsonDoc, Encoding)>, PlanError> {
        let display = self.display(path);
        match self.text(path)? {
            None => Ok(None),
            Some((text, encoding)) => {
                Ok(Some((JsonDoc::parse(&text, dialect, &display)?, encoding)))
            }
        }
    }

    /// The JSON document behind `path`; an empty one when there is no file.
    pub fn json_or_new(
        &mut self,
        path: &Path,
        dialect: Dialect,
    ) -> Result<(JsonDoc, Encoding), PlanError> {
        let display = self.display(path);
        Ok(self.json(path, dialect)?.unwrap_or_else(|| {
            (
                JsonDoc::parse("", dialect, &display).expect("{} parses"),
                Encoding::default(),
            )
        }))
    }

    /// The TOML document behind `path`, or `None` when there is no file.
    pub fn toml(&mut self, path: &Path) -> Result<Option<(TomlDoc, Encoding)>, PlanError> {
        let display = self.display(path);
        match self.text(path)? {
            None => Ok(None),
            Some((text, encoding)) => Ok(Some((TomlDoc::parse(&text, &display)?, encoding))),
        }
    }

    /// The changes made so far, one per file that differs from what is on disk, with the
    /// migrations that made it and the file's pre-memloop original when one is known.
    pub fn changes(&self) -> Vec<(Change, Vec<&'static str>, Option<Content>)> {
        self.slots
            .iter()
            .filter(|(_, slot)| slot.before != slot.after)
            .map(|(path, slot)| {
                let change = Change {
                    target: Target {
                        path: path.clone(),
                        display: slot.display.clone(),
                        scope: slot.scope,
                        agents: Vec::new(),
                        desired: Desired::Whole {
                            content: String::new(),
                        },
                        note: None,
                    },
                    write_path: path.clone(),
                    before: slot.before.clone(),
                    after: slot.after.clone(),
                };
                (change, slot.by.clone(), slot.original.clone())
            })
            .collect()
    }

    /// The files `id` changed (shown to the user), and whether one lies outside the repository.
    pub fn touched_by(&self, id: &str) -> (Vec<String>, bool) {
        let mut displays = Vec::new();
        let mut user = false;
        for slot in self.slots.values() {
            if slot.by.contains(&id) && slot.before != slot.after {
                displays.push(slot.display.clone());
                user |= slot.scope == Scope::User;
            }
        }
        (displays, user)
    }
}
