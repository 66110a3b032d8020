//! The crash-safety and concurrency primitives: one write lock per repository and atomic file
//! replacement. A reader never takes the lock: every file it can see was renamed into place
//! complete, so it reads either the old or the new bytes, never half of a write.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// Exclusive while held; released when dropped (or when the process dies, by the kernel).
pub struct WriteLock {
    file: File,
}

impl WriteLock {
    pub fn acquire(path: &Path) -> anyhow::Result<WriteLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("could not open the lock file {}", path.display()))?;
        file.lock()
            .with_context(|| format!("could not lock {}", path.display()))?;
        Ok(WriteLock { file })
    }

    /// The lock if nobody holds it right now; `None` when another writer does.
    pub fn try_acquire(path: &Path) -> anyhow::Result<Option<WriteLock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("could not open the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(WriteLock { file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(err)) => {
                Err(err).with_context(|| format!("could not lock {}", path.display()))
            }
        }
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Temporary files are dot-files ending in `.tmp` beside their target: scans skip them and
/// `.memloop/.gitignore` keeps a crashed writer's leftover out of commits.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Replaces `path` with `bytes` so that a crash at any point leaves either the old file or the
/// new one. With `durable`, the data reaches the disk before the rename, so after a power loss
/// the name never points at missing data; derived files skip that cost, they are rebuilt.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .context("a file to write has a parent folder")?;
    let name = path
        .file_name()
        .context("a file to write has a name")?
        .to_string_lossy();
    let temp: PathBuf = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file =
            File::create(&temp).with_context(|| format!("could not create {}", temp.display()))?;
        if let Ok(old) = fs::metadata(path) {
            // A reviewer may have made the file read-only for the group; keep what they chose.
            let _ = file.set_permissions(old.permissions());
        }
        file.write_all(bytes)
            .and_then(|()| if durable { file.sync_data() } else { Ok(()) })
            .with_context(|| format!("could not write {}", temp.display()))?;
        fs::rename(&temp, path)
            .with_context(|| format!("could not move {} to {}", temp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `2026-11-30T09:55:01.123Z`: fixed width, so comparing the strings compares the times.
pub fn timestamp(millis: u64) -> String {
    let (date, secs_of_day) = civil(millis);
    format!(
        "{date}T{:02}:{:02}:{:02}.{:03}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        millis % 1000
    )
}

/// `n-20261130-095501-7f3a9c`: sorts by creation time; the random tail keeps two agents (or two
/// branches) storing in the same second apart.
pub fn new_id(prefix: &str, millis: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (date, secs) = civil(millis);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(millis);
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let compact_date: String = date.chars().filter(|c| *c != '-').collect();
    format!(
        "{prefix}-{compact_date}-{:02}{:02}{:02}-{:06x}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        hasher.finish() & 0xff_ffff
    )
}

/// (`YYYY-MM-DD`, seconds into that day) in UTC.
fn civil(millis: u64) -> (String, u64) {
    let secs = millis / 1000;
    let days = (secs / 86_400) as i64;
    // Howard Hinnant's days-to-civil, valid for every date this program will see.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (format!("{year:04}-{month:02}-{day:02}"), secs % 86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_ids() {
        // 2026-11-30T09:55:01.123Z
        let millis = 1_796_032_501_123;
        assert_eq!(timestamp(millis), "2026-11-30T09:55:01.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
        let id = new_id("n", millis);
        assert!(id.starts_with("n-20261130-095501-"), "{id}");
        assert_eq!(id.len(), "n-20261130-095501-7f3a9c".len());
        assert_ne!(new_id("n", millis), new_id("n", millis));
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        write_atomic(&path, b"one", true).unwrap();
        write_atomic(&path, b"two", false).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"]);
    }

    #[test]
    fn the_lock_excludes_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let held = WriteLock::acquire(&path).unwrap();
        let other = File::options().write(true).open(&path).unwrap();
        assert!(other.try_lock().is_err());
        drop(held);
        assert!(other.try_lock().is_ok());
    }
}
