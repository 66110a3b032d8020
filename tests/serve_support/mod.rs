//! Drives the real `memloop serve` binary as an MCP client would: rmcp's client over the
//! child's stdin and stdout.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

pub type Client = RunningService<RoleClient, ()>;

/// A throw-away repository: a temp dir with a `.git` folder.
pub struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join(".git")).expect("create .git");
        Repo { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn notes_dir(&self) -> PathBuf {
        self.path().join(".memloop/memory/notes")
    }

    pub fn note_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.notes_dir())
            .map(|dir| {
                dir.map(|e| e.expect("dir entry").path())
                    .filter(|p| p.extension().is_some_and(|e| e == "md"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }
}

pub fn server_command(cwd: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_memloop"));
    cmd.arg("serve").current_dir(cwd).env_remove("MEMLOOP_ROOT");
    cmd
}

/// Starts a new server process in `cwd` and completes the MCP handshake.
pub async fn connect(cwd: &Path) -> Client {
    connect_with(server_command(cwd)).await
}

pub async fn connect_with(cmd: tokio::process::Command) -> Client {
    let transport = TokioChildProcess::new(cmd).expect("spawn memloop serve");
    ().serve(transport).await.expect("MCP handshake")
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("tool arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|err| panic!("{tool}: protocol error {err}"))
}

/// The structured answer of a call that must succeed.
pub async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args).await;
    assert_eq!(
        result.is_error,
        Some(false),
        "{tool} failed: {}",
        text(&result)
    );
    let value = result
        .structured_content
        .clone()
        .expect("structured content");
    // The text block carries the same JSON, for clients that only show text to the model.
    assert_eq!(
        serde_json::from_str::<Value>(&text(&result)).unwrap(),
        value
    );
    value
}

/// The message of a call that must fail as a tool error (which the model reads).
pub async fn err(client: &Client, tool: &str, args: Value) -> String {
    let result = call(client, tool, args).await;
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} should fail: {}",
        text(&result)
    );
    text(&result)
}

pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn ids(answer: &Value, list: &str) -> Vec<String> {
    answer[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is a list in {answer}"))
        .iter()
        .map(|item| item["id"].as_str().expect("id").to_owned())
        .collect()
}

/// Closes stdin and waits for the server to exit, as a client does at the end of a session.
pub async fn close(client: Client) {
    client.cancel().await.expect("server shut down");
}
