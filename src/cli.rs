//! Command-line surface: argument parsing and dispatch. Each command lives in its own module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "memloop", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The Stop gate the agents call (stop, record).
    Hook(crate::gate::HookArgs),
    /// The embedded memory MCP server (stdio).
    Serve(crate::serve::ServeArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Hook(args) => crate::gate::run(args),
        Command::Serve(args) => crate::serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("memloop: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
