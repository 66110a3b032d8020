//! memloop's own formats. The managed Markdown block carries its format version in the begin
//! marker (`edit::markdown::BLOCK_VERSION`); a block written by an older memloop (no version,
//! or a lower one) is rewritten in place in the current format, keeping its body, and
//! duplicates collapse into the first, so an older memloop's output is never duplicated.
//! (The OpenCode plugin's version line is handled in `opencode.rs`.)

use std::path::PathBuf;

use super::{Env, Files, Migration, Range};
use crate::edit::markdown::{self, BLOCK_VERSION, Span};
use crate::engine::PlanError;

pub const BLOCK_MARKER: Migration = Migration {
    id: "memloop-block-marker",
    agent: None,
    range: Range::Any,
    about: "managed blocks written by an older memloop (unversioned or older begin marker, or duplicated) are rewritten in place in the current format",
    detect: block_detect,
    rewrite: block_rewrite,
};

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
    fn body_is_what_lies_between_the_markers() {
        assert_eq!(
            body_of("<!-- memloop:begin -->\na\nb\n<!-- memloop:end -->\n"),
            "a\nb\n"
        );
        assert_eq!(body_of("<!-- memloop:begin -->\n<!-- memloop:end -->"), "");
    }
}
