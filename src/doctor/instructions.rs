//! The rules each agent reads: `CLAUDE.md` and what it imports (`claude_md`), or the first of
//! some names that exists (`first_of`), or any of the names an agent loads (`any_of`). Which one an agent reads, and what else it checks about
//! that file, is the agent's (`agents::Agent::check_rules`). Facts: research/claude-code.md
//! section 4, opencode.md section 4, kimi.md section 4.

use std::path::{Path, PathBuf};

use super::{Doctor, Finding, Group};
use crate::config::AgentId;
use crate::edit::markdown;
use crate::instructions::{Found, IMPORT, RULES, inspect};

const LOST_LINK: &str = "CLAUDE.md";

/// What one name in the repository gives a reader.
enum Read {
    Missing,
    /// A symlink whose target does not exist.
    Dangling(String),
    /// The text a checkout without symlinks leaves of `AGENTS.md -> CLAUDE.md`.
    LostLink,
    Text {
        text: String,
        via_link: bool,
    },
}

fn read(path: &Path) -> Read {
    match inspect(path) {
        Ok(Found::Missing) | Err(_) => Read::Missing,
        Ok(Found::Link { target, resolved }) => match crate::files::read_regular(&resolved) {
            Ok(bytes) => Read::Text {
                text: decode(&bytes),
                via_link: true,
            },
            Err(_) => Read::Dangling(target),
        },
        Ok(Found::File { bytes }) => {
            let text = decode(&bytes);
            if text.trim_end() == LOST_LINK {
                Read::LostLink
            } else {
                Read::Text {
                    text,
                    via_link: false,
                }
            }
        }
    }
}

fn decode(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_start_matches('\u{feff}')
        .replace("\r\n", "\n")
}

/// How the rules appear in a text.
#[derive(Debug, PartialEq, Eq)]
enum Rules {
    /// memloop's block with the current rule lines.
    Current(usize),
    /// memloop's block holding the `@AGENTS.md` import.
    Import(usize),
    /// A block whose lines differ from this memloop's rules.
    Different(usize),
    Absent,
}

fn rules_in(text: &str) -> Rules {
    let spans = markdown::find(text, "").unwrap_or_default();
    let Some(span) = spans.first() else {
        return Rules::Absent;
    };
    let line = text[..span.start].matches('\n').count() + 1;
    let block = &text[span.start..span.end];
    if block.lines().nth(1).is_some_and(|l| l.trim() == IMPORT) {
        return Rules::Import(line);
    }
    if RULES.lines().all(|rule| block.contains(rule)) {
        Rules::Current(line)
    } else {
        Rules::Different(line)
    }
}

/// What the rules files share: `AGENTS.md`, when an agent other than Claude Code reads it, as
/// the link `memloop sync` made (`crate::instructions` plans the same way).
pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let needs_agents_md = d.repo.config.agents.iter().any(|a| *a != AgentId::Claude);
    if needs_agents_md {
        agents_link(d, &root);
    }
}

/// `AGENTS.md` as a link: intact, dangling, or lost in a checkout.
fn agents_link(d: &mut Doctor, root: &Path) {
    let sync = d.sync_command(false);
    match read(&root.join("AGENTS.md")) {
        Read::LostLink => d.push(
            Finding::error(
                Group::Memloop,
                "agents-link",
                "AGENTS.md is the 9-byte text `CLAUDE.md`: a checkout without symlink support lost the link, so OpenCode and Kimi read that word instead of the rules",
            )
            .at("AGENTS.md", Some(1))
            .by_sync(sync),
        ),
        Read::Dangling(target) => d.push(
            Finding::error(
                Group::Memloop,
                "agents-link",
                format!("AGENTS.md is a symlink to {target}, which does not exist"),
            )
            .file("AGENTS.md")
            .fix(format!("remove AGENTS.md, then run `{sync}`")),
        ),
        Read::Text { via_link: true, .. } => d.push(
            Finding::ok(Group::Memloop, "agents-link", "a symlink whose target exists")
                .file("AGENTS.md"),
        ),
        Read::Text { .. } | Read::Missing => {}
    }
}

/// `CLAUDE.md` as Claude Code reads it: its own block, or an `@AGENTS.md` import of the rules.
pub fn claude_md(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let root = root.as_path();
    let path = root.join("CLAUDE.md");
    let agent = AgentId::Claude;
    let claude_md = read(&path);
    let sync = d.sync_command(false);
    let text = match claude_md {
        Read::Text { text, .. } => text,
        Read::Missing => {
            d.push(
                Finding::error(
                    agent,
                    "instructions",
                    "CLAUDE.md does not exist, so Claude Code gets no memory rules",
                )
                .file("CLAUDE.md")
                .by_sync(sync),
            );
            return;
        }
        Read::Dangling(target) => {
            d.push(
                Finding::error(
                    agent,
                    "instructions",
                    format!("CLAUDE.md is a symlink to {target}, which does not exist"),
                )
                .file("CLAUDE.md")
                .fix(format!("remove CLAUDE.md, then run `{sync}`")),
            );
            return;
        }
        Read::LostLink => Read::LostLink.text_or_empty(),
    };
    match rules_in(&text) {
        Rules::Current(line) => d.push(
            Finding::ok(agent, "instructions", "CLAUDE.md holds the memory rules")
                .at("CLAUDE.md", Some(line)),
        ),
        Rules::Import(line) => import(d, root, line),
        Rules::Different(line) => d.push(
            Finding::warning(
                agent,
                "instructions",
                "CLAUDE.md holds a memloop block whose rule lines differ from this memloop's",
            )
            .at("CLAUDE.md", Some(line))
            .by_sync(sync),
        ),
        Rules::Absent => d.push(
            Finding::error(
                agent,
                "instructions",
                "CLAUDE.md has no memloop rules block, so Claude Code never hears the memory rules",
            )
            .file("CLAUDE.md")
            .by_sync(sync),
        ),
    }
}

impl Read {
    fn text_or_empty(self) -> String {
        match self {
            Read::Text { text, .. } => text,
            _ => String::new(),
        }
    }
}

/// `CLAUDE.md` imports `@AGENTS.md`: it must resolve (next to `CLAUDE.md`) and hold the rules.
fn import(d: &mut Doctor, root: &Path, line: usize) {
    let agent = AgentId::Claude;
    let sync = d.sync_command(false);
    let target: PathBuf = root.join("AGENTS.md");
    match read(&target) {
        Read::Text { text, .. } if matches!(rules_in(&text), Rules::Current(_)) => d.push(
            Finding::ok(agent, "import", "CLAUDE.md imports @AGENTS.md, which holds the memory rules")
                .at("CLAUDE.md", Some(line)),
        ),
        Read::Text { .. } => d.push(
            Finding::error(agent, "import", "CLAUDE.md imports @AGENTS.md, but AGENTS.md holds no current memloop rules")
                .at("CLAUDE.md", Some(line))
                .by_sync(sync),
        ),
        _ => d.push(
            Finding::error(agent, "import", "CLAUDE.md imports @AGENTS.md, which cannot be read (missing, dangling link or lost link)")
                .at("CLAUDE.md", Some(line))
                .by_sync(sync),
        ),
    }
}

/// The first of `names` that exists in the repository, as `program` reads it.
pub fn first_of(d: &mut Doctor, agent: AgentId, program: &str, names: &[&'static str]) {
    let root = d.repo.root.clone();
    let sync = d.sync_command(false);
    let (name, found) = names
        .iter()
        .map(|name| (*name, read(&root.join(name))))
        .find(|(_, found)| !matches!(found, Read::Missing))
        .unwrap_or((names[0], Read::Missing));
    reader_sees(d, agent, program, name, found, sync);
}

/// For an agent that loads every one of `names` that exists (Gemini's `context.fileName`): the
/// first holding memloop's current rules, else the first that exists, else the first name.
/// Returns whether the rules reach the agent.
pub fn any_of(d: &mut Doctor, agent: AgentId, program: &str, names: &[String]) -> bool {
    let root = d.repo.root.clone();
    let sync = d.sync_command(false);
    let found: Vec<(&str, Read)> = names
        .iter()
        .map(|name| (name.as_str(), read(&root.join(name))))
        .collect();
    let holds = |read: &Read| matches!(read, Read::Text { text, .. } if matches!(rules_in(text), Rules::Current(_)));
    let pick = found.iter().position(|(_, read)| holds(read)).or_else(|| {
        found
            .iter()
            .position(|(_, read)| !matches!(read, Read::Missing))
    });
    let mut found = found;
    let (name, read) = match pick {
        Some(i) => found.swap_remove(i),
        None if found.is_empty() => return false,
        None => found.swap_remove(0),
    };
    let ok = holds(&read);
    reader_sees(d, agent, program, name, read, sync);
    ok
}

fn reader_sees(d: &mut Doctor, agent: AgentId, program: &str, name: &str, found: Read, sync: &str) {
    let finding = match found {
        Read::Missing => Finding::error(
            agent,
            "instructions",
            format!("{name} does not exist, so {program} gets no memory rules"),
        )
        .file(name)
        .by_sync(sync),
        Read::Dangling(target) => Finding::error(
            agent,
            "instructions",
            format!("{name} is a symlink to {target}, which does not exist: {program} gets no memory rules"),
        )
        .file(name)
        .fix(format!("remove {name}, then run `{sync}`")),
        Read::LostLink => Finding::error(
            agent,
            "instructions",
            format!("{name} is the lost-link text `CLAUDE.md`: {program} reads that word, not the rules"),
        )
        .at(name, Some(1))
        .by_sync(sync),
        Read::Text { text, .. } => match rules_in(&text) {
            Rules::Current(line) => Finding::ok(
                agent,
                "instructions",
                format!("{name} holds the memory rules {program} reads"),
            )
            .at(name, Some(line)),
            Rules::Import(line) => Finding::error(
                agent,
                "instructions",
                format!("{name} holds only the `@AGENTS.md` import, which {program} does not follow"),
            )
            .at(name, Some(line))
            .by_sync(sync),
            Rules::Different(line) => Finding::warning(
                agent,
                "instructions",
                format!("{name} holds a memloop block whose rule lines differ from this memloop's"),
            )
            .at(name, Some(line))
            .by_sync(sync),
            Rules::Absent => Finding::error(
                agent,
                "instructions",
                format!("{name} has no memloop rules block, so {program} never hears the memory rules"),
            )
            .file(name)
            .by_sync(sync),
        },
    };
    d.push(finding);
}

/// For an agent that reads every one of `names` and shows identical texts once (Copilot CLI
/// lists a symlinked or copied `AGENTS.md` and `CLAUDE.md` as one source): the memory rules must
/// reach it exactly once. A lost or dangling link is the shared `agents-link` check's.
pub fn each_of(d: &mut Doctor, agent: AgentId, program: &str, names: &[&'static str]) {
    each(d, agent, program, names, Merge::SameText);
}

/// For an agent that reads every one of `names` and reads a file behind two names once (Factory
/// Droid loads `CLAUDE.md` and `AGENTS.md`, one copy per real path): the memory rules must reach
/// it exactly once.
pub fn each_real_file(d: &mut Doctor, agent: AgentId, program: &str, names: &[&'static str]) {
    each(d, agent, program, names, Merge::SamePath);
}

/// Which of the files an agent reads it takes for one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Merge {
    SameText,
    SamePath,
}

fn each(d: &mut Doctor, agent: AgentId, program: &str, names: &[&'static str], merge: Merge) {
    let root = d.repo.root.clone();
    let sync = d.sync_command(false);
    let mut seen: Vec<String> = Vec::new();
    let mut holding: Vec<(&str, usize)> = Vec::new();
    for name in names {
        let path = root.join(name);
        let Read::Text { text, .. } = read(&path) else {
            continue;
        };
        let key = match merge {
            Merge::SameText => text.clone(),
            Merge::SamePath => std::fs::canonicalize(&path)
                .unwrap_or(path)
                .to_string_lossy()
                .into_owned(),
        };
        if seen.contains(&key) {
            continue;
        }
        if let Rules::Current(line) | Rules::Different(line) = rules_in(&text) {
            holding.push((name, line));
        }
        seen.push(key);
    }
    let merges = match merge {
        Merge::SameText => "it merges only identical files",
        Merge::SamePath => "it merges only names of one file",
    };
    let finding = match holding.as_slice() {
        [] => Finding::error(
            agent,
            "instructions",
            format!(
                "none of {} holds memloop's rules block, so {program} never hears the memory rules",
                names.join(", ")
            ),
        )
        .file(names[0])
        .by_sync(sync),
        [(name, line)] => Finding::ok(
            agent,
            "instructions",
            format!("{name} holds the memory rules {program} reads, once"),
        )
        .at(*name, Some(*line)),
        [(first, line), rest @ ..] => {
            let others: Vec<&str> = rest.iter().map(|(name, _)| *name).collect();
            Finding::warning(
                agent,
                "instructions-twice",
                format!(
                    "the memory rules reach {program} {} times: {first} and {} hold them, and {program} reads each ({merges})",
                    holding.len(),
                    others.join(", ")
                ),
            )
            .at(*first, Some(*line))
            .fix("keep the rules in one file: make AGENTS.md a symlink to CLAUDE.md (layout = \"symlink\" in memloop.toml), or remove the block from one of them")
        }
    };
    d.push(finding);
}
