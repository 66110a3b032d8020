//! `doctor --live` for Pi: `pi --mode rpc --no-session` answers `{"type": "get_commands"}` on
//! stdin with the commands its extensions registered, each with the file it came from in
//! `sourceInfo.path` (Pi 0.73.1's rpc-mode.js; its docs/rpc.md still says `path`, which Pi sent
//! before 0.62), and needs no
//! model for it; it exits when stdin closes. memloop's extension registers `/memloop`, whose
//! description says how many tools the memory server gave it, or why the server did not start.

use std::path::Path;

use serde_json::Value;

use super::EXTENSION_PATH;
use crate::config::AgentId;
use crate::doctor::live::{excerpt, exit_text, run_fed};
use crate::doctor::{Agent, Doctor, Finding};

const AGENT: AgentId = AgentId::Pi;
const REQUEST: &str = "{\"id\":\"memloop-doctor\",\"type\":\"get_commands\"}\n";

/// The `/memloop` commands in Pi's answer to `get_commands`: each one's file and description.
pub fn memloop_commands(stdout: &str) -> Option<Vec<(String, String)>> {
    let answer = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|v| v["id"] == "memloop-doctor" && v["command"] == "get_commands")?;
    let commands = answer.pointer("/data/commands")?.as_array()?;
    Some(
        commands
            .iter()
            .filter(|c| {
                // Two extensions registering one name are told apart as `memloop:1`, `memloop:2`.
                let name = c["name"].as_str().unwrap_or_default();
                let ours = name == "memloop"
                    || name
                        .strip_prefix("memloop:")
                        .is_some_and(|n| n.parse::<u32>().is_ok());
                ours && c["source"] == "extension"
            })
            .map(|c| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                // Before 0.62 the file was a top-level `path`.
                let path = match text(&c["sourceInfo"]["path"]) {
                    path if path.is_empty() => text(&c["path"]),
                    path => path,
                };
                (path, text(&c["description"]))
            })
            .collect(),
    )
}

/// Pi reports the path it resolved from its working directory: compared without links.
fn same_file(a: &Path, b: &Path) -> bool {
    a == b || std::fs::canonicalize(a).is_ok_and(|a| std::fs::canonicalize(b).is_ok_and(|b| a == b))
}

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    let root = d.repo.root.clone();
    let args = ["--mode", "rpc", "--no-session"];
    let out = match run_fed(program, &args, &root, d.options.timeout, Some(REQUEST)) {
        Ok(out) => out,
        Err(why) => {
            return d.push(Finding::error(AGENT, "live", why).fix("run it by hand to see why"));
        }
    };
    let Some(found) = memloop_commands(&out.stdout) else {
        let all = format!("{}\n{}", out.stdout, out.stderr);
        return d.push(
            Finding::error(
                AGENT,
                "live",
                format!(
                    "`pi --mode rpc` gave no answer to get_commands ({}): {}",
                    exit_text(out.code),
                    excerpt(&all, 12)
                ),
            )
            .fix("run `pi` in the repository and fix what it names"),
        );
    };
    let ours = root.join(EXTENSION_PATH);
    let finding = match found.as_slice() {
        [] => Finding::error(
            AGENT,
            "live",
            format!("Pi did not load memloop's extension: {EXTENSION_PATH} registered no /memloop command"),
        )
        .by_sync(d.sync_command(false)),
        [(path, description)] if same_file(Path::new(path), &ours) => {
            if description.contains("did not start") {
                Finding::error(AGENT, "live", format!("Pi loads {EXTENSION_PATH}, but {description}"))
                    .fix("run the server's command in the repository by hand to see why")
            } else {
                Finding::ok(AGENT, "live", format!("Pi loads {EXTENSION_PATH}: {description}"))
            }
        }
        [(path, _)] => Finding::error(
            AGENT,
            "live",
            format!("Pi loads memloop's extension from {path}, not {EXTENSION_PATH}"),
        )
        .fix(format!("keep only {EXTENSION_PATH}")),
        many => Finding::error(
            AGENT,
            "live",
            format!(
                "Pi loads memloop's extension {} times ({}): each starts a server and the gate runs more than once",
                many.len(),
                many.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>().join(", ")
            ),
        )
        .fix(format!("keep only {EXTENSION_PATH}")),
    };
    d.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memloop_command_is_read_from_the_rpc_answer() {
        // As Pi 0.73.1 answered, an event line before it.
        let stdout = concat!(
            "{\"type\":\"agent_start\"}\n",
            "{\"id\":\"memloop-doctor\",\"type\":\"response\",\"command\":\"get_commands\",\"success\":true,\"data\":{\"commands\":[",
            "{\"name\":\"memloop:1\",\"description\":\"memloop: 7 memory tools\",\"source\":\"extension\",\"sourceInfo\":{\"path\":\"/r/.pi/extensions/memloop.js\",\"scope\":\"project\"}},",
            "{\"name\":\"memloop:2\",\"description\":\"memloop: 7 memory tools\",\"source\":\"extension\",\"sourceInfo\":{\"path\":\"/h/.pi/agent/extensions/memloop.js\",\"scope\":\"user\"}},",
            "{\"name\":\"memloop\",\"source\":\"prompt\",\"sourceInfo\":{\"path\":\"/r/x.md\"}},",
            "{\"name\":\"memloop:3\",\"description\":\"old\",\"source\":\"extension\",\"path\":\"/o/memloop.js\"},",
            "{\"name\":\"memloopx\",\"source\":\"extension\",\"sourceInfo\":{\"path\":\"/r/y.js\"}}]}}\n"
        );
        assert_eq!(
            memloop_commands(stdout),
            Some(vec![
                (
                    "/r/.pi/extensions/memloop.js".into(),
                    "memloop: 7 memory tools".into()
                ),
                (
                    "/h/.pi/agent/extensions/memloop.js".into(),
                    "memloop: 7 memory tools".into()
                ),
                ("/o/memloop.js".into(), "old".into())
            ])
        );
        let none = "{\"id\":\"memloop-doctor\",\"type\":\"response\",\"command\":\"get_commands\",\"success\":true,\"data\":{\"commands\":[]}}";
        assert_eq!(memloop_commands(none), Some(vec![]));
        assert_eq!(memloop_commands("Error: no model"), None);
    }
}
