//! The installer's commands: init, sync, diff and uninstall are views of one plan.

pub mod diff;
pub mod doctor;
pub mod init;
pub mod memory;
pub mod sync;
pub mod trust;
pub mod uninstall;
pub mod upgrade;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use crate::agents;
use crate::engine::{self, Change, Content, Mode, PlanError};
use crate::repo::Repo;
use crate::report;
use crate::target::Wanted;

/// Exit codes of the contract: 0 ok, 1 drift or problems, 2 usage error or refused input.
pub const EXIT_DRIFT: u8 = 1;
pub const EXIT_REFUSED: u8 = 2;

impl Repo {
    /// The changes `mode` would make, or the files it refuses to touch. Installing also takes
    /// back the fragments of agents memloop.toml no longer names (their paths are in
    /// `Wanted::removed`).
    pub fn plan(&self, mode: Mode, user_scope: bool) -> Result<(Vec<Change>, Wanted), PlanError> {
        let mut ctx = self.context(user_scope)?;
        // Taking everything back (uninstall) takes back the trust entries too.
        if mode == Mode::Remove && user_scope {
            ctx = ctx.trusting();
        }
        let mut wanted = agents::wanted(&ctx)?;
        // Taking everything back on a machine with no record of the install (another machine, a
        // lost state folder): what git held before memloop came stands in for the record.
        let before_memloop = if mode == Mode::Remove {
            crate::repo::BeforeMemloop::find(&self.root)
        } else {
            None
        };
        let originals = |path: &Path| {
            self.state.original(path).or_else(|| {
                let base = before_memloop.as_ref()?;
                base.content(path.strip_prefix(&self.root).ok()?)
            })
        };
        let mut changes = engine::plan(&self.root, &wanted.targets, mode, &originals)?;
        // A file git held before memloop, and that holds just that plus memloop's entries now,
        // gets those bytes back exactly (as with a record of the install).
        if before_memloop.is_some() {
            for change in &mut changes {
                if self.state.original(&change.write_path).is_none()
                    && let Some(original) = originals(&change.write_path)
                    && original != Content::Missing
                    && engine::installed_over(&change.target, &original, &change.before)
                {
                    change.after = original;
                }
            }
        }
        if mode == Mode::Install {
            let unwanted = agents::unwanted(&ctx, &wanted.targets)?;
            let mut removals = engine::plan(&self.root, &unwanted, Mode::Remove, &originals)?;
            for change in &mut removals {
                let path = &change.write_path;
                // Untouched since memloop wrote it: the bytes from before come back.
                if let Some(original) = self.state.original(path)
                    && self.state.unchanged_since_write(path, &change.before)
                {
                    change.after = original;
                }
                // A link this machine did not write may be the user's (other tools read AGENTS.md).
                if matches!(
                    change.target.desired,
                    crate::target::Desired::Symlink { .. }
                ) && self.state.original(path).is_none()
                {
                    change.after = change.before.clone();
                }
            }
            // What holds nothing of memloop's (an agent never set up here) is not a change.
            removals.retain(|change| change.before != change.after);
            wanted
                .removed
                .extend(removals.iter().map(|change| change.write_path.clone()));
            changes.extend(removals);
            if !ctx.user_scope && !ctx.enabled(crate::config::AgentId::Kimi) {
                let config = agents::kimi::code_home(&ctx).join("config.toml");
                let holds_hook = crate::files::read_text(&config)
                    .is_ok_and(|text| text.contains(agents::kimi::HOOK_COMMAND));
                if holds_hook {
                    wanted.skipped.push(format!(
                        "{} still holds memloop's Stop hook for kimi, which memloop.toml no longer names: \
                         run `memloop sync --user-scope` to remove it",
                        ctx.display_user_path(&config)
                    ));
                }
            }
        }
        Ok((changes, wanted))
    }
}

/// Turns a planning failure into the contract's exit code, printing every refusal.
pub fn refused(err: PlanError) -> anyhow::Result<ExitCode> {
    match err {
        PlanError::Refused(refusals) => {
            for refusal in &refusals {
                eprintln!("memloop: refused {refusal}");
            }
            eprintln!("memloop: nothing was written");
            Ok(ExitCode::from(EXIT_REFUSED))
        }
        PlanError::Other(err) => Err(err),
    }
}

/// Whether a person can answer questions: both stdin and stderr are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Colours only on a terminal, and never when `NO_COLOR` is set.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
