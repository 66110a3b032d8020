//! Every text that tells a person which agents memloop supports names all of them: the GitHub
//! Action, the npm package's README, `memloop --help`, `init --agents`, and any help text that
//! lists agents at all. The list is `AgentId::ALL`, so a new agent cannot be forgotten there.

use std::path::Path;

use memloop::config::AgentId;

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The agents `text` does not name (by the name their makers use, `Claude Code`).
fn unnamed(text: &str) -> Vec<&'static str> {
    AgentId::ALL
        .iter()
        .map(|id| id.name())
        .filter(|name| !text.contains(name))
        .collect()
}

/// The agents named in `text`, by name or by memloop's id (`claude`, as a whole word).
fn named(text: &str) -> Vec<AgentId> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    AgentId::ALL
        .into_iter()
        .filter(|id| text.contains(id.name()) || words.iter().any(|w| w == id.as_str()))
        .collect()
}

#[test]
fn the_github_action_names_every_agent() {
    let missing = unnamed(&read("action.yml"));
    assert!(missing.is_empty(), "action.yml does not name {missing:?}");
}

#[test]
fn the_npm_readme_names_every_agent() {
    let missing = unnamed(&read("npm/memloop/README.md"));
    assert!(
        missing.is_empty(),
        "npm/memloop/README.md does not name {missing:?}"
    );
}

#[test]
fn the_readme_names_every_agent() {
    let missing = unnamed(&read("README.md"));
    assert!(missing.is_empty(), "README.md does not name {missing:?}");
}

#[test]
fn memloop_help_names_every_agent() {
    let help = memloop::cli::command().render_long_help().to_string();
    let missing = unnamed(&help);
    assert!(
        missing.is_empty(),
        "`memloop --help` does not name {missing:?}:\n{help}"
    );
}

#[test]
fn init_agents_lists_every_agent_id() {
    let init = memloop::cli::command()
        .find_subcommand_mut("init")
        .expect("memloop init")
        .render_long_help()
        .to_string();
    let line = init
        .split("--agents")
        .nth(1)
        .expect("init has --agents")
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .to_owned();
    let ids: Vec<String> = line
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_owned)
        .collect();
    for id in AgentId::ALL {
        assert!(
            ids.iter().any(|w| w == id.as_str()),
            "`memloop init --help` does not list {id} under --agents:\n{line}"
        );
    }
}

/// Each help text (a command's about, an option's help) that names three agents or more is a
/// list of agents, and a list of agents names them all.
#[test]
fn every_help_text_that_lists_agents_lists_them_all() {
    let mut partial = Vec::new();
    let mut lists = 0;
    let mut stack = vec![(String::from("memloop"), memloop::cli::command())];
    while let Some((path, mut cmd)) = stack.pop() {
        cmd.build();
        let mut texts: Vec<(String, String)> = Vec::new();
        for about in [cmd.get_about(), cmd.get_long_about()]
            .into_iter()
            .flatten()
        {
            texts.push((path.clone(), about.to_string()));
        }
        for arg in cmd.get_arguments() {
            for help in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                texts.push((format!("{path} --{}", arg.get_id()), help.to_string()));
            }
        }
        for (place, text) in texts {
            let found = named(&text);
            if found.len() >= 3 {
                lists += 1;
                if found.len() < AgentId::ALL.len() {
                    let missing: Vec<&str> = AgentId::ALL
                        .into_iter()
                        .filter(|id| !found.contains(id))
                        .map(AgentId::as_str)
                        .collect();
                    partial.push(format!("{place}: {text:?} leaves out {missing:?}"));
                }
            }
        }
        for sub in cmd.get_subcommands() {
            stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
        }
    }
    assert!(lists >= 2, "the help texts hold no list of agents at all");
    assert!(
        partial.is_empty(),
        "help texts naming only some agents:\n{}",
        partial.join("\n")
    );
}
