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
        let file = std::fs::File::open(path).ok()?;
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

/// What a file-system entry is, in words a refusal can use.
pub fn describe_kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_symlink() {
        "a symlink"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn not_regular(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = if meta.is_dir() {
        std::io::ErrorKind::IsADirectory
    } else {
        std::io::ErrorKind::InvalidInput
    };
    Err(std::io::Error::new(
        kind,
        format!(
            "{} is {}, not a regular file; memloop reads only regular files",
            path.display(),
            describe_kind(&meta.file_type())
        ),
    ))
}

/// Reads a regular file (following symlinks) and refuses anything else without blocking: the
/// kind is checked before opening, the file is opened non-blocking, and checked again on the
/// open handle, so a FIFO or a device swapped in meanwhile is never read from.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    not_regular(path, &std::fs::metadata(path)?)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let mut file = options.open(path)?;
    not_regular(path, &file.metadata()?)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Why a path has no real location.
#[derive(Debug)]
pub enum RealPathError {
    /// Following links did not end (a loop, or more than 40 links).
    Loop(PathBuf),
    /// A component is not a folder (a file, a FIFO...), so nothing below it can exist.
    NotAFolder(PathBuf),
    Io(PathBuf, std::io::Error),
}

impl std::fmt::Display for RealPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RealPathError::Loop(at) => write!(f, "the symlinks at {} form a loop", at.display()),
            RealPathError::NotAFolder(at) => write!(f, "{} is not a folder", at.display()),
            RealPathError::Io(at, err) => write!(f, "cannot read {}: {err}", at.display()),
        }
    }
}

/// Where `path` really is: every symlink on the way resolved, component by component (like
/// `realpath -m`), so a folder link two levels up counts as much as a link at the end. A path
/// that does not exist (yet) resolves as far as it exists, the rest appended as written.
pub fn real_path(path: &Path) -> Result<PathBuf, RealPathError> {
    use std::path::Component;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|err| RealPathError::Io(path.to_path_buf(), err))?
            .join(path)
    };
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    let push_all = |pending: &mut Vec<std::ffi::OsString>, p: &Path| {
        // Reversed, so that `pop` takes the next component.
        for part in p.components().rev() {
            pending.push(part.as_os_str().to_owned());
        }
    };
    push_all(&mut pending, &absolute);
    let mut done = PathBuf::new();
    let mut links = 0;
    let mut exists = true;
    while let Some(part) = pending.pop() {
        let part_path = Path::new(&part);
        match part_path.components().next() {
            Some(Component::RootDir | Component::Prefix(_)) => {
                done = part_path.to_path_buf();
                continue;
            }
            Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                done.pop();
                continue;
            }
            Some(Component::Normal(_)) => {}
        }
        let next = done.join(&part);
        if !exists {
            done = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                exists = false;
                done = next;
            }
            Err(err) if err.raw_os_error() == Some(libc_enotdir()) => {
                return Err(RealPathError::NotAFolder(done));
            }
            Err(err) => return Err(RealPathError::Io(next, err)),
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return Err(RealPathError::Loop(path.to_path_buf()));
                }
                let target = std::fs::read_link(&next)
                    .map_err(|err| RealPathError::Io(next.clone(), err))?;
                push_all(&mut pending, &target);
            }
            Ok(meta) => {
                if !meta.is_dir() && !pending.is_empty() {
                    return Err(RealPathError::NotAFolder(next));
                }
                done = next;
            }
        }
    }
    Ok(done)
}

fn libc_enotdir() -> i32 {
    #[cfg(unix)]
    {
        libc::ENOTDIR
    }
    #[cfg(not(unix))]
    {
        -1
    }
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

    /// Runs `f` on a thread and fails (instead of hanging) when it takes longer than 5 s.
    #[cfg(unix)]
    fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(f()));
        receive
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("blocked: a non-regular file was opened for a blocking read")
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read_and_nothing_else_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("settings.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let link = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let folder = dir.path().join("folder.json");
        std::fs::create_dir(&folder).unwrap();
        let (a, b, c) = (fifo.clone(), link.clone(), folder.clone());
        let errors = within_seconds(move || [&a, &b, &c].map(|p| read_regular(p).unwrap_err()));
        assert!(
            errors[0]
                .to_string()
                .contains("is a FIFO (named pipe), not a regular file")
        );
        assert!(errors[1].to_string().contains("is a character device"));
        assert_eq!(errors[2].kind(), std::io::ErrorKind::IsADirectory);
        let file = dir.path().join("ok.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(read_regular(&file).unwrap(), b"{}");
    }

    #[cfg(unix)]
    #[test]
    fn real_path_resolves_every_component_and_the_missing_rest() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("real/inner")).unwrap();
        symlink("real", base.join("up")).unwrap();
        symlink("../up/inner", base.join("real/down")).unwrap();
        assert_eq!(
            real_path(&base.join("up/down/x/y.json")).unwrap(),
            base.join("real/inner/x/y.json")
        );
        assert_eq!(
            real_path(&base.join("up/./inner/../inner")).unwrap(),
            base.join("real/inner")
        );
        symlink("nowhere/file", base.join("dangling")).unwrap();
        assert_eq!(
            real_path(&base.join("dangling")).unwrap(),
            base.join("nowhere/file")
        );
        symlink("self", base.join("self")).unwrap();
        assert!(matches!(
            real_path(&base.join("self/x")),
            Err(RealPathError::Loop(_))
        ));
        std::fs::write(base.join("plain"), "").unwrap();
        assert!(matches!(
            real_path(&base.join("plain/x")),
            Err(RealPathError::NotAFolder(_))
        ));
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
