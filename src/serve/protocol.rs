//! The MCP face of the store: server identity, the tool list, and tool calls.
//!
//! The store loads on a thread of its own while the client is still shaking hands, so
//! `initialize` and `tools/list` answer at once even over ten thousand notes; the first tool
//! call waits for the load if it is still running.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, DiscoverRequestMethod,
    DiscoverResult, ErrorCode, Implementation, InitializeRequestParams, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::tools;
use crate::memory::store::{Opening, Store};

const INSTRUCTIONS: &str = "The repository's memory. Before exploring or working on anything \
you don't already know, call context_query. After every action, memory_store what you learned \
and why. A note that says what a stored note says updates it; to correct a note, store the new \
text under its key, or store the new one, then memory_forget the old one.";

enum State {
    Loading(JoinHandle<anyhow::Result<Store>>),
    Ready(Box<Store>),
    /// Why no tool can work, worded for the model (and so for the user it reports to).
    Unavailable(String),
    /// Only while a load is being joined.
    Taken,
}

#[derive(Clone)]
pub struct MemoryServer {
    state: Arc<Mutex<State>>,
}

impl MemoryServer {
    /// Starts loading the memory of `root`; `Err` carries why there is no repository to serve.
    pub fn start(root: Result<PathBuf, String>) -> MemoryServer {
        let state = match root {
            // A long-running server starts with a stat of every note: it catches edits made in
            // place, which the folder's stamp cannot show.
            Ok(root) => State::Loading(std::thread::spawn(move || {
                Store::open_with(
                    &root,
                    Opening {
                        verify: true,
                        deadline: None,
                    },
                )
            })),
            Err(why) => State::Unavailable(why),
        };
        MemoryServer {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn with_store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> Result<R, String> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let State::Loading(_) = &*state {
            let State::Loading(handle) = std::mem::replace(&mut *state, State::Taken) else {
                unreachable!("checked above")
            };
            *state = match handle.join() {
                Ok(Ok(store)) => State::Ready(Box::new(store)),
                Ok(Err(err)) => State::Unavailable(format!(
                    "could not load the memory store: {err:#}; fix the cause and restart the \
                     memory server"
                )),
                Err(_) => State::Unavailable(
                    "loading the memory store crashed; see the server's stderr".into(),
                ),
            };
        }
        match &mut *state {
            State::Ready(store) => Ok(f(store)),
            State::Unavailable(why) => Err(why.clone()),
            State::Loading(_) | State::Taken => Err("the memory store is not loaded".into()),
        }
    }

    /// Lets a load still running finish: it may be writing the index for the next start.
    pub fn shutdown(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let State::Loading(handle) = std::mem::replace(&mut *state, State::Taken)
            && handle.join().is_err()
        {
            eprintln!("memloop serve: loading the memory store crashed; see the messages above");
        }
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memloop", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// Claude Code probes with `server/discover` before `initialize`. Declining it keeps every
    /// client on the `initialize` handshake, the one checked against the real agents; the
    /// clients treat "method not found" as a server that wants it.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        if !tools::is_known(name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {name:?}; this server has {}",
                    tools::list()
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let outcome = self
            .with_store(|store| tools::call(store, name, &args))
            .and_then(|r| r)
            .map_err(|why| {
                if why.starts_with(name) {
                    why
                } else {
                    format!("{name}: {why}")
                }
            });
        Ok(tools::result(outcome).into())
    }

    /// rmcp hands on a request whose params do not fit its method as a custom request; for
    /// the methods this server answers that is Invalid params (-32602), not Method not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        match params_problem(&request) {
            Some(problem) => Err(ErrorData::invalid_params(
                format!("{}: {problem}", request.method),
                None,
            )),
            None => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            )),
        }
    }
}

/// What is wrong with the params of a request for a method this server answers; `None` for a
/// method it does not answer.
fn params_problem(request: &CustomRequest) -> Option<String> {
    let kind = |value: &Value| match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let shape = |problem: Option<serde_json::Error>| {
        problem.map_or_else(|| "params do not fit".to_owned(), |e| e.to_string())
    };
    Some(match request.method.as_str() {
        "tools/call" => match &request.params {
            None => "params are missing; send {\"name\": <tool>, \"arguments\": {...}}".into(),
            Some(Value::Object(params)) => match (params.get("name"), params.get("arguments")) {
                (Some(Value::String(_)), Some(arguments))
                    if !matches!(arguments, Value::Object(_) | Value::Null) =>
                {
                    format!(
                        "arguments must be an object of the tool's parameters, not {}",
                        kind(arguments)
                    )
                }
                (Some(Value::String(_)), _) => {
                    shape(request.params_as::<CallToolRequestParams>().err())
                }
                (Some(name), _) => format!("name must be the tool's name, not {}", kind(name)),
                (None, _) => "name (the tool to call) is missing".into(),
            },
            Some(other) => format!("params must be an object, not {}", kind(other)),
        },
        "initialize" => shape(request.params_as::<InitializeRequestParams>().err()),
        "tools/list" => shape(request.params_as::<PaginatedRequestParams>().err()),
        _ => return None,
    })
}
