//! `doctor --live` for Droid: `droid mcp list` connects to every configured server and prints one
//! line each, `  memory  stdio  connected  [project]` (0.215.0; `failed: <why>`, `disabled` for the
//! others). A file Droid cannot parse lists nothing: `No MCP servers configured.`

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::live::{excerpt, listing};
use crate::doctor::{Doctor, Finding};

const AGENT: AgentId = AgentId::Droid;

/// The status `droid mcp list` gives server `name` (`connected`, `disabled`, `failed: ...`).
pub fn status_of<'a>(listing: &'a str, name: &str) -> Option<&'a str> {
    listing.lines().find_map(|line| {
        let line = line.trim();
        let rest = line.strip_prefix(name)?.strip_prefix("  ")?;
        let (_transport, status) = rest.trim_start().split_once("  ")?;
        let status = status.trim();
        Some(
            status
                .rsplit_once("  [")
                .map_or(status, |(status, _)| status.trim()),
        )
    })
}

pub fn check(d: &mut Doctor, program: &Path) {
    let Some(all) = listing(d, AGENT, program, &["mcp", "list"], "droid mcp list") else {
        return;
    };
    let name = d.ctx.server.name.clone();
    let finding = match status_of(&all, &name) {
        Some("connected") => Finding::ok(
            AGENT,
            "live",
            format!("`droid mcp list` connects to `{name}`"),
        ),
        Some("disabled") => Finding::error(
            AGENT,
            "live",
            format!("`droid mcp list` shows `{name}` disabled: `\"disabled\": true` in one of the MCP files Droid reads"),
        )
        .fix(format!("remove `disabled` from `{name}` (or run `droid mcp` and enable it)")),
        Some(status) => Finding::error(
            AGENT,
            "live",
            format!("`droid mcp list` lists `{name}` as {status:?}: {}", excerpt(&all, 12)),
        )
        .fix("run the server's command by hand to see why it does not start"),
        None => Finding::error(
            AGENT,
            "live",
            format!(
                "`droid mcp list` does not list `{name}`: {} lacks it, or Droid could not parse the file (a trailing comma drops it silently)",
                super::MCP_FILE
            ),
        )
        .by_sync(d.sync_command(false)),
    };
    d.push(finding);
}

#[cfg(test)]
mod tests {
    use super::*;

    // As Droid 0.215.0 printed it.
    const LISTING: &str = "Connecting to configured MCP servers to check status...\nConfigured MCP servers:\n  bad_x  stdio  failed: Failed to connect to MCP server  [project]\n  memory  stdio  connected  [project]\n  off  stdio  disabled  [project]\n";

    #[test]
    fn each_servers_status_is_read_from_its_line() {
        assert_eq!(status_of(LISTING, "memory"), Some("connected"));
        assert_eq!(status_of(LISTING, "off"), Some("disabled"));
        assert_eq!(
            status_of(LISTING, "bad_x"),
            Some("failed: Failed to connect to MCP server")
        );
        assert_eq!(status_of(LISTING, "mem"), None);
        assert_eq!(status_of("No MCP servers configured.\n", "memory"), None);
    }
}
