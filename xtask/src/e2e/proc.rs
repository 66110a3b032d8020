//! Child processes with a deadline: every agent command runs in its own process group, its output
//! is captured, and on timeout the whole group (the agent plus its MCP servers and hooks) is killed.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// What a finished (or killed) command left behind.
#[derive(Debug, Clone)]
pub struct Output {
    pub display: String,
    /// `None` when the command was killed at its deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    pub fn status_text(&self) -> String {
        match self.status {
            None => format!("killed after {:.0?} (timeout)", self.elapsed),
            Some(s) => match s.code() {
                Some(code) => format!("exit {code} after {:.1?}", self.elapsed),
                None => format!("{s} after {:.1?}", self.elapsed),
            },
        }
    }

    /// The command, its status and both streams (tails), for failure messages.
    pub fn report(&self) -> String {
        format!(
            "$ {}\n  -> {}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--------------",
            self.display,
            self.status_text(),
            tail(&self.stdout, 6000),
            tail(&self.stderr, 6000)
        )
    }
}

/// The last `max` bytes of `s` (on a char boundary), marked when cut.
pub fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.trim_end().to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("[... {} bytes cut ...]\n{}", start, s[start..].trim_end())
}

pub fn display(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| {
        let a = a.to_string_lossy();
        if a.contains([' ', '"', '\'']) || a.is_empty() {
            format!("'{}'", a.replace('\'', "'\\''"))
        } else {
            a.into_owned()
        }
    }));
    parts.join(" ")
}

/// A running command in its own process group.
pub struct Proc {
    display: String,
    child: Child,
    stdin: Option<ChildStdin>,
    started: Instant,
    lines: Receiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Proc {
    /// Start `cmd` with piped stdin/stdout/stderr in a new process group.
    pub fn spawn(mut cmd: Command) -> Result<Proc> {
        let display = display(&cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("could not start `{display}`"))?;
        let stdin = child.stdin.take();
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = channel();
        let mut readers = Vec::new();
        let out = child.stdout.take().expect("piped stdout");
        let sink = stdout.clone();
        readers.push(std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                let text = String::from_utf8_lossy(&line).into_owned();
                sink.lock().unwrap().push_str(&text);
                let _ = tx.send(text);
                line.clear();
            }
        }));
        let mut err = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        readers.push(std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }));
        Ok(Proc {
            display,
            child,
            stdin,
            started: Instant::now(),
            lines,
            stdout,
            stderr,
            readers,
        })
    }

    pub fn write_stdin(&mut self, data: &str) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .context("stdin of the child is already closed")?;
        stdin
            .write_all(data.as_bytes())
            .and_then(|()| stdin.flush())
            .with_context(|| format!("writing to the stdin of `{}`", self.display))
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for a stdout line for which `pred` holds; `None` at the deadline or at end of output.
    pub fn wait_line(&mut self, deadline: Instant, pred: impl Fn(&str) -> bool) -> Option<String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return Some(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Whether the process has exited (without waiting).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Wait for exit until `deadline`; kill the process group when it passes.
    pub fn finish(mut self, deadline: Instant) -> Output {
        self.stdin = None;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => {
                    self.kill_group();
                    let _ = self.child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break None,
            }
        };
        let elapsed = self.started.elapsed();
        // Children of the agent (MCP servers, hooks) may still hold the pipes open.
        self.kill_group();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        Output {
            display: self.display.clone(),
            status,
            stdout: self.stdout.lock().unwrap().clone(),
            stderr: self.stderr.lock().unwrap().clone(),
            elapsed,
        }
    }

    /// Stop the process group: TERM, a short grace period, then KILL.
    pub fn stop(self) -> Output {
        signal_group(self.child.id(), "TERM");
        self.finish(Instant::now() + Duration::from_secs(3))
    }

    fn kill_group(&mut self) {
        signal_group(self.child.id(), "KILL");
    }
}

/// Signal the process group `pgid` (the child's pid, from `process_group(0)`: only processes
/// this harness started are in it). Spelled `kill -s SIG -- -PGID`: procps-ng 4.0.2 parses
/// `kill -SIG -PGID` wrongly (it signalled -1, every process, when tried here).
fn signal_group(pgid: u32, signal: &str) {
    if pgid <= 1 {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill_group();
            let _ = self.child.wait();
        }
    }
}

/// Run `cmd` to completion (stdin closed, or fed `input`) with a timeout.
pub fn run(cmd: Command, timeout: Duration, input: Option<&str>) -> Result<Output> {
    let deadline = Instant::now() + timeout;
    let mut proc = Proc::spawn(cmd)?;
    if let Some(input) = input {
        // A child that exits without reading stdin is not an error here.
        let _ = proc.write_stdin(input);
    }
    proc.close_stdin();
    Ok(proc.finish(deadline))
}
