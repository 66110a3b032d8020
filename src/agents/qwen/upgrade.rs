//! What `memloop upgrade` migrates in Qwen Code's files: nothing yet. memloop's first Qwen
//! entries (0.24.4) are the only ones it has written, and they avoid the one format known to
//! have moved under them: a hook's `timeout` (milliseconds once, seconds now, 1000 and more
//! still read as milliseconds) is left out, so Qwen's default applies in every version.

use crate::upgrade::Migration;

pub const MIGRATIONS: &[Migration] = &[];
