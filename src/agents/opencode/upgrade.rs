//! OpenCode migrations (facts: research/opencode.md, sections 1.2, 2.4, 3.1 and 3.4).
//!
//! - `opencode-plugin-dir`: the gate plugin in the legacy singular `.opencode/plugin/` moves to
//!   `.opencode/plugins/` (documented, and the one V2 wants); with both present it loaded twice.
//! - `opencode-plugin-version`: a plugin file whose version line is older than this memloop's
//!   is replaced by the current one.
//! - `opencode-config-twins`: with `opencode.json` and `opencode.jsonc` side by side, OpenCode
//!   >= 1.14 lets `.jsonc` win; memloop's server moves there, so it is defined once.
//! - `opencode-v2-config`: on OpenCode 2 (`opencode --version` 2.x), the V1 entry `mcp.<name>`
//!   becomes `mcp.servers.<name>` with `disabled` instead of `enabled`. OpenCode 2 is not in the
//!   registries: this follows its documentation (opencode.ai/v2/docs/mcp-servers and the V1->V2
//!   lowering in the OpenCode repository), not a run of the program.

use std::path::PathBuf;

use serde_json::json;

use crate::agents::opencode::{PLUGIN_PATH, SCHEMA_URL, server_entry, v2_entry};
use crate::config::AgentId;
use crate::edit::json::Dialect;
use crate::engine::{Content, PlanError};
use crate::gate::OPENCODE_PLUGIN;
use crate::upgrade::{Env, Files, Migration};
use crate::version::Version;
use crate::version::{Product, Range};

/// The legacy plugin folder, removed after the move when nothing else is in it.
pub const LEGACY_PLUGIN_DIR: &str = ".opencode/plugin";
const PLUGIN_HEADER: &str = "// memloop opencode plugin v";

/// OpenCode's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[PLUGIN_DIR, PLUGIN_VERSION, CONFIG_TWINS, V2_CONFIG];

pub const PLUGIN_DIR: Migration = Migration {
    id: "opencode-plugin-dir",
    agent: Some(AgentId::Opencode),
    range: Range::Versions {
        product: Product::OpenCode,
        min: Version(0, 0, 0),
        below: None,
        if_missing: true,
    },
    about: "the gate plugin moves from the legacy .opencode/plugin/ to .opencode/plugins/ (loaded once)",
    detect: dir_detect,
    rewrite: dir_rewrite,
};

pub const PLUGIN_VERSION: Migration = Migration {
    id: "opencode-plugin-version",
    agent: Some(AgentId::Opencode),
    range: Range::Any,
    about: "a gate plugin written by an older memloop (older version line) is replaced by the current one",
    detect: version_detect,
    rewrite: version_rewrite,
};

pub const CONFIG_TWINS: Migration = Migration {
    id: "opencode-config-twins",
    agent: Some(AgentId::Opencode),
    range: Range::Versions {
        product: Product::OpenCode,
        min: Version(1, 14, 0),
        below: None,
        if_missing: true,
    },
    about: "with opencode.json and opencode.jsonc side by side, memloop's server moves into opencode.jsonc, the file that wins",
    detect: twins_detect,
    rewrite: twins_rewrite,
};

pub const V2_CONFIG: Migration = Migration {
    id: "opencode-v2-config",
    agent: Some(AgentId::Opencode),
    range: Range::Versions {
        product: Product::OpenCode,
        min: Version(2, 0, 0),
        below: None,
        if_missing: false,
    },
    about: "OpenCode 2: the V1 entry mcp.<name> becomes mcp.servers.<name>, `disabled` instead of `enabled` (from OpenCode 2's documentation)",
    detect: v2_detect,
    rewrite: v2_rewrite,
};

/// The version in a plugin file's first line, when the file is memloop's.
pub fn plugin_version(text: &str) -> Option<u32> {
    let rest = text
        .lines()
        .next()?
        .trim_end()
        .strip_prefix(PLUGIN_HEADER)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn current_plugin_version() -> u32 {
    plugin_version(OPENCODE_PLUGIN).expect("assets/opencode-plugin.js starts with its version line")
}

fn legacy_plugin(env: &Env) -> PathBuf {
    env.ctx.root.join(LEGACY_PLUGIN_DIR).join("memloop.js")
}

fn plugin(env: &Env) -> PathBuf {
    env.ctx.root.join(PLUGIN_PATH)
}

fn dir_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let old = legacy_plugin(env);
    let Some((text, _)) = files.text(&old)? else {
        return Ok(Vec::new());
    };
    if plugin_version(&text).is_none() {
        return Ok(Vec::new());
    }
    let mut line = format!(
        "{}: memloop's gate plugin in the legacy plugin/ folder",
        files.display(&old)
    );
    if files.text(&plugin(env))?.is_some() {
        line.push_str(&format!(
            " (and in {PLUGIN_PATH}: OpenCode loads both, so the gate runs twice)"
        ));
    }
    Ok(vec![line])
}

fn dir_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let old = files.resolve(&legacy_plugin(env))?;
    files.put(&old, Content::Missing)?;
    let new = files.resolve(&plugin(env))?;
    files.put(
        &new,
        Content::File {
            text: OPENCODE_PLUGIN.to_owned(),
        },
    )
}

fn version_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = plugin(env);
    let Some((text, _)) = files.text(&path)? else {
        return Ok(Vec::new());
    };
    let current = current_plugin_version();
    Ok(match plugin_version(&text) {
        Some(found) if found < current => vec![format!(
            "{}: gate plugin v{found} (current: v{current})",
            files.display(&path)
        )],
        _ => Vec::new(),
    })
}

fn version_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = files.resolve(&plugin(env))?;
    files.put(
        &path,
        Content::File {
            text: OPENCODE_PLUGIN.to_owned(),
        },
    )
}

fn server_path(env: &Env) -> Vec<String> {
    vec!["mcp".into(), env.ctx.server.name.clone()]
}

fn twins(env: &Env) -> (PathBuf, PathBuf) {
    (
        env.ctx.root.join("opencode.json"),
        env.ctx.root.join("opencode.jsonc"),
    )
}

fn twins_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let (json, jsonc) = twins(env);
    if files.text(&jsonc)?.is_none() {
        return Ok(Vec::new());
    }
    let Some((doc, _)) = files.json(&json, Dialect::Jsonc)? else {
        return Ok(Vec::new());
    };
    Ok(match doc.get(&server_path(env)) {
        Some(_) => vec![format!(
            "opencode.json: mcp.{} next to opencode.jsonc, which OpenCode >= 1.14 reads over it",
            env.ctx.server.name
        )],
        None => Vec::new(),
    })
}

fn twins_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let (json, jsonc) = twins(env);
    let path = server_path(env);
    let Some((mut from, from_encoding)) = files.json(&json, Dialect::Jsonc)? else {
        return Ok(());
    };
    from.remove(&path, &|parent| parent == ["mcp"]);
    files.write_text(&json, &from.to_text(), from_encoding)?;
    let (mut into, into_encoding) = files.json_or_new(&jsonc, Dialect::Jsonc)?;
    into.ensure_first("$schema", &json!(SCHEMA_URL));
    if into.get(&path).is_none() {
        into.set(&path, &server_entry(&env.ctx.server.transport))?;
    }
    files.write_text(&jsonc, &into.to_text(), into_encoding)
}

/// The project config OpenCode reads memloop's server from.
fn winner(env: &Env, files: &mut Files) -> Result<PathBuf, PlanError> {
    let (json, jsonc) = twins(env);
    Ok(if files.text(&jsonc)?.is_some() {
        jsonc
    } else {
        json
    })
}

fn v2_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    if env.ctx.server.name == "servers" {
        return Ok(Vec::new());
    }
    let path = winner(env, files)?;
    let display = files.display(&path);
    let Some((doc, _)) = files.json(&path, Dialect::Jsonc)? else {
        return Ok(Vec::new());
    };
    let v1 = doc
        .get(&server_path(env))
        .is_some_and(|entry| entry.get("type").is_some());
    if !v1 {
        return Ok(Vec::new());
    }
    let mut found = vec![format!(
        "{display}: mcp.{} is a V1 entry; OpenCode 2 reads servers from mcp.servers",
        env.ctx.server.name
    )];
    if files.text(&plugin(env))?.is_some() {
        found.push(format!(
            "{PLUGIN_PATH}: note: a V1 plugin, which OpenCode 2 does not run; memloop has no V2 gate plugin yet (left as it is)"
        ));
    }
    Ok(found)
}

fn v2_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = winner(env, files)?;
    let Some((mut doc, encoding)) = files.json(&path, Dialect::Jsonc)? else {
        return Ok(());
    };
    let v1_path = server_path(env);
    let Some(entry) = doc.get(&v1_path) else {
        return Ok(());
    };
    doc.remove(&v1_path, &|_| false);
    let v2_path = vec![
        "mcp".to_owned(),
        "servers".to_owned(),
        env.ctx.server.name.clone(),
    ];
    doc.set(&v2_path, &v2_entry(&entry))?;
    files.write_text(&path, &doc.to_text(), encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_version_line() {
        assert_eq!(plugin_version("// memloop opencode plugin v1\nx"), Some(1));
        assert_eq!(plugin_version("// memloop opencode plugin v12"), Some(12));
        assert_eq!(plugin_version("// someone else's plugin\n"), None);
        assert!(current_plugin_version() >= 1);
    }

    #[test]
    fn v2_entry_turns_enabled_into_disabled_in_place() {
        let v1 = json!({"type": "local", "command": ["memloop", "serve"], "enabled": true});
        let v2 = v2_entry(&v1);
        assert_eq!(
            serde_json::to_string(&v2).unwrap(),
            r#"{"type":"local","command":["memloop","serve"],"disabled":false}"#
        );
        assert_eq!(
            v2_entry(&json!({"enabled": false}))["disabled"],
            json!(true)
        );
    }
}
