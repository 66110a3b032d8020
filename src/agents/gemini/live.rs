//! `doctor --live` for Gemini: `gemini mcp list` connects to every configured server and prints
//! one line each, `✓ memory: memloop serve (stdio) - Connected` (0.61.0); in an untrusted folder
//! every server is `- Disabled` under a warning that the folder is untrusted.

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, listing};
use crate::doctor::{Agent, Doctor, Finding};

const AGENT: AgentId = AgentId::Gemini;

/// The status `gemini mcp list` gives server `name`, if it lists it.
pub fn status_of<'a>(listing: &'a str, name: &str) -> Option<&'a str> {
    listing.lines().find_map(|line| {
        let rest = line.trim_start().split_once(' ')?.1;
        let (server, tail) = rest.split_once(": ")?;
        (server == name).then(|| tail.rsplit_once(" - ").map_or("", |(_, s)| s.trim()))
    })
}

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    let Some(all) = listing(d, AGENT, program, &["mcp", "list"], "gemini mcp list") else {
        return;
    };
    let name = d.ctx.server.name.clone();
    let finding = match status_of(&all, &name) {
        Some("Connected") => Finding::ok(
            AGENT,
            "live",
            format!("`gemini mcp list` connects to `{name}`"),
        ),
        Some("Disabled") if all.contains("untrusted") => d.by_trust(Finding::error(
            AGENT,
            "live",
            format!("`gemini mcp list` shows `{name}` disabled: this folder is not trusted, so Gemini ignores .gemini/settings.json"),
        )),
        Some(status) => Finding::error(
            AGENT,
            "live",
            format!("`gemini mcp list` lists `{name}` as {status:?}: {}", excerpt(&all, 12)),
        )
        .fix("run the server's command by hand, or `gemini mcp list --debug`, to see why"),
        None => Finding::error(
            AGENT,
            "live",
            format!("`gemini mcp list` does not list `{name}`: .gemini/settings.json lacks it"),
        )
        .by_sync(d.sync_command(false)),
    };
    d.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;

    // As Gemini CLI 0.61.0 printed it.
    const LISTING: &str = "Configured MCP servers:\n\n✓ memory: memloop serve (stdio) - Connected\n✗ bad_x: nonexist  (stdio) - Disconnected\n";

    #[test]
    fn each_servers_status_is_read_from_its_line() {
        assert_eq!(status_of(LISTING, "memory"), Some("Connected"));
        assert_eq!(status_of(LISTING, "bad_x"), Some("Disconnected"));
        assert_eq!(status_of(LISTING, "mem"), None);
        let untrusted = "Warning: MCP servers are configured but disabled because this folder is untrusted.\n\n○ memory: memloop serve (stdio) - Disabled\n";
        assert_eq!(status_of(untrusted, "memory"), Some("Disabled"));
    }
}
