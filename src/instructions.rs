//! The rule lines, shared by every agent: Claude Code reads `CLAUDE.md`, OpenCode and Kimi Code
//! read `AGENTS.md`. Which file holds the rules depends on the layout and on what the repository
//! already has (DESIGN.md, "shared file").

use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::config::{AgentId, Layout};
use crate::target::{Desired, Format, Fragment, Scope, Target};

/// The two rule lines, verbatim from the seed.
pub const RULES: &str = include_str!("../assets/rules.md");
/// What `CLAUDE.md` holds when `AGENTS.md` carries the rules.
pub const IMPORT: &str = "@AGENTS.md";
const LOST_LINK: &str = "CLAUDE.md";

/// What is at a path, without following a final symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Missing,
    File {
        bytes: Vec<u8>,
    },
    /// A symlink whose target resolves to `resolved` (absolute, possibly missing).
    Link {
        target: String,
        resolved: PathBuf,
    },
}

pub fn inspect(path: &Path) -> anyhow::Result<Found> {
    match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Found::Missing),
        Err(err) => Err(anyhow::Error::new(err).context(format!("cannot read {}", path.display()))),
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = fs_err::read_link(path)?;
            let base = path.parent().unwrap_or(Path::new("."));
            let joined = base.join(&target);
            let resolved = std::fs::canonicalize(&joined).unwrap_or(joined);
            Ok(Found::Link {
                target: target.to_string_lossy().into_owned(),
                resolved,
            })
        }
        // A FIFO or a device is refused without being opened: reading it could block forever.
        Ok(_) => Ok(Found::File {
            bytes: crate::files::read_regular(path)?,
        }),
    }
}

/// Whether a text file is what a checkout without symlink support leaves of `AGENTS.md -> CLAUDE.md`.
fn is_lost_link(found: &Found) -> bool {
    matches!(found, Found::File { bytes } if String::from_utf8_lossy(bytes).trim_end() == LOST_LINK)
}

/// Whether `CLAUDE.md` already holds memloop's import block: the layout chosen earlier stays.
fn imports_agents_md(found: &Found) -> bool {
    let Found::File { bytes } = found else {
        return false;
    };
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    let Ok(spans) = crate::edit::markdown::find(&text, "CLAUDE.md") else {
        return false;
    };
    spans.first().is_some_and(|span| {
        text[span.start..span.end]
            .lines()
            .nth(1)
            .is_some_and(|line| line.trim() == IMPORT)
    })
}

/// Whether this machine and file system can create symlinks in `dir`.
pub fn symlinks_work(dir: &Path) -> bool {
    if std::env::var_os("MEMLOOP_NO_SYMLINKS").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    let Ok(probe) = tempfile::Builder::new()
        .prefix(".memloop-link-probe")
        .tempdir_in(dir)
    else {
        return false;
    };
    make_symlink("target", &probe.path().join("link")).is_ok()
}

#[cfg(unix)]
pub fn make_symlink(target: &str, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(windows)]
pub fn make_symlink(target: &str, link: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_file(target, link)
}

/// Decides `CLAUDE.md` and `AGENTS.md` for the enabled agents.
pub fn plan(root: &Path, layout: Layout, agents: &[AgentId]) -> anyhow::Result<Vec<Target>> {
    let claude_path = root.join("CLAUDE.md");
    let agents_path = root.join("AGENTS.md");
    let claude = inspect(&claude_path)?;
    let agents_md = inspect(&agents_path)?;
    // Claude Code reads CLAUDE.md; every other agent reads AGENTS.md (`others`).
    let needs_agents_md = agents.iter().any(|a| *a != AgentId::Claude);
    let mut out = Vec::new();
    let rules = |path: PathBuf, display: &str, readers: Vec<AgentId>| {
        block_target(root, path, display, RULES, readers)
    };
    // CLAUDE.md holding only `@AGENTS.md`, when AGENTS.md carries the rules.
    let import =
        |path: PathBuf| block_target(root, path, "CLAUDE.md", IMPORT, vec![AgentId::Claude]);

    if !needs_agents_md {
        out.push(rules(
            real_path(root, &claude_path, &claude)?,
            "CLAUDE.md",
            vec![AgentId::Claude],
        ));
        return Ok(out);
    }

    let claude_real = real_path(root, &claude_path, &claude)?;
    let agents_real = real_path(root, &agents_path, &agents_md)?;
    let linked = agents_real == claude_real
        && (matches!(agents_md, Found::Link { .. }) || matches!(claude, Found::Link { .. }));
    let all = agents.to_vec();
    if linked {
        // One real file behind both names: the rules go there once.
        let display = if matches!(claude, Found::Link { .. }) {
            "AGENTS.md"
        } else {
            "CLAUDE.md"
        };
        out.push(rules(claude_real, display, all));
        if matches!(&agents_md, Found::Link { target, .. } if target == LOST_LINK) {
            // The link memloop makes: owned, so that uninstall takes it back.
            out.push(agents_link(agents_path, agents, None));
        }
        return Ok(out);
    }

    let lost_link = is_lost_link(&agents_md);
    let agents_is_real_file = matches!(agents_md, Found::File { .. }) && !lost_link;
    let agents_is_foreign_link = matches!(agents_md, Found::Link { .. });
    match layout {
        Layout::Copy => {
            out.push(rules(claude_real, "CLAUDE.md", vec![AgentId::Claude]));
            out.push(if lost_link {
                replace_lost_link(agents_path, agents)
            } else {
                rules(agents_real, "AGENTS.md", others(agents))
            });
        }
        _ if agents_is_real_file || agents_is_foreign_link => {
            // The user keeps their own AGENTS.md: never merged, the block goes into both.
            let claude_missing = claude == Found::Missing;
            out.push(rules(agents_real, "AGENTS.md", others(agents)));
            if claude_missing || layout == Layout::Import || imports_agents_md(&claude) {
                out.push(import(claude_real));
            } else {
                out.push(rules(claude_real, "CLAUDE.md", vec![AgentId::Claude]));
            }
        }
        Layout::Symlink if !imports_agents_md(&claude) && symlinks_work(root) => {
            out.push(rules(claude_real, "CLAUDE.md", vec![AgentId::Claude]));
            let note = lost_link.then(|| {
                "AGENTS.md was the text `CLAUDE.md` (a checkout that lost the link); restored the symlink".to_owned()
            });
            out.push(agents_link(agents_path, agents, note));
        }
        Layout::Symlink | Layout::Import => {
            let mut agents_target = if lost_link {
                replace_lost_link(agents_path, agents)
            } else {
                rules(agents_path, "AGENTS.md", others(agents))
            };
            if layout == Layout::Symlink {
                agents_target.note = Some(
                    "symlinks cannot be created here (on Windows, enable Developer Mode); used the import layout: \
                     AGENTS.md holds the rules and CLAUDE.md imports it"
                        .into(),
                );
            }
            out.push(agents_target);
            out.push(import(claude_real));
        }
    }
    Ok(out)
}

fn agents_link(path: PathBuf, agents: &[AgentId], note: Option<String>) -> Target {
    Target {
        path,
        display: "AGENTS.md".into(),
        scope: Scope::Project,
        agents: others(agents),
        desired: Desired::Symlink {
            target: LOST_LINK.into(),
        },
        note,
    }
}

/// A lost-link text file is not the user's content: it is replaced by the rules as a whole.
fn replace_lost_link(path: PathBuf, agents: &[AgentId]) -> Target {
    Target {
        path,
        display: "AGENTS.md".into(),
        scope: Scope::Project,
        agents: others(agents),
        desired: Desired::Whole { content: format!("{}\n", crate::edit::markdown::block(RULES)) },
        note: Some("AGENTS.md was the text `CLAUDE.md` (a checkout that lost the link); replaced it with a real file".into()),
    }
}

fn others(agents: &[AgentId]) -> Vec<AgentId> {
    agents
        .iter()
        .copied()
        .filter(|a| *a != AgentId::Claude)
        .collect()
}

/// The file behind `path`: itself, or the target of its symlink when that stays in the repository.
fn real_path(root: &Path, path: &Path, found: &Found) -> anyhow::Result<PathBuf> {
    match found {
        Found::Link { resolved, .. } => {
            let root = std::fs::canonicalize(root)?;
            if !resolved.starts_with(&root) {
                bail!(
                    "{} is a symlink to {}, outside the repository; memloop never writes through it. \
                     Replace it with a file or a link inside the repository",
                    path.display(),
                    resolved.display()
                );
            }
            Ok(resolved.clone())
        }
        _ => Ok(path.to_path_buf()),
    }
}

fn block_target(
    root: &Path,
    path: PathBuf,
    display: &str,
    body: &str,
    agents: Vec<AgentId>,
) -> Target {
    let display = path
        .strip_prefix(std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()))
        .or_else(|_| path.strip_prefix(root))
        .map(|rel| rel.to_string_lossy().into_owned())
        .unwrap_or_else(|_| display.to_owned());
    Target {
        path,
        display,
        scope: Scope::Project,
        agents,
        desired: Desired::Fragments {
            format: Format::Markdown,
            fragments: vec![Fragment::MarkdownBlock {
                body: body.to_owned(),
            }],
        },
        note: None,
    }
}
