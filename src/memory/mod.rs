//! The repository's memory: the notes on disk (the source of truth, committed under
//! `.memloop/memory/`), what is derived from them, search, and the capped index a session starts
//! with. It knows no agent and no protocol: the MCP server (`crate::serve`), the hooks
//! (`crate::hook`) and `memloop memory` are its faces.
//!
//! Rooms: `record` (the file format of notes and routes), `ids` (ids and timestamps), `budget`
//! (what the notes may take), `duplicate` (whether two notes say the same), `store`
//! (the notes of one repository: reading, writing under the lock, the derived cache), `search`
//! (ranking), `session` (the session-start index) and `recall` (the notes that match a prompt).

pub mod budget;
pub mod duplicate;
mod front_matter;
pub mod ids;
pub mod index;
pub mod recall;
pub mod record;
pub mod search;
pub mod session;
pub mod stale;
pub mod store;
mod synonyms;

use std::path::PathBuf;

/// The repository whose memory to use: `given` (a `--root`), else the nearest one above `start` (default:
/// the working directory).
pub fn repository(given: Option<PathBuf>, start: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(dir) = given {
        return match dir.canonicalize() {
            Ok(dir) if dir.is_dir() => Ok(dir),
            _ => Err(format!(
                "--root {}: not a folder; pass the repository's folder",
                dir.display()
            )),
        };
    }
    let cwd = match start {
        Some(start) => start,
        None => std::env::current_dir()
            .map_err(|err| format!("could not read the working directory: {err}"))?,
    };
    crate::config::find_root(&cwd).ok_or_else(|| {
        format!(
            "no repository above {} (looked for memloop.toml, then .git); start the server \
             inside a repository or pass --root <dir>",
            cwd.display()
        )
    })
}
