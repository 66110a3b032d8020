//! `memloop sync`: make the repository (and the user files it may touch) match memloop.toml.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::Value;

use super::{Repo, refused, report};
use crate::edit::json::JsonDoc;
use crate::edit::text::Encoding;
use crate::engine::apply::{Lock, apply};
use crate::engine::{Change, Content, Mode};
use crate::target::{Desired, Format, Fragment};

#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Print the diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Allow writing the agents' user config outside the repository (Kimi's hooks); remembered. Trust entries: `memloop trust`.
    #[arg(long)]
    pub user_scope: bool,
    /// Replace a server of the same name that memloop did not write.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let mut repo = Repo::open(&crate::agents::check_server)?;
    sync(&mut repo, &args, "sync", &|_, _| Ok(Vec::new()))
}

/// Changes planned with the others under the lock (init's memloop.toml), given the repository
/// and the lock (`None` on a dry run).
pub type Extra<'a> = &'a dyn Fn(&Repo, Option<&Lock>) -> anyhow::Result<Vec<Change>>;

/// Plans, checks for conflicts, and writes `extra` with the plan in one transaction; shared
/// with `init`. Everything is read under the lock.
pub fn sync(
    repo: &mut Repo,
    args: &SyncArgs,
    command: &str,
    extra: Extra,
) -> anyhow::Result<ExitCode> {
    let lock = if args.dry_run {
        None
    } else {
        Some(repo.lock()?)
    };
    let extra = extra(repo, lock.as_ref())?;
    let (mut changes, wanted) = match repo.plan(Mode::Install, args.user_scope) {
        Ok(planned) => planned,
        Err(err) => return refused(err),
    };
    changes.splice(0..0, extra);
    if !args.force {
        check_conflicts(repo, &changes)?;
    }
    if args.dry_run {
        print!("{}", report::diffs(&changes, super::use_color()));
        println!("memloop {command} --dry-run: nothing written");
        return Ok(ExitCode::SUCCESS);
    }
    let consent_is_new = args.user_scope && !repo.state.user_scope;
    repo.state.user_scope |= args.user_scope;
    apply(&changes, &mut repo.state)?;
    // What was taken back for an agent memloop.toml no longer names is not memloop's any more.
    for change in changes
        .iter()
        .filter(|c| wanted.removed.contains(&c.write_path))
    {
        repo.state.release(&change.write_path, &change.after);
    }
    // An in-sync repository costs no write (and no fsync) at all.
    if consent_is_new || changes.iter().any(|change| !change.is_noop()) {
        repo.state.save(&repo.root)?;
    }
    println!("memloop {command}: {}", repo.root.display());
    print!("{}", report::summary(&changes));
    for skipped in &wanted.skipped {
        println!("  skipped: {skipped}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A server of the same name with other content, which memloop did not write, is the user's.
pub(crate) fn check_conflicts(repo: &Repo, changes: &[Change]) -> anyhow::Result<()> {
    check_conflicts_hinting(
        repo,
        changes,
        "Rename the server in memloop.toml ([server] name), or run again with --force to replace yours",
    )
}

/// `check_conflicts` with `hint` as the way out it names.
pub(crate) fn check_conflicts_hinting(
    repo: &Repo,
    changes: &[Change],
    hint: &str,
) -> anyhow::Result<()> {
    for change in changes {
        check_toml_conflicts(repo, change, hint)?;
        let Desired::Fragments {
            format: Format::Json(dialect),
            fragments,
        } = &change.target.desired
        else {
            continue;
        };
        for fragment in fragments {
            let Fragment::JsonMember { path, value } = fragment else {
                continue;
            };
            let current = member(&change.before, *dialect, path);
            let Some(current) = current.filter(|current| current != value) else {
                continue;
            };
            let written_by_memloop = match repo.state.original(&change.write_path) {
                Some(original) => member(&original, *dialect, path).is_none(),
                None => false,
            };
            let changed = rewritten(repo, change);
            if !written_by_memloop || changed {
                let text = Encoding::decode(change.before.text().as_bytes(), "")
                    .map(|(text, _)| text)
                    .unwrap_or_default();
                let (line, col) = crate::edit::json::value_position(&text, path);
                let (what, hint) = if changed {
                    (REWRITTEN, REWRITTEN_HINT)
                } else {
                    ("already exists and memloop did not write it", hint)
                };
                bail!(
                    "{}:{line}:{col}: `{}` {what}.\n  yours:    {}\n  memloop's: {}\n{hint}",
                    change.target.display,
                    path.join("."),
                    current,
                    value
                );
            }
        }
    }
    Ok(())
}

const REWRITTEN: &str =
    "is memloop's, but it was changed since memloop wrote it (by you or another program)";
const REWRITTEN_HINT: &str = "memloop keeps the change: put it in memloop.toml if memloop should write it, \
     or run again with --force to write memloop's entry over it";

/// Whether the file changed since memloop wrote it, while memloop still wants there what it
/// wrote: an owned entry that differs now is someone else's change, never silently undone.
fn rewritten(repo: &Repo, change: &Change) -> bool {
    repo.state
        .changed_by_someone_else(&change.write_path, &change.before, &change.target.desired)
}

/// The same for a TOML table memloop owns whole (Codex's `[mcp_servers.<name>]`).
fn check_toml_conflicts(repo: &Repo, change: &Change, hint: &str) -> anyhow::Result<()> {
    let Desired::Fragments {
        format: Format::Toml,
        fragments,
    } = &change.target.desired
    else {
        return Ok(());
    };
    let table_text = |content: &Content, path: &[String]| -> Option<String> {
        let Content::File { text } = content else {
            return None;
        };
        let (text, _) = Encoding::decode(text.as_bytes(), "").ok()?;
        let doc = crate::edit::toml::TomlDoc::parse(&text, "").ok()?;
        doc.table_at(path).map(|t| {
            t.iter()
                .map(|(k, v)| format!("{k} = {}", v.to_string().trim()))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    for fragment in fragments {
        let Fragment::TomlTable {
            path,
            fields,
            whole: true,
        } = fragment
        else {
            continue;
        };
        let Some(current) = table_text(&change.before, path) else {
            continue;
        };
        let wanted: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{k} = {}", v.to_value().to_string().trim()))
            .collect();
        if current == wanted.join(", ") {
            continue;
        }
        let written_by_memloop = repo
            .state
            .original(&change.write_path)
            .is_some_and(|original| table_text(&original, path).is_none());
        let changed = rewritten(repo, change);
        if !written_by_memloop || changed {
            let (what, hint) = if changed {
                (REWRITTEN, REWRITTEN_HINT)
            } else {
                ("already exists and memloop did not write it", hint)
            };
            bail!(
                "{}: [{}] {what}.\n  yours:    {current}\n  memloop's: {}\n{hint}",
                change.target.display,
                crate::edit::toml::dotted(path),
                wanted.join(", ")
            );
        }
    }
    Ok(())
}

fn member(
    content: &Content,
    dialect: crate::edit::json::Dialect,
    path: &[String],
) -> Option<Value> {
    let Content::File { text } = content else {
        return None;
    };
    let (text, _) = Encoding::decode(text.as_bytes(), "").ok()?;
    JsonDoc::parse(&text, dialect, "").ok()?.get(path)
}
