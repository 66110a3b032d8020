//! `--live`: ask the installed agents what they load, each with a timeout. What each agent is
//! asked lives with the agent (`agents::<agent>::live`); here is how a program is run and its
//! answer read.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Doctor, Finding};
use crate::config::AgentId;

/// What a finished command printed.
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args` in `cwd` with no stdin, killing it after `timeout`.
pub fn run(program: &Path, args: &[&str], cwd: &Path, timeout: Duration) -> Result<Output, String> {
    run_fed(program, args, cwd, timeout, None)
}

/// [`run`] with `input` on stdin (closed after it), for a program that answers requests there.
pub fn run_fed(
    program: &Path,
    args: &[&str],
    cwd: &Path,
    timeout: Duration,
    input: Option<&str>,
) -> Result<Output, String> {
    let shown = format!("`{} {}`", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("{shown} could not start: {err}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        let text = text.to_owned();
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(text.as_bytes());
        });
    }
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{shown} did not finish within {} s and was stopped",
                    timeout.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{shown} could not be waited for: {e}")),
        }
    };
    Ok(Output {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// What `program args` prints in the repository, stdout and stderr together, for an agent's
/// listing command (`gemini mcp list`); `None` after a finding that says why there is none (it
/// did not start, or it failed). `shown` is the command as the person would type it.
pub fn listing(
    d: &mut Doctor,
    agent: AgentId,
    program: &Path,
    args: &[&str],
    shown: &str,
) -> Option<String> {
    let out = match run(program, args, &d.repo.root, d.options.timeout) {
        Ok(out) => out,
        Err(why) => {
            d.push(Finding::error(agent, "live", why).fix("run it by hand to see why"));
            return None;
        }
    };
    let all = format!("{}\n{}", out.stdout, out.stderr);
    if out.code != Some(0) {
        d.push(
            Finding::error(
                agent,
                "live",
                format!(
                    "`{shown}` failed ({}): {}",
                    exit_text(out.code),
                    excerpt(&all, 12)
                ),
            )
            .fix(format!("run `{shown}` and fix what it names")),
        );
        return None;
    }
    Some(all)
}

/// A program that answers JSON-RPC on its stdin and stdout (`codex app-server`), asked one
/// question after another within one deadline; it is stopped when this is dropped.
pub struct Conversation {
    shown: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    deadline: Instant,
}

impl Conversation {
    pub fn start(
        program: &Path,
        args: &[&str],
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Conversation, String> {
        let shown = format!("`{} {}`", program.display(), args.join(" "));
        let mut child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("{shown} could not start: {err}"))?;
        let (sender, lines) = std::sync::mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            })
        });
        Ok(Conversation {
            shown,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            deadline: Instant::now() + timeout,
        })
    }

    /// Sends one message, a line of JSON.
    pub fn send(&mut self, message: &Value) -> Result<(), String> {
        let sent = match self.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{message}").and_then(|()| stdin.flush()),
            None => Ok(()),
        };
        // A program that refused its arguments may be gone before the first line: what it
        // printed says why, not the broken pipe.
        sent.map_err(|_| self.ended("before reading its input"))
    }

    /// How the program ended, with the start of what it printed on stderr.
    fn ended(&mut self, when: &str) -> String {
        self.stdin.take();
        let code = self.child.wait().ok().and_then(|status| status.code());
        let stderr = self
            .stderr
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        format!(
            "{} ended ({}) {when}: {}",
            self.shown,
            exit_text(code),
            excerpt(&stderr, 6)
        )
    }

    /// The answer to request `id`: the first line of JSON with that id. Other lines (notices,
    /// logs) are passed over.
    pub fn answer(&mut self, id: u64) -> Result<Value, String> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let Ok(message) = serde_json::from_str::<Value>(line.trim()) else {
                        continue;
                    };
                    if message.get("id").and_then(Value::as_u64) == Some(id) {
                        return Ok(message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{} gave no answer to request {id} in time and was stopped",
                        self.shown
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.ended(&format!("before answering request {id}")));
                }
            }
        }
    }
}

impl Drop for Conversation {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first few non-empty lines of a text, joined for a one-line message (terminal colours
/// removed).
pub fn excerpt(text: &str, lines: usize) -> String {
    let plain = strip_ansi(text);
    let picked: Vec<&str> = plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(lines)
        .collect();
    picked.join(" | ")
}

/// `exit 1`, or how else a process ended.
pub fn exit_text(code: Option<i32>) -> String {
    code.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"))
}

/// Removes ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An enabled agent that is not installed has nothing to ask.
pub fn skipped(d: &mut Doctor, id: AgentId) {
    d.push(Finding::info(
        id,
        "live",
        format!("{} is not installed: live check skipped", id.as_str()),
    ));
}

/// Whether `actual` carries every value memloop wrote (`***` stands for a redacted string).
pub fn matches_redacted(wanted: &Value, actual: &Value) -> bool {
    match (wanted, actual) {
        (Value::String(_), Value::String(a)) if a == "***" => true,
        (Value::Object(w), Value::Object(a)) => w
            .iter()
            .all(|(k, wv)| a.get(k).is_some_and(|av| matches_redacted(wv, av))),
        (Value::Array(w), Value::Array(a)) => {
            w.len() == a.len() && w.iter().zip(a).all(|(wv, av)| matches_redacted(wv, av))
        }
        (w, a) => w == a,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn redacted_strings_match_and_everything_else_must_be_equal() {
        let wanted = json!({"type": "remote", "url": "https://m.test/", "headers": {"Authorization": "Bearer {env:T}"}});
        let resolved = json!({"type": "remote", "url": "https://m.test/", "headers": {"Authorization": "***"}, "enabled": true});
        assert!(matches_redacted(&wanted, &resolved));
        let other = json!({"type": "remote", "url": "https://other.test/", "headers": {"Authorization": "***"}});
        assert!(!matches_redacted(&wanted, &other));
        assert!(!matches_redacted(
            &json!({"command": ["a", "b"]}),
            &json!({"command": ["a"]})
        ));
        assert!(!matches_redacted(
            &json!({"enabled": true}),
            &json!({"enabled": "***"})
        ));
    }
}
