//! `--live`: talk MCP to the memory server itself (`initialize`, then `tools/list`, over stdio or
//! http) and check that the tools the rules and the gate name exist.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Doctor, Finding, Group};
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

/// MCP over streamable HTTP: POST JSON-RPC, answer as JSON or as server-sent events.
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
    let init = post(url, &extra, &initialize(1), timeout)?;
    let body = init.json(1)?;
    if let Some(error) = body.get("error") {
        return Err(format!("initialize failed: {error}"));
    }
    if let Some(session) = &init.session {
        extra.push(("Mcp-Session-Id".into(), session.clone()));
    }
    extra.push(("MCP-Protocol-Version".into(), PROTOCOL.into()));
    post(
        url,
        &extra,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        timeout,
    )?;
    let list = post(
        url,
        &extra,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        timeout,
    )?;
    tool_names(&list.json(2)?)
}

struct Response {
    status: u16,
    session: Option<String>,
    body: String,
}

impl Response {
    /// The JSON-RPC message with `id`, from a JSON body or an event stream.
    fn json(&self, id: u64) -> Result<Value, String> {
        if !(200..300).contains(&self.status) {
            return Err(format!(
                "HTTP {}: {}",
                self.status,
                super::live::excerpt(&self.body, 2)
            ));
        }
        let candidates = std::iter::once(self.body.trim().to_owned()).chain(
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|l| l.trim().to_owned()),
        );
        candidates
            .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
            .find(|v| v.get("id") == Some(&json!(id)))
            .ok_or_else(|| {
                format!(
                    "no JSON-RPC answer in the response: {}",
                    super::live::excerpt(&self.body, 2)
                )
            })
    }
}

fn post(
    url: &str,
    headers: &[(String, String)],
    body: &Value,
    timeout: Duration,
) -> Result<Response, String> {
    let body = body.to_string();
    let raw = if let Some(rest) = url.strip_prefix("http://") {
        plain_http(rest, headers, &body, timeout)?
    } else if url.starts_with("https://") {
        curl(url, headers, &body, timeout)?
    } else {
        return Err(format!("{url} is not an http(s) URL"));
    };
    parse_response(&raw, url.starts_with("http://"))
}

/// HTTP/1.1 over a plain TCP connection (no TLS), closed after one exchange.
fn plain_http(
    rest: &str,
    headers: &[(String, String)],
    body: &str,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let address = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addrs: Vec<_> = std::net::ToSocketAddrs::to_socket_addrs(&address)
        .map_err(|err| format!("cannot resolve {authority}: {err}"))?
        .collect();
    let addr = addrs
        .first()
        .ok_or_else(|| format!("{authority} has no address"))?;
    let mut stream = TcpStream::connect_timeout(addr, timeout)
        .map_err(|err| format!("cannot connect to {authority}: {err}"))?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream.set_write_timeout(Some(timeout)).ok();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream
        .write_all(request.as_bytes())
        .map_err(|err| format!("cannot send to {authority}: {err}"))?;
    let mut raw = Vec::new();
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            // An event stream may stay open after the answer: what arrived is parsed.
            Err(_) if !raw.is_empty() => break,
            Err(err) => return Err(format!("no answer from {authority}: {err}")),
        }
        if Instant::now() > deadline {
            break;
        }
    }
    Ok(raw)
}

/// HTTPS through the `curl` program (memloop links no TLS stack).
fn curl(
    url: &str,
    headers: &[(String, String)],
    body: &str,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let curl = which::which("curl")
        .map_err(|_| "probing an https server needs `curl` on PATH".to_owned())?;
    let mut cmd = Command::new(curl);
    cmd.args([
        "-sS",
        "-i",
        "-X",
        "POST",
        "--max-time",
        &timeout.as_secs().max(1).to_string(),
    ])
    .args([
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json, text/event-stream",
    ]);
    for (name, value) in headers {
        cmd.arg("-H").arg(format!("{name}: {value}"));
    }
    let out = cmd
        .args(["--data-binary", body, url])
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("curl could not start: {err}"))?;
    if out.stdout.is_empty() {
        return Err(format!(
            "curl: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

fn parse_response(raw: &[u8], dechunk: bool) -> Result<Response, String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the server's answer is not HTTP")?;
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("the server's answer has no HTTP status")?;
    let mut session = None;
    let mut chunked = false;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "mcp-session-id" {
                session = Some(value.trim().to_owned());
            }
            if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
    }
    let body = if chunked && dechunk {
        dechunked(body)
    } else {
        body.to_owned()
    };
    Ok(Response {
        status,
        session,
        body,
    })
}

fn dechunked(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
        else {
            break;
        };
        if size == 0 || after.len() < size {
            out.push_str(&after[..size.min(after.len())]);
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_stream_and_chunked_bodies_are_read() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: s1\r\nTransfer-Encoding: chunked\r\n\r\n2e\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1}\n\n\r\n0\r\n\r\n";
        let response = parse_response(raw, true).unwrap();
        assert_eq!(response.session.as_deref(), Some("s1"));
        assert_eq!(response.json(1).unwrap()["id"], 1);
        assert!(response.json(2).is_err());
    }
}
