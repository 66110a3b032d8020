//! Copilot's index after a compaction. Copilot 1.0.102's `sessionStart` hook gives the index as
//! the session's first user message, but its compaction summary drops that message and
//! `sessionStart` has no compaction source. So memloop's `preCompact` hook leaves a note for
//! the session, and its `userPromptSubmitted` hook (whose `additionalContext` is appended to
//! the prompt) gives the index on the first prompt after the note, taking it.
//!
//! Which prompt gets the index is decided from the hook input's `sessionId` alone, before the
//! repository or the store is read: a prompt without a note costs one failed remove in the
//! gate's state folder (`gate::state`, pruned with the gate's files). Facts:
//! xtask/src/e2e/session_start_facts.md (Copilot CLI section).

use crate::gate::state::Store;

/// The agent name the state files are keyed by (the gate's, so a session's files go together).
const AGENT: &str = "copilot";

/// The right to give the index again on this prompt, taken by [`claim_after_compaction`].
pub struct Claim {
    store: Store,
    session: String,
}

impl Claim {
    /// Leaves the note again when the index could not be given, so the next prompt tries again.
    pub fn give_back(self) {
        let _ = self.store.mark_compaction(AGENT, &self.session);
    }
}

/// For a prompt of `session`: the claim when a compaction was noted since the index was last
/// given, `None` when the session's context holds it still.
pub fn claim_after_compaction(session: &str) -> anyhow::Result<Option<Claim>> {
    let store = Store::open()?;
    if !store.take_compaction(AGENT, session)? {
        return Ok(None);
    }
    Ok(Some(Claim {
        store,
        session: session.to_owned(),
    }))
}

/// The session (re)starts with the index: a note left before it is no reason to give it twice.
pub fn started(session: &str) {
    if let Ok(store) = Store::open() {
        let _ = store.take_compaction(AGENT, session);
    }
}

/// Notes that `session` is being compacted: its next prompt gets the index again.
pub fn note_compaction(session: &str) -> anyhow::Result<()> {
    Store::open()?.mark_compaction(AGENT, session)
}

/// Copilot runs memloop's prompt hook (`--after-compaction`) on every prompt and its preCompact
/// hook before each compaction: whether a prompt gets the index is settled from the input's
/// `sessionId` alone, before the repository or the store is read.
pub struct Dialect;

impl crate::hook::StartDialect for Dialect {
    fn form(&self) -> crate::hook::Form {
        crate::hook::Form::CopilotJson
    }

    fn turn(
        &self,
        input: Option<&serde_json::Value>,
        event: crate::hook::Event,
        after_compaction: bool,
    ) -> anyhow::Result<crate::hook::Turn> {
        use crate::hook::{Event, Turn};
        let session = input
            .and_then(|input| input.get("sessionId").or_else(|| input.get("session_id")))
            .and_then(serde_json::Value::as_str)
            .filter(|id| !id.is_empty());
        Ok(match (event, session) {
            // Copilot 1.0.102 has no output type for preCompact (the SDK's hook types): the
            // note is all that matters.
            (Event::PreCompact, Some(session)) => {
                note_compaction(session)?;
                Turn::Quiet
            }
            (Event::SessionStart, Some(session)) if after_compaction => {
                match claim_after_compaction(session)? {
                    None => Turn::Quiet,
                    Some(claim) => Turn::Give(Some(Box::new(move || claim.give_back()))),
                }
            }
            // Without a session to ask about, a prompt hook cannot tell: it gives nothing
            // rather than the index on every prompt.
            (Event::SessionStart, None) if after_compaction => Turn::Quiet,
            (Event::SessionStart, Some(session)) => {
                started(session);
                Turn::Give(None)
            }
            _ => Turn::Give(None),
        })
    }
}

/// The prompt hook is also where the session start is given: one hook, both jobs.
impl crate::hook::PromptDialect for Dialect {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::TopLevel
    }

    fn recognises(&self, input: &serde_json::Value) -> bool {
        super::gate::recognises(input)
    }

    fn start(&self) -> Option<(&dyn crate::hook::StartDialect, bool)> {
        Some((self, true))
    }
}
