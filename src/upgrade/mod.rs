//! `memloop upgrade`'s migrations, as data: each has an id, the agent and version range it
//! applies to, a detector, and a rewrite done with the format-preserving editors (`crate::edit`).
//! They run in registry order over one in-memory view of the files (`files::Files`), so later
//! migrations see earlier rewrites; the result is a list of engine changes, applied in one
//! transaction by the command (`commands::upgrade`) or shown as diffs.

pub mod files;
pub mod memloop;

use std::path::PathBuf;

use crate::agents;
use crate::agents::claude::upgrade as claude;
use crate::agents::kimi::upgrade as kimi;
use crate::agents::opencode::upgrade as opencode;
use crate::agents::version;
use crate::config::AgentId;
use crate::engine::PlanError;
use crate::repo::{Context, Repo};
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

/// Every migration, in the order they run.
pub const MIGRATIONS: &[Migration] = &[
    memloop::CONFIG_VERSION_KEY,
    memloop::BLOCK_MARKER,
    claude::HOOK_SHAPE,
    claude::AGENTS_MD,
    opencode::PLUGIN_DIR,
    opencode::PLUGIN_VERSION,
    opencode::CONFIG_TWINS,
    opencode::V2_CONFIG,
    kimi::LEGACY_TO_CODE,
    kimi::STREAMABLE_HTTP,
    kimi::TOOL_NAMES,
];

/// What migrations may look at: the repository's settings, where the agents keep their files,
/// and which agent versions are installed.
pub struct Env<'a> {
    pub ctx: Context<'a>,
    pub kimi_code_home: PathBuf,
    pub kimi_legacy_home: PathBuf,
    pub installed: &'a dyn Fn(Product) -> Option<Installed>,
    /// Whether symlinks can be made in the repository.
    pub symlinks: bool,
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
}

/// Runs every migration that applies here. Unparsable files are refused (all of them listed),
/// never treated as empty.
pub fn plan(env: &Env) -> Result<Plan, PlanError> {
    let mut files = Files::new(env.ctx.root, &env.ctx.home);
    let mut applied = Vec::new();
    let mut held = Vec::new();
    let mut refusals = Vec::new();
    for migration in MIGRATIONS {
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
    /// The environment of `repo` on this machine; `user_scope` allows rewriting the agents' user
    /// config outside the repository (also when consent was given before).
    pub fn new(
        repo: &'a Repo,
        user_scope: bool,
        installed: &'a dyn Fn(Product) -> Option<Installed>,
    ) -> anyhow::Result<Env<'a>> {
        let ctx = repo.context(user_scope)?;
        Ok(Env {
            kimi_code_home: agents::kimi::code_home(&ctx),
            kimi_legacy_home: agents::kimi::legacy_home(&ctx),
            symlinks: agents::instructions::symlinks_work(&repo.root),
            ctx,
            installed,
        })
    }
}

/// The ids of the migrations that apply to `repo` on this machine (for `memloop doctor`'s
/// "upgrade available"). Reads files, writes nothing; files outside the repository are looked
/// at too, since only writing them needs consent.
pub fn pending(repo: &Repo) -> anyhow::Result<Vec<String>> {
    let installed = version::installed;
    pending_in(&Env::new(repo, true, &installed)?)
}

/// `pending` for an explicit environment.
pub fn pending_in(env: &Env) -> anyhow::Result<Vec<String>> {
    match plan(env) {
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
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::engine::state::InstallState;

    const LEGACY_KIMI: &str = "# mine\ndefault_model = \"k\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n";
    const FLAT_STOP: &str = "{\"hooks\": {\"Stop\": [{\"type\": \"command\", \"command\": \"memloop hook stop --agent claude\"}]}}\n";

    fn world(files: &[(&str, &str)]) -> (tempfile::TempDir, Repo) {
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

    fn env<'a>(home: &Path, repo: &'a Repo, user_scope: bool) -> Env<'a> {
        Env {
            ctx: Context {
                root: &repo.root,
                config: &repo.config,
                server: repo.config.server().unwrap(),
                home: home.to_path_buf(),
                user_scope,
            },
            kimi_code_home: home.join(".kimi-code"),
            kimi_legacy_home: home.join(".kimi"),
            installed: &|_| None,
            symlinks: true,
        }
    }

    #[test]
    fn pending_lists_what_applies_and_writes_nothing() {
        let (dir, repo) = world(&[
            ("home/.kimi/config.toml", LEGACY_KIMI),
            ("repo/.claude/settings.json", FLAT_STOP),
        ]);
        let home = dir.path().join("home");
        let ids = pending_in(&env(&home, &repo, true)).unwrap();
        assert_eq!(ids, ["claude-hook-shape", "kimi-legacy-to-code"]);
        assert_eq!(
            std::fs::read_to_string(home.join(".kimi/config.toml")).unwrap(),
            LEGACY_KIMI
        );
        assert!(!home.join(".kimi-code").exists());
    }

    #[test]
    fn pending_is_empty_when_nothing_applies() {
        let (dir, repo) = world(&[(
            "home/.kimi-code/config.toml",
            "[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n",
        )]);
        let ids = pending_in(&env(&dir.path().join("home"), &repo, true)).unwrap();
        assert!(ids.is_empty(), "{ids:?}");
    }

    #[test]
    fn user_files_without_consent_are_held_not_applied() {
        let (dir, repo) = world(&[
            ("home/.kimi/config.toml", LEGACY_KIMI),
            ("repo/.claude/settings.json", FLAT_STOP),
        ]);
        let plan = plan(&env(&dir.path().join("home"), &repo, false)).unwrap();
        let ids = |list: &[Applied]| list.iter().map(|a| a.id).collect::<Vec<_>>();
        assert_eq!(ids(&plan.applied), ["claude-hook-shape"]);
        assert_eq!(ids(&plan.held), ["kimi-legacy-to-code"]);
        let changed: Vec<String> = plan
            .files
            .changes()
            .into_iter()
            .map(|(c, _, _)| c.target.display)
            .collect();
        assert_eq!(changed, [".claude/settings.json"]);
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

    #[test]
    fn an_unparsable_file_is_refused_with_its_position() {
        let (dir, repo) = world(&[("home/.kimi/config.toml", "[[hooks]\nevent = 1\n")]);
        let err = pending_in(&env(&dir.path().join("home"), &repo, true)).unwrap_err();
        assert!(
            err.to_string().starts_with("~/.kimi/config.toml:1:"),
            "{err}"
        );
    }

    #[test]
    fn ids_are_unique_and_named_after_their_agent() {
        let mut ids: Vec<&str> = MIGRATIONS.iter().map(|m| m.id).collect();
        for m in MIGRATIONS {
            let prefix = m.agent.map_or("memloop", AgentId::as_str);
            assert!(
                m.id.starts_with(prefix),
                "{} should start with {prefix}",
                m.id
            );
        }
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), before, "duplicate migration ids");
    }
}
