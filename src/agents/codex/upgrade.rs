//! Codex's migrations. Facts: xtask/src/e2e/codex_facts.md section 6.
//!
//! - `codex-hooks-feature`: `[features] codex_hooks` in the user's `$CODEX_HOME/config.toml`
//!   is the old name of `hooks` (renamed in 0.129, openai/codex PR #20522); 0.171.0 still honours
//!   it but prints a deprecation error item on every run. From 0.129 on it becomes `hooks`,
//!   value and comments kept; where both are set, `hooks` already wins and the old key goes.

use std::path::PathBuf;

use super::codex_home;
use crate::config::AgentId;
use crate::engine::PlanError;
use crate::upgrade::{Env, Files, Migration};
use crate::version::{Product, Range, Version};

/// Codex's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[HOOKS_FEATURE];

pub const HOOKS_FEATURE: Migration = Migration {
    id: "codex-hooks-feature",
    agent: Some(AgentId::Codex),
    range: Range::Versions {
        product: Product::Codex,
        min: Version(0, 129, 0),
        below: None,
        if_missing: true,
    },
    about: "[features] codex_hooks (the old name, deprecated since Codex 0.129) becomes hooks",
    detect: feature_detect,
    rewrite: feature_rewrite,
};

fn user_config(env: &Env) -> PathBuf {
    codex_home(&env.ctx.home).join("config.toml")
}

fn features() -> Vec<String> {
    vec!["features".into()]
}

fn feature_detect(env: &Env, files: &mut Files) -> Result<Vec<String>, PlanError> {
    let path = user_config(env);
    let Some((doc, _)) = files.toml(&path)? else {
        return Ok(Vec::new());
    };
    let old = doc
        .table_at(&features())
        .is_some_and(|t| t.contains_key("codex_hooks"));
    Ok(if old {
        vec![format!(
            "{}: [features] codex_hooks is the old name of hooks; Codex warns on every run",
            files.display(&path)
        )]
    } else {
        Vec::new()
    })
}

fn feature_rewrite(env: &Env, files: &mut Files) -> Result<(), PlanError> {
    let path = user_config(env);
    let Some((mut doc, encoding)) = files.toml(&path)? else {
        return Ok(());
    };
    if doc.rename_key(&features(), "codex_hooks", "hooks") {
        files.write_text(&path, &doc.to_text(), encoding)?;
    }
    Ok(())
}
