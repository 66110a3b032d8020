//! Where memloop keeps its own files on this machine, and how it writes a file safely. The
//! lowest room of the house: everything may use it, it uses nothing of memloop.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

mod lock;
mod read;
mod replace;

pub use lock::{FileLock, process_note};
#[cfg(unix)]
pub use read::open_listed_regular;
pub use read::{
    MAX_READ, RealPathError, check_within, describe_kind, open_regular, read_at_most,
    read_optional, read_regular, read_text, read_within, real_path,
};
pub use replace::{CHANGED, Guard, Stamp, Was, remove_guarded, replace_guarded};

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

/// Creates `dir` (and its parents) readable by the user alone. An existing `dir` is tightened
/// to 0700, and so is every folder between memloop's state folder and it (memloop owns those):
/// a state folder left group- or world-readable by an older version or a loose umask is fixed,
/// not kept. The common case, folders that are already right, costs one `stat` each.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let private =
            |meta: &std::fs::Metadata| meta.is_dir() && meta.permissions().mode() & 0o777 == 0o700;
        let mut owned = vec![dir.to_path_buf()];
        if let Ok(state) = state_dir()
            && let Ok(below) = dir.strip_prefix(&state)
        {
            owned.push(state.clone());
            let mut walk = state;
            for part in below.parent().into_iter().flat_map(Path::components) {
                walk.push(part);
                owned.push(walk.clone());
            }
        }
        if owned
            .iter()
            .all(|d| std::fs::symlink_metadata(d).is_ok_and(|meta| private(&meta)))
        {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        // create() leaves an existing folder's mode alone; memloop owns these, so tighten them.
        for owned_dir in &owned {
            if !std::fs::symlink_metadata(owned_dir).is_ok_and(|meta| private(&meta)) {
                std::fs::set_permissions(owned_dir, std::fs::Permissions::from_mode(0o700))?;
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
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
    write_atomic_checked(path, bytes, durable, &|| Ok(()))
}

/// Like [`write_atomic_with`], and `unchanged` runs at the last moment before the rename (the
/// new bytes written and synced): an error from it, such as "someone else changed the file",
/// leaves the file as it is. A new file follows the umask (mode 0666 less the umask).
pub fn write_atomic_checked(
    path: &Path,
    bytes: &[u8],
    durable: bool,
    unchanged: &dyn Fn() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut temp = temp_beside(path, 0o666)?;
    temp.write_all(bytes)
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    if durable {
        temp.as_file().sync_all()?;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        fs_err::set_permissions(temp.path(), meta.permissions())?;
    }
    unchanged()?;
    temp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Writes one of memloop's own state files: mode 0600 whatever was there before, in a folder
/// only the user can read.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)
            .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    }
    let mut temp = temp_beside(path, 0o600)?;
    temp.write_all(bytes)
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    temp.as_file().sync_all()?;
    temp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// A temporary file next to `path`, created with `mode` (less the umask); the folder is created
/// when missing (following the umask too).
fn temp_beside(path: &Path, mode: u32) -> anyhow::Result<tempfile::NamedTempFile> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    fs_err::create_dir_all(&dir)?;
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    builder
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))
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
    fn a_failed_last_moment_check_leaves_the_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "agent's").unwrap();
        let err = write_atomic_checked(&path, b"memloop's", true, &|| {
            anyhow::bail!("changed meanwhile")
        })
        .unwrap_err();
        assert!(err.to_string().contains("changed meanwhile"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "agent's");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
