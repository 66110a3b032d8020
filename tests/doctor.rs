//! `memloop doctor` fixtures as data: each folder in `tests/doctor/cases/` holds `case.toml` and
//! overlay trees (`repo/`, `home/`, `bin/`) laid over a repository that `memloop init` installed
//! (or over an empty one with `base = "none"`). The doctor's JSON findings must include every
//! `[[expect]]` and none of the `[[absent]]`. Every check has a failing and a passing fixture.
//!
//! The agents are fake scripts in `bin/` (no real agent is needed); PATH holds only that folder
//! and memloop itself.

mod harness;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn copy_tree(from: &Path, to: &Path) {
    if !from.exists() {
        return;
    }
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let dest = to.join(entry.file_name());
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            let _ = std::fs::remove_file(&dest);
            std::os::unix::fs::symlink(std::fs::read_link(&path).unwrap(), &dest).unwrap();
        } else if meta.is_dir() {
            copy_tree(&path, &dest);
        } else {
            if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink()) {
                std::fs::remove_file(&dest).unwrap();
            }
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// A temporary repository, home and PATH folder.
struct Sandbox {
    pub temp: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub bin: PathBuf,
    /// Holds only a link to memloop (left off PATH to test a missing memloop).
    pub memloop_dir: PathBuf,
    pub memloop_on_path: bool,
}

impl Sandbox {
    fn new() -> Sandbox {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let (repo, home, bin, memloop_dir) = (
            root.join("repo"),
            root.join("home"),
            root.join("bin"),
            root.join("memloop-bin"),
        );
        for dir in [&repo, &home, &bin, &memloop_dir] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_memloop"), memloop_dir.join("memloop"))
            .unwrap();
        // `doctor --live` talks HTTP through curl: the machine's, beside the fake agents.
        let curl = ["/usr/bin/curl", "/bin/curl", "/usr/local/bin/curl"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .expect("the HTTP probe tests need curl");
        std::os::unix::fs::symlink(curl, bin.join("curl")).unwrap();
        Sandbox {
            temp,
            repo,
            home,
            bin,
            memloop_dir,
            memloop_on_path: true,
        }
    }

    /// Adds an executable script to `bin/`.
    fn script(&self, name: &str, body: &str) {
        let path = self.bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        make_executable(&path);
    }

    fn path_var(&self) -> String {
        let mut path = self.bin.display().to_string();
        if self.memloop_on_path {
            path = format!("{path}:{}", self.memloop_dir.display());
        }
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_memloop"));
        cmd.args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", self.path_var())
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("NO_COLOR", "1");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn init(&self, agents: &str, extra: &[String]) {
        self.init_with(agents, extra, true);
    }

    fn init_with(&self, agents: &str, extra: &[String], user_scope: bool) {
        let mut args = vec!["init", "--yes", "--agents", agents];
        if user_scope {
            args.push("--user-scope");
        }
        args.extend(extra.iter().map(String::as_str));
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "memloop init failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Pre-trusts the repository for Kimi Code, as answering "Trust" does.
    fn trust_for_kimi(&self) {
        let key = memloop::agents::kimi::trust_key(&self.repo);
        let dir = self.home.join(".kimi-code/workspace-trust");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(key),
            format!(
                "{{\"root\": \"{}\", \"trustedAt\": 1}}",
                self.repo.display()
            ),
        )
        .unwrap();
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// Extra arguments of `memloop doctor` (`--format json` is added unless a format is given).
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    status: i32,
    /// "installed" (memloop init first) or "none".
    #[serde(default = "installed")]
    base: String,
    #[serde(default = "all_agents")]
    agents: String,
    #[serde(default)]
    init_args: Vec<String>,
    /// Paths (relative to the sandbox: repo/..., home/...) removed after the overlay.
    #[serde(default)]
    remove: Vec<String>,
    #[serde(default = "yes")]
    memloop_on_path: bool,
    /// `memloop init --user-scope` (consent to write the user's agent config).
    #[serde(default = "yes")]
    user_scope: bool,
    /// Create Kimi Code's trust file for the repository.
    #[serde(default)]
    trust: bool,
    /// Record Claude Code's accepted trust dialog for the repository in `~/.claude.json`.
    #[serde(default)]
    claude_trust: bool,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Leave the format to memloop (no `--format json` added).
    #[serde(default)]
    auto_format: bool,
    #[serde(default)]
    stdout_contains: Vec<String>,
    #[serde(default)]
    expect: Vec<Expect>,
    #[serde(default)]
    absent: Vec<Expect>,
    /// Files (relative to the sandbox) that must exist afterwards.
    #[serde(default)]
    exists_after: Vec<String>,
}

/// Overlay files under `home/` may spell the repository's real path as `@REPO@` (Codex's trust
/// entries name it).
fn spell_repo(overlay: &Path, home: &Path, repo: &Path) {
    let mut stack = vec![overlay.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(text) = std::fs::read_to_string(&path)
                && text.contains("@REPO@")
            {
                let dest = home.join(path.strip_prefix(overlay).unwrap());
                std::fs::write(dest, text.replace("@REPO@", &repo.display().to_string())).unwrap();
            }
        }
    }
}

fn installed() -> String {
    "installed".into()
}
fn all_agents() -> String {
    "claude,opencode,kimi".into()
}
fn yes() -> bool {
    true
}

#[derive(serde::Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Expect {
    id: String,
    #[serde(default)]
    severity: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    column: Option<u64>,
    #[serde(default)]
    drift: Option<String>,
    #[serde(default)]
    fix: Option<String>,
    #[serde(default)]
    diff: Option<String>,
}

impl Expect {
    fn matches(&self, finding: &Value) -> bool {
        let s = |key: &str| finding.get(key).and_then(Value::as_str).unwrap_or("");
        s("id") == self.id
            && self.severity.as_deref().is_none_or(|v| s("severity") == v)
            && self
                .message
                .as_deref()
                .is_none_or(|v| s("message").contains(v))
            && self.file.as_deref().is_none_or(|v| s("file") == v)
            && self
                .line
                .is_none_or(|v| finding.get("line").and_then(Value::as_u64) == Some(v))
            && self
                .column
                .is_none_or(|v| finding.get("column").and_then(Value::as_u64) == Some(v))
            && self.drift.as_deref().is_none_or(|v| s("drift") == v)
            && self.fix.as_deref().is_none_or(|v| s("fix").contains(v))
            && self.diff.as_deref().is_none_or(|v| s("diff").contains(v))
    }
}

fn run_case(dir: &Path) -> Result<(), String> {
    let case: Case =
        toml_edit::de::from_str(&std::fs::read_to_string(dir.join("case.toml")).unwrap())
            .map_err(|e| format!("case.toml: {e}"))?;
    let mut sandbox = Sandbox::new();
    copy_tree(&dir.join("bin"), &sandbox.bin);
    for entry in std::fs::read_dir(&sandbox.bin).unwrap() {
        make_executable(&entry.unwrap().path());
    }
    if case.base == "installed" {
        sandbox.init_with(&case.agents, &case.init_args, case.user_scope);
    }
    let root = std::fs::canonicalize(sandbox.temp.path()).unwrap();
    for rel in &case.remove {
        let path = root.join(rel);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).map_err(|e| format!("remove {rel}: {e}"))?;
        }
    }
    copy_tree(&dir.join("repo"), &sandbox.repo);
    copy_tree(&dir.join("home"), &sandbox.home);
    spell_repo(&dir.join("home"), &sandbox.home, &root.join("repo"));
    if case.trust {
        sandbox.trust_for_kimi();
    }
    if case.claude_trust {
        let config = serde_json::json!({"projects": {sandbox.repo.display().to_string(): {"hasTrustDialogAccepted": true}}});
        std::fs::write(sandbox.home.join(".claude.json"), config.to_string()).unwrap();
    }
    sandbox.memloop_on_path = case.memloop_on_path;
    let mut args = vec!["doctor".to_owned()];
    if !case.auto_format && !case.args.iter().any(|a| a.starts_with("--format")) {
        args.extend(["--format".to_owned(), "json".to_owned()]);
    }
    args.extend(case.args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sandbox.command(&args).envs(&case.env).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let shown = || format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    let mut problems = Vec::new();
    if out.status.code() != Some(case.status) {
        problems.push(format!(
            "exit {:?}, expected {}",
            out.status.code(),
            case.status
        ));
    }
    for needle in &case.stdout_contains {
        if !stdout.contains(needle.as_str()) {
            problems.push(format!("stdout lacks {needle:?}"));
        }
    }
    if !case.expect.is_empty() || !case.absent.is_empty() {
        let report: Value =
            serde_json::from_str(&stdout).map_err(|e| format!("not JSON ({e}): {}", shown()))?;
        let findings = report["findings"].as_array().cloned().unwrap_or_default();
        for expect in &case.expect {
            if !findings.iter().any(|f| expect.matches(f)) {
                problems.push(format!("no finding matches {expect:?}"));
            }
        }
        for absent in &case.absent {
            if let Some(found) = findings.iter().find(|f| absent.matches(f)) {
                problems.push(format!("unexpected finding {found}"));
            }
        }
    }
    for rel in &case.exists_after {
        if std::fs::symlink_metadata(root.join(rel)).is_err() {
            problems.push(format!("{rel} does not exist afterwards"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{}", problems.join("\n"), shown()))
    }
}

/// A repository with problems of several kinds, for the output snapshots.
fn snapshot_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.script("kimi", "echo 2.1.0");
    sandbox.init("claude,opencode,kimi", &[]);
    std::fs::remove_file(sandbox.repo.join(".mcp.json")).unwrap();
    std::fs::write(
        sandbox.repo.join(".claude/settings.local.json"),
        "{\n  \"disableAllHooks\": true\n}\n",
    )
    .unwrap();
    std::fs::write(
        sandbox.home.join(".kimi-code/config.toml"),
        "[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"*\"\ncommand = \"./guard.sh\"\n\n[[hooks]]\nevent = \"Stop\"\ncommand = \"memloop hook stop --agent kimi\"\ntimeout = 15\n\n\
         [[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"memloop hook session-start --agent kimi\"\ntimeout = 10\n\n\
         [[hooks]]\nevent = \"PreCompact\"\ncommand = \"memloop hook pre-compact --agent kimi\"\ntimeout = 10\n",
    )
    .unwrap();
    sandbox
}

fn normalized(sandbox: &Sandbox, out: &Output) -> String {
    let root = std::fs::canonicalize(sandbox.temp.path()).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .replace(&root.display().to_string(), "[TMP]")
        .replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
        .replace(
            &memloop::agents::kimi::trust_key(&sandbox.repo),
            "wd_repo_[HASH]",
        )
}

fn snapshot_text() {
    let sandbox = snapshot_sandbox();
    let out = sandbox.run(&["doctor", "--format", "text", "--verbose"]);
    assert_eq!(out.status.code(), Some(1));
    snapbox::assert_data_eq!(
        normalized(&sandbox, &out),
        snapbox::file!["doctor/snapshots/text.txt"].raw()
    );
}

/// Without --verbose: one line per agent with its counts, and only the problems spelled out.
fn snapshot_text_quiet() {
    let sandbox = snapshot_sandbox();
    let out = sandbox.run(&["doctor", "--format", "text"]);
    assert_eq!(out.status.code(), Some(1));
    snapbox::assert_data_eq!(
        normalized(&sandbox, &out),
        snapbox::file!["doctor/snapshots/text-quiet.txt"].raw()
    );
}

fn snapshot_json() {
    let sandbox = snapshot_sandbox();
    let out = sandbox.run(&["doctor", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    snapbox::assert_data_eq!(
        normalized(&sandbox, &out),
        snapbox::file!["doctor/snapshots/json.json"].raw()
    );
}

fn snapshot_github() {
    let sandbox = snapshot_sandbox();
    let out = sandbox
        .command(&["doctor"])
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    snapbox::assert_data_eq!(
        normalized(&sandbox, &out),
        snapbox::file!["doctor/snapshots/github.txt"].raw()
    );
}

/// A loopback MCP server over streamable HTTP: JSON for `initialize` (with a session id), 202 for
/// the notification, a chunked event stream for `tools/list`. Records each request's headers.
fn serve_http(
    listener: std::net::TcpListener,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body = String::from_utf8(body).unwrap();
        seen.lock().unwrap().push(format!("{head}\n{body}"));
        let response = if body.contains("\"initialize\"") {
            let json = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"loop","version":"1"}}}"#;
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: sess-42\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )
        } else if body.contains("notifications/initialized") {
            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_owned()
        } else {
            let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"context_query\"},{\"name\":\"memory_store\"}]}}\n\n";
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n0\r\n\r\n",
                event.len()
            )
        };
        let _ = stream.write_all(response.as_bytes());
    }
}

fn live_probe_over_http_sends_the_session_and_the_referenced_token() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || serve_http(listener, log));
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.repo.join("memloop.toml"),
        format!(
            "version = 1\nagents = [\"claude\"]\n\n[server]\nname = \"memory\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ Authorization = \"Bearer ${{PROBE_TOKEN}}\" }}\n"
        ),
    )
    .unwrap();
    assert!(sandbox.run(&["sync"]).status.success());
    let out = sandbox
        .command(&["doctor", "--live", "--format", "json", "--timeout", "30"])
        .env("PROBE_TOKEN", "s3cret-token")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let probe = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "memloop.server-probe")
        .cloned()
        .unwrap();
    assert_eq!(probe["severity"], "ok", "{probe}");
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|r| r.contains("Authorization: Bearer s3cret-token")),
        "{requests:?}"
    );
    assert!(!requests[0].contains("Mcp-Session-Id"));
    assert!(
        requests[1..]
            .iter()
            .all(|r| r.contains("Mcp-Session-Id: sess-42")),
        "{requests:?}"
    );
    assert!(requests[2].contains("\"tools/list\""));

    // Without the variable the probe says which one is missing.
    let out = sandbox.run(&["doctor", "--live", "--format", "json", "--timeout", "30"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text.contains("the environment variable PROBE_TOKEN is not set"),
        "{text}"
    );
}

fn completions_cover_every_command() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = sandbox.run(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["doctor", "sync", "uninstall", "require-agents"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    let out = sandbox.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

fn live_warns_when_kimis_session_log_has_tool_calls_but_no_step_markers() {
    let sandbox = Sandbox::new();
    sandbox.script(
        "kimi",
        "case \"$1\" in\n  --version) echo \"2.1.0\" ;;\n  doctor) echo \"Kimi doctor found no issues.\" ;;\nesac",
    );
    sandbox.init("kimi", &[]);
    sandbox.trust_for_kimi();
    let agents = sandbox
        .home
        .join(".kimi-code/sessions")
        .join(memloop::agents::kimi::trust_key(&sandbox.repo))
        .join("session_1/agents/main");
    std::fs::create_dir_all(&agents).unwrap();
    let row = |event: &str| {
        format!(
            "{{\"type\":\"context.append_loop_event\",\"agentId\":\"main\",\"event\":{event}}}\n"
        )
    };
    let log = agents.join("wire.jsonl");
    let moved = |text: &str| {
        let out = sandbox.run(&["doctor", "--live", "--format", "json", "--timeout", "30"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "kimi.live" && f["message"].as_str().unwrap_or("").contains(text))
            .cloned()
    };
    std::fs::write(
        &log,
        row(r#"{"type":"turn.step.start"}"#)
            + &row(r#"{"type":"tool.call","name":"Write"}"#)
            + &row(r#"{"type":"tool.call","name":"Write"}"#),
    )
    .unwrap();
    let finding = moved("log format moved").expect("a warning about the log format");
    assert_eq!(finding["severity"], "warning", "{finding}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("has 2 tool calls but no `step.begin` step markers"),
        "{finding}"
    );
    std::fs::write(
        &log,
        row(r#"{"type":"step.begin"}"#) + &row(r#"{"type":"tool.call","name":"Write"}"#),
    )
    .unwrap();
    assert_eq!(moved("log format moved"), None);
}

/// The probe's finding after `doctor --live` against the server at `url`.
fn probe_finding(url: &str) -> Value {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.repo.join("memloop.toml"),
        format!(
            "version = 1\nagents = [\"claude\"]\n\n[server]\nname = \"memory\"\nurl = \"{url}\"\n"
        ),
    )
    .unwrap();
    assert!(sandbox.run(&["sync"]).status.success());
    let out = sandbox.run(&["doctor", "--live", "--format", "json", "--timeout", "30"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "memloop.server-probe")
        .cloned()
        .unwrap()
}

/// The same client for every address: an IPv6 loopback server answers, and a redirect is named
/// with its target instead of being followed.
fn live_probe_reaches_ipv6_loopback_and_names_a_redirect() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    match std::net::TcpListener::bind("[::1]:0") {
        Ok(listener) => {
            let port = listener.local_addr().unwrap().port();
            let log = seen.clone();
            std::thread::spawn(move || serve_http(listener, log));
            let probe = probe_finding(&format!("http://[::1]:{port}/mcp"));
            assert_eq!(probe["severity"], "ok", "{probe}");
        }
        Err(err) => eprintln!("skipped the IPv6 half: no [::1] here ({err})"),
    }

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 308 Permanent Redirect\r\nLocation: http://127.0.0.1:9/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let probe = probe_finding(&format!("http://127.0.0.1:{port}/mcp"));
    assert_eq!(probe["severity"], "error", "{probe}");
    assert!(
        probe["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 308: the server redirects to http://127.0.0.1:9/elsewhere"),
        "{probe}"
    );
}

fn main() {
    harness::run(
        "doctor/cases",
        40,
        run_case,
        &[
            ("snapshot_text", snapshot_text),
            ("snapshot_text_quiet", snapshot_text_quiet),
            ("snapshot_json", snapshot_json),
            ("snapshot_github", snapshot_github),
            (
                "live_probe_over_http_sends_the_session_and_the_referenced_token",
                live_probe_over_http_sends_the_session_and_the_referenced_token,
            ),
            (
                "live_warns_when_kimis_session_log_has_tool_calls_but_no_step_markers",
                live_warns_when_kimis_session_log_has_tool_calls_but_no_step_markers,
            ),
            (
                "live_probe_reaches_ipv6_loopback_and_names_a_redirect",
                live_probe_reaches_ipv6_loopback_and_names_a_redirect,
            ),
            (
                "completions_cover_every_command",
                completions_cover_every_command,
            ),
        ],
    );
}
