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
