//! `memloop trust`: the per-machine approvals the enabled agents need before they load this
//! repository's entries (each agent's `trust.rs` says which), written outside the repository
//! only after the user saw exactly what goes where and agreed. `--revoke` takes back exactly
//! what memloop wrote there on this machine, never an entry the user made.

use std::process::ExitCode;

use anyhow::bail;

use super::{Repo, interactive, refused, report};
use crate::agents;
use crate::engine::apply::apply;
use crate::engine::{self, Change, Mode, PlanError};

#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Take back the trust entries memloop wrote on this machine (the user's own stay).
    #[arg(long)]
    pub revoke: bool,
    /// Write without asking (needed where there is no terminal to ask on).
    #[arg(long)]
    pub yes: bool,
    /// Print what would be written and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: TrustArgs) -> anyhow::Result<ExitCode> {
    let mut repo = Repo::open(&crate::agents::check_server)?;
    let _lock = if args.dry_run {
        None
    } else {
        Some(repo.lock()?)
    };
    let changes = match plan(&repo, args.revoke) {
        Ok(changes) => changes,
        Err(err) => return refused(err),
    };
    let command = if args.revoke {
        "memloop trust --revoke"
    } else {
        "memloop trust"
    };
    let pending: Vec<Change> = changes.into_iter().filter(|c| !c.is_noop()).collect();
    if !args.revoke
        && let Err(err) = refuse_overruling(&repo, &pending)
    {
        eprintln!("memloop: refused {err:#}");
        eprintln!("memloop: nothing was written");
        return Ok(ExitCode::from(super::EXIT_REFUSED));
    }
    if pending.is_empty() {
        if !args.dry_run && repo.state.trusted == args.revoke {
            repo.state.trusted = !args.revoke;
            repo.state.save(&repo.root)?;
        }
        println!("{command}: nothing to change for {}", repo.root.display());
        if !args.revoke && agents::trust(&repo.context(false)?.trusting())?.is_empty() {
            println!("  none of the enabled agents needs a per-machine approval");
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{command}: {} for {}, outside the repository:",
        if args.revoke {
            "taking back these per-machine approvals"
        } else {
            "these per-machine approvals"
        },
        repo.root.display()
    );
    print!("{}", report::diffs(&pending, super::use_color()));
    if args.dry_run {
        println!("{command} --dry-run: nothing written");
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes {
        if !interactive() {
            bail!(
                "{command} writes outside the repository and needs your consent, and there is no terminal to ask on: \
                 read the plan above, then run `{command} --yes`; nothing was written"
            );
        }
        if !ask(&pending, args.revoke)? {
            println!("{command}: nothing written");
            return Ok(ExitCode::SUCCESS);
        }
    }
    write(&mut repo, &pending, args.revoke)?;
    print!("{}", report::summary(&pending));
    Ok(ExitCode::SUCCESS)
}

/// The end of `memloop init`: with `given` (`--trust`) write the trust entries after showing
/// them; on a terminal, show them and ask; otherwise name the command that would.
pub fn offer(repo: &mut Repo, given: bool, may_ask: bool, dry_run: bool) -> anyhow::Result<()> {
    let _lock = if dry_run { None } else { Some(repo.lock()?) };
    let pending: Vec<Change> = match plan(repo, false) {
        Ok(changes) => changes.into_iter().filter(|c| !c.is_noop()).collect(),
        Err(PlanError::Refused(refusals)) => {
            for refusal in &refusals {
                eprintln!("memloop: refused {refusal}");
            }
            eprintln!(
                "memloop: no trust entry was written; fix the file, then run `memloop trust`"
            );
            return Ok(());
        }
        Err(PlanError::Other(err)) => return Err(err),
    };
    if let Err(err) = refuse_overruling(repo, &pending) {
        eprintln!("memloop: refused {err:#}");
        eprintln!("memloop: no trust entry was written");
        return Ok(());
    }
    if pending.is_empty() {
        if given && !dry_run && !repo.state.trusted {
            repo.state.trusted = true;
            repo.state.save(&repo.root)?;
        }
        return Ok(());
    }
    let names: Vec<&str> = pending.iter().map(|c| c.target.display.as_str()).collect();
    if !given && !may_ask {
        println!(
            "Some agents load this repository's entries only once it is trusted on this machine ({}): run `memloop trust` to see and approve what it writes.",
            names.join(", ")
        );
        return Ok(());
    }
    println!("The agents load this repository's entries only once it is trusted on this machine:");
    print!("{}", report::diffs(&pending, super::use_color()));
    if dry_run {
        println!("memloop trust --dry-run: nothing written");
        return Ok(());
    }
    if !given && !ask(&pending, false)? {
        println!("No trust entry written; run `memloop trust` when you want them.");
        return Ok(());
    }
    write(repo, &pending, false)?;
    print!("{}", report::summary(&pending));
    Ok(())
}

/// What giving (or revoking) trust changes, read under the caller's lock.
pub fn plan(repo: &Repo, revoke: bool) -> Result<Vec<Change>, PlanError> {
    let ctx = repo.context(false)?.trusting();
    let targets = agents::trust(&ctx)?;
    let originals = |path: &std::path::Path| repo.state.original(path);
    let mode = if revoke { Mode::Remove } else { Mode::Install };
    let mut changes = engine::plan(&repo.root, &targets, mode, &originals)?;
    if revoke {
        for change in &mut changes {
            let path = &change.write_path;
            match repo.state.original(path) {
                // memloop never wrote it on this machine: whatever is there is the user's.
                None => change.after = change.before.clone(),
                // Untouched since memloop wrote it: the bytes from before come back.
                Some(original) if repo.state.unchanged_since_write(path, &change.before) => {
                    change.after = original;
                }
                // Changed since (the agent rewrote it): memloop's entries go, and the ones the
                // file held before memloop came stay.
                Some(_) => {}
            }
        }
    }
    Ok(changes)
}

/// An approval the user refused in the agent itself (Qwen's `rejected`, say) is not memloop's
/// to overrule: the same check as sync's for entries memloop did not write.
fn refuse_overruling(repo: &Repo, changes: &[Change]) -> anyhow::Result<()> {
    super::sync::check_conflicts_hinting(
        repo,
        changes,
        "memloop trust leaves that entry alone: change or remove it (in the agent, or by hand), then run `memloop trust` again",
    )
}

/// Writes `changes` (planned by `plan`) and remembers the consent, or its withdrawal.
pub fn write(repo: &mut Repo, changes: &[Change], revoke: bool) -> anyhow::Result<()> {
    apply(changes, &mut repo.state)?;
    if revoke {
        for change in changes {
            repo.state.release(&change.write_path, &change.after);
        }
    }
    repo.state.trusted = !revoke;
    repo.state.save(&repo.root)
}

fn ask(changes: &[Change], revoke: bool) -> anyhow::Result<bool> {
    let names: Vec<&str> = changes.iter().map(|c| c.target.display.as_str()).collect();
    let prompt = if revoke {
        format!("Take these approvals back from {}?", names.join(", "))
    } else {
        format!(
            "Write these approvals to {} (outside the repository)?",
            names.join(", ")
        )
    };
    Ok(dialoguer::Confirm::new()
        .with_prompt(prompt)
        .default(false)
        .interact()?)
}
