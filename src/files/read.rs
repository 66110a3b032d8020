//! Reading without blocking, and where a path really is: only regular files are opened, and
//! every symlink on the way to a path can be resolved, component by component.

use std::path::{Path, PathBuf};

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

/// The most memloop reads of one file through the door: far above any config, transcript
/// row or note it reads whole (Claude Code's `~/.claude.json` runs to megabytes), far below
/// what would hurt (`/dev/zero` behind a symlink never gets this far; a runaway log might).
pub const MAX_READ: u64 = 64 << 20;

/// Opens a regular file (following symlinks) for reading and refuses anything else without
/// blocking: the kind is checked before opening, the file is opened non-blocking, and checked
/// again on the open handle, so a FIFO or a device swapped in meanwhile is never read from.
///
/// This is the door every read of memloop goes through; prefer the readers below it
/// ([`read_regular`], [`read_text`], [`read_within`], [`read_optional`]), which also bound
/// the size. Only readers that stream a file from an offset (the gate's logs) open it here.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    not_regular(path, &std::fs::metadata(path)?)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    not_regular(path, &file.metadata()?)?;
    Ok(file)
}

/// Opens a file that a folder's listing named a regular file, in two calls (open, fstat): not
/// following a symlink and without blocking, so a link or a FIFO swapped in meanwhile is
/// refused rather than followed or waited on. For readers of many small files (the notes);
/// anything that is not a regular file is an error here, to be looked at with
/// [`open_regular`]'s care.
#[cfg(unix)]
pub fn open_listed_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    not_regular(path, &meta)?;
    Ok((file, meta))
}

/// Reads a whole regular file of at most [`MAX_READ`] bytes; see [`open_regular`].
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    read_at_most(path, MAX_READ)
}

/// Reads a whole regular file of at most `max` bytes; a larger one is refused (naming the file
/// and the bound), never cut.
pub fn read_at_most(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    open_regular(path)?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is larger than {max} bytes; memloop does not read a file that large",
                path.display()
            ),
        ));
    }
    Ok(bytes)
}

/// Reads a whole regular file as UTF-8 text (at most [`MAX_READ`] bytes).
pub fn read_text(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_regular(path)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// Like [`read_text`], with a missing file as `None`: the readers for which "not there" is an
/// answer, and anything else (a FIFO, a folder, a device, too large) an error naming the file.
pub fn read_optional(path: &Path) -> std::io::Result<Option<String>> {
    match read_text(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        other => other.map(Some),
    }
}

/// Like [`read_optional`], where every symlink on the way to `path` must resolve inside `place`
/// (the repository, or the agent's folder for a user file): see [`check_within`].
pub fn read_within(path: &Path, place: &Path) -> std::io::Result<Option<String>> {
    check_within(path, place)?;
    read_optional(path)
}

/// Refuses, before anything is opened, a `path` whose symlinks lead out of `place`, naming the
/// file and where it leads.
pub fn check_within(path: &Path, place: &Path) -> std::io::Result<()> {
    let refuse = |message: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            message,
        ))
    };
    let real_place = real_path(place).unwrap_or_else(|_| place.to_path_buf());
    match real_path(path) {
        Ok(real) if real.starts_with(&real_place) => Ok(()),
        Ok(real) => refuse(format!(
            "{} leads to {}, outside {}; memloop does not read through such a link",
            path.display(),
            real.display(),
            place.display()
        )),
        Err(err) => refuse(err.to_string()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_door_bounds_the_size_and_keeps_links_inside_their_place() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let place = base.join("repo");
        std::fs::create_dir_all(&place).unwrap();
        std::fs::write(base.join("secret.json"), "{}").unwrap();
        std::fs::write(place.join("mine.json"), "{\"a\": 1}").unwrap();
        std::os::unix::fs::symlink("mine.json", place.join("inside.json")).unwrap();
        std::os::unix::fs::symlink("../secret.json", place.join("outside.json")).unwrap();
        assert_eq!(
            read_within(&place.join("inside.json"), &place)
                .unwrap()
                .as_deref(),
            Some("{\"a\": 1}")
        );
        let err = read_within(&place.join("outside.json"), &place).unwrap_err();
        assert!(
            err.to_string().contains("outside.json leads to")
                && err.to_string().contains("secret.json, outside"),
            "{err}"
        );
        assert_eq!(read_within(&place.join("none.json"), &place).unwrap(), None);
        let err = read_at_most(&place.join("mine.json"), 3).unwrap_err();
        assert!(err.to_string().contains("mine.json is larger than 3 bytes"));
        assert_eq!(read_at_most(&place.join("mine.json"), 8).unwrap().len(), 8);
        std::fs::write(place.join("latin1.txt"), b"caf\xe9").unwrap();
        let err = read_text(&place.join("latin1.txt")).unwrap_err();
        assert!(err.to_string().contains("latin1.txt is not UTF-8"), "{err}");
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
}
