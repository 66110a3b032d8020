//! `doctor --live` for OpenCode: `opencode debug config` resolves the config the way OpenCode
//! does; memloop's entry in it is compared with what memloop wrote (`***` matching a redacted
//! value).

use std::path::Path;

use serde_json::Value;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, matches_redacted, run, strip_ansi};
use crate::doctor::{Agent, Doctor, Finding};

pub fn check(d: &mut Doctor, program: &Path, agent: &Agent) {
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
