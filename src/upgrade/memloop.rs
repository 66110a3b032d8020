//! memloop's own formats. The managed Markdown block carries its format version in the begin
//! marker (`edit::markdown::BLOCK_VERSION`); a block written by an older memloop (no version,
//! or a lower one) is rewritten in place in the current format, keeping its body, and
//! duplicates collapse into the first, so an older memloop's output is never duplicated.
//! `memloop.toml` without `version` gets it pinned to the schema this memloop reads
//! (`config::CONFIG_VERSION`), so a later memloop knows what it is reading.
//! (The OpenCode plugin's version line is handled in `opencode.rs`.)

use std::path::PathBuf;

use super::{Env, Files, Migration, Range};
use crate::config::{CONFIG_VERSION, FILE_NAME};
use crate::edit::markdown::{self, BLOCK_VERSION, Span};
use crate::edit::toml::TomlDoc;
use crate::engine::PlanError;

pub const BLOCK_MARKER: Migration = Migration {
    id: "memloop-block-marker",
    agent: None,
    range: Range::Any,
    about: "managed blocks written by an older memloop (unversioned or older begin marker, or duplicated) are rewritten in place in the current format",
    detect: block_detect,
    rewrite: block_rewrite,
};

pub const CONFIG_VERSION_KEY: Migration = Migration {
    id: "memloop-config-version",
    agent: None,
    range: Range::Any,
    about: "memloop.toml without `version` gets the schema version this memloop reads",
    detect: config_detect,
    rewrite: config_rewrite,
};

fn config_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = env.ctx.root.join(FILE_NAME);
    let Some((doc, _)) = files.toml(&path)? else {
        return Ok(Vec::new());
    };
    Ok(if doc.has_key("version") {
        Vec::new()
    } else {
        vec![format!(
            "{FILE_NAME}: no `version`; it is read as version {CONFIG_VERSION}"
        )]
    })
}

fn config_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = env.ctx.root.join(FILE_NAME);
    let Some((text, encoding)) = files.text(&path)? else {
        return Ok(());
    };
    let updated = with_version(&text);
    TomlDoc::parse(&updated, FILE_NAME)?;
    files.write_text(&path, &updated, encoding)
}

/// `text` with `version = N` as the first key, after the leading comments (a `#:schema` line
/// must stay first) and blank lines.
fn with_version(text: &str) -> String {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if !(trimmed.is_empty() || trimmed.starts_with('#')) {
            break;
        }
        offset += line.len();
    }
    let mut out = text[..offset].to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("version = {CONFIG_VERSION}\n"));
    out.push_str(&text[offset..]);
    out
}

/// The instruction files memloop writes blocks into, each real file once.
fn instruction_files(env: &Env, files: &Files) -> Result<Vec<PathBuf>, PlanError> {
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    for name in ["CLAUDE.md", "AGENTS.md"] {
        let path = env.ctx.root.join(name);
        let real = files.resolve(&path)?;
        if !out.iter().any(|(_, r)| *r == real) {
            out.push((path, real));
        }
    }
    Ok(out.into_iter().map(|(path, _)| path).collect())
}

fn stale(spans: &[Span]) -> bool {
    spans.len() > 1
        || spans
            .iter()
            .any(|span| span.version.is_none_or(|v| v < BLOCK_VERSION))
}

fn block_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let mut found = Vec::new();
    for path in instruction_files(env, files)? {
        let display = files.display(&path);
        let Some((text, _)) = files.text(&path)? else {
            continue;
        };
        let spans = markdown::find(&text, &display)?;
        if stale(&spans) {
            let versions: Vec<String> = spans
                .iter()
                .map(|s| s.version.map_or("unversioned".into(), |v| format!("v{v}")))
                .collect();
            found.push(format!(
                "{display}: managed block {} (current: v{BLOCK_VERSION})",
                versions.join(", ")
            ));
        }
    }
    Ok(found)
}

fn block_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    for path in instruction_files(env, files)? {
        let display = files.display(&path);
        let Some((text, encoding)) = files.text(&path)? else {
            continue;
        };
        let spans = markdown::find(&text, &display)?;
        let Some(first) = spans.first().filter(|_| stale(&spans)) else {
            continue;
        };
        let body = body_of(&text[first.start..first.end]);
        let updated = markdown::upsert(&text, &body, &display)?;
        files.write_text(&path, &updated, encoding)?;
    }
    Ok(())
}

/// The lines between a block's begin and end markers.
fn body_of(block: &str) -> String {
    let mut lines: Vec<&str> = block.split_inclusive('\n').collect();
    lines.remove(0);
    lines.pop();
    lines.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_goes_after_leading_comments() {
        assert_eq!(
            with_version("#:schema x.json\n# mine\nagents = []\n"),
            "#:schema x.json\n# mine\nversion = 1\nagents = []\n"
        );
        assert_eq!(
            with_version("[server]\nname = \"m\"\n"),
            "version = 1\n[server]\nname = \"m\"\n"
        );
        assert_eq!(
            with_version("# only a comment"),
            "# only a comment\nversion = 1\n"
        );
    }

    #[test]
    fn body_is_what_lies_between_the_markers() {
        assert_eq!(
            body_of("<!-- memloop:begin -->\na\nb\n<!-- memloop:end -->\n"),
            "a\nb\n"
        );
        assert_eq!(body_of("<!-- memloop:begin -->\n<!-- memloop:end -->"), "");
    }
}
