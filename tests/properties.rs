//! Properties of the engine over generated files: a second sync changes nothing, and uninstall
//! after sync gives back the original bytes of every file (and removes the ones it created).

use std::path::Path;

use memloop::agents;
use memloop::config::{AgentId, Config};
use memloop::edit::json::{Dialect, JsonDoc};
use memloop::edit::text::Encoding;
use memloop::engine::state::InstallState;
use memloop::engine::{self, Content, Mode, apply::apply};
use memloop::repo::Context;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(Value::from),
        "[a-zA-Z0-9 äß€/._-]{0,12}".prop_map(Value::String),
    ]
}

fn object(depth: u32) -> BoxedStrategy<Value> {
    let keys = prop::sample::select(vec![
        "model",
        "env",
        "permissions",
        "hooks",
        "mcp",
        "mcpServers",
        "plugin",
        "x-tool",
        "theme",
    ]);
    let leaf = scalar().boxed();
    let value = if depth == 0 {
        leaf
    } else {
        prop_oneof![3 => leaf, 1 => object(depth - 1), 1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array)].boxed()
    };
    prop::collection::vec((keys, value), 0..5)
        .prop_map(|pairs| {
            Value::Object(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>(),
            )
        })
        .boxed()
}

/// A user's file as written by hand: some indentation, maybe no final newline, maybe CRLF or BOM.
#[derive(Debug, Clone)]
struct Style {
    indent: &'static str,
    final_newline: bool,
    crlf: bool,
    bom: bool,
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop::sample::select(vec!["  ", "    ", "\t"]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(indent, final_newline, crlf, bom)| Style {
            indent,
            final_newline,
            crlf,
            bom,
        })
}

fn render_json(value: &Value, style: &Style) -> Vec<u8> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(style.indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(value, &mut ser).unwrap();
    finish(String::from_utf8(out).unwrap(), style)
}

fn finish(mut text: String, style: &Style) -> Vec<u8> {
    if style.final_newline && !text.ends_with('\n') {
        text.push('\n');
    }
    if style.crlf {
        text = text.replace('\n', "\r\n");
    }
    let mut bytes = if style.bom {
        vec![0xef, 0xbb, 0xbf]
    } else {
        Vec::new()
    };
    bytes.extend(text.into_bytes());
    bytes
}

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "# [A-Za-z ]{1,20}",
            "[a-zäöü€ .,`*-]{0,40}",
            Just(String::new()),
            Just("```sh".to_owned())
        ],
        0..8,
    )
    .prop_map(|lines| lines.join("\n"))
}

fn files() -> impl Strategy<Value = Vec<(&'static str, Vec<u8>)>> {
    let settings = (object(2), style())
        .prop_map(|(v, s)| render_json(&unless_object(without(v, "hooks"), "permissions"), &s));
    let mcp = (object(1), style()).prop_map(|(v, s)| render_json(&without(v, "mcpServers"), &s));
    let opencode = (object(1), style()).prop_map(|(v, s)| render_json(&without(v, "mcp"), &s));
    let claude_md = (markdown(), style()).prop_map(|(text, s)| finish(text, &s));
    (
        prop::option::of(settings),
        prop::option::of(mcp),
        prop::option::of(opencode),
        prop::option::of(claude_md),
    )
        .prop_map(|(settings, mcp, opencode, claude_md)| {
            [
                (".claude/settings.json", settings),
                (".mcp.json", mcp),
                ("opencode.json", opencode),
                ("CLAUDE.md", claude_md),
            ]
            .into_iter()
            .filter_map(|(path, bytes)| bytes.map(|b| (path, b)))
            .collect()
        })
}

/// The same for a member memloop adds into (`permissions.allow`): a user's object stays.
fn unless_object(mut value: Value, key: &str) -> Value {
    if let Value::Object(map) = &mut value
        && map.get(key).is_some_and(|v| !v.is_object())
    {
        map.remove(key);
    }
    value
}

/// memloop refuses a non-object where it must add a member; keep generated files editable.
fn without(mut value: Value, key: &str) -> Value {
    if let Value::Object(map) = &mut value {
        map.remove(key);
    }
    value
}

fn plan(root: &Path, config: &Config, mode: Mode, state: &InstallState) -> Vec<engine::Change> {
    try_plan(root, config, mode, state).unwrap()
}

fn try_plan(
    root: &Path,
    config: &Config,
    mode: Mode,
    state: &InstallState,
) -> Result<Vec<engine::Change>, engine::PlanError> {
    let ctx = Context {
        root,
        config,
        server: config.server().unwrap(),
        home: root.join("home"),
        user_scope: false,
        trusted: false,
    };
    let wanted = agents::wanted(&ctx).unwrap();
    let originals = |path: &Path| state.original(path);
    engine::plan(root, &wanted.targets, mode, &originals)
}

fn read_all(root: &Path, names: &[&str]) -> Vec<Option<Vec<u8>>> {
    names
        .iter()
        .map(|name| std::fs::read(root.join(name)).ok())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn sync_is_idempotent_and_uninstall_restores_bytes(files in files()) {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        for (name, bytes) in &files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        let names = [".claude/settings.json", ".mcp.json", "opencode.json", "CLAUDE.md", "AGENTS.md", ".kimi-code/mcp.json"];
        let before = read_all(&root, &names);
        let config = Config { agents: vec![AgentId::Claude, AgentId::Opencode, AgentId::Kimi], ..Config::default() };
        let mut state = InstallState::default();

        let first = match try_plan(&root, &config, Mode::Install, &state) {
            Ok(first) => first,
            // The one refusal these files can earn: a block appended after a fence never closed
            // would be code. Nothing may have been written.
            Err(engine::PlanError::Refused(refusals)) => {
                prop_assert!(refusals.iter().all(|r| r.problem.contains("code fence is never closed")), "{refusals:?}");
                prop_assert_eq!(read_all(&root, &names), before);
                return Ok(());
            }
            Err(engine::PlanError::Other(err)) => panic!("{err:#}"),
        };
        apply(&first, &mut state).unwrap();
        let installed = read_all(&root, &names);

        let second = plan(&root, &config, Mode::Install, &state);
        prop_assert!(second.iter().all(|c| c.is_noop()), "second sync would change {:?}",
            second.iter().filter(|c| !c.is_noop()).map(|c| &c.target.display).collect::<Vec<_>>());
        prop_assert_eq!(&read_all(&root, &names), &installed);

        let mut removal = plan(&root, &config, Mode::Remove, &state);
        for change in &mut removal {
            if let Some(original) = state.original(&change.write_path)
                && state.unchanged_since_write(&change.write_path, &change.before)
            {
                change.after = original;
            }
        }
        apply(&removal, &mut state).unwrap();
        prop_assert_eq!(read_all(&root, &names), before);
    }

    #[test]
    fn surgical_removal_keeps_every_foreign_byte_of_json_members(value in object(2), style in style()) {
        let value_of = |bytes: &[u8]| -> Value {
            serde_json::from_str(String::from_utf8_lossy(bytes).trim_start_matches('\u{feff}')).unwrap()
        };
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let original = render_json(&without(value, "mcpServers"), &style);
        std::fs::write(root.join(".mcp.json"), &original).unwrap();
        let config = Config { agents: vec![AgentId::Claude], ..Config::default() };
        let mut state = InstallState::default();
        apply(&plan(&root, &config, Mode::Install, &state), &mut state).unwrap();
        // Another machine: nothing recorded, memloop parses its fragments back out.
        let forgotten = InstallState::default();
        let removal = plan(&root, &config, Mode::Remove, &forgotten);
        let mcp = removal.iter().find(|c| c.target.display == ".mcp.json").unwrap();
        // Only memloop's member goes: a parent it emptied may have been the user's, so it stays,
        // where memloop's install put it.
        let (text, encoding) = Encoding::decode(&original, ".mcp.json").unwrap();
        let mut with_parent = JsonDoc::parse(&text, Dialect::Strict, ".mcp.json").unwrap();
        with_parent.set(&["mcpServers".to_owned()], &Value::Object(Map::new())).unwrap();
        let expected = Content::File {
            text: String::from_utf8(encoding.encode(&with_parent.to_text())).unwrap(),
        };
        // A file memloop would have written from nothing goes.
        let held_nothing = value_of(&original).as_object().is_some_and(Map::is_empty);
        if !held_nothing {
            prop_assert_eq!(&mcp.after, &expected);
        }
    }
}
