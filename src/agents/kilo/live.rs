//! `doctor --live` for Kilo: `kilo debug config` (kept from OpenCode) resolves the config the way
//! Kilo does; memloop's entry in it is compared with what memloop wrote.

use std::path::Path;

use crate::config::AgentId;
use crate::doctor::{Agent, Doctor};

pub fn check(d: &mut Doctor, program: &Path, _agent: &Agent) {
    crate::agents::opencode::live::resolved(
        d,
        program,
        AgentId::Kilo,
        false,
        "~/.config/kilo/, kilo.json(c), opencode.json(c), .kilo/, .kilocode/, KILO_CONFIG_CONTENT",
    );
}
