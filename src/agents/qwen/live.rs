//! `doctor --live` for Qwen Code: `qwen mcp list` prints one line per server it would load,
//! `● <name>: ... - Pending approval` (or `Rejected`) for a project server without a matching
//! approval, else the result of connecting to it (`✓ ... - Connected`, `✗ ... - Disconnected`).
//! A folder that is not trusted (folder trust on) lists no project server at all.

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::live::{listing, strip_ansi};
use crate::doctor::{Doctor, Finding};

const AGENT: AgentId = AgentId::Qwen;

pub fn check(d: &mut Doctor, program: &Path) {
    let Some(all) = listing(d, AGENT, program, &["mcp", "list"], "qwen mcp list") else {
        return;
    };
    let all = strip_ansi(&all);
    let name = d.ctx.server.name.clone();
    let finding = verdict(&all, &name, d.sync_command(false), |f| d.by_trust(f));
    d.push(finding);
}

/// The finding for server `name` in the output of `qwen mcp list` (colours stripped).
/// `sync` fixes what the project's file lacks; `by_trust` gives a missing approval its fix.
pub fn verdict(
    listing: &str,
    name: &str,
    sync: &str,
    by_trust: impl Fn(Finding) -> Finding,
) -> Finding {
    let prefix = format!("{name}: ");
    let line = listing.lines().map(str::trim).find_map(|l| {
        let rest = l.split_once(' ').map_or(l, |(_, rest)| rest);
        rest.starts_with(&prefix).then_some(rest)
    });
    match line {
        None => Finding::error(
            AGENT,
            "live",
            format!("`qwen mcp list` does not list `{name}`: .qwen/settings.json lacks it, cannot be read (a trailing comma drops the whole file), or the folder is not trusted"),
        )
        .by_sync(sync),
        Some(line) if line.ends_with("- Pending approval") => by_trust(Finding::error(
            AGENT,
            "live",
            format!("`qwen mcp list` shows `{name}` pending approval: Qwen does not start it and headless runs do not ask ({})", super::doctor::YOLO_STARTS_IT),
        )),
        Some(line) if line.ends_with("- Rejected") => Finding::error(
            AGENT,
            "live",
            format!("`qwen mcp list` shows `{name}` rejected in your ~/.qwen/mcpApprovals.json"),
        )
        .fix(format!("run `qwen mcp approve {name}`, or remove its record and run `memloop trust`")),
        Some(line) if line.ends_with("- Connected") => {
            Finding::ok(AGENT, "live", format!("`qwen mcp list`: {line}"))
        }
        Some(line) => Finding::error(AGENT, "live", format!("`qwen mcp list`: {line}"))
            .fix("run the server's command by hand to see why it fails"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::finding::Severity;

    // What 0.24.4 printed (qwen_facts.md, "doctor --live"), colours stripped.
    #[test]
    fn each_state_of_the_listing() {
        let level = |text: &str| verdict(text, "memory", "memloop sync", |f| f).severity;
        assert_eq!(
            level("Configured MCP servers:\n\n✓ memory: memloop serve (stdio) - Connected\n"),
            Severity::Ok
        );
        assert_eq!(
            level("● memory: memloop serve (stdio) - Pending approval"),
            Severity::Error
        );
        assert_eq!(
            level("● memory: memloop serve (stdio) - Rejected"),
            Severity::Error
        );
        assert_eq!(
            level("✗ memory: memloop serve (stdio) - Disconnected"),
            Severity::Error
        );
        assert_eq!(level("No MCP servers configured."), Severity::Error);
        assert_eq!(
            level("✓ memory2: x (stdio) - Connected"),
            Severity::Error,
            "another server's line is not memloop's"
        );
    }
}
