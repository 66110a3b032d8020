//! `--live`: ask the installed agents what they load, each with a timeout: `claude mcp get
//! <name>`, `opencode debug config` (the resolved entry compared with memloop's, `***` matching a
//! redacted value) and `kimi doctor config`.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Agent, Doctor, Finding};
use crate::agents::detect::KimiFlavor;
use crate::config::AgentId;

/// What a finished command printed.
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` in `cwd` with no stdin, killing it after `timeout`.
pub fn run(program: &Path, args: &[&str], cwd: &Path, timeout: Duration) -> Result<Output, String> {
    let shown = format!("`{} {}`", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("{shown} could not start: {err}"))?;
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{shown} did not finish within {} s and was stopped",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{shown} could not be waited for: {e}")),
        }
    };
    Ok(Output {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// The first few non-empty lines of a text, joined for a one-line message (terminal colours
/// removed).
pub fn excerpt(text: &str, lines: usize) -> String {
    let plain = strip_ansi(text);
    let picked: Vec<&str> = plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(lines)
        .collect();
    picked.join(" | ")
}

/// `exit 1`, or how else a process ended.
fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"))
}

/// Removes ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn check(d: &mut Doctor) {
    for id in AgentId::ALL {
        if !d.enabled(id) {
            continue;
        }
        let agent = d.agent(id).clone();
        let Some(program) = agent.path.clone() else {
            d.push(Finding::info(
                id,
                "live",
                format!("{} is not installed: live check skipped", id.as_str()),
            ));
            continue;
        };
        match id {
            AgentId::Claude => claude(d, &program),
            AgentId::Opencode => opencode(d, &program, &agent),
            AgentId::Kimi => kimi(d, &program, &agent),
        }
    }
}

fn claude(d: &mut Doctor, program: &Path) {
    let name = d.ctx.server.name.clone();
    let shown = format!("claude mcp get {name}");
    let out = match run(
        program,
        &["mcp", "get", &name],
        &d.repo.root,
        d.options.timeout,
    ) {
        Ok(out) => out,
        Err(why) => {
            return d.push(
                Finding::error(AgentId::Claude, "live", why).fix("run it by hand to see why"),
            );
        }
    };
    let all = format!("{}\n{}", out.stdout, out.stderr);
    let finding = if out.code != Some(0) {
        Finding::error(
            AgentId::Claude,
            "live",
            format!(
                "`{shown}` failed ({}): {}",
                exit_text(out.code),
                excerpt(&all, 3)
            ),
        )
        .fix("check .mcp.json and run `claude mcp list`")
    } else if all.contains("Rejected") {
        Finding::error(AgentId::Claude, "live", format!("`{shown}`: the server is rejected"))
            .fix(format!("remove \"{name}\" from disabledMcpjsonServers, or run `claude mcp reset-project-choices`"))
    } else if all.contains("Pending approval") {
        Finding::warning(
            AgentId::Claude,
            "live",
            format!("`{shown}`: the server is pending approval"),
        )
        .fix("run `claude` here and approve it")
    } else if all.contains("Failed to connect") {
        Finding::error(
            AgentId::Claude,
            "live",
            format!(
                "`{shown}`: Claude Code cannot connect: {}",
                excerpt(&all, 4)
            ),
        )
        .fix("run the server's command by hand to see why it fails")
    } else {
        let status = all
            .lines()
            .find(|l| l.contains("Status:"))
            .map_or_else(|| excerpt(&all, 2), |l| l.trim().to_owned());
        Finding::ok(AgentId::Claude, "live", format!("`{shown}`: {status}"))
    };
    d.push(finding);
}

/// Whether `actual` carries every value memloop wrote (`***` stands for a redacted string).
pub fn matches_redacted(wanted: &Value, actual: &Value) -> bool {
    match (wanted, actual) {
        (Value::String(_), Value::String(a)) if a == "***" => true,
        (Value::Object(w), Value::Object(a)) => w
            .iter()
            .all(|(k, wv)| a.get(k).is_some_and(|av| matches_redacted(wv, av))),
        (Value::Array(w), Value::Array(a)) => {
            w.len() == a.len() && w.iter().zip(a).all(|(wv, av)| matches_redacted(wv, av))
        }
        (w, a) => w == a,
    }
}

fn opencode(d: &mut Doctor, program: &Path, agent: &Agent) {
    let name = d.ctx.server.name.clone();
    let out = match run(
        program,
        &["debug", "config"],
        &d.repo.root,
        d.options.timeout,
    ) {
        Ok(out) => out,
        Err(why) => {
            return d.push(
                Finding::error(AgentId::Opencode, "live", why).fix("run it by hand to see why"),
            );
        }
    };
    if out.code != Some(0) {
        let stderr = strip_ansi(&out.stderr);
        let arrows: Vec<&str> = stderr
            .lines()
            .map(str::trim)
            .filter(|l| l.contains('↳') || l.contains("Error"))
            .collect();
        let why = if arrows.is_empty() {
            excerpt(&out.stderr, 3)
        } else {
            arrows.join(" | ")
        };
        return d.push(
            Finding::error(
                AgentId::Opencode,
                "live",
                format!("`opencode debug config` rejects the config: {why}"),
            )
            .fix("fix the key named above in opencode.json(c)"),
        );
    }
    let resolved: Value = match serde_json::from_str(out.stdout.trim()) {
        Ok(v) => v,
        Err(err) => {
            return d.push(
                Finding::error(
                    AgentId::Opencode,
                    "live",
                    format!("`opencode debug config` printed no JSON ({err})"),
                )
                .fix("run `opencode debug config` by hand"),
            );
        }
    };
    let v2 = agent.numbers().is_some_and(|v| v.first() == Some(&2));
    let entry = if v2 {
        resolved
            .pointer(&format!("/mcp/servers/{name}"))
            .or_else(|| resolved.pointer(&format!("/mcp/{name}")))
    } else {
        resolved.pointer(&format!("/mcp/{name}"))
    };
    let wanted = crate::agents::opencode::server_entry(&d.ctx.server.transport);
    let finding = match entry {
        None => Finding::error(AgentId::Opencode, "live", format!("OpenCode's resolved config has no `mcp.{name}`"))
            .fix("run `memloop sync`, then check for an override in .opencode/opencode.json or OPENCODE_CONFIG_CONTENT"),
        Some(entry) if matches_redacted(&wanted, entry) => Finding::ok(
            AgentId::Opencode,
            "live",
            format!("`opencode debug config` resolves `mcp.{name}` as memloop wrote it"),
        ),
        Some(entry) => Finding::error(
            AgentId::Opencode,
            "live",
            format!("OpenCode resolves `mcp.{name}` as {entry}, not memloop's {wanted}: another config layer overrides it"),
        )
        .fix("find the override with `opencode debug config --print-logs` (global config, .opencode/, OPENCODE_CONFIG_CONTENT)"),
    };
    d.push(finding);
}

fn kimi(d: &mut Doctor, program: &Path, agent: &Agent) {
    let legacy = agent
        .version
        .as_deref()
        .is_some_and(|v| v.starts_with("kimi, version 1.") || v.starts_with("kimi, version 0."));
    let flavor = if legacy {
        KimiFlavor::Legacy
    } else {
        KimiFlavor::Code
    };
    let (args, shown): (&[&str], &str) = match flavor {
        KimiFlavor::Code => (&["doctor", "config"], "kimi doctor config"),
        KimiFlavor::Legacy => (&["mcp", "list"], "kimi mcp list"),
    };
    let out = match run(program, args, &d.repo.root, d.options.timeout) {
        Ok(out) => out,
        Err(why) => {
            return d
                .push(Finding::error(AgentId::Kimi, "live", why).fix("run it by hand to see why"));
        }
    };
    let all = format!("{}\n{}", out.stdout, out.stderr);
    let finding = if out.code == Some(0) {
        Finding::ok(
            AgentId::Kimi,
            "live",
            format!("`{shown}` reports no problem"),
        )
    } else {
        Finding::error(
            AgentId::Kimi,
            "live",
            format!(
                "`{shown}` failed ({}): {}",
                exit_text(out.code),
                excerpt(&all, 12)
            ),
        )
        .fix(format!("run `{shown}` and fix what it names"))
    };
    d.push(finding);
    if flavor == KimiFlavor::Code {
        kimi_log_format(d);
    }
}

/// The gate counts Kimi's assistant entries by `step.begin` rows of its session log; the newest
/// session of this repository shows whether the installed Kimi still writes them.
fn kimi_log_format(d: &mut Doctor) {
    let workspace = crate::agents::kimi::code_home(&d.ctx)
        .join("sessions")
        .join(crate::agents::kimi::trust_key(&d.repo.root));
    let Some(log) = crate::gate::kimi::newest_log(&workspace) else {
        return;
    };
    let Ok(shape) = crate::gate::kimi::log_shape(&log) else {
        return;
    };
    if shape.markers_missing() {
        d.push(
            Finding::warning(
                AgentId::Kimi,
                "live",
                format!(
                    "Kimi's session log format moved: {} has {} tool calls but no `{}` step \
                     markers; the gate counts each tool call as an assistant entry instead",
                    log.display(),
                    shape.tool_calls,
                    crate::gate::kimi::STEP_MARKER
                ),
            )
            .fix(
                "the gate still works; report the Kimi version to memloop so the reader follows it",
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn redacted_strings_match_and_everything_else_must_be_equal() {
        let wanted = json!({"type": "remote", "url": "https://m.test/", "headers": {"Authorization": "Bearer {env:T}"}});
        let resolved = json!({"type": "remote", "url": "https://m.test/", "headers": {"Authorization": "***"}, "enabled": true});
        assert!(matches_redacted(&wanted, &resolved));
        let other = json!({"type": "remote", "url": "https://other.test/", "headers": {"Authorization": "***"}});
        assert!(!matches_redacted(&wanted, &other));
        assert!(!matches_redacted(
            &json!({"command": ["a", "b"]}),
            &json!({"command": ["a"]})
        ));
        assert!(!matches_redacted(
            &json!({"enabled": true}),
            &json!({"enabled": "***"})
        ));
    }
}
