//! The stdio transport: newline-delimited JSON-RPC, one message a line, each line bounded.
//!
//! rmcp's own stdio transport drops a line past its bound and a line that is not JSON without a
//! word, which leaves the client waiting on its request until it times out. This one answers
//! every request it cannot hand on: an oversize line with Invalid Request (-32600, the request's
//! id recovered from the line's first or last bytes when it is there), a line that is not JSON
//! with Parse error (-32700), and JSON that is no message with Invalid Request. Notifications and
//! responses are never answered, as JSON-RPC requires.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ErrorData, JsonRpcError, JsonRpcMessage, NumberOrString, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;

/// The longest request line served. Requests are small (a note is at most 4,000 characters);
/// this bounds the memory one line can take.
pub const MAX_LINE: usize = 4 << 20;
/// How much of an oversize line's start and end is kept to find its id in.
const ID_WINDOW: usize = 4096;

/// What one complete line (without its newline) amounts to.
#[derive(Debug)]
pub enum Incoming {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// The line cannot be handed on; this error goes back to the client.
    Reply(Box<TxJsonRpcMessage<RoleServer>>),
    /// Nothing to do: a blank line, or a notification or response that fits no message.
    Skip,
}

/// Classifies one request line (the bytes between two newlines).
pub fn classify(line: &[u8]) -> Incoming {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Incoming::Skip;
    }
    let problem = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Incoming::Message(Box::new(message)),
        Err(problem) => problem,
    };
    let reply = |error: ErrorData, id: Option<RequestId>| {
        Incoming::Reply(Box::new(TxJsonRpcMessage::<RoleServer>::error(error, id)))
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(syntax) => {
            return reply(
                ErrorData::parse_error(
                    format!(
                        "the request line is not JSON ({syntax}); send one JSON-RPC message a line"
                    ),
                    None,
                ),
                None,
            );
        }
    };
    let Value::Object(fields) = &value else {
        let what = if value.is_array() {
            "a batch (array); send one JSON-RPC message a line"
        } else {
            "not a JSON-RPC message (an object)"
        };
        return reply(
            ErrorData::invalid_request(format!("the request line is {what}"), None),
            None,
        );
    };
    let id = fields.get("id").and_then(request_id);
    let is_request = fields.contains_key("method") && fields.contains_key("id");
    if !is_request {
        return Incoming::Skip;
    }
    let method = fields.get("method").and_then(Value::as_str);
    let wrong = if fields.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        "\"jsonrpc\" must be \"2.0\"".to_owned()
    } else if id.is_none() {
        "\"id\" must be an integer or a string".to_owned()
    } else if method.is_none() {
        "\"method\" must be a string".to_owned()
    } else if fields
        .get("params")
        .is_some_and(|params| !params.is_object() && !params.is_array())
    {
        "\"params\" must be an object".to_owned()
    } else {
        // A well-formed request whose params do not fit its method.
        let method = method.unwrap_or_default();
        return reply(
            ErrorData::invalid_params(
                format!("{method}: params must be an object that fits {method} ({problem})"),
                None,
            ),
            id,
        );
    };
    reply(
        ErrorData::invalid_request(format!("not a JSON-RPC 2.0 request: {wrong}"), None),
        id,
    )
}

/// The answer to a line longer than [`MAX_LINE`]: `head` and `tail` are its first and last
/// bytes (at most [`ID_WINDOW`] each), `len` its whole length.
pub fn oversize(head: &[u8], tail: &[u8], len: u64) -> TxJsonRpcMessage<RoleServer> {
    let id = id_in_head(head).or_else(|| id_in_tail(tail));
    TxJsonRpcMessage::<RoleServer>::error(
        ErrorData::invalid_request(
            format!(
                "the request line is {len} bytes, over memloop serve's limit of {MAX_LINE}; it \
                 was dropped: send smaller arguments"
            ),
            Some(json!({"bytes": len, "limit": MAX_LINE})),
        ),
        id,
    )
}

fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(number) => number.as_i64().map(NumberOrString::Number),
        Value::String(text) => Some(NumberOrString::String(text.as_str().into())),
        _ => None,
    }
}

/// The `id` member of the top-level object, read from the line's first bytes (serializers
/// that write `jsonrpc` and `id` first).
pub fn id_in_head(head: &[u8]) -> Option<RequestId> {
    let mut found = None;
    let mut depth = 0usize;
    let mut at = 0;
    let mut expect_key = false;
    while at < head.len() {
        match head[at] {
            b'{' => {
                depth += 1;
                expect_key = depth == 1;
                at += 1;
            }
            b'[' => {
                depth += 1;
                at += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                at += 1;
            }
            b',' => {
                expect_key = depth == 1;
                at += 1;
            }
            b'"' => {
                // The window may end inside a string.
                let Some(end) = string_end(head, at) else {
                    return found;
                };
                if expect_key && depth == 1 && &head[at..=end] == b"\"id\"" {
                    // A second top-level id makes the line ambiguous: no id.
                    if found.is_some() {
                        return None;
                    }
                    let rest = skip_space(head, end + 1);
                    if head.get(rest) != Some(&b':') {
                        return None;
                    }
                    let (id, value_end) = scalar_at(head, skip_space(head, rest + 1))?;
                    // A number running into the end of the window may be cut short.
                    if value_end >= head.len() {
                        return None;
                    }
                    found = Some(id);
                    expect_key = false;
                    at = value_end;
                    continue;
                }
                expect_key = false;
                at = end + 1;
            }
            _ => at += 1,
        }
    }
    found
}

/// The `id` member when it is the last one of the top-level object (serializers that append
/// it): the line ends in `"id": <number or string> }`.
pub fn id_in_tail(tail: &[u8]) -> Option<RequestId> {
    let mut end = trim_end(tail, tail.len());
    if end == 0 || tail[end - 1] != b'}' {
        return None;
    }
    end = trim_end(tail, end - 1);
    let start = if end > 0 && tail[end - 1] == b'"' {
        opening_quote(tail, end - 1)?
    } else {
        let digits = tail[..end]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit() || **b == b'-')
            .count();
        end.checked_sub(digits).filter(|_| digits > 0)?
    };
    let (value, _) = scalar_at(&tail[..end], start)?;
    let colon = trim_end(tail, start);
    if colon == 0 || tail[colon - 1] != b':' {
        return None;
    }
    let key_end = trim_end(tail, colon - 1);
    if key_end < 4 || &tail[key_end - 4..key_end] != b"\"id\"" || escaped(tail, key_end - 4) {
        return None;
    }
    let before = trim_end(tail, key_end - 4);
    (before > 0 && matches!(tail[before - 1], b',' | b'{')).then_some(value)
}

/// A number or string starting at `at`, and where it ends.
fn scalar_at(text: &[u8], at: usize) -> Option<(RequestId, usize)> {
    let end = match text.get(at)? {
        b'"' => string_end(text, at)? + 1,
        b'-' | b'0'..=b'9' => {
            at + text[at..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'-')
                .count()
        }
        _ => return None,
    };
    let id = request_id(&serde_json::from_slice(&text[at..end]).ok()?)?;
    Some((id, end))
}

/// The index of the quote closing the string that opens at `open`.
fn string_end(text: &[u8], open: usize) -> Option<usize> {
    let mut at = open + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// The index of the unescaped quote opening the string whose closing quote is at `close`.
fn opening_quote(text: &[u8], close: usize) -> Option<usize> {
    (0..close)
        .rev()
        .find(|&at| text[at] == b'"' && !escaped(text, at))
}

/// Whether the byte at `at` is preceded by an odd number of backslashes.
fn escaped(text: &[u8], at: usize) -> bool {
    text[..at].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 1
}

fn skip_space(text: &[u8], at: usize) -> usize {
    at + text[at.min(text.len())..]
        .iter()
        .take_while(|b| b.is_ascii_whitespace())
        .count()
}

fn trim_end(text: &[u8], end: usize) -> usize {
    end - text[..end]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_whitespace())
        .count()
}

/// An oversize line being skipped up to its newline.
struct Oversize {
    head: Vec<u8>,
    tail: Vec<u8>,
    len: u64,
}

impl Oversize {
    fn absorb(&mut self, chunk: &[u8]) {
        self.len += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        let excess = self.tail.len().saturating_sub(ID_WINDOW);
        self.tail.drain(..excess);
    }
}

/// Messages go out through one buffer: a write cancelled half-way (the service polls
/// `receive` inside a `select!`) leaves its rest queued in order, never interleaved.
struct Writer<W> {
    out: W,
    queued: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    fn queue(&mut self, message: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<()> {
        match message {
            // JSON-RPC wants `"id": null` on an error to a request whose id is unknown; rmcp
            // leaves the member out.
            JsonRpcMessage::Error(JsonRpcError {
                id: None, error, ..
            }) => serde_json::to_writer(
                &mut self.queued,
                &json!({"jsonrpc": "2.0", "id": null, "error": error}),
            )?,
            _ => serde_json::to_writer(&mut self.queued, message)?,
        }
        self.queued.push(b'\n');
        Ok(())
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        while !self.queued.is_empty() {
            let written = self.out.write(&self.queued).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.queued.drain(..written);
        }
        self.out.flush().await
    }
}

pub struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    oversize: Option<Oversize>,
    write: Arc<Mutex<Writer<W>>>,
    /// Answers `receive` made itself, not yet written. They wait here rather than in a local:
    /// the service polls `receive` inside a `select!`, and an answer held across an `.await`
    /// that gets cancelled would be lost, leaving its request unanswered.
    unsent: Vec<TxJsonRpcMessage<RoleServer>>,
    /// Answers taken from `unsent` into the writer and not yet flushed.
    replies_pending: bool,
    /// Requests handed to the server and not answered yet: at the end of input the transport
    /// waits for their answers, since the server stops its handlers once `receive` ends.
    in_flight: Arc<InFlight>,
}

#[derive(Default)]
struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    answered: tokio::sync::Notify,
}

/// How long the end of input waits for the answers still being worked out.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<R, W> {
    pub fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            oversize: None,
            write: Arc::new(Mutex::new(Writer {
                out: write,
                queued: Vec::new(),
            })),
            unsent: Vec::new(),
            replies_pending: false,
            in_flight: Arc::default(),
        }
    }

    /// Waits (at most `DRAIN`) until every request handed to the server has been answered.
    async fn drain(in_flight: Arc<InFlight>) {
        use std::sync::atomic::Ordering;
        let _ = tokio::time::timeout(DRAIN, async {
            loop {
                let answered = in_flight.answered.notified();
                if in_flight.count.load(Ordering::Acquire) == 0 {
                    return;
                }
                answered.await;
            }
        })
        .await;
    }

    /// Keeps an answer to write before the next line is read.
    fn reply(&mut self, message: TxJsonRpcMessage<RoleServer>) {
        self.unsent.push(message);
    }

    /// Writes the answers kept by [`Self::reply`]. Cancel-safe: an answer leaves `unsent` only
    /// into the writer's queue, under its lock, with no `.await` in between.
    async fn write_replies(&mut self) -> std::io::Result<()> {
        if self.unsent.is_empty() && !self.replies_pending {
            return Ok(());
        }
        let mut write = self.write.lock().await;
        for message in self.unsent.drain(..) {
            write.queue(&message)?;
        }
        self.replies_pending = true;
        write.flush().await?;
        self.replies_pending = false;
        Ok(())
    }

    /// The next complete line in `self.line`, `None` at the end of input. An oversize line is
    /// answered and skipped here. Cancel-safe: progress lives on `self`.
    async fn next_line(&mut self) -> Option<()> {
        loop {
            self.write_replies().await.ok()?;
            let available = self.read.fill_buf().await.ok()?;
            if available.is_empty() {
                // A last line without its newline is still a line.
                if let Some(skipped) = self.oversize.take() {
                    self.reply(oversize(&skipped.head, &skipped.tail, skipped.len));
                    continue;
                }
                if !self.line.is_empty() {
                    return Some(());
                }
                return None;
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            let chunk = &available[..newline.unwrap_or(take)];
            let finished = match &mut self.oversize {
                Some(oversize) => {
                    oversize.absorb(chunk);
                    newline.is_some()
                }
                None => {
                    self.line.extend_from_slice(chunk);
                    if self.line.len() > MAX_LINE {
                        let mut oversize = Oversize {
                            head: self.line[..ID_WINDOW].to_vec(),
                            tail: Vec::new(),
                            len: 0,
                        };
                        oversize.absorb(&self.line);
                        self.line = Vec::new();
                        self.oversize = Some(oversize);
                    }
                    newline.is_some()
                }
            };
            self.read.consume(take);
            if !finished {
                continue;
            }
            match self.oversize.take() {
                Some(skipped) => self.reply(oversize(&skipped.head, &skipped.tail, skipped.len)),
                None => return Some(()),
            }
        }
    }
}

impl<R, W> rmcp::transport::Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let in_flight = self.in_flight.clone();
        let answers = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        async move {
            let mut write = write.lock().await;
            write.queue(&item)?;
            let flushed = write.flush().await;
            if answers {
                let _ = in_flight.count.fetch_update(
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                    |n| n.checked_sub(1),
                );
                in_flight.answered.notify_waiters();
            }
            flushed
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.next_line().await.is_none() {
                Self::drain(self.in_flight.clone()).await;
                return None;
            }
            let incoming = classify(&self.line);
            self.line.clear();
            match incoming {
                Incoming::Message(message) => {
                    if matches!(*message, JsonRpcMessage::Request(_)) {
                        self.in_flight
                            .count
                            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    }
                    return Some(*message);
                }
                Incoming::Reply(answer) => self.reply(*answer),
                Incoming::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> Option<RequestId> {
        Some(NumberOrString::Number(n))
    }

    #[test]
    fn the_id_is_found_at_the_start_or_the_end() {
        assert_eq!(
            id_in_head(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"aaaa"#),
            id(7)
        );
        assert_eq!(
            id_in_head(br#"{ "jsonrpc" : "2.0", "id" : "r-1", "params""#),
            Some(NumberOrString::String("r-1".into()))
        );
        assert_eq!(id_in_tail(br#"aaaa"}},"jsonrpc":"2.0","id":12}"#), id(12));
        assert_eq!(
            id_in_tail(br#"aaaa"}} , "id" : "x\"y" } "#),
            Some(NumberOrString::String("x\"y".into()))
        );
    }

    #[test]
    fn an_id_that_is_not_the_top_levels_is_not_taken() {
        // Nested objects' ids, ids inside strings, ids cut off by the window.
        assert_eq!(id_in_head(br#"{"params":{"id":3},"method":"x"#), None);
        assert_eq!(id_in_head(br#"{"method":"\"id\":4","#), None);
        assert_eq!(id_in_head(br#"{"jsonrpc":"2.0","id":12"#), None);
        // Found by `cargo xtask fuzz`: a repeated id is ambiguous.
        assert_eq!(id_in_head(br#"{"id":1,"method":"x","id":3}"#), None);
        assert_eq!(id_in_tail(br#"{"params":{"id":3}}"#), None);
        assert_eq!(id_in_tail(br#""q":"a,\"id\":5}"}"#), None);
        assert_eq!(id_in_tail(br#"aaa\"id":5}"#), None);
        assert_eq!(id_in_tail(br#"id":5}"#), None);
        assert_eq!(id_in_tail(br#"}"#), None);
        assert_eq!(id_in_tail(b""), None);
    }

    #[test]
    fn lines_that_are_no_message_are_answered_unless_they_are_notifications() {
        let error = |line: &[u8]| match classify(line) {
            Incoming::Reply(reply) => serde_json::to_value(&reply).unwrap(),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
        };
        assert_eq!(error(b"{not json")["error"]["code"], -32700);
        assert_eq!(error(b"\xff\xfe")["error"]["code"], -32700);
        assert_eq!(error(b"[]")["error"]["code"], -32600);
        assert_eq!(error(b"5")["error"]["code"], -32600);
        let answer = error(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"zz"}"#);
        assert_eq!(answer["error"]["code"], -32600);
        assert_eq!(answer["id"], 5);
        let answer = error(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":[1]}"#);
        assert_eq!(answer["error"]["code"], -32602);
        assert_eq!(answer["id"], "a");
        for (line, says) in [
            (
                &br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#[..],
                "jsonrpc",
            ),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, "id"),
            (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, "method"),
        ] {
            let answer = error(line);
            assert_eq!(answer["error"]["code"], -32600);
            assert!(answer["error"]["message"].as_str().unwrap().contains(says));
        }
        for quiet in [
            &b""[..],
            b"  \r",
            br#"{"jsonrpc":"2.0","method":"notifications/bogus","params":7}"#,
            br#"{"jsonrpc":"2.0","id":9,"error":"not an error object"}"#,
        ] {
            assert!(matches!(classify(quiet), Incoming::Skip), "{quiet:?}");
        }
        assert!(matches!(
            classify(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
            Incoming::Message(_)
        ));
    }
}
