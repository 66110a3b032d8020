//! Codex's migrations. None yet.

use crate::upgrade::Migration;

pub const MIGRATIONS: &[Migration] = &[];
