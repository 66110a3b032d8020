//! Scenario `connected-copilot-approved-tools-worktree`: as `connected-copilot-approved-tools`,
//! with memloop installed and trusted in a linked git worktree of the sandbox's repository
//! (`git worktree add`): Copilot must still run memloop's two tools without asking there, so
//! memloop's approvals must sit under the location key Copilot looks up from a linked worktree.

use anyhow::{Result, bail};

use super::Ctx;
use super::sandbox::Sandbox;

pub fn approved_tools(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    let linked = sb.root.join("linked");
    let path = linked.to_string_lossy().into_owned();
    let out = sb.run(
        "git",
        &["worktree", "add", "-q", "-b", "linked", &path],
        std::time::Duration::from_secs(30),
    )?;
    if !out.success() {
        bail!("git worktree add failed:\n{}", out.report());
    }
    println!(
        "   memloop installed in the linked worktree {}",
        linked.display()
    );
    sb.repo = linked.canonicalize()?;
    super::copilot::approved_tools(ctx, sb)
}
