//! The gate's wiring: the hooks and the embedded server run `memloop` from PATH, so it must be
//! there and not older than what wrote the files; no second copy of the gate runs; and no
//! literal secret sits in a committed MCP config.

use serde_json::Value;

use super::locate::{JsonFile, Step};
use super::{Doctor, Finding, Group};
use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::edit::markdown::BLOCK_VERSION;

pub fn check(d: &mut Doctor) {
    on_path(d);
    newer_writer(d);
    global_opencode_plugin(d);
    secrets(d);
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
    let version = crate::agents::detect::installed_version("memloop");
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
    let plugin = crate::agents::opencode::PLUGIN_PATH;
    if let Ok(text) = std::fs::read_to_string(d.repo.root.join(plugin))
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
        let Ok(text) = std::fs::read_to_string(d.repo.root.join(name)) else {
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

/// OpenCode loads the global plugins folder too: memloop's plugin there and in the project runs
/// the gate twice.
fn global_opencode_plugin(d: &mut Doctor) {
    if !d.enabled(AgentId::Opencode) {
        return;
    }
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
                    AgentId::Opencode,
                    "gate-duplicate",
                    format!("{display} is a second, global copy of the gate plugin: OpenCode loads both and sends the agent back twice"),
                )
                .file(display.clone())
                .fix(format!("delete {display}; the project's {} is enough", crate::agents::opencode::PLUGIN_PATH)),
            );
        }
    }
}

/// Header and environment names that carry credentials.
fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "auth",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "cookie",
        "api-key",
        "api_key",
        "apikey",
        "private",
    ]
    .iter()
    .any(|word| lower.contains(word))
}

/// Values that are credentials whatever their name.
fn secret_value(value: &str) -> bool {
    let v = value.trim();
    let token = v.rsplit(' ').next().unwrap_or(v);
    [
        "sk-",
        "sk_live_",
        "ghp_",
        "gho_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "AKIA",
        "AIza",
    ]
    .iter()
    .any(|prefix| token.starts_with(prefix) && token.len() >= 16)
}

/// Whether `value` only references the environment in the file's own syntax.
fn is_reference(value: &str, syntax: Syntax) -> bool {
    let stripped = match syntax {
        Syntax::Claude => {
            let Some(pieces) = crate::config::env_pieces(value) else {
                return false;
            };
            if !pieces
                .iter()
                .any(|p| matches!(p, crate::config::Piece::Var(_)))
            {
                return false;
            }
            pieces
                .iter()
                .filter_map(|p| match p {
                    crate::config::Piece::Literal(text) => Some(*text),
                    crate::config::Piece::Var(_) => None,
                })
                .collect::<String>()
        }
        Syntax::Opencode => {
            let mut rest = value.to_owned();
            let mut any = false;
            for prefix in ["{env:", "{file:"] {
                while let Some(start) = rest.find(prefix) {
                    let Some(end) = rest[start..].find('}') else {
                        return false;
                    };
                    rest.replace_range(start..start + end + 1, "");
                    any = true;
                }
            }
            if !any {
                return false;
            }
            rest
        }
        Syntax::Kimi => return false,
    };
    let word = stripped.trim();
    word.is_empty() || ["bearer", "basic", "token"].contains(&word.to_ascii_lowercase().as_str())
}

#[derive(Clone, Copy)]
enum Syntax {
    Claude,
    Opencode,
    Kimi,
}

/// A literal credential in a committed MCP config is an error: it lands in git history.
fn secrets(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let mut files: Vec<McpFile> = Vec::new();
    if d.enabled(AgentId::Claude) {
        files.push(McpFile {
            agent: AgentId::Claude,
            name: ".mcp.json",
            syntax: Syntax::Claude,
            dialect: Dialect::Strict,
            servers: "mcpServers",
            maps: &["headers", "env"],
        });
    }
    if d.enabled(AgentId::Opencode) {
        for name in ["opencode.json", "opencode.jsonc"] {
            files.push(McpFile {
                agent: AgentId::Opencode,
                name,
                syntax: Syntax::Opencode,
                dialect: Dialect::Jsonc,
                servers: "mcp",
                maps: &["headers", "environment"],
            });
        }
    }
    if d.enabled(AgentId::Kimi) {
        files.push(McpFile {
            agent: AgentId::Kimi,
            name: ".kimi-code/mcp.json",
            syntax: Syntax::Kimi,
            dialect: Dialect::Strict,
            servers: "mcpServers",
            maps: &["headers", "env"],
        });
    }
    for spec in &files {
        let Ok(Some(file)) = JsonFile::load(&root.join(spec.name), spec.name, spec.dialect) else {
            continue;
        };
        scan_file(d, spec, &file);
    }
}

/// A committed MCP config: whose it is, its variable syntax, and where servers and their
/// header and environment maps sit.
struct McpFile {
    agent: AgentId,
    name: &'static str,
    syntax: Syntax,
    dialect: Dialect,
    servers: &'static str,
    maps: &'static [&'static str],
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
                if !(secret_name(key) || secret_value(value)) {
                    continue;
                }
                found += 1;
                let mut steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
                steps.push(Step::Key(map_key));
                steps.push(Step::Key(key));
                let how = match syntax {
                    Syntax::Claude => format!("write \"{key}\": \"Bearer ${{TOKEN_VAR}}\" and export TOKEN_VAR"),
                    Syntax::Opencode => format!("write \"{key}\": \"Bearer {{env:TOKEN_VAR}}\" and export TOKEN_VAR"),
                    Syntax::Kimi => "remove it; use \"bearerTokenEnvVar\": \"TOKEN_VAR\" (Kimi reads no variables in headers) or let the server inherit the variable".into(),
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
        if let Some(url) = entry.get("url").and_then(Value::as_str)
            && let Some(query) = url.split_once('?').map(|(_, q)| q)
            && query.split('&').any(|pair| {
                pair.split_once('=').is_some_and(|(k, v)| {
                    secret_name(k) && !v.is_empty() && !is_reference(v, syntax)
                })
            })
        {
            found += 1;
            let mut steps: Vec<Step> = path.iter().map(|k| Step::Key(k)).collect();
            steps.push(Step::Key("url"));
            d.push(
                Finding::error(agent, "secrets", format!("{}.url carries a literal credential in its query", path.join(".")))
                    .at(&file.display, file.line(&steps))
                    .fix("move the credential into a header that references an environment variable; then rotate it"),
            );
        }
    }
    if found == 0 {
        d.push(Finding::ok(agent, "secrets", "no literal credentials").file(&file.display));
    }
}
