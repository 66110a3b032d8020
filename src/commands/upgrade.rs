//! `memloop upgrade`: migrate files written for older agent versions or by an older memloop.
//! `--dry-run` shows the migrations that apply and the diff per file; otherwise every change is
//! written in one transaction (locked, checked against what was read, rolled back on failure).

use std::path::PathBuf;
use std::process::ExitCode;

use super::{EXIT_DRIFT, Repo, refused, report};
use crate::agents;
use crate::engine::apply::apply;
use crate::engine::{Content, PlanError};
use crate::upgrade::{self, Applied, Env};
use crate::version;

#[derive(Debug, clap::Args)]
pub struct UpgradeArgs {
    /// Show the migrations that apply and the diff per file; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Allow rewriting the agents' user config outside the repository (Kimi's); remembered.
    #[arg(long)]
    pub user_scope: bool,
    /// List every migration with its agent and version range; change nothing.
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: UpgradeArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for m in agents::migrations() {
            println!("{:<24} {} ({})", m.id, m.about, m.range);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut repo = Repo::open(&crate::agents::check_server)?;
    let _lock = if args.dry_run {
        None
    } else {
        Some(repo.lock()?)
    };
    let installed = version::installed;
    let migrations = agents::migrations();
    let plan_with = |consent: bool| -> anyhow::Result<Result<upgrade::Plan, PlanError>> {
        let env = Env::new(&repo, consent, &installed)?;
        Ok(upgrade::plan(&env, &migrations))
    };
    let mut plan = match plan_with(args.user_scope)? {
        Ok(plan) => plan,
        Err(err) => return refused(err),
    };
    if args.dry_run && !plan.held.is_empty() {
        // Show what the held migrations would change too; they stay marked as held.
        let held = std::mem::take(&mut plan.held);
        plan = match plan_with(true)? {
            Ok(full) => full,
            Err(err) => return refused(err),
        };
        plan.applied.retain(|a| !held.iter().any(|h| h.id == a.id));
        plan.held = held;
    }
    let verb = if args.dry_run {
        "memloop upgrade --dry-run"
    } else {
        "memloop upgrade"
    };
    let handover = trust_handover(&repo)?;
    if plan.applied.is_empty() && plan.held.is_empty() && handover.is_none() {
        println!("{verb}: nothing to upgrade in {}", repo.root.display());
        print_notes(&plan.notes);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{verb}: {}", repo.root.display());
    for applied in &plan.applied {
        print_migration(applied);
    }
    let mut trust_held = false;
    if let Some(handover) = &handover {
        println!(
            "  {:<24} the trustedFolders entry an older memloop wrote through `sync --user-scope` becomes memloop trust's (sync keeps it, `memloop trust --revoke` takes it back)",
            agents::copilot::upgrade::TRUST_HANDOVER
        );
        println!("      {}", handover.display);
        if !handover.others.is_empty() {
            trust_held = true;
            println!(
                "      held: memloop trust would also write {}; run `memloop trust` to see and approve them (Copilot's entry stays as it is)",
                handover.others.join(", ")
            );
        }
    }
    for held in &plan.held {
        print_migration(held);
        println!(
            "      held: changes {} outside the repository; run `memloop upgrade --user-scope` to allow it",
            held.files.join(", ")
        );
    }
    print_notes(&plan.notes);
    let changes = plan.files.changes();
    let code = if plan.held.is_empty() && !trust_held {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DRIFT)
    };
    if args.dry_run {
        for (change, ids, _) in &changes {
            println!("== {} ({})", change.target.display, ids.join(", "));
            print!(
                "{}",
                report::diffs(std::slice::from_ref(change), super::use_color())
            );
        }
        println!("{verb}: nothing written");
        return Ok(code);
    }

    let only: Vec<_> = changes.iter().map(|(c, _, _)| c.clone()).collect();
    // Files memloop did not record on this machine held an older memloop's output, not the
    // user's original: forget them again, so uninstall removes memloop's part surgically
    // instead of bringing the old output back (or record the original a migration knows).
    // A file that did not exist stays recorded as created by memloop, unless a migration put
    // the user's own content in it (hooks carried over), which is then its original.
    let unrecorded: Vec<(PathBuf, Option<Content>)> = changes
        .iter()
        .filter(|(c, _, original)| {
            repo.state.original(&c.write_path).is_none()
                && (c.before != Content::Missing || original.is_some())
        })
        .map(|(c, _, original)| (c.write_path.clone(), original.clone()))
        .collect();
    apply(&only, &mut repo.state)?;
    for (path, original) in unrecorded {
        match (original, repo.state.files.get_mut(&path)) {
            (Some(original), Some(record)) => record.original = original,
            _ => {
                repo.state.files.remove(&path);
            }
        }
    }
    if args.user_scope {
        repo.state.user_scope = true;
    }
    if handover.is_some() && !trust_held {
        repo.state.trusted = true;
    }
    repo.state.save(&repo.root)?;
    // The legacy plugin folder goes when the move left it empty.
    let legacy = repo
        .root
        .join(crate::agents::opencode::upgrade::LEGACY_PLUGIN_DIR);
    if only
        .iter()
        .any(|c| c.after == Content::Missing && c.write_path.parent() == Some(legacy.as_path()))
    {
        let _ = std::fs::remove_dir(&legacy);
    }
    for (change, ids, _) in &changes {
        println!(
            "  {:<9} {}  ({})",
            report::verb(change),
            change.target.display,
            ids.join(", ")
        );
    }
    Ok(code)
}

/// What the migrations leave alone on purpose, each with what to do instead.
fn print_notes(notes: &[String]) {
    for note in notes {
        println!("  left as it is: {note}");
    }
}

fn print_migration(applied: &Applied) {
    println!("  {:<24} {}", applied.id, applied.about);
    for finding in &applied.findings {
        println!("      {finding}");
    }
}

/// A trust entry an older memloop wrote as one of sync's files (Copilot's), and what else
/// `memloop trust` would write: handing the entry over marks this machine's trust as given,
/// which covers every enabled agent, so it is done only when nothing else would be written.
struct Handover {
    display: String,
    others: Vec<String>,
}

fn trust_handover(repo: &Repo) -> anyhow::Result<Option<Handover>> {
    let Some(path) = agents::copilot::upgrade::legacy_trust(repo)? else {
        return Ok(None);
    };
    let ctx = repo.context(false)?;
    let others = match super::trust::plan(repo, false) {
        Ok(changes) => changes
            .iter()
            .filter(|c| !c.is_noop())
            .map(|c| c.target.display.clone())
            .collect(),
        // A file the trust step cannot read: `memloop trust` names it; nothing is handed over.
        Err(PlanError::Refused(refusals)) => refusals.iter().map(ToString::to_string).collect(),
        Err(PlanError::Other(err)) => return Err(err),
    };
    Ok(Some(Handover {
        display: ctx.display_user_path(&path),
        others,
    }))
}
