//! Which agent programs are installed, and which version. `--version` of a Node program costs
//! hundreds of milliseconds, so answers are cached per binary (path, size, modification time).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The first line `program --version` prints, if the program is on PATH.
pub fn installed_version(program: &str) -> Option<String> {
    let path = which::which(program).ok()?;
    let key = CacheKey::of(&path)?;
    let cache_path = crate::files::state_dir().ok()?.join("versions.json");
    let mut cache: BTreeMap<String, Cached> = crate::files::read_regular(&cache_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    let id = path.display().to_string();
    if let Some(hit) = cache.get(&id).filter(|hit| hit.key == key) {
        return Some(hit.version.clone());
    }
    let version = run_version(&path)?;
    cache.insert(
        id,
        Cached {
            key,
            version: version.clone(),
        },
    );
    if let Ok(text) = serde_json::to_vec_pretty(&cache) {
        let _ = crate::files::write_private(&cache_path, &text);
    }
    Some(version)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CacheKey {
    len: u64,
    modified_ns: u128,
}

impl CacheKey {
    fn of(path: &Path) -> Option<CacheKey> {
        let meta = std::fs::metadata(path).ok()?;
        let modified_ns = meta
            .modified()
            .ok()?
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_nanos();
        Some(CacheKey {
            len: meta.len(),
            modified_ns,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cached {
    key: CacheKey,
    version: String,
}

fn run_version(path: &PathBuf) -> Option<String> {
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().ok()?;
    // Pi 0.73 prints its version on stderr.
    [&output.stdout, &output.stderr]
        .into_iter()
        .find_map(|bytes| {
            String::from_utf8_lossy(bytes)
                .lines()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .map(str::to_owned)
        })
}
