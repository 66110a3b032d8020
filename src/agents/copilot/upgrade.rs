//! Copilot's migrations: none yet. memloop's first Copilot files are the current format
//! (`{"version": 1}` hooks files, `trustedFolders` in config.json).

use crate::upgrade::Migration;

/// Copilot's migrations, in the order they run.
pub const MIGRATIONS: &[Migration] = &[];
