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
    if flavor == KimiFlavor::Code {
        log_format(d);
    }
}

/// The gate counts Kimi's assistant entries by `step.begin` rows of its session log; the newest
/// session of this repository shows whether the installed Kimi still writes them.
fn log_format(d: &mut Doctor) {
    let workspace = super::code_home(&d.ctx)
        .join("sessions")
        .join(super::trust_key(&d.repo.root));
    let Some(log) = super::gate::newest_log(&workspace) else {
        return;
    };
    let Ok(shape) = super::gate::log_shape(&log) else {
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
                    super::gate::STEP_MARKER
                ),
            )
            .fix(
                "the gate still works; report the Kimi version to memloop so the reader follows it",
            ),
        );
    }
}
