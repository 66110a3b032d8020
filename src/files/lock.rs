//! One exclusive file lock, for the engine's repository lock and the server's write lock: a
//! bounded wait that names the holder, from the note each holder leaves in the lock file.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

/// An exclusive lock on a file, released when dropped (or by the kernel when the process dies).
pub struct FileLock {
    file: std::fs::File,
}

impl FileLock {
    fn open(path: &Path) -> anyhow::Result<std::fs::File> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).read(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .with_context(|| format!("could not open the lock file {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            if file
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o077 != 0)
            {
                file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            }
        }
        Ok(file)
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

    /// Waits at most `bound` for the lock, then leaves `holder` (who this process is) in the
    /// lock file for the next waiter to name. Returns the lock and, when it had to wait, who held
    /// it then; a timeout names the holder.
    pub fn acquire_bounded(
        path: &Path,
        bound: std::time::Duration,
        holder: &str,
    ) -> anyhow::Result<(FileLock, Option<String>)> {
        let file = FileLock::open(path)?;
        let started = std::time::Instant::now();
        let mut waited_for: Option<String> = None;
        let mut had_to_wait = false;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    let current = read_holder(&file);
                    if started.elapsed() >= bound {
                        let who = current
                            .or(waited_for)
                            .unwrap_or_else(|| "a process that did not say who it is".into());
                        anyhow::bail!(
                            "another memloop is working on this repository ({who}) and still held the lock {} after {} s; \
                             let it finish and run again",
                            path.display(),
                            bound.as_secs_f32()
                        );
                    }
                    had_to_wait = true;
                    if waited_for.is_none() {
                        waited_for = current;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::Error(err)) => {
                    return Err(err).with_context(|| format!("could not lock {}", path.display()));
                }
            }
        }
        // A holder seen before it wrote its note is still another memloop.
        let waited = had_to_wait
            .then(|| waited_for.unwrap_or_else(|| "a memloop that did not say who it is".into()));
        // Reading the holder's note moved the cursor: the note goes at the start.
        let mut handle = &file;
        let _ = file.set_len(0);
        let _ = std::io::Seek::seek(&mut handle, std::io::SeekFrom::Start(0));
        let _ = handle.write_all(format!("{holder}\n").as_bytes());
        Ok((FileLock { file }, waited))
    }
}

impl FileLock {
    /// Who holds the lock at `path` right now (their note), without taking it; `None` when
    /// nobody does or the lock file does not exist.
    pub fn holder(path: &Path) -> Option<String> {
        let file = super::open_regular(path).ok()?;
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = file.unlock();
                None
            }
            Err(std::fs::TryLockError::WouldBlock) => Some(
                read_holder(&file).unwrap_or_else(|| "a memloop that did not say who it is".into()),
            ),
            Err(std::fs::TryLockError::Error(_)) => None,
        }
    }
}

/// The note the lock's current holder left in the lock file, if any.
fn read_holder(mut file: &std::fs::File) -> Option<String> {
    use std::io::{Read as _, Seek as _};
    let mut text = String::new();
    file.seek(std::io::SeekFrom::Start(0)).ok()?;
    file.take(512).read_to_string(&mut text).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Who this process is, for another process waiting on a lock: its pid and command line.
pub fn process_note() -> String {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut line = args.join(" ");
    if let Some(first) = args.first()
        && let Some(name) = Path::new(first).file_name()
    {
        line = std::iter::once(name.to_string_lossy().into_owned())
            .chain(args[1..].iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
    }
    format!("pid {}: {line}", std::process::id())
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_bounded_wait_names_the_holder_and_reports_having_waited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let short = std::time::Duration::from_millis(200);
        let (held, waited) =
            FileLock::acquire_bounded(&path, short, "pid 1: memloop sync").unwrap();
        assert_eq!(waited, None);
        assert_eq!(
            FileLock::holder(&path).as_deref(),
            Some("pid 1: memloop sync")
        );
        let err = FileLock::acquire_bounded(&path, short, "pid 2: memloop init")
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("another memloop is working on this repository (pid 1: memloop sync)"),
            "{err}"
        );
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(held);
        });
        let (_second, waited) =
            FileLock::acquire_bounded(&path, std::time::Duration::from_secs(5), "pid 2").unwrap();
        release.join().unwrap();
        assert_eq!(waited.as_deref(), Some("pid 1: memloop sync"));
        assert_eq!(FileLock::holder(&path).as_deref(), Some("pid 2"));
    }
}
