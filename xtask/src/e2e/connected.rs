//! Scenario "server connected": the agents start memloop's embedded server and talk MCP to it.

use anyhow::{Result, bail};

use super::config::expect;
use super::fake_model::{Dialect, FakeModel, Script};
use super::proc::Output;
use super::sandbox::Sandbox;
use super::{Ctx, agents, memloop};

pub fn claude(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    agents::claude(sb, true)?;
    let out = sb.run(ctx.tools.bin.join("claude"), &["mcp", "list"], ctx.timeout)?;
    expect(out.success(), "`claude mcp list` failed", &out)?;
    let line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("memory"));
    let Some(line) = line else {
        bail!("`claude mcp list` does not list `memory`\n{}", out.report());
    };
    expect(
        line.contains("Connected"),
        &format!("`claude mcp list` does not show `memory` connected: {line:?}"),
        &out,
    )?;
    expect(
        line.contains("memloop"),
        &format!("the `memory` server is not memloop serve: {line:?}"),
        &out,
    )
}

pub fn opencode(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    agents::opencode(sb, &ctx.tools, None)?;
    let out = sb.run(
        ctx.tools.bin.join("opencode"),
        &["mcp", "list"],
        ctx.timeout,
    )?;
    expect(out.success(), "`opencode mcp list` failed", &out)?;
    let text = ::memloop::doctor::live::strip_ansi(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let Some(i) = lines
        .iter()
        .position(|l| l.split_whitespace().any(|w| w == "memory"))
    else {
        bail!(
            "`opencode mcp list` does not list `memory`\n{}",
            out.report()
        );
    };
    expect(
        lines[i].contains("connected") && !lines[i].contains("failed"),
        &format!(
            "`opencode mcp list` does not show `memory` connected: {:?}",
            lines[i]
        ),
        &out,
    )?;
    let command_line = lines.get(i + 1).copied().unwrap_or("");
    expect(
        command_line.contains("memloop") && command_line.contains("serve"),
        &format!("the `memory` server is not `memloop serve`: {command_line:?}"),
        &out,
    )
}

/// Kimi has no `mcp list`: run one prompt against a fake model and look at the tools it offers.
pub fn kimi(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    ctx.caps.need_serve()?;
    memloop::install(sb, &ctx.caps, ctx.hand_written, None)?;
    let run = kimi_offers_memory(ctx, sb)?;
    expect(
        !run.out.stderr.contains("not trusted"),
        "Kimi did not trust the workspace, so it skipped the project MCP servers",
        &run.out,
    )?;
    expect(
        !run.out.stderr.contains("Ignored invalid config section"),
        "Kimi ignores a config section memloop wrote",
        &run.out,
    )?;
    if !run.offered {
        bail!(
            "Kimi offered the model no mcp__memory__memory_store ({})\n{}",
            run.report,
            run.out.report()
        );
    }
    Ok(())
}

/// What one `kimi -p` against a fake model showed about memloop's server.
pub struct KimiRun {
    /// The model was offered `mcp__memory__memory_store`.
    pub offered: bool,
    /// The tools offered and Kimi's log lines about MCP, for a failure message.
    pub report: String,
    pub out: Output,
}

/// Trusts the workspace and runs one `kimi -p` against a fake model.
pub fn kimi_offers_memory(ctx: &Ctx, sb: &mut Sandbox) -> Result<KimiRun> {
    agents::kimi_trust(sb)?;
    let fake = FakeModel::start(
        Dialect::OpenAi,
        Script {
            repo: sb.repo.clone(),
            writes: 0,
            write_tool: "Write".into(),
            store_tool: "mcp__memory__memory_store".into(),
            lookup_tool: None,
            latency: ctx.model_latency,
        },
    )?;
    agents::kimi_model_env(sb, &fake.base_url());
    let out = sb.run(
        ctx.tools.bin.join("kimi"),
        &["-p", "Say hello.", "--output-format", "stream-json"],
        ctx.timeout,
    )?;
    let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
    expect(out.success(), "`kimi -p` failed", &out)?;
    let calls = fake.model_calls();
    let Some(first) = calls.first() else {
        bail!("Kimi sent no request to the fake model\n{}", out.report());
    };
    let conv = first.conversation(Dialect::OpenAi);
    let names: Vec<&str> = conv.tools.iter().map(|t| t.name.as_str()).collect();
    let log = std::fs::read_to_string(sb.kimi_home.join("logs/kimi-code.log")).unwrap_or_default();
    let mcp: Vec<&str> = log.lines().filter(|l| l.contains("mcp")).collect();
    let report = format!(
        "tools offered: {}\nKimi's log about MCP:\n{}",
        names.join(", "),
        super::proc::tail(&mcp.join("\n"), 4000)
    );
    Ok(KimiRun {
        offered: names.contains(&"mcp__memory__memory_store"),
        report,
        out,
    })
}
