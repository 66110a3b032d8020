//! Command-line surface: argument parsing and dispatch. Each command lives in its own module.

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

/// `memloop --help`: what memloop is for, and for which agents (`tests/agent_names.rs` checks
/// that every agent of `AgentId::ALL` is named).
const LONG_ABOUT: &str = "Install, check and upgrade the cross-session memory loop of AI coding agents \
(Claude Code, OpenCode, Kimi Code, Codex CLI, Gemini CLI, Qwen Code, Copilot CLI, Kilo Code CLI, Factory Droid, Pi): rules that tell \
the agent to look up and store what it learns, the memory server it stores into, and a Stop gate \
that sends it back when it edited files and stored nothing. Start with `memloop init`.";

#[derive(Debug, Parser)]
#[command(name = "memloop", version, about, long_about = LONG_ABOUT, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write memloop.toml (asking on a terminal, from flags otherwise), then sync.
    Init(crate::commands::init::InitArgs),
    /// Make the repository match memloop.toml; idempotent.
    Sync(crate::commands::sync::SyncArgs),
    /// Show what sync would change as unified diffs; exit 1 when something would.
    Diff(crate::commands::diff::DiffArgs),
    /// Check what each agent will actually see; exit 1 on any error (a CI gate).
    Doctor(crate::commands::doctor::DoctorArgs),
    /// Migrate files written for older agent versions or by an older memloop.
    Upgrade(crate::commands::upgrade::UpgradeArgs),
    /// Remove exactly what memloop owns; nothing else changes.
    Uninstall(crate::commands::uninstall::UninstallArgs),
    /// Give this repository the per-machine approvals the enabled agents need (shown first, with consent); --revoke takes them back.
    Trust(crate::commands::trust::TrustArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// What the agents call while they run (stop, record, session-start, pre-compact).
    Hook(crate::hook::HookArgs),
    /// The embedded memory MCP server (stdio).
    Serve(crate::serve::ServeArgs),
    /// Read and correct what the agents remembered (list, search, show, forget, restore, index).
    Memory(crate::commands::memory::MemoryArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The whole command-line definition (for completions and the man page).
pub fn command() -> clap::Command {
    Cli::command()
}

pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) if is_hook(&args) => return crate::hook::usage_error(&err),
        Err(err) => err.exit(),
    };
    let hook = matches!(cli.command, Command::Hook(_));
    let result = match cli.command {
        Command::Init(args) => crate::commands::init::run(args),
        Command::Sync(args) => crate::commands::sync::run(args),
        Command::Diff(args) => crate::commands::diff::run(args),
        Command::Doctor(args) => crate::commands::doctor::run(args),
        Command::Completions(args) => {
            clap_complete::generate(
                args.shell,
                &mut command(),
                "memloop",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Trust(args) => crate::commands::trust::run(args),
        Command::Upgrade(args) => crate::commands::upgrade::run(args),
        Command::Uninstall(args) => crate::commands::uninstall::run(args),
        Command::Hook(args) => Ok(crate::hook::run(
            args,
            &crate::hook::Dialects {
                gate: &|id| crate::agents::of(id).gate(),
                start: &|id| crate::agents::of(id).session_start(),
                prompt: &|id| crate::agents::of(id).prompt(),
            },
        )),
        Command::Serve(args) => crate::serve::run(args),
        Command::Memory(args) => crate::commands::memory::run(args),
    };
    match result {
        Ok(code) => code,
        // Exit 2 under `memloop hook` would read as a block to the agent.
        Err(err) if hook => {
            eprintln!("memloop hook: {err:#}; the stop was not blocked");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("memloop: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Whether the command line is a `memloop hook ...` call, judged on the raw words so that a
/// line clap refuses is still recognised: the first word that is not an option names the
/// command (`memloop` itself takes no option with a value).
fn is_hook(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .find(|word| !word.as_encoded_bytes().starts_with(b"-"))
        .is_some_and(|word| word == "hook")
}
