//! Scripted fake model servers on 127.0.0.1 (std only): one speaking Anthropic Messages SSE
//! (Claude Code), one speaking OpenAI-compatible chat.completions SSE (OpenCode, Kimi Code).
//!
//! The script is stateless: each reply is decided from the conversation the agent sends.
//! 1. until `writes` files were written: a call of the agent's write tool (one file per turn);
//! 2. then end the turn (the agent stops, and the Stop gate should send it back);
//! 3. on a request whose messages contain the gate's `KNOWLEDGE CHECK`: a call of the memory
//!    server's lookup tool (the gate asks for a lookup first), then of its store tool, each with
//!    arguments made from the tool's own JSON schema;
//! 4. after that call: end the turn.
//!
//! Requests without tools (session titles) get a short text. Every request is recorded.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::http::{self, Request};

pub const GATE_MARKER: &str = "KNOWLEDGE CHECK";
/// What the scripted model stores (in every free-text field of the store call).
pub const STORED_TEXT: &str =
    "The e2e fixture repo got e2e-note-1..3.txt from the gate-loop scenario.";
/// After this many model requests the fake only ends turns (a runaway loop guard).
const MAX_SCRIPTED: usize = 40;
static REPLY_ID: AtomicUsize = AtomicUsize::new(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Anthropic,
    OpenAi,
}

#[derive(Debug, Clone)]
pub struct Script {
    /// Where the written files go (absolute paths are sent).
    pub repo: PathBuf,
    /// Number of files to write before the first stop.
    pub writes: usize,
    /// The agent's write tool name, matched exactly (`Write`, `write`).
    pub write_tool: String,
    /// The memory server's store tool as the agent names it.
    pub store_tool: String,
    /// The memory server's lookup tool as the agent names it: called before the store when the
    /// gate's message arrives, since the gate also asks for a lookup first.
    pub lookup_tool: Option<String>,
    /// How long each model reply takes (zero by default). With zero latency Claude Code 2.1.328
    /// runs the Stop hook while its transcript still lacks the last tool calls, which the gate
    /// must wait out.
    pub latency: Duration,
}

/// One request the agent sent and what the fake answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub seq: usize,
    pub at: Duration,
    pub method: String,
    pub target: String,
    pub body: Value,
    pub reply: String,
}

impl Exchange {
    pub fn is_model_call(&self) -> bool {
        self.method == "POST"
            && (self.target.starts_with("/v1/messages?")
                || self.target == "/v1/messages"
                || self.target.starts_with("/v1/chat/completions"))
    }

    pub fn conversation(&self, dialect: Dialect) -> Conversation {
        Conversation::parse(dialect, &self.body)
    }
}

pub struct FakeModel {
    pub port: u16,
    pub dialect: Dialect,
    log: Arc<Mutex<Vec<Exchange>>>,
}

impl FakeModel {
    pub fn start(dialect: Dialect, script: Script) -> Result<FakeModel> {
        let listener =
            TcpListener::bind(("127.0.0.1", 0)).context("binding the fake model on 127.0.0.1")?;
        let port = listener.local_addr()?.port();
        let log: Arc<Mutex<Vec<Exchange>>> = Arc::default();
        let started = Instant::now();
        let shared = log.clone();
        http::serve_each(listener, "fake model", move |stream| {
            serve_one(stream, dialect, &script, &shared, started)
        });
        Ok(FakeModel { port, dialect, log })
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().unwrap().clone()
    }

    pub fn model_calls(&self) -> Vec<Exchange> {
        self.exchanges()
            .into_iter()
            .filter(Exchange::is_model_call)
            .collect()
    }

    /// A one-line-per-request summary, for failure messages.
    pub fn transcript(&self) -> String {
        let mut out = String::new();
        for ex in self.exchanges() {
            let conv = ex.conversation(self.dialect);
            out.push_str(&format!(
                "  #{} +{:.1}s {} {} tools={} messages={} gate-msgs={} -> {}\n",
                ex.seq,
                ex.at.as_secs_f64(),
                ex.method,
                ex.target,
                conv.tools.len(),
                conv.messages,
                conv.text.matches(GATE_MARKER).count(),
                ex.reply
            ));
        }
        if out.is_empty() {
            out.push_str("  (the agent sent no request to the fake model)\n");
        }
        out
    }

    /// All recorded requests as JSON lines (bodies included), for a kept sandbox.
    pub fn dump(&self) -> String {
        self.exchanges()
            .iter()
            .map(|ex| {
                json!({"seq": ex.seq, "at_ms": ex.at.as_millis() as u64, "method": ex.method,
                       "target": ex.target, "reply": ex.reply, "body": ex.body})
                .to_string()
                    + "\n"
            })
            .collect()
    }
}

fn serve_one(
    mut stream: TcpStream,
    dialect: Dialect,
    script: &Script,
    log: &Mutex<Vec<Exchange>>,
    started: Instant,
) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let req = http::read_request(&stream)?;
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let seq = {
        let mut log = log.lock().unwrap();
        let seq = log.len() + 1;
        log.push(Exchange {
            seq,
            at: started.elapsed(),
            method: req.method.clone(),
            target: req.target.clone(),
            body: body.clone(),
            reply: String::from("(pending)"),
        });
        log.len()
    };
    let model_calls_before = log
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.seq < seq && e.is_model_call())
        .count();
    let reply = route(
        &mut stream,
        &req,
        &body,
        dialect,
        script,
        model_calls_before,
    )?;
    log.lock().unwrap()[seq - 1].reply = reply;
    Ok(())
}

fn route(
    stream: &mut TcpStream,
    req: &Request,
    body: &Value,
    dialect: Dialect,
    script: &Script,
    earlier_calls: usize,
) -> Result<String> {
    let path = req.path();
    match (req.method.as_str(), path) {
        ("POST", "/v1/messages") | ("POST", "/v1/chat/completions") => {
            let conv = Conversation::parse(dialect, body);
            std::thread::sleep(script.latency);
            let turn = if earlier_calls >= MAX_SCRIPTED {
                Turn::Text("Stopping: the fake model's request budget is used up.".into())
            } else {
                decide(&conv, script)
            };
            let summary = turn.summary();
            // Unique per reply, as from a real API (the gate counts assistant entries by id).
            let reply_id = REPLY_ID.fetch_add(1, Ordering::Relaxed).to_string();
            let stream_wanted = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
            let model = body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("fake-model");
            match (dialect, stream_wanted) {
                (Dialect::Anthropic, true) => {
                    http::respond_sse(stream, &anthropic_sse(&turn, model, &reply_id))?
                }
                (Dialect::Anthropic, false) => http::respond(
                    stream,
                    200,
                    "application/json",
                    anthropic_json(&turn, model, &reply_id)
                        .to_string()
                        .as_bytes(),
                )?,
                (Dialect::OpenAi, true) => {
                    http::respond_sse(stream, &openai_sse(&turn, model, &reply_id))?
                }
                (Dialect::OpenAi, false) => http::respond(
                    stream,
                    200,
                    "application/json",
                    openai_json(&turn, model, &reply_id).to_string().as_bytes(),
                )?,
            }
            Ok(summary)
        }
        ("POST", "/v1/messages/count_tokens") => {
            http::respond(stream, 200, "application/json", br#"{"input_tokens":1000}"#)?;
            Ok("count_tokens".into())
        }
        ("GET", "/v1/models") => {
            let list = json!({"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "e2e"}]});
            http::respond(stream, 200, "application/json", list.to_string().as_bytes())?;
            Ok("model list".into())
        }
        ("HEAD", _) | ("GET", "/api/hello") => {
            http::respond(stream, 200, "text/plain", b"")?;
            Ok("probe answered".into())
        }
        _ => {
            http::respond(
                stream,
                404,
                "application/json",
                br#"{"error":{"type":"not_found","message":"fake model: unknown route"}}"#,
            )?;
            Ok("404".into())
        }
    }
}

/// What the fake answers to one model request.
#[derive(Debug, Clone)]
pub enum Turn {
    Text(String),
    Tool {
        id: String,
        name: String,
        input: Value,
    },
}

impl Turn {
    fn summary(&self) -> String {
        match self {
            Turn::Text(t) => format!(
                "text {:?} (end of turn)",
                t.chars().take(60).collect::<String>()
            ),
            Turn::Tool { name, input, .. } => format!(
                "tool call {name} {}",
                input.to_string().chars().take(120).collect::<String>()
            ),
        }
    }
}

/// How Qwen Code 0.24.4 ends the request for a compaction summary.
const SNAPSHOT_REQUEST: &str = "produce the <state_snapshot>";
/// The summary the fake gives: a request holding it comes after a compaction.
pub const SNAPSHOT: &str = "E2E session summary: one fixture file written.";

fn decide(conv: &Conversation, script: &Script) -> Turn {
    // Qwen Code's compaction request (with or without tools) asks for a summary it checks for a
    // closed <state_snapshot>; without one the compaction counts as failed.
    if conv.text.contains(SNAPSHOT_REQUEST) {
        return Turn::Text(format!(
            "<analysis>e2e</analysis>\n<state_snapshot>{SNAPSHOT}</state_snapshot>"
        ));
    }
    if conv.tools.is_empty() {
        return Turn::Text("E2E session".into());
    }
    let store_calls = conv
        .tool_calls
        .iter()
        .filter(|c| c.name == script.store_tool)
        .count();
    if store_calls > 0 {
        return Turn::Text("Stored what I learned; done.".into());
    }
    if conv.text.contains(GATE_MARKER) {
        if let Some(load) = load_deferred(conv, script) {
            return load;
        }
        if let Some(lookup) = &script.lookup_tool
            && !conv.tool_calls.iter().any(|c| &c.name == lookup)
            && let Some(tool) = conv.tools.iter().find(|t| &t.name == lookup)
        {
            return Turn::Tool {
                id: format!("call_lookup_{}", conv.messages),
                name: tool.name.clone(),
                input: store_args(&tool.schema),
            };
        }
        let Some(tool) = conv.tools.iter().find(|t| t.name == script.store_tool) else {
            let names: Vec<_> = conv.tools.iter().map(|t| t.name.as_str()).collect();
            return Turn::Text(format!(
                "FAKE MODEL: the gate asked for a store but the request has no tool {:?} (tools: {})",
                script.store_tool,
                names.join(", ")
            ));
        };
        return Turn::Tool {
            id: format!("call_store_{}", conv.messages),
            name: tool.name.clone(),
            input: store_args(&tool.schema),
        };
    }
    let written = conv
        .tool_calls
        .iter()
        .filter(|c| c.name == script.write_tool)
        .count();
    if written < script.writes {
        let Some(tool) = conv.tools.iter().find(|t| t.name == script.write_tool) else {
            return Turn::Text(format!(
                "FAKE MODEL: no write tool {:?} in the request",
                script.write_tool
            ));
        };
        let n = written + 1;
        let file = script.repo.join(format!("e2e-note-{n}.txt"));
        return Turn::Tool {
            id: format!("call_write_{n}"),
            name: tool.name.clone(),
            input: write_args(
                &tool.schema,
                &file.to_string_lossy(),
                &format!("fixture file {n}\n"),
            ),
        };
    }
    Turn::Text("All files are written.".into())
}

/// Factory Droid (0.215.0) offers MCP tools only by name in a "Deferred tools:" reminder, their
/// schemas once its `ToolSearch` tool loaded them (`select:<name>,...`): when the memory tools
/// are not in the request, load them first, once. Listed there or not: `droid exec` may send its
/// first request before its MCP servers connected (seen on a loaded machine, the request at
/// +4.3 s naming no deferred tool), and a model told by the rules that the memory exists
/// searches for it, as this does.
fn load_deferred(conv: &Conversation, script: &Script) -> Option<Turn> {
    const LOADER: &str = "ToolSearch";
    let wanted: Vec<&String> = script
        .lookup_tool
        .iter()
        .chain(std::iter::once(&script.store_tool))
        .filter(|name| !conv.tools.iter().any(|t| &&t.name == name))
        .collect();
    if wanted.is_empty()
        || !conv.tools.iter().any(|t| t.name == LOADER)
        || conv.tool_calls.iter().any(|c| c.name == LOADER)
    {
        return None;
    }
    let names: Vec<&str> = wanted.iter().map(|name| name.as_str()).collect();
    Some(Turn::Tool {
        id: format!("call_load_{}", conv.messages),
        name: LOADER.into(),
        input: json!({"query": format!("select:{}", names.join(","))}),
    })
}

fn properties(schema: &Value) -> Vec<(String, Value)> {
    let schema = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(|v| v.get(0))
        .unwrap_or(schema);
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

fn write_args(schema: &Value, path: &str, content: &str) -> Value {
    let mut args = serde_json::Map::new();
    for (name, _) in properties(schema) {
        let lower = name.to_ascii_lowercase();
        if lower.contains("path") {
            args.insert(name, json!(path));
        } else if lower.contains("content") {
            args.insert(name, json!(content));
        }
    }
    if args.is_empty() {
        args.insert("file_path".into(), json!(path));
        args.insert("content".into(), json!(content));
    }
    Value::Object(args)
}

/// Arguments for the store tool from its schema: every required field plus the usual
/// type/importance/tags, each filled within the schema's own constraints.
pub fn store_args(schema: &Value) -> Value {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut args = serde_json::Map::new();
    for (name, prop) in properties(schema) {
        let lower = name.to_ascii_lowercase();
        let wanted = required.contains(&name)
            || [
                "type",
                "kind",
                "importance",
                "tags",
                "why",
                "content",
                "text",
            ]
            .iter()
            .any(|k| lower == *k);
        if wanted {
            args.insert(name.clone(), sample_value(&lower, &prop));
        }
    }
    Value::Object(args)
}

fn sample_value(name: &str, prop: &Value) -> Value {
    let prop = prop
        .get("anyOf")
        .or_else(|| prop.get("oneOf"))
        .and_then(|v| v.as_array())
        .and_then(|a| {
            a.iter()
                .find(|v| v.get("type").and_then(Value::as_str) != Some("null"))
        })
        .unwrap_or(prop);
    if let Some(first) = prop.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if let Some(c) = prop.get("const") {
        return c.clone();
    }
    let ty = match prop.get("type") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string")
            .to_string(),
        _ => "string".into(),
    };
    let min = prop.get("minimum").and_then(Value::as_f64);
    let max = prop.get("maximum").and_then(Value::as_f64);
    match ty.as_str() {
        "integer" => json!(match (min, max) {
            (Some(lo), Some(hi)) => ((lo + hi) / 2.0).round() as i64,
            (Some(lo), None) => lo as i64 + 1,
            (None, Some(hi)) => hi as i64,
            (None, None) => 3,
        }),
        "number" => json!(match (min, max) {
            (Some(lo), Some(hi)) => (lo + hi) / 2.0,
            (Some(lo), None) => lo + 0.5,
            (None, Some(hi)) => hi / 2.0,
            (None, None) => 0.5,
        }),
        "boolean" => json!(false),
        "array" => {
            let lo = prop
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(2)
                .max(2) as usize;
            let hi = prop.get("maxItems").and_then(Value::as_u64).unwrap_or(5) as usize;
            let n = lo.min(hi).max(1);
            let items = prop
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            let pool = ["e2e", "memloop", "gate", "fixture", "test"];
            Value::Array(
                (0..n)
                    .map(|i| match items.get("type").and_then(Value::as_str) {
                        Some("string") | None => json!(pool[i % pool.len()]),
                        _ => sample_value("", &items),
                    })
                    .collect(),
            )
        }
        "object" => json!({}),
        _ => json!(match name {
            "why" | "reason" => "to check memloop's gate loop end to end",
            "title" | "summary" | "name" => "e2e fixture files",
            _ if name.contains("content")
                || name.contains("text")
                || name.contains("note")
                || name.contains("body") =>
                STORED_TEXT,
            _ => "e2e",
        }),
    }
}

#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: String,
    pub schema: Value,
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    pub is_error: bool,
}

/// The parts of a model request the script and the assertions look at.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    pub tools: Vec<ToolDef>,
    pub messages: usize,
    /// All text of all messages (not the system prompt), tool results included.
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_results: Vec<ToolResult>,
}

impl Conversation {
    pub fn parse(dialect: Dialect, body: &Value) -> Conversation {
        let mut conv = Conversation::default();
        for tool in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (name, schema) = match dialect {
                Dialect::Anthropic => (tool.get("name"), tool.get("input_schema")),
                Dialect::OpenAi => (
                    tool.pointer("/function/name"),
                    tool.pointer("/function/parameters"),
                ),
            };
            if let Some(name) = name.and_then(Value::as_str) {
                conv.tools.push(ToolDef {
                    name: name.to_string(),
                    schema: schema.cloned().unwrap_or(Value::Null),
                });
            }
        }
        let messages = body.get("messages").and_then(Value::as_array);
        for msg in messages.into_iter().flatten() {
            let role = msg.get("role").and_then(Value::as_str).unwrap_or("");
            if role == "system" {
                continue;
            }
            conv.messages += 1;
            match msg.get("content") {
                Some(Value::String(s)) => {
                    if role == "tool" {
                        conv.tool_results.push(ToolResult {
                            id: str_of(msg, "tool_call_id"),
                            text: s.clone(),
                            is_error: false,
                        });
                    }
                    push_text(&mut conv.text, s);
                }
                Some(Value::Array(blocks)) => {
                    let mut tool_text = String::new();
                    for block in blocks {
                        match block.get("type").and_then(Value::as_str).unwrap_or("") {
                            "text" => push_text(
                                &mut tool_text,
                                block.get("text").and_then(Value::as_str).unwrap_or(""),
                            ),
                            "tool_use" => conv.tool_calls.push(ToolCall {
                                id: str_of(block, "id"),
                                name: str_of(block, "name"),
                            }),
                            "tool_result" => {
                                let text = text_of(block.get("content"));
                                push_text(&mut conv.text, &text);
                                conv.tool_results.push(ToolResult {
                                    id: str_of(block, "tool_use_id"),
                                    text,
                                    is_error: block
                                        .get("is_error")
                                        .and_then(Value::as_bool)
                                        .unwrap_or(false),
                                });
                            }
                            _ => {}
                        }
                    }
                    if role == "tool" {
                        conv.tool_results.push(ToolResult {
                            id: str_of(msg, "tool_call_id"),
                            text: tool_text.clone(),
                            is_error: false,
                        });
                    }
                    push_text(&mut conv.text, &tool_text);
                }
                _ => {}
            }
            for call in msg
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                conv.tool_calls.push(ToolCall {
                    id: str_of(call, "id"),
                    name: call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                });
            }
        }
        conv
    }

    /// The result the agent sent back for the call named `name`, if any.
    pub fn result_of(&self, name: &str) -> Option<&ToolResult> {
        let call = self.tool_calls.iter().find(|c| c.name == name)?;
        self.tool_results.iter().find(|r| r.id == call.id)
    }
}

/// The string at `key` of `v`, or empty.
pub(super) fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn push_text(into: &mut String, s: &str) {
    if !s.is_empty() {
        into.push_str(s);
        into.push('\n');
    }
}

/// Message content or a tool's output as text: a string, or the `text` of each part.
pub(super) fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn anthropic_sse(turn: &Turn, model: &str, id: &str) -> Vec<String> {
    let mut out = vec![sse(
        Some("message_start"),
        &json!({"type": "message_start", "message": {"id": format!("msg_e2e_{id}"), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    )];
    let stop = match turn {
        Turn::Text(text) => {
            out.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ));
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            ));
            "end_turn"
        }
        Turn::Tool { id, name, input } => {
            out.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            ));
            "tool_use"
        }
    };
    out.push(sse(
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    out.push(sse(
        Some("message_delta"),
        &json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    ));
    out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    out
}

fn anthropic_json(turn: &Turn, model: &str, id: &str) -> Value {
    let (content, stop) = match turn {
        Turn::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Turn::Tool { id, name, input } => (
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
            "tool_use",
        ),
    };
    json!({"id": format!("msg_e2e_{id}"), "type": "message", "role": "assistant", "model": model, "content": content,
           "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 20}})
}

fn openai_sse(turn: &Turn, model: &str, id: &str) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        sse(
            None,
            &json!({"id": format!("chatcmpl-e2e-{id}"), "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = Vec::new();
    let finish = match turn {
        Turn::Text(text) => {
            out.push(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ));
            out.push(chunk(json!({"content": text}), Value::Null));
            "stop"
        }
        Turn::Tool { id, name, input } => {
            out.push(chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                Value::Null,
            ));
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": input.to_string()}}]}),
                Value::Null,
            ));
            "tool_calls"
        }
    };
    out.push(sse(None, &json!({"id": format!("chatcmpl-e2e-{id}"), "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})));
    out.push("data: [DONE]\n\n".into());
    out
}

fn openai_json(turn: &Turn, model: &str, id: &str) -> Value {
    let (message, finish) = match turn {
        Turn::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Tool { id, name, input } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]}),
            "tool_calls",
        ),
    };
    json!({"id": format!("chatcmpl-e2e-{id}"), "object": "chat.completion", "created": 0, "model": model,
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_args_follow_the_schema() {
        let schema = json!({"type": "object", "required": ["content", "type", "importance", "tags"],
            "properties": {"content": {"type": "string"}, "type": {"type": "string", "enum": ["fact", "decision"]},
            "importance": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 5},
            "replaces": {"type": "string"}}});
        let args = store_args(&schema);
        assert_eq!(args["type"], "fact");
        assert_eq!(args["importance"], 3);
        assert_eq!(args["tags"].as_array().unwrap().len(), 2);
        assert!(args["content"].as_str().unwrap().contains("e2e"));
        assert!(args.get("replaces").is_none());
    }

    #[test]
    fn script_writes_then_stops_then_stores_on_the_gate_message() {
        let script = Script {
            repo: PathBuf::from("/r"),
            writes: 2,
            write_tool: "Write".into(),
            store_tool: "mcp__memory__memory_store".into(),
            lookup_tool: None,
            latency: Duration::ZERO,
        };
        let tools = json!([{"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}},
                           {"name": "mcp__memory__memory_store", "input_schema": {"required": ["content"], "properties": {"content": {"type": "string"}}}}]);
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        let mut turns = Vec::new();
        for _ in 0..3 {
            let body = json!({"tools": tools, "messages": messages});
            let turn = decide(&Conversation::parse(Dialect::Anthropic, &body), &script);
            turns.push(turn.summary());
            if let Turn::Tool { id, name, input } = turn {
                messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]}));
                messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
            }
        }
        assert!(
            turns[0].contains("Write") && turns[0].contains("/r/e2e-note-1.txt"),
            "{turns:?}"
        );
        assert!(turns[1].contains("e2e-note-2.txt"), "{turns:?}");
        assert!(turns[2].starts_with("text"), "{turns:?}");
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": "Stop hook feedback:\n[memloop]: KNOWLEDGE CHECK: no store"}]}));
        let body = json!({"tools": tools, "messages": messages});
        let conv = Conversation::parse(Dialect::Anthropic, &body);
        let turn = decide(&conv, &script);
        assert!(
            turn.summary().contains("mcp__memory__memory_store"),
            "{}",
            turn.summary()
        );
    }

    #[test]
    fn deferred_memory_tools_are_loaded_once_before_the_lookup() {
        let script = Script {
            repo: PathBuf::from("/r"),
            writes: 0,
            write_tool: "Create".into(),
            store_tool: "memory___memory_store".into(),
            lookup_tool: Some("memory___context_query".into()),
            latency: Duration::ZERO,
        };
        let reminder = "Deferred tools:\nmemory___context_query\nmemory___memory_store";
        let loader =
            json!({"type": "function", "function": {"name": "ToolSearch", "parameters": {}}});
        let body = json!({"tools": [loader], "messages": [
            {"role": "user", "content": [{"type": "text", "text": reminder}]},
            {"role": "user", "content": "KNOWLEDGE CHECK: store"}]});
        let turn = decide(&Conversation::parse(Dialect::OpenAi, &body), &script);
        let Turn::Tool { name, input, .. } = turn else {
            panic!("expected a ToolSearch call, got {}", turn.summary());
        };
        assert_eq!(name, "ToolSearch");
        assert_eq!(
            input["query"],
            "select:memory___context_query,memory___memory_store"
        );
        // Once loaded, the tools are in the request: the lookup comes next, no second load.
        let lookup = json!({"type": "function", "function": {"name": "memory___context_query", "parameters": {}}});
        let store = json!({"type": "function", "function": {"name": "memory___memory_store", "parameters": {}}});
        let body = json!({"tools": [loader, lookup, store], "messages": [
            {"role": "user", "content": [{"type": "text", "text": reminder}]},
            {"role": "user", "content": "KNOWLEDGE CHECK: store"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "l", "type": "function", "function": {"name": "ToolSearch", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "l", "content": "loaded"}]});
        let turn = decide(&Conversation::parse(Dialect::OpenAi, &body), &script);
        assert!(
            turn.summary().contains("memory___context_query"),
            "{}",
            turn.summary()
        );
    }

    #[test]
    fn openai_conversation_finds_calls_and_results() {
        let body = json!({"tools": [{"type": "function", "function": {"name": "write", "parameters": {}}}],
            "messages": [{"role": "system", "content": "KNOWLEDGE CHECK in system prompt is ignored"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "memory_memory_store", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "stored note n1"}]});
        let conv = Conversation::parse(Dialect::OpenAi, &body);
        assert!(!conv.text.contains(GATE_MARKER));
        assert_eq!(
            conv.result_of("memory_memory_store").unwrap().text,
            "stored note n1"
        );
    }
}
