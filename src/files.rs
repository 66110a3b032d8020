//! Where memloop keeps its own files on this machine, and how it writes a file safely. The
//! lowest room of the house: everything may use it, it uses nothing of memloop.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The user's home directory, from `HOME` (or the platform's notion of it).
pub fn home_dir() -> anyhow::Result<PathBuf> {
    std::env::home_dir()
        .filter(|home| !home.as_os_str().is_empty())
        .ok_or_else(|| anyhow::anyhow!("cannot find your home directory; set HOME"))
}

/// `$XDG_STATE_HOME/memloop`, else `~/.local/state/memloop`: per user, never a shared temp dir.
pub fn state_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").map(PathBuf::from) {
        // The XDG spec says relative values are invalid and must be ignored.
        Some(dir) if dir.is_absolute() => dir,
        _ => home_dir()?.join(".local/state"),
    };
    Ok(base.join("memloop"))
}

/// Creates `dir` (and its parents) readable by the user alone; an existing one is tightened to
/// 0700. The common case, a dir that is already right, costs one `stat`.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let private =
            |meta: &std::fs::Metadata| meta.is_dir() && meta.permissions().mode() & 0o777 == 0o700;
        if std::fs::metadata(dir).is_ok_and(|meta| private(&meta)) {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // create() leaves an existing dir's mode alone; memloop owns this one, so tighten it.
        if !std::fs::metadata(dir).is_ok_and(|meta| private(&meta)) {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// An exclusive lock on a file, released when dropped (or by the kernel when the process dies).
pub struct FileLock {
    file: std::fs::File,
}

impl FileLock {
    fn open(path: &Path) -> anyhow::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("could not open the lock file {}", path.display()))
    }

    /// Waits until the lock is free.
    pub fn acquire(path: &Path) -> anyhow::Result<FileLock> {
        let file = FileLock::open(path)?;
        file.lock()
            .with_context(|| format!("could not lock {}", path.display()))?;
        Ok(FileLock { file })
    }

    /// The lock if nobody holds it right now; `None` when someone else does.
    pub fn try_acquire(path: &Path) -> anyhow::Result<Option<FileLock>> {
        let file = FileLock::open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(FileLock { file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(err)) => {
                Err(err).with_context(|| format!("could not lock {}", path.display()))
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Writes durably through a temporary file in the same folder renamed into place, keeping the
/// permissions of the file it replaces: a crash leaves the old bytes or the new, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, bytes, true)
}

/// Like [`write_atomic`]; without `durable` the data may reach the disk after the rename, which
/// suits derived files (caches) that are rebuilt when lost. The temporary file is named
/// `.<name>.<random>.tmp`, so scans can skip a crashed writer's leftover.
pub fn write_atomic_with(path: &Path, bytes: &[u8], durable: bool) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    fs_err::create_dir_all(dir)?;
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    if durable {
        temp.as_file().sync_all()?;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        fs_err::set_permissions(temp.path(), meta.permissions())?;
    } else {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o644))?;
        }
    }
    temp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Whether a file name is one of [`write_atomic_with`]'s temporary files.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_keeps_permissions_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        write_atomic(&path, b"one").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        write_atomic_with(&path, b"two", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"]);
        assert!(is_temp_name(".a.md.Xy12ab.tmp") && !is_temp_name("a.md"));
    }

    #[test]
    fn the_lock_excludes_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = FileLock::acquire(&path).unwrap();
        let other = std::fs::File::options().write(true).open(&path).unwrap();
        assert!(other.try_lock().is_err());
        drop(held);
        assert!(other.try_lock().is_ok());
    }
}
