//! `memloop upgrade`'s migrations, as data: each has an id, the agent and version range it
//! applies to, a detector, and a rewrite done with the format-preserving editors (`crate::edit`).
//! Each agent's live in its folder (`agents::<agent>::upgrade`); `agents::migrations` lists them
//! all, memloop's own first. They run in that order over one in-memory view of the files
//! (`files::Files`), so later migrations see earlier rewrites; the result is a list of engine changes, applied in one
//! transaction by the command (`commands::upgrade`) or shown as diffs.

pub mod approvals;
pub mod files;
pub mod joined_groups;
pub mod memloop;

use crate::config::AgentId;
use crate::engine::PlanError;
use crate::repo::{Context, Repo};
use crate::{instructions, version};
pub use files::Files;
pub use version::{Installed, Product, Range};

/// One migration. `detect` lists what it found (one line each, naming the file); `rewrite`
/// changes exactly that, and afterwards `detect` must find nothing (checked on every run).
pub struct Migration {
    pub id: &'static str,
    /// The agent whose files it rewrites; `None` for memloop's own formats.
    pub agent: Option<AgentId>,
    /// The installed agent versions it applies to.
    pub range: Range,
    pub about: &'static str,
    pub detect: fn(&Env, &mut Files) -> Result<Vec<String>, PlanError>,
    pub rewrite: fn(&Env, &mut Files) -> Result<(), PlanError>,
}

/// memloop's own migrations (its config and block formats), which run before every agent's.
pub const MEMLOOP: &[Migration] = &[memloop::CONFIG_VERSION_KEY, memloop::BLOCK_MARKER];

/// What migrations may look at: the repository's settings, where the agents keep their files,
/// and which agent versions are installed.
pub struct Env<'a> {
    pub ctx: Context<'a>,
    pub installed: &'a dyn Fn(Product) -> Option<Installed>,
    /// Whether symlinks can be made in the repository.
    pub symlinks: bool,
    /// What migrations saw and leave alone on purpose (a user's entry they cannot rewrite
    /// safely), each with what the user can do; said once even when found twice.
    pub notes: std::cell::RefCell<Vec<String>>,
}

/// A migration that applies, with what it found and the files it changes.
#[derive(Debug, Clone)]
pub struct Applied {
    pub id: &'static str,
    pub about: &'static str,
    pub findings: Vec<String>,
    pub files: Vec<String>,
}

/// The outcome of running every migration over the files.
pub struct Plan {
    /// Applied to `files`.
    pub applied: Vec<Applied>,
    /// Apply, but change files outside the repository and have no consent: not applied.
    pub held: Vec<Applied>,
    pub files: Files,
    /// What migrations left alone on purpose (`Env::note`).
    pub notes: Vec<String>,
}

/// Runs every one of `migrations` that applies here, in their order. Unparsable files are
/// refused (all of them listed), never treated as empty.
pub fn plan(env: &Env, migrations: &[&Migration]) -> Result<Plan, PlanError> {
    let mut files = Files::new(env.ctx.root, &env.ctx.home);
    let mut applied = Vec::new();
    let mut held = Vec::new();
    let mut refusals = Vec::new();
    for &migration in migrations {
        if migration.agent.is_some_and(|agent| !env.ctx.enabled(agent))
            || !migration.range.contains(env.installed)
        {
            continue;
        }
        let snapshot = files.clone();
        match run_one(env, migration, &mut files) {
            Ok(None) => {}
            Ok(Some(done)) => {
                let (touched, outside) = files.touched_by(migration.id);
                let done = Applied {
                    files: touched,
                    ..done
                };
                if outside && !env.ctx.user_scope {
                    files = snapshot;
                    held.push(done);
                } else {
                    applied.push(done);
                }
            }
            Err(PlanError::Refused(mut found)) => {
                files = snapshot;
                refusals.append(&mut found);
            }
            Err(other) => return Err(other),
        }
    }
    if refusals.is_empty() {
        Ok(Plan {
            applied,
            held,
            files,
            notes: env.notes.borrow().clone(),
        })
    } else {
        Err(PlanError::Refused(refusals))
    }
}

fn run_one(
    env: &Env,
    migration: &Migration,
    files: &mut Files,
) -> Result<Option<Applied>, PlanError> {
    let findings = (migration.detect)(env, files)?;
    if findings.is_empty() {
        return Ok(None);
    }
    files.begin(migration.id);
    let result = (migration.rewrite)(env, files);
    files.end();
    result?;
    let left = (migration.detect)(env, files)?;
    let (touched, _) = files.touched_by(migration.id);
    if !left.is_empty() || touched.is_empty() {
        return Err(anyhow::anyhow!(
            "migration {} did not converge (still found: {}); nothing was written. Please report this as a memloop bug",
            migration.id,
            if left.is_empty() { "nothing, but no file changed".to_owned() } else { left.join("; ") }
        )
        .into());
    }
    Ok(Some(Applied {
        id: migration.id,
        about: migration.about,
        findings,
        files: touched,
    }))
}

impl<'a> Env<'a> {
    /// Tells the user about something a migration leaves alone on purpose (`note` names the
    /// file and what to do instead).
    pub fn note(&self, note: String) {
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&note) {
            notes.push(note);
        }
    }

    /// The environment of `repo` on this machine; `user_scope` allows rewriting the agents' user
    /// config outside the repository (also when consent was given before).
    pub fn new(
        repo: &'a Repo,
        user_scope: bool,
        installed: &'a dyn Fn(Product) -> Option<Installed>,
    ) -> anyhow::Result<Env<'a>> {
        let ctx = repo.context(user_scope)?;
        Ok(Env {
            symlinks: instructions::symlinks_work(&repo.root),
            ctx,
            installed,
            notes: Default::default(),
        })
    }
}

/// The ids of the migrations that apply to `repo` on this machine (for `memloop doctor`'s
/// "upgrade available"). Reads files, writes nothing; files outside the repository are looked
/// at too, since only writing them needs consent.
pub fn pending(repo: &Repo, migrations: &[&Migration]) -> anyhow::Result<Vec<String>> {
    let installed = version::installed;
    pending_in(&Env::new(repo, true, &installed)?, migrations)
}

/// `pending` for an explicit environment.
pub fn pending_in(env: &Env, migrations: &[&Migration]) -> anyhow::Result<Vec<String>> {
    match plan(env, migrations) {
        Ok(plan) => Ok(plan
            .applied
            .iter()
            .chain(&plan.held)
            .map(|a| a.id.to_owned())
            .collect()),
        Err(PlanError::Refused(refusals)) => Err(anyhow::anyhow!(
            "{}",
            refusals
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )),
        Err(PlanError::Other(err)) => Err(err),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::engine::state::InstallState;

    /// A repository under a temp dir holding `files` (paths from the dir: `repo/...`, `home/...`),
    /// set up for Claude Code and Kimi. The agents' migration tests share it.
    pub(crate) fn world(files: &[(&str, &str)]) -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let config = Config {
            agents: vec![AgentId::Claude, AgentId::Kimi],
            ..Config::default()
        };
        let repo = Repo {
            root,
            config,
            state: InstallState::default(),
        };
        (dir, repo)
    }

    pub(crate) fn env<'a>(home: &Path, repo: &'a Repo, user_scope: bool) -> Env<'a> {
        Env {
            ctx: Context {
                root: &repo.root,
                config: &repo.config,
                server: repo.config.server().unwrap(),
                home: home.to_path_buf(),
                user_scope,
                trusted: false,
            },
            installed: &|_| None,
            symlinks: true,
            notes: Default::default(),
        }
    }

    #[test]
    fn a_rewrite_that_leaves_its_finding_is_a_bug_not_a_silent_success() {
        let (dir, repo) = world(&[]);
        let home = dir.path().join("home");
        let env = env(&home, &repo, true);
        let broken = Migration {
            id: "memloop-broken",
            agent: None,
            range: Range::Any,
            about: "finds something and changes nothing",
            detect: |_, _| Ok(vec!["always".into()]),
            rewrite: |_, _| Ok(()),
        };
        let mut files = Files::new(&repo.root, &home);
        match run_one(&env, &broken, &mut files) {
            Err(PlanError::Other(err)) => {
                assert!(err.to_string().contains("did not converge"), "{err}")
            }
            other => panic!(
                "expected a bug report, got {:?}",
                other.map(|a| a.map(|a| a.id))
            ),
        }
    }
}
