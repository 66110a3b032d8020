//! `memloop uninstall`: remove exactly what memloop owns. A file memloop created and that holds
//! nothing else goes; a file that existed gets its original bytes back when nothing else changed
//! it since, and keeps the user's later edits when something did.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{Repo, interactive, refused, report};
use crate::engine::apply::{apply, remove_created_dirs};
use crate::engine::{Change, Mode, place};
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
    let mut repo = Repo::open()?;
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
        // A link that was already there when memloop installed on this machine is the user's.
        let recorded = repo.state.original(&change.write_path).is_some();
        if matches!(change.target.desired, Desired::Symlink { .. })
            && !recorded
            && !repo.state.files.is_empty()
        {
            change.after = change.before.clone();
        }
        // Nothing else touched the file since memloop wrote it: give the original bytes back.
        if let Some(original) = repo.state.original(&change.write_path)
            && repo
                .state
                .unchanged_since_write(&change.write_path, &change.before)
        {
            change.after = original;
        }
    }
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
    apply(&changes, &mut repo.state)?;
    for change in &changes {
        repo.state.files.remove(&change.write_path);
    }
    remove_created_dirs(&mut repo.state);
    if kept.is_empty() {
        repo.state.user_scope = false;
    }
    repo.state.save(&repo.root)?;
    println!("memloop uninstall: {}", repo.root.display());
    print!("{}", report::summary(&changes));
    for display in kept {
        println!(
            "  kept      {display}  (outside the repository: run `memloop uninstall --yes` to remove it)"
        );
    }
    println!("memloop.toml is kept; delete it to forget these settings");
    Ok(ExitCode::SUCCESS)
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
