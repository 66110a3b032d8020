//! `memloop completions <shell>`: the shell completion script, generated from the CLI definition.

use std::process::ExitCode;

use clap::CommandFactory as _;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The whole command-line definition (for completions and the man page).
pub fn command() -> clap::Command {
    crate::cli::Cli::command()
}

pub fn run(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = command();
    clap_complete::generate(args.shell, &mut command, "memloop", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
