//! What memloop wants in each file it touches: the vocabulary between the agent adapters,
//! which decide it, and the engine, which reads, edits and writes files.

use std::path::PathBuf;

use serde_json::Value;

use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::edit::toml::{Entry, EntryValue};

/// Whose file it is: the repository's (committed) or the user's (outside the repository,
/// written only with consent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Project,
    User,
}

/// One piece of a file that memloop owns.
#[derive(Debug, Clone, PartialEq)]
pub enum Fragment {
    /// The member at `path` (object keys, created where missing) holds `value`.
    JsonMember { path: Vec<String>, value: Value },
    /// `key` is the first member of the root object; added only when missing, never moved.
    JsonFirstMember { key: String, value: Value },
    /// One element of the array at `path`: a hook group whose handlers all run `command`.
    JsonHookGroup {
        path: Vec<String>,
        value: Value,
        command: String,
    },
    /// The string `item` is one of the names the member at `path` lists (a string or an array
    /// of strings, as Gemini's `context.fileName`). Where the member is missing it becomes
    /// `default` plus `item`, so what the agent read before still loads; a lone string becomes
    /// a list holding it first. Removal takes back only what memloop added.
    JsonListItem {
        path: Vec<String>,
        item: String,
        default: Vec<String>,
    },
    /// One element equal to `value` in the array at `path` (a server name in Claude Code's
    /// `enabledMcpjsonServers`, a folder in a trust list); the array's other elements are the
    /// user's. Removal takes it back only where the file did not hold it before memloop came.
    JsonArrayItem { path: Vec<String>, value: Value },
    /// One entry of a TOML array of tables (`[[key]]`).
    TomlEntry { key: String, entry: Entry },
    /// The table at `path` (`[mcp_servers.memory]`) holds `fields`; with `whole`, nothing else.
    /// Removal leaves the fields the file held with the same value before memloop came.
    TomlTable {
        path: Vec<String>,
        fields: Vec<(String, EntryValue)>,
        whole: bool,
    },
    /// The managed block of a Markdown file.
    MarkdownBlock { body: String },
    /// A root member the agent writes into the file itself (Qwen Code's `"$version"`): memloop
    /// never writes or takes it back, and it does not make a file memloop created the user's:
    /// when nothing else is left in such a file, uninstall removes the file.
    AgentBookkeeping { key: String },
    /// A fragment memloop.toml switches off (`[memory] session_start = false`): sync takes it
    /// out of the file where it is, and the doctor reports it while it is still there.
    Retired(Box<Fragment>),
}

impl Fragment {
    /// `self` when `wanted`, else the same fragment retired.
    pub fn wanted_if(self, wanted: bool) -> Fragment {
        if wanted {
            self
        } else {
            Fragment::Retired(Box::new(self))
        }
    }
}

/// The desired content of one path.
#[derive(Debug, Clone, PartialEq)]
pub enum Desired {
    /// The file keeps everything else; memloop owns these fragments.
    Fragments {
        format: Format,
        fragments: Vec<Fragment>,
    },
    /// memloop owns the whole file.
    Whole { content: String },
    /// A relative symbolic link.
    Symlink { target: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json(Dialect),
    Toml,
    Markdown,
}

/// A path and what memloop wants there.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Absolute path.
    pub path: PathBuf,
    /// How the path is shown to the user (relative to the repository, or `~/...`).
    pub display: String,
    pub scope: Scope,
    /// The agents that read this file (empty for shared files).
    pub agents: Vec<AgentId>,
    pub desired: Desired,
    /// Something the user should know about this file (a fallback taken, for example).
    pub note: Option<String>,
}

/// Whether a Claude Code hook group consists only of handlers running `command`.
pub fn is_hook_group_for(group: &Value, command: &str) -> bool {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|handlers| {
            !handlers.is_empty()
                && handlers
                    .iter()
                    .all(|handler| handler.get("command").and_then(Value::as_str) == Some(command))
        })
}

/// What the adapters want: the targets, in a stable order, and what they left out (with why).
pub struct Wanted {
    pub targets: Vec<Target>,
    pub skipped: Vec<String>,
    /// Where installing takes memloop's part back (agents memloop.toml no longer names).
    pub removed: Vec<std::path::PathBuf>,
}
