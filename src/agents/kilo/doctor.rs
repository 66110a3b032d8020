//! Kilo's whole files: every project config it reads (`super::CONFIG_FILES`, JSONC), the
//! `$schema` it would add on load, memloop's server in each file that names it (Kilo merges
//! them key by key, so a differing entry anywhere overrides memloop's), an OpenCode 2 server
//! list in an `opencode.json` Kilo reads, and where the gate plugin sits (one copy, in a folder
//! Kilo loads). Facts: xtask/src/e2e/kilo_facts.md.

use std::path::{Path, PathBuf};

use super::{CONFIG_FILES, PLUGIN_PATH, SCHEMA_URL};
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Kilo;

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let managed = super::config_file(&root, d.ctx.enabled(AgentId::Opencode));
    let mut files = Vec::new();
    for name in CONFIG_FILES {
        match JsonFile::load(&root.join(name), name, Dialect::Jsonc) {
            Ok(Some(file)) => files.push(file),
            Ok(None) => {}
            Err(refusal) => d.refused(
                AGENT,
                "config-json",
                &crate::edit::Refusal {
                    problem: format!("{}: Kilo refuses to start with it", refusal.problem),
                    ..refusal
                },
            ),
        }
    }
    for file in &files {
        if file.display != managed.name() {
            schema(d, file);
        }
        entry(d, file);
    }
    plugin_file(d);
}

fn schema(d: &mut Doctor, file: &JsonFile) {
    if file.value.get("$schema").is_none() {
        d.push(
            Finding::warning(
                AGENT,
                "schema",
                format!(
                    "{} has no `$schema`: Kilo rewrites the file on load to add it",
                    file.display
                ),
            )
            .at(&file.display, Some(1))
            .fix(format!(
                "add \"$schema\": \"{SCHEMA_URL}\" as the first key (`memloop sync` does it for the file it manages)"
            )),
        );
    }
}

/// memloop's server as each file that names it has it: Kilo merges the files key by key, so any
/// entry that differs from memloop's changes what Kilo runs.
fn entry(d: &mut Doctor, file: &JsonFile) {
    let name = d.ctx.server.name.clone();
    if let Some(servers) = file.get(&["mcp", "servers"]).filter(|v| v.is_object())
        && servers.get("type").is_none()
    {
        d.push(
            Finding::error(
                AGENT,
                "entry-shape",
                format!("{} keeps its servers in `mcp.servers` (OpenCode 2's shape): Kilo reads this file and takes `servers` for one server, which it cannot start", file.display),
            )
            .at(&file.display, file.line(&[Step::Key("mcp"), Step::Key("servers")]))
            .fix("keep OpenCode 2's config out of the files Kilo reads (`.opencode/opencode.json` is not read by Kilo), or give Kilo its own kilo.json"),
        );
    }
    let Some(found) = file.get(&["mcp", &name]) else {
        return;
    };
    let wanted = crate::agents::opencode::server_entry(&d.ctx.server.transport);
    let line = file.line(&[Step::Key("mcp"), Step::Key(&name)]);
    if *found == wanted {
        d.push(
            Finding::ok(
                AGENT,
                "entry-shape",
                format!("`mcp.{name}` is memloop's entry"),
            )
            .at(&file.display, line),
        );
    } else {
        d.push(
            Finding::error(
                AGENT,
                "entry-shape",
                format!("{} sets `mcp.{name}` to {found}, not memloop's {wanted}: Kilo merges its config files, so this entry changes the server it runs", file.display),
            )
            .at(&file.display, line)
            .fix(format!("remove `mcp.{name}` from {} or make it memloop's (`memloop sync` keeps the file it manages)", file.display)),
        );
    }
}

/// The folders Kilo loads plugins from in the project (`{plugin,plugins}/*.{js,ts}` in each
/// config folder).
const PROJECT_PLUGIN_DIRS: [&str; 4] = [
    ".kilo/plugins",
    ".kilo/plugin",
    ".kilocode/plugins",
    ".kilocode/plugin",
];

fn plugin_file(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let mut loaded = Vec::new();
    for dir in PROJECT_PLUGIN_DIRS {
        for (rel, first_line) in memloop_plugins(&root.join(dir), dir) {
            loaded.push((rel, first_line));
        }
    }
    for (rel, first_line) in &loaded {
        if first_line.starts_with("// memloop opencode plugin") {
            d.push(
                Finding::error(AGENT, "plugin-file", format!("{rel} is memloop's OpenCode plugin: in Kilo it records to OpenCode's ledger and judges OpenCode's sessions"))
                    .file(rel.clone())
                    .fix(format!("delete {rel}; `memloop sync` writes Kilo's own plugin at {PLUGIN_PATH}")),
            );
        }
    }
    match loaded.as_slice() {
        [] => {} // the drift check reports the missing plugin
        [(one, _)] if one == PLUGIN_PATH => d.push(
            Finding::ok(
                AGENT,
                "plugin-file",
                "memloop's plugin is where Kilo loads it",
            )
            .file(one),
        ),
        [(one, _)] => d.push(
            Finding::warning(
                AGENT,
                "plugin-file",
                format!("memloop's plugin is at {one}, not {PLUGIN_PATH}"),
            )
            .file(one.clone())
            .fix(format!(
                "move it to {PLUGIN_PATH} (`memloop sync` writes it there)"
            )),
        ),
        [_, extra @ ..] => {
            for (rel, _) in extra {
                d.push(
                    Finding::error(AGENT, "gate-duplicate", format!("{rel} is a second copy of memloop's plugin: Kilo loads both and the gate runs twice"))
                        .file(rel.clone())
                        .fix(format!("delete {rel} and keep {PLUGIN_PATH}")),
                );
            }
        }
    }
}

/// memloop's plugins in `dir` (top-level `.js`/`.ts` files Kilo loads), shown as `display/name`,
/// with their first line.
fn memloop_plugins(dir: &Path, display: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.ends_with(".js") || name.ends_with(".ts")) {
                return None;
            }
            let first = first_line(&entry.path())?;
            first
                .starts_with("// memloop ")
                .then(|| (format!("{display}/{name}"), first))
        })
        .collect();
    found.sort();
    found
}

fn first_line(path: &Path) -> Option<String> {
    let bytes = crate::files::read_regular(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next()?;
    (line.starts_with("// memloop ") && line.contains(" plugin v")).then(|| line.to_owned())
}

/// Kilo loads the user's plugin folders too (`~/.config/kilo/`, `~/.kilo/`, `~/.kilocode/`):
/// memloop's plugin there and in the project runs the gate twice.
pub fn global_plugin(d: &mut Doctor) {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| d.home().join(".config"), PathBuf::from)
        .join("kilo");
    let home = d.home().to_path_buf();
    for base in [config, home.join(".kilo"), home.join(".kilocode")] {
        for dir in ["plugins", "plugin"] {
            let folder = base.join(dir);
            let display = d.ctx.display_user_path(&folder);
            for (rel, _) in memloop_plugins(&folder, &display) {
                d.push(
                    Finding::error(
                        AGENT,
                        "gate-duplicate",
                        format!("{rel} is a second, user-wide copy of the gate plugin: Kilo loads both and sends the agent back twice"),
                    )
                    .file(rel.clone())
                    .fix(format!("delete {rel}; the project's {PLUGIN_PATH} is enough")),
                );
            }
        }
    }
}
