//! Scenario "session-start-kimi": Kimi Code 2.1.0 discards what start hooks print, so memloop's
//! UserPromptSubmit hook gives the index, once per session and again after a compaction (facts:
//! session_start_facts.md). Four `kimi -p` runs of one session (`-c` continues it) against the
//! fake model: the index is in the first request; the second prompt adds no second copy; the
//! third runs with a context window so small that Kimi compacts before answering (memloop's
//! PreCompact hook notes it); the fourth prompt's request holds the index again, after Kimi's
//! summary, which drops hook messages.

use anyhow::{Result, bail};
use serde_json::Value;

use super::config::expect;
use super::fake_model::{Dialect, Exchange, FakeModel};
use super::proc::{self, Output};
use super::sandbox::Sandbox;
use super::session_start::{
    NOTE_MARK, all_text, conversation_calls, needs, quiet_script, save, seed,
};
use super::{Ctx, agents, memloop};

/// The heading of memloop's index: once per copy of it in a request.
const INDEX_MARK: &str = "Memory index, most important and recent first";
/// How Kimi Code 2.1.0 asks the model for the summary (its compaction instruction).
const SUMMARY_REQUEST_MARK: &str = "Create a handoff summary";
/// How Kimi Code 2.1.0 opens its summary message in the compacted context.
const COMPACTED_MARK: &str = "The conversation so far has been compacted";
/// Kimi's default reserve is 50,000 tokens: a window one token larger makes the first step of
/// a turn compact (`used + reserve >= window`).
const TINY_WINDOW: &str = "50001";
/// Kimi's default window (DEFAULT_MAX_CONTEXT_SIZE in 2.1.0).
const USUAL_WINDOW: &str = "262144";

/// One `kimi -p` of the sandbox's session (`-c` after the first).
fn prompt(ctx: &Ctx, sb: &Sandbox, text: &str, continues: bool) -> Result<Output> {
    let mut args = vec!["-p", text, "--output-format", "stream-json"];
    if continues {
        args.push("-c");
    }
    let out = sb.run(ctx.tools.bin.join("kimi"), &args, ctx.gate_timeout)?;
    expect(out.success(), &format!("`kimi -p {text:?}` failed"), &out)?;
    expect(
        !out.stderr.contains("Ignored invalid config section"),
        "Kimi ignored a config section (the hooks memloop wrote?)",
        &out,
    )?;
    Ok(out)
}

fn copies(text: &str) -> usize {
    text.matches(INDEX_MARK).count()
}

fn messages(ex: &Exchange) -> Vec<Value> {
    ex.body["messages"].as_array().cloned().unwrap_or_default()
}

pub fn run(ctx: &Ctx, sb: &mut Sandbox) -> Result<()> {
    needs(ctx)?;
    memloop::install(sb, &ctx.caps, false, None)?;
    seed(sb)?;
    agents::kimi_trust(sb)?;
    let fake = FakeModel::start(Dialect::OpenAi, quiet_script(ctx, sb))?;
    agents::kimi_model_env(sb, &fake.base_url());
    sb.set_env("KIMI_MODEL_MAX_CONTEXT_SIZE", USUAL_WINDOW);
    let outcome = drive(ctx, sb, &fake);
    save(sb, &fake);
    outcome.map_err(|err| anyhow::anyhow!("{err:#}\nmodel requests:\n{}", fake.transcript()))
}

fn drive(ctx: &Ctx, sb: &mut Sandbox, fake: &FakeModel) -> Result<()> {
    let first = prompt(ctx, sb, "Say hello.", false)?;
    let calls = conversation_calls(fake);
    let Some(opening) = calls.first() else {
        bail!("the first prompt sent no conversation request");
    };
    // The index's single note has no closing line naming context_query; its heading marks it.
    let text = all_text(&opening.body);
    expect(
        text.contains(NOTE_MARK) && copies(&text) == 1,
        &format!(
            "the first model request of the session (#{}) lacks the memory index:\n{}",
            opening.seq,
            proc::tail(&text, 3000)
        ),
        &first,
    )?;
    println!(
        "   first request #{} holds the index line {NOTE_MARK:?} (a UserPromptSubmit hook_result message)",
        opening.seq
    );
    let first_turn = calls.len();

    let second = prompt(ctx, sb, "Say hello again.", true)?;
    let calls = conversation_calls(fake);
    let Some(next) = calls.get(first_turn) else {
        bail!("the second prompt sent no conversation request");
    };
    let text = all_text(&Value::Array(messages(next)));
    expect(
        copies(&text) == 1,
        &format!(
            "the second prompt's request (#{}) holds {} copies of the index; expected the first \
             prompt's alone:\n{}",
            next.seq,
            copies(&text),
            proc::tail(&text, 3000)
        ),
        &second,
    )?;
    println!(
        "   second prompt's request #{} carries the first prompt's index only (one copy)",
        next.seq
    );

    sb.set_env("KIMI_MODEL_MAX_CONTEXT_SIZE", TINY_WINDOW);
    let before = fake.model_calls().len();
    let third = prompt(ctx, sb, "Say hello a third time.", true)?;
    let Some(summary) = fake
        .model_calls()
        .into_iter()
        .skip(before)
        .find(|ex| all_text(&ex.body).contains(SUMMARY_REQUEST_MARK))
    else {
        bail!(
            "Kimi did not compact with a {TINY_WINDOW}-token window (no summary request)\n{}",
            third.report()
        );
    };
    println!("   compaction: summary request #{}", summary.seq);
    let gate_dir = sb.xdg_state.join("memloop/gate");
    let noted = std::fs::read_dir(&gate_dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".compact"))
        })
        .unwrap_or(false);
    expect(
        noted,
        "memloop's PreCompact hook left no compaction note in the gate's state folder",
        &third,
    )?;

    sb.set_env("KIMI_MODEL_MAX_CONTEXT_SIZE", USUAL_WINDOW);
    let before = fake.model_calls().len();
    let fourth = prompt(ctx, sb, "Say hello once more.", true)?;
    let Some(after) = conversation_calls(fake)
        .into_iter()
        .find(|ex| ex.seq > before)
    else {
        bail!("the prompt after the compaction sent no conversation request");
    };
    let messages = messages(&after);
    let Some(summary_at) = messages
        .iter()
        .position(|m| all_text(m).contains(COMPACTED_MARK))
    else {
        bail!(
            "the request after the compaction (#{}) holds no compaction summary",
            after.seq
        );
    };
    let given = all_text(&Value::Array(messages[summary_at + 1..].to_vec()));
    expect(
        given.contains(NOTE_MARK) && copies(&given) == 1,
        &format!(
            "the first request after the compaction (#{}) lacks the index after the summary:\n{}",
            after.seq,
            proc::tail(&given, 3000)
        ),
        &fourth,
    )?;
    let before_summary = all_text(&Value::Array(messages[..summary_at].to_vec()));
    println!(
        "   first request after the compaction (#{}) holds the index again, after the summary \
         ({} copies before it)",
        after.seq,
        copies(&before_summary)
    );
    Ok(())
}
