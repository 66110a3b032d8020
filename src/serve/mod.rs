//! `memloop serve`: the embedded memory MCP server, over stdio.
//!
//! The MCP face of `crate::memory`: `protocol` (the MCP handler), `tools` with `args` (what the
//! model sees and sends) and `transport` (the JSON-RPC lines on stdin and stdout). The notes
//! themselves, their index and search are the memory's; nothing here reads a note file.

mod args;
mod protocol;
mod tools;
pub mod transport;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rmcp::ServiceExt;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Repository whose memory to serve [default: found by walking up from the working
    /// directory to the nearest memloop.toml, else .git]
    #[arg(long, value_name = "DIR", env = "MEMLOOP_ROOT")]
    pub root: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let root = crate::memory::repository(args.root, None);
    if let Err(why) = &root {
        // The client shows the server as connected either way; every tool call repeats this.
        eprintln!("memloop serve: {why}");
    }
    let server = protocol::MemoryServer::start(root);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let handler = server.clone();
    runtime.block_on(async move {
        let running = handler
            .serve(transport::LineTransport::new(
                tokio::io::stdin(),
                tokio::io::stdout(),
            ))
            .await
            .context("the MCP handshake on stdin/stdout failed")?;
        running
            .waiting()
            .await
            .context("the MCP session ended abnormally")?;
        anyhow::Ok(())
    })?;
    server.shutdown();
    Ok(ExitCode::SUCCESS)
}
