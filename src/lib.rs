//! memloop: install, check and upgrade the cross-session memory loop of AI coding agents.
//!
//! `memloop.toml` (the desired state) goes through one adapter per agent (`agents`) into owned
//! fragments per file; the `engine` applies them with a format-preserving editor (`edit`).
//! The Stop gate (`gate`) and the embedded memory server (`serve`) are the runtime parts.
//!
//! Layers, each using only those below it: `cli` and `commands`; `agents` (one folder per agent
//! behind `agents::Agent`, listed by `agents::of`); the capabilities every agent shares
//! (`doctor`, `gate`, `upgrade`, `serve`), which are handed the agents by the commands; then
//! `repo`, `report`, `engine`, `instructions`, `version`, `detect`, `target`, `config`, `edit`,
//! `files`, `position` and `text` (what may reach a model or a terminal from a note).

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
pub mod instructions;
pub mod position;
pub mod repo;
pub mod report;
pub mod secrets;
pub mod serve;
pub mod target;
pub mod text;
pub mod upgrade;
pub mod version;
