//! `doctor --live` for Claude Code: `claude mcp get <name>` says whether the project's server is
//! approved and connects.

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, exit_text, run};
use crate::doctor::{Doctor, Finding};

pub fn check(d: &mut Doctor, program: &Path) {
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
