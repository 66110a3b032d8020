//! Kimi Code's per-machine trust (`memloop trust`): it loads a project's `.kimi-code/mcp.json`
//! (and `.mcp.json`) only in a folder trusted on this machine, recorded as the file
//! `$KIMI_CODE_HOME/workspace-trust/<key>` (`trust_key`). Kimi Code 2.1.0
//! (`workspaceTrust/trustRecord.ts`) counts the folder trusted when that file decodes as JSON at
//! all; it writes `{"root", "trustedAt"}` itself. memloop's copy also says `"trustedBy":
//! "memloop"`, so a file the user made by answering Kimi's question is never taken for
//! memloop's: such a folder needs nothing, and revoking leaves it.

use serde_json::{Value, json};

use super::{KimiFlavor, code_home, kimi_flavor, trust_key};
use crate::config::AgentId;
use crate::repo::Context;
use crate::target::{Desired, Scope, Target};

const BY: &str = "memloop";

/// The trust file for this repository, unless Kimi Code needs none here.
pub fn targets(ctx: &Context) -> Vec<Target> {
    if kimi_flavor() == KimiFlavor::Legacy {
        // kimi-cli 1.x reads memloop's server from the user's ~/.kimi/mcp.json: no trust step.
        return Vec::new();
    }
    let dir = ctx
        .root
        .canonicalize()
        .unwrap_or_else(|_| ctx.root.to_path_buf());
    let path = code_home(ctx).join("workspace-trust").join(trust_key(&dir));
    // A record that is not a regular file (a FIFO, a folder) is planned like a missing one: the
    // engine then refuses it, naming the file.
    let content = match crate::files::read_optional(&path) {
        // The user's own trust: nothing for memloop to add or take.
        Ok(Some(text)) if !is_memloops(&text) => return Vec::new(),
        // memloop's, from an earlier run: kept byte for byte (its time included).
        Ok(Some(text)) => text,
        Ok(None) | Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let record =
                json!({"root": dir.display().to_string(), "trustedAt": now, "trustedBy": BY});
            format!("{record}\n")
        }
    };
    vec![Target {
        display: ctx.display_user_path(&path),
        path,
        scope: Scope::User,
        agents: vec![AgentId::Kimi],
        desired: Desired::Whole { content },
        note: None,
    }]
}

fn is_memloops(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| v.get("trustedBy") == Some(&json!(BY)))
}
