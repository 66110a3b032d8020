//! A scripted fake of the Gemini API (`/v1beta/models/<model>:streamGenerateContent?alt=sse`,
//! `:generateContent`, `:countTokens`) on 127.0.0.1, for Gemini CLI (`GOOGLE_GEMINI_BASE_URL`).
//! std only.
//!
//! Stateless like the fake Responses API: Gemini sends the whole history in `contents`, so the
//! step to answer is the number of `model` turns already in it. A `Say` step ends the turn; an
//! AfterAgent hook that blocks makes Gemini send one more request with its reason as a user text,
//! which gets the next step. Every `functionCall` carries an `id` (Gemini echoes it in its
//! `functionResponse`). A request past the last step gets [`SCRIPT_EXHAUSTED`].

use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::fake_model::store_args;
use super::http;

pub const SCRIPT_EXHAUSTED: &str = "FAKE GEMINI: the script has no further step";

#[derive(Debug, Clone)]
pub enum Step {
    /// Call Gemini's `write_file` with this path and content.
    Write { path: String, content: String },
    /// Call the MCP tool `tool` of server `server` (offered as `mcp_<server>_<tool>`), with
    /// arguments made from its schema.
    Mcp { server: String, tool: String },
    /// A model text, which ends the turn.
    Say(String),
}

#[derive(Debug, Clone)]
pub struct Script {
    pub steps: Vec<Step>,
    pub latency: Duration,
}

/// One generateContent request as the fake read it.
#[derive(Debug, Clone)]
pub struct GeminiRequest {
    /// Function declarations: name and parameter schema.
    pub tools: Vec<(String, Value)>,
    pub model_turns: usize,
    /// The texts of user turns, in order.
    pub user_texts: Vec<String>,
    /// `(name, response)` of every functionResponse in the history.
    pub responses: Vec<(String, Value)>,
}

impl GeminiRequest {
    pub fn parse(body: &Value) -> GeminiRequest {
        let tools = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|fd| {
                let schema = if fd["parametersJsonSchema"].is_object() {
                    fd["parametersJsonSchema"].clone()
                } else {
                    fd["parameters"].clone()
                };
                (fd["name"].as_str().unwrap_or_default().to_owned(), schema)
            })
            .collect();
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        let mut user_texts = Vec::new();
        let mut responses = Vec::new();
        let mut model_turns = 0;
        for turn in &contents {
            let parts = turn["parts"].as_array().cloned().unwrap_or_default();
            if turn["role"] == "model" {
                model_turns += 1;
                continue;
            }
            let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            if !text.is_empty() {
                user_texts.push(text);
            }
            for part in &parts {
                if let Some(fr) = part.get("functionResponse") {
                    responses.push((
                        fr["name"].as_str().unwrap_or_default().to_owned(),
                        fr["response"].clone(),
                    ));
                }
            }
        }
        GeminiRequest {
            tools,
            model_turns,
            user_texts,
            responses,
        }
    }

    pub fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// The text of the last response to `name`.
    pub fn result_of(&self, name: &str) -> Option<String> {
        self.responses
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r.to_string())
    }
}

#[derive(Debug, Clone)]
pub struct Exchange {
    pub seq: usize,
    pub target: String,
    pub body: Value,
    pub reply: String,
}

impl Exchange {
    pub fn is_model_call(&self) -> bool {
        self.target.contains(":streamGenerateContent")
    }

    pub fn request(&self) -> GeminiRequest {
        GeminiRequest::parse(&self.body)
    }
}

pub struct FakeGemini {
    pub port: u16,
    log: Arc<Mutex<Vec<Exchange>>>,
}

impl FakeGemini {
    pub fn start(script: Script) -> Result<FakeGemini> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .context("binding the fake Gemini API on 127.0.0.1")?;
        let port = listener.local_addr()?.port();
        let log: Arc<Mutex<Vec<Exchange>>> = Arc::default();
        let shared = log.clone();
        let script = Arc::new(script);
        let started = Instant::now();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (log, script) = (shared.clone(), script.clone());
                std::thread::spawn(move || {
                    if let Err(err) = serve_one(stream, &script, &log, started) {
                        eprintln!("      fake gemini: {err:#}");
                    }
                });
            }
        });
        Ok(FakeGemini { port, log })
    }

    /// For `GOOGLE_GEMINI_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn model_calls(&self) -> Vec<Exchange> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|e| e.is_model_call()).cloned().collect()
    }

    /// One line per request, for failure messages.
    pub fn transcript(&self) -> String {
        let log = self.log.lock().unwrap();
        let mut out = String::new();
        for ex in log.iter() {
            let req = ex.request();
            out.push_str(&format!(
                "  #{} {} tools={} model-turns={} user-texts={} -> {}\n",
                ex.seq,
                ex.target,
                req.tools.len(),
                req.model_turns,
                req.user_texts.len(),
                ex.reply
            ));
        }
        if out.is_empty() {
            out.push_str("  (Gemini sent no request to the fake Gemini API)\n");
        }
        out
    }
}

fn serve_one(
    mut stream: TcpStream,
    script: &Script,
    log: &Mutex<Vec<Exchange>>,
    _started: Instant,
) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let req = http::read_request(&stream)?;
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let seq = {
        let mut log = log.lock().unwrap();
        let seq = log.len() + 1;
        log.push(Exchange {
            seq,
            target: req.target.clone(),
            body: body.clone(),
            reply: "(pending)".into(),
        });
        log.len()
    };
    let usage = json!({"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2});
    let answer = |parts: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
               "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"})
    };
    let target = req.target.as_str();
    let reply = if req.method == "GET" {
        http::respond(&mut stream, 200, "application/json", br#"{"models":[]}"#)?;
        "model list (empty)".to_owned()
    } else if target.contains(":countTokens") {
        http::respond(
            &mut stream,
            200,
            "application/json",
            br#"{"totalTokens":1}"#,
        )?;
        "countTokens".to_owned()
    } else if target.contains(":streamGenerateContent") {
        std::thread::sleep(script.latency);
        let parsed = GeminiRequest::parse(&body);
        let (parts, summary) = decide(&parsed, script, seq);
        let event = format!("data: {}\r\n\r\n", answer(parts));
        http::respond_sse(&mut stream, &[event])?;
        summary
    } else if target.contains(":generateContent") {
        // Side requests (routing, next-speaker checks) ask for JSON.
        let text = json!({"reasoning": "e2e", "next_speaker": "user", "model_choice": "flash",
                          "complexity_score": 1});
        let reply = answer(json!([{"text": text.to_string()}]));
        http::respond(
            &mut stream,
            200,
            "application/json",
            reply.to_string().as_bytes(),
        )?;
        "side request (json)".to_owned()
    } else {
        http::respond(
            &mut stream,
            404,
            "application/json",
            br#"{"error":{"code":404}}"#,
        )?;
        "404".to_owned()
    };
    log.lock().unwrap()[seq - 1].reply = reply;
    Ok(())
}

fn decide(req: &GeminiRequest, script: &Script, seq: usize) -> (Value, String) {
    let say = |text: &str| (json!([{"text": text}]), format!("say {text:?}"));
    let call = |name: &str, args: Value| {
        (
            json!([{"functionCall": {"id": format!("call_e2e_{seq}"), "name": name, "args": args}}]),
            format!("call {name}"),
        )
    };
    match script.steps.get(req.model_turns) {
        None => say(SCRIPT_EXHAUSTED),
        Some(Step::Say(text)) => say(text),
        Some(Step::Write { path, content }) => {
            call("write_file", json!({"file_path": path, "content": content}))
        }
        Some(Step::Mcp { server, tool }) => {
            let name = format!("mcp_{server}_{tool}");
            match req.tool(&name) {
                Some(schema) => call(&name, store_args(schema)),
                None => {
                    let offered: Vec<&str> = req.tools.iter().map(|(n, _)| n.as_str()).collect();
                    say(&format!(
                        "FAKE GEMINI: the script calls {name} but the request offers no such tool (offered: {})",
                        offered.join(", ")
                    ))
                }
            }
        }
    }
}
