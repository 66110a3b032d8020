//! `memloop init`: write memloop.toml (asking on a terminal, from flags otherwise), then sync.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

use super::sync::{SyncArgs, check_conflicts, sync};
use super::{Repo, interactive};
use crate::config::{self, AgentId, Config, Layout, Preset, ServerConfig};
use crate::engine::apply::Lock;
use crate::engine::state::InstallState;
use crate::engine::{Change, Content, Mode};
use crate::target::{Desired, Scope, Target};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Take the flags (and defaults) as the answers; never prompt.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Agents to set up, comma-separated: claude, opencode, kimi, codex, gemini, qwen, copilot, kilo, droid, pi.
    #[arg(long, value_delimiter = ',', value_parser = parse_agent)]
    pub agents: Vec<AgentId>,
    /// Name of the memory server in every agent's config.
    #[arg(long, default_value = "memory")]
    pub server_name: String,
    /// A remote memory server (transport http).
    #[arg(long, conflicts_with_all = ["command", "preset"])]
    pub url: Option<String>,
    /// A local memory server started by the agents (transport stdio), e.g. "npx -y my-server".
    #[arg(long, conflicts_with = "preset")]
    pub command: Option<String>,
    /// An argument of --command that contains spaces; repeatable.
    #[arg(long = "arg", requires = "command")]
    pub args: Vec<String>,
    /// A known hosted memory server.
    #[arg(long, value_enum)]
    pub preset: Option<PresetArg>,
    /// How AGENTS.md shares the rules with CLAUDE.md.
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// Allow writing the agents' user config outside the repository (Kimi's Stop hook).
    #[arg(long)]
    pub user_scope: bool,
    /// Also give this repository the per-machine approvals the agents need (`memloop trust --yes`).
    #[arg(long)]
    pub trust: bool,
    /// Print what would be written and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Overwrite an existing memloop.toml and replace a same-named server memloop did not write.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PresetArg {
    Convops,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LayoutArg {
    Symlink,
    Import,
    Copy,
}

fn parse_agent(text: &str) -> Result<AgentId, String> {
    AgentId::parse(text.trim())
        .ok_or_else(|| format!("unknown agent `{text}`: use {}", AgentId::choices()))
}

pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let root = config::find_root(&cwd).with_context(|| {
        format!("{} is not inside a git repository; run `git init` first, or run memloop init in your repository", cwd.display())
    })?;
    let config_path = root.join(config::FILE_NAME);
    if config_path.exists() && !args.force {
        if let Some(holder) = Lock::holder(&root) {
            bail!(
                "another memloop ({holder}) is working on {} right now and memloop.toml exists; \
                 let it finish, then run `memloop sync` to check the result",
                root.display()
            );
        }
        bail!(
            "{} exists already; edit it and run `memloop sync`, or run `memloop init --force` to start over",
            config_path.display()
        );
    }
    let (mut config, user_scope) = if args.yes {
        from_flags(&root, &args)?
    } else if interactive() {
        ask(&root, &args)?
    } else {
        bail!(
            "memloop init needs answers and there is no terminal to ask: pass --yes, with --agents <list> \
             (and --url, --command or --preset for a server other than the embedded one, --layout, --user-scope, --trust)"
        );
    };
    config
        .server()
        .context("the answers do not make a valid server")?;
    if !args.force && !args.yes && interactive() {
        offer_free_name(&root, &mut config, user_scope)?;
    }
    if !args.force
        && let Some(clash) = server_clash(&root, &config, user_scope)
    {
        let free = free_server_name(&root, &config, user_scope);
        let suggestion = free.map_or(String::new(), |name| format!(" (`{name}` is free)"));
        bail!(
            "{clash}\nPick another name for memloop's server with --server-name NAME{suggestion}, \
             or run again with --force to replace yours"
        );
    }
    let content = config.to_toml();
    let mut repo = Repo {
        root: root.clone(),
        config,
        state: InstallState::default(),
    };
    let sync_args = SyncArgs {
        dry_run: args.dry_run,
        user_scope,
        force: args.force,
    };
    // memloop.toml is looked at again under the lock: another init may have written it while
    // this one was asking its questions or waiting for the lock.
    let config_file = |repo: &Repo, lock: Option<&Lock>| -> anyhow::Result<Vec<Change>> {
        let before = match crate::engine::read(&config_path, config::FILE_NAME) {
            Ok(content) => content,
            Err(crate::engine::PlanError::Refused(refusals)) => bail!("{}", refusals[0]),
            Err(crate::engine::PlanError::Other(err)) => return Err(err),
        };
        if before != Content::Missing && !args.force {
            if let Some(holder) = lock.and_then(|l| l.waited_for.as_deref()) {
                bail!(
                    "another memloop ({holder}) set up {} while this one waited for it; memloop.toml exists now. \
                     Run `memloop sync` to check the result, or `memloop init --force` to start over",
                    repo.root.display()
                );
            }
            bail!(
                "{} exists already; edit it and run `memloop sync`, or run `memloop init --force` to start over",
                config_path.display()
            );
        }
        let write_path = crate::engine::place::confine(
            &repo.root,
            &config_path,
            Scope::Project,
            config::FILE_NAME,
            false,
        )
        .map_err(|refusal| anyhow::anyhow!("{refusal}"))?;
        Ok(vec![Change {
            target: Target {
                path: config_path.clone(),
                display: config::FILE_NAME.into(),
                scope: Scope::Project,
                agents: Vec::new(),
                desired: Desired::Whole {
                    content: content.clone(),
                },
                note: None,
            },
            write_path,
            before,
            after: Content::File {
                text: content.clone(),
            },
        }])
    };
    if args.dry_run {
        repo.state = InstallState::load(&root)?;
    }
    let code = sync(&mut repo, &sync_args, "init", &config_file)?;
    if code == ExitCode::SUCCESS && (!args.dry_run || args.trust) {
        let may_ask = !args.yes && interactive();
        super::trust::offer(&mut repo, args.trust, may_ask, args.dry_run)?;
    }
    if code == ExitCode::SUCCESS && !args.dry_run {
        match super::on_path::note() {
            Some(note) => println!("{note}"),
            None => println!("Next: run `memloop doctor` to check what each agent will see."),
        }
    }
    Ok(code)
}

fn from_flags(root: &Path, args: &InitArgs) -> anyhow::Result<(Config, bool)> {
    let agents = if args.agents.is_empty() {
        detected_agents(root)
    } else {
        dedup(&args.agents)
    };
    if agents.is_empty() {
        bail!(
            "no agent found on PATH or in the repository: name them with --agents claude,opencode,kimi,codex,gemini,qwen,copilot"
        );
    }
    let config = Config {
        agents,
        layout: args.layout.map_or(Layout::Symlink, layout),
        server: server_from_flags(args)?,
        ..Config::default()
    };
    Ok((config, args.user_scope))
}

fn server_from_flags(args: &InitArgs) -> anyhow::Result<ServerConfig> {
    let mut server = ServerConfig {
        name: args.server_name.clone(),
        ..ServerConfig::default()
    };
    if args.preset.is_some() {
        server.preset = Some(Preset::Convops);
        if args.server_name == "memory" {
            server.name = "convops".into();
        }
    } else if let Some(url) = &args.url {
        server.url = Some(url.clone());
    } else if let Some(command) = &args.command {
        let mut words = command.split_whitespace().map(str::to_owned);
        server.command = Some(
            words
                .next()
                .context("--command is empty: give the program to start")?,
        );
        server.args = words.chain(args.args.iter().cloned()).collect();
    }
    Ok(server)
}

/// Why sync would refuse `config`: a same-named entry memloop did not write (in the agents' MCP
/// files, that is a server the user already has under that name). `None` when nothing clashes,
/// and when the plan fails for another reason, which sync then reports.
fn server_clash(root: &Path, config: &Config, user_scope: bool) -> Option<String> {
    let repo = Repo {
        root: root.to_path_buf(),
        config: config.clone(),
        state: InstallState::load(root).ok()?,
    };
    let (changes, _) = repo.plan(Mode::Install, user_scope).ok()?;
    let err = check_conflicts(&repo, &changes).err()?;
    // Sync's hint names memloop.toml, which init has not written yet; init gives its own.
    let text = format!("{err:#}");
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| !line.starts_with("Rename the server in memloop.toml"))
        .collect();
    Some(kept.join("\n"))
}

/// On a terminal: while the server name clashes with a server the user already has, say so and
/// ask again, offering a free name.
fn offer_free_name(root: &Path, config: &mut Config, user_scope: bool) -> anyhow::Result<()> {
    while let Some(clash) = server_clash(root, config, user_scope) {
        let Some(free) = free_server_name(root, config, user_scope) else {
            return Ok(());
        };
        eprintln!("{clash}");
        config.server.name = dialoguer::Input::new()
            .with_prompt(format!(
                "`{}` is taken by a server memloop did not write; name memloop's server",
                config.server.name
            ))
            .default(free)
            .validate_with(|name: &String| valid_server_name(name))
            .interact_text()?;
    }
    Ok(())
}

fn valid_server_name(name: &str) -> Result<(), &'static str> {
    match !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        true => Ok(()),
        false => Err("use only letters, digits, '-' and '_'"),
    }
}

/// The first of a few names for memloop's server that clashes with nothing in the repository.
fn free_server_name(root: &Path, config: &Config, user_scope: bool) -> Option<String> {
    let base = config.server.name.as_str();
    let candidates = ["memloop".to_owned()]
        .into_iter()
        .chain((2..10).map(|n| format!("{base}-{n}")));
    candidates.into_iter().find(|name| {
        let mut renamed = config.clone();
        renamed.server.name = name.clone();
        name != base && server_clash(root, &renamed, user_scope).is_none()
    })
}

fn layout(arg: LayoutArg) -> Layout {
    match arg {
        LayoutArg::Symlink => Layout::Symlink,
        LayoutArg::Import => Layout::Import,
        LayoutArg::Copy => Layout::Copy,
    }
}

fn dedup(agents: &[AgentId]) -> Vec<AgentId> {
    let mut out: Vec<AgentId> = agents.to_vec();
    out.sort();
    out.dedup();
    out
}

/// Agents installed on this machine or already configured in the repository.
pub fn detected_agents(root: &Path) -> Vec<AgentId> {
    AgentId::ALL
        .into_iter()
        .filter(|agent| {
            which::which(agent.as_str()).is_ok() || crate::agents::of(*agent).configured_in(root)
        })
        .collect()
}

fn ask(root: &Path, args: &InitArgs) -> anyhow::Result<(Config, bool)> {
    use dialoguer::{Input, MultiSelect, Select};

    // What is installed or configured here is preselected, as `--yes` would take it; with
    // nothing found nothing is guessed (`--yes` refuses then), the person picks.
    let preselected = if args.agents.is_empty() {
        detected_agents(root)
    } else {
        args.agents.clone()
    };
    if preselected.is_empty() {
        eprintln!("No agent was found on PATH or in this repository: pick the ones you use.");
    }
    let names: Vec<&str> = AgentId::ALL.iter().map(|a| a.name()).collect();
    let defaults: Vec<bool> = AgentId::ALL
        .iter()
        .map(|a| preselected.contains(a))
        .collect();
    let agents: Vec<AgentId> = loop {
        let picked = MultiSelect::new()
            .with_prompt("Which agents should use the memory loop? (space toggles, enter accepts)")
            .items(&names)
            .defaults(&defaults)
            .interact()?;
        if !picked.is_empty() {
            break picked.into_iter().map(|i| AgentId::ALL[i]).collect();
        }
        eprintln!("No agent picked: toggle at least one with space, then press enter.");
    };

    let choices = [
        "embedded (memloop serve: notes in .memloop/, no account)",
        "a URL (remote, http)",
        "a command (local, stdio)",
        "ConvOps (https://mcp.convops.app/)",
    ];
    let choice = Select::new()
        .with_prompt("Which memory server?")
        .items(choices)
        .default(0)
        .interact()?;
    let mut server = ServerConfig::default();
    match choice {
        1 => {
            let url: String = Input::new()
                .with_prompt("URL")
                .validate_with(|url: &String| {
                    match url.starts_with("https://") || url.starts_with("http://") {
                        true => Ok(()),
                        false => Err("give an http:// or https:// URL"),
                    }
                })
                .interact_text()?;
            server.url = Some(url);
        }
        2 => {
            let line: String = Input::new().with_prompt("Command").interact_text()?;
            let mut words = line.split_whitespace().map(str::to_owned);
            server.command = words.next();
            server.args = words.collect();
        }
        3 => server.preset = Some(Preset::Convops),
        _ => {}
    }
    let default_name = if choice == 3 && args.server_name == "memory" {
        "convops".to_owned()
    } else {
        args.server_name.clone()
    };
    server.name = Input::new()
        .with_prompt("Server name (in every agent's config)")
        .default(default_name)
        .validate_with(|name: &String| valid_server_name(name))
        .interact_text()?;

    let layouts = [
        "symlink: AGENTS.md links to CLAUDE.md",
        "import: AGENTS.md holds the rules, CLAUDE.md imports it",
        "copy: both files hold the rules",
    ];
    let layout = match Select::new()
        .with_prompt("How should AGENTS.md share the rules?")
        .items(layouts)
        .default(0)
        .interact()?
    {
        1 => Layout::Import,
        2 => Layout::Copy,
        _ => Layout::Symlink,
    };

    let questions: Vec<&str> = agents
        .iter()
        .filter_map(|id| crate::agents::of(*id).user_scope_question())
        .collect();
    // Your home folder is written only on a clear yes: Enter alone keeps to the repository.
    let user_scope = !questions.is_empty()
        && (args.user_scope
            || super::confirm(&questions.join("\n"), "Write to your home folder?", false)?);
    Ok((
        Config {
            agents,
            layout,
            server,
            ..Config::default()
        },
        user_scope,
    ))
}
