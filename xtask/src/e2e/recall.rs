//! Scenario "recall": a note is in the repository's memory before the session; the real agent,
//! run against the fake model, sends three prompts in one session. The request for a prompt that
//! matches nothing (first) holds no recalled note; the request for a prompt that matches the note
//! holds the note's full text once; the request for a second matching prompt holds it still once
//! (the first copy, in the history): memloop did not give it again. Facts: recall_facts.md.
//!
//! Each agent is one function here; adding an agent adds one function and one scenario line.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::config::expect;
use super::fake_model::{Dialect, Exchange, FakeModel};
use super::proc::{self, Output, Proc};
use super::sandbox::Sandbox;
use super::session_start::{all_text, conversation_calls, quiet_script, save, seed};
use super::{Ctx, agents, memloop};

/// How memloop's recall text opens (`memory::recall`): counted in each request.
pub const RECALL_MARK: &str = "memloop recall: notes from this repository's memory";
/// A part of the seed note that only its full text holds (the index line stops before it).
pub const BODY_MARK: &str = "lacks the legacy provider the signing step loads";

/// The three prompts of a session, in order: nothing matches, the note matches, it matches again.
pub const PROMPTS: [&str; 3] = [
    "Write a limerick about a purple giraffe on roller skates.",
    "Why does the release build fail to load the OpenSSL legacy provider when signing?",
    "Remind me what the release signing step needs from OpenSSL.",
];

fn needs(ctx: &Ctx) -> Result<()> {
    super::session_start::needs(ctx)
}

fn numbered(ex: Exchange) -> (usize, Value) {
    (ex.seq, ex.body)
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The check every agent's scenario ends with: `firsts` holds, per prompt, the first
/// conversation request the model received for it (its number and body).
pub fn check_requests(firsts: &[(usize, Value)], out: &Output) -> Result<()> {
    check_requests_wanting(firsts, out, [0, 1, 1])
}

/// [`check_requests`] with how often each prompt's request must hold the note.
fn check_requests_wanting(
    firsts: &[(usize, Value)],
    out: &Output,
    wanted: [usize; 3],
) -> Result<()> {
    if firsts.len() != PROMPTS.len() {
        bail!(
            "{} of {} prompts reached the model\n{}",
            firsts.len(),
            PROMPTS.len(),
            out.report()
        );
    }
    for (((seq, body), want), prompt) in firsts.iter().zip(wanted).zip(PROMPTS) {
        let text = all_text(body);
        let (recalls, bodies) = (count(&text, RECALL_MARK), count(&text, BODY_MARK));
        expect(
            recalls == want && bodies == want,
            &format!(
                "request #{} (prompt {prompt:?}) holds memloop's recall {recalls} time(s) and the \
                 note's full text {bodies} time(s), want {want}:\n{}",
                seq,
                proc::tail(&text, 3000)
            ),
            out,
        )?;
        println!("   request #{seq} ({prompt:?}): the note's full text {bodies} time(s)");
    }
    Ok(())
}

/// Claude Code in one process (stream-json input, three prompts): memloop's UserPromptSubmit
/// hook's `additionalContext` reaches the request of its prompt.
pub fn claude(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    agents::claude(sb, true)?;
    let fake = FakeModel::start(Dialect::Anthropic, quiet_script(ctx, sb))?;
    sb.set_env("ANTHROPIC_BASE_URL", fake.base_url());
    sb.set_env("ANTHROPIC_AUTH_TOKEN", "sk-e2e");
    sb.set_env("ENABLE_TOOL_SEARCH", "false");
    let mut cmd = sb.command(ctx.tools.bin.join("claude"));
    cmd.args([
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let mut firsts = Vec::new();
    for prompt in PROMPTS {
        let before = conversation_calls(&fake).len();
        let line = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}});
        p.write_stdin(&format!("{line}\n"))?;
        if p.wait_line(deadline, |l| l.contains("\"type\":\"result\""))
            .is_none()
        {
            break;
        }
        if let Some(first) = conversation_calls(&fake).into_iter().nth(before) {
            firsts.push(numbered(first));
        }
    }
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    save(sb, &fake);
    if firsts.len() < PROMPTS.len() {
        bail!(
            "Claude Code answered {} of {} prompts within {:.0?}\nmodel requests:\n{}{}",
            firsts.len(),
            PROMPTS.len(),
            ctx.gate_timeout,
            fake.transcript(),
            out.report()
        );
    }
    check_requests(&firsts, &out)
}

/// Kimi Code: three `kimi -p` runs of one session (`-c` continues it). memloop's
/// UserPromptSubmit hook (`session-start --agent kimi`, one hook for both jobs) gives the index
/// on the first prompt and the matching notes on each; its stdout is a `hook_result` message
/// before the prompt.
pub fn kimi(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    agents::kimi_trust(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, quiet_script(ctx, sb))?;
    agents::kimi_model_env(sb, &fake.base_url());
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, text) in PROMPTS.iter().enumerate() {
        let before = conversation_calls(&fake).len();
        let mut args = vec!["-p", text, "--output-format", "stream-json"];
        if i > 0 {
            args.push("-c");
        }
        let out = sb.run(ctx.tools.bin.join("kimi"), &args, ctx.gate_timeout)?;
        if !out.success() {
            save(sb, &fake);
            bail!(
                "`kimi -p {text:?}` failed\nmodel requests:\n{}{}",
                fake.transcript(),
                out.report()
            );
        }
        if let Some(first) = conversation_calls(&fake).into_iter().nth(before) {
            firsts.push(numbered(first));
        }
        last = Some(out);
    }
    save(sb, &fake);
    let out = last.expect("three prompts ran");
    check_requests(&firsts, &out)
}

/// Copilot CLI: three `copilot -p` runs of one session (`--resume <id>` after the first). Its
/// `userPromptSubmitted` hook (`session-start --agent copilot --after-compaction`, one hook for
/// both jobs) prints `{"additionalContext"}`, which Copilot appends to the prompt's message.
pub fn copilot(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    use super::fake_responses::{FakeResponses, Script, Step};
    needs(ctx)?;
    let fake = FakeResponses::start(Script {
        steps: vec![Step::Say("Hello.".into())],
        latency: ctx.model_latency,
    })?;
    super::copilot::install(ctx, sb, &fake, "copilot")?;
    seed(sb)?;
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, text) in PROMPTS.iter().enumerate() {
        let before = fake.model_calls().len();
        let out = if i == 0 {
            super::copilot::prompt(ctx, sb, &fake, text)?
        } else {
            let session = super::copilot_start::only_session(sb)?;
            let args = [
                "--resume",
                &session,
                "-p",
                text,
                "--allow-all",
                "--output-format",
                "json",
            ];
            let out = sb.run(super::copilot::copilot(ctx), &args, ctx.gate_timeout)?;
            expect(
                out.success(),
                &format!("`copilot --resume -p {text:?}` failed"),
                &out,
            )?;
            out
        };
        let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
        if let Some(first) = fake.model_calls().into_iter().nth(before) {
            firsts.push((first.seq, first.body));
        }
        last = Some(out);
    }
    let out = last.expect("three prompts ran");
    check_requests(&firsts, &out)
}

/// Qwen Code in one process (stream-json input, three prompts): memloop's UserPromptSubmit
/// hook's `hookSpecificOutput.additionalContext` reaches the request of its prompt.
pub fn qwen(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    let mut script = quiet_script(ctx, sb);
    script.write_tool = "write_file".into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    super::qwen::set_up_user(sb, Some(&fake.base_url()), false)?;
    let init = sb.run(
        "memloop",
        &["init", "--yes", "--agents", "qwen", "--trust"],
        Duration::from_secs(60),
    )?;
    expect(
        init.success(),
        "memloop init --agents qwen --trust failed",
        &init,
    )?;
    seed(sb)?;
    let mut cmd = sb.command(ctx.tools.bin.join("qwen"));
    cmd.args([
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--yolo",
    ]);
    let deadline = Instant::now() + ctx.gate_timeout;
    let mut p = Proc::spawn(cmd)?;
    let mut firsts = Vec::new();
    for prompt in PROMPTS {
        let before = conversation_calls(&fake).len();
        let line = json!({"type": "user", "message": {"role": "user", "content": prompt}});
        p.write_stdin(&format!("{line}\n"))?;
        if p.wait_line(deadline, |l| l.contains("\"type\":\"result\""))
            .is_none()
        {
            break;
        }
        if let Some(first) = conversation_calls(&fake).into_iter().nth(before) {
            firsts.push(numbered(first));
        }
    }
    p.close_stdin();
    let out = p.finish(deadline.max(Instant::now() + Duration::from_secs(20)));
    save(sb, &fake);
    check_requests(&firsts, &out)
}

/// Gemini CLI: three `gemini -p` runs of one session (`--resume latest` after the first).
/// memloop's BeforeAgent hook's `hookSpecificOutput.additionalContext` reaches the request of
/// its prompt (as `<hook_context>` after the prompt's text). Gemini CLI 0.61.0 does not keep
/// that context in the history it resumes from, so the third request holds no copy at all:
/// memloop did not give it again, and the resumed session lost the first (recall_facts.md).
pub fn gemini(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    use super::fake_gemini::{FakeGemini, Script, Step};
    needs(ctx)?;
    let fake = FakeGemini::start(Script {
        steps: vec![Step::Say("Hello.".into())],
        latency: ctx.model_latency,
    })?;
    super::gemini_memloop::install(ctx, sb, &fake)?;
    seed(sb)?;
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, text) in PROMPTS.iter().enumerate() {
        let before = fake.model_calls().len();
        let mut args = vec!["-p", text, "--yolo", "--output-format", "stream-json"];
        if i > 0 {
            args.extend(["--resume", "latest"]);
        }
        let out = sb.run("gemini", &args, ctx.gate_timeout)?;
        expect(
            out.success(),
            &format!("`gemini -p {text:?}` failed\n{}", fake.transcript()),
            &out,
        )?;
        if let Some(first) = fake.model_calls().into_iter().nth(before) {
            firsts.push((first.seq, first.body));
        }
        last = Some(out);
    }
    let out = last.expect("three prompts ran");
    check_requests_wanting(&firsts, &out, [0, 1, 0])
}

/// Codex CLI: three `codex exec` runs of one session (`codex exec resume --last` after the
/// first). memloop's UserPromptSubmit hook in `.codex/hooks.json`, trusted by the hash memloop
/// wrote (checked in `hooks/list`), prints `hookSpecificOutput.additionalContext`, which Codex
/// puts in the prompt's turn as a developer message; a resumed session keeps it in the history.
pub fn codex(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    use super::fake_responses::{FakeResponses, Script, Step};
    needs(ctx)?;
    let fake = FakeResponses::start(Script {
        steps: PROMPTS.iter().map(|_| Step::Say("Hello.".into())).collect(),
        latency: ctx.model_latency,
    })?;
    super::codex_memloop::install(ctx, sb, Some(&fake.base_url()))?;
    seed(sb)?;
    let (key, hash, _) =
        super::codex_memloop::trusted_hook(ctx, sb, "user_prompt_submit", "UserPromptSubmit")?;
    println!("   hooks/list: {key} {hash} trusted");
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, text) in PROMPTS.iter().enumerate() {
        let before = fake.model_calls().len();
        let out = if i == 0 {
            super::codex::exec(ctx, sb, &fake, text)?
        } else {
            let args = ["exec", "resume", "--last", "--json", text];
            let out = sb.run(super::codex::codex(ctx), &args, ctx.gate_timeout)?;
            let _ = std::fs::write(sb.root.join("model-requests.jsonl"), fake.dump());
            expect(
                out.success(),
                &format!(
                    "`codex exec resume --last {text:?}` failed\nmodel requests:\n{}",
                    fake.transcript()
                ),
                &out,
            )?;
            out
        };
        if let Some(first) = fake.model_calls().into_iter().nth(before) {
            firsts.push((first.seq, first.body));
        }
        last = Some(out);
    }
    let out = last.expect("three prompts ran");
    check_requests(&firsts, &out)
}

/// OpenCode: three one-shot `opencode run` calls of one session (`--continue` after the first).
/// memloop's plugin (`chat.message`) adds the notes that match each user message to it as a
/// synthetic text part, saved with the message; the continued session sends it again as history.
pub fn opencode(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    let mut script = quiet_script(ctx, sb);
    script.write_tool = "write".into();
    script.store_tool = "memory_memory_store".into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    agents::opencode(sb, &ctx.tools, Some(&fake.base_url()))?;
    runs_of_one_session(ctx, sb, &fake, "opencode")
}

/// Kilo Code (OpenCode's plugin API, memloop's plugin calling `--agent kilo`): as [`opencode`]
/// with `kilo run`.
pub fn kilo(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    super::kilo::init(sb, "kilo")?;
    seed(sb)?;
    let mut script = quiet_script(ctx, sb);
    script.write_tool = "write".into();
    script.store_tool = super::kilo::STORE.into();
    let fake = FakeModel::start(Dialect::OpenAi, script)?;
    super::kilo::set_up(sb, Some(&fake.base_url()))?;
    runs_of_one_session(ctx, sb, &fake, "kilo")
}

/// `<program> run <prompt>` for each prompt, `--continue` after the first; then the check.
fn runs_of_one_session(ctx: &Ctx, sb: &mut Sandbox, fake: &FakeModel, program: &str) -> Result<()> {
    let mut firsts = Vec::new();
    let mut last = None;
    for (i, text) in PROMPTS.iter().enumerate() {
        let before = conversation_calls(fake).len();
        let mut args = vec!["run", "--print-logs"];
        if i > 0 {
            args.push("--continue");
        }
        args.push(text);
        let out = sb.run(ctx.tools.bin.join(program), &args, ctx.gate_timeout)?;
        save(sb, fake);
        let _ = std::fs::write(
            sb.root.join(format!("{program}-run-{}.log", i + 1)),
            format!("{}\n{}", out.stdout, out.stderr),
        );
        if !out.success() {
            bail!(
                "`{program} {}` failed\nmodel requests:\n{}{}",
                args.join(" "),
                fake.transcript(),
                out.report()
            );
        }
        if let Some(first) = conversation_calls(fake).into_iter().nth(before) {
            firsts.push(numbered(first));
        }
        last = Some(out);
    }
    let out = last.expect("three prompts ran");
    check_requests(&firsts, &out)
}
