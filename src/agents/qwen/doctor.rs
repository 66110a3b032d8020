//! Qwen Code's whole files: which rules files it loads (`context.fileName`, project over user;
//! `QWEN.md` and `AGENTS.md` when unset), `disableAllHooks`, and in the user's `~/.qwen/` the
//! approval of memloop's server (hash-bound: any change to the entry needs a new one) and, when
//! folder trust is on, the folder's trust. A trailing comma in `.qwen/settings.json` is the drift
//! check's refusal (Qwen drops the whole file at one). Facts: xtask/src/e2e/qwen_facts.md.

use std::path::Path;

use serde_json::Value;

use super::trust::{self, Approval};
use super::{DIALECT, PROJECT_SETTINGS, approvals_path, project_key, server_entry};
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Qwen;
/// Qwen 0.24.4 gates a project's servers only outside YOLO mode: with `--yolo` (or
/// `--approval-mode yolo`, or `tools.approvalMode: "yolo"`) it skips the approval check and
/// starts every project server, approved or not (`pendingMcpServers` is left unset in its
/// config loader).
pub const YOLO_STARTS_IT: &str = "in YOLO mode (`--yolo`, `--approval-mode yolo` or `tools.approvalMode: \"yolo\"`) Qwen skips the approval and starts it unasked";
/// What 0.24.4 loads when `context.fileName` is not set.
pub const DEFAULT_CONTEXT_FILES: &[&str] = &["QWEN.md", "AGENTS.md"];
/// The first version known to load `AGENTS.md` without a setting (0.12.0 does; 0.11.0 loaded
/// only `QWEN.md`, QwenLM/qwen-code#2062).
pub const AGENTS_MD_SINCE: &[u64] = &[0, 12];
/// The first version known to gate a project's servers behind `mcpApprovals.json` (0.21.2 does,
/// 0.15.10 does not).
pub const APPROVALS_SINCE: &[u64] = &[0, 21];

/// The project's and the user's settings, each when it exists and parses.
struct Settings {
    project: Option<JsonFile>,
    user: Option<JsonFile>,
}

fn settings(d: &mut Doctor, report_user_errors: bool) -> Settings {
    let project = JsonFile::load(
        &d.repo.root.join(PROJECT_SETTINGS),
        PROJECT_SETTINGS,
        DIALECT,
    )
    .ok()
    .flatten();
    let path = super::qwen_dir(d.home()).join("settings.json");
    let display = display_user(d, &path);
    let user = match JsonFile::load(&path, &display, DIALECT) {
        Ok(file) => file,
        Err(refusal) => {
            if report_user_errors {
                d.push(
                    Finding::error(
                        AGENT,
                        "user-settings",
                        format!("{display} cannot be read by Qwen Code: {refusal}"),
                    )
                    .file(display.clone())
                    .fix("fix the syntax (comments are fine, trailing commas are not): Qwen ignores the whole file until then"),
                );
            }
            None
        }
    };
    Settings { project, user }
}

fn display_user(d: &Doctor, path: &Path) -> String {
    match path.strip_prefix(d.home()) {
        Ok(rel) => format!("~/{}", rel.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The rules Qwen loads: `AGENTS.md` must hold them, and `context.fileName` (where set) must
/// still name it.
pub fn rules(d: &mut Doctor) {
    crate::doctor::instructions::first_of(d, AGENT, "Qwen Code", &["AGENTS.md"]);
    let settings = settings(d, false);
    let deciding = [&settings.project, &settings.user]
        .into_iter()
        .flatten()
        .find_map(|file| {
            let value = file.get(&["context", "fileName"])?;
            let names: Vec<String> = match value {
                Value::String(name) => vec![name.clone()],
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.trim().to_owned())
                    .collect(),
                _ => return None,
            };
            // An empty list or name keeps the default.
            (!names.iter().all(String::is_empty)).then_some((file, names))
        });
    let old = d.agent(AGENT).at_least(AGENTS_MD_SINCE) == Some(false);
    let finding = match deciding {
        None if old => Finding::error(
            AGENT,
            "context-files",
            format!(
                "Qwen Code {} loads only QWEN.md when context.fileName is not set (AGENTS.md by default came in 0.12): it never reads the memory rules",
                d.agent(AGENT).version.clone().unwrap_or_default()
            ),
        )
        .fix("update Qwen Code (npm i -g @qwen-code/qwen-code), or set context.fileName to [\"QWEN.md\", \"AGENTS.md\"] in ~/.qwen/settings.json"),
        None => Finding::ok(
            AGENT,
            "context-files",
            format!(
                "context.fileName is not set: Qwen loads {}",
                DEFAULT_CONTEXT_FILES.join(" and ")
            ),
        ),
        Some((file, names)) if names.iter().any(|n| n == "AGENTS.md") => Finding::ok(
            AGENT,
            "context-files",
            format!("context.fileName names AGENTS.md ({})", names.join(", ")),
        )
        .at(
            &file.display,
            file.line(&[Step::Key("context"), Step::Key("fileName")]),
        ),
        Some((file, names)) => Finding::error(
            AGENT,
            "context-files",
            format!(
                "context.fileName is {} without AGENTS.md: Qwen Code loads only those, so it never reads the memory rules",
                names.join(", ")
            ),
        )
        .at(
            &file.display,
            file.line(&[Step::Key("context"), Step::Key("fileName")]),
        )
        .fix(format!(
            "add \"AGENTS.md\" to context.fileName in {}",
            file.display
        )),
    };
    d.push(finding);
}

pub fn check(d: &mut Doctor) {
    let agent = d.agent(AGENT).clone();
    let settings = settings(d, agent.installed());
    disable_all_hooks(d, &settings);
    if agent.installed() {
        folder_trust(d, settings.user.as_ref());
        if agent.at_least(APPROVALS_SINCE) == Some(false) {
            d.push(Finding::ok(
                AGENT,
                "approval",
                format!(
                    "Qwen Code {} starts a project's MCP servers without an approval (mcpApprovals.json came in 0.21)",
                    agent.version.clone().unwrap_or_default()
                ),
            ));
        } else {
            approval(d);
        }
    }
}

/// `disableAllHooks: true` turns the gate off; the project's setting wins over the user's.
fn disable_all_hooks(d: &mut Doctor, settings: &Settings) {
    let deciding = [&settings.project, &settings.user]
        .into_iter()
        .flatten()
        .find_map(|f| {
            f.value
                .get("disableAllHooks")
                .and_then(Value::as_bool)
                .map(|v| (f, v))
        });
    if let Some((file, true)) = deciding {
        d.push(
            Finding::error(
                AGENT,
                "disable-all-hooks",
                "`disableAllHooks: true` turns every Qwen Code hook off: the memory gate, and the memory index at session start and after a compaction",
            )
            .at(&file.display, file.line(&[Step::Key("disableAllHooks")]))
            .fix(format!(
                "remove `disableAllHooks` from {} (or set it to false)",
                file.display
            )),
        );
    }
}

/// With `security.folderTrust.enabled` in the user's settings, an untrusted folder loses its
/// settings, hooks and servers.
fn folder_trust(d: &mut Doctor, user: Option<&JsonFile>) {
    let enabled = user
        .and_then(|f| f.get(&["security", "folderTrust", "enabled"]))
        .and_then(Value::as_bool)
        == Some(true);
    if !enabled {
        d.push(Finding::ok(
            AGENT,
            "trust",
            "folder trust is off in your Qwen settings: the project's .qwen/settings.json is loaded",
        ));
        return;
    }
    let path = super::trusted_folders_path(d.home());
    let display = display_user(d, &path);
    let rules = JsonFile::load(&path, &display, Dialect::Jsonc)
        .ok()
        .flatten()
        .map(|f| f.value);
    let key = project_key(&d.repo.root);
    let finding = match trusted(rules.as_ref(), &key) {
        Some(true) => Finding::ok(AGENT, "trust", format!("{display} trusts this folder")),
        Some(false) => Finding::error(
            AGENT,
            "trust",
            format!("{display} marks this folder DO_NOT_TRUST: Qwen Code ignores .qwen/settings.json here, the MCP server and the Stop gate with it"),
        )
        .file(display.clone())
        .fix("remove that rule, then run `memloop trust`"),
        None => d.by_trust(Finding::error(
            AGENT,
            "trust",
            format!("folder trust is on and {display} does not trust this folder: Qwen Code ignores .qwen/settings.json here, the MCP server and the Stop gate with it"),
        )),
    };
    d.push(finding);
}

/// Whether the rules trust `folder`: the most specific rule covering it decides (`TRUST_FOLDER`
/// covers its path and below, `TRUST_PARENT` its parent and below, `DO_NOT_TRUST` its path and
/// below); `None` without a rule.
pub fn trusted(rules: Option<&Value>, folder: &str) -> Option<bool> {
    let folder = Path::new(folder);
    rules?
        .as_object()?
        .iter()
        .filter_map(|(path, level)| {
            let path = Path::new(path);
            let (base, trust) = match level.as_str()? {
                trust::TRUST_FOLDER => (path, true),
                "TRUST_PARENT" => (path.parent()?, true),
                "DO_NOT_TRUST" => (path, false),
                _ => return None,
            };
            folder
                .starts_with(base)
                .then(|| (base.components().count(), trust))
        })
        .max_by_key(|(depth, trust)| (*depth, !*trust))
        .map(|(_, trust)| trust)
}

/// Qwen starts a project's server only with an approval bound to the entry's current hash.
fn approval(d: &mut Doctor) {
    let path = approvals_path(d.home());
    let display = display_user(d, &path);
    let file = match JsonFile::load(&path, &display, Dialect::Jsonc) {
        Ok(file) => file,
        Err(refusal) => {
            return d.push(
                Finding::error(
                    AGENT,
                    "approval",
                    format!("{display} cannot be read: {refusal}; Qwen Code then treats every project server as pending"),
                )
                .file(display.clone())
                .fix("fix the syntax, then run `memloop trust`"),
            );
        }
    };
    let name = d.ctx.server.name.clone();
    let entry = server_entry(&d.ctx.server.transport);
    let key = project_key(&d.repo.root);
    let state = trust::approval_state(file.as_ref().map(|f| &f.value), &key, &name, &entry);
    let finding = match state {
        Approval::Approved => Finding::ok(
            AGENT,
            "approval",
            format!("{display} approves `{name}` as .qwen/settings.json holds it"),
        ),
        Approval::Stale => d.by_trust(Finding::error(
            AGENT,
            "approval",
            format!("{display} approves an older version of `{name}`: Qwen Code treats it as pending and does not start it ({YOLO_STARTS_IT})"),
        )
        .file(display.clone())),
        Approval::Rejected => Finding::error(
            AGENT,
            "approval",
            format!("{display} records `{name}` as rejected: Qwen Code does not start it ({YOLO_STARTS_IT})"),
        )
        .file(display.clone())
        .fix(format!("run `qwen mcp approve {name}` here, or remove the record and run `memloop trust`")),
        Approval::Missing => d.by_trust(Finding::error(
            AGENT,
            "approval",
            format!("`{name}` is not approved in {display}: Qwen Code lists it as pending and does not start it, so the memory tools are missing ({YOLO_STARTS_IT})"),
        )),
    };
    d.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_most_specific_trust_rule_decides() {
        let rules = json!({"/w": "TRUST_FOLDER", "/w/secret": "DO_NOT_TRUST",
            "/x/child": "TRUST_PARENT", "/y": "bogus"});
        assert_eq!(trusted(Some(&rules), "/w/repo"), Some(true));
        assert_eq!(trusted(Some(&rules), "/w/secret/repo"), Some(false));
        assert_eq!(trusted(Some(&rules), "/x/other"), Some(true));
        assert_eq!(trusted(Some(&rules), "/y/repo"), None);
        assert_eq!(
            trusted(Some(&rules), "/wx"),
            None,
            "a prefix is not a parent"
        );
        assert_eq!(trusted(None, "/w"), None);
    }
}
