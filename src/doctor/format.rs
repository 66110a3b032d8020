//! The three faces of a report: text for people, JSON for programs, GitHub workflow commands
//! for annotations in pull requests.
//!
//! JSON schema (`version` 1; fields are only ever added):
//!
//! ```text
//! {
//!   "version": 1,
//!   "memloop_version": "0.1.0",
//!   "root": "/abs/path/of/the/repository",
//!   "agents": [{"agent": "claude", "enabled": true, "installed": true,
//!               "version": "2.1.328 (Claude Code)", "path": "/usr/bin/claude"}],
//!   "findings": [{"id": "claude.hooks-schema", "severity": "ok|info|warning|error",
//!                 "agent": "memloop|claude|opencode|kimi", "file": ".claude/settings.json" | null,
//!                 "line": 12 | null, "message": "...", "fix": "..." | null,
//!                 "drift": "current|edited-by-user|stale|missing|duplicated" (drift findings only),
//!                 "diff": "unified diff" (drift findings that are not current)}],
//!   "fixed": ["files --fix had memloop sync write"],
//!   "summary": {"ok": 20, "info": 1, "warning": 2, "error": 1},
//!   "exit_code": 1
//! }
//! ```

use std::fmt::Write as _;

use serde::Serialize;

use super::{AgentStatus, Finding, Report, Severity, Summary};

pub const JSON_VERSION: u32 = 1;

/// The human report: grouped by agent, the summary last. `verbose` lists every check; otherwise
/// each agent gets one line with its counts, and only warnings and errors are spelled out.
pub fn text(report: &Report, strict: bool, color: bool, verbose: bool) -> String {
    let paint = |code: &str, text: &str| {
        if color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    };
    let mut out = String::new();
    if let Some(root) = &report.root {
        let _ = writeln!(out, "memloop doctor: {}", root.display());
    }
    for file in &report.fixed {
        let _ = writeln!(out, "fixed by memloop sync: {file}");
    }
    if report.fix_ran {
        let left = report
            .findings
            .iter()
            .filter(|f| matches!(f.severity, Severity::Warning | Severity::Error))
            .count();
        let _ = match (report.fixed.is_empty(), left) {
            (_, 0) => writeln!(out, "memloop doctor --fix: nothing is left to fix"),
            (true, n) => writeln!(
                out,
                "memloop doctor --fix: sync changed nothing; {n} problem{} below need{} you (each names its fix)",
                plural(n),
                if n == 1 { "s" } else { "" }
            ),
            (false, n) => writeln!(
                out,
                "memloop doctor --fix: {n} problem{} below sync cannot fix (each names its fix)",
                plural(n)
            ),
        };
    }
    // Quiet, groups without problems are one line each, kept together.
    let mut spaced = true;
    for (index, (group, findings)) in report.grouped().into_iter().enumerate() {
        let heading = match report.agents.iter().find(|a| a.agent == group) {
            Some(status) => agent_heading(status),
            None => group.as_str().to_owned(),
        };
        let shown: Vec<&Finding> = findings
            .iter()
            .copied()
            .filter(|f| verbose || matches!(f.severity, Severity::Warning | Severity::Error))
            .collect();
        if verbose {
            let _ = writeln!(out, "\n{}", paint("1", &heading));
        } else {
            if index == 0 || spaced || !shown.is_empty() {
                out.push('\n');
            }
            spaced = !shown.is_empty();
            let counts = group_counts(&findings);
            let _ = writeln!(out, "{}  {counts}", paint("1", &format!("{heading:<28}")));
        }
        for finding in shown {
            let label = format!("{:<7}", finding.severity.as_str());
            let label = match finding.severity {
                Severity::Ok => paint("32", &label),
                Severity::Info => paint("36", &label),
                Severity::Warning => paint("33", &label),
                Severity::Error => paint("31", &label),
            };
            let mut line = format!("  {label}  ");
            if let Some(location) = finding.location() {
                let _ = write!(line, "{location}: ");
            }
            line.push_str(&finding.message);
            if let Some(fix) = &finding.fix {
                let _ = write!(line, " (fix: {fix})");
            }
            let _ = writeln!(out, "{line}");
            if let Some(diff) = &finding.diff {
                for diff_line in diff.lines() {
                    let _ = writeln!(out, "           {diff_line}");
                }
            }
        }
    }
    let summary = report.summary();
    let _ = writeln!(
        out,
        "\n{} error{}, {} warning{}, {} ok, {} info{}{}",
        summary.error,
        plural(summary.error),
        summary.warning,
        plural(summary.warning),
        summary.ok,
        summary.info,
        if strict && summary.warning > 0 && summary.error == 0 {
            " (--strict: warnings fail)"
        } else {
            ""
        },
        if verbose {
            ""
        } else {
            " (--verbose lists every check)"
        }
    );
    out
}

/// "8 ok, 1 info, 1 error": the severities present in one group, mildest first.
fn group_counts(findings: &[&Finding]) -> String {
    [
        Severity::Ok,
        Severity::Info,
        Severity::Warning,
        Severity::Error,
    ]
    .into_iter()
    .filter_map(|severity| {
        let n = findings.iter().filter(|f| f.severity == severity).count();
        let name = match severity {
            Severity::Warning => format!("warning{}", plural(n)),
            Severity::Error => format!("error{}", plural(n)),
            other => other.as_str().to_owned(),
        };
        (n > 0).then(|| format!("{n} {name}"))
    })
    .collect::<Vec<_>>()
    .join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn agent_heading(status: &AgentStatus) -> String {
    let name = status.agent.as_str();
    match (status.enabled, &status.version, status.installed) {
        (false, _, _) => format!("{name}: not enabled in memloop.toml"),
        (true, Some(version), _) => format!("{name}: {version}"),
        (true, None, true) => format!("{name}: version unknown"),
        (true, None, false) => format!("{name}: not installed"),
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    version: u32,
    memloop_version: &'static str,
    root: Option<String>,
    agents: &'a [AgentStatus],
    findings: &'a [Finding],
    fixed: &'a [String],
    summary: Summary,
    exit_code: u8,
}

/// The stable JSON form (schema above).
pub fn json(report: &Report, strict: bool) -> String {
    let out = JsonReport {
        version: JSON_VERSION,
        memloop_version: env!("CARGO_PKG_VERSION"),
        root: report.root.as_ref().map(|r| r.display().to_string()),
        agents: &report.agents,
        findings: &report.findings,
        fixed: &report.fixed,
        summary: report.summary(),
        exit_code: report.exit_code(strict),
    };
    let mut text = serde_json::to_string_pretty(&out).expect("the report serializes");
    text.push('\n');
    text
}

/// GitHub Actions workflow commands: `::error file=...,line=...,title=...::message`, one per
/// warning and error; a plain summary line last.
pub fn github(report: &Report, strict: bool) -> String {
    let mut out = String::new();
    for finding in &report.findings {
        let command = match finding.severity {
            Severity::Error => "error",
            Severity::Warning if strict => "error",
            Severity::Warning => "warning",
            Severity::Ok | Severity::Info => continue,
        };
        let mut properties = Vec::new();
        // Annotations attach to files in the repository only.
        if let Some(file) = finding
            .file
            .as_ref()
            .filter(|f| !f.starts_with('~') && !f.starts_with('/'))
        {
            properties.push(format!("file={}", property(file)));
            if let Some(line) = finding.line {
                properties.push(format!("line={line}"));
            }
            if let Some(column) = finding.column {
                properties.push(format!("col={column}"));
            }
        }
        properties.push(format!(
            "title={}",
            property(&format!("memloop doctor: {}", finding.id))
        ));
        let mut message = format!("[{}] {}", finding.agent.as_str(), finding.message);
        if let Some(fix) = &finding.fix {
            let _ = write!(message, "\nfix: {fix}");
        }
        if let Some(diff) = &finding.diff {
            let _ = write!(message, "\n{diff}");
        }
        let _ = writeln!(
            out,
            "::{command} {}::{}",
            properties.join(","),
            data(&message)
        );
    }
    let summary = report.summary();
    let _ = writeln!(
        out,
        "memloop doctor: {} error{}, {} warning{}, {} ok, {} info",
        summary.error,
        plural(summary.error),
        summary.warning,
        plural(summary.warning),
        summary.ok,
        summary.info
    );
    out
}

/// Escaping of a workflow command's message.
fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escaping of a workflow command's property value.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentId;
    use crate::doctor::Finding;

    #[test]
    fn github_escapes_messages_and_properties() {
        let report = Report {
            findings: vec![
                Finding::error(AgentId::Claude, "x", "50% broken\nsecond line")
                    .at("dir,with:odd.json", Some(3))
                    .fix("do it"),
            ],
            ..Report::default()
        };
        let out = github(&report, false);
        assert!(
            out.starts_with("::error file=dir%2Cwith%3Aodd.json,line=3,title=memloop doctor%3A claude.x::[claude] 50%25 broken%0Asecond line%0Afix: do it\n"),
            "{out}"
        );
    }

    #[test]
    fn strict_turns_warnings_into_failures() {
        let report = Report {
            findings: vec![Finding::warning(AgentId::Kimi, "trust", "not trusted")],
            ..Report::default()
        };
        assert_eq!(report.exit_code(false), 0);
        assert_eq!(report.exit_code(true), 1);
        assert!(github(&report, true).starts_with("::error "));
        assert!(github(&report, false).starts_with("::warning "));
    }
}
