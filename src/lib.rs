//! memloop: install, check and upgrade the cross-session memory loop of AI coding agents.
//!
//! `memloop.toml` (the desired state) goes through one adapter per agent (`agents`) into owned
//! fragments per file; the `engine` applies them with a format-preserving editor (`edit`).
//! The runtime parts: `hook` (the router of `memloop hook <event>`), the Stop gate (`gate`), the
//! repository's memory (`memory`) and its MCP server (`serve`).
//!
//! Layers, each using only those below it: `cli` and `commands`; `agents` (one folder per agent
//! behind `agents::Agent`, listed by `agents::of`); `hook`, which is handed the agents' dialects;
//! the capabilities every agent shares (`doctor`, `gate`, `upgrade`, `serve` over `memory`),
//! which are handed the agents by the commands; then `repo`, `report`, `engine`,
//! `instructions`, `version`, `detect`, `target`, `config`, `edit`, `files`, `watchdog`,
//! `position` and `text` (what may reach a model or a terminal from a note).

pub mod agents;
pub mod cli;
pub mod commands;
pub mod config;
pub mod detect;
pub mod doctor;
pub mod edit;
pub mod engine;
pub mod files;
pub mod gate;
pub mod git_exclude;
pub mod hook;
pub mod instructions;
pub mod memory;
pub mod position;
pub mod repo;
pub mod report;
pub mod secrets;
pub mod serve;
pub mod target;
pub mod text;
pub mod upgrade;
pub mod version;
pub mod watchdog;
