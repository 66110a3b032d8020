//! HTTP for `doctor --live`, one path for `http://` and `https://`: the `curl` program. memloop
//! links no TLS stack and no HTTP client; curl brings what a person's network needs (the system's
//! certificates, `https_proxy`/`no_proxy`, IPv6 literals, chunked and event-stream bodies).
//! Redirects are not followed: the agents post to the configured URL, so a redirect is reported
//! with its target. A loopback server is never reached through a proxy.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// One HTTP answer: its status, the MCP session it opens, where it redirects, its body.
pub struct Response {
    pub status: u16,
    pub session: Option<String>,
    pub location: Option<String>,
    pub body: String,
}

impl Response {
    /// The JSON-RPC message with `id`, from a JSON body or an event stream.
    pub fn json(&self, id: u64) -> Result<Value, String> {
        if (300..400).contains(&self.status) {
            return Err(match &self.location {
                Some(to) => format!(
                    "HTTP {}: the server redirects to {to}; the agents post to the URL in memloop.toml, so put that one there",
                    self.status
                ),
                None => format!("HTTP {}: a redirect without a Location", self.status),
            });
        }
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

/// POSTs `body` as JSON to `url` with `headers`; any status comes back as a `Response`.
pub fn post(
    url: &str,
    headers: &[(String, String)],
    body: &Value,
    timeout: Duration,
) -> Result<Response, String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{url} is not an http(s) URL"));
    }
    let curl = which::which("curl").map_err(|_| {
        "probing an http(s) server needs `curl` on PATH (memloop talks HTTP through it)".to_owned()
    })?;
    let head = tempfile::NamedTempFile::new()
        .map_err(|err| format!("cannot make a temporary file for curl: {err}"))?;
    let out = command(curl, url, headers, head.path().to_path_buf(), timeout)
        .arg("--data-binary")
        .arg(body.to_string())
        .arg("--")
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("curl could not start: {err}"))?;
    let head = crate::files::read_text(head.path()).unwrap_or_default();
    if !out.status.success() && head.trim().is_empty() {
        return Err(format!(
            "curl: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut response = parse_head(&head)?;
    response.body = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(response)
}

fn command(
    curl: PathBuf,
    url: &str,
    headers: &[(String, String)],
    head: PathBuf,
    timeout: Duration,
) -> Command {
    let mut cmd = Command::new(curl);
    cmd.args(["--silent", "--show-error", "--request", "POST"])
        .args(["--proto", "=http,https", "--max-time"])
        .arg(timeout.as_secs().max(1).to_string())
        .arg("--dump-header")
        .arg(head)
        .args(["--header", "Content-Type: application/json"])
        .args(["--header", "Accept: application/json, text/event-stream"]);
    if is_loopback(url) {
        cmd.args(["--noproxy", "*"]);
    }
    for (name, value) in headers {
        cmd.arg("--header").arg(format!("{name}: {value}"));
    }
    cmd
}

/// Whether `url`'s host is this machine (`localhost`, `127.x.x.x`, `[::1]`).
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The status and headers of the final answer in curl's header dump (which also holds a
/// proxy's `CONNECT` answer and `100 Continue` before it).
fn parse_head(dump: &str) -> Result<Response, String> {
    let last = dump
        .split("\r\n\r\n")
        .map(str::trim)
        .filter(|block| block.starts_with("HTTP/"))
        .filter(|block| {
            !block
                .split_whitespace()
                .nth(1)
                .is_some_and(|s| s.starts_with('1'))
        })
        .filter(|block| !is_connect_answer(block))
        .last()
        .ok_or("the server's answer is not HTTP")?;
    let mut lines = last.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or("the server's answer has no HTTP status")?;
    let mut response = Response {
        status,
        session: None,
        location: None,
        body: String::new(),
    };
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim().to_owned();
            match name.trim().to_ascii_lowercase().as_str() {
                "mcp-session-id" => response.session = Some(value),
                "location" => response.location = Some(value),
                _ => {}
            }
        }
    }
    Ok(response)
}

/// A proxy's answer to curl's `CONNECT` (`HTTP/1.1 200 Connection established`), not the server's.
fn is_connect_answer(block: &str) -> bool {
    let status_line = block.lines().next().unwrap_or_default();
    status_line
        .to_ascii_lowercase()
        .contains("connection established")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_answer_counts_not_a_proxys_or_a_continue() {
        let dump = "HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/2 200\r\ncontent-type: text/event-stream\r\nmcp-session-id: s1\r\n\r\n";
        let response = parse_head(dump).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.session.as_deref(), Some("s1"));
    }

    #[test]
    fn a_redirect_names_its_target() {
        let mut response = parse_head(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: https://new.example/mcp\r\n\r\n",
        )
        .unwrap();
        response.body = String::new();
        let why = response.json(1).unwrap_err();
        assert!(
            why.contains("redirects to https://new.example/mcp"),
            "{why}"
        );
    }

    #[test]
    fn loopback_hosts_are_recognised() {
        for url in [
            "http://127.0.0.1:8080/mcp",
            "http://localhost/mcp",
            "http://[::1]:9/mcp",
            "https://user@127.0.0.5/x",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://mcp.example.com/",
            "http://10.0.0.1/",
            "http://[2001:db8::1]/",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }
}
