//! A real terminal for an agent's interactive UI: a tmux server of its own (its socket in the
//! sandbox, so nothing is shared with a person's tmux or another scenario), one window running
//! the agent with the sandbox's environment, and what the screen shows read back as text.
//! Screens are kept in memory and written under the sandbox root, never into the repository.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::sandbox::Sandbox;

const TMUX: &str = "/usr/bin/tmux";
const SESSION: &str = "e2e";

pub struct Pane {
    socket: PathBuf,
    env: Command,
    /// Every distinct screen seen, in order (consecutive repeats dropped).
    screens: Vec<String>,
}

impl Pane {
    /// Starts `program args` in a `cols` x `rows` terminal, in the repository, with the
    /// sandbox's environment. The window stays after the program exits, so its last screen can
    /// still be read.
    pub fn start(sb: &Sandbox, program: &str, args: &[&str], cols: u16, rows: u16) -> Result<Pane> {
        if !std::path::Path::new(TMUX).is_file() {
            bail!("{TMUX} does not exist; the interactive scenarios drive the agents through tmux");
        }
        let socket = sb.root.join("tmux.sock");
        let conf = sb.root.join("tmux.conf");
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g history-limit 20000\n\
             set -g default-terminal xterm-256color\nset -g status off\n",
        )?;
        let pane = Pane {
            socket,
            env: sb.command(TMUX),
            screens: Vec::new(),
        };
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let repo = sb.repo.to_string_lossy().into_owned();
        let mut start = vec![
            "-f",
            conf.to_str().context("the sandbox path is not UTF-8")?,
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &cols,
            "-y",
            &rows,
            "-c",
            &repo,
            "--",
            program,
        ];
        start.extend_from_slice(args);
        pane.tmux(&start)?;
        Ok(pane)
    }

    fn tmux(&self, args: &[&str]) -> Result<String> {
        let mut cmd = Command::new(self.env.get_program());
        cmd.env_clear();
        for (key, value) in self.env.get_envs() {
            if let Some(value) = value {
                cmd.env(key, value);
            }
        }
        if let Some(dir) = self.env.get_current_dir() {
            cmd.current_dir(dir);
        }
        cmd.env("TERM", "xterm-256color")
            .arg("-S")
            .arg(&self.socket);
        let out = cmd
            .args(args)
            .output()
            .with_context(|| format!("running tmux {}", args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "tmux {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The visible screen now (wrapped lines joined), and remembered.
    pub fn screen(&mut self) -> Result<String> {
        let text = self.tmux(&["capture-pane", "-p", "-J", "-t", SESSION])?;
        if self.screens.last() != Some(&text) {
            self.screens.push(text.clone());
        }
        Ok(text)
    }

    /// Types `text` literally (no key names), then waits a moment so a UI that reads a burst of
    /// keys as a paste has settled before the next key.
    pub fn type_text(&self, text: &str) -> Result<()> {
        self.tmux(&["send-keys", "-t", SESSION, "-l", text])?;
        std::thread::sleep(Duration::from_millis(400));
        Ok(())
    }

    /// Presses keys by tmux's names (`Enter`, `Escape`, `Down`).
    pub fn press(&self, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        self.tmux(&args)?;
        Ok(())
    }

    /// Whether the program in the window has exited.
    pub fn exited(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", SESSION, "#{pane_dead}"])
            .map_or(true, |out| out.trim() == "1")
    }

    /// Polls the screen until `ready` holds for it; the screen it held for.
    pub fn wait_for(
        &mut self,
        deadline: Instant,
        what: &str,
        ready: impl Fn(&str) -> bool,
    ) -> Result<String> {
        loop {
            let screen = self.screen()?;
            if ready(&screen) {
                return Ok(screen);
            }
            if Instant::now() > deadline {
                bail!("the screen never showed {what}; last screen:\n{screen}");
            }
            if self.exited() {
                bail!("the agent exited before the screen showed {what}; last screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Every distinct screen seen so far.
    pub fn screens(&self) -> &[String] {
        &self.screens
    }

    /// Writes every screen seen to `name` under the sandbox root (kept with a failed sandbox).
    pub fn save(&self, sb: &Sandbox, name: &str) {
        let text: String = self
            .screens
            .iter()
            .enumerate()
            .map(|(i, s)| format!("===== screen {} =====\n{s}\n", i + 1))
            .collect();
        let _ = std::fs::write(sb.root.join(name), text);
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
