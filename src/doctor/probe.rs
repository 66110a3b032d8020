//! `--live`: talk MCP to the memory server itself (`initialize`, then `tools/list`, over stdio or
//! http) and check that the tools the rules and the gate name exist.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Doctor, Finding, Group, curl};
use crate::config::{Piece, Transport, env_pieces};

const PROTOCOL: &str = "2025-06-18";

pub fn check(d: &mut Doctor) {
    let server = d.ctx.server.clone();
    let timeout = d.options.timeout;
    let result = match &server.transport {
        Transport::Stdio { command, args, env } => stdio(d, command, args, env, timeout),
        Transport::Http { url, headers } => http(url, headers, timeout),
    };
    let tools = match result {
        Ok(tools) => tools,
        Err(why) => {
            d.push(
                Finding::error(
                    Group::Memloop,
                    "server-probe",
                    format!(
                        "the memory server `{}` did not answer MCP: {why}",
                        server.name
                    ),
                )
                .fix("start the server's command by hand (or open its URL) to see why"),
            );
            return;
        }
    };
    let gate = &d.repo.config.gate;
    let mut missing = Vec::new();
    for (what, patterns) in [("store", &gate.store_tools), ("lookup", &gate.lookup_tools)] {
        if !tools
            .iter()
            .any(|tool| patterns.iter().any(|p| tool.contains(p.as_str())))
        {
            missing.push(format!(
                "no {what} tool (a name containing {})",
                patterns.join(" or ")
            ));
        }
    }
    for named in ["memory_store", "context_query"] {
        let counted = gate
            .store_tools
            .iter()
            .chain(&gate.lookup_tools)
            .any(|p| named.contains(p.as_str()));
        if counted && !tools.iter().any(|t| t == named) {
            missing.push(format!("no `{named}`"));
        }
    }
    if missing.is_empty() {
        d.push(Finding::ok(
            Group::Memloop,
            "server-probe",
            format!(
                "the memory server `{}` answers MCP with {} tools, the gate's among them",
                server.name,
                tools.len()
            ),
        ));
    } else {
        d.push(
            Finding::error(
                Group::Memloop,
                "server-probe",
                format!(
                    "the memory server `{}` offers {}, but the gate and rules need: {}",
                    server.name,
                    if tools.is_empty() { "no tools".to_owned() } else { tools.join(", ") },
                    missing.join("; ")
                ),
            )
            .fix("point [server] at a memory server with those tools, or adjust [gate] store_tools/lookup_tools"),
        );
    }
}

/// `${VAR}` expanded from this process's environment; unset variables are named in the error.
fn expand(value: &str) -> Result<String, String> {
    let pieces = env_pieces(value).ok_or_else(|| format!("{value:?} is not a valid reference"))?;
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) => out.push_str(text),
            Piece::Var(name) => out.push_str(
                &std::env::var(name)
                    .map_err(|_| format!("the environment variable {name} is not set"))?,
            ),
        }
    }
    Ok(out)
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "memloop-doctor", "version": env!("CARGO_PKG_VERSION")}
    }})
}

fn tool_names(result: &Value) -> Result<Vec<String>, String> {
    if let Some(error) = result.get("error") {
        return Err(format!("tools/list failed: {error}"));
    }
    let tools = result
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("tools/list answered without a tool list: {result}"))?;
    Ok(tools
        .iter()
        .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
        .collect())
}

fn stdio(
    d: &Doctor,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let program = which::which(command).map_err(|_| format!("`{command}` is not on PATH"))?;
    let mut cmd = Command::new(&program);
    cmd.args(args)
        .current_dir(&d.repo.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        cmd.env(key, expand(value)?);
    }
    let mut child = cmd
        .spawn()
        .map_err(|err| format!("`{command}` could not start: {err}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && tx.send(value).is_err()
            {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + timeout;
    let mut send = |value: Value| -> Result<(), String> {
        writeln!(stdin, "{value}")
            .and_then(|()| stdin.flush())
            .map_err(|err| format!("the server closed its input: {err}"))
    };
    let wait_for = |id: u64| -> Result<Value, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(value) if value.get("id") == Some(&json!(id)) => return Ok(value),
                Ok(_) => continue, // notifications and requests from the server
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer within {} s", timeout.as_secs()));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err("the server exited".into()),
            }
        }
    };
    let result = (|| {
        send(initialize(1))?;
        let init = wait_for(1)?;
        if let Some(error) = init.get("error") {
            return Err(format!("initialize failed: {error}"));
        }
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))?;
        tool_names(&wait_for(2)?)
    })();
    let _ = child.kill();
    let _ = child.wait();
    result.map_err(|why| {
        let stderr = errors.join().unwrap_or_default();
        match super::live::excerpt(&stderr, 3) {
            e if e.is_empty() => why,
            e => format!("{why}; its stderr: {e}"),
        }
    })
}

/// MCP over streamable HTTP: POST JSON-RPC (through curl, `curl.rs`), answer as JSON or as
/// server-sent events.
fn http(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let mut extra = Vec::new();
    for (name, value) in headers {
        extra.push((
            name.clone(),
            expand(value).map_err(|why| format!("header {name}: {why}"))?,
        ));
    }
    let init = curl::post(url, &extra, &initialize(1), timeout)?;
    let body = init.json(1)?;
    if let Some(error) = body.get("error") {
        return Err(format!("initialize failed: {error}"));
    }
    if let Some(session) = &init.session {
        extra.push(("Mcp-Session-Id".into(), session.clone()));
    }
    extra.push(("MCP-Protocol-Version".into(), PROTOCOL.into()));
    curl::post(
        url,
        &extra,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        timeout,
    )?;
    let list = curl::post(
        url,
        &extra,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        timeout,
    )?;
    tool_names(&list.json(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_names_are_read_from_an_event_stream_answer() {
        let response = curl::Response {
            status: 200,
            session: None,
            location: None,
            body: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"context_query\"}]}}\n\n".into(),
        };
        let answer = response.json(2).unwrap();
        assert_eq!(tool_names(&answer).unwrap(), ["context_query"]);
        assert!(response.json(1).is_err());
    }
}
