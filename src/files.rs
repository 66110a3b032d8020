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
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home_dir()?.join(".local/state"),
    };
    Ok(base.join("memloop"))
}

/// Creates `dir` (and its parents) readable by the user alone.
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    fs_err::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Writes through a temporary file in the same folder and renames it into place, keeping the
/// permissions of the file it replaces: a crash leaves the old bytes or the new, never half.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs_err::create_dir_all(dir)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".memloop-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
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
