//! `memloop uninstall`: remove exactly what memloop owns. A file memloop created and that holds
//! nothing else goes; a file that existed gets its original bytes back when nothing else changed
//! it since, and keeps the user's later edits when something did.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{Repo, interactive, refused, report};
use crate::engine::apply::{apply, remove_created_dirs};
use crate::engine::{Change, Content, Mode, place};
use crate::target::{Desired, Scope, Target};

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// Also remove memloop's entries from the user's agent config outside the repository.
    #[arg(long)]
    pub yes: bool,
    /// Print the diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    let mut repo = Repo::open(&crate::agents::check_server)?;
    let _lock = if args.dry_run {
        None
    } else {
        Some(repo.lock()?)
    };
    // User-scope files are planned too (this machine may have forgotten the consent); they are
    // only written with consent, below.
    let (mut changes, _) = match repo.plan(Mode::Remove, true) {
        Ok(planned) => planned,
        Err(err) => return refused(err),
    };
    changes.extend(forgotten_files(&repo, &changes)?);
    for change in &mut changes {
        let path = &change.write_path;
        // Nothing else touched the file since memloop wrote it: give the original bytes back.
        if let Some(original) = repo.state.original(path)
            && repo.state.unchanged_since_write(path, &change.before)
        {
            change.after = original;
        }
        // A second uninstall finds what the first one left: nothing of memloop's is there.
        if repo.state.original(path).is_none()
            && repo.state.untouched_since_release(path, &change.before)
        {
            change.after = change.before.clone();
        }
    }
    keep_links_that_still_point_somewhere(&repo, &mut changes);
    if let Some(link) = dangling_agents_link(&repo, &changes) {
        changes.push(link);
    }
    let committed = keep_committed_files(&repo, &mut changes);
    let user_files: Vec<&Change> = changes
        .iter()
        .filter(|c| c.target.scope == Scope::User && !c.is_noop())
        .collect();
    let consent =
        user_files.is_empty() || args.yes || (interactive() && !args.dry_run && ask(&user_files)?);
    let mut kept = Vec::new();
    if !consent {
        kept = user_files
            .iter()
            .map(|c| c.target.display.clone())
            .collect();
        changes.retain(|c| c.target.scope != Scope::User);
    }
    if args.dry_run {
        print!("{}", report::diffs(&changes, super::use_color()));
        println!("memloop uninstall --dry-run: nothing written");
        return Ok(ExitCode::SUCCESS);
    }
    let unrecorded: Vec<PathBuf> = changes
        .iter()
        .filter(|c| c.after == Content::Missing && !c.is_noop())
        .filter(|c| repo.state.original(&c.write_path).is_none())
        .map(|c| c.write_path.clone())
        .collect();
    apply(&changes, &mut repo.state)?;
    for change in &changes {
        repo.state.release(&change.write_path, &change.after);
    }
    remove_created_dirs(&mut repo.state);
    remove_emptied_dirs(&repo.root, &unrecorded);
    if kept.is_empty() {
        repo.state.user_scope = false;
        repo.state.trusted = false;
    }
    repo.state.save(&repo.root)?;
    println!("memloop uninstall: {}", repo.root.display());
    print!("{}", report::summary(&changes));
    for display in kept {
        println!(
            "  kept      {display}  (outside the repository: run `memloop uninstall --yes` to remove it)"
        );
    }
    for display in committed {
        println!(
            "  kept      {display}  (committed in git, and this machine has no record of memloop creating it: \
             if it is memloop's alone, remove it with `git rm {display}`)"
        );
    }
    println!("memloop.toml is kept; delete it to forget these settings");
    Ok(ExitCode::SUCCESS)
}

/// `AGENTS.md -> CLAUDE.md` is exactly what memloop creates, so where this machine knows nothing
/// of the install it goes, like any file memloop would create from nothing. Where it does know
/// the install and did not write the link, the link was there before: it stays while
/// `CLAUDE.md` stays, and goes only when it would dangle.
fn keep_links_that_still_point_somewhere(repo: &Repo, changes: &mut [Change]) {
    let knows_install = repo.state.files.keys().any(|path| {
        path.file_name()
            .is_none_or(|name| name != crate::config::FILE_NAME)
    });
    if !knows_install {
        return;
    }
    let missing_after: Vec<(PathBuf, bool)> = changes
        .iter()
        .map(|c| (c.write_path.clone(), c.after == Content::Missing))
        .collect();
    for change in changes.iter_mut() {
        let (Desired::Symlink { .. }, Content::Link { target }) =
            (&change.target.desired, &change.before)
        else {
            continue;
        };
        if repo.state.original(&change.write_path).is_some() || change.is_noop() {
            continue;
        }
        let pointed = change
            .write_path
            .parent()
            .map(|dir| dir.join(target))
            .unwrap_or_default();
        let pointed = std::fs::canonicalize(&pointed).unwrap_or(pointed);
        let dangles = match missing_after.iter().find(|(path, _)| {
            *path == pointed || std::fs::canonicalize(path).is_ok_and(|p| p == pointed)
        }) {
            Some((_, gone)) => *gone,
            None => std::fs::symlink_metadata(&pointed).is_err(),
        };
        if !dangles {
            change.after = change.before.clone();
        }
    }
}

/// The folders that deleting `files` left empty, inside the repository: where this machine
/// has no record of the install (so no record of the folders memloop created either), a folder
/// that holds nothing once memloop's file is gone (`.opencode/plugins/`) goes with it. Folders
/// hold no bytes of the user's, and a folder that still holds anything stays.
fn remove_emptied_dirs(root: &std::path::Path, files: &[PathBuf]) {
    for file in files {
        for dir in file.ancestors().skip(1) {
            if dir == root || !dir.starts_with(root) || dir.ends_with(".git") {
                break;
            }
            // A folder reached through a link is somewhere else; a full folder stays.
            let is_plain_dir = std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir());
            if !is_plain_dir || std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

/// A file in the repository that uninstall would delete although this machine has no record of
/// memloop creating it (another machine, a lost state folder) may be the user's, even when it
/// holds exactly what memloop writes from nothing: when git tracks it in `HEAD`, it stays as it
/// is. Returns what was kept, for the report.
fn keep_committed_files(repo: &Repo, changes: &mut [Change]) -> Vec<String> {
    let mut kept = Vec::new();
    for change in changes.iter_mut() {
        if change.after != Content::Missing
            || change.before == Content::Missing
            || change.target.scope != Scope::Project
            || repo.state.original(&change.write_path).is_some()
        {
            continue;
        }
        let Ok(rel) = change.write_path.strip_prefix(&repo.root) else {
            continue;
        };
        if crate::repo::tracked_in_head(&repo.root, rel) {
            change.after = change.before.clone();
            kept.push(change.target.display.clone());
        }
    }
    kept
}

/// `AGENTS.md -> CLAUDE.md` that no planned change covers (memloop.toml names only Claude now)
/// would dangle once `CLAUDE.md` goes: it goes with it.
fn dangling_agents_link(repo: &Repo, changes: &[Change]) -> Option<Change> {
    let path = repo.root.join("AGENTS.md");
    if changes.iter().any(|c| c.target.path == path) {
        return None;
    }
    let Ok(crate::instructions::Found::Link { target, resolved }) =
        crate::instructions::inspect(&path)
    else {
        return None;
    };
    let gone = |p: &std::path::Path| {
        *p == resolved || std::fs::canonicalize(p).is_ok_and(|real| real == resolved)
    };
    let dangles = match changes.iter().find(|c| gone(&c.write_path)) {
        Some(change) => change.after == Content::Missing,
        None => std::fs::symlink_metadata(&resolved).is_err(),
    };
    (dangles && target == "CLAUDE.md").then(|| Change {
        target: Target {
            path: path.clone(),
            display: "AGENTS.md".into(),
            scope: Scope::Project,
            agents: Vec::new(),
            desired: Desired::Symlink { target },
            note: None,
        },
        write_path: path,
        before: Content::Link {
            target: "CLAUDE.md".into(),
        },
        after: Content::Missing,
    })
}

/// Files memloop wrote that the current memloop.toml no longer names (an agent removed, say).
fn forgotten_files(repo: &Repo, planned: &[Change]) -> anyhow::Result<Vec<Change>> {
    let mut out = Vec::new();
    let known: Vec<&PathBuf> = planned.iter().map(|c| &c.write_path).collect();
    for (path, record) in &repo.state.files {
        // memloop.toml is the user's statement of intent: kept, so a later sync can reinstall.
        if known.contains(&path)
            || path
                .file_name()
                .is_some_and(|name| name == crate::config::FILE_NAME)
        {
            continue;
        }
        let inside = path.strip_prefix(&repo.state.root).ok();
        let scope = if inside.is_some() {
            Scope::Project
        } else {
            Scope::User
        };
        // A path that now leads elsewhere through a symlink is not the file memloop wrote.
        let display = path.display().to_string();
        if let Err(refusal) = place::confine(&repo.state.root, path, scope, &display, false) {
            eprintln!("memloop: left as it is: {refusal}");
            continue;
        }
        // A file that is no longer text is not memloop's to restore either.
        let before = match crate::engine::read(path, &display) {
            Ok(content) => Some(content),
            Err(crate::engine::PlanError::Refused(_)) => None,
            Err(crate::engine::PlanError::Other(err)) => return Err(err),
        };
        let Some(before) = before.filter(|b| repo.state.unchanged_since_write(path, b)) else {
            eprintln!(
                "memloop: {} changed since memloop wrote it and memloop.toml no longer names it; left as it is",
                path.display()
            );
            continue;
        };
        out.push(Change {
            target: Target {
                path: path.clone(),
                display: inside.map_or_else(
                    || path.display().to_string(),
                    |rel| rel.display().to_string(),
                ),
                scope,
                agents: Vec::new(),
                desired: Desired::Whole {
                    content: String::new(),
                },
                note: None,
            },
            write_path: path.clone(),
            before,
            after: record.original.clone(),
        });
    }
    Ok(out)
}

fn ask(user_files: &[&Change]) -> anyhow::Result<bool> {
    let names: Vec<&str> = user_files
        .iter()
        .map(|c| c.target.display.as_str())
        .collect();
    let answer = dialoguer::Confirm::new()
        .with_prompt(format!(
            "Also remove memloop's entries from {} (outside the repository)?",
            names.join(", ")
        ))
        .default(true)
        .interact()?;
    Ok(answer)
}
