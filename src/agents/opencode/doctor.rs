//! OpenCode's whole files: `opencode.json` and `opencode.jsonc`, at the root and in `.opencode/`
//! (JSONC; which one wins when both of a folder exist), `$schema`, the MCP entry shape for the detected major version (V1 `mcp.<name>`, V2
//! `mcp.servers.<name>`), `plugin_origins`, and where the gate plugin sits.
//! Facts: research/opencode.md sections 1-3.

use serde_json::Value;

use crate::agents::opencode::PLUGIN_PATH;
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Opencode;
const LOCAL_KEYS: &[&str] = &[
    "type",
    "command",
    "environment",
    "enabled",
    "timeout",
    "cwd",
];
const REMOTE_KEYS: &[&str] = &["type", "url", "enabled", "headers", "oauth", "timeout"];

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let agent = d.agent(AGENT).clone();
    let v2 = agent.numbers().is_some_and(|v| v.first() == Some(&2));
    let mut files = Vec::new();
    for pair in crate::agents::opencode::CONFIG_FILES.chunks(2) {
        let mut folder = Vec::new();
        for name in pair {
            match JsonFile::load(&root.join(name), name, Dialect::Jsonc) {
                Ok(Some(file)) => folder.push(file),
                Ok(None) => {}
                Err(refusal) => d.refused(
                    AGENT,
                    "config-json",
                    &crate::edit::Refusal {
                        problem: format!("{}: OpenCode refuses to start with it", refusal.problem),
                        ..refusal
                    },
                ),
            }
        }
        twins(d, &folder, &agent);
        files.extend(folder);
    }
    let managed = crate::agents::opencode::config_file(&root);
    for file in &files {
        if file.display != managed {
            schema(d, file);
        }
        plugin_origins(d, file);
        entries(d, file, v2);
    }
    plugin_file(d, v2);
}

/// Both twins in one folder: OpenCode >= 1.14 lets `opencode.jsonc` win a conflicting key
/// (1.2.x: `opencode.json`).
fn twins(d: &mut Doctor, files: &[JsonFile], agent: &crate::doctor::Agent) {
    let [json, jsonc] = files else {
        return;
    };
    let jsonc_wins = agent.at_least(&[1, 14]).unwrap_or(true);
    let (winner, loser) = if jsonc_wins {
        (jsonc, json)
    } else {
        (json, jsonc)
    };
    let name = d.ctx.server.name.clone();
    let in_loser =
        loser.get(&["mcp", &name]).is_some() || loser.get(&["mcp", "servers", &name]).is_some();
    let in_winner =
        winner.get(&["mcp", &name]).is_some() || winner.get(&["mcp", "servers", &name]).is_some();
    let message = format!(
        "{} and {} both exist: OpenCode merges them and {} wins every key both set",
        json.display, jsonc.display, winner.display
    );
    let finding = if in_loser && in_winner {
        Finding::warning(
            AGENT,
            "twins",
            format!("{message}; `mcp.{name}` in {} is ignored", loser.display),
        )
        .at(
            &loser.display,
            loser.line(&[Step::Key("mcp"), Step::Key(&name)]),
        )
        .fix(format!(
            "delete `mcp.{name}` from {}, or merge the two files into one",
            loser.display
        ))
    } else {
        Finding::warning(AGENT, "twins", message)
            .file(&loser.display)
            .fix("merge the two files into one (memloop writes opencode.jsonc when it exists)")
    };
    d.push(finding);
}

fn schema(d: &mut Doctor, file: &JsonFile) {
    if file.value.get("$schema").is_some() {
        d.push(
            Finding::ok(AGENT, "schema", "has `$schema`")
                .at(&file.display, file.line(&[Step::Key("$schema")])),
        );
    } else {
        d.push(
            Finding::warning(
                AGENT,
                "schema",
                format!("{} has no `$schema`: OpenCode rewrites the file on load to add it", file.display),
            )
            .at(&file.display, Some(1))
            .fix(format!(
                "add \"$schema\": \"{}\" as the first key (`memloop sync` does it for the file it manages)",
                crate::agents::opencode::SCHEMA_URL
            )),
        );
    }
}

/// `plugin_origins` is output-only (`opencode debug config`); written into a config it crashes
/// some versions.
fn plugin_origins(d: &mut Doctor, file: &JsonFile) {
    if file.value.get("plugin_origins").is_some() {
        d.push(
            Finding::error(
                AGENT,
                "plugin-origins",
                format!("{} has `plugin_origins`, an output-only key that crashes OpenCode 1.15 and hides the plugins folder", file.display),
            )
            .at(&file.display, file.line(&[Step::Key("plugin_origins")]))
            .fix("delete `plugin_origins` (it was probably copied from `opencode debug config`)"),
        );
    }
}

fn entries(d: &mut Doctor, file: &JsonFile, v2: bool) {
    let Some(mcp) = file.value.get("mcp") else {
        return;
    };
    let display = file.display.clone();
    let Some(mcp) = mcp.as_object() else {
        d.push(
            Finding::error(AGENT, "entry-shape", "`mcp` is not an object")
                .at(&display, file.line(&[Step::Key("mcp")]))
                .fix("make `mcp` an object of server names"),
        );
        return;
    };
    let has_servers = mcp.get("servers").is_some_and(Value::is_object);
    if has_servers && !v2 {
        d.push(
            Finding::error(
                AGENT,
                "entry-shape",
                "`mcp.servers` is OpenCode 2's shape: OpenCode 1.x fails to start on it",
            )
            .at(
                &display,
                file.line(&[Step::Key("mcp"), Step::Key("servers")]),
            )
            .fix("move each server up to `mcp.<name>` (OpenCode 1.x), or install OpenCode 2"),
        );
    }
    let (entries, prefix): (Vec<(&String, &Value)>, Vec<Step>) = if v2 && has_servers {
        (
            mcp["servers"]
                .as_object()
                .map(|m| m.iter().collect())
                .unwrap_or_default(),
            vec![Step::Key("mcp"), Step::Key("servers")],
        )
    } else {
        (
            mcp.iter()
                .filter(|(k, _)| !(has_servers && *k == "servers"))
                .collect(),
            vec![Step::Key("mcp")],
        )
    };
    let name = d.ctx.server.name.clone();
    if v2 && name != "servers" && mcp.contains_key(&name) {
        d.push(
            Finding::warning(
                AGENT,
                "entry-shape",
                format!("`mcp.{name}` is OpenCode 1's shape; OpenCode 2 reads it for compatibility but documents `mcp.servers.{name}`"),
            )
            .at(&display, file.line(&[Step::Key("mcp"), Step::Key(&name)]))
            .fix("run `memloop upgrade` when it is available, or move the entry under `mcp.servers`"),
        );
    }
    let mut problems = 0;
    for (server, entry) in entries {
        let mut path = prefix.clone();
        path.push(Step::Key(server));
        let line = file.line(&path);
        let here = format!(
            "mcp.{}{server}",
            if prefix.len() > 1 { "servers." } else { "" }
        );
        let mut push = |d: &mut Doctor, f: Finding| {
            problems += 1;
            d.push(f.at(&display, line));
        };
        let Some(map) = entry.as_object() else {
            push(
                d,
                Finding::error(AGENT, "entry-shape", format!("{here} is not an object"))
                    .fix("write {\"type\": \"local\", \"command\": [...]}"),
            );
            continue;
        };
        if map.len() == 1 && map.get("enabled").is_some_and(Value::is_boolean) {
            continue;
        }
        match map.get("type").and_then(Value::as_str) {
            Some("local") => {
                match map.get("command") {
                    Some(Value::Array(items)) if !items.is_empty() && items.iter().all(Value::is_string) => {}
                    Some(Value::String(cmd)) => push(
                        d,
                        Finding::error(AGENT, "command-array", format!("{here}.command is the string {cmd:?}: OpenCode requires an argv array and refuses to start"))
                            .fix(format!("write \"command\": {}", serde_json::json!(cmd.split_whitespace().collect::<Vec<_>>()))),
                    ),
                    _ => push(
                        d,
                        Finding::error(AGENT, "command-array", format!("{here}.command is missing or not an array of strings"))
                            .fix("write \"command\": [\"program\", \"arg\", ...]"),
                    ),
                }
                unknown_keys(d, &mut problems, &display, line, &here, map, LOCAL_KEYS);
            }
            Some("remote") => {
                if !map.get("url").is_some_and(Value::is_string) {
                    push(d, Finding::error(AGENT, "entry-shape", format!("{here} is remote but has no `url`")).fix("add \"url\": \"https://...\""));
                }
                unknown_keys(d, &mut problems, &display, line, &here, map, REMOTE_KEYS);
            }
            Some(other) => push(
                d,
                Finding::error(AGENT, "entry-shape", format!("{here}.type is `{other}`; OpenCode knows local and remote and refuses to start"))
                    .fix("set \"type\" to \"local\" (command) or \"remote\" (url)"),
            ),
            None => push(
                d,
                Finding::error(AGENT, "entry-shape", format!("{here} has no `type`: OpenCode refuses to start"))
                    .fix("add \"type\": \"local\" (with command) or \"remote\" (with url)"),
            ),
        }
    }
    if problems == 0 {
        d.push(
            Finding::ok(AGENT, "entry-shape", "every MCP entry has OpenCode's shape")
                .at(&display, file.line(&[Step::Key("mcp")])),
        );
    }
}

fn unknown_keys(
    d: &mut Doctor,
    problems: &mut usize,
    display: &str,
    line: Option<usize>,
    here: &str,
    map: &serde_json::Map<String, Value>,
    allowed: &[&str],
) {
    let agent = d.agent(AGENT).clone();
    // `cwd` (local) is kept from 1.18 on; older versions drop it (1.14) or refuse it (1.2).
    let cwd_known = agent.at_least(&[1, 18]).unwrap_or(true);
    let strict = agent.at_least(&[1, 14]) == Some(false);
    let version = agent.version.as_deref().unwrap_or("this OpenCode");
    for key in map
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()) || (k.as_str() == "cwd" && !cwd_known))
    {
        *problems += 1;
        let hint = match key.as_str() {
            "args" => "put the arguments into the `command` array",
            "env" => "rename it to `environment`",
            "cwd" => "update OpenCode to 1.18 or later, or remove `cwd`",
            _ => "remove it",
        };
        let finding = if strict {
            Finding::error(
                AGENT,
                "entry-shape",
                format!(
                    "{here}.{key} is not a field OpenCode {version} knows: it refuses to start"
                ),
            )
        } else {
            Finding::warning(
                AGENT,
                "entry-shape",
                format!(
                    "{here}.{key} is not an OpenCode field: 1.14+ drop it silently, 1.2.x refuse to start"
                ),
            )
        };
        d.push(finding.at(display, line).fix(hint));
    }
}

/// The gate plugin loads only from the top of `.opencode/plugins/` or `.opencode/plugin/` with a
/// `.js`/`.ts` extension; two copies run the gate twice; OpenCode 2 does not run V1 plugins.
fn plugin_file(d: &mut Doctor, v2: bool) {
    let root = d.repo.root.clone();
    let mut loaded = Vec::new();
    let mut ignored = Vec::new();
    for dir in [".opencode/plugins", ".opencode/plugin"] {
        let Ok(read) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in read.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{dir}/{name}");
            if path.is_dir() {
                for inner in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                    if is_memloop_plugin(&inner.path()) {
                        ignored.push(format!("{rel}/{}", inner.file_name().to_string_lossy()));
                    }
                }
                continue;
            }
            if !is_memloop_plugin(&path) {
                continue;
            }
            if name.ends_with(".js") || name.ends_with(".ts") {
                loaded.push(rel);
            } else {
                ignored.push(rel);
            }
        }
    }
    for rel in &ignored {
        d.push(
            Finding::error(
                AGENT,
                "plugin-file",
                format!("{rel} is memloop's plugin where OpenCode never loads it (only top-level .js/.ts files in .opencode/plugins/ or .opencode/plugin/)"),
            )
            .file(rel)
            .fix(format!("delete {rel}; `memloop sync` writes {PLUGIN_PATH}")),
        );
    }
    match loaded.as_slice() {
        [] => {} // the drift check reports the missing plugin
        [one] => {
            if v2 {
                d.push(
                    Finding::error(AGENT, "plugin-file", format!("{one} is a V1 plugin; OpenCode 2 does not run V1 plugins, so there is no gate"))
                        .file(one)
                        .fix("run `memloop upgrade` when it is available; until then the OpenCode 2 gate is off"),
                );
            } else {
                d.push(
                    Finding::ok(
                        AGENT,
                        "plugin-file",
                        "memloop's plugin is where OpenCode loads it",
                    )
                    .file(one),
                );
            }
        }
        [_, extra @ ..] => {
            for rel in extra {
                d.push(
                    Finding::error(AGENT, "plugin-file", format!("{rel} is a second copy of memloop's plugin: the gate runs twice and sends the agent back twice"))
                        .file(rel)
                        .fix(format!("delete {rel} and keep {PLUGIN_PATH}")),
                );
            }
        }
    }
}

fn is_memloop_plugin(path: &std::path::Path) -> bool {
    crate::files::read_regular(path)
        .is_ok_and(|bytes| bytes.starts_with(b"// memloop opencode plugin"))
}

/// OpenCode loads the global plugins folder too: memloop's plugin there and in the project runs
/// the gate twice.
pub fn global_plugin(d: &mut Doctor) {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map_or_else(|| d.home().join(".config"), std::path::PathBuf::from)
        .join("opencode");
    for dir in ["plugins", "plugin"] {
        let path = config.join(dir).join("memloop.js");
        if path.is_file() {
            let display = d.ctx.display_user_path(&path);
            d.push(
                Finding::error(
                    AGENT,
                    "gate-duplicate",
                    format!("{display} is a second, global copy of the gate plugin: OpenCode loads both and sends the agent back twice"),
                )
                .file(display.clone())
                .fix(format!("delete {display}; the project's {} is enough", PLUGIN_PATH)),
            );
        }
    }
}
