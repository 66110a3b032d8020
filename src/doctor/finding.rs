//! What the doctor reports: one finding per check, grouped by agent, and the report around them.

use std::path::PathBuf;

use serde::Serialize;

use crate::config::AgentId;

/// How bad a finding is. `ok` is a passed check; `info` is something to know that never fails a
/// run (an agent that is not installed); `warning` fails only with `--strict`; `error` fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Ok,
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Whose finding it is: one of the agents, or memloop itself (its config, its binary, files
/// shared by several agents).
/// Memloop comes first, then the agents in `AgentId::ALL` order; serialized as the bare name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    Memloop,
    Agent(AgentId),
}

impl Group {
    /// Every group, in display order.
    pub fn all() -> impl Iterator<Item = Group> {
        std::iter::once(Group::Memloop).chain(AgentId::ALL.into_iter().map(Group::Agent))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Group::Memloop => "memloop",
            Group::Agent(agent) => agent.as_str(),
        }
    }
}

impl Serialize for Group {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<AgentId> for Group {
    fn from(agent: AgentId) -> Group {
        Group::Agent(agent)
    }
}

/// Drift state of one fragment memloop owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drift {
    Current,
    EditedByUser,
    Stale,
    Missing,
    Duplicated,
}

impl Drift {
    pub fn as_str(self) -> &'static str {
        match self {
            Drift::Current => "current",
            Drift::EditedByUser => "edited by user",
            Drift::Stale => "stale",
            Drift::Missing => "missing",
            Drift::Duplicated => "duplicated",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier of the check, `<group>.<check>` (e.g. `claude.hooks-schema`).
    pub id: String,
    pub severity: Severity,
    pub agent: Group,
    /// Path relative to the repository, or `~/...` for the user's files.
    pub file: Option<String>,
    /// 1-based line in `file`.
    pub line: Option<usize>,
    /// 1-based column on `line`, where the check knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    pub message: String,
    /// The command or edit that fixes it.
    pub fix: Option<String>,
    /// For drift findings: the state of the fragment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
    /// Unified diff of what `memloop sync` would change in `file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Whether `memloop sync` repairs it (what `--fix` acts on).
    #[serde(skip)]
    pub sync_fixes: bool,
}

impl Finding {
    pub fn new(
        agent: impl Into<Group>,
        check: &str,
        severity: Severity,
        message: impl Into<String>,
    ) -> Finding {
        let agent = agent.into();
        Finding {
            id: format!("{}.{check}", agent.as_str()),
            severity,
            agent,
            file: None,
            line: None,
            column: None,
            message: message.into(),
            fix: None,
            drift: None,
            diff: None,
            sync_fixes: false,
        }
    }

    pub fn ok(agent: impl Into<Group>, check: &str, message: impl Into<String>) -> Finding {
        Finding::new(agent, check, Severity::Ok, message)
    }

    pub fn warning(agent: impl Into<Group>, check: &str, message: impl Into<String>) -> Finding {
        Finding::new(agent, check, Severity::Warning, message)
    }

    pub fn error(agent: impl Into<Group>, check: &str, message: impl Into<String>) -> Finding {
        Finding::new(agent, check, Severity::Error, message)
    }

    pub fn info(agent: impl Into<Group>, check: &str, message: impl Into<String>) -> Finding {
        Finding::new(agent, check, Severity::Info, message)
    }

    pub fn file(mut self, file: impl Into<String>) -> Finding {
        self.file = Some(file.into());
        self
    }

    pub fn at(mut self, file: impl Into<String>, line: Option<usize>) -> Finding {
        self.file = Some(file.into());
        self.line = line;
        self
    }

    /// At `file:line:col`.
    pub fn at_column(mut self, file: impl Into<String>, line: usize, column: usize) -> Finding {
        self.file = Some(file.into());
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }

    /// Fixed by `memloop sync` (the fix text says so).
    pub fn by_sync(mut self, command: &str) -> Finding {
        self.fix = Some(format!("run `{command}`"));
        self.sync_fixes = true;
        self
    }

    pub fn location(&self) -> Option<String> {
        let file = self.file.as_ref()?;
        Some(match (self.line, self.column) {
            (Some(line), Some(column)) => format!("{file}:{line}:{column}"),
            (Some(line), None) => format!("{file}:{line}"),
            (None, _) => file.clone(),
        })
    }
}

/// An agent as found on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct AgentStatus {
    pub agent: Group,
    /// Listed in `agents` of memloop.toml.
    pub enabled: bool,
    pub installed: bool,
    /// First line of `<program> --version`.
    pub version: Option<String>,
    pub path: Option<PathBuf>,
}

/// Everything one run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub root: Option<PathBuf>,
    pub agents: Vec<AgentStatus>,
    pub findings: Vec<Finding>,
    /// Files `--fix` had sync write.
    pub fixed: Vec<String>,
    /// `--fix` ran: what is left is what sync cannot fix.
    pub fix_ran: bool,
}

/// Counts per severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ok: usize,
    pub info: usize,
    pub warning: usize,
    pub error: usize,
}

impl Report {
    pub fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for finding in &self.findings {
            match finding.severity {
                Severity::Ok => summary.ok += 1,
                Severity::Info => summary.info += 1,
                Severity::Warning => summary.warning += 1,
                Severity::Error => summary.error += 1,
            }
        }
        summary
    }

    /// 0 without errors (and without warnings under `strict`), 1 otherwise.
    pub fn exit_code(&self, strict: bool) -> u8 {
        let summary = self.summary();
        u8::from(summary.error > 0 || (strict && summary.warning > 0))
    }

    /// Findings in display order: by group, then as found.
    pub fn grouped(&self) -> Vec<(Group, Vec<&Finding>)> {
        Group::all()
            .map(|group| {
                (
                    group,
                    self.findings.iter().filter(|f| f.agent == group).collect(),
                )
            })
            .filter(|(group, findings): &(Group, Vec<&Finding>)| {
                !findings.is_empty() || self.agents.iter().any(|a| a.agent == *group && a.enabled)
            })
            .collect()
    }
}
