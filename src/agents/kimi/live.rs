//! `doctor --live` for Kimi: `kimi doctor config` (Kimi Code) or `kimi mcp list` (legacy kimi-cli).

use std::path::Path;

use super::KimiFlavor;
use crate::config::AgentId;
use crate::doctor::live::{excerpt, exit_text, run};
use crate::doctor::{Agent, Doctor, Finding};

pub fn check(d: &mut Doctor, program: &Path, agent: &Agent) {
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
}
