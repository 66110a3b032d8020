//! `doctor --live` for OpenCode: `opencode debug config` resolves the config the way OpenCode
//! does; memloop's entry in it is compared with what memloop wrote (`***` matching a redacted
//! value).

use std::path::Path;

use serde_json::Value;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, matches_redacted, run, strip_ansi};
use crate::doctor::{Agent, Doctor, Finding};

pub fn check(d: &mut Doctor, program: &Path, agent: &Agent) {
    let v2 = agent.numbers().is_some_and(|v| v.first() == Some(&2));
    resolved(d, program, AgentId::Opencode, v2, LAYERS);
}

/// Where an override of memloop's entry can come from, for the fix.
const LAYERS: &str = "the global config, .opencode/opencode.json(c), OPENCODE_CONFIG_CONTENT";

/// `<program> debug config` (OpenCode, or a fork that kept the command) holds memloop's entry as
/// memloop wrote it; `layers` names where an override can come from.
pub fn resolved(d: &mut Doctor, program: &Path, id: AgentId, v2: bool, layers: &str) {
    let name = d.ctx.server.name.clone();
    let label = id.as_str();
    let out = match run(
        program,
        &["debug", "config"],
        &d.repo.root,
        d.options.timeout,
    ) {
        Ok(out) => out,
        Err(why) => {
            return d.push(Finding::error(id, "live", why).fix("run it by hand to see why"));
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
                id,
                "live",
                format!("`{label} debug config` rejects the config: {why}"),
            )
            .fix(format!(
                "fix the key named above (files {label} reads: {layers})"
            )),
        );
    }
    let resolved: Value = match serde_json::from_str(out.stdout.trim()) {
        Ok(v) => v,
        Err(err) => {
            return d.push(
                Finding::error(
                    id,
                    "live",
                    format!("`{label} debug config` printed no JSON ({err})"),
                )
                .fix(format!("run `{label} debug config` by hand")),
            );
        }
    };
    let entry = if v2 {
        resolved
            .pointer(&format!("/mcp/servers/{name}"))
            .or_else(|| resolved.pointer(&format!("/mcp/{name}")))
    } else {
        resolved.pointer(&format!("/mcp/{name}"))
    };
    let wanted = crate::agents::opencode::server_entry(&d.ctx.server.transport);
    let finding = match entry {
        None => Finding::error(id, "live", format!("{label}'s resolved config has no `mcp.{name}`"))
            .fix(format!("run `memloop sync`, then check for an override in {layers}")),
        Some(entry) if matches_redacted(&wanted, entry) => Finding::ok(
            id,
            "live",
            format!("`{label} debug config` resolves `mcp.{name}` as memloop wrote it"),
        ),
        Some(entry) => Finding::error(
            id,
            "live",
            format!("{label} resolves `mcp.{name}` as {entry}, not memloop's {wanted}: another config layer overrides it"),
        )
        .fix(format!("find the override with `{label} debug config --print-logs` ({layers})")),
    };
    d.push(finding);
}
