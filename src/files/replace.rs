//! Replacing a file that another program may rewrite at the same moment (an agent saving its
//! config), without losing that program's write silently.
//!
//! POSIX has no compare-and-rename, so the window cannot be closed; it is made as small as the
//! platform allows and watched on both sides:
//! - [`Guard::take`] stamps the file (one `fstat` of an open handle: device, inode, size, and the
//!   modification and change times) and checks, through that handle, that it holds what memloop
//!   planned from. The slow part, reading the file, is done here, long before the rename.
//! - Right before the rename, the path is stamped again (one `lstat`) and compared: an atomic
//!   replace (new inode) or an in-place write (new size or times) stops the write.
//! - The rename itself is an exchange where the kernel offers one (Linux's `RENAME_EXCHANGE`),
//!   and a no-replace rename for a file that did not exist: what was replaced is still there
//!   afterwards, under the temporary name.
//! - Right after it, the replaced file is checked again through the handle (its bytes) and,
//!   after an exchange, by what the temporary name now holds. A write that slipped into the
//!   window is put back (the exchange undone, or its bytes written back) and reported; it is
//!   never lost without a report.

use std::io::{Read as _, Seek as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// What a path holds, cheaply compared: enough to notice a write without reading the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    kind: &'static str,
    len: u64,
    #[cfg(unix)]
    id: (u64, u64),
    #[cfg(unix)]
    times: (i64, i64, i64, i64),
    #[cfg(not(unix))]
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            kind: super::describe_kind(&meta.file_type()),
            len: meta.len(),
            #[cfg(unix)]
            id: (meta.dev(), meta.ino()),
            #[cfg(unix)]
            times: (
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
            ),
            #[cfg(not(unix))]
            modified: meta.modified().ok(),
        }
    }

    /// The stamp of `path` itself (a final symlink not followed); `None` when nothing is there.
    pub fn at(path: &Path) -> std::io::Result<Option<Stamp>> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Ok(Some(Stamp::of(&meta))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    #[cfg(unix)]
    fn same_file(&self, other: &Stamp) -> bool {
        self.id == other.id
    }

    #[cfg(not(unix))]
    fn same_file(&self, other: &Stamp) -> bool {
        self == other
    }
}

/// What memloop planned from, to be found at the path before it is replaced.
pub enum Was<'a> {
    Missing,
    File(&'a [u8]),
    /// A symlink (or anything memloop does not read through): its stamp alone is checked.
    Other,
}

/// A path known to hold what memloop planned from, with its stamp and (for a file) an open
/// handle, so the replaced file can be looked at again after the rename.
pub struct Guard {
    path: PathBuf,
    display: String,
    stamp: Option<Stamp>,
    held: Option<(std::fs::File, Vec<u8>)>,
}

/// The error every lost race reports; tests and users look for these words.
pub const CHANGED: &str = "changed while memloop was writing; run again";

fn changed(display: &str, detail: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{display} {CHANGED} (another program, such as an agent rewriting its config, {detail})"
    )
}

impl Guard {
    /// Stamps `path` and checks it still holds `was`; a lost race is an error saying so.
    pub fn take(path: &Path, display: &str, was: Was) -> anyhow::Result<Guard> {
        let differs = || changed(display, "changed it after memloop read it");
        let guard = |stamp, held| Guard {
            path: path.to_path_buf(),
            display: display.to_owned(),
            stamp,
            held,
        };
        match was {
            Was::Missing => match Stamp::at(path)? {
                None => Ok(guard(None, None)),
                Some(_) => Err(differs()),
            },
            Was::Other => Ok(guard(Stamp::at(path)?, None)),
            Was::File(expected) => {
                let mut file = match super::open_regular(path) {
                    Ok(file) => file,
                    Err(_) => return Err(differs()),
                };
                let stamp = Stamp::of(&file.metadata()?);
                // The path must still lead to the handle's file, and the file hold the bytes.
                if Stamp::at(path)?.is_none_or(|now| !now.same_file(&stamp)) {
                    return Err(differs());
                }
                let bytes = read_all(&mut file, display)?;
                if bytes != expected {
                    return Err(differs());
                }
                Ok(guard(Some(stamp), Some((file, bytes))))
            }
        }
    }

    /// Right before the rename: one `lstat`, compared with the stamp.
    pub fn check(&self) -> anyhow::Result<()> {
        if Stamp::at(&self.path)? == self.stamp {
            Ok(())
        } else {
            Err(changed(&self.display, "changed it after memloop read it"))
        }
    }

    /// Whether the file the guard holds open was written since it was stamped (an in-place
    /// write that went to the file a rename just replaced).
    fn written_since(&mut self) -> anyhow::Result<bool> {
        let Some((file, expected)) = &mut self.held else {
            return Ok(false);
        };
        let now = read_all(file, &self.display)?;
        Ok(now != *expected)
    }
}

fn read_all(file: &mut std::fs::File, display: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.seek(std::io::SeekFrom::Start(0))?;
    file.take(super::MAX_READ + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {display}"))?;
    Ok(bytes)
}

/// How the rename went.
enum Renamed {
    /// The old file now sits at the temporary name.
    Exchanged,
    /// The old file (if any) is gone from the folder; only a held handle still reaches it.
    Replaced,
}

/// Renames `temp` to `path`, exchanging the two where the kernel can, and refusing to replace
/// anything when `path` should not exist.
fn rename_into(temp: &Path, path: &Path, exists: bool) -> std::io::Result<Renamed> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        let flags = if exists {
            RenameFlags::EXCHANGE
        } else {
            RenameFlags::NOREPLACE
        };
        match renameat_with(CWD, temp, CWD, path, flags) {
            Ok(()) if exists => return Ok(Renamed::Exchanged),
            Ok(()) => return Ok(Renamed::Replaced),
            Err(rustix::io::Errno::EXIST) => {
                return Err(std::io::ErrorKind::AlreadyExists.into());
            }
            Err(rustix::io::Errno::NOENT) if exists => {
                return Err(std::io::ErrorKind::NotFound.into());
            }
            // A file system without the flag (some network and overlay file systems): the
            // plain rename below, with the check right after it.
            Err(_) => {}
        }
    }
    std::fs::rename(temp, path)?;
    Ok(Renamed::Replaced)
}

/// Puts `bytes` at the guarded path through a temporary file in the same folder (permissions of
/// the file it replaces kept, a new one following the umask), within the smallest window the
/// platform allows; see the module's comment. A lost race is an error saying so, and the other
/// program's version is what the path holds afterwards.
pub fn replace_guarded(guard: Guard, bytes: &[u8], durable: bool) -> anyhow::Result<()> {
    replace_racing(guard, bytes, durable, &|| {})
}

/// [`replace_guarded`] with `window` run between the last check and the rename: where tests put
/// the other program's write that the check can no longer see.
fn replace_racing(
    mut guard: Guard,
    bytes: &[u8],
    durable: bool,
    window: &dyn Fn(),
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let path = guard.path.clone();
    let mut temp = super::temp_beside(&path, 0o666)?;
    temp.write_all(bytes)
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    if durable {
        temp.as_file().sync_all()?;
    }
    if let Ok(meta) = std::fs::metadata(&path) {
        fs_err::set_permissions(temp.path(), meta.permissions())?;
    }
    let ours = Stamp::of(&temp.as_file().metadata()?);
    let temp = temp.into_temp_path();
    guard.check()?;
    window();
    let renamed = match rename_into(&temp, &path, guard.stamp.is_some()) {
        Ok(renamed) => renamed,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound
            ) =>
        {
            return Err(changed(
                &guard.display,
                "created or removed it as memloop was writing; nothing was written",
            ));
        }
        Err(err) => {
            return Err(anyhow::Error::new(err).context(format!("cannot write {}", path.display())));
        }
    };
    // What was replaced: still the file memloop read, with the bytes memloop read?
    let replaced_other = match renamed {
        Renamed::Exchanged => Stamp::at(&temp)?
            .zip(guard.stamp.as_ref())
            .is_none_or(|(now, was)| !now.same_file(was)),
        Renamed::Replaced => false,
    };
    if !replaced_other && !guard.written_since()? {
        if matches!(renamed, Renamed::Replaced) {
            // The temporary name is gone with the rename; nothing to clean up.
            let _ = temp.keep();
        }
        return Ok(());
    }
    // The other program wrote in the window: its version goes back.
    let still_ours = Stamp::at(&path)?.is_some_and(|now| now.same_file(&ours));
    let put_back = match renamed {
        Renamed::Exchanged if still_ours => rename_into(&temp, &path, true).map(|_| ()).is_ok(),
        Renamed::Replaced if still_ours => match &mut guard.held {
            Some((file, _)) => {
                let theirs = read_all(file, &guard.display)?;
                super::write_atomic_checked(&path, &theirs, durable, &|| match Stamp::at(&path)? {
                    Some(now) if now.same_file(&ours) => Ok(()),
                    _ => anyhow::bail!("changed again"),
                })
                .is_ok()
            }
            None => false,
        },
        // Someone wrote the path again after memloop: theirs is what it holds.
        _ => true,
    };
    if matches!(renamed, Renamed::Replaced) {
        let _ = temp.keep();
    }
    if put_back {
        Err(changed(
            &guard.display,
            "wrote it as memloop replaced it; its version was put back, memloop's was not written",
        ))
    } else {
        Err(changed(
            &guard.display,
            "wrote it as memloop replaced it, and memloop could not put that version back: check the file",
        ))
    }
}

/// Removes the guarded path within the same window as [`replace_guarded`]: the file is moved
/// aside first and deleted only when it was still what memloop read; else it goes back.
pub fn remove_guarded(mut guard: Guard) -> anyhow::Result<()> {
    let path = guard.path.clone();
    guard.check()?;
    if guard.stamp.is_none() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let aside = tempfile::Builder::new()
        .prefix(&format!(
            ".{}.",
            path.file_name().unwrap_or_default().to_string_lossy()
        ))
        .suffix(".tmp")
        .make_in(dir, |p| Ok(p.to_path_buf()))
        .with_context(|| format!("cannot remove {}", path.display()))?
        .into_temp_path();
    // `make_in` only chose a free name: nothing is there yet, and the rename is a plain move.
    let _ = std::fs::remove_file(&aside);
    std::fs::rename(&path, &aside).with_context(|| format!("cannot remove {}", path.display()))?;
    let moved_other = Stamp::at(&aside)?
        .zip(guard.stamp.as_ref())
        .is_none_or(|(now, was)| !now.same_file(was));
    if !moved_other && !guard.written_since()? {
        return Ok(());
    }
    let put_back = rename_into(&aside, &path, false).is_ok();
    if put_back {
        let _ = aside.keep();
    }
    Err(changed(
        &guard.display,
        if put_back {
            "wrote it as memloop removed it; it was put back"
        } else {
            "wrote it as memloop removed it, and memloop could not put it back: check the file"
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_replace_writes_when_nothing_changed_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "old").unwrap();
        let guard = Guard::take(&path, "a.json", Was::File(b"old")).unwrap();
        replace_guarded(guard, b"new", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let guard = Guard::take(&dir.path().join("b.json"), "b.json", Was::Missing).unwrap();
        std::fs::write(dir.path().join("b.json"), "theirs").unwrap();
        let err = replace_guarded(guard, b"ours", false).unwrap_err();
        assert!(err.to_string().contains(CHANGED), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.json")).unwrap(),
            "theirs"
        );
        let guard = Guard::take(&path, "a.json", Was::File(b"new")).unwrap();
        remove_guarded(guard).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// The other program writes after the last check, right before the rename: in place (into
    /// the file the rename replaces) or by an atomic replace of its own. Either is reported, and
    /// its version is what the file holds afterwards.
    #[test]
    fn a_write_inside_the_window_is_reported_and_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "old").unwrap();
        let guard = Guard::take(&path, "a.json", Was::File(b"old")).unwrap();
        let in_place = || {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all(b"AGT").unwrap();
        };
        let err = replace_racing(guard, b"memloop's", false, &in_place).unwrap_err();
        assert!(err.to_string().contains(CHANGED), "{err}");
        assert!(err.to_string().contains("put back"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "AGT");

        let guard = Guard::take(&path, "a.json", Was::File(b"AGT")).unwrap();
        let atomic = || {
            std::fs::write(dir.path().join("x"), "agent's new").unwrap();
            std::fs::rename(dir.path().join("x"), &path).unwrap();
        };
        let err = replace_racing(guard, b"memloop's", false, &atomic).unwrap_err();
        assert!(err.to_string().contains(CHANGED), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "agent's new");
        // No temporary file is left behind either way.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_write_after_the_stamp_is_reported_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "old").unwrap();
        // In place (same size), after the stamp: the check before the rename sees it.
        let guard = Guard::take(&path, "a.json", Was::File(b"old")).unwrap();
        std::fs::write(&path, "OLD").unwrap();
        let err = replace_guarded(guard, b"new", false).unwrap_err();
        assert!(err.to_string().contains(CHANGED), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "OLD");
        // Atomic replace, after the stamp.
        let guard = Guard::take(&path, "a.json", Was::File(b"OLD")).unwrap();
        std::fs::write(dir.path().join("x"), "agent").unwrap();
        std::fs::rename(dir.path().join("x"), &path).unwrap();
        let err = remove_guarded(guard).unwrap_err();
        assert!(err.to_string().contains(CHANGED), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "agent");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
