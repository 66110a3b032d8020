//! Kimi Code's session start. Kimi Code 2.1.0 discards what SessionStart and PreCompact hooks
//! print; the earliest output that reaches its model is a `UserPromptSubmit` hook's stdout,
//! added to the context as a user message before the prompt's turn runs. That event fires for
//! every prompt, so memloop gives the index on a session's first prompt and on the first prompt
//! after each compaction (Kimi's summary drops hook messages), and stays silent otherwise.
//!
//! Which prompt is which is decided from the hook input's `session_id` alone, before memloop
//! reads the repository or the store: a repeat prompt costs one failed create and one failed
//! remove of an empty file in the gate's state folder (`gate::state`, pruned with the gate's
//! files). memloop's PreCompact hook leaves the compaction note; Kimi awaits PreCompact before
//! it summarises, so the note is there before any later prompt. Facts:
//! xtask/src/e2e/session_start_facts.md (Kimi Code section).

use crate::gate::state::Store;

/// The agent name the state files are keyed by (the gate's, so a session's files go together).
const AGENT: &str = "kimi";

/// The right to give the index on this prompt, taken by [`claim`].
pub struct Claim {
    store: Store,
    session: String,
    after_compaction: bool,
}

impl Claim {
    /// Hands the right back when the index could not be given, so the next prompt tries again.
    pub fn give_back(self) {
        if self.after_compaction {
            let _ = self.store.mark_compaction(AGENT, &self.session);
        } else {
            self.store.release_start(AGENT, &self.session);
        }
    }
}

/// For a prompt of `session`: the claim when the index is due (first prompt, or first after a
/// compaction), `None` when the session's context holds it already.
pub fn claim(session: &str) -> anyhow::Result<Option<Claim>> {
    let store = Store::open()?;
    let after_compaction = if store.claim_start(AGENT, session)? {
        // A note left before the first prompt is no reason to give the index twice.
        let _ = store.take_compaction(AGENT, session);
        false
    } else if store.take_compaction(AGENT, session)? {
        true
    } else {
        return Ok(None);
    };
    Ok(Some(Claim {
        store,
        session: session.to_owned(),
        after_compaction,
    }))
}

/// Notes that `session` is being compacted: its next prompt gets the index again.
pub fn note_compaction(session: &str) -> anyhow::Result<()> {
    Store::open()?.mark_compaction(AGENT, session)
}

/// Kimi Code runs memloop's session-start piece on every prompt and its pre-compact piece before
/// each compaction: with a `session_id` in the input, a prompt gives the text only when it is
/// due and a compaction only leaves the note. Run by hand (no `session_id`), it prints like any
/// other agent's.
pub struct Dialect;

impl crate::hook::StartDialect for Dialect {
    fn form(&self) -> crate::hook::Form {
        crate::hook::Form::Text
    }

    fn turn(
        &self,
        input: Option<&serde_json::Value>,
        event: crate::hook::Event,
        _after_compaction: bool,
    ) -> anyhow::Result<crate::hook::Turn> {
        use crate::hook::{Event, Turn};
        let session = input
            .and_then(|input| input.get("session_id")?.as_str())
            .filter(|id| !id.is_empty());
        let Some(session) = session else {
            return Ok(Turn::Give(None));
        };
        Ok(match event {
            // What Kimi's PreCompact hooks print goes nowhere: the note is all that matters.
            Event::PreCompact => {
                note_compaction(session)?;
                Turn::Quiet
            }
            Event::SessionStart => match claim(session)? {
                None => Turn::Quiet,
                Some(claim) => Turn::Give(Some(Box::new(move || claim.give_back()))),
            },
        })
    }
}

/// The prompt hook is also where the session start is given: one hook, both jobs.
impl crate::hook::PromptDialect for Dialect {
    fn form(&self) -> crate::hook::PromptForm {
        crate::hook::PromptForm::Text
    }

    fn start(&self) -> Option<(&dyn crate::hook::StartDialect, bool)> {
        Some((self, false))
    }
}
