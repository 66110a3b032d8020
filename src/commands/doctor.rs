//! `memloop doctor`: what each agent will actually see, as a CI gate. Exit 0 without errors
//! (warnings too with `--strict`), 1 otherwise, 2 on a usage error.

use std::process::ExitCode;
use std::time::Duration;

use super::{Repo, use_color};
use crate::agents::{self, Agent};
use crate::doctor::{
    self, AgentStatus, Doctor, Finding, Group, Options, Report, drift, format, instructions, live,
    notes, probe, wiring,
};
use crate::engine::Mode;
use crate::engine::apply::apply;
use crate::upgrade;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorFormat {
    Text,
    Json,
    Github,
}

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Output format [default: github when GITHUB_ACTIONS=true, else text].
    #[arg(long, value_enum)]
    pub format: Option<DoctorFormat>,
    /// Warnings fail the run too.
    #[arg(long)]
    pub strict: bool,
    /// Run `memloop sync` for what sync can fix, then check again; says what it cannot fix.
    #[arg(long)]
    pub fix: bool,
    /// Also ask each installed agent's own program what it loads (such as `claude mcp get`) and
    /// probe the memory server over MCP.
    #[arg(long)]
    pub live: bool,
    /// An agent enabled in memloop.toml but not installed is an error.
    #[arg(long)]
    pub require_agents: bool,
    /// List every check in the text output, the passing ones too (JSON and GitHub always do).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Seconds each live command may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 20)]
    pub timeout: u64,
}

pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let format = args.format.unwrap_or_else(|| {
        if std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true") {
            DoctorFormat::Github
        } else {
            DoctorFormat::Text
        }
    });
    let options = Options {
        live: args.live,
        require_agents: args.require_agents,
        timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let report = match Repo::open(&crate::agents::check_server) {
        Ok(mut repo) => {
            let mut report = examine(&repo, &options);
            if args.fix {
                report = fix(&mut repo, report, &options)?;
            }
            report
        }
        Err(err) => {
            let mut report = Report::default();
            report.push(
                Finding::error(Group::Memloop, "config", format!("{err:#}"))
                    .file(crate::config::FILE_NAME)
                    .fix("run `memloop init` in the repository, or fix memloop.toml"),
            );
            report
        }
    };
    let text = match format {
        DoctorFormat::Text => format::text(&report, args.strict, use_color(), args.verbose),
        DoctorFormat::Json => format::json(&report, args.strict),
        DoctorFormat::Github => format::github(&report, args.strict),
    };
    print!("{text}");
    Ok(ExitCode::from(report.exit_code(args.strict)))
}

/// Lets sync write what it can fix, then checks again. Findings sync cannot fix stay, each with
/// its own fix.
fn fix(repo: &mut Repo, report: Report, options: &Options) -> anyhow::Result<Report> {
    if !report.findings.iter().any(|f| f.sync_fixes) {
        return Ok(Report {
            fix_ran: true,
            ..report
        });
    }
    let _lock = repo.lock()?;
    let changes = match repo.plan(Mode::Install, false) {
        Ok((changes, _)) => changes,
        // Unparsable files stay reported as they are; nothing is written.
        Err(_) => {
            return Ok(Report {
                fix_ran: true,
                ..report
            });
        }
    };
    super::sync::check_conflicts(repo, &changes)?;
    apply(&changes, &mut repo.state)?;
    repo.state.save(&repo.root)?;
    let fixed = changes
        .iter()
        .filter(|c| !c.is_noop())
        .map(|c| c.target.display.clone())
        .collect();
    let mut after = examine(repo, options);
    after.fixed = fixed;
    after.fix_ran = true;
    Ok(after)
}

/// Runs every check (and the live ones when asked) on an opened repository: the common ones,
/// then each enabled agent's own.
pub fn examine(repo: &Repo, options: &Options) -> Report {
    let mut report = Report {
        root: Some(repo.root.clone()),
        ..Report::default()
    };
    let ctx = match repo.context(true) {
        Ok(ctx) => ctx,
        Err(err) => {
            report.push(
                Finding::error(Group::Memloop, "config", format!("{err:#}"))
                    .file(crate::config::FILE_NAME)
                    .fix("fix memloop.toml"),
            );
            return report;
        }
    };
    let found = doctor::detect(&ctx);
    report.agents = found
        .iter()
        .map(|agent| AgentStatus {
            agent: agent.id.into(),
            enabled: agent.enabled,
            installed: agent.installed(),
            version: agent.version.clone(),
            path: agent.path.clone(),
        })
        .collect();
    let wanted = match agents::wanted(&ctx) {
        Ok(wanted) => wanted,
        Err(err) => {
            report.push(
                Finding::error(Group::Memloop, "plan", format!("{err:#}"))
                    .fix("fix the file named above, then run `memloop doctor` again"),
            );
            return report;
        }
    };
    let enabled: Vec<&dyn Agent> = agents::enabled(&ctx).collect();
    let mut d = Doctor {
        repo,
        ctx,
        wanted,
        agents: found,
        options,
        report,
    };
    doctor::config_summary(&mut d);
    doctor::installed(&mut d);
    drift::check(&mut d);
    instructions::check(&mut d);
    for agent in &enabled {
        agent.check_rules(&mut d);
    }
    wiring::check(&mut d);
    for agent in &enabled {
        agent.check_wiring(&mut d);
    }
    let mut mcp_files: Vec<_> = enabled.iter().flat_map(|a| a.mcp_files()).collect();
    // A file two agents share (`.mcp.json`) is scanned once.
    let mut scanned = Vec::new();
    mcp_files.retain(|file| {
        !scanned.contains(&file.name) && {
            scanned.push(file.name);
            true
        }
    });
    wiring::secrets(&mut d, &mcp_files);
    for agent in &enabled {
        agent.check(&mut d);
    }
    doctor::upgrade(&mut d, upgrade::pending(repo, &agents::migrations()));
    notes::check(&mut d);
    if options.live {
        for agent in &enabled {
            let found = d.agent(agent.id()).clone();
            match &found.path {
                Some(program) => agent.live(&mut d, program, &found),
                None => live::skipped(&mut d, agent.id()),
            }
        }
        probe::check(&mut d);
    }
    d.report
}
