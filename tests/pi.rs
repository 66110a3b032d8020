//! memloop's Pi extension (`assets/pi-extension.js`) in node, against a stand-in for Pi's
//! extension API that records what the extension does, with the real memloop binary behind it:
//! the tools it registers from `memloop serve`, the gate at `agent_end` (sent back, then passing
//! once stored; capped; calls the gate could not read handed over again; no send-back after an
//! aborted run), the index and recall in `before_agent_start`, and a one-shot run kept alive in
//! `session_shutdown` until its send-back has run. The real Pi runs it in `cargo xtask e2e pi`.

mod hook_world;

use std::path::Path;

use hook_world::{NOTE, TITLE, World};
use serde_json::{Value, json};

/// Loads the extension (argv: extension, steps as JSON) in the repository (the working
/// directory) and plays the steps; prints what the extension did, as JSON.
const HARNESS: &str = r#"
import { pathToFileURL } from "node:url";
const [extension, stepsJson] = process.argv.slice(2);
const handlers = {};
const log = { tools: [], commands: [], sent: [], results: [] };
const tools = {};
const pi = {
  on: (event, handler) => { (handlers[event] ||= []).push(handler); },
  registerTool: (tool) => { tools[tool.name] = tool; log.tools.push(tool.name); },
  registerCommand: (name, command) => { log.commands.push({ name, description: command.description }); },
  sendUserMessage: (text) => { log.sent.push(text); },
};
const { default: factory } = await import(pathToFileURL(extension).href);
await factory(pi);
const ctx = {
  cwd: process.cwd(),
  hasUI: false,
  isIdle: () => true,
  sessionManager: { getSessionId: () => "pi-session" },
};
const emit = async (event, payload) => {
  let last;
  for (const handler of handlers[event] || []) last = await handler({ type: event, ...payload }, ctx);
  return last;
};
const assistant = (calls, stopReason = "stop") => ({
  role: "assistant", stopReason,
  content: [{ type: "text", text: "ok" }, ...calls.map((name, i) => ({ type: "toolCall", id: `c${i}`, name, arguments: {} }))],
});
for (const step of JSON.parse(stepsJson)) {
  if (step.env) for (const [key, value] of Object.entries(step.env)) process.env[key] = value;
  if (step.prompt !== undefined) {
    const answer = await emit("before_agent_start", { prompt: step.prompt, systemPrompt: "BASE" });
    log.results.push(answer || null);
  }
  if (step.run) {
    await emit("agent_end", { messages: step.run.map((calls) => assistant(calls, step.stopReason)) });
  }
  if (step.call) {
    const result = await tools[step.call.name].execute("t1", step.call.arguments);
    log.results.push(result);
  }
  if (step.shutdown) {
    const started = Date.now();
    await emit("session_shutdown", {});
    log.shutdownMs = Date.now() - started;
  }
}
console.log(JSON.stringify(log));
process.exit(0);
"#;

fn node() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
}

/// Plays `steps` against the extension in `world`'s repository with `memloop` as MEMLOOP_BIN.
fn play(world: &World, memloop: &Path, steps: Value) -> Option<Value> {
    let node = node()?;
    let extension = world.repo.join("extension.mjs");
    std::fs::write(&extension, memloop::agents::pi::EXTENSION).unwrap();
    let harness = world.repo.join("harness.mjs");
    std::fs::write(&harness, HARNESS).unwrap();
    let out = std::process::Command::new(node)
        .arg(&harness)
        .arg(&extension)
        .arg(steps.to_string())
        .current_dir(&world.repo)
        .env("MEMLOOP_BIN", memloop)
        .env("XDG_STATE_HOME", &world.state)
        .env_remove("MEMLOOP_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn memloop() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_memloop"))
}

fn sent(log: &Value) -> Vec<String> {
    log["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_extension_registers_the_servers_tools_and_gates_at_agent_end() {
    let world = World::new();
    let store = json!({"content": "Pi's gate is the extension's agent_end.", "category": "context",
        "importance": 5, "tags": ["pi", "gate"]});
    let steps = json!([
        {"prompt": "Write a limerick about a purple giraffe."},
        {"run": [[]]},
        {"prompt": "Why does the release build need the vendored OpenSSL legacy provider?"},
        // Three writes in one run: sent back.
        {"run": [["read"], ["write"], ["write"], ["write"], []]},
        // The send-back's own prompt: the index, but no recall.
        {"prompt": "@SENT@"},
        {"call": {"name": "memory_store", "arguments": store}},
        {"run": [["context_query"], ["memory_store"], []]},
        {"shutdown": true}
    ]);
    // The send-back text is only known once sent: play up to it, then all of it.
    let Some(first) = play(&world, memloop(), json!(steps.as_array().unwrap()[..4])) else {
        eprintln!("skipped: node is not on PATH");
        return;
    };
    let back = sent(&first);
    assert_eq!(back.len(), 1, "{first}");
    assert!(
        back[0].starts_with("KNOWLEDGE CHECK: Modified 3 file(s) but stored nothing."),
        "{back:?}"
    );

    let world = World::new();
    let text = steps
        .to_string()
        .replace("@SENT@", &back[0].replace('"', "\\\""));
    let log = play(&world, memloop(), serde_json::from_str(&text).unwrap()).unwrap();
    let tools: Vec<&str> = log["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"memory_store") && tools.contains(&"context_query"),
        "{tools:?}"
    );
    let command = &log["commands"][0];
    assert_eq!(command["name"], "memloop");
    assert!(
        command["description"]
            .as_str()
            .unwrap()
            .starts_with(&format!("memloop: {} memory tools", tools.len())),
        "{command}"
    );
    // The index in the system prompt of every prompt; recall only for the matching one.
    let results = log["results"].as_array().unwrap();
    for answer in &results[..3] {
        let system = answer["systemPrompt"].as_str().unwrap();
        assert!(
            system.starts_with("BASE\n\n") && system.contains(TITLE),
            "{answer}"
        );
    }
    assert!(results[0].get("message").is_none(), "{}", results[0]);
    let recalled = results[1]["message"]["content"].as_str().unwrap();
    assert!(recalled.contains(NOTE), "{recalled}");
    assert_eq!(results[1]["message"]["display"], false);
    assert!(
        results[2].get("message").is_none(),
        "no recall for the gate's own message: {}",
        results[2]
    );
    // The tool call went through memloop serve and stored a note.
    let stored: Value =
        serde_json::from_str(results[3]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(world.repo.join(stored["file"].as_str().unwrap()).is_file());
    // Sent back once; the run that looked up and stored passes.
    assert_eq!(sent(&log).len(), 1, "{log}");
    assert!(log["shutdownMs"].as_u64().unwrap() < 5000, "{log}");
}

#[test]
fn calls_the_gate_did_not_read_are_handed_over_at_the_next_stop() {
    let world = World::new();
    let steps = json!([
        {"prompt": "Create three files."},
        // memloop cannot be run at this stop: the calls wait.
        {"env": {"MEMLOOP_BIN": world.repo.join("no-such-memloop")}, "run": [["write"], ["write"], ["write"], []]},
        {"env": {"MEMLOOP_BIN": memloop()}, "prompt": "And now?"},
        {"run": [[]]}
    ]);
    let Some(log) = play(&world, memloop(), steps) else {
        return;
    };
    let back = sent(&log);
    assert_eq!(back.len(), 1, "{log}");
    assert!(back[0].contains("Modified 3 file(s)"), "{back:?}");
}

#[test]
fn an_aborted_run_is_not_sent_back_and_the_send_backs_are_capped() {
    let world = World::new();
    let writes = json!([["write"], ["write"], ["write"], []]);
    let aborted = json!([
        {"prompt": "Create three files."},
        {"run": writes, "stopReason": "aborted"}
    ]);
    let Some(log) = play(&world, memloop(), aborted) else {
        return;
    };
    assert!(sent(&log).is_empty(), "{log}");

    // An agent that never stores: sent back three times in a row, then let rest.
    let world = World::new();
    let mut steps = vec![json!({"prompt": "Create three files."})];
    for _ in 0..4 {
        steps.push(json!({"run": writes}));
    }
    let log = play(&world, memloop(), Value::Array(steps)).unwrap();
    assert_eq!(sent(&log).len(), 3, "{log}");
}

#[test]
fn without_memloop_the_session_goes_on_without_its_part() {
    let world = World::new();
    let steps = json!([
        {"prompt": "Why does the release build need the vendored OpenSSL?"},
        {"run": [["write"], ["write"], ["write"], []]},
        {"shutdown": true}
    ]);
    let Some(log) = play(&world, &world.repo.join("no-such-memloop"), steps) else {
        return;
    };
    assert_eq!(log["tools"], json!([]));
    let description = log["commands"][0]["description"].as_str().unwrap();
    assert!(
        description.starts_with("memloop: the memory server did not start ("),
        "{description}"
    );
    assert!(sent(&log).is_empty(), "{log}");
    assert_eq!(log["results"][0], json!({}));
    assert!(log["shutdownMs"].as_u64().unwrap() < 5000, "{log}");
}
