//! The gate's wiring: the hooks and the embedded server run `memloop` from PATH, so it must be
//! there and not older than what wrote the files; and no literal secret sits in a committed MCP
//! config (the files each agent names). A second copy of an agent's gate is the agent's own
//! check (`agents::Agent::check_wiring`).

use serde_json::Value;

use super::locate::{JsonFile, Step};
use super::{Doctor, Finding, Group};
use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::edit::markdown::BLOCK_VERSION;

/// memloop on PATH, and no file written by a newer memloop.
pub fn check(d: &mut Doctor) {
    on_path(d);
    newer_writer(d);
}

fn this_version() -> Vec<u64> {
    super::version_numbers(env!("CARGO_PKG_VERSION")).unwrap_or_default()
}

/// `memloop` resolvable on PATH (as the agents' hook commands need it), and not older than this one.
fn on_path(d: &mut Doctor) {
    let found = match which::which("memloop") {
        Ok(path) => path,
        Err(_) => {
            d.push(
                Finding::error(
                    Group::Memloop,
                    "on-path",
                    "`memloop` is not on PATH: the agents' hooks (`memloop hook stop ...`) and the server (`memloop serve`) cannot start, so the gate fails open and the memory is gone",
                )
                .fix("install memloop on PATH: `npm install -g memloop`, `cargo binstall memloop`, or `cargo install --path .` in a memloop checkout"),
            );
            return;
        }
    };
    let same = std::env::current_exe()
        .ok()
        .and_then(|exe| std::fs::canonicalize(exe).ok())
        .zip(std::fs::canonicalize(&found).ok())
        .is_some_and(|(a, b)| a == b);
    if same {
        d.push(Finding::ok(
            Group::Memloop,
            "on-path",
            format!(
                "the hooks run {} (this memloop, {})",
                found.display(),
                env!("CARGO_PKG_VERSION")
            ),
        ));
        return;
    }
    let version = crate::detect::installed_version("memloop");
    let numbers = version.as_deref().and_then(super::version_numbers);
    match numbers {
        Some(v) if super::compare(&v, &this_version()).is_lt() => d.push(
            Finding::warning(
                Group::Memloop,
                "on-path",
                format!(
                    "the hooks run {} ({}), older than this memloop ({}) whose format the files follow",
                    found.display(),
                    version.unwrap_or_default(),
                    env!("CARGO_PKG_VERSION")
                ),
            )
            .fix("update the memloop on PATH to this version or later"),
        ),
        Some(_) => d.push(Finding::ok(
            Group::Memloop,
            "on-path",
            format!("the hooks run {} ({})", found.display(), version.unwrap_or_default()),
        )),
        None => d.push(
            Finding::warning(
                Group::Memloop,
                "on-path",
                format!("{} is on PATH as `memloop` but `memloop --version` did not answer", found.display()),
            )
            .fix("check that it is memloop and that it runs"),
        ),
    }
}

/// The `vN` of a `// memloop opencode plugin vN` first line.
fn plugin_version(text: &str) -> Option<u32> {
    text.lines()
        .next()?
        .strip_prefix("// memloop opencode plugin v")?
        .trim()
        .parse()
        .ok()
}

/// A managed block or plugin with a higher format version than this memloop knows came from a
/// newer one.
fn newer_writer(d: &mut Doctor) {
    let ours = plugin_version(crate::gate::OPENCODE_PLUGIN).unwrap_or(0);
    let plugin = crate::gate::OPENCODE_PLUGIN_PATH;
    if let Ok(text) = crate::files::read_regular(&d.repo.root.join(plugin)).map(String::from_utf8)
        && let Ok(text) = text
        && let Some(theirs) = plugin_version(&text).filter(|v| *v > ours)
    {
        d.push(
            Finding::warning(
                Group::Memloop,
                "version",
                format!("{plugin} was written by a newer memloop (plugin v{theirs}, this one writes v{ours})"),
            )
            .at(plugin, Some(1))
            .fix("update memloop on this machine and in CI"),
        );
    }
    for name in ["CLAUDE.md", "AGENTS.md"] {
        let Ok(Ok(text)) =
            crate::files::read_regular(&d.repo.root.join(name)).map(String::from_utf8)
        else {
            continue;
        };
        let spans = crate::edit::markdown::find(&text, name).unwrap_or_default();
        if let Some(span) = spans
            .iter()
            .find(|s| s.version.is_some_and(|v| v > BLOCK_VERSION))
        {
            let line = text[..span.start].matches('\n').count() + 1;
            d.push(
                Finding::warning(
                    Group::Memloop,
                    "version",
                    format!(
                        "{name} was written by a newer memloop (block format v{}, this one knows v{BLOCK_VERSION})",
                        span.version.unwrap_or_default()
                    ),
                )
                .at(name, Some(line))
                .fix("update memloop on this machine and in CI"),
            );
        }
    }
}

pub use crate::secrets::Syntax;
use crate::secrets::{in_args, in_command, in_url, is_reference, is_secret_name, looks_like_token};

/// A literal credential in a committed MCP config is an error: it lands in git history.
/// `files`: the committed MCP configs of the enabled agents (`agents::Agent::mcp_files`).
pub fn secrets(d: &mut Doctor, files: &[&McpFile]) {
    let root = d.repo.root.clone();
    for spec in files {
        let Ok(Some(file)) = JsonFile::load(&root.join(spec.name), spec.name, spec.dialect) else {
            continue;
        };
        scan_file(d, spec, &file);
    }
}

/// A committed MCP config: whose it is, its variable syntax, and where servers and their
/// header and environment maps sit.
pub struct McpFile {
    pub agent: AgentId,
    /// Relative to the repository.
    pub name: &'static str,
    pub syntax: Syntax,
    pub dialect: Dialect,
    /// The key holding the servers.
    pub servers: &'static str,
    /// The keys of each server's header and environment maps.
    pub maps: &'static [&'static str],
}

fn scan_file(d: &mut Doctor, spec: &McpFile, file: &JsonFile) {
    let (agent, syntax, servers_key, maps) = (spec.agent, spec.syntax, [spec.servers], spec.maps);
    let Some(servers) = file.get(&servers_key).and_then(Value::as_object) else {
        return;
    };
    let mut servers: Vec<(Vec<String>, &serde_json::Map<String, Value>)> = servers
        .iter()
        .filter_map(|(name, entry)| {
            entry
                .as_object()
                .map(|m| (vec![servers_key[0].to_owned(), name.clone()], m))
        })
        .collect();
    // OpenCode 2's `mcp.servers.<name>`.
    if let Some((_, nested)) = servers
        .iter()
        .find(|(path, _)| path[1] == "servers")
        .cloned()
    {
        servers.extend(nested.iter().filter_map(|(name, entry)| {
            entry.as_object().map(|m| {
                (
                    vec![servers_key[0].to_owned(), "servers".into(), name.clone()],
                    m,
                )
            })
        }));
    }
    let mut found = 0;
    for (path, entry) in &servers {
        for map_key in maps {
            let Some(map) = entry.get(*map_key).and_then(Value::as_object) else {
                continue;
            };
            for (key, value) in map {
                let Some(value) = value.as_str() else {
                    continue;
                };
                if value.is_empty() || is_reference(value, syntax) {
                    continue;
                }
                if !(is_secret_name(key) || looks_like_token(value)) {
                    continue;
                }
                found += 1;
                let mut steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
                steps.push(Step::Key(map_key));
                steps.push(Step::Key(key));
                let how = match syntax {
                    Syntax::Dollar => format!("write \"{key}\": \"Bearer ${{TOKEN_VAR}}\" and export TOKEN_VAR"),
                    Syntax::Opencode => format!("write \"{key}\": \"Bearer {{env:TOKEN_VAR}}\" and export TOKEN_VAR"),
                    Syntax::Verbatim => "remove it; use \"bearerTokenEnvVar\": \"TOKEN_VAR\" (Kimi reads no variables in headers) or let the server inherit the variable".into(),
                };
                d.push(
                    Finding::error(
                        agent,
                        "secrets",
                        format!(
                            "{}.{map_key}.{key} holds a literal credential in a committed file",
                            path.join(".")
                        ),
                    )
                    .at(&file.display, file.line(&steps))
                    .fix(format!(
                        "{how}; then rotate the credential, it is in git history"
                    )),
                );
            }
        }
        for (steps_tail, problem) in command_line_leaks(entry, syntax) {
            found += 1;
            let mut steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            steps.extend(steps_tail.iter().copied());
            let what = steps_tail
                .iter()
                .map(|step| match step {
                    Step::Key(key) => format!(".{key}"),
                    Step::Index(index) => format!("[{index}]"),
                })
                .collect::<String>();
            let fix = match (syntax, steps_tail.first()) {
                (_, Some(Step::Key("url"))) => match syntax {
                    Syntax::Dollar => {
                        "drop it from the URL and send it as a header: \"headers\": { \"Authorization\": \"Bearer ${TOKEN_VAR}\" }, and export TOKEN_VAR"
                    }
                    Syntax::Opencode => {
                        "drop it from the URL and send it as a header: \"headers\": { \"Authorization\": \"Bearer {env:TOKEN_VAR}\" }, and export TOKEN_VAR"
                    }
                    Syntax::Verbatim => {
                        "drop it from the URL and use \"bearerTokenEnvVar\": \"TOKEN_VAR\" (Kimi reads no variables in mcp.json), and export TOKEN_VAR"
                    }
                },
                // Droid expands variables in `env` and `headers` only, never in `args`.
                (Syntax::Dollar, _) if agent == AgentId::Droid => {
                    "let the server read it from its environment: \"env\": { \"TOKEN_VAR\": \"${TOKEN_VAR}\" }; export TOKEN_VAR"
                }
                (Syntax::Dollar, _) => {
                    "let the server read it from its environment: \"env\": { \"TOKEN_VAR\": \"${TOKEN_VAR}\" }, or write the argument as ${TOKEN_VAR}; export TOKEN_VAR"
                }
                (Syntax::Opencode, _) => {
                    "let the server read it from its environment: \"environment\": { \"TOKEN_VAR\": \"{env:TOKEN_VAR}\" }, or write the argument as {env:TOKEN_VAR}; export TOKEN_VAR"
                }
                (Syntax::Verbatim, _) => {
                    "remove it from the command line: Kimi Code passes its own environment to the server, so export the variable the server reads"
                }
            };
            d.push(
                Finding::error(
                    agent,
                    "secrets",
                    format!(
                        "{}{what} holds {problem} in a committed file",
                        path.join(".")
                    ),
                )
                .at(&file.display, file.line(&steps))
                .fix(format!(
                    "{fix}; then rotate the credential, it is in git history"
                )),
            );
        }
    }
    if found == 0 {
        d.push(Finding::ok(agent, "secrets", "no literal credentials").file(&file.display));
    }
}

/// Credentials on a server's command line or in its URL: `url`, `command` (a string, or
/// OpenCode's argv array) and `args`, with the step to each.
fn command_line_leaks(
    entry: &serde_json::Map<String, Value>,
    syntax: Syntax,
) -> Vec<(Vec<Step<'static>>, String)> {
    let mut out = Vec::new();
    if let Some(problem) = entry
        .get("url")
        .and_then(Value::as_str)
        .and_then(|url| in_url(url, syntax))
    {
        out.push((vec![Step::Key("url")], problem));
    }
    let strings = |value: &Value| -> Option<Vec<String>> {
        value.as_array().map(|items| {
            items
                .iter()
                .map(|item| item.as_str().unwrap_or_default().to_owned())
                .collect()
        })
    };
    match entry.get("command") {
        Some(Value::String(command)) => {
            if let Some(problem) = in_command(command, syntax) {
                out.push((vec![Step::Key("command")], problem));
            }
        }
        Some(argv @ Value::Array(_)) => {
            if let Some((index, problem)) = strings(argv).and_then(|argv| in_args(&argv, syntax)) {
                out.push((vec![Step::Key("command"), Step::Index(index)], problem));
            }
        }
        _ => {}
    }
    if let Some((index, problem)) = entry
        .get("args")
        .and_then(strings)
        .and_then(|args| in_args(&args, syntax))
    {
        out.push((vec![Step::Key("args"), Step::Index(index)], problem));
    }
    out
}
