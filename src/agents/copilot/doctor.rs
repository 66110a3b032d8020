//! Copilot's whole files: the rules it reads (`AGENTS.md`, `CLAUDE.md`,
//! `.github/copilot-instructions.md`: exactly once), `.github/hooks/memloop.json` (`version` 1
//! and an `agentStop` array, else Copilot skips the file), a second copy of memloop's gate in
//! another hooks file, memloop's server also in `.github/mcp.json` (where the `.mcp.json` entry
//! wins), and the folder trust in the user's config, without which Copilot loads neither the
//! server nor the hooks. Facts: xtask/src/e2e/copilot_facts.md.

use serde_json::Value;

use super::{GITHUB_MCP_JSON, HOOKS_JSON, approvals, trust};
use crate::config::AgentId;
use crate::doctor::locate::{JsonFile, Step};
use crate::doctor::{Doctor, Finding};
use crate::edit::json::Dialect;

const AGENT: AgentId = AgentId::Copilot;
const PROGRAM: &str = "Copilot CLI";
/// What `copilot instruction list` finds in a repository, in its order.
pub const RULES_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"];
/// Where else Copilot reads hooks in the repository: inline `hooks` in these.
const INLINE_HOOKS: &[&str] = &[
    ".github/copilot/settings.json",
    ".github/copilot/settings.local.json",
];

pub fn rules(d: &mut Doctor) {
    crate::doctor::instructions::each_of(d, AGENT, PROGRAM, RULES_FILES);
}

pub fn check(d: &mut Doctor) {
    hooks_file(d);
    github_mcp(d);
    if d.agent(AGENT).installed() {
        user_trust(d);
        tool_approvals(d);
    }
}

/// `memloop hook stop` in another of the files Copilot reads hooks from: a second gate.
pub fn wiring(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let mut others: Vec<String> = std::fs::read_dir(root.join(".github/hooks"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let path = format!(".github/hooks/{name}");
            (name.ends_with(".json") && path != HOOKS_JSON).then_some(path)
        })
        .collect();
    others.sort();
    others.extend(INLINE_HOOKS.iter().map(|name| (*name).to_owned()));
    for name in others {
        let Ok(Some(text)) = crate::files::read_within(&root.join(&name), &root) else {
            continue;
        };
        let Some(line) = text
            .lines()
            .position(|l| l.contains("memloop hook stop"))
            .map(|i| i + 1)
        else {
            continue;
        };
        d.push(
            Finding::warning(
                AGENT,
                "second-gate",
                format!("{name} also runs `memloop hook stop`: Copilot runs every hooks file, so the gate would judge each stop twice"),
            )
            .at(name, Some(line))
            .fix(format!("remove that hook; memloop's is in {HOOKS_JSON}")),
        );
    }
}

fn hooks_file(d: &mut Doctor) {
    let path = d.repo.root.join(HOOKS_JSON);
    let Ok(Some(file)) = JsonFile::load(&path, HOOKS_JSON, Dialect::Strict) else {
        // Missing is the drift check's; a syntax error is reported there with its position.
        return;
    };
    let version = file.get(&["version"]);
    if version != Some(&Value::from(1)) {
        d.push(
            Finding::error(
                AGENT,
                "hooks-version",
                format!(
                    "{HOOKS_JSON} has version {}: Copilot reads only version 1 hooks files and skips this one, so the Stop gate never runs",
                    version.map_or_else(|| "missing".to_owned(), Value::to_string)
                ),
            )
            .at(HOOKS_JSON, file.line(&[Step::Key("version")]))
            .by_sync(d.sync_command(false)),
        );
    }
    for event in [
        "agentStop",
        "sessionStart",
        "preCompact",
        "userPromptSubmitted",
    ] {
        let broken: Vec<usize> = file
            .get(&["hooks", event])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, hook)| {
                hook.get("type").and_then(Value::as_str) != Some("command")
                    || !(hook.get("bash").is_some_and(Value::is_string)
                        || hook.get("command").is_some_and(Value::is_string))
            })
            .map(|(i, _)| i)
            .collect();
        for index in broken {
            d.push(
                Finding::error(
                    AGENT,
                    "hooks-entry",
                    format!("hooks.{event}[{index}] in {HOOKS_JSON} is not a command hook with a `bash` command line: Copilot cannot run it"),
                )
                .at(HOOKS_JSON, file.line(&[Step::Key("hooks"), Step::Key(event), Step::Index(index)]))
                .by_sync(d.sync_command(false)),
            );
        }
    }
}

fn github_mcp(d: &mut Doctor) {
    let name = d.ctx.server.name.clone();
    let path = d.repo.root.join(GITHUB_MCP_JSON);
    let Ok(Some(file)) = JsonFile::load(&path, GITHUB_MCP_JSON, Dialect::Jsonc) else {
        return;
    };
    if file.get(&["mcpServers", &name]).is_some() {
        d.push(
            Finding::warning(
                AGENT,
                "mcp-twice",
                format!("{GITHUB_MCP_JSON} also registers `{name}`: memloop registers it once, in .mcp.json, whose entry Copilot takes over this one"),
            )
            .at(GITHUB_MCP_JSON, file.line(&[Step::Key("mcpServers"), Step::Key(&name)]))
            .fix(format!("remove mcpServers.{name} from {GITHUB_MCP_JSON}")),
        );
    }
}

fn user_trust(d: &mut Doctor) {
    let path = trust::config_path(d.home());
    let shown = d.ctx.display_user_path(&path);
    let config = match JsonFile::load(&path, &shown, Dialect::Jsonc) {
        Ok(file) => file.map(|f| f.value).unwrap_or(Value::Null),
        Err(refusal) => return d.refused(AGENT, "trust", &refusal),
    };
    let root = trust::trusted_root(&d.repo.root);
    let finding = match trust::trusted_by(&config, &root) {
        Some(folder) => Finding::ok(
            AGENT,
            "trust",
            format!("{} is trusted in {shown} (trustedFolders: {folder})", root.display()),
        )
        .file(shown.clone()),
        None => d.by_trust(
            Finding::error(
                AGENT,
                "trust",
                format!("{} is not in trustedFolders of {shown}: Copilot loads neither the project's MCP servers nor its hooks, so neither the memory server nor the Stop gate runs", root.display()),
            )
            .file(shown.clone()),
        ),
    };
    d.push(finding);
    if let Ok(Some(_)) = super::upgrade::legacy_trust(d.repo) {
        d.push(
            Finding::warning(
                AGENT,
                "trust-owner",
                format!("the trustedFolders entry for {} in {shown} was written by an older memloop through `sync --user-scope`: sync no longer keeps it, nor takes it back when Copilot leaves memloop.toml", root.display()),
            )
            .file(shown)
            .fix("run `memloop upgrade` (or `memloop trust`): the entry becomes memloop trust's, `memloop trust --revoke` takes it back"),
        );
    }
}

/// memloop's own two tools approved for this repository in `permissions-config.json`: without
/// them Copilot asks before each call, and `copilot -p` refuses the store (facts). A warning, not
/// an error: the loop still runs where the person answers.
fn tool_approvals(d: &mut Doctor) {
    if !d.ctx.config.memory.approve_tools || !d.ctx.server.is_embedded() {
        return;
    }
    let path = approvals::config_path(d.home());
    let shown = d.ctx.display_user_path(&path);
    let config = match JsonFile::load(&path, &shown, Dialect::Strict) {
        Ok(file) => file.map(|f| f.value).unwrap_or(Value::Null),
        Err(refusal) => return d.refused(AGENT, "approvals", &refusal),
    };
    let location = approvals::location(&d.repo.root).display().to_string();
    let missing: Vec<&str> = approvals::missing(&d.ctx.server.name, &location, &config);
    let finding = if missing.is_empty() {
        Finding::ok(
            AGENT,
            "approvals",
            format!("memloop's context_query and memory_store run without a question in {location} ({shown})"),
        )
        .file(shown)
    } else {
        d.by_trust(
            Finding::warning(
                AGENT,
                "approvals",
                format!(
                    "{} not approved for {location} in {shown}: Copilot asks before each call, and `copilot -p` refuses the store",
                    missing.join(" and ")
                ),
            )
            .file(shown),
        )
    };
    d.push(finding);
}
