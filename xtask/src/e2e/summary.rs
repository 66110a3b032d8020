//! What a run reports at the end: each scenario's result on the versions tried and, for one that
//! failed on a version other than the pin, its result on the pins next to it.

use std::time::Duration;

use super::tools::{AGENTS, Agent};
use super::versions::VersionSet;

/// One scenario's runs on one version set.
#[derive(Debug, Clone)]
pub struct Tally {
    pub name: &'static str,
    pub runs: usize,
    pub passes: usize,
    pub missing: bool,
    pub elapsed: Duration,
}

impl Tally {
    pub fn new(name: &'static str) -> Tally {
        Tally {
            name,
            runs: 0,
            passes: 0,
            missing: false,
            elapsed: Duration::ZERO,
        }
    }

    pub fn passed(&self) -> bool {
        self.passes == self.runs
    }

    pub fn status(&self) -> &'static str {
        if self.passed() {
            "PASS"
        } else if self.missing {
            "MISSING"
        } else {
            "FAIL"
        }
    }

    fn result(&self, repeat: usize) -> String {
        match repeat {
            1 => self.status().to_string(),
            _ => format!(
                "{} ({}/{} runs passed)",
                self.status(),
                self.passes,
                self.runs
            ),
        }
    }
}

/// A scenario's result on the versions tried, with the agents it drives that were not at their
/// pin, and its result on the pins when it was run there too.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub tally: Tally,
    pub moved: Vec<(&'static Agent, String)>,
    pub on_pins: Option<Tally>,
}

impl Outcome {
    pub fn new(tally: Tally, set: &VersionSet) -> Outcome {
        let moved = scenario_agents(tally.name)
            .into_iter()
            .filter_map(|agent| {
                let version = set.get(agent.key)?;
                (version != agent.pin.version).then(|| (agent, version.to_string()))
            })
            .collect();
        Outcome {
            tally,
            moved,
            on_pins: None,
        }
    }

    /// Failed on a version other than its pins: worth running on the pins to compare.
    pub fn needs_pinned_run(&self) -> bool {
        !self.tally.passed() && !self.moved.is_empty()
    }

    /// What to say next to a failed scenario: which versions it broke on, and how the pins did.
    fn blame(&self, repeat: usize) -> String {
        let list = |pick: &dyn Fn(&Agent, &str) -> String| {
            self.moved
                .iter()
                .map(|(a, v)| pick(a, v))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if self.moved.is_empty() {
            return "on the pinned versions".to_string();
        }
        let tried = list(&|a, v| format!("{} {v}", a.key));
        let pins = list(&|a, _| format!("{} {}", a.key, a.pin.version));
        match &self.on_pins {
            Some(pinned) if pinned.passed() => {
                format!(
                    "broke on {tried}; on {pins}: {} (a change in the new version)",
                    pinned.result(repeat)
                )
            }
            Some(pinned) => format!(
                "on {tried}; on {pins}: {} too (not the new version)",
                pinned.result(repeat)
            ),
            None => format!("on {tried}; not run on {pins}"),
        }
    }
}

/// The agents a scenario drives: those its name mentions (`gate-opencode-run`: opencode), all of
/// them when it names none (`doctor-live`, `upgrade-legacy`).
pub fn scenario_agents(name: &str) -> Vec<&'static Agent> {
    let named: Vec<&'static Agent> = AGENTS
        .iter()
        .filter(|a| name.split('-').any(|part| part == a.key))
        .collect();
    match named.is_empty() {
        true => AGENTS.iter().collect(),
        false => named,
    }
}

/// The summary block, one line each.
pub fn lines(
    set: &VersionSet,
    node: &str,
    outcomes: &[Outcome],
    repeat: usize,
    elapsed: Duration,
) -> Vec<String> {
    let mut out = vec![
        format!("== summary ({elapsed:.1?} in all)"),
        format!("   versions tried: {}; node {node}", set.describe()),
    ];
    for outcome in outcomes {
        let t = &outcome.tally;
        let mut line = match repeat {
            1 => format!("   {:<8} {:<24} {:.1?}", t.status(), t.name, t.elapsed),
            _ => format!(
                "   {:<8} {:<24} {}/{} runs passed, {:.1?}",
                t.status(),
                t.name,
                t.passes,
                t.runs,
                t.elapsed
            ),
        };
        if !t.passed() {
            line.push_str("  ");
            line.push_str(&outcome.blame(repeat));
        }
        out.push(line);
    }
    let failed = outcomes.iter().filter(|o| !o.tally.passed()).count();
    let broke: Vec<String> = outcomes
        .iter()
        .filter(|o| o.on_pins.as_ref().is_some_and(Tally::passed) && !o.tally.passed())
        .map(|o| {
            let versions: Vec<String> = o
                .moved
                .iter()
                .map(|(a, v)| format!("{} {v}", a.key))
                .collect();
            format!("{} ({})", o.tally.name, versions.join(", "))
        })
        .collect();
    out.push(format!(
        "   {} of {} scenarios passed",
        outcomes.len() - failed,
        outcomes.len()
    ));
    if !broke.is_empty() {
        out.push(format!(
            "   broke on a new version, pass on the pins: {}",
            broke.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(name: &'static str, runs: usize, passes: usize, secs: f64) -> Tally {
        Tally {
            name,
            runs,
            passes,
            missing: false,
            elapsed: Duration::from_secs_f64(secs),
        }
    }

    fn pin(key: &str) -> &'static str {
        super::super::tools::agent(key).unwrap().pin.version
    }

    #[test]
    fn scenarios_drive_the_agents_they_name_or_all() {
        let keys = |name| {
            scenario_agents(name)
                .iter()
                .map(|a| a.key)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys("gate-opencode-run"), ["opencode"]);
        assert_eq!(keys("probe-codex-gate-exit2"), ["codex"]);
        assert_eq!(keys("config-remote-kimi"), ["kimi"]);
        assert_eq!(keys("doctor-live").len(), AGENTS.len());
        assert_eq!(keys("upgrade-legacy").len(), AGENTS.len());
    }

    #[test]
    fn a_pinned_run_names_its_versions_and_counts() {
        let set = VersionSet::pinned();
        let outcomes = [
            Outcome::new(tally("config-claude", 1, 1, 3.2), &set),
            Outcome::new(tally("gate-kimi", 1, 0, 12.0), &set),
        ];
        assert!(outcomes.iter().all(|o| !o.needs_pinned_run()));
        let lines = lines(&set, "22.23.5", &outcomes, 1, Duration::from_secs(20));
        assert_eq!(lines[0], "== summary (20.0s in all)");
        assert_eq!(
            lines[1],
            format!("   versions tried: {}; node 22.23.5", set.describe())
        );
        assert_eq!(lines[2], "   PASS     config-claude            3.2s");
        assert_eq!(
            lines[3],
            "   FAIL     gate-kimi                12.0s  on the pinned versions"
        );
        assert_eq!(lines[4], "   1 of 2 scenarios passed");
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn a_failure_on_a_new_version_stands_next_to_the_pins() {
        let set = VersionSet::pinned().with("claude", "2.1.999".into());
        let mut broke = Outcome::new(tally("gate-claude", 1, 0, 40.0), &set);
        let mut both = Outcome::new(tally("config-claude", 1, 0, 2.0), &set);
        let unmoved = Outcome::new(tally("gate-kimi", 1, 0, 5.0), &set);
        let everyone = Outcome::new(tally("doctor-live", 1, 0, 9.0), &set);
        assert!(broke.needs_pinned_run() && everyone.needs_pinned_run());
        assert!(
            !unmoved.needs_pinned_run(),
            "kimi is at its pin: its result is the pin's"
        );
        broke.on_pins = Some(tally("gate-claude", 1, 1, 30.0));
        both.on_pins = Some(tally("config-claude", 1, 0, 2.0));
        let passed = Outcome::new(tally("gate-opencode", 1, 1, 8.0), &set);
        let outcomes = [broke, both, unmoved, everyone, passed];
        let lines = lines(&set, "22.23.5", &outcomes, 1, Duration::from_secs(100));
        let claude = pin("claude");
        assert!(lines[1].contains(&format!("claude 2.1.999 (pinned {claude})")));
        assert_eq!(
            lines[2],
            format!(
                "   FAIL     gate-claude              40.0s  broke on claude 2.1.999; \
                 on claude {claude}: PASS (a change in the new version)"
            )
        );
        assert_eq!(
            lines[3],
            format!(
                "   FAIL     config-claude            2.0s  on claude 2.1.999; \
                 on claude {claude}: FAIL too (not the new version)"
            )
        );
        assert!(lines[4].ends_with("on the pinned versions"), "{}", lines[4]);
        assert!(
            lines[5].ends_with(&format!("on claude 2.1.999; not run on claude {claude}")),
            "{}",
            lines[5]
        );
        assert_eq!(lines[6], "   PASS     gate-opencode            8.0s");
        assert_eq!(lines[7], "   1 of 5 scenarios passed");
        assert_eq!(
            lines[8],
            "   broke on a new version, pass on the pins: gate-claude (claude 2.1.999)"
        );
    }

    #[test]
    fn repeated_runs_count_passes_on_both_sides() {
        let set = VersionSet::pinned().with("codex", "0.999.0".into());
        let mut o = Outcome::new(tally("gate-codex", 3, 2, 60.0), &set);
        o.on_pins = Some(tally("gate-codex", 3, 3, 50.0));
        let lines = lines(&set, "22.23.5", &[o], 3, Duration::from_secs(110));
        assert_eq!(
            lines[2],
            format!(
                "   FAIL     gate-codex               2/3 runs passed, 60.0s  broke on codex \
                 0.999.0; on codex {}: PASS (3/3 runs passed) (a change in the new version)",
                pin("codex")
            )
        );
    }
}
