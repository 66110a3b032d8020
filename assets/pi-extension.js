// memloop pi extension v1
// Written by memloop; `memloop sync` replaces it, `memloop uninstall` removes it.
//
// memloop for Pi, which has no hook files and no MCP client: Pi loads every `.pi/extensions/*.js`
// of the folder it starts in (no trust prompt), and this extension does there what the other
// agents get from their config files.
//
// The memory tools: the server memloop.toml names (`SERVER` below, written by `memloop sync`;
// memloop's own is `memloop serve`) is started once when Pi loads the extension, and each tool it
// lists is registered as a Pi tool of the same name (`memory_store`, `context_query`, ...); a call
// is one MCP `tools/call` over the server's stdin and stdout. A server that does not answer in
// time leaves Pi without the tools, and the session goes on.
//
// The gate: Pi has no Stop hook; `agent_end` (the end of one prompt's run) stands in for one. The
// tool calls of the run's assistant messages are handed to `memloop hook stop --agent pi` with
// {"session_id", "cwd", "tool_calls", "assistant_messages"}. Exit 2 means the agent edited files
// and stored nothing (or skipped the lookup): its stderr goes back to the agent as a user message
// (`pi.sendUserMessage`, once Pi is idle), at most 3 times in a row. Calls the gate did not read
// (memloop missing or failing) are handed over again at the next stop. In one-shot `pi -p` the
// run is over before `agent_end` reaches the extension: `session_shutdown`, which Pi awaits
// before it exits, waits for the gate and the run it sent the agent back to.
//
// Memory at session start: `memloop hook session-start --agent pi` prints the index of the
// repository's memory (or the lookup rule alone); read once per session (again after a
// compaction), it is added to the system prompt of each prompt (`before_agent_start`).
//
// Recall: `memloop hook prompt --agent pi` prints the notes that match a prompt's text; they are
// added to that prompt as a message Pi keeps in the session and sends to the model, not shown.
// The gate's own messages are not searched.
//
// `/memloop` shows what the session got (the tools, or why the server did not start).
//
// memloop is found as $MEMLOOP_BIN, else as `memloop` on PATH. Nothing here may break a session:
// every failure is swallowed and the session goes on without memloop's part.

import { spawn } from "node:child_process";

const SERVER = {"command":"memloop","args":["serve"],"env":{}};

// Pi sends the agent back as often as the gate asks; this caps the loop like Claude Code's
// own block cap does.
const MAX_SEND_BACKS = 3;
const TIMEOUT_MS = 10000;
const SERVER_START_MS = 10000;
const MAX_OUTPUT = 64 * 1024;
// How long a one-shot run may go on after its first answer, for the gate's send-back.
const SETTLE_MS = 300000;

const memloopBin = () => process.env.MEMLOOP_BIN || "memloop";

function runMemloop(args, payload, cwd) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(memloopBin(), args, { cwd, stdio: ["pipe", "pipe", "pipe"] });
    } catch (err) {
      resolve({ code: null, stdout: "", stderr: String(err) });
      return;
    }
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {}
    }, TIMEOUT_MS);
    child.stdout.on("data", (chunk) => {
      if (stdout.length < MAX_OUTPUT) stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      if (stderr.length < MAX_OUTPUT) stderr += chunk;
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve({ code: null, stdout: "", stderr: String(err) });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// `${VAR}` in the server's environment, from Pi's own.
const expand = (text) => String(text).replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name) => process.env[name] ?? "");

// The memory server, spoken to in MCP's JSON-RPC lines over its stdin and stdout.
function startServer(cwd) {
  const env = { ...process.env };
  for (const [key, value] of Object.entries(SERVER.env || {})) env[key] = expand(value);
  const command = SERVER.command === "memloop" ? memloopBin() : SERVER.command;
  const child = spawn(command, SERVER.args || [], { cwd, env, stdio: ["pipe", "pipe", "ignore"] });
  // The server never keeps Pi running (a call in flight does: its timer). Pi before 0.63 ends a
  // one-shot run without session_shutdown, so nothing would stop the server there.
  child.unref();
  for (const pipe of [child.stdin, child.stdout]) {
    if (pipe && typeof pipe.unref === "function") pipe.unref();
  }
  const waiting = new Map();
  let next = 1;
  let buffer = "";
  let closed = false;
  const failAll = (why) => {
    closed = true;
    for (const settle of waiting.values()) settle({ error: { message: why } });
    waiting.clear();
  };
  child.on("error", (err) => failAll(String(err)));
  child.on("close", () => failAll("the memory server exited"));
  child.stdin.on("error", () => {});
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    buffer += chunk;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (!line) continue;
      let message;
      try {
        message = JSON.parse(line);
      } catch {
        continue;
      }
      if (!message || typeof message !== "object") continue;
      if (message.method && message.id !== undefined) {
        // A request from the server (a ping, say): this client offers nothing.
        const answer = message.method === "ping" ? { result: {} } : { error: { code: -32601, message: "not supported" } };
        child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: message.id, ...answer })}\n`);
      } else if (message.id !== undefined && waiting.has(message.id)) {
        const settle = waiting.get(message.id);
        waiting.delete(message.id);
        settle(message);
      }
    }
  });
  const request = (method, params, timeoutMs) =>
    new Promise((resolve, reject) => {
      if (closed) {
        reject(new Error("the memory server is not running"));
        return;
      }
      const id = next++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the memory server did not answer ${method} in ${timeoutMs / 1000} s`));
      }, timeoutMs);
      waiting.set(id, (message) => {
        clearTimeout(timer);
        if (message.error) reject(new Error(message.error.message || JSON.stringify(message.error)));
        else resolve(message.result);
      });
      child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  const stop = () => {
    closed = true;
    try {
      child.stdin.end();
    } catch {}
    setTimeout(() => {
      try {
        child.kill("SIGTERM");
      } catch {}
    }, 1000).unref();
  };
  return { child, request, stop };
}

async function connect(cwd) {
  const server = startServer(cwd);
  try {
    await server.request(
      "initialize",
      { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "memloop-pi-extension", version: "1" } },
      SERVER_START_MS,
    );
    server.child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
    const listed = await server.request("tools/list", {}, SERVER_START_MS);
    return { ...server, tools: (listed && Array.isArray(listed.tools) ? listed.tools : []) };
  } catch (err) {
    server.stop();
    throw err;
  }
}

// A tool result's text parts, as the model reads them.
const resultText = (result) =>
  ((result && result.content) || [])
    .map((part) => (part && part.type === "text" ? part.text : JSON.stringify(part)))
    .join("\n");

export default async function memloop(pi) {
  const cwd = process.cwd();
  let server = null;
  let why = "";
  try {
    server = await connect(cwd);
  } catch (err) {
    why = err && err.message ? err.message : String(err);
  }
  if (server) {
    for (const tool of server.tools) {
      if (!tool || typeof tool.name !== "string") continue;
      pi.registerTool({
        name: tool.name,
        label: tool.title || tool.name,
        description: tool.description || tool.name,
        parameters: tool.inputSchema || { type: "object", properties: {} },
        async execute(_toolCallId, params) {
          const result = await server.request("tools/call", { name: tool.name, arguments: params || {} }, TIMEOUT_MS);
          const text = resultText(result);
          if (result && result.isError) throw new Error(text || `${tool.name} failed`);
          return { content: [{ type: "text", text }], details: {} };
        },
      });
    }
  }

  // `/memloop` says what this session got; `memloop doctor --live` reads its description
  // (Pi's RPC `get_commands`) to see that Pi loads this file and the server gave its tools.
  const names = server ? server.tools.map((tool) => tool && tool.name).filter((name) => typeof name === "string") : [];
  const status = server
    ? `memloop: ${names.length} memory tools (${names.join(", ")}), the gate at agent_end, the index and recall`
    : `memloop: the memory server did not start (${why}); the gate, the index and recall still run`;
  pi.registerCommand("memloop", {
    description: status,
    handler: async (_args, ctx) => {
      try {
        ctx.ui.notify(status, server ? "info" : "warning");
      } catch {}
    },
  });

  const sessions = new Map();
  const sessionOf = (id) => {
    let state = sessions.get(id);
    if (!state) {
      // calls/entries: what the gate has not read yet. memory: the session-start text, read once
      // (a promise, so concurrent prompts share one read). sentBack: the gate's own messages.
      state = { calls: [], entries: 0, sendBacks: 0, memory: undefined, sentBack: new Set(), chain: Promise.resolve() };
      sessions.set(id, state);
    }
    return state;
  };
  const idOf = (ctx) => {
    try {
      return ctx.sessionManager.getSessionId() || "pi";
    } catch {
      return "pi";
    }
  };

  // Runs Pi started that the gate has not judged yet, and send-backs not yet running: a one-shot
  // run exits only when both are done.
  let started = 0;
  let judged = 0;
  const pendingSends = new Set();
  let wake = () => {};
  const settled = () => judged >= started && pendingSends.size === 0;
  const changed = () => wake();

  const memoryOf = (id, dir) => {
    const state = sessionOf(id);
    if (!state.memory) {
      state.memory = runMemloop(["hook", "session-start", "--agent", "pi"], { session_id: id, cwd: dir }, dir)
        .then((result) => (result.code === 0 ? result.stdout.trim() : ""))
        .catch(() => "");
    }
    return state.memory;
  };

  // Sends the agent back once Pi is idle (a message sent while a run streams would be refused).
  const sendBack = async (ctx, text) => {
    for (let i = 0; i < 200 && !ctx.isIdle(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    // The run it starts is counted now: its before_agent_start only takes it off the pending.
    started += 1;
    pendingSends.add(text);
    pi.sendUserMessage(text);
    // A message Pi refused never starts a run: stop waiting for it.
    setTimeout(() => {
      if (pendingSends.delete(text)) {
        started -= 1;
        changed();
      }
    }, 5000).unref();
  };

  const judge = async (event, ctx) => {
    const id = idOf(ctx);
    const state = sessionOf(id);
    let last;
    for (const message of event.messages || []) {
      if (!message || message.role !== "assistant") continue;
      last = message;
      state.entries += 1;
      for (const part of message.content || []) {
        if (part && part.type === "toolCall" && typeof part.name === "string") state.calls.push(part.name);
      }
    }
    // A run the person aborted, or one that failed, is not sent back; its calls wait.
    if (last && (last.stopReason === "aborted" || last.stopReason === "error")) return;
    const calls = state.calls.splice(0);
    const entries = state.entries;
    state.entries = 0;
    const result = await runMemloop(
      ["hook", "stop", "--agent", "pi"],
      { session_id: id, cwd: ctx.cwd, tool_calls: calls, assistant_messages: entries },
      ctx.cwd,
    );
    if (result.code !== 0 && result.code !== 2) {
      // The gate did not read them: handed over again at the next stop.
      state.calls.unshift(...calls);
      state.entries += entries;
      return;
    }
    if (result.code !== 2 || state.sendBacks >= MAX_SEND_BACKS) {
      state.sendBacks = 0;
      return;
    }
    state.sendBacks += 1;
    const text = result.stderr.trim() || "KNOWLEDGE CHECK: store what you learned. This is mandatory.";
    state.sentBack.add(text);
    await sendBack(ctx, text);
  };

  pi.on("session_start", async (_event, ctx) => {
    try {
      memoryOf(idOf(ctx), ctx.cwd);
    } catch {}
  });

  pi.on("session_compact", async (_event, ctx) => {
    try {
      // The summary replaced the older turns: the next prompt reads the index afresh.
      sessionOf(idOf(ctx)).memory = undefined;
    } catch {}
  });

  pi.on("before_agent_start", async (event, ctx) => {
    const prompt = typeof event.prompt === "string" ? event.prompt : "";
    if (!pendingSends.delete(prompt)) started += 1;
    try {
      const id = idOf(ctx);
      const state = sessionOf(id);
      const answer = {};
      const memory = await memoryOf(id, ctx.cwd);
      if (memory) answer.systemPrompt = `${event.systemPrompt}\n\n${memory}`;
      if (prompt.trim() && !state.sentBack.has(prompt)) {
        const result = await runMemloop(["hook", "prompt", "--agent", "pi"], { session_id: id, cwd: ctx.cwd, prompt }, ctx.cwd);
        const text = result.code === 0 ? result.stdout.trim() : "";
        if (text) answer.message = { customType: "memloop-recall", content: text, display: false };
      }
      return answer;
    } catch {
      return undefined;
    }
  });

  pi.on("agent_end", async (event, ctx) => {
    const id = idOf(ctx);
    const state = sessionOf(id);
    // One judgement at a time per session, in the order the runs ended.
    state.chain = state.chain
      .then(() => judge(event, ctx))
      .catch(() => {})
      .finally(() => {
        judged += 1;
        changed();
      });
    await state.chain;
  });

  pi.on("session_shutdown", async (_event, ctx) => {
    try {
      // With a person at the terminal, quitting is their call; a one-shot run waits for the gate.
      if (!ctx.hasUI) {
        const deadline = Date.now() + SETTLE_MS;
        while (!settled() && Date.now() < deadline) {
          await new Promise((resolve) => {
            wake = resolve;
            setTimeout(resolve, 100);
          });
        }
      }
    } catch {}
    if (server) server.stop();
  });
}
