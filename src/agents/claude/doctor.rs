//! Claude Code's whole files: `.claude/settings.json` and `settings.local.json` (strict JSON; one
//! schema error drops the whole file), `disableAllHooks`, `.mcp.json` entries and whether the
//! project server is approved. Facts: research/claude-code.md sections 1 and 3.

use serde_json::Value;

use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Agent, Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Claude;

/// Hook events with the version that introduced them, where the changelog says.
const EARLY_EVENTS: &[(&str, [u64; 3])] = &[
    ("PreToolUse", [1, 0, 38]),
    ("PostToolUse", [1, 0, 38]),
    ("Notification", [1, 0, 38]),
    ("Stop", [1, 0, 38]),
    ("SubagentStop", [1, 0, 41]),
    ("PreCompact", [1, 0, 48]),
    ("UserPromptSubmit", [1, 0, 54]),
    ("SessionStart", [1, 0, 62]),
    ("SessionEnd", [1, 0, 85]),
];

/// Hook events after v2.1.240, with the first release that has them, found by reading each
/// release's binary (its hook event list): absent in 2.1.331, present in 2.1.332.
const LATER_EVENTS: &[(&str, [u64; 3])] = &[("PreSkillShellCommand", [2, 1, 332])];

/// Every event documented at v2.1.240.
const EVENTS: &[&str] = &[
    "SessionStart",
    "Setup",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "PreToolUse",
    "PermissionRequest",
    "PermissionDenied",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "Notification",
    "MessageDisplay",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
    "Stop",
    "StopFailure",
    "TeammateIdle",
    "InstructionsLoaded",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
    "PreCompact",
    "PostCompact",
    // In 2.1.328's event list (the oldest release checked), not in the 2.1.240 docs.
    "PreModelSwitch",
    "PostModelSwitch",
    "Elicitation",
    "ElicitationResult",
    "SessionEnd",
];

/// Handler types and fields with the version that introduced them (changelog).
const NEWER_HANDLERS: &[(&str, [u64; 3])] = &[
    ("prompt", [2, 0, 30]),
    ("http", [2, 1, 63]),
    ("mcp_tool", [2, 1, 118]),
    ("args", [2, 1, 139]),
];

/// From this version an unknown event skips only that entry, not the whole file.
const TOLERANT_EVENTS: [u64; 3] = [2, 1, 101];

const TOOL_EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionDenied",
];

/// Fields each handler type requires, and the fields it may have (the handler schemas of
/// Claude Code 2.1.332; a key outside them is ignored, not an error: gate-claude-unknown-keys).
fn handler_fields(kind: &str) -> Option<(&'static [&'static str], &'static [&'static str])> {
    Some(match kind {
        "command" => (
            &["command"],
            &[
                "type",
                "command",
                "timeout",
                "async",
                "asyncRewake",
                "shell",
                "if",
                "statusMessage",
                "args",
                "once",
                "onFailure",
                "holdsTools",
                "rewakeMessage",
                "rewakeSummary",
                "cloud",
            ],
        ),
        "http" => (
            &["url"],
            &[
                "type",
                "url",
                "headers",
                "allowedEnvVars",
                "timeout",
                "if",
                "statusMessage",
                "once",
                "onFailure",
                "cloud",
            ],
        ),
        "mcp_tool" => (
            &["server", "tool"],
            &[
                "type",
                "server",
                "tool",
                "input",
                "timeout",
                "if",
                "statusMessage",
                "once",
                "onFailure",
            ],
        ),
        "prompt" => (
            &["prompt"],
            &[
                "type",
                "prompt",
                "model",
                "timeout",
                "if",
                "statusMessage",
                "once",
                "continueOnBlock",
            ],
        ),
        "agent" => (
            &["prompt"],
            &[
                "type",
                "prompt",
                "model",
                "timeout",
                "if",
                "statusMessage",
                "once",
            ],
        ),
        _ => return None,
    })
}

struct Settings {
    file: JsonFile,
}

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let mut settings = Vec::new();
    for rel in [".claude/settings.json", ".claude/settings.local.json"] {
        match JsonFile::load(&root.join(rel), rel, Dialect::Strict) {
            Ok(Some(file)) => {
                d.push(Finding::ok(AGENT, "settings-json", "valid strict JSON").file(rel));
                settings.push(Settings { file });
            }
            Ok(None) => {}
            Err(refusal) => d.refused(
                AGENT,
                "settings-json",
                &crate::edit::Refusal {
                    problem: format!(
                        "{}: Claude Code skips this whole settings file, hooks included",
                        refusal.problem
                    ),
                    ..refusal
                },
            ),
        }
    }
    let user_settings = d.home().join(".claude/settings.json");
    let user_display = "~/.claude/settings.json";
    let user = JsonFile::load(&user_settings, user_display, Dialect::Strict)
        .ok()
        .flatten();
    let agent = d.agent(AGENT).clone();
    for s in &settings {
        hooks(d, &agent, &s.file);
    }
    disable_all_hooks(d, &settings, user.as_ref());
    mcp_json(d);
    approval(d, &settings, user.as_ref());
}

fn hooks(d: &mut Doctor, agent: &Agent, file: &JsonFile) {
    let display = file.display.clone();
    let Some(hooks) = file.value.get("hooks") else {
        return;
    };
    let Some(events) = hooks.as_object() else {
        d.push(
            Finding::error(
                AGENT,
                "hooks-schema",
                "`hooks` is not an object: Claude Code drops the whole file",
            )
            .at(&display, file.line(&[Step::Key("hooks")]))
            .fix("make `hooks` an object of event names, each holding a list of matcher groups"),
        );
        return;
    };
    let mut problems = 0;
    let tolerant = agent.at_least(&TOLERANT_EVENTS);
    for (event, groups) in events {
        let event_line = file.line(&[Step::Key("hooks"), Step::Key(event)]);
        let later = LATER_EVENTS.iter().find(|(e, _)| e == event);
        let known_since = EARLY_EVENTS
            .iter()
            .chain(later)
            .find(|(e, _)| e == event)
            .map(|(_, v)| v);
        let documented = EVENTS.contains(&event.as_str()) || later.is_some();
        let too_new_for_this = known_since
            .zip(agent.numbers())
            .is_some_and(|(since, have)| crate::doctor::compare(&have, since).is_lt());
        if !documented || too_new_for_this {
            problems += 1;
            let version = agent.version.as_deref().unwrap_or("an unknown version");
            let finding = match tolerant {
                Some(true) => Finding::warning(
                    AGENT,
                    "hook-events",
                    format!(
                        "hook event `{event}` is unknown to Claude Code {version}; its entries are skipped"
                    ),
                ),
                _ => Finding::error(
                    AGENT,
                    "hook-events",
                    format!(
                        "hook event `{event}` is unknown to Claude Code {version}; versions before 2.1.101 drop the whole file for it"
                    ),
                ),
            };
            d.push(finding.at(&display, event_line).fix(format!(
                "remove or rename `{event}` (or update Claude Code)"
            )));
        } else if known_since.is_none() && tolerant == Some(false) {
            problems += 1;
            d.push(
                Finding::warning(
                    AGENT,
                    "hook-events",
                    format!(
                        "hook event `{event}` came after Claude Code 1.0.85 and your {} may not know it: before 2.1.101 an unknown event drops the whole file",
                        agent.version.as_deref().unwrap_or("version")
                    ),
                )
                .at(&display, event_line)
                .fix("update Claude Code to 2.1.101 or later, or remove this event"),
            );
        }
        let Some(groups) = groups.as_array() else {
            problems += 1;
            d.push(
                Finding::error(
                    AGENT,
                    "hooks-schema",
                    format!("hooks.{event} is not a list of matcher groups: Claude Code drops the whole file"),
                )
                .at(&display, event_line)
                .fix(format!(
                    "write hooks.{event} as [{{\"hooks\": [{{\"type\": \"command\", \"command\": \"...\"}}]}}]"
                )),
            );
            continue;
        };
        for (gi, group) in groups.iter().enumerate() {
            let path = [Step::Key("hooks"), Step::Key(event), Step::Index(gi)];
            let line = file.line(&path);
            let here = format!("hooks.{event}[{gi}]");
            let mut bad = |d: &mut Doctor, what: String, fix: &str| {
                problems += 1;
                d.push(
                    Finding::error(
                        AGENT,
                        "hooks-schema",
                        format!("{here}{what}: Claude Code drops the whole file"),
                    )
                    .at(&display, line)
                    .fix(fix.to_owned()),
                );
            };
            let Some(group) = group.as_object() else {
                bad(
                    d,
                    " is not a matcher group object".into(),
                    "write {\"matcher\": \"...\", \"hooks\": [ ... ]}",
                );
                continue;
            };
            if let Some(matcher) = group.get("matcher")
                && !matcher.is_string()
            {
                bad(
                    d,
                    format!(".matcher is {}, not a string", kind(matcher)),
                    "write the matcher as a string, e.g. \"Edit|Write\"",
                );
            }
            let ignored: Vec<&String> = group
                .keys()
                .filter(|k| *k != "matcher" && *k != "hooks")
                .collect();
            for key in &ignored {
                d.push(
                    Finding::warning(
                        AGENT,
                        "hooks-schema",
                        format!("{here} has the unknown key `{key}`: Claude Code ignores it"),
                    )
                    .at(&display, line)
                    .fix("remove the key, or fix its spelling; a group holds only `matcher` and `hooks`"),
                );
            }
            let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
                bad(
                    d,
                    " has no `hooks` list".into(),
                    "add \"hooks\": [{\"type\": \"command\", \"command\": \"...\"}]",
                );
                continue;
            };
            for (hi, handler) in handlers.iter().enumerate() {
                let hline = file.line(&[
                    path[0],
                    path[1],
                    path[2],
                    Step::Key("hooks"),
                    Step::Index(hi),
                ]);
                let there = format!("{here}.hooks[{hi}]");
                let mut wrong = |d: &mut Doctor, what: String, fix: String| {
                    problems += 1;
                    d.push(
                        Finding::error(
                            AGENT,
                            "hooks-schema",
                            format!("{there}{what}: Claude Code drops the whole file"),
                        )
                        .at(&display, hline)
                        .fix(fix),
                    );
                };
                let Some(handler) = handler.as_object() else {
                    wrong(
                        d,
                        " is not an object".into(),
                        "write {\"type\": \"command\", \"command\": \"...\"}".into(),
                    );
                    continue;
                };
                let Some(kind_name) = handler.get("type").and_then(Value::as_str) else {
                    wrong(
                        d,
                        " has no `type`".into(),
                        "add \"type\": \"command\" (or http, mcp_tool, prompt, agent)".into(),
                    );
                    continue;
                };
                let Some((required, allowed)) = handler_fields(kind_name) else {
                    wrong(
                        d,
                        format!(" has the unknown type `{kind_name}`"),
                        "use command, http, mcp_tool, prompt or agent".into(),
                    );
                    continue;
                };
                let newer = NEWER_HANDLERS.iter().find(|(what, since)| {
                    (*what == kind_name || handler.contains_key(*what))
                        && agent
                            .numbers()
                            .is_some_and(|have| crate::doctor::compare(&have, since).is_lt())
                });
                if let Some((what, since)) = newer {
                    let since = since.map(|n| n.to_string()).join(".");
                    wrong(
                        d,
                        format!(
                            " uses `{what}`, which Claude Code {} does not know (added in {since})",
                            agent.version.as_deref().unwrap_or_default()
                        ),
                        format!(
                            "update Claude Code to {since} or later, or rewrite the handler without `{what}`"
                        ),
                    );
                }
                for field in required.iter().filter(|f| !handler.contains_key(**f)) {
                    wrong(
                        d,
                        format!(" (type {kind_name}) lacks `{field}`"),
                        format!("add `{field}`"),
                    );
                }
                for key in handler.keys().filter(|k| !allowed.contains(&k.as_str())) {
                    problems += 1;
                    d.push(
                        Finding::warning(
                            AGENT,
                            "hooks-schema",
                            format!("{there} has the unknown key `{key}`: Claude Code ignores it"),
                        )
                        .at(&display, hline)
                        .fix(format!(
                            "remove `{key}`, or fix its spelling; a {kind_name} handler takes {}",
                            allowed.join(", ")
                        )),
                    );
                }
                if handler.contains_key("if") && !TOOL_EVENTS.contains(&event.as_str()) {
                    problems += 1;
                    d.push(
                        Finding::warning(
                            AGENT,
                            "hooks-schema",
                            format!("{there} has `if` on {event}, a non-tool event: this handler never runs"),
                        )
                        .at(&display, hline)
                        .fix("remove `if`, or move the handler to a tool event"),
                    );
                }
            }
            problems += ignored.len();
        }
    }
    if problems == 0 {
        d.push(
            Finding::ok(
                AGENT,
                "hooks-schema",
                "every hook entry is valid for this Claude Code",
            )
            .at(&display, file.line(&[Step::Key("hooks")])),
        );
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `disableAllHooks: true` turns the gate off; the most specific file that sets it wins
/// (local, then project, then user).
fn disable_all_hooks(d: &mut Doctor, settings: &[Settings], user: Option<&JsonFile>) {
    let mut files: Vec<&JsonFile> = settings.iter().rev().map(|s| &s.file).collect();
    files.extend(user);
    let deciding = files.iter().find_map(|f| {
        f.value
            .get("disableAllHooks")
            .and_then(Value::as_bool)
            .map(|v| (f, v))
    });
    match deciding {
        Some((file, true)) => d.push(
            Finding::error(
                AGENT,
                "disable-all-hooks",
                "`disableAllHooks: true` turns every hook off, the memory gate included",
            )
            .at(&file.display, file.line(&[Step::Key("disableAllHooks")]))
            .fix(format!(
                "remove `disableAllHooks` from {} (or set it to false)",
                file.display
            )),
        ),
        _ => d.push(Finding::ok(
            AGENT,
            "disable-all-hooks",
            "hooks are not disabled (`disableAllHooks` is not true)",
        )),
    }
}

/// Every `.mcp.json` entry sets `type` (an entry without one is taken for stdio).
fn mcp_json(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let Ok(Some(file)) = JsonFile::load(&root.join(".mcp.json"), ".mcp.json", Dialect::Strict)
    else {
        return;
    };
    let Some(servers) = file.value.get("mcpServers").and_then(Value::as_object) else {
        if file.value.get("servers").is_some() {
            d.push(
                Finding::error(
                    AGENT,
                    "mcp-type",
                    "`.mcp.json` uses `servers` (VS Code's key): Claude Code cannot parse it",
                )
                .at(".mcp.json", file.line(&[Step::Key("servers")]))
                .fix("rename `servers` to `mcpServers`"),
            );
        }
        return;
    };
    let mut problems = 0;
    for (name, entry) in servers {
        let line = file.line(&[Step::Key("mcpServers"), Step::Key(name)]);
        let kind = entry.get("type").and_then(Value::as_str);
        let finding = match kind {
            Some("stdio" | "http" | "sse" | "ws" | "streamable-http") => continue,
            Some(other) => Finding::error(
                AGENT,
                "mcp-type",
                format!("mcpServers.{name} has the unknown type `{other}`"),
            )
            .fix("use stdio, http, sse or ws"),
            None if entry.get("url").is_some() => Finding::error(
                AGENT,
                "mcp-type",
                format!("mcpServers.{name} has a `url` but no `type`: Claude Code rejects it"),
            )
            .fix("add \"type\": \"http\" (or \"sse\")"),
            None => Finding::warning(
                AGENT,
                "mcp-type",
                format!("mcpServers.{name} has no `type`; Claude Code assumes stdio"),
            )
            .fix("add \"type\": \"stdio\""),
        };
        problems += 1;
        d.push(finding.at(".mcp.json", line));
    }
    if problems == 0 {
        d.push(Finding::ok(AGENT, "mcp-type", "every server sets `type`").file(".mcp.json"));
    }
}

/// Project servers need approval: `enabledMcpjsonServers` / `enableAllProjectMcpServers`
/// approve, `disabledMcpjsonServers` rejects (and beats both).
fn approval(d: &mut Doctor, settings: &[Settings], user: Option<&JsonFile>) {
    let name = d.ctx.server.name.clone();
    // Only a server that `.mcp.json` holds needs approval (the drift check reports a missing one).
    let listed = JsonFile::load(&d.repo.root.join(".mcp.json"), ".mcp.json", Dialect::Strict)
        .ok()
        .flatten()
        .is_some_and(|f| f.get(&["mcpServers", &name]).is_some());
    if !listed {
        return;
    }
    let mut files: Vec<&JsonFile> = settings.iter().map(|s| &s.file).collect();
    files.extend(user);
    let lists = |key: &str| {
        files.iter().copied().find(|f| {
            f.value
                .get(key)
                .and_then(Value::as_array)
                .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name.as_str())))
        })
    };
    if let Some(file) = lists("disabledMcpjsonServers") {
        d.push(
            Finding::error(
                AGENT,
                "approval",
                format!("the project server `{name}` is rejected (disabledMcpjsonServers): Claude Code never starts it"),
            )
            .at(&file.display, file.line(&[Step::Key("disabledMcpjsonServers")]))
            .fix(format!(
                "remove \"{name}\" from disabledMcpjsonServers in {}, or run `claude mcp reset-project-choices` and approve it",
                file.display
            )),
        );
        return;
    }
    // Approval is a person's answer on their machine: where Claude Code is not installed (CI),
    // a missing one is only worth knowing.
    let severity = if d.agent(AGENT).installed() {
        crate::doctor::Severity::Warning
    } else {
        crate::doctor::Severity::Info
    };
    let approves = |f: &&JsonFile| {
        f.value
            .get("enabledMcpjsonServers")
            .and_then(Value::as_array)
            .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name.as_str())))
            || f.value.get("enableAllProjectMcpServers") == Some(&Value::Bool(true))
    };
    // The user's own settings approve anywhere; the repository's files (committed or local) only
    // once the folder is trusted (Claude Code 2.1.196+ for settings.json, 2.1.207+ for the local one).
    if let Some(file) = user.filter(|f| approves(f)) {
        d.push(
            Finding::ok(
                AGENT,
                "approval",
                format!("the project server `{name}` is approved"),
            )
            .file(&file.display),
        );
        return;
    }
    if let Some(file) = files.iter().copied().find(|f| approves(f)) {
        let trusted = trusted_folder(d);
        let needs_trust = d.agent(AGENT).at_least(&[2, 1, 196]).unwrap_or(true);
        if trusted || !needs_trust {
            d.push(
                Finding::ok(
                    AGENT,
                    "approval",
                    format!("the project server `{name}` is approved"),
                )
                .file(&file.display),
            );
        } else {
            let finding = Finding::new(
                AGENT,
                "approval",
                severity,
                format!(
                    "the project server `{name}` is approved in {}, but Claude Code honours a repository's approval only once the folder is trusted, and this one is not yet",
                    file.display
                ),
            )
            .file(&file.display);
            d.push(d.by_trust(finding));
        }
        return;
    }
    let finding = Finding::new(
        AGENT,
        "approval",
        severity,
        format!(
            "the project server `{name}` is pending approval: interactive Claude Code asks before starting it (`claude -p` starts it without asking)"
        ),
    )
    .file(".mcp.json");
    d.push(d.by_trust(finding));
}

/// Whether the user accepted Claude Code's trust dialog for this repository
/// (`projects["<root>"].hasTrustDialogAccepted` in `~/.claude.json` or `$CLAUDE_CONFIG_DIR/.claude.json`).
fn trusted_folder(d: &Doctor) -> bool {
    let config = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| d.home().to_path_buf(), std::path::PathBuf::from)
        .join(".claude.json");
    let Ok(Some(file)) = JsonFile::load(&config, "~/.claude.json", Dialect::Jsonc) else {
        return false;
    };
    let root = std::fs::canonicalize(&d.repo.root).unwrap_or_else(|_| d.repo.root.clone());
    [
        root.display().to_string(),
        d.repo.root.display().to_string(),
    ]
    .iter()
    .any(|key| {
        file.value
            .get("projects")
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("hasTrustDialogAccepted"))
            == Some(&Value::Bool(true))
    })
}
