//! memloop: install, check and upgrade the cross-session memory loop of AI coding agents.
//!
//! `memloop.toml` (the desired state) goes through one adapter per agent (`agents`) into owned
//! fragments per file; the `engine` applies them with a format-preserving editor (`edit`).
//! The Stop gate (`gate`) and the embedded memory server (`serve`) are the runtime parts.

pub mod agents;
pub mod cli;
pub mod commands;
pub mod config;
pub mod doctor;
pub mod edit;
pub mod engine;
pub mod files;
pub mod gate;
pub mod position;
pub mod secrets;
pub mod serve;
pub mod target;
pub mod upgrade;
