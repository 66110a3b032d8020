// memloop opencode plugin v4
// Written by memloop; `memloop sync` replaces it, `memloop uninstall` removes it.
//
// The memory gate for OpenCode, which has no Stop hook. Every tool call is recorded with
// `memloop hook record --agent opencode`; when a session goes idle, `memloop hook stop --agent
// opencode` decides. Exit 2 means the agent edited files and stored nothing (or skipped the
// lookup): its stderr is sent back to the session as a new prompt. Anything else lets it rest.
//
// memloop is found as $MEMLOOP_BIN, else as `memloop` on PATH. Nothing here may break a
// session: every failure is swallowed and the session simply stops ungated.
//
// One-shot `opencode run "..."` exits at the first idle, before a prompt sent from session.idle
// can run. So the check also runs inside the prompt loop, when a reply's text completes
// (`experimental.text.complete`, awaited by OpenCode 1.18): a reply without tool calls is the
// turn's answer, and a block adds the gate's message to the session with `noReply`, which makes
// the still-running loop take one more turn. The idle path stays for turns that end without text.
//
// Memory at session start: `memloop hook session-start --agent opencode` prints the index of the
// repository's memory (or the lookup rule alone). It is read once per session and added to the
// system prompt of that session's model calls (`experimental.chat.system.transform`), read again
// after `session.compacted`, and `experimental.session.compacting` adds the reminder of
// `memloop hook pre-compact` to the summary's prompt. With `[memory] session_start = false`
// memloop prints nothing and nothing is added.
//
// Recall: `memloop hook prompt --agent opencode` prints the notes of the memory that match a
// prompt's text (nothing when none matches well, or with `[memory] recall = false`). On each user
// message (`chat.message`, awaited before OpenCode saves the message, in the TUI and in one-shot
// `opencode run` alike) that text is added to the message as a synthetic text part: saved with
// the message, so later requests of the session hold it once, sent to the model, and not shown
// in the TUI. memloop remembers per session what it gave, so a note comes once.

import { spawn } from "node:child_process";

// OpenCode fires session.idle again after every send-back; this caps the loop like Claude
// Code's own block cap does.
const MAX_SEND_BACKS = 3;
const TIMEOUT_MS = 10000;
const MAX_STDERR = 64 * 1024;

function runMemloop(args, payload, cwd) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawn(process.env.MEMLOOP_BIN || "memloop", args, {
        cwd,
        stdio: ["pipe", "pipe", "pipe"],
      });
    } catch (err) {
      resolve({ code: null, stdout: "", stderr: String(err) });
      return;
    }
    let stdout = "";
    child.stdout.on("data", (chunk) => {
      if (stdout.length < MAX_STDERR) stdout += chunk;
    });
    let stderr = "";
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch {}
    }, TIMEOUT_MS);
    child.stderr.on("data", (chunk) => {
      if (stderr.length < MAX_STDERR) stderr += chunk;
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

export const MemloopGate = async ({ client, directory }) => {
  const sessions = new Map();
  const sessionOf = (id) => {
    let state = sessions.get(id);
    if (!state) {
      // pending: records still running, so a stop never judges before its calls are written.
      // checkedAt: assistant messages seen at the last check, so an idle right after a check
      // made at the reply's end does not judge the same window again.
      state = {
        pending: Promise.resolve(),
        assistant: new Set(),
        sendBacks: 0,
        checking: false,
        checkedAt: -1,
        agent: undefined,
        model: undefined,
        // The session-start text, read once (a promise, so concurrent calls share one read).
        memory: undefined,
        // The gate's own messages sent into the session: no recall is searched for them.
        sentBack: new Set(),
      };
      sessions.set(id, state);
    }
    return state;
  };

  // Asks memloop for the verdict; the gate's message when the agent must go back, else null.
  const check = async (id) => {
    const state = sessionOf(id);
    if (state.checking) return null;
    state.checking = true;
    try {
      await state.pending;
      state.checkedAt = state.assistant.size;
      const result = await runMemloop(
        ["hook", "stop", "--agent", "opencode"],
        { session_id: id, cwd: directory, assistant_messages: state.assistant.size },
        directory,
      );
      if (result.code !== 2 || state.sendBacks >= MAX_SEND_BACKS) {
        state.sendBacks = 0;
        return null;
      }
      state.sendBacks += 1;
      return result.stderr.trim() || "KNOWLEDGE CHECK: store what you learned. This is mandatory.";
    } finally {
      state.checking = false;
    }
  };

  const onIdle = async (id) => {
    const state = sessionOf(id);
    if (state.checkedAt === state.assistant.size) return;
    const text = await check(id);
    if (!text) return;
    state.sentBack.add(text);
    // Not awaited: the prompt runs a whole new turn, and the event handler must return.
    Promise.resolve()
      .then(() => client.session.prompt({ path: { id }, body: { parts: [{ type: "text", text }] } }))
      .catch(() => {});
  };

  // A reply's text is complete, inside the prompt loop. Only a reply without tool calls ends the
  // turn; a text before a tool call is passed over.
  const onTextComplete = async (input) => {
    const id = input.sessionID;
    const state = sessionOf(id);
    if (typeof input.messageID === "string") state.assistant.add(input.messageID);
    const reply = await client.session.message({ path: { id, messageID: input.messageID } });
    const parts = (reply && reply.data && reply.data.parts) || [];
    if (parts.some((part) => part && part.type === "tool")) return;
    const text = await check(id);
    if (!text) return;
    state.sentBack.add(text);
    const body = { noReply: true, parts: [{ type: "text", text }] };
    // The added message must name the session's agent and model, or OpenCode files it under
    // the default agent.
    if (state.agent) body.agent = state.agent;
    if (state.model) body.model = state.model;
    await client.session.prompt({ path: { id }, body });
  };

  // The session-start text for a session ("" when memloop gives none or fails).
  const memoryOf = (id) => {
    const state = sessionOf(id);
    if (!state.memory) {
      state.memory = runMemloop(["hook", "session-start", "--agent", "opencode"], { session_id: id, cwd: directory }, directory)
        .then((result) => (result.code === 0 ? result.stdout.trim() : ""))
        .catch(() => "");
    }
    return state.memory;
  };

  // The notes that match a user message, added to it as a synthetic part. OpenCode 1.18 saves
  // the parts of `output.parts` as they are: the part carries the message's ids, and its own id
  // only has to start with `prt`; a message's parts are ordered by id, so one extending the last
  // part's id comes right after the person's text.
  const recall = async (input, output) => {
    const state = sessionOf(input.sessionID);
    const texts = output.parts.filter((part) => part && part.type === "text" && !part.synthetic && typeof part.text === "string");
    const prompt = texts.map((part) => part.text).join("\n");
    if (!prompt.trim() || state.sentBack.has(prompt)) return;
    const result = await runMemloop(
      ["hook", "prompt", "--agent", "opencode"],
      { session_id: input.sessionID, cwd: directory, prompt },
      directory,
    );
    const text = result.code === 0 ? result.stdout.trim() : "";
    if (!text) return;
    const ids = output.parts.map((part) => (part && typeof part.id === "string" ? part.id : "")).sort();
    // Without an id to extend (OpenCode gives every part one), a time keeps the id unique.
    const last = ids[ids.length - 1] || `prt_${Date.now().toString(16)}`;
    const messageID = (output.message && output.message.id) || input.messageID;
    output.parts.push({ id: `${last}memloop`, sessionID: input.sessionID, messageID, type: "text", synthetic: true, text });
  };

  return {
    "experimental.chat.system.transform": async (input, output) => {
      try {
        if (!input || typeof input.sessionID !== "string" || !output || !Array.isArray(output.system)) return;
        const text = await memoryOf(input.sessionID);
        if (text) output.system.push(text);
      } catch {}
    },
    "experimental.session.compacting": async (input, output) => {
      try {
        if (!input || typeof input.sessionID !== "string" || !output || !Array.isArray(output.context)) return;
        const result = await runMemloop(["hook", "pre-compact", "--agent", "opencode"], { session_id: input.sessionID, cwd: directory }, directory);
        const text = result.code === 0 ? result.stdout.trim() : "";
        if (text) output.context.push(text);
      } catch {}
    },
    "tool.execute.after": async (input) => {
      try {
        if (!input || typeof input.sessionID !== "string" || typeof input.tool !== "string") return;
        const state = sessionOf(input.sessionID);
        const payload = { tool: input.tool, sessionID: input.sessionID, callID: input.callID };
        state.pending = state.pending
          .then(() => runMemloop(["hook", "record", "--agent", "opencode"], payload, directory))
          .catch(() => {});
      } catch {}
    },
    "chat.message": async (input, output) => {
      try {
        if (!input || typeof input.sessionID !== "string") return;
        const state = sessionOf(input.sessionID);
        if (input.agent) state.agent = input.agent;
        if (input.model) state.model = input.model;
        if (output && Array.isArray(output.parts)) await recall(input, output);
      } catch {}
    },
    "experimental.text.complete": async (input) => {
      try {
        if (!input || typeof input.sessionID !== "string") return;
        await onTextComplete(input);
      } catch {}
    },
    event: async ({ event }) => {
      try {
        if (!event || !event.properties) return;
        if (event.type === "message.updated") {
          const info = event.properties.info;
          if (info && info.role === "assistant" && typeof info.sessionID === "string" && info.id) {
            sessionOf(info.sessionID).assistant.add(info.id);
          }
        } else if (event.type === "session.compacted") {
          // The summary replaced the older turns: the next call reads the index afresh.
          const id = event.properties.sessionID;
          if (typeof id === "string") sessionOf(id).memory = undefined;
        } else if (event.type === "session.deleted") {
          const info = event.properties.info;
          if (info && info.id) sessions.delete(info.id);
        } else if (event.type === "session.idle") {
          const id = event.properties.sessionID;
          if (typeof id === "string") await onIdle(id);
        }
      } catch {}
    },
  };
};
