//! A scripted fake of the OpenAI Responses API (`POST /v1/responses`, server-sent events) on
//! 127.0.0.1, for Codex (`model_providers.<x>.wire_api = "responses"`) and Copilot CLI
//! (`COPILOT_PROVIDER_WIRE_API=responses`). std only.
//!
//! The script is a list of steps, and the fake is stateless: Codex sends the whole history with
//! every request, so the step to answer is the number of outputs the model already produced in
//! that history (function calls, custom tool calls, assistant messages). A `Say` step ends the
//! turn; a Stop hook that blocks makes Codex send one more request with its reason as a user
//! message, which then gets the next step. A request past the last step is answered with
//! [`SCRIPT_EXHAUSTED`], so an extra continuation shows up in the log instead of looping.
//!
//! Compaction stays stateless too: Codex's summary request (its compact prompt as the last user
//! message) is answered with [`SUMMARY_MARK`] and the number of outputs summarised, and a
//! history holding that summary resumes the script after those outputs.

use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::fake_model::{store_args, str_of, text_of};
use super::http;

/// The text of the reply to a request the script has no step for.
pub const SCRIPT_EXHAUSTED: &str = "FAKE RESPONSES: the script has no further step";
/// How Codex's summary request begins (its `templates/compact/prompt.md`, 0.171.0).
pub const COMPACT_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION";
/// The fake's summary: this, then the number of outputs it stands for.
pub const SUMMARY_MARK: &str = "FAKE RESPONSES SUMMARY: outputs done";
/// The usage every reply reports unless its step says otherwise.
const USUAL_TOTAL_TOKENS: u64 = 120;

/// One model output.
#[derive(Debug, Clone)]
pub enum Step {
    /// Call Codex's shell tool `exec_command` with this command line.
    Exec(String),
    /// Call the freeform tool `apply_patch` with this patch (`*** Begin Patch` ...): a
    /// `custom_tool_call`, offered only to models whose metadata asks for it.
    Patch(String),
    /// Call `tool` of the MCP server `server` (offered as namespace `mcp__<server>`), with
    /// arguments made from the schema Codex offers.
    Mcp { server: String, tool: String },
    /// Call the built-in tool `name` with these arguments (Copilot's `create`, `bash`).
    Call { name: String, args: Value },
    /// Call the offered function `name` (Copilot offers MCP tools flat, as
    /// `<server>-<tool>`), with arguments made from its schema.
    Tool(String),
    /// An assistant message, which ends the turn.
    Say(String),
    /// `step`, its reply reporting `total_tokens` of usage (past `model_auto_compact_token_limit`,
    /// Codex compacts before the next request).
    Reporting { total_tokens: u64, step: Box<Step> },
}

#[derive(Debug, Clone)]
pub struct Script {
    pub steps: Vec<Step>,
    /// How long each reply takes.
    pub latency: Duration,
}

/// A tool as offered in a request: `namespace` is set for MCP tools (`mcp__<server>`).
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub namespace: Option<String>,
    pub name: String,
    pub schema: Value,
}

/// A call the model made earlier, as Codex sends it back in the history.
#[derive(Debug, Clone)]
pub struct PastCall {
    pub call_id: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// The parts of one Responses request the script and the checks look at.
#[derive(Debug, Clone, Default)]
pub struct ResponsesRequest {
    pub tools: Vec<OfferedTool>,
    /// The text of every user message, in order (the prompt, then Stop-hook continuations).
    pub user_texts: Vec<String>,
    /// Outputs of the model already in the history, those a summary stands for included: the
    /// step this request gets.
    pub prior_outputs: usize,
    /// Codex asks for a summary of the history (the compact prompt is the last user message).
    pub compaction: bool,
    pub calls: Vec<PastCall>,
    /// `call_id` -> the tool's output text as Codex returned it to the model.
    pub results: Vec<(String, String)>,
}

impl ResponsesRequest {
    pub fn parse(body: &Value) -> ResponsesRequest {
        let mut req = ResponsesRequest::default();
        for tool in body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = str_of(tool, "name");
            match tool.get("type").and_then(Value::as_str) {
                Some("namespace") => {
                    for inner in tool
                        .get("tools")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        req.tools.push(OfferedTool {
                            namespace: Some(name.clone()),
                            name: str_of(inner, "name"),
                            schema: inner.get("parameters").cloned().unwrap_or(Value::Null),
                        });
                    }
                }
                _ if !name.is_empty() => req.tools.push(OfferedTool {
                    namespace: None,
                    name,
                    schema: tool.get("parameters").cloned().unwrap_or(Value::Null),
                }),
                _ => {}
            }
        }
        for item in body
            .get("input")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
            match kind {
                "message" => match item.get("role").and_then(Value::as_str) {
                    Some("user") => {
                        let text = text_of(item.get("content"));
                        req.prior_outputs += summarised_outputs(&text);
                        req.user_texts.push(text);
                    }
                    Some("assistant") => req.prior_outputs += 1,
                    _ => {}
                },
                "function_call" | "custom_tool_call" => {
                    req.prior_outputs += 1;
                    req.calls.push(PastCall {
                        call_id: str_of(item, "call_id"),
                        namespace: item
                            .get("namespace")
                            .and_then(Value::as_str)
                            .map(String::from),
                        name: str_of(item, "name"),
                    });
                }
                "function_call_output" | "custom_tool_call_output" => req
                    .results
                    .push((str_of(item, "call_id"), text_of(item.get("output")))),
                _ => {}
            }
        }
        req.compaction = req
            .user_texts
            .last()
            .is_some_and(|t| t.trim_start().starts_with(COMPACT_PROMPT));
        req
    }

    /// The offered tool `name` in `namespace` (`None`: a built-in tool).
    pub fn tool(&self, namespace: Option<&str>, name: &str) -> Option<&OfferedTool> {
        self.tools
            .iter()
            .find(|t| t.namespace.as_deref() == namespace && t.name == name)
    }

    /// What the call of `name` in `namespace` returned, if the history holds both.
    pub fn result_of(&self, namespace: Option<&str>, name: &str) -> Option<&str> {
        let call = self
            .calls
            .iter()
            .find(|c| c.namespace.as_deref() == namespace && c.name == name)?;
        self.results
            .iter()
            .find(|(id, _)| *id == call.call_id)
            .map(|(_, out)| out.as_str())
    }
}

/// One request Codex sent and a summary of the answer.
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
        self.method == "POST" && self.target.split('?').next() == Some("/v1/responses")
    }

    pub fn request(&self) -> ResponsesRequest {
        ResponsesRequest::parse(&self.body)
    }
}

pub struct FakeResponses {
    pub port: u16,
    log: Arc<Mutex<Vec<Exchange>>>,
}

impl FakeResponses {
    pub fn start(script: Script) -> Result<FakeResponses> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .context("binding the fake Responses API on 127.0.0.1")?;
        let port = listener.local_addr()?.port();
        let log: Arc<Mutex<Vec<Exchange>>> = Arc::default();
        let started = Instant::now();
        let shared = log.clone();
        http::serve_each(listener, "fake responses", move |stream| {
            serve_one(stream, &script, &shared, started)
        });
        Ok(FakeResponses { port, log })
    }

    /// For `model_providers.<x>.base_url` (Codex appends `/responses`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
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

    /// One line per request, for failure messages.
    pub fn transcript(&self) -> String {
        let mut out = String::new();
        for ex in self.exchanges() {
            let req = ex.request();
            out.push_str(&format!(
                "  #{} +{:.1}s {} {} tools={} user-msgs={} prior-outputs={} -> {}\n",
                ex.seq,
                ex.at.as_secs_f64(),
                ex.method,
                ex.target,
                req.tools.len(),
                req.user_texts.len(),
                req.prior_outputs,
                ex.reply
            ));
        }
        if out.is_empty() {
            out.push_str("  (Codex sent no request to the fake Responses API)\n");
        }
        out
    }

    /// Every request as a JSON line (bodies included), for a kept sandbox.
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
    script: &Script,
    log: &Mutex<Vec<Exchange>>,
    started: Instant,
) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let req = http::read_request(&stream)?;
    let body: Value = serde_json::from_slice(&req.body).unwrap_or_else(
        |_| json!({"unparsed": String::from_utf8_lossy(&req.body[..req.body.len().min(400)])}),
    );
    let seq = {
        let mut log = log.lock().unwrap();
        let seq = log.len() + 1;
        log.push(Exchange {
            seq,
            at: started.elapsed(),
            method: req.method.clone(),
            target: req.target.clone(),
            body: body.clone(),
            reply: "(pending)".into(),
        });
        log.len()
    };
    let reply = match (req.method.as_str(), req.path()) {
        ("POST", "/v1/responses") => {
            std::thread::sleep(script.latency);
            let parsed = ResponsesRequest::parse(&body);
            let (output, total_tokens) = decide(&parsed, script, seq);
            let model = body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("fake-model");
            http::respond_sse(&mut stream, &sse_events(&output, model, seq, total_tokens))?;
            summary(&output)
        }
        ("GET", "/v1/models") => {
            let list = json!({"object": "list", "data": [], "models": []});
            http::respond(
                &mut stream,
                200,
                "application/json",
                list.to_string().as_bytes(),
            )?;
            "model list (empty)".into()
        }
        _ => {
            http::respond(
                &mut stream,
                404,
                "application/json",
                br#"{"error":{"type":"not_found","message":"fake responses: unknown route"}}"#,
            )?;
            "404".into()
        }
    };
    log.lock().unwrap()[seq - 1].reply = reply;
    Ok(())
}

/// The number of outputs a fake summary in a user message stands for (0: not a summary).
fn summarised_outputs(text: &str) -> usize {
    text.split_once(SUMMARY_MARK)
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The output item for `req` and the usage its reply reports: the script's step at the number
/// of outputs so far, or the summary a compaction asks for.
fn decide(req: &ResponsesRequest, script: &Script, seq: usize) -> (Value, u64) {
    if req.compaction {
        let summary = format!("{SUMMARY_MARK} {}", req.prior_outputs);
        return (assistant_message(seq, &summary), USUAL_TOTAL_TOKENS);
    }
    match script.steps.get(req.prior_outputs) {
        None => (assistant_message(seq, SCRIPT_EXHAUSTED), USUAL_TOTAL_TOKENS),
        Some(Step::Reporting { total_tokens, step }) => (output(req, step, seq), *total_tokens),
        Some(step) => (output(req, step, seq), USUAL_TOTAL_TOKENS),
    }
}

fn assistant_message(seq: usize, text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": format!("msg_e2e_{seq}"),
           "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn output(req: &ResponsesRequest, step: &Step, seq: usize) -> Value {
    let message = |text: &str| assistant_message(seq, text);
    let call_id = format!("call_e2e_{seq}");
    match step {
        Step::Reporting { step, .. } => output(req, step, seq),
        Step::Say(text) => message(text),
        Step::Call { name, args } => {
            json!({"type": "function_call", "id": format!("fc_e2e_{seq}"), "call_id": call_id,
                   "status": "completed", "name": name, "arguments": args.to_string()})
        }
        Step::Tool(name) => {
            let Some(offered) = req.tool(None, name) else {
                let names: Vec<String> = req.tools.iter().map(tool_label).collect();
                return message(&format!(
                    "FAKE RESPONSES: the script calls {name} but the request offers no such tool \
                     (offered: {})",
                    names.join(", ")
                ));
            };
            json!({"type": "function_call", "id": format!("fc_e2e_{seq}"), "call_id": call_id,
                   "status": "completed", "name": name,
                   "arguments": store_args(&offered.schema).to_string()})
        }
        Step::Exec(command) => {
            let schema = req
                .tool(None, "exec_command")
                .map(|t| t.schema.clone())
                .unwrap_or(Value::Null);
            json!({"type": "function_call", "id": format!("fc_e2e_{seq}"), "call_id": call_id,
                   "status": "completed", "name": "exec_command",
                   "arguments": exec_args(&schema, command).to_string()})
        }
        Step::Patch(patch) => {
            if req.tool(None, "apply_patch").is_none() {
                return message(
                    "FAKE RESPONSES: the script patches but the request offers no apply_patch",
                );
            }
            json!({"type": "custom_tool_call", "id": format!("ctc_e2e_{seq}"), "call_id": call_id,
                   "status": "completed", "name": "apply_patch", "input": patch})
        }
        Step::Mcp { server, tool } => {
            let namespace = format!("mcp__{server}");
            let Some(offered) = req.tool(Some(&namespace), tool) else {
                let names: Vec<String> = req.tools.iter().map(tool_label).collect();
                return message(&format!(
                    "FAKE RESPONSES: the script calls {namespace}/{tool} but the request offers \
                     no such tool (offered: {})",
                    names.join(", ")
                ));
            };
            json!({"type": "function_call", "id": format!("fc_e2e_{seq}"), "call_id": call_id,
                   "status": "completed", "namespace": namespace, "name": tool,
                   "arguments": store_args(&offered.schema).to_string()})
        }
    }
}

pub fn tool_label(tool: &OfferedTool) -> String {
    match &tool.namespace {
        Some(ns) => format!("{ns}/{}", tool.name),
        None => tool.name.clone(),
    }
}

/// `exec_command` takes the command line as one string (`cmd`); an array-typed `command`
/// (the older `shell` tool's shape) gets `bash -lc <line>`.
fn exec_args(schema: &Value, command: &str) -> Value {
    let props = schema.get("properties").and_then(Value::as_object);
    let has = |k: &str| props.is_some_and(|p| p.contains_key(k));
    if has("cmd") || props.is_none() {
        json!({"cmd": command})
    } else if schema.pointer("/properties/command/type") == Some(&json!("array")) {
        json!({"command": ["bash", "-lc", command]})
    } else {
        json!({"command": command})
    }
}

fn summary(item: &Value) -> String {
    match item.get("type").and_then(Value::as_str) {
        Some("custom_tool_call") => format!(
            "call {} {:?}",
            str_of(item, "name"),
            str_of(item, "input").chars().take(120).collect::<String>()
        ),
        Some("function_call") => {
            let ns = item
                .get("namespace")
                .and_then(Value::as_str)
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            format!(
                "call {ns}{} {}",
                str_of(item, "name"),
                str_of(item, "arguments")
                    .chars()
                    .take(120)
                    .collect::<String>()
            )
        }
        _ => format!(
            "say {:?} (end of turn)",
            item.pointer("/content/0/text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(80)
                .collect::<String>()
        ),
    }
}

/// The event stream of one response holding the one output item.
fn sse_events(item: &Value, model: &str, seq: usize, total_tokens: u64) -> Vec<String> {
    let id = format!("resp_e2e_{seq}");
    let event = |data: Value| {
        let kind = data["type"].as_str().unwrap_or("").to_string();
        format!("event: {kind}\ndata: {data}\n\n")
    };
    let mut out = vec![event(json!({"type": "response.created",
        "response": {"id": id, "object": "response", "status": "in_progress", "model": model, "output": []}}))];
    out.push(event(
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ));
    if let Some(text) = item.pointer("/content/0/text").and_then(Value::as_str) {
        out.push(event(
            json!({"type": "response.output_text.delta", "item_id": item["id"],
            "output_index": 0, "content_index": 0, "delta": text}),
        ));
    }
    out.push(event(
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    out.push(event(json!({"type": "response.completed", "response": {
        "id": id, "object": "response", "status": "completed", "model": model, "output": [item],
        "usage": {"input_tokens": total_tokens - 20, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": total_tokens}}})));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered() -> Value {
        json!([{"type": "function", "name": "exec_command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
               {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
               {"type": "namespace", "name": "mcp__memory", "tools": [{"type": "function",
                "name": "memory_store", "parameters": {"type": "object", "required": ["content"],
                "properties": {"content": {"type": "string"}}}}]}])
    }

    fn script() -> Script {
        Script {
            steps: vec![
                Step::Exec("echo hi > a.txt".into()),
                Step::Patch("*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n".into()),
                Step::Say("edited".into()),
                Step::Mcp {
                    server: "memory".into(),
                    tool: "memory_store".into(),
                },
                Step::Say("stored".into()),
            ],
            latency: Duration::ZERO,
        }
    }

    /// Plays the script the way Codex would: each output goes into the next request's history,
    /// a tool call gets a result, and the turn after a message continues with a hook's reason.
    #[test]
    fn steps_follow_the_outputs_in_the_history() {
        let mut input = vec![json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "go"}]})];
        let mut kinds = Vec::new();
        for seq in 1..=6 {
            let body = json!({"tools": offered(), "input": input});
            let (item, _) = decide(&ResponsesRequest::parse(&body), &script(), seq);
            kinds.push(summary(&item));
            input.push(item.clone());
            match item["type"].as_str() {
                Some("function_call") => input.push(json!({"type": "function_call_output",
                    "call_id": item["call_id"], "output": format!("result {seq}")})),
                Some("custom_tool_call") => input.push(json!({"type": "custom_tool_call_output",
                    "call_id": item["call_id"], "output": "patched"})),
                _ => input.push(json!({"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "<hook_prompt>again</hook_prompt>"}]})),
            }
        }
        assert!(
            kinds[0].starts_with("call exec_command")
                && kinds[0].contains(r#""cmd":"echo hi > a.txt""#),
            "{kinds:?}"
        );
        assert!(
            kinds[1].starts_with("call apply_patch") && kinds[1].contains("Add File: b.txt"),
            "{kinds:?}"
        );
        assert!(kinds[2].contains("edited"), "{kinds:?}");
        assert!(
            kinds[3].starts_with("call mcp__memory/memory_store"),
            "{kinds:?}"
        );
        assert!(kinds[4].contains("stored"), "{kinds:?}");
        assert!(kinds[5].contains(SCRIPT_EXHAUSTED), "{kinds:?}");
        let last = ResponsesRequest::parse(&json!({"tools": offered(), "input": input}));
        assert_eq!(
            last.result_of(Some("mcp__memory"), "memory_store"),
            Some("result 4")
        );
        assert_eq!(last.result_of(None, "apply_patch"), Some("patched"));
        assert_eq!(last.user_texts.len(), 4);
    }

    #[test]
    fn an_mcp_step_without_the_tool_says_so() {
        let body = json!({"tools": [offered()[0].clone()], "input": [
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "x"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]});
        let (item, _) = decide(&ResponsesRequest::parse(&body), &script(), 9);
        let text = item.pointer("/content/0/text").unwrap().as_str().unwrap();
        assert!(
            text.contains("no such tool") && text.contains("exec_command"),
            "{text}"
        );
    }

    #[test]
    fn events_carry_the_item_in_added_done_and_completed() {
        let item = json!({"type": "function_call", "call_id": "c", "namespace": "mcp__m", "name": "t", "arguments": "{}"});
        let events = sse_events(&item, "m", 1, 120);
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e.lines().next().unwrap().trim_start_matches("event: "))
            .collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let completed: Value = serde_json::from_str(
            events[3]
                .lines()
                .nth(1)
                .unwrap()
                .trim_start_matches("data: "),
        )
        .unwrap();
        assert_eq!(completed["response"]["output"][0]["namespace"], "mcp__m");
    }

    /// The summary request gets a summary, a history holding it resumes after the outputs it
    /// stands for, and a step's reported usage reaches the completed event.
    #[test]
    fn a_compaction_is_summarised_and_the_script_resumes_after_it() {
        let script = Script {
            steps: vec![
                Step::Reporting {
                    total_tokens: 50_000,
                    step: Box::new(Step::Exec("ls".into())),
                },
                Step::Say("after".into()),
            ],
            latency: Duration::ZERO,
        };
        let user = |text: &str| {
            json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})
        };
        let first = json!({"tools": offered(), "input": [user("go")]});
        let (item, tokens) = decide(&ResponsesRequest::parse(&first), &script, 1);
        assert_eq!(
            (item["name"].as_str(), tokens),
            (Some("exec_command"), 50_000)
        );
        let completed = sse_events(&item, "m", 1, tokens).pop().unwrap();
        assert!(completed.contains(r#""total_tokens":50000"#), "{completed}");

        let compact = json!({"input": [user("go"), item.clone(),
            {"type": "function_call_output", "call_id": item["call_id"], "output": "a.txt"},
            user(&format!("{COMPACT_PROMPT}. Create a handoff summary ..."))]});
        let req = ResponsesRequest::parse(&compact);
        assert!(req.compaction);
        let (summary, tokens) = decide(&req, &script, 2);
        let text = summary
            .pointer("/content/0/text")
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!((text, tokens), (format!("{SUMMARY_MARK} 1").as_str(), 120));

        let after = json!({"tools": offered(), "input": [user("go"),
            user(&format!("Another language model started to solve this problem ...\n{text}"))]});
        let req = ResponsesRequest::parse(&after);
        assert!(!req.compaction);
        let (item, _) = decide(&req, &script, 3);
        assert_eq!(item.pointer("/content/0/text").unwrap(), "after");
    }
}
