//! Pi's whole files: the extension, where Pi loads it and once. Pi loads every top-level `.js`
//! and `.ts` of `<cwd>/.pi/extensions/` and of `~/.pi/agent/extensions/` (`$PI_CODING_AGENT_DIR`
//! in place of `~/.pi/agent`); two copies of memloop's extension each start a server (Pi keeps the
//! first copy's tools) and send the agent back twice. Facts: xtask/src/e2e/pi_facts.md.

use std::path::{Path, PathBuf};

use super::{EXTENSION_PATH, extension_version};
use crate::config::AgentId;
use crate::doctor::{Doctor, Finding};

const AGENT: AgentId = AgentId::Pi;
const PROJECT_DIR: &str = ".pi/extensions";

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let found = memloop_extensions(&root.join(PROJECT_DIR), PROJECT_DIR);
    match found.as_slice() {
        [] => {} // the drift check reports the missing extension
        [(one, _)] if one == EXTENSION_PATH => d.push(
            Finding::ok(
                AGENT,
                "extension-file",
                "memloop's extension is where Pi loads it",
            )
            .file(one),
        ),
        [(one, _)] => d.push(
            Finding::warning(
                AGENT,
                "extension-file",
                format!("memloop's extension is at {one}, not {EXTENSION_PATH}"),
            )
            .file(one.clone())
            .fix(format!(
                "move it to {EXTENSION_PATH} (`memloop sync` writes it there)"
            )),
        ),
        [_, ..] => {
            for (rel, _) in found.iter().filter(|(rel, _)| rel != EXTENSION_PATH) {
                d.push(
                    Finding::error(AGENT, "extension-duplicate", format!("{rel} is a second copy of memloop's extension: Pi loads both (each starts its own server, the first copy's tools win) and runs the gate twice"))
                        .file(rel.clone())
                        .fix(format!("delete {rel} and keep {EXTENSION_PATH}")),
                );
            }
        }
    }
    let ours = extension_version(super::EXTENSION).unwrap_or(0);
    for (rel, version) in &found {
        if let Some(theirs) = version.filter(|v| *v > ours) {
            d.push(
                Finding::warning(
                    AGENT,
                    "extension-version",
                    format!("{rel} was written by a newer memloop (extension v{theirs}, this one writes v{ours})"),
                )
                .at(rel, Some(1))
                .fix("update memloop on this machine and in CI"),
            );
        }
    }
}

/// The user's extension folder Pi 0.73 reads: `$PI_CODING_AGENT_DIR/extensions`, else
/// `~/.pi/agent/extensions`.
fn user_dir(home: &Path) -> PathBuf {
    std::env::var_os("PI_CODING_AGENT_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".pi/agent"), PathBuf::from)
        .join("extensions")
}

/// memloop's extension in the user's folder as well as the project's: Pi loads both.
pub fn user_extension(d: &mut Doctor) {
    let folder = user_dir(d.home());
    let display = d.ctx.display_user_path(&folder);
    for (rel, _) in memloop_extensions(&folder, &display) {
        d.push(
            Finding::error(
                AGENT,
                "extension-duplicate",
                format!("{rel} is a second, user-wide copy of memloop's extension: Pi loads both (each starts its own server, the first copy's tools win) and sends the agent back twice"),
            )
            .file(rel.clone())
            .fix(format!("delete {rel}; the project's {EXTENSION_PATH} is enough")),
        );
    }
}

/// memloop's extensions among the top-level `.js`/`.ts` files of `dir`, shown as
/// `display/name`, with the version their first line gives.
fn memloop_extensions(dir: &Path, display: &str) -> Vec<(String, Option<u32>)> {
    let mut found: Vec<(String, Option<u32>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.ends_with(".js") || name.ends_with(".ts")) {
                return None;
            }
            let bytes = crate::files::read_regular(&entry.path()).ok()?;
            let text = String::from_utf8_lossy(&bytes);
            text.lines()
                .next()
                .is_some_and(|line| line.starts_with("// memloop pi extension v"))
                .then(|| (format!("{display}/{name}"), extension_version(&text)))
        })
        .collect();
    found.sort();
    found
}
