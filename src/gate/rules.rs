//! The gate's rules: a pure function from the tool calls seen so far and the previous check to a
//! verdict. No I/O here; the adapters feed events in and persist [`Session`] between stops.
//!
//! The rules (DESIGN.md "The gate", issue 3):
//! - allow when the agent is already continuing because of a block (`stop_hook_active`);
//! - allow while the session has fewer than `min_tool_calls` tool calls;
//! - allow when fewer than `interval` assistant entries arrived since the last recorded check;
//! - otherwise record a check and judge only the window since the previous one.
//!
//! Judging only the window is what fixes the seed's second failure story: a slip is reported by
//! the check that covers it and never again, because a flag that no later behaviour can satisfy
//! is nagging, not protection. Edits are judged at every check with no minimum session length,
//! which fixes the first story (short sessions that edit and store nothing slipped through).

use serde::{Deserialize, Serialize};

use crate::config::{GateConfig, Preset};

/// What a tool call counts as. Edit names match exactly; store and lookup names match by
/// substring, so `mcp__memory__memory_store` and a raw `memory_store` both count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Edit,
    Store,
    Lookup,
    /// A shell-like tool (`Bash`, `bash`, `Shell`, ...): what it changed in the worktree is
    /// counted at the check.
    Shell,
    Other,
}

/// The tool-name lists of `[gate]`, ready to classify canonical tool names.
#[derive(Debug, Clone)]
pub struct ToolSets {
    edit: Vec<String>,
    store: Vec<String>,
    lookup: Vec<String>,
    shell: Vec<String>,
    /// `[gate] shell_tools` was set: the agent's own defaults do not apply.
    shell_configured: bool,
}

impl ToolSets {
    pub fn new(gate: &GateConfig) -> ToolSets {
        let keep = |names: &[String]| -> Vec<String> {
            names
                .iter()
                .filter(|name| !name.is_empty())
                .cloned()
                .collect()
        };
        ToolSets {
            edit: keep(&gate.edit_tools),
            store: keep(&gate.store_tools),
            lookup: keep(&gate.lookup_tools),
            shell: gate.shell_tools.as_deref().map(keep).unwrap_or_default(),
            shell_configured: gate.shell_tools.is_some(),
        }
    }

    /// The agent's shell tool names, used unless `[gate] shell_tools` is set.
    pub fn shell_defaults(mut self, names: &[&str]) -> ToolSets {
        if !self.shell_configured {
            self.shell = names.iter().map(|name| (*name).to_owned()).collect();
        }
        self
    }

    pub fn classify(&self, name: &str) -> ToolKind {
        if self.store.iter().any(|part| name.contains(part.as_str())) {
            ToolKind::Store
        } else if self.lookup.iter().any(|part| name.contains(part.as_str())) {
            ToolKind::Lookup
        } else if self.edit.iter().any(|edit| edit == name) {
            ToolKind::Edit
        } else if self.shell.iter().any(|shell| shell == name) {
            ToolKind::Shell
        } else {
            ToolKind::Other
        }
    }
}

/// Tool calls since the last recorded check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub edits: u64,
    pub stores: u64,
    pub lookups: u64,
    pub others: u64,
    /// Shell-like calls (also counted in `others`).
    #[serde(default)]
    pub shells: u64,
    /// Files changed in the worktree since the previous check, counted at the check when the
    /// window holds a shell call.
    #[serde(default)]
    pub worktree_edits: u64,
    /// A store happened while the session had not looked anything up yet.
    pub store_before_lookup: bool,
}

/// Everything the rules need to remember between two stops of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub tool_calls: u64,
    /// Assistant entries (messages), the unit of `interval`.
    pub entries: u64,
    /// `entries` when the last check was recorded.
    pub entries_at_check: u64,
    /// Recorded checks so far; 0 means the next recorded check is the first.
    pub checks: u64,
    pub looked_up: bool,
    pub window: Window,
}

impl Session {
    pub fn assistant_entry(&mut self) {
        self.entries += 1;
    }

    /// For adapters that learn the entry count as a total (the OpenCode plugin). A total lower
    /// than what was seen means the counter restarted (OpenCode was restarted): count from the
    /// new total so the interval is measured against what the new counter has seen.
    pub fn set_entries(&mut self, total: u64) {
        if total < self.entries {
            self.entries_at_check = 0;
        }
        self.entries = total;
    }

    pub fn tool_call(&mut self, kind: ToolKind) {
        self.tool_calls += 1;
        let window = &mut self.window;
        match kind {
            ToolKind::Edit => window.edits += 1,
            ToolKind::Lookup => {
                window.lookups += 1;
                self.looked_up = true;
            }
            ToolKind::Store => {
                window.stores += 1;
                if !self.looked_up {
                    window.store_before_lookup = true;
                }
            }
            ToolKind::Shell => {
                window.shells += 1;
                window.others += 1;
            }
            ToolKind::Other => window.others += 1,
        }
    }
}

/// Why a stop was let through, or what sends the agent back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow(Allow),
    Block(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allow {
    /// The agent is already continuing because of a block.
    Continuing,
    TooFewToolCalls,
    TooSoon,
    /// A check was recorded and found nothing.
    Clean,
}

impl Verdict {
    /// The text the agent reads on a block: the seed's exact framing.
    pub fn message(&self) -> Option<String> {
        match self {
            Verdict::Allow(_) => None,
            Verdict::Block(problems) => Some(format!(
                "KNOWLEDGE CHECK: {} This is mandatory.",
                problems.join(" | ")
            )),
        }
    }
}

/// How the "stored nothing" problem tells the agent to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHint {
    /// The ConvOps preset: the seed's wording, with routes.
    Convops,
    /// Any other server: name the store tool and the server it lives on.
    Tool { tool: String, server: String },
}

impl StoreHint {
    pub fn new(gate: &GateConfig, server: &str, preset: Option<Preset>) -> StoreHint {
        match preset {
            Some(Preset::Convops) => StoreHint::Convops,
            None => StoreHint::Tool {
                tool: gate
                    .store_tools
                    .iter()
                    .find(|name| !name.is_empty())
                    .cloned()
                    .unwrap_or_else(|| "memory_store".to_owned()),
                server: server.to_owned(),
            },
        }
    }

    fn text(&self) -> String {
        match self {
            StoreHint::Convops => "memory_store() the change/decision (supersede if updating). \
                 If you explored files, create_route()/update_route() in ConvOps."
                .to_owned(),
            StoreHint::Tool { tool, server } => format!(
                "{tool}() the change/decision and why on the \"{server}\" server \
                 (supersede if updating)."
            ),
        }
    }
}

pub const NO_LOOKUP: &str = "No lookup at the first check. Query the memory store first.";
pub const STORE_BEFORE_LOOKUP: &str = "Stored before the first lookup. Query the memory store \
     before storing, so a new note can supersede what is already known.";

/// Why no check is due at this stop, or `None` when [`check`] will record one. The caller
/// looks at the worktree only when one is due.
pub fn not_due(session: &Session, stop_hook_active: bool, gate: &GateConfig) -> Option<Allow> {
    if stop_hook_active {
        return Some(Allow::Continuing);
    }
    if session.tool_calls < u64::from(gate.min_tool_calls) {
        return Some(Allow::TooFewToolCalls);
    }
    if session.entries.saturating_sub(session.entries_at_check) < u64::from(gate.interval) {
        return Some(Allow::TooSoon);
    }
    None
}

/// Decides one stop. Records the check in `session` when one is due; the caller persists it.
/// Edits are the edit-tool calls of the window, or the files changed in the worktree when that
/// is more (`window.worktree_edits`, set by the caller when the window holds a shell call).
pub fn check(
    session: &mut Session,
    stop_hook_active: bool,
    gate: &GateConfig,
    hint: &StoreHint,
) -> Verdict {
    if let Some(allow) = not_due(session, stop_hook_active, gate) {
        return Verdict::Allow(allow);
    }
    let first = session.checks == 0;
    let window = std::mem::take(&mut session.window);
    session.checks += 1;
    session.entries_at_check = session.entries;

    let mut problems = Vec::new();
    let edits = window.edits.max(window.worktree_edits);
    if edits > 0 && window.stores == 0 {
        problems.push(format!(
            "Modified {edits} file(s) but stored nothing. {}",
            hint.text()
        ));
    }
    // A session that only talked to the memory server has nothing it should have looked up.
    let worked = edits > 0 || window.others > 0;
    let no_lookup = first && worked && !session.looked_up;
    if no_lookup {
        problems.push(NO_LOOKUP.to_owned());
    }
    // Without any lookup the previous problem already says what to do.
    if window.store_before_lookup && !no_lookup {
        problems.push(STORE_BEFORE_LOOKUP.to_owned());
    }
    if problems.is_empty() {
        Verdict::Allow(Allow::Clean)
    } else {
        Verdict::Block(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> GateConfig {
        GateConfig::default()
    }

    fn hint() -> StoreHint {
        StoreHint::new(&gate(), "memory", None)
    }

    /// Feeds tool calls, one assistant entry each, like a transcript where every message calls
    /// one tool.
    fn feed(session: &mut Session, names: &[&str]) {
        let sets = ToolSets::new(&gate());
        for name in names {
            session.assistant_entry();
            session.tool_call(sets.classify(name));
        }
    }

    fn run(session: &mut Session) -> Verdict {
        check(session, false, &gate(), &hint())
    }

    #[test]
    fn classify_uses_exact_edit_names_and_substring_memory_names() {
        let sets = ToolSets::new(&gate());
        assert_eq!(sets.classify("Edit"), ToolKind::Edit);
        assert_eq!(sets.classify("NotebookEdit"), ToolKind::Edit);
        assert_eq!(sets.classify("edit"), ToolKind::Other);
        assert_eq!(sets.classify("EditX"), ToolKind::Other);
        assert_eq!(sets.classify("mcp__memory__memory_store"), ToolKind::Store);
        assert_eq!(sets.classify("memory_store"), ToolKind::Store);
        assert_eq!(
            sets.classify("mcp__convops__context_query"),
            ToolKind::Lookup
        );
        assert_eq!(sets.classify("route_query"), ToolKind::Lookup);
        assert_eq!(sets.classify("Read"), ToolKind::Other);
    }

    #[test]
    fn empty_names_in_config_match_nothing() {
        let mut config = gate();
        config.store_tools = vec![String::new()];
        let sets = ToolSets::new(&config);
        assert_eq!(sets.classify("Read"), ToolKind::Other);
    }

    #[test]
    fn stop_hook_active_allows_without_recording() {
        let mut session = Session::default();
        feed(&mut session, &["Read", "Edit", "Edit"]);
        let before = session.clone();
        assert_eq!(
            check(&mut session, true, &gate(), &hint()),
            Verdict::Allow(Allow::Continuing)
        );
        assert_eq!(session, before);
    }

    #[test]
    fn fewer_than_min_tool_calls_allows() {
        let mut session = Session::default();
        feed(&mut session, &["Edit", "Edit"]);
        session.assistant_entry();
        assert_eq!(run(&mut session), Verdict::Allow(Allow::TooFewToolCalls));
        assert_eq!(session.checks, 0);
        // The third call makes the check due; the earlier edits are still in the window.
        feed(&mut session, &["Read"]);
        let Verdict::Block(problems) = run(&mut session) else {
            panic!("expected a block");
        };
        assert!(problems[0].starts_with("Modified 2 file(s) but stored nothing."));
    }

    #[test]
    fn fewer_than_interval_entries_since_last_check_allows() {
        let mut session = Session::default();
        feed(&mut session, &["context_query", "Read", "Read"]);
        assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
        feed(&mut session, &["Edit"]);
        assert_eq!(run(&mut session), Verdict::Allow(Allow::TooSoon));
        assert_eq!(session.checks, 1);
        session.assistant_entry();
        assert!(matches!(run(&mut session), Verdict::Block(_)));
    }

    #[test]
    fn edits_without_store_block_with_the_count() {
        let mut session = Session::default();
        feed(&mut session, &["context_query", "Edit", "Write"]);
        let verdict = run(&mut session);
        assert_eq!(
            verdict.message().unwrap(),
            "KNOWLEDGE CHECK: Modified 2 file(s) but stored nothing. memory_store() the \
             change/decision and why on the \"memory\" server (supersede if updating). \
             This is mandatory."
        );
    }

    #[test]
    fn convops_hint_uses_the_seed_wording() {
        let mut session = Session::default();
        feed(
            &mut session,
            &["context_query", "Edit", "Edit", "Read", "Read"],
        );
        let hint = StoreHint::new(&gate(), "convops", Some(Preset::Convops));
        let verdict = check(&mut session, false, &gate(), &hint);
        assert_eq!(
            verdict.message().unwrap(),
            "KNOWLEDGE CHECK: Modified 2 file(s) but stored nothing. memory_store() the \
             change/decision (supersede if updating). If you explored files, \
             create_route()/update_route() in ConvOps. This is mandatory."
        );
    }

    #[test]
    fn hint_names_a_configured_store_tool() {
        let mut config = gate();
        config.store_tools = vec!["remember".to_owned()];
        let hint = StoreHint::new(&config, "notes", None);
        assert!(hint.text().starts_with("remember() the change/decision"));
        assert!(hint.text().contains("on the \"notes\" server"));
    }

    #[test]
    fn a_store_in_the_window_satisfies_the_edit_rule() {
        let mut session = Session::default();
        feed(&mut session, &["context_query", "Edit", "memory_store"]);
        assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
    }

    #[test]
    fn a_store_in_an_earlier_window_does_not_cover_later_edits() {
        let mut session = Session::default();
        feed(&mut session, &["context_query", "Edit", "memory_store"]);
        assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
        feed(&mut session, &["Edit", "Read"]);
        let Verdict::Block(problems) = run(&mut session) else {
            panic!("expected a block");
        };
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("Modified 1 file(s)"));
    }

    #[test]
    fn no_lookup_by_the_first_check_blocks() {
        let mut session = Session::default();
        feed(&mut session, &["Read", "Grep", "Read"]);
        assert_eq!(
            run(&mut session),
            Verdict::Block(vec![NO_LOOKUP.to_owned()])
        );
    }

    #[test]
    fn no_lookup_is_only_judged_at_the_first_check() {
        let mut session = Session::default();
        feed(&mut session, &["Read", "Grep", "Read"]);
        assert!(matches!(run(&mut session), Verdict::Block(_)));
        feed(&mut session, &["Read", "Read"]);
        assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
    }

    #[test]
    fn the_lookup_rule_needs_work_beyond_memory_calls() {
        // memory_list is an "other" tool: it counts as work.
        let mut session = Session::default();
        feed(&mut session, &["memory_list", "Read", "Grep"]);
        assert_eq!(
            run(&mut session),
            Verdict::Block(vec![NO_LOOKUP.to_owned()])
        );
        let mut session = Session::default();
        feed(
            &mut session,
            &["context_query", "route_query", "context_query"],
        );
        assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
        // Storing without any lookup is still storing first.
        let mut session = Session::default();
        feed(
            &mut session,
            &["memory_store", "memory_store", "memory_store"],
        );
        assert_eq!(
            run(&mut session),
            Verdict::Block(vec![STORE_BEFORE_LOOKUP.to_owned()])
        );
    }

    #[test]
    fn both_problems_are_joined_in_order() {
        let mut session = Session::default();
        feed(&mut session, &["Read", "Edit", "Edit"]);
        let Verdict::Block(problems) = run(&mut session) else {
            panic!("expected a block");
        };
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[1], NO_LOOKUP);
        assert!(
            Verdict::Block(problems)
                .message()
                .unwrap()
                .contains("(supersede if updating). | No lookup at the first check.")
        );
    }

    #[test]
    fn store_before_first_lookup_is_reported_in_its_window_only() {
        let mut session = Session::default();
        feed(
            &mut session,
            &["memory_store", "context_query", "Edit", "memory_store"],
        );
        assert_eq!(
            run(&mut session),
            Verdict::Block(vec![STORE_BEFORE_LOOKUP.to_owned()])
        );
        for _ in 0..5 {
            feed(&mut session, &["context_query", "Edit", "memory_store"]);
            assert_eq!(run(&mut session), Verdict::Allow(Allow::Clean));
        }
    }

    #[test]
    fn store_before_lookup_is_not_repeated_when_no_lookup_says_it() {
        let mut session = Session::default();
        feed(&mut session, &["memory_store", "Read", "Read"]);
        assert_eq!(
            run(&mut session),
            Verdict::Block(vec![NO_LOOKUP.to_owned()])
        );
    }

    #[test]
    fn short_session_that_edits_and_stores_nothing_is_flagged_at_once() {
        // Failure story 1: three calls are enough; no minimum session length beyond them.
        let mut session = Session::default();
        feed(&mut session, &["context_query", "Write", "Read"]);
        let Verdict::Block(problems) = run(&mut session) else {
            panic!("expected a block");
        };
        assert!(problems[0].starts_with("Modified 1 file(s) but stored nothing."));
    }

    #[test]
    fn a_lower_entry_total_restarts_the_interval() {
        let mut session = Session::default();
        session.set_entries(10);
        session.entries_at_check = 9;
        session.set_entries(2);
        assert_eq!(session.entries - session.entries_at_check, 2);
    }
}
