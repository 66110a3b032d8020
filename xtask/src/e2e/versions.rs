//! Which agent versions a run drives: the pins (tools::AGENTS), the registry's newest
//! (`--latest`), or the ones named on the command line (`--versions claude=2.1.330,codex=latest`).

use anyhow::{Result, bail};

use super::tools::{self, AGENTS, Agent};

/// One version per agent of `tools::AGENTS`, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSet {
    versions: Vec<String>,
}

/// What `--versions` asks for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Exact(String),
    /// The registry's `latest` tag, resolved before anything is installed.
    Latest,
}

impl VersionSet {
    pub fn pinned() -> VersionSet {
        VersionSet {
            versions: AGENTS.iter().map(|a| a.pin.version.to_string()).collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static Agent, &str)> {
        AGENTS.iter().zip(self.versions.iter().map(String::as_str))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(a, _)| a.key == key).map(|(_, v)| v)
    }

    /// This set with `key` at `version`.
    pub fn with(mut self, key: &str, version: String) -> VersionSet {
        if let Some(i) = AGENTS.iter().position(|a| a.key == key) {
            self.versions[i] = version;
        }
        self
    }

    /// `claude 2.1.332 (pinned 2.1.328), opencode 1.18.33 (the pin), ...`
    pub fn describe(&self) -> String {
        self.iter()
            .map(|(a, v)| match v == a.pin.version {
                true => format!("{} {v} (the pin)", a.key),
                false => format!("{} {v} (pinned {})", a.key, a.pin.version),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The name of this set's PATH dir: every program and Node with its version.
    pub fn dir_name(&self, node: &str) -> String {
        let mut parts: Vec<String> = self.iter().map(|(a, v)| format!("{}@{v}", a.key)).collect();
        parts.push(format!("node@{node}"));
        parts.join("+")
    }
}

/// `claude=2.1.330,codex=latest`: the agents named, each once, at an exact version or `latest`.
pub fn parse(spec: &str) -> Result<Vec<(&'static Agent, Wanted)>> {
    let keys = || AGENTS.iter().map(|a| a.key).collect::<Vec<_>>().join(", ");
    let mut wanted: Vec<(&'static Agent, Wanted)> = Vec::new();
    for item in spec.split(',').map(str::trim) {
        if item.is_empty() {
            bail!("--versions {spec:?}: an empty entry; write AGENT=VERSION[,AGENT=VERSION...]");
        }
        let Some((key, version)) = item.split_once('=') else {
            bail!("--versions: {item:?} is not AGENT=VERSION (e.g. claude=2.1.330)");
        };
        let (key, version) = (key.trim(), version.trim());
        let Some(agent) = tools::agent(key) else {
            if key == "node" {
                bail!(
                    "--versions: node is pinned on its own (tools::NODE), not per run; agents: {}",
                    keys()
                );
            }
            bail!("--versions: no agent {key:?}; agents: {}", keys());
        };
        if wanted.iter().any(|(a, _)| a.key == key) {
            bail!("--versions: {key} is named twice");
        }
        let version = match version {
            "latest" => Wanted::Latest,
            v if is_version(v) => Wanted::Exact(v.to_string()),
            v => bail!(
                "--versions: {key}={v:?} is not a version (MAJOR.MINOR.PATCH[-pre], or latest)"
            ),
        };
        wanted.push((agent, version));
    }
    Ok(wanted)
}

/// `2.1.332`, `0.172.0-alpha.3`: what npm publishes (and nothing a shell or a path would mind).
pub fn is_version(text: &str) -> bool {
    let (core, rest) = match text.split_once(['-', '+']) {
        Some((core, rest)) => (core, Some(rest)),
        None => (text, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && rest.is_none_or(|r| {
            !r.is_empty()
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
        })
}

/// The set a run drives: every agent at the registry's newest with `latest`, else at its pin;
/// then what `--versions` names. `newest` asks the registry (`tools::registry_version`).
pub fn resolve(
    latest: bool,
    wanted: &[(&'static Agent, Wanted)],
    newest: &dyn Fn(&Agent) -> Result<String>,
) -> Result<VersionSet> {
    let mut set = VersionSet::pinned();
    for agent in AGENTS {
        let named = wanted.iter().find(|(a, _)| a.key == agent.key);
        let version = match named {
            Some((_, Wanted::Exact(v))) => v.clone(),
            Some((_, Wanted::Latest)) => newest(agent)?,
            None if latest => newest(agent)?,
            None => continue,
        };
        set = set.with(agent.key, version);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin(key: &str) -> &'static str {
        tools::agent(key).unwrap().pin.version
    }

    #[test]
    fn parses_agent_versions() {
        let wanted = parse("claude=2.1.330, codex=latest,kimi=2.2.0-beta.1").unwrap();
        let got: Vec<(&str, Wanted)> = wanted.into_iter().map(|(a, w)| (a.key, w)).collect();
        assert_eq!(
            got,
            [
                ("claude", Wanted::Exact("2.1.330".into())),
                ("codex", Wanted::Latest),
                ("kimi", Wanted::Exact("2.2.0-beta.1".into())),
            ]
        );
    }

    #[test]
    fn refuses_what_is_not_a_version_spec() {
        for (spec, says) in [
            (
                "claud=2.1.330",
                "no agent \"claud\"; agents: claude, opencode",
            ),
            ("node=24.0.0", "node is pinned on its own"),
            ("claude=2.1.330,claude=2.1.331", "claude is named twice"),
            ("claude", "not AGENT=VERSION"),
            ("claude=2.1", "is not a version"),
            ("claude=^2.1.330", "is not a version"),
            ("claude=2.1.330;rm", "is not a version"),
            ("claude=2.1.330,", "an empty entry"),
            ("", "an empty entry"),
        ] {
            let err = parse(spec).unwrap_err().to_string();
            assert!(err.contains(says), "{spec:?}: {err}");
        }
    }

    #[test]
    fn versions_are_what_npm_publishes() {
        for ok in [
            "2.1.332",
            "0.171.0",
            "1.0.0-alpha.3",
            "1.2.3+build.5",
            "22.23.5",
        ] {
            assert!(is_version(ok), "{ok}");
        }
        for bad in [
            "",
            "2.1",
            "2.1.x",
            "v2.1.3",
            "2..3",
            "1.2.3-",
            "1.2.3-a/b",
            "latest",
        ] {
            assert!(!is_version(bad), "{bad}");
        }
    }

    #[test]
    fn latest_asks_the_registry_for_every_agent_unless_named() {
        let newest = |a: &Agent| Ok(format!("9.9.{}", a.key.len()));
        let wanted = parse("codex=0.170.0").unwrap();
        let set = resolve(true, &wanted, &newest).unwrap();
        assert_eq!(set.get("claude"), Some("9.9.6"));
        assert_eq!(set.get("opencode"), Some("9.9.8"));
        assert_eq!(set.get("codex"), Some("0.170.0"));
        assert!(set.iter().all(|(a, v)| v != a.pin.version));
    }

    #[test]
    fn versions_alone_keep_the_other_pins_and_never_ask_the_registry() {
        let offline = |a: &Agent| -> Result<String> { bail!("asked the registry for {}", a.key) };
        let set = resolve(false, &parse("claude=2.1.330").unwrap(), &offline).unwrap();
        assert_eq!(set.get("claude"), Some("2.1.330"));
        assert_eq!(set.get("kimi"), Some(pin("kimi")));
        let moved: Vec<_> = set
            .iter()
            .filter(|(a, v)| *v != a.pin.version)
            .map(|(a, v)| (a.key, v))
            .collect();
        assert_eq!(moved, [("claude", "2.1.330")]);
        assert_eq!(resolve(false, &[], &offline).unwrap(), VersionSet::pinned());

        let newest = |_: &Agent| Ok("2.1.999".to_string());
        let set = resolve(false, &parse("claude=latest").unwrap(), &newest).unwrap();
        assert_eq!(set.get("claude"), Some("2.1.999"));
        assert_eq!(set.get("codex"), Some(pin("codex")));
    }

    #[test]
    fn sets_describe_themselves_against_the_pins() {
        let set = VersionSet::pinned().with("claude", "2.1.999".into());
        let text = set.describe();
        assert!(
            text.starts_with(&format!("claude 2.1.999 (pinned {}), ", pin("claude"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("kimi {} (the pin)", pin("kimi"))),
            "{text}"
        );
        let dir = set.dir_name("22.0.0");
        assert!(dir.starts_with("claude@2.1.999+opencode@"), "{dir}");
        assert!(dir.ends_with("+node@22.0.0"), "{dir}");
        assert_ne!(dir, VersionSet::pinned().dir_name("22.0.0"));
    }
}
