//! Just enough HTTP/1.1 (std only) for the fake model servers and for driving `opencode serve`.
//! Every exchange is one request per connection (`Connection: close`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// Serves every connection to `listener` on its own thread with `handle`, in the background; a
/// failed exchange is reported on stderr under `label`.
pub fn serve_each<F>(listener: TcpListener, label: &'static str, handle: F)
where
    F: Fn(TcpStream) -> Result<()> + Send + Sync + 'static,
{
    let handle = std::sync::Arc::new(handle);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let handle = handle.clone();
            std::thread::spawn(move || {
                if let Err(err) = handle(stream) {
                    eprintln!("      {label}: {err:#}");
                }
            });
        }
    });
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub body: Vec<u8>,
}

impl Request {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// Read one request (Content-Length or chunked body).
pub fn read_request(stream: &TcpStream) -> Result<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().context("empty request line")?.to_string();
    let target = parts
        .next()
        .context("request line without a target")?
        .to_string();
    let (_headers, body) = read_headers_and_body(&mut reader)?;
    Ok(Request {
        method,
        target,
        body,
    })
}

type Headers = Vec<(String, String)>;

fn read_headers_and_body(reader: &mut impl BufRead) -> Result<(Headers, Vec<u8>)> {
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .context("bad chunk size")?;
            if size == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; size];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk);
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else if let Some(len) = get("content-length") {
        let len: usize = len.parse().context("bad content-length")?;
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    }
    Ok((headers, body))
}

pub fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Status",
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()?;
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

/// Send a whole server-sent-event stream, then close.
pub fn respond_sse(stream: &mut TcpStream, events: &[String]) -> Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )?;
    for event in events {
        stream.write_all(event.as_bytes())?;
        stream.flush()?;
    }
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

pub struct Response {
    pub status: u16,
    pub body: String,
}

/// A loopback HTTP client call (`Connection: close`; chunked or sized responses).
pub fn call(
    port: u16,
    method: &str,
    target: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<Response> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("connecting to 127.0.0.1:{port}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()?;
    let mut reader = BufReader::new(&stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| {
            format!("bad status line from 127.0.0.1:{port}{target}: {status_line:?}")
        })?;
    let (headers, mut body) = read_headers_and_body(&mut reader)?;
    let sized = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("content-length")
            || (k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"))
    });
    if !sized {
        reader.read_to_end(&mut body)?;
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// `call` that insists on a 2xx answer with a JSON body.
pub fn call_json(
    port: u16,
    method: &str,
    target: &str,
    body: Option<&serde_json::Value>,
) -> Result<serde_json::Value> {
    let text = body.map(|b| b.to_string());
    let resp = call(
        port,
        method,
        target,
        text.as_deref(),
        Duration::from_secs(30),
    )?;
    if !(200..300).contains(&resp.status) {
        bail!("{method} {target} answered {}: {}", resp.status, resp.body);
    }
    if resp.body.trim().is_empty() {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_str(&resp.body)
        .with_context(|| format!("{method} {target} answered non-JSON: {}", resp.body))
}
