//! What the notes may take: all searchable notes' files together (`[memory] max_bytes`) and one
//! note's file (`[memory] max_note_bytes`). A write that would pass either is refused whole, as
//! Knecht refuses a copy over its cap: a truncation the agent would not notice leaves it working
//! from notes with holes, while a refusal tells it to tidy up first. Nothing already stored is
//! touched by a refusal.
//!
//! The check costs the same at 100 and at 100,000 notes: the total comes from the index (the
//! segment's header and the delta), not from the files. Only a refusal lists the index's
//! records, to name the notes worth consolidating or forgetting.

use super::ids::timestamp;
use super::index::doc::{DocMeta, Stamp};

/// The limits, as `[memory]` in memloop.toml sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// All searchable notes' files together, in bytes (forgotten notes do not count: they are
    /// out of every answer, and forgetting is how an agent makes room).
    pub max_bytes: u64,
    /// One note's file, front matter included, in bytes.
    pub max_note_bytes: u64,
}

impl Budget {
    pub fn of(config: &crate::config::MemoryConfig) -> Budget {
        Budget {
            max_bytes: config.max_bytes,
            max_note_bytes: config.max_note_bytes,
        }
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::of(&crate::config::MemoryConfig::default())
    }
}

/// How many notes a refusal names of each kind.
const NAMED: usize = 3;
/// Importance up to this is "low": below the 4 to 6 most notes get.
const LOW_IMPORTANCE: u8 = 3;

/// Why a note of `size` bytes may not be written, or `None` when it fits. `total` is what the
/// searchable notes take now and `replaced` what the note it overwrites took (0 for a new
/// note); `records` lists the index's records, called only for a refusal.
pub fn refusal(
    budget: &Budget,
    size: u64,
    total: u64,
    replaced: u64,
    records: impl FnOnce() -> anyhow::Result<Vec<(String, Stamp, DocMeta)>>,
) -> Option<String> {
    if size > budget.max_note_bytes {
        return Some(format!(
            "refused, nothing was stored: this note would be {size} bytes on disk, over the \
             cap of {} bytes a note may have ([memory] max_note_bytes in memloop.toml). A note \
             holds one fact and its reason: shorten it, or split it into notes of one fact \
             each, and store again.",
            budget.max_note_bytes
        ));
    }
    let after = total.saturating_sub(replaced).saturating_add(size);
    // A write that adds nothing (a forget, a shorter rewrite) is never refused, even over a
    // budget lowered below what the notes already take: it is how room is made.
    if after <= budget.max_bytes || size <= replaced {
        return None;
    }
    let mut message = format!(
        "refused, nothing was stored and no note was changed: with this note ({size} bytes) the \
         notes would take {after} bytes, over the budget of {} bytes ([memory] max_bytes in \
         memloop.toml). Make room first, then store it again: consolidate notes that say \
         related things into one (memory_store the combined note, then memory_forget each \
         note it replaces), or memory_forget notes that are stale or no longer worth keeping \
         (forgotten notes do not count).",
        budget.max_bytes
    );
    let mut live: Vec<(String, u64, DocMeta)> = match records() {
        Ok(records) => records
            .into_iter()
            .filter(|(_, _, meta)| meta.searchable)
            .map(|(id, stamp, meta)| (id, stamp.size, meta))
            .collect(),
        Err(_) => Vec::new(),
    };
    live.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let largest: Vec<String> = live
        .iter()
        .take(NAMED)
        .map(|(id, size, _)| format!("{id} ({size} bytes)"))
        .collect();
    if !largest.is_empty() {
        message.push_str(&format!(" Largest: {}.", largest.join(", ")));
    }
    live.retain(|(_, _, meta)| meta.importance <= LOW_IMPORTANCE);
    live.sort_by(|a, b| (a.2.at_ms, a.2.importance, &a.0).cmp(&(b.2.at_ms, b.2.importance, &b.0)));
    let oldest: Vec<String> = live
        .iter()
        .take(NAMED)
        .map(|(id, size, meta)| {
            let date = timestamp(meta.at_ms.max(0) as u64);
            format!(
                "{id} (importance {}, written {}, {size} bytes)",
                meta.importance,
                &date[..10]
            )
        })
        .collect();
    if !oldest.is_empty() {
        message.push_str(&format!(
            " Oldest of low importance (3 or less): {}.",
            oldest.join(", ")
        ));
    }
    message.push_str(
        " context_query or `memloop memory show <id>` shows a note; a person may raise \
         max_bytes instead.",
    );
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        id: &str,
        size: u64,
        importance: u8,
        at_ms: i64,
        searchable: bool,
    ) -> (String, Stamp, DocMeta) {
        (
            id.to_owned(),
            Stamp {
                ino: 1,
                mtime_ns: 0,
                size,
            },
            DocMeta {
                len: 10,
                at_ms,
                day: 0,
                importance,
                searchable,
                line: String::new(),
            },
        )
    }

    const BUDGET: Budget = Budget {
        max_bytes: 1000,
        max_note_bytes: 300,
    };

    #[test]
    fn fits_up_to_the_byte() {
        let none = || -> anyhow::Result<Vec<_>> { panic!("a store that fits lists nothing") };
        assert_eq!(refusal(&BUDGET, 300, 700, 0, none), None);
        // Replacing a note gives its bytes back first.
        assert_eq!(refusal(&BUDGET, 250, 1000, 250, none), None);
        // Already over a lowered budget: what shrinks the total (a forget is 0 bytes) passes.
        assert_eq!(refusal(&BUDGET, 0, 5000, 250, none), None);
        assert_eq!(refusal(&BUDGET, 200, 5000, 250, none), None);
        assert!(refusal(&BUDGET, 251, 5000, 250, || Ok(Vec::new())).is_some());
    }

    #[test]
    fn a_note_over_its_cap_is_refused_whatever_the_total() {
        let message = refusal(&BUDGET, 301, 0, 0, || Ok(Vec::new())).unwrap();
        assert!(message.contains("301 bytes"), "{message}");
        assert!(message.contains("max_note_bytes"), "{message}");
        assert!(message.contains("split it"), "{message}");
    }

    #[test]
    fn over_the_total_names_the_largest_and_the_oldest_unimportant_notes() {
        let records = vec![
            record("n-big", 290, 7, 3_000, true),
            record("n-mid", 200, 2, 2_000, true),
            record("n-old", 100, 1, 1_000, true),
            record("n-newer", 120, 3, 5_000, true),
            record("n-important-old", 100, 8, 500, true),
            // Forgotten notes are out of the total and out of the advice.
            record("n-forgotten", 280, 1, 10, false),
        ];
        let message = refusal(&BUDGET, 200, 900, 0, move || Ok(records)).unwrap();
        assert!(message.contains("would take 1100 bytes"), "{message}");
        assert!(message.contains("budget of 1000 bytes"), "{message}");
        assert!(message.contains("memory_forget"), "{message}");
        assert!(message.contains("consolidate"), "{message}");
        assert!(
            message.contains("Largest: n-big (290 bytes), n-mid (200 bytes), n-newer (120 bytes)."),
            "{message}"
        );
        assert!(
            message.contains(
                "(3 or less): n-old (importance 1, written 1970-01-01, 100 bytes), n-mid"
            ),
            "{message}"
        );
        assert!(!message.contains("n-forgotten"), "{message}");
        assert!(
            !message.contains("n-important-old (importance"),
            "{message}"
        );
    }
}
