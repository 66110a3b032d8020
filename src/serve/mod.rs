//! `memloop serve`: the embedded memory MCP server, over stdio.
//!
//! Rooms: `protocol` (MCP handler) and `tools` with `args` (what the model sees and sends),
//! `store` (the notes of one repository) on `record` (the file format), `search` (ranking) and
//! `files` (ids and timestamps, locking and atomic writes); `transport` reads and writes the
//! JSON-RPC lines; `session` (the index a new session starts with) and `hook`
//! (`memloop hook session-start`), which `memloop memory` shares with the server.

mod args;
mod files;
mod hook;
mod protocol;
pub mod record;
mod search;
pub mod session;
pub mod store;
mod tools;
pub mod transport;

pub use hook::{
    Event as HookEvent, PRE_COMPACT, SessionStartArgs, run as session_start_hook,
    run_event as hook_event,
};

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
    let root = repository(args.root, None);
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

/// The repository to serve: `given` (a `--root`), else the nearest one above `start` (default:
/// the working directory).
pub(crate) fn repository(
    given: Option<PathBuf>,
    start: Option<PathBuf>,
) -> Result<PathBuf, String> {
    if let Some(dir) = given {
        return match dir.canonicalize() {
            Ok(dir) if dir.is_dir() => Ok(dir),
            _ => Err(format!(
                "--root {}: not a folder; pass the repository's folder",
                dir.display()
            )),
        };
    }
    let cwd = match start {
        Some(start) => start,
        None => std::env::current_dir()
            .map_err(|err| format!("could not read the working directory: {err}"))?,
    };
    crate::config::find_root(&cwd).ok_or_else(|| {
        format!(
            "no repository above {} (looked for memloop.toml, then .git); start the server \
             inside a repository or pass --root <dir>",
            cwd.display()
        )
    })
}
