//! The agent's hook input on stdin, read once per run for every piece of it that needs it.
//!
//! It is optional and waited for at most [`INPUT_WAIT`], so a hook never hangs on a pipe nobody
//! closes, and read up to [`MAX_INPUT`]: a bigger input (a prompt of many megabytes) is not
//! parsed, and the run goes on as if none had come.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use serde_json::Value;

const INPUT_WAIT: Duration = Duration::from_millis(500);
const MAX_INPUT: u64 = 16 << 20;

/// The agent's hook input (read once, waited for at most [`INPUT_WAIT`]), if it is JSON.
pub fn hook_input() -> Option<&'static Value> {
    static INPUT: OnceLock<Option<Value>> = OnceLock::new();
    INPUT.get_or_init(read_input).as_ref()
}

/// The `cwd` of the agent's hook input, if one arrives in time and holds it.
pub fn input_cwd() -> Option<PathBuf> {
    let cwd = hook_input()?
        .get("cwd")?
        .as_str()
        .filter(|cwd| !cwd.is_empty())?;
    Some(PathBuf::from(cwd))
}

/// The session the input names (`session_id`, or Copilot's `sessionId`), if any.
pub fn session_id(input: Option<&Value>) -> Option<&str> {
    let input = input?;
    input
        .get("session_id")
        .or_else(|| input.get("sessionId"))?
        .as_str()
        .filter(|id| !id.is_empty())
}

fn read_input() -> Option<Value> {
    if std::io::stdin().is_terminal() {
        return None;
    }
    let (sender, receiver) = mpsc::channel();
    // Left blocked on a pipe that never closes, the thread ends with the process.
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::stdin().take(MAX_INPUT + 1).read_to_end(&mut bytes);
        let _ = sender.send(read.map(|_| bytes));
    });
    let bytes = receiver.recv_timeout(INPUT_WAIT).ok()?.ok()?;
    if bytes.len() as u64 > MAX_INPUT {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}
